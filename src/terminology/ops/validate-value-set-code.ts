import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import { NotLoaded, systemLabel, type TxIssue, txIssue, unknownCode } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import type { OperationInput } from '../input/parameters.ts';
import type { valueSetValidateCodeParams } from '../input/operations.ts';
import { type CheckedCoding, type ValidationSubject, validationSubject } from '../input/subject.ts';
import { type ValueSetTarget, valueSetTarget } from '../input/value-set-target.ts';
import type { Coding } from '../model/datatypes.ts';
import type { DatePeriod } from '../model/date-time.ts';
import { invalid } from '../errors.ts';
import { resolveValueSet } from './resolve-value-set.ts';
import { type Finish, finishMember, type LocatedIssue, locate, type ValidationResult } from './validation-result.ts';

export interface ValueSetValidateCodeInput {
  readonly target: ValueSetTarget;
  readonly subject: ValidationSubject;
  readonly abstract?: boolean;
  /** Versions not given explicitly are chosen as of this date (R4 `date`). */
  readonly date?: DatePeriod;
  /** The language of the output `display` (R4 `displayLanguage`). */
  readonly displayLanguage?: string;
}

type RawInput = OperationInput<(typeof valueSetValidateCodeParams)['spec']>;

/** Applies the input rules of ValueSet/$validate-code (interface rules 1 and 2). */
export function valueSetValidateCodeInput(raw: RawInput, instanceId?: string): ValueSetValidateCodeInput {
  if (raw.system !== undefined && raw.code === undefined) throw invalid("the parameter 'code' is required with 'system'", ['code']);
  const subject = validationSubject({ ...raw, systemParam: 'system', version: raw.systemVersion });
  const { abstract, date, displayLanguage } = raw;
  return { target: valueSetTarget(raw, instanceId), subject, abstract, date, displayLanguage };
}

/**
 * ValueSet/$validate-code (interface "ValueSet validate-code", FHIR R4 ValueSet-validate-code):
 * whether a code, coding or CodeableConcept is in a ValueSet, with `display` and `message`.
 * With `date`, the ValueSet and the CodeSystems it uses are the versions in effect at that date.
 */
export async function validateValueSetCode(
  input: ValueSetValidateCodeInput,
  deps: { readonly terminology: TerminologyContext },
): Promise<ValidationResult> {
  const ctx = deps.terminology.at(input.date);
  const vs = await resolveValueSet(input.target, ctx);
  const { subject } = input;
  // The input carries `abstract` and `displayLanguage`, all that finishing a member needs.
  if (subject.kind === 'unusable') return unusable(subject.why, subject.path);
  return subject.kind === 'coding' ? validateCoding(vs, subject.coding, subject.path, input, ctx) : validateConcept(vs, subject.codings, input, ctx);
}

/**
 * validateValueSetCode without waiting, for the steady state: a single coding checked against a
 * ValueSet named by URL, with that ValueSet and the CodeSystems it needs already loaded, and found
 * in it. Undefined when anything must be loaded, the input takes another form, or the code is not in
 * the ValueSet (the answer then names the code's display, which may need a load): then call
 * validateValueSetCode.
 */
export function validateValueSetCodeNow(input: ValueSetValidateCodeInput, terminology: TerminologyContext): ValidationResult | undefined {
  const { target, subject } = input;
  if (target.kind !== 'url' || subject.kind !== 'coding') return undefined;
  const ctx = terminology.at(input.date);
  const vs = ctx.loadedValueSet(target.url, target.version);
  if (vs === undefined || vs === null) return undefined;
  const m = vs.checkLoaded(subject.coding, { get: (url, version) => ctx.loadedCodeSystem(url, version), asOf: ctx.asOf });
  if (m instanceof NotLoaded || !m.member) return undefined;
  return located(finishMember(m, subject.coding, input), subject.path);
}

/** A coding without system or code: not in any value set, and why it could not be checked (as the reference servers answer). */
export function unusable(why: string, path: string): ValidationResult {
  return {
    result: false,
    issues: [
      { ...txIssue('error', 'code-invalid', 'invalid-code', `${why}, so it is not valid in the value set`), expression: path },
      { ...txIssue('warning', 'invalid', 'invalid-data', why), expression: path },
    ],
  };
}

function located(r: ValidationResult, path: string): ValidationResult {
  return r.issues.length === 0 ? r : { ...r, issues: locate(r.issues, path) };
}

async function validateCoding(vs: CompiledValueSet, coding: CheckedCoding, path: string, finish: Finish, ctx: TerminologyContext): Promise<ValidationResult> {
  const m = await vs.check(coding, ctx);
  if (m.member) return located(finishMember(m, coding, finish), path);
  return notInValueSet(vs, coding, m.reasons, path, ctx);
}

/**
 * A coding that is not in the ValueSet: false, with why, and the CodeSystem's display of the code
 * when the code is known there (as the reference servers answer).
 */
async function notInValueSet(vs: CompiledValueSet, coding: CheckedCoding, reasons: readonly TxIssue[], path: string, ctx: TerminologyContext): Promise<ValidationResult> {
  const issues: TxIssue[] = [];
  const mismatch = reasons.find((r) => r.type === 'vs-invalid');
  let cs = await ctx.codeSystem(coding.system, coding.version);
  // A version the server does not have: the answer is still false, but names another version's display.
  if (cs === null && coding.version !== undefined) {
    const latest = await ctx.codeSystem(coding.system);
    if (latest !== null) {
      const text = `CodeSystem '${coding.system}' has no version '${coding.version}'; the code was looked up in version '${latest.version ?? '(none)'}'`;
      issues.push(mismatch ? txIssue('error', 'not-found', 'not-found', text) : txIssue('warning', 'invalid', 'vs-invalid', text));
      cs = latest;
    }
  }
  // A version mismatch: the display is the value set's version's, when that version exists.
  if (mismatch?.usesVersion !== undefined) {
    const used = await ctx.codeSystem(coding.system, mismatch.usesVersion);
    if (used === null) issues.push(txIssue('error', 'not-found', 'not-found', `No version '${mismatch.usesVersion}' of CodeSystem '${coding.system}' is known`));
    else cs = used;
  }
  // A value set that could not be evaluated (an import or a code system version is missing, or it pins
  // another version) says so, not that the code is outside it.
  const undecided = reasons.some((r) => r.severity === 'error' && (r.code === 'not-found' || r.type === 'vs-invalid'));
  if (!undecided) {
    issues.unshift(txIssue('error', 'code-invalid', 'not-in-vs', `The code '${coding.code}' from system '${coding.system}' is not in the value set ${vs.label}`));
    if (cs === null) issues.push(txIssue('error', 'not-found', 'not-found', `A definition for CodeSystem ${systemLabel(coding.system, coding.version)} could not be found, so the code cannot be validated`));
  }
  const display = cs?.find(coding.code)?.definition?.display;
  return { result: false, ...(display === undefined ? {} : { display }), issues: locate([...issues, ...reasons], path) };
}

/**
 * A CodeableConcept is valid when one of its codings is in the ValueSet and none is an unknown code
 * of a complete CodeSystem (as the reference servers answer); codings not in the ValueSet are
 * reported for information.
 */
async function validateConcept(
  vs: CompiledValueSet,
  codings: readonly Coding[],
  finish: Finish,
  ctx: TerminologyContext,
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
    outcomes.push(await validateCoding(vs, coding, `${path}.code`, finish, ctx));
    const cs = await ctx.codeSystem(c.system, c.version);
    if (cs !== null && cs.content === 'complete' && cs.find(c.code) === undefined) unknown.push({ ...unknownCode(c.code, cs), expression: `${path}.code` });
  }
  // Each coding not in the ValueSet is reported for information; the concept as a whole is what is (not) in it.
  const perCoding = (o: ValidationResult) => o.issues.map((i) => (i.type === 'not-in-vs' ? { ...i, severity: 'information' as const, type: 'this-code-not-in-vs' as const } : i));
  const valid = outcomes.find((o) => o.result);
  if (valid === undefined) {
    const none = txIssue('error', 'code-invalid', 'not-in-vs', `None of the codings of the CodeableConcept is in the value set ${vs.label}`);
    const issues = outcomes.flatMap(perCoding);
    return { result: false, ...displayOf(outcomes), issues: [...(issues.some((i) => i.type === 'this-code-not-in-vs') ? [none] : []), ...issues, ...unknown] };
  }
  const others = outcomes.filter((o) => o !== valid).flatMap(perCoding);
  return { result: unknown.length === 0, ...(valid.display === undefined ? {} : { display: valid.display }), issues: [...valid.issues, ...others, ...unknown] };
}

function displayOf(outcomes: ValidationResult[]): { display?: string } {
  const display = outcomes.find((o) => o.display !== undefined)?.display;
  return display === undefined ? {} : { display };
}
