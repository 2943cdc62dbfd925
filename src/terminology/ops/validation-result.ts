import { conceptStatus, deprecatedConceptFound, inactiveConceptFound, type Member, type TxIssue, txIssue } from '../compile/membership.ts';
import type { CheckedCoding } from '../input/subject.ts';
import type { CodeableConcept } from '../model/datatypes.ts';
import { checkPrimitive } from '../../fhir/validation/primitives.ts';
import type { ConceptDefinition } from '../model/code-system.ts';
import { standardsStatus } from '../model/datatypes.ts';
import type { CodeSystemIndex, ConceptEntry } from '../compile/code-system-index.ts';
import { displayIn, inLanguages, languagesOf } from './display-language.ts';
import { supplementDesignations } from './supplements.ts';
import { TX_ISSUE_TYPE } from '../errors.ts';

/** A finding located at the input element it is about (`code`, `Coding.code`, `CodeableConcept.coding[1].code`). */
export interface LocatedIssue extends TxIssue {
  readonly expression?: string;
}

/** The outcome of $validate-code: output parameters `result`, `display`, `message` and `issues`. */
export interface ValidationResult {
  readonly result: boolean;
  readonly display?: string;
  /** Why the result is false, and warnings: one `message` of their texts, and the `issues` OperationOutcome. */
  readonly issues: readonly LocatedIssue[];
  /** The code systems (`url` or `url|version`) the server does not have that caused a false answer: `x-caused-by-unknown-system`. */
  readonly causedByUnknownSystems?: readonly string[];
  /** The coding's code system, unknown, when the value set does not use it: `x-unknown-system`. */
  readonly unknownSystems?: readonly string[];
  /**
   * The coding validated, as HL7's reference servers (and R5) echo it: `code`, `system`, and `version`, the
   * version of the CodeSystem the answer looked the code up in.
   */
  readonly coding?: EchoedCoding;
  /** The code is inactive in its CodeSystem: `inactive` true (R5's output, as the reference servers give it). */
  readonly inactive?: true;
  /**
   * The status of a code whose use should be reviewed, as the reference servers answer it beside `inactive`:
   * its `status` property (concept-properties#status: `retired`, `deprecated`...) when that makes it inactive
   * or deprecated, else its standards-status extension (`deprecated`, `withdrawn`); see statusOf.
   */
  readonly status?: string;
  /** The CodeableConcept validated, echoed as `codeableConcept` (as the reference servers and R5 do). */
  readonly codeableConcept?: CodeableConcept;
  /**
   * The code as its case-insensitive CodeSystem has it, where the coding's differs in case: `normalized-code`, as the
   * reference servers give it beside CODE_CASE_DIFFERENCE.
   */
  readonly normalizedCode?: string;
}

export interface EchoedCoding {
  readonly code: string;
  readonly system?: string | undefined;
  readonly version?: string | undefined;
}

/**
 * The echo of a coding (`code`, `system`, `version`), or nothing when its code or system is not a valid FHIR
 * `code` or `uri` (leading or trailing whitespace, say): the answer must stay valid FHIR.
 */
export function echoed(code: string | undefined, system: string | undefined, version: string | undefined): { coding?: EchoedCoding } {
  if (code === undefined || checkPrimitive('code', code) !== undefined) return {};
  if (system !== undefined && checkPrimitive('uri', system) !== undefined) return {};
  return { coding: { code, system, version } };
}


/**
 * `issues` located at `expression` (the input element of the code), unless they are already located;
 * a finding about the display at the display beside it (`display`, `Coding.display`,
 * `CodeableConcept.coding[1].display`), as the reference servers locate it.
 */
export function locate(issues: readonly TxIssue[], expression: string | undefined): LocatedIssue[] {
  return issues.map((i) => ('expression' in i || expression === undefined ? i : { ...i, expression: siteBeside(i, expression) }));
}

/** Where a finding about the code at `codePath` is located: the display beside it, the coding that holds it (atCoding), or the code. */
export function siteBeside(i: TxIssue, codePath: string): string {
  if (aboutDisplay(i)) return displayBeside(codePath);
  return i.atCoding === true ? codingOf(codePath) : codePath;
}

/** The coding a code path is in (`Coding.code` → `Coding`); the `code` input is its own coding. */
const codingOf = (codePath: string) => (codePath.endsWith('.code') ? codePath.slice(0, -'.code'.length) : codePath);

const aboutDisplay = (i: TxIssue) => i.type === 'invalid-display' || i.type === 'display-comment';
const displayBeside = (codePath: string) => (codePath.endsWith('code') ? `${codePath.slice(0, -'code'.length)}display` : codePath);

/**
 * Renders a validation result as the $validate-code output Parameters, as JSON text: `result`, `message`
 * (the texts of the findings, errors first), `display`, and `issues` (an OperationOutcome with one issue
 * per finding, its tx-issue-type in `details.coding`), as the reference terminology servers answer.
 *
 * Written as text rather than built as objects for JSON.stringify: this is the answer of the hottest
 * terminology route, and stringifying its nested objects cost several times the check itself. Results
 * are immutable, and a kept one (validate-value-set-code.ts) is rendered once.
 */
export function validationParametersJson(r: ValidationResult): string {
  let json = rendered.get(r);
  if (json === undefined) rendered.set(r, (json = render(r)));
  return json;
}

const rendered = new WeakMap<ValidationResult, string>();

function render(r: ValidationResult): string {
  let json = r.result ? '{"resourceType":"Parameters","parameter":[{"name":"result","valueBoolean":true}' : '{"resourceType":"Parameters","parameter":[{"name":"result","valueBoolean":false}';
  const issues = r.issues.length < 2 ? r.issues : ordered(r.issues);
  const texts = issues.map((i) => jsonString(i.text));
  const message = messageOf(issues);
  if (message !== undefined) json += `,{"name":"message","valueString":${jsonString(message)}}`;
  if (r.display !== undefined) json += `,{"name":"display","valueString":${jsonString(r.display)}}`;
  if (r.coding !== undefined) {
    json += `,{"name":"code","valueCode":${jsonString(r.coding.code)}}`;
    if (r.coding.system !== undefined) json += `,{"name":"system","valueUri":${jsonString(r.coding.system)}}`;
    if (r.coding.version !== undefined) json += `,{"name":"version","valueString":${jsonString(r.coding.version)}}`;
  }
  if (r.inactive === true) json += ',{"name":"inactive","valueBoolean":true}';
  if (r.status !== undefined) json += `,{"name":"status","valueCode":${jsonString(r.status)}}`;
  if (r.normalizedCode !== undefined) json += `,{"name":"normalized-code","valueCode":${jsonString(r.normalizedCode)}}`;
  if (r.codeableConcept !== undefined) json += `,{"name":"codeableConcept","valueCodeableConcept":${JSON.stringify(r.codeableConcept)}}`;
  if (issues.length > 0) {
    json += ',{"name":"issues","resource":{"resourceType":"OperationOutcome","issue":[';
    for (let n = 0; n < issues.length; n++) {
      const i = issues[n]!;
      // severity, code and type are fixed vocabularies (TxIssue): no escaping needed.
      // A message id is a catalogue key (letters, digits, underscores): no escaping needed either.
      const id = i.messageId === undefined ? '' : `"extension":[{"url":"${MESSAGE_ID}","valueString":"${i.messageId}"}],`;
      json += `${n === 0 ? '' : ','}{${id}"severity":"${i.severity}","code":"${i.code}","details":{"coding":[{"system":"${TX_ISSUE_TYPE}","code":"${i.type}"}],"text":${texts[n]}}`;
      json += i.expression === undefined ? '}' : `,"expression":[${jsonString(i.expression)}]}`;
    }
    json += ']}}';
  }
  for (const c of r.causedByUnknownSystems ?? []) json += `,{"name":"x-caused-by-unknown-system","valueCanonical":${jsonString(c)}}`;
  for (const c of r.unknownSystems ?? []) json += `,{"name":"x-unknown-system","valueCanonical":${jsonString(c)}}`;
  return `${json}]}`;
}

/**
 * The `message` output, as the reference servers write it: the texts of the findings about the code (not the notes
 * on the status of the code systems and value sets used, `status-check` information, which only `issues` lists),
 * each once, in alphabetical order, joined by '; '; none without them.
 */
function messageOf(issues: readonly LocatedIssue[]): string | undefined {
  const texts = [...new Set(issues.filter((i) => i.severity === 'error' || (MESSAGED.has(i.type) && !UNMESSAGED.has(i.messageId)) || MESSAGED_IDS.has(i.messageId)).map((i) => i.text))];
  if (texts.length === 0) return undefined;
  return texts.length === 1 ? texts[0] : texts.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).join('; ');
}

/** The extension naming the catalogue message an issue is (HL7's tooling extension, as the reference servers give it). */
const MESSAGE_ID = 'http://hl7.org/fhir/StructureDefinition/operationoutcome-message-id';

/** The findings short of an error that the message repeats: about the concept's status and the display (tx.fhir.org's). */
const MESSAGED: ReadonlySet<TxIssue['type']> = new Set(['code-comment', 'display-comment', 'invalid-display']);
/**
 * Of those, the ones it does not, which `issues` alone gives: a concept's presence in the value set marked deprecated, and
 * a display that is a deprecated or withdrawn designation (HL7's validator returns it as an issue of a valid answer).
 */
const UNMESSAGED: ReadonlySet<string | undefined> = new Set(['CONCEPT_DEPRECATED_IN_VALUESET', 'INACTIVE_DISPLAY_FOUND']);
/** Other warnings the message repeats: a coding without a system. */
const MESSAGED_IDS: ReadonlySet<string | undefined> = new Set(['Coding_has_no_system__cannot_validate']);

/** A string as JSON text: quoted as it is unless it holds a character JSON escapes (then as JSON.stringify writes it). */
function jsonString(s: string): string {
  return ESCAPED.test(s) ? JSON.stringify(s) : `"${s}"`;
}
/** What JSON.stringify escapes: quote, backslash, control characters, and surrogates (escaped when unpaired). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

const STANDARDS_STATUS = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status';

/** The fields of a CodeSystem or ValueSet that say how ready it is for use. */
export interface StatusFields {
  readonly url?: string | undefined;
  readonly version?: string | undefined;
  readonly status?: string | undefined;
  readonly experimental?: boolean | undefined;
  readonly extension?: readonly { url: string; valueCode?: string | undefined }[] | undefined;
}

/** What a terminology resource's use should be noted for: draft, experimental, retired, deprecated or withdrawn; undefined when none. */
/** The status of a CodeSystem or ValueSet that answers note (statusCheck, $expand's `warning-<status>`); undefined: none. */
export function noteworthyStatus(r: StatusFields): string | undefined {
  const standards = r.extension?.find((e) => e.url === STANDARDS_STATUS)?.valueCode;
  if (standards === 'deprecated' || standards === 'withdrawn') return standards;
  if (r.status === 'draft' || r.status === 'retired') return r.status;
  return r.experimental === true ? 'experimental' : undefined;
}

/** Information that the answer relied on a draft, experimental, retired, deprecated or withdrawn CodeSystem or ValueSet; undefined when it did not. */
export function statusCheck(kind: 'CodeSystem' | 'ValueSet', resource: StatusFields): TxIssue | undefined {
  let found = checked.get(resource);
  if (found === undefined) {
    const status = noteworthyStatus(resource);
    found = status === undefined || resource.url === undefined
      ? null
      : txIssue('information', 'business-rule', 'status-check', `Reference to ${status} ${kind} ${resource.url}${resource.version === undefined ? '' : `|${resource.version}`}`, `MSG_${status.toUpperCase()}`);
    checked.set(resource, found);
  }
  return found ?? undefined;
}

/** statusCheck's answer per resource (they are immutable once parsed), so the steady state allocates nothing. */
const checked = new WeakMap<StatusFields, TxIssue | null>();

/** Errors first, then warnings, then information; each finding once. */
function ordered(issues: readonly LocatedIssue[]): LocatedIssue[] {
  const seen = new Set<string>();
  return [...issues]
    .sort((a, b) => rank(a.severity) - rank(b.severity))
    .filter((i) => !seen.has(i.text + i.expression) && seen.add(i.text + i.expression));
}

function rank(severity: TxIssue['severity']): number {
  return severity === 'error' ? 0 : severity === 'warning' ? 1 : 2;
}

/** The inputs that decide how a member is finished (R4 $validate-code `abstract`, `displayLanguage`). */
export interface Finish {
  readonly abstract?: boolean | undefined;
  readonly displayLanguage?: string | undefined;
  /** The supplements the ValueSet names: their designations count as the concepts' own. */
  readonly supplements?: readonly CodeSystemIndex[] | undefined;
  /** The ValueSet validated against, as HL7's messages name it (`'url|version'`); undefined: CodeSystem/$validate-code. */
  readonly valueSet?: string | undefined;
}

/**
 * Finishes validation of a member: abstract codes are invalid when `abstract` is false,
 * inactive codes are valid with a warning, and a given display must equal the concept's display
 * or one of its designations exactly (R4 $validate-code `display`, `abstract`). The output
 * display is the CodeSystem's, in `displayLanguage` when a designation in it exists.
 */
export function finishMember(m: Member, coding: CheckedCoding, finish: Finish): ValidationResult {
  const { abstract, displayLanguage } = finish;
  const issues: TxIssue[] = [...m.warnings];
  const label = `'${m.code}' (${m.system})`;
  const normalized = m.entry !== undefined && m.entry.code !== coding.code ? { normalizedCode: m.entry.code } : {};
  if (m.entry !== undefined && m.entry.code !== coding.code) {
    issues.push(txIssue('information', 'business-rule', 'code-rule', `The code '${coding.code}' differs from the correct code '${m.code}' by case. Although the code system '${m.system}${m.cs?.version === undefined ? '' : `|${m.cs.version}`}' is case insensitive, implementers are strongly encouraged to use the correct case anyway`, 'CODE_CASE_DIFFERENCE'));
  }
  if (abstract === false && m.abstract) {
    issues.push(txIssue('error', 'business-rule', 'code-rule', `Code '${m.system}#${m.code}' is abstract, and not allowed in this context`, 'ABSTRACT_CODE_NOT_ALLOWED'));
    // In a value set, HL7's None_of_the_provided_codes_are_in_the_value_set_one, as the reference servers answer.
    issues.push(finish.valueSet === undefined
      ? txIssue('error', 'code-invalid', 'not-in-vs', `The abstract code ${label} is not a valid choice here`)
      : txIssue('error', 'code-invalid', 'not-in-vs', `The provided code '${m.system}#${coding.code}' was not found in the value set ${finish.valueSet}`, 'None_of_the_provided_codes_are_in_the_value_set_one'));
  }
  // HL7's INACTIVE_CONCEPT_FOUND and DEPRECATED_CONCEPT_FOUND, as the reference servers word and locate them.
  if (m.inactive) issues.push(inactiveConceptFound(coding.code, conceptStatus(m.entry)));
  else if (m.entry?.deprecated === true) issues.push(deprecatedConceptFound(coding.code));
  const extra = supplementDesignations(finish.supplements, m.system, m.cs?.version, m.code);
  const own = m.entry?.definition;
  const definition = own === undefined || extra.length === 0 ? own : { ...own, designation: [...(own.designation ?? []), ...extra] };
  if (coding.display !== undefined) {
    const languages = languagesOf(displayLanguage);
    // Each display with its language: the concept's own in the CodeSystem's, its designations in theirs, the value set's in none said.
    const own: Shown[] = definition?.display === undefined ? [] : [{ value: definition.display, language: m.cs?.language }];
    const designations: Shown[] = (definition?.designation ?? []).map((d) => ({ value: d.value, language: d.language }));
    const listed: Shown[] = m.displays.map((value) => ({ value, language: undefined }));
    // An older included version's displays are valid, but the message lists the latest version's alone.
    const older: Shown[] = (m.olderDisplays ?? []).map((value) => ({ value, language: undefined }));
    const all = [...own, ...designations, ...listed, ...older];
    const known = all.map((s) => s.value);
    // With languages asked for, the display must be one in those languages (the concept's own display
    // counts in the CodeSystem's language, or in any when the CodeSystem states none).
    const inLanguage = (s: Shown) => s.language === undefined || inLanguages(s.language, languages);
    const wanted = languages.length === 0 ? all : [...own.filter(inLanguage), ...designations.filter(inLanguage), ...listed, ...older];
    const inWanted = wanted.map((s) => s.value);
    if (known.length === 0) {
      issues.push(txIssue('warning', 'invalid', 'display-comment', `No display is known for the code ${label}, so the display '${coding.display}' was not checked`));
    } else if (inWanted.length === 0 && known.includes(coding.display)) {
      // Nothing in the languages asked for: a display of the default language is accepted, as the reference servers do.
      // HL7's NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_OK, as tx.fhir.org words it.
      issues.push(txIssue('information', 'invalid', 'invalid-display', `There are no valid display names found for the code ${m.system}#${m.code} for language(s) '${languages.join(',')}'. The display is '${coding.display}' which is a valid display for the default language`, 'NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_OK'));
    } else if (!inWanted.includes(coding.display)) {
      const fallback = wanted.length === 0 ? definition?.display : undefined;
      // HL7's Display_Name_WS_ variant when the display differs from a valid one only in its whitespace.
      const spaced = (v: string) => v.trim().replace(/\s+/g, ' ');
      const given = spaced(coding.display);
      const ws = inWanted.some((v) => spaced(v) === given);
      const id = fallback !== undefined ? 'NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_ERR' : ws ? 'Display_Name_WS_for__should_be_one_of__instead_of' : 'Display_Name_for__should_be_one_of__instead_of';
      const valid = (wanted.length > 0 ? wanted : all).filter((s) => !older.includes(s));
      issues.push(txIssue('error', 'invalid', 'invalid-display', wrongDisplay(coding.display, m, valid.length > 0 ? valid : all, languages, fallback), id));
    } else {
      const status = retiredStatus(definition, m.displays, coding.display);
      if (status !== undefined) {
        // The displays still correct: not an older version's, nor another retired designation.
        const current = wanted.filter((s) => !older.includes(s) && retiredStatus(definition, m.displays, s.value) === undefined);
        issues.push(inactiveDisplayFound(coding.display, m.code, status, current.map((s) => s.value)));
      }
    }
  }
  const display = definition === undefined ? undefined : displayIn(definition, m.cs?.language, displayLanguage);
  const result = !issues.some((i) => i.severity === 'error');
  return { result, display: display ?? m.displays[0], ...(m.inactive ? { inactive: true } : {}), ...statusOf(m.entry), ...normalized, issues };
}

/** A display of a concept, with the language it is in when known. */
interface Shown {
  readonly value: string;
  readonly language: string | undefined;
}

/**
 * HL7's Display_Name_for__should_be_one_of__instead_of (and NO_VALID_DISPLAY_FOUND_NONE_FOR_LANG_ERR when nothing is
 * in the languages asked for): the display given, the valid ones with their languages, and the languages asked for
 * (`--` for none), as the reference servers word it.
 */
function wrongDisplay(given: string, m: Member, valid: readonly Shown[], languages: readonly string[], fallback: string | undefined): string {
  const asked = languages.length === 0 ? '--' : languages.join(',');
  const head = `Wrong Display Name '${given}' for ${m.system}#${m.code}.`;
  if (fallback !== undefined) return `${head} There are no valid display names found for language(s) '${asked}'. Default display is '${fallback}'`;
  const seen = new Set<string>();
  const choices: string[] = [];
  for (const s of valid) {
    const text = `'${s.value}'${s.language === undefined ? '' : ` (${s.language})`}`;
    if (seen.has(text)) continue;
    seen.add(text);
    choices.push(text);
  }
  const list = choices.length === 1 ? `is ${choices[0]}` : `is one of ${choices.length} choices: ${choices.slice(0, -1).join(', ')} or ${choices[choices.length - 1]}`;
  return `${head} Valid display ${list} (for the language(s) '${asked}')`;
}

/**
 * The `status` output of a concept, as the reference servers give it: said only of a concept whose use should
 * be reviewed (inactive or deprecated), its `status` property (`retired`, `deprecated`, LOINC's `DISCOURAGED`),
 * else its standards-status extension (`deprecated`, `withdrawn`); nothing for an active concept's status
 * (`A` in a CodeSystem's own vocabulary), or a property value that is not a valid FHIR `code` (the answer
 * must stay valid FHIR). Computed once per answer: answers are cached whole.
 */
export function statusOf(entry: Pick<ConceptEntry, 'status' | 'definition' | 'inactive' | 'deprecated'> | undefined): { status?: string } {
  if (entry === undefined || !(entry.inactive || entry.deprecated)) return {};
  // `inactive` says it already (an `inactive` property, or a status of that name), as the reference servers leave it out.
  const status = conceptStatus(entry);
  return status !== undefined && status !== 'inactive' && checkPrimitive('code', status) === undefined ? { status } : {};
}

/**
 * The status (`deprecated`, `withdrawn`) of the designations `display` is, when it is only designations so marked
 * (structuredefinition-standards-status); undefined when it is also a current display, or none.
 */
function retiredStatus(definition: ConceptDefinition | undefined, displays: readonly string[], display: string): string | undefined {
  if (definition === undefined || definition.display === display || displays.includes(display)) return undefined;
  const statuses = (definition.designation ?? []).filter((d) => d.value === display).map((d) => standardsStatus(d.extension) ?? '');
  return statuses.length > 0 && statuses.every((status) => RETIRED.has(status)) ? statuses[0] : undefined;
}

/**
 * HL7's INACTIVE_DISPLAY_FOUND, as its validator words it: the display given, the code, the status of the designation
 * it is, and the displays still correct in the languages asked for (sorted, each quoted), at the display.
 */
function inactiveDisplayFound(display: string, code: string, status: string, valid: readonly string[]): TxIssue {
  const current = [...new Set(valid.filter((v) => v !== display))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const correct = current.length === 0 ? '' : ` The correct display is one of ${current.map((v) => `"${v}"`).join(', ')}.`;
  return txIssue('warning', 'invalid', 'display-comment', `'${display}' is no longer considered a correct display for code '${code}' (status = ${status}).${correct}`, 'INACTIVE_DISPLAY_FOUND');
}
const RETIRED: ReadonlySet<string> = new Set(['deprecated', 'withdrawn']);
