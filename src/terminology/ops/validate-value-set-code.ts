import type { CodeSystemIndex } from '../compile/code-system-index.ts';
import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import { RegexTooCostly } from '../compile/filters.ts';
import { type CodeSystemLookup, type Membership, systemLabel, type TxIssue, txIssue, unknownCode, unknownVersionId, unknownVersionText } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import type { OperationInput } from '../input/parameters.ts';
import type { valueSetValidateCodeParams } from '../input/operations.ts';
import { type CheckedCoding, type ValidationSubject, validationSubject } from '../input/subject.ts';
import { type ValueSetTarget, valueSetTarget } from '../input/value-set-target.ts';
import type { CodeableConcept, Coding } from '../model/datatypes.ts';
import type { DatePeriod } from '../model/date-time.ts';
import { expansionParameter } from '../model/value-set.ts';
import { invalid } from '../errors.ts';
import { displayLanguageOf } from '../input/parameters.ts';
import { resolveValueSet } from './resolve-value-set.ts';
import { requestedVersion, type SystemVersions, systemVersions } from './system-versions.ts';
import { applicableSupplements, requireSupplements, requireUsedSupplements } from './supplements.ts';
import { importedValueSets } from './expansion-parts.ts';
import { BoundedCache } from '../compile/bounded-cache.ts';
import { splitCanonical } from '../version.ts';
import { then, type SyncOrAsync } from '../../sync-or-async.ts';
import { echoed, type Finish, finishMember, type LocatedIssue, locate, siteBeside, statusCheck, statusOf, type ValidationResult } from './validation-result.ts';

export interface ValueSetValidateCodeInput {
  readonly target: ValueSetTarget;
  readonly subject: ValidationSubject;
  readonly abstract?: boolean;
  /** Versions not given explicitly are chosen as of this date (R4 `date`). */
  readonly date?: DatePeriod;
  /** The language of the output `display` (R4 `displayLanguage`). */
  readonly displayLanguage?: string;
  /** `system-version`, `check-system-version` and `force-system-version` (as $expand's), applied to each include. */
  readonly systemVersions?: SystemVersions;
}

type RawInput = OperationInput<(typeof valueSetValidateCodeParams)['spec']>;

/**
 * Applies the input rules of ValueSet/$validate-code (interface rules 1 and 2). `acceptLanguage`, the
 * request's header, stands for `displayLanguage` when that is not given (ignored when malformed).
 */
export function valueSetValidateCodeInput(raw: RawInput, instanceId?: string, acceptLanguage?: string): ValueSetValidateCodeInput {
  if (raw.system !== undefined && raw.code === undefined) throw invalid("the parameter 'code' is required with 'system'", ['code']);
  const subject = validationSubject({ ...raw, systemParam: 'system', version: raw.systemVersion });
  const { abstract, date } = raw;
  const displayLanguage = displayLanguageOf(raw.displayLanguage, acceptLanguage);
  const versions = systemVersions(raw);
  return { target: valueSetTarget(raw, instanceId), subject, abstract, date, displayLanguage, ...(versions === undefined ? {} : { systemVersions: versions }) };
}

/**
 * ValueSet/$validate-code (interface "ValueSet validate-code", FHIR R4 ValueSet-validate-code):
 * whether a code, coding or CodeableConcept is in a ValueSet, with `display` and `message`.
 * With `date`, the ValueSet and the CodeSystems it uses are the versions in effect at that date.
 * The answer comes at once, without a promise, when everything it needs is loaded (the steady state
 * of a code or coding checked against a ValueSet named by URL), else as a promise; an error known
 * at once is thrown at once.
 */
export function validateValueSetCode(
  input: ValueSetValidateCodeInput,
  deps: { readonly terminology: TerminologyContext },
): SyncOrAsync<ValidationResult> {
  const ctx = deps.terminology.at(input.date);
  const vs = resolveValueSet(input.target, ctx);
  return vs instanceof Promise ? vs.then((v) => validateIn(v, input, ctx)) : validateIn(vs, input, ctx);
}

function validateIn(vs: CompiledValueSet, input: ValueSetValidateCodeInput, ctx: TerminologyContext): SyncOrAsync<ValidationResult> {
  const supplements = requireSupplements(vs, ctx);
  if (supplements instanceof Promise) return supplements.then((s) => (requireUsedSupplements(vs, s, input.systemVersions), validateWith(vs, s, input, ctx)));
  requireUsedSupplements(vs, supplements, input.systemVersions);
  return validateWith(vs, supplements, input, ctx);
}

/**
 * The answers about single codings checked against value sets of the tenants' terminology (not
 * inline ones, compiled anew for each request), by the compilation's serial and every input the
 * answer depends on. A compiled value set is dropped with everything compiled beside it when its
 * tenant's terminology changes, and its successor has another serial, so no answer outlives the
 * definitions it rests on. Validation traffic repeats its codes, and the answer to one costs several
 * times the lookup; bounded, so that many different codes cannot grow it without end.
 */
const ANSWERS = new BoundedCache<string, ValidationResult>(10_000);

/**
 * ANSWERS' key of a coding checked against `vs` through `ctx`; undefined when its answer is not kept. Under the
 * context's reach: a request that may not read the tenant's CodeSystems is refused what one that may was answered.
 */
function answerKey(vs: CompiledValueSet, input: ValueSetValidateCodeInput, ctx: TerminologyContext): string | undefined {
  const { subject } = input;
  if (subject.kind !== 'coding' || input.target.kind === 'inline' || input.systemVersions !== undefined) return undefined;
  const { system, version, code, display } = subject.coding;
  // Each text with its length, so that no two inputs make one key whatever characters they hold.
  return `${vs.serial} ${field(ctx.reach)}${subject.path} ${input.abstract} ${field(system)}${field(version)}${field(code)}${field(display)}${field(input.displayLanguage)}`;
}

const field = (s: string | undefined): string => (s === undefined ? '-' : `${s.length}:${s}`);

function validateWith(vs: CompiledValueSet, supplements: readonly CodeSystemIndex[], input: ValueSetValidateCodeInput, ctx: TerminologyContext): SyncOrAsync<ValidationResult> {
  const key = answerKey(vs, input, ctx);
  if (key === undefined) return answer(vs, supplements, input, ctx);
  const known = ANSWERS.get(key);
  if (known !== undefined) return known;
  const r = answer(vs, supplements, input, ctx);
  if (r instanceof Promise) return r.then((v) => (ANSWERS.set(key, v), v));
  ANSWERS.set(key, r);
  return r;
}

function answer(vs: CompiledValueSet, supplements: readonly CodeSystemIndex[], input: ValueSetValidateCodeInput, ctx: TerminologyContext): SyncOrAsync<ValidationResult> {
  const { subject } = input;
  // The input carries `abstract` and `displayLanguage`, all that finishing a member needs.
  // A coding without a system: HL7's answer where it has a code to name, else (a display alone) why it cannot be checked.
  if (subject.kind === 'unusable') return subject.path === 'Coding.system' && subject.code !== undefined ? withoutSystem(vs, subject.code) : unusable(subject.why, subject.path, subject.code);
  // Displays are checked in the language asked for, else in the one the value set sets for its
  // expansions (a compose expansion parameter), else in the value set's own language.
  const displayLanguage = input.displayLanguage ?? expansionParameter(vs.resource, 'displayLanguage') ?? vs.resource.language;
  const finish: Finish = { abstract: input.abstract, displayLanguage, supplements, valueSet: vs.resource.url === undefined ? "'(unidentified)'" : vs.label };
  const codings = subject.kind === 'coding' ? [subject.coding] : subject.codings;
  // Membership applies the request's code system versions; the other lookups (displays, status) are the context's.
  const lookup: CodeSystemLookup = input.systemVersions === undefined ? ctx : { codeSystem: (url, version) => ctx.codeSystem(url, version), asOf: ctx.asOf, versions: input.systemVersions };
  const r = subject.kind === 'coding' ? validateCoding(vs, subject.coding, subject.path, finish, ctx, lookup) : validateConcept(vs, subject.concept, subject.codings, finish, ctx, lookup);
  return r instanceof Promise ? r.then((v) => withStatusChecks(v, vs, codings, ctx)) : withStatusChecks(r, vs, codings, ctx);
}

/**
 * A coding without system or code: not in any value set, and why it could not be checked (as the reference
 * servers answer, echoing the code when there is one).
 */
export function unusable(why: string, path: string, code?: string): ValidationResult {
  return {
    result: false,
    ...echoed(code, undefined, undefined),
    issues: [
      { ...txIssue('error', 'code-invalid', 'invalid-code', `${why}, so it is not valid in the value set`), expression: path },
      { ...txIssue('warning', 'invalid', 'invalid-data', why), expression: path },
    ],
  };
}

/**
 * A Coding without a system, as the reference servers answer it: not in the value set (HL7's
 * None_of_the_provided_codes_are_in_the_value_set_one, the code named `#code`) and HL7's
 * Coding_has_no_system__cannot_validate, a warning about the coding, both in `message`.
 */
function withoutSystem(vs: CompiledValueSet, code: string): ValidationResult {
  const name = vs.resource.url === undefined ? "'(unidentified)'" : vs.label;
  return {
    result: false,
    ...echoed(code, undefined, undefined),
    issues: [
      { ...txIssue('error', 'code-invalid', 'not-in-vs', `The provided code '#${code}' was not found in the value set ${name}`, 'None_of_the_provided_codes_are_in_the_value_set_one'), expression: 'Coding.code' },
      { ...txIssue('warning', 'invalid', 'invalid-data', 'Coding has no system. A code with no system has no defined meaning, and it cannot be validated. A system should be provided', 'Coding_has_no_system__cannot_validate'), expression: 'Coding' },
    ],
  };
}

/** The coding's CodeSystem as coded, its latest version, and the version the value set uses when that differs (null: there is none). */
interface CodedSystems {
  readonly coded: CodeSystemIndex | null;
  readonly latest: CodeSystemIndex | null;
  /** Null as well when the value set uses no other version. */
  readonly used: CodeSystemIndex | null;
}

/** Notes the draft, experimental, deprecated or withdrawn CodeSystems and ValueSet the answer used. */
function withStatusChecks(r: ValidationResult, vs: CompiledValueSet, codings: readonly Coding[], ctx: TerminologyContext): SyncOrAsync<ValidationResult> {
  let pending = false;
  const used: SyncOrAsync<CodeSystemIndex | null>[] = [];
  for (const c of codings) {
    if (c.system === undefined) continue;
    const cs = ctx.codeSystem(c.system, c.version);
    if (cs instanceof Promise) pending = true;
    used.push(cs);
  }
  return pending ? Promise.all(used).then((systems) => noted(r, vs, systems)) : noted(r, vs, used as (CodeSystemIndex | null)[]);
}

function noted(r: ValidationResult, vs: CompiledValueSet, systems: readonly (CodeSystemIndex | null)[]): ValidationResult {
  let checks: TxIssue[] | undefined;
  let previous: CodeSystemIndex | undefined;
  for (const cs of systems) {
    // Several codings of one system repeat its note; the output lists each finding once.
    if (cs === null || cs === previous) continue;
    previous = cs;
    const check = statusCheck('CodeSystem', cs.resource);
    if (check !== undefined) (checks ??= []).push(check);
  }
  // The value set's own status, and those of the value sets it imports by URL (at any depth), as the reference servers note them.
  for (const used of [vs, ...importedValueSets(vs)]) {
    const check = statusCheck('ValueSet', used.resource);
    if (check !== undefined) (checks ??= []).push(check);
  }
  return checks === undefined ? r : { ...r, issues: [...r.issues, ...checks] };
}

function located(r: ValidationResult, path: string): ValidationResult {
  return r.issues.length === 0 ? r : { ...r, issues: locate(r.issues, path) };
}

function validateCoding(vs: CompiledValueSet, coding: CheckedCoding, path: string, finish: Finish, ctx: TerminologyContext, lookup: CodeSystemLookup = ctx): SyncOrAsync<ValidationResult> {
  let m: SyncOrAsync<Membership>;
  try {
    m = vs.check(coding, lookup);
  } catch (e) {
    return regexRefused(e, vs, coding, path);
  }
  return m instanceof Promise
    ? m.then((v) => codingResult(vs, v, coding, path, finish, ctx, lookup.versions), (e: unknown) => regexRefused(e, vs, coding, path))
    : codingResult(vs, m, coding, path, finish, ctx, lookup.versions);
}

/**
 * A regex filter that backtracks without end (regex-guard.ts) leaves the code's membership unknown: the
 * answer is false, saying the pattern could not be run, as the reference servers may answer (HL7's
 * terminology tests, `regex-bad`), and is kept like any other answer, so the pattern is not run again.
 * Any other error is the request's.
 */
function regexRefused(e: unknown, vs: CompiledValueSet, coding: CheckedCoding, path: string): ValidationResult {
  if (!(e instanceof RegexTooCostly)) throw e;
  const text = `The regex '${e.pattern}' of the value set ${vs.label} could not be run against the code '${coding.code}' (its pattern backtracks without end), so the code's membership is unknown`;
  // A warning: the reference servers' answer holds the message and no error issue, the code being not
  // known to be outside the value set.
  return { result: false, ...echoed(coding.code, coding.system, undefined), issues: [{ ...txIssue('warning', 'too-costly', 'vs-invalid', text), expression: path }] };
}

function codingResult(
  vs: CompiledValueSet, m: Membership, coding: CheckedCoding, path: string, finish: Finish, ctx: TerminologyContext, versions: SystemVersions | undefined,
): SyncOrAsync<ValidationResult> {
  // The coding is echoed as given, with the version of the CodeSystem it was found in (as the reference servers answer).
  if (m.member) {
    // The supplements that apply to the code: the value set's own, and those of the value sets it was drawn through.
    const supplements = finish.supplements === undefined ? undefined : applicableSupplements(vs, m.via, finish.supplements);
    const scoped = supplements === finish.supplements ? finish : { ...finish, supplements };
    return { ...located(finishMember(m, coding, scoped), path), ...echoed(coding.code, coding.system, m.cs?.version) };
  }
  const usesVersion = m.reasons.find((r) => r.usesVersion !== undefined)?.usesVersion;
  // A coding without a version is looked up (for its display and the version echoed) in the version the request's
  // `system-version` or `check-system-version` asks for, where the server has it, as the reference servers answer; not
  // where the check refused the version the value set pins (`version-error`), which the answer is about.
  const refusedPin = m.reasons.some((r) => r.type === 'version-error');
  const requested = coding.version === undefined && versions !== undefined && !refusedPin ? requestedVersion(versions, coding.system, undefined) : undefined;
  const coded = requested === undefined ? ctx.codeSystem(coding.system, coding.version) : then(ctx.codeSystem(coding.system, requested), (cs) => cs ?? ctx.codeSystem(coding.system));
  const latest = coding.version === undefined ? coded : ctx.codeSystem(coding.system);
  const used = usesVersion === undefined ? null : ctx.codeSystem(coding.system, usesVersion);
  if (coded instanceof Promise || latest instanceof Promise || used instanceof Promise) {
    return Promise.all([coded, latest, used]).then(([c, l, u]) => notInValueSetOf(vs, coding, m.reasons, path, { coded: c, latest: l, used: u }, ctx));
  }
  return notInValueSetOf(vs, coding, m.reasons, path, { coded, latest, used }, ctx);
}

/** notInValueSet, once it is known whether a system that is no CodeSystem is a ValueSet's URL (a common mistake). */
function notInValueSetOf(vs: CompiledValueSet, coding: CheckedCoding, reasons: readonly TxIssue[], path: string, systems: CodedSystems, ctx: TerminologyContext): SyncOrAsync<ValidationResult> {
  // A version the server does not have is answered naming the versions it has: read only on this way.
  const unknownVersion = (systems.coded === null && coding.version !== undefined) || reasons.some((r) => r.unknownSystem?.startsWith(`${coding.system}|`) === true)
    || reasons.some((r) => r.usesVersion !== undefined);
  const versions = unknownVersion && ctx.codeSystemVersions !== undefined ? ctx.codeSystemVersions(coding.system) : undefined;
  const isValueSet = systems.latest !== null ? false : isValueSetUrl(ctx, coding.system);
  if (!(versions instanceof Promise) && !(isValueSet instanceof Promise)) return notInValueSet(vs, coding, reasons, path, systems, isValueSet, versions);
  return Promise.all([versions, isValueSet]).then(([v, is]) => notInValueSet(vs, coding, reasons, path, systems, is, v));
}

/**
 * An unknown code that several versions of its code system lack (a value set including them all) reported once, for the
 * latest version, as the reference servers report it (HL7's `validate-bad-unknown`).
 */
function unknownInLatest(reasons: readonly TxIssue[], coding: CheckedCoding, latest: CodeSystemIndex | null): readonly TxIssue[] {
  const unknown = reasons.filter((r) => r.messageId === 'Unknown_Code_in_Version');
  if (unknown.length < 2 || latest === null) return reasons;
  const text = unknownCode(coding.code, latest).text;
  return unknown.some((r) => r.text === text) ? reasons.filter((r) => r.messageId !== 'Unknown_Code_in_Version' || r.text === text) : reasons;
}

/** Whether a URL is a ValueSet's (one that cannot be compiled counts: there is one). */
function isValueSetUrl(ctx: TerminologyContext, url: string): SyncOrAsync<boolean> {
  let vs: SyncOrAsync<CompiledValueSet | null>;
  try {
    vs = ctx.valueSet(url);
  } catch {
    return true;
  }
  return vs instanceof Promise ? vs.then((v) => v !== null, () => true) : vs !== null;
}

/**
 * A coding that is not in the ValueSet: false, with why, and the CodeSystem's display of the code
 * when the code is known there (as the reference servers answer).
 */
function notInValueSet(
  vs: CompiledValueSet, coding: CheckedCoding, found: readonly TxIssue[], path: string, systems: CodedSystems, isValueSet: boolean, versions: readonly string[] | undefined,
): ValidationResult {
  const given = unknownInLatest(found, coding, systems.latest);
  // A code system version the server does not have names the versions it has (HL7's UNKNOWN_CODESYSTEM_VERSION).
  const reasons = versions === undefined ? given : given.map((r) => {
    const canonical = r.unknownSystem === undefined ? undefined : splitCanonical(r.unknownSystem);
    return canonical?.version === undefined || canonical.url !== coding.system ? r : { ...r, text: unknownVersionText(canonical.url, canonical.version, versions) };
  });
  const issues: TxIssue[] = [];
  const mismatch = reasons.find((r) => r.type === 'vs-invalid');
  let cs = systems.coded;
  // A version the server does not have: the answer is still false, but names another version's display.
  if (cs === null && coding.version !== undefined) {
    const latest = systems.latest;
    if (latest !== null) {
      // HL7's UNKNOWN_CODESYSTEM_VERSION where the value set pins another version, else VALUESET_VALUE_MISMATCH_DEFAULT.
      issues.push(mismatch
        ? txIssue('error', 'not-found', 'not-found', unknownVersionText(coding.system, coding.version, versions), unknownVersionId(versions))
        : txIssue('warning', 'invalid', 'vs-invalid', `The code system '${coding.system}' version '${latest.version ?? ''}' for the versionless include in the ValueSet include is different to the one in the value ('${coding.version}')`, 'VALUESET_VALUE_MISMATCH_DEFAULT'));
      cs = latest;
    }
  }
  // A version mismatch: the display is the value set's version's, when that version exists.
  if (mismatch?.usesVersion !== undefined) {
    const used = systems.used;
    if (used === null) issues.push(txIssue('error', 'not-found', 'not-found', unknownVersionText(coding.system, mismatch.usesVersion, versions), unknownVersionId(versions)));
    else cs = used;
  }
  // A value set that could not be evaluated (an import or a code system version is missing, or it pins
  // another version) says so, not that the code is outside it.
  const undecided = reasons.some((r) => r.severity === 'error' && (r.code === 'not-found' || r.type === 'vs-invalid' || r.type === 'version-error'));
  if (!undecided) {
    // HL7's None_of_the_provided_codes_are_in_the_value_set_one; an inline value set has no name to give.
    const given = coding.display === undefined ? '' : ` ('${coding.display}')`;
    const name = vs.resource.url === undefined ? "'(unidentified)'" : vs.label;
    issues.unshift(txIssue('error', 'code-invalid', 'not-in-vs', `The provided code '${coding.system}${coding.version === undefined ? '' : `|${coding.version}`}#${coding.code}${given}' was not found in the value set ${name}`, 'None_of_the_provided_codes_are_in_the_value_set_one'));
    if (cs === null) {
      if (isValueSet) issues.push(txIssue('error', 'invalid', 'invalid-data', `The Coding references a value set, not a code system ('${coding.system}')`, 'Terminology_TX_System_ValueSet2'));
      else {
        if (!/^[A-Za-z][A-Za-z0-9+.-]*:/.test(coding.system)) issues.push(txIssue('error', 'invalid', 'invalid-data', 'Coding.system must be an absolute reference, not a local reference', 'Terminology_TX_System_Relative'));
        // A version of a code system the server has none of: HL7's UNKNOWN_CODESYSTEM_VERSION_NONE, saying so.
        issues.push(coding.version === undefined
          ? txIssue('error', 'not-found', 'not-found', `A definition for CodeSystem ${systemLabel(coding.system)} could not be found, so the code cannot be validated`, 'UNKNOWN_CODESYSTEM')
          : txIssue('error', 'not-found', 'not-found', unknownVersionText(coding.system, coding.version, versions), unknownVersionId(versions)));
      }
    }
  }
  const entry = cs?.find(coding.code);
  const display = entry?.definition?.display;
  const located: LocatedIssue[] = [];
  for (const i of issues) located.push({ ...i, expression: siteOf(i, path, true) });
  for (const i of reasons) located.push({ ...i, expression: siteOf(i, path, false) });
  const unknown = unknownSystems(coding, reasons, systems, mismatch?.usesVersion, isValueSet);
  const echo = echoed(coding.code, coding.system, cs?.version);
  const inactive = entry?.inactive === true ? { inactive: true as const } : {};
  return { result: false, ...(display === undefined ? {} : { display }), ...echo, ...inactive, ...statusOf(entry), issues: located, ...unknown };
}

/**
 * Where a finding about a coding outside the value set is located, as the reference servers locate it: one
 * about its version (the value set uses another, `vs-invalid`, or `check-system-version` refuses the one it uses,
 * `version-error`) at the version beside the code
 * (`Coding.version`; `version` for the `code` input, whose `systemVersion` the reference servers read as the
 * coding's version and locate there, as the answer's `version` names it), one about its code system (unknown, or no such version of it, `not-found`;
 * not a code system's URL, `invalid-data`) at the system, the others at the code. `own`: a finding of
 * notInValueSet, all of whose `not-found`s are about the code system; a membership reason's is when it names
 * the unknown system. One about an imported ValueSet the server lacks is about no element of the request: it has no
 * `expression`, as the reference servers give it.
 */
function siteOf(i: TxIssue, codePath: string, own: boolean): string | undefined {
  if (i.messageId === MISSING_IMPORT) return undefined;
  if (!codePath.endsWith('code') || i.atCoding === true) return siteBeside(i, codePath);
  const beside = (element: string) => `${codePath.slice(0, -'code'.length)}${element}`;
  if (i.type === 'vs-invalid' && (own || i.usesVersion !== undefined)) return beside('version');
  // A version check-system-version does not allow: at the version too, as the reference servers locate it.
  if (i.type === 'version-error') return beside('version');
  if (i.type === 'not-found' && (own || i.unknownSystem !== undefined)) return beside('system');
  if (i.type === 'invalid-data' && own) return beside('system');
  return codePath;
}

/**
 * The code systems (`url` or `url|version`) the server does not have that a false answer rests on, as
 * the reference servers name them (HL7 tx ecosystem requirements): `x-caused-by-unknown-system` when
 * the value set needs one to decide (a system it includes, a version it pins, the coding's version),
 * `x-unknown-system` when only the coding's system is unknown and the value set does not use it.
 * A client (HL7's validator) tells from them "could not be checked" apart from "not valid".
 */
function unknownSystems(
  coding: CheckedCoding, reasons: readonly TxIssue[], systems: CodedSystems, usesVersion: string | undefined, isValueSet: boolean,
): Pick<ValidationResult, 'causedByUnknownSystems' | 'unknownSystems'> {
  const caused = new Set<string>();
  for (const r of reasons) if (r.unknownSystem !== undefined) caused.add(r.unknownSystem);
  if (systems.coded === null && coding.version !== undefined && systems.latest !== null) caused.add(`${coding.system}|${coding.version}`);
  if (usesVersion !== undefined && systems.used === null) caused.add(`${coding.system}|${usesVersion}`);
  if (caused.size > 0) return { causedByUnknownSystems: [...caused] };
  return systems.latest === null && !isValueSet ? { unknownSystems: [coding.system] } : {};
}

/**
 * A CodeableConcept is valid when one of its codings is in the ValueSet and none is an unknown code
 * of a complete CodeSystem (as the reference servers answer); codings not in the ValueSet are
 * reported for information.
 */
async function validateConcept(
  vs: CompiledValueSet,
  concept: CodeableConcept,
  codings: readonly Coding[],
  finish: Finish,
  ctx: TerminologyContext,
  lookup: CodeSystemLookup,
): Promise<ValidationResult> {
  const outcomes: ValidationResult[] = [];
  const unknown: LocatedIssue[] = [];
  for (const [i, c] of codings.entries()) {
    const path = `CodeableConcept.coding[${i}]`;
    if (c.system === undefined || c.code === undefined) {
      outcomes.push({ result: false, issues: [{ ...txIssue('error', 'invalid', 'invalid-data', `${path} has no ${c.system === undefined ? 'system' : 'code'}`), expression: path }] });
      continue;
    }
    const coding = { system: c.system, version: c.version, code: c.code, display: c.display };
    outcomes.push(await validateCoding(vs, coding, `${path}.code`, finish, ctx, lookup));
    const cs = await ctx.codeSystem(c.system, c.version);
    if (cs !== null && cs.content === 'complete' && cs.find(c.code) === undefined) unknown.push({ ...unknownCode(c.code, cs), expression: `${path}.code` });
  }
  // Each coding not in the ValueSet is reported for information; the concept as a whole is what is (not) in it.
  const perCoding = (o: ValidationResult) => o.issues.map((i) => (i.type === 'not-in-vs' ? { ...i, severity: 'information' as const, type: 'this-code-not-in-vs' as const } : i));
  // `inactive` when a coding's code is inactive in its code system, in the value set or not, as a Coding's answer
  // says it (the reference servers say it of the concept when any of its codings is).
  const inactive = outcomes.some((o) => o.inactive === true) ? { inactive: true as const } : {};
  const valid = outcomes.find((o) => o.result);
  // `status` of the valid coding's code, else of the first coding whose code has one, as `inactive` is said.
  const statusCode = valid?.status ?? outcomes.find((o) => o.status !== undefined)?.status;
  const status = statusCode === undefined ? {} : { status: statusCode };
  if (valid === undefined) {
    const none = txIssue('error', 'code-invalid', 'not-in-vs', `No valid coding was found for the value set ${vs.label}`, 'TX_GENERAL_CC_ERROR_MESSAGE');
    const issues = outcomes.flatMap(perCoding);
    const systems = mergedUnknownSystems(outcomes);
    const echoed = outcomes.filter((o, i) => inValueSetBut(o, codings[i]!));
    // "No valid coding" where some coding is outside the value set and none is in it but for its version or display.
    const all = [...(issues.some((i) => i.type === 'this-code-not-in-vs') && echoed.length === 0 ? [none] : []), ...issues, ...unknown];
    return { result: false, ...displayOf(echoed), ...inactive, ...status, codeableConcept: concept, issues: all, ...systems };
  }
  const others = outcomes.filter((o) => o !== valid).flatMap(perCoding);
  // The concept is echoed, and the coding found valid (as the reference servers answer).
  const echo = valid.coding === undefined ? {} : { coding: valid.coding };
  return { result: unknown.length === 0, ...(valid.display === undefined ? {} : { display: valid.display }), ...echo, ...inactive, ...status, codeableConcept: concept, issues: [...valid.issues, ...others, ...unknown] };
}

/** The unknown code systems of the codings' answers, each once (unknownSystems). */
function mergedUnknownSystems(outcomes: readonly ValidationResult[]): Pick<ValidationResult, 'causedByUnknownSystems' | 'unknownSystems'> {
  const caused = [...new Set(outcomes.flatMap((o) => o.causedByUnknownSystems ?? []))];
  const unknown = [...new Set(outcomes.flatMap((o) => o.unknownSystems ?? []))];
  return { ...(caused.length > 0 ? { causedByUnknownSystems: caused } : {}), ...(unknown.length > 0 ? { unknownSystems: unknown } : {}) };
}

/**
 * Whether a coding's false answer is about a code the value set has (its version or display is wrong, its own
 * version unknown), not one outside it (`not-in-vs`) nor one whose code system version, as the value set pins it,
 * the server lacks: only such a coding is echoed for a CodeableConcept none of whose codings is valid, as the
 * reference servers answer (HL7's ecosystem tests `bad-cc2-isa`, `codeableconcept-v10-vs1wb`, `codeableconcept-vbb-vs10`);
 * nor one the value set could not decide for an import the server lacks (`validation-simple-codeableconcept-bad-import`).
 */
/** HL7's key of a finding about an imported ValueSet the server lacks (concept-set.ts). */
const MISSING_IMPORT = 'Unable_to_resolve_value_Set_';

function inValueSetBut(o: ValidationResult, c: Coding): boolean {
  // A coding without a system or code is in no value set.
  if (c.system === undefined || c.code === undefined) return false;
  if (o.issues.some((i) => i.type === 'not-in-vs' || i.messageId === MISSING_IMPORT)) return false;
  const own = c.version === undefined ? undefined : `${c.system}|${c.version}`;
  return !(o.causedByUnknownSystems ?? []).some((s) => s !== own);
}

/**
 * The display of the first coding whose code was found (in the value set, or in its code system), and that
 * coding's echo, as the reference servers answer a CodeableConcept none of whose codings is valid.
 */
function displayOf(outcomes: ValidationResult[]): Pick<ValidationResult, 'display' | 'coding'> {
  const found = outcomes.find((o) => o.display !== undefined);
  if (found === undefined) return {};
  return { display: found.display, ...(found.coding === undefined ? {} : { coding: found.coding }) };
}
