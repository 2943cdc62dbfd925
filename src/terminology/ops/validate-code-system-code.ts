import { CodeSystemIndex } from '../compile/code-system-index.ts';
import { CompiledConceptSet } from '../compile/concept-set.ts';
import { type CodeSystemLookup, systemLabel, txIssue } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid } from '../errors.ts';
import type { codeSystemValidateCodeParams } from '../input/operations.ts';
import { displayLanguageOf, type OperationInput } from '../input/parameters.ts';
import { type CheckedCoding, type ValidationSubject, validationSubject } from '../input/subject.ts';
import type { CodeSystem } from '../model/code-system.ts';
import type { DatePeriod } from '../model/date-time.ts';
import { splitCanonical } from '../version.ts';
import { checkPrimitive } from '../../fhir/validation/primitives.ts';
import { checkSameCodeSystem } from './resolve-code-system.ts';
import { finishMember, type LocatedIssue, locate, type ValidationResult } from './validation-result.ts';
import { unusable } from './validate-value-set-code.ts';

export type CodeSystemTarget =
  | { readonly kind: 'url'; readonly url: string; readonly version?: string }
  | { readonly kind: 'inline'; readonly resource: CodeSystem & { readonly url: string } }
  | { readonly kind: 'instance'; readonly index: CodeSystemIndex };

export interface CodeSystemValidateCodeInput {
  readonly target: CodeSystemTarget;
  readonly subject: ValidationSubject;
  readonly abstract?: boolean;
  /** Without an explicit version, the CodeSystem version in effect at this date (R4 `date`). */
  readonly date?: DatePeriod;
  readonly displayLanguage?: string;
}

type RawInput = OperationInput<(typeof codeSystemValidateCodeParams)['spec']>;

/**
 * Applies the input rules of CodeSystem/$validate-code: the CodeSystem is the one in the path
 * (instance level), an inline `codeSystem`, or the one `url` (else the coding's system) names.
 * `acceptLanguage`, the request's header, stands for `displayLanguage` when that is not given.
 */
export function codeSystemValidateCodeInput(raw: RawInput, instance?: CodeSystemIndex, acceptLanguage?: string): CodeSystemValidateCodeInput {
  const target = instance !== undefined ? instanceTarget(raw, instance) : typeTarget(raw);
  const url = target.kind === 'instance' ? target.index.url : target.kind === 'inline' ? target.resource.url : target.url;
  const subject = validationSubject({ ...raw, system: url, systemParam: 'url' });
  const { abstract, date } = raw;
  return { target, subject, abstract, date, displayLanguage: displayLanguageOf(raw.displayLanguage, acceptLanguage) };
}

function typeTarget(raw: RawInput): CodeSystemTarget {
  const canonical = raw.url !== undefined ? splitCanonical(raw.url) : undefined;
  const codingSystem = raw.coding?.system ?? raw.codeableConcept?.coding?.find((c) => c.system !== undefined)?.system;
  const inline = raw.codeSystem;
  if (inline === undefined) {
    const url = canonical?.url ?? codingSystem;
    if (url === undefined) throw invalid("the parameter 'url' (or an inline 'codeSystem' with a url) is required", ['url']);
    return { kind: 'url', url, version: raw.version ?? canonical?.version ?? raw.coding?.version };
  }
  if (canonical !== undefined && inline.url !== undefined && canonical.url !== inline.url) {
    throw invalid(`'url' is '${canonical.url}', but the inline 'codeSystem' has the url '${inline.url}'`, ['url']);
  }
  const url = inline.url ?? canonical?.url ?? codingSystem;
  if (url === undefined) throw invalid("the inline 'codeSystem' has no url; give 'url' or a coding with a system", ['codeSystem']);
  return { kind: 'inline', resource: { ...inline, url } };
}

function instanceTarget(raw: RawInput, cs: CodeSystemIndex): CodeSystemTarget {
  if (raw.codeSystem !== undefined) throw invalid("an inline 'codeSystem' cannot be given with a CodeSystem id in the path", ['codeSystem']);
  const canonical = raw.url !== undefined ? splitCanonical(raw.url) : undefined;
  checkSameCodeSystem(cs, canonical?.url, raw.version ?? canonical?.version, { system: 'url', version: 'version' });
  return { kind: 'instance', index: cs };
}

/**
 * CodeSystem/$validate-code (FHIR R4 CodeSystem-validate-code): whether a code is defined by
 * the CodeSystem, with the same display, abstract, inactive and fragment rules as ValueSets. A single
 * code or coding is echoed in the answer with the CodeSystem's url and version (`code`, `system`,
 * `version`), as HL7's reference servers answer.
 */
export async function validateCodeSystemCode(
  input: CodeSystemValidateCodeInput,
  deps: { readonly terminology: TerminologyContext },
): Promise<ValidationResult> {
  const { subject } = input;
  const ctx = deps.terminology.at(input.date);
  const cs = await resolveCodeSystem(input.target, ctx);
  if (subject.kind === 'unusable') return unusable(subject.why, subject.path, subject.code);
  if (cs === null) return unknownCodeSystem(input.target as CodeSystemTarget & { kind: 'url' }, subject, ctx);
  // A code that is not a FHIR `code` (leading, trailing or repeated whitespace) is not echoed: the answer would be invalid FHIR.
  // A supplement is no code system a code can be of: no version of one is echoed, and it is named as the unknown code
  // system the false answer rests on (x-caused-by-unknown-system), as the reference servers answer.
  const supplement = cs.content === 'supplement';
  const version = supplement ? undefined : cs.version;
  const echoed = subject.kind === 'coding' && checkPrimitive('code', subject.coding.code) === undefined ? { coding: { code: subject.coding.code, system: cs.url, version } } : {};
  const lookup: CodeSystemLookup = { codeSystem: () => cs };
  const whole = new CompiledConceptSet({ system: cs.url, where: `CodeSystem '${cs.url}'` });
  const codings = subject.kind === 'coding' ? [subject.coding] : subject.codings;
  const issues: LocatedIssue[] = [];
  // What a false answer says of the first code found: its display, and whether it is inactive (and its status), as a ValueSet's answer says them.
  let found: Pick<ValidationResult, 'display' | 'inactive' | 'status'> | undefined;
  for (const [i, c] of codings.entries()) {
    const path = subject.kind === 'coding' ? subject.path : `CodeableConcept.coding[${i}].code`;
    if (c.code === undefined || c.system === undefined) {
      issues.push({ ...txIssue('error', 'invalid', 'invalid-data', `codeableConcept.coding[${i}] has no ${c.system === undefined ? 'system' : 'code'}`), expression: path });
      continue;
    }
    const coding: CheckedCoding = { system: c.system, code: c.code, display: c.display };
    if (coding.system !== cs.url) {
      issues.push({ ...txIssue('error', 'invalid', 'invalid-data', `The coding's system '${coding.system}' is not the CodeSystem '${cs.url}'`), expression: path });
      continue;
    }
    if (cs.content === 'supplement') {
      // HL7's CODESYSTEM_CS_NO_SUPPLEMENT.
      const text = `CodeSystem ${cs.version === undefined ? cs.url : `${cs.url}|${cs.version}`} is a supplement, so can't be used as a value in Coding.system`;
      issues.push({ ...txIssue('error', 'invalid', 'invalid-data', text, 'CODESYSTEM_CS_NO_SUPPLEMENT'), expression: path.replace(/code$/, 'system') });
      continue;
    }
    const m = await whole.check(coding, lookup);
    if (!m.member) {
      issues.push(...locate(m.reasons, path));
      continue;
    }
    const outcome = finishMember(m, coding, input);
    if (outcome.result) return { ...outcome, ...echoed, issues: [...locate(outcome.issues, path), ...issues] };
    issues.push(...locate(outcome.issues, path));
    found ??= {
      ...(outcome.display === undefined ? {} : { display: outcome.display }),
      ...(outcome.inactive === true ? { inactive: true as const } : {}),
      ...(outcome.status === undefined ? {} : { status: outcome.status }),
    };
  }
  return { result: false, ...found, ...echoed, issues, ...(supplement ? { causedByUnknownSystems: [cs.url] } : {}) };
}

/** The CodeSystem the operation validates against; null when the one `url` names is not known. */
async function resolveCodeSystem(target: CodeSystemTarget, ctx: TerminologyContext): Promise<CodeSystemIndex | null> {
  if (target.kind === 'instance') return target.index;
  if (target.kind === 'inline') return new CodeSystemIndex(target.resource);
  return ctx.codeSystem(target.url, target.version);
}

/**
 * A code system (or version) the server does not have: the code cannot be validated, so the answer is
 * false, naming the system in `x-caused-by-unknown-system`, as the reference servers answer (a client
 * such as HL7's validator then reports an unknown code system, not an invalid code).
 */
function unknownCodeSystem(target: CodeSystemTarget & { kind: 'url' }, subject: ValidationSubject, ctx: TerminologyContext): ValidationResult {
  const label = systemLabel(target.url, target.version, ctx.asOf);
  const text = `A definition for CodeSystem ${label} could not be found, so the code cannot be validated`;
  const path = subject.kind === 'coding' ? subject.path.replace(/code$/, 'system') : 'CodeableConcept.coding';
  const canonical = target.version === undefined ? target.url : `${target.url}|${target.version}`;
  const id = target.version === undefined ? 'UNKNOWN_CODESYSTEM' : 'UNKNOWN_CODESYSTEM_VERSION';
  return { result: false, issues: [{ ...txIssue('error', 'not-found', 'not-found', text, id), expression: path }], causedByUnknownSystems: [canonical] };
}
