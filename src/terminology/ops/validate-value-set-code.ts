import type { CompiledValueSet } from '../compile/compiled-value-set.ts';
import { type Membership, NotLoaded, unknownCodeMessage } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import type { OperationInput } from '../input/parameters.ts';
import type { valueSetValidateCodeParams } from '../input/operations.ts';
import { type CheckedCoding, type ValidationSubject, validationSubject } from '../input/subject.ts';
import { type ValueSetTarget, valueSetTarget } from '../input/value-set-target.ts';
import type { Coding } from '../model/datatypes.ts';
import type { DatePeriod } from '../model/date-time.ts';
import { invalid } from '../errors.ts';
import { resolveValueSet } from './resolve-value-set.ts';
import { type Finish, finishMember, type ValidationResult } from './validation-result.ts';

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
  // The input carries `abstract` and `displayLanguage`, all that finishing a member needs.
  return input.subject.kind === 'coding'
    ? validateCoding(vs, input.subject.coding, input, ctx)
    : validateConcept(vs, input.subject.codings, input, ctx);
}

/**
 * validateValueSetCode without waiting, for the steady state: a single coding checked against a
 * ValueSet named by URL, with that ValueSet and the CodeSystems it needs already loaded. Undefined
 * when anything must be loaded (or the input takes another form): then call validateValueSetCode.
 */
export function validateValueSetCodeNow(input: ValueSetValidateCodeInput, terminology: TerminologyContext): ValidationResult | undefined {
  const { target, subject } = input;
  if (target.kind !== 'url' || subject.kind !== 'coding') return undefined;
  const ctx = terminology.at(input.date);
  const vs = ctx.loadedValueSet(target.url, target.version);
  if (vs === undefined || vs === null) return undefined;
  const m = vs.checkLoaded(subject.coding, { get: (url, version) => ctx.loadedCodeSystem(url, version), asOf: ctx.asOf });
  if (m instanceof NotLoaded) return undefined;
  return codingResult(vs, subject.coding, m, input);
}

async function validateCoding(vs: CompiledValueSet, coding: CheckedCoding, finish: Finish, ctx: TerminologyContext): Promise<ValidationResult> {
  return codingResult(vs, coding, await vs.check(coding, ctx), finish);
}

function codingResult(vs: CompiledValueSet, coding: CheckedCoding, m: Membership, finish: Finish): ValidationResult {
  if (m.member) return finishMember(m, coding, finish);
  const notIn = `The code '${coding.code}' from system '${coding.system}' is not in the value set ${vs.label}`;
  return { result: false, messages: [notIn, ...m.reasons] };
}

/** True when one coding is valid; unknown codes of complete CodeSystems are still reported. */
async function validateConcept(
  vs: CompiledValueSet,
  codings: readonly Coding[],
  finish: Finish,
  ctx: TerminologyContext,
): Promise<ValidationResult> {
  const outcomes: ValidationResult[] = [];
  const unknown: string[] = [];
  for (const [i, c] of codings.entries()) {
    if (c.system === undefined || c.code === undefined) {
      outcomes.push({ result: false, messages: [`codeableConcept.coding[${i}] has no ${c.system === undefined ? 'system' : 'code'}`] });
      continue;
    }
    const coding = { system: c.system, version: c.version, code: c.code, display: c.display };
    outcomes.push(await validateCoding(vs, coding, finish, ctx));
    const cs = await ctx.codeSystem(c.system, c.version);
    if (cs !== null && cs.content === 'complete' && cs.find(c.code) === undefined) unknown.push(unknownCodeMessage(c.code, cs));
  }
  const valid = outcomes.find((o) => o.result);
  if (valid === undefined) return { result: false, messages: outcomes.flatMap((o) => o.messages) };
  return { result: true, display: valid.display, messages: [...valid.messages, ...unknown] };
}
