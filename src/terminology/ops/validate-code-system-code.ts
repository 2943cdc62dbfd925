import { CodeSystemIndex } from '../compile/code-system-index.ts';
import { CompiledConceptSet } from '../compile/concept-set.ts';
import type { CodeSystemLookup } from '../compile/membership.ts';
import type { TerminologyContext } from '../context.ts';
import { invalid } from '../errors.ts';
import type { codeSystemValidateCodeParams } from '../input/operations.ts';
import type { OperationInput } from '../input/parameters.ts';
import { type CheckedCoding, type ValidationSubject, validationSubject } from '../input/subject.ts';
import type { CodeSystem } from '../model/code-system.ts';
import { splitCanonical } from '../version.ts';
import { finishMember, type ValidationResult } from './validation-result.ts';

export type CodeSystemTarget =
  | { readonly kind: 'url'; readonly url: string; readonly version?: string }
  | { readonly kind: 'inline'; readonly resource: CodeSystem & { readonly url: string } };

export interface CodeSystemValidateCodeInput {
  readonly target: CodeSystemTarget;
  readonly subject: ValidationSubject;
  readonly abstract?: boolean;
}

type RawInput = OperationInput<(typeof codeSystemValidateCodeParams)['spec']>;

/** Applies the input rules of CodeSystem/$validate-code: the system is `url`, or the coding's. */
export function codeSystemValidateCodeInput(raw: RawInput): CodeSystemValidateCodeInput {
  const inline = raw.codeSystem;
  const canonical = raw.url !== undefined ? splitCanonical(raw.url) : undefined;
  const url = canonical?.url ?? inline?.url ?? raw.coding?.system ?? raw.codeableConcept?.coding?.[0]?.system;
  if (url === undefined) throw invalid("the parameter 'url' (or an inline 'codeSystem' with a url) is required", ['url']);
  const subject = validationSubject({ ...raw, system: url, systemParam: 'url' });
  const target: CodeSystemTarget =
    inline !== undefined && raw.url === undefined
      ? { kind: 'inline', resource: { ...inline, url } }
      : { kind: 'url', url, version: raw.version ?? canonical?.version ?? raw.coding?.version };
  return { target, subject, abstract: raw.abstract };
}

/**
 * CodeSystem/$validate-code (FHIR R4 CodeSystem-validate-code): whether a code is defined by
 * the CodeSystem, with the same display, abstract, inactive and fragment rules as ValueSets.
 */
export async function validateCodeSystemCode(
  input: CodeSystemValidateCodeInput,
  deps: { readonly terminology: TerminologyContext },
): Promise<ValidationResult> {
  const cs = await resolveCodeSystem(input.target, deps.terminology);
  const lookup: CodeSystemLookup = { codeSystem: async () => cs };
  const whole = new CompiledConceptSet({ system: cs.url, where: `CodeSystem '${cs.url}'` });
  const codings = input.subject.kind === 'coding' ? [input.subject.coding] : input.subject.codings;
  const messages: string[] = [];
  for (const [i, c] of codings.entries()) {
    if (c.code === undefined || c.system === undefined) {
      messages.push(`codeableConcept.coding[${i}] has no ${c.system === undefined ? 'system' : 'code'}`);
      continue;
    }
    const coding: CheckedCoding = { system: c.system, code: c.code, display: c.display };
    if (coding.system !== cs.url) {
      messages.push(`The coding's system '${coding.system}' is not the CodeSystem '${cs.url}'`);
      continue;
    }
    const m = await whole.check(coding, lookup);
    if (!m.member) {
      messages.push(...m.reasons);
      continue;
    }
    const outcome = finishMember(m, coding, input.abstract);
    if (outcome.result) return { ...outcome, messages: [...outcome.messages, ...messages] };
    messages.push(...outcome.messages);
  }
  return { result: false, messages };
}

async function resolveCodeSystem(target: CodeSystemTarget, ctx: TerminologyContext): Promise<CodeSystemIndex> {
  if (target.kind === 'inline') {
    return new CodeSystemIndex(target.resource);
  }
  const cs = await ctx.codeSystem(target.url, target.version);
  if (cs === null) {
    const name = target.version === undefined ? target.url : `${target.url}|${target.version}`;
    throw invalid(`CodeSystem '${name}' could not be found`, ['url']);
  }
  return cs;
}
