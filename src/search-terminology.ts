import type { CodeSet } from './fhir/search-compile.ts';
import { MAX_SEARCH_VALUES } from './fhir/search-values.ts';
import { subsumptionValueSet, valueSetByCanonical, valueSetCodes } from './terminology/ops/value-set-codes.ts';
import type { TerminologyContext } from './terminology/context.ts';
import type { ValueSetTarget } from './terminology/input/value-set-target.ts';
import type { TerminologyService } from './terminology/service.ts';
import type { WrittenTerminology } from './terminology/written-source.ts';

/**
 * Search's `expandCodes` (FhirDeps) over a terminology service: the codes of a CodeSet in the tenant's
 * terminology context (its stored code systems and value sets, and the core ones; with `written`, a transaction's own
 * in front of them: TerminologyService.contextWith).
 */
export function codesExpander(service: TerminologyService) {
  return async (tenant: string, codes: CodeSet, written?: WrittenTerminology) => {
    const context = written === undefined ? await service.context(tenant) : await service.contextWith(tenant, written);
    const target = codes.kind === 'value-set' ? await valueSetOf(context, codes) : subsumptionValueSet(codes.op, codes.codes);
    return valueSetCodes(context, target, MAX_SEARCH_VALUES);
  };
}

/**
 * The ValueSet `:in` names: the one with its canonical URL, else the tenant's ValueSet it locates
 * (CodeSet `id`: `ValueSet/<id>`, or that under the tenant's FHIR base), else none, the canonical's 400.
 */
async function valueSetOf(context: TerminologyContext, codes: CodeSet & { kind: 'value-set' }): Promise<ValueSetTarget> {
  const canonical = valueSetByCanonical(codes.canonical);
  if (codes.id === undefined || canonical.kind !== 'url') return canonical;
  if ((await context.valueSet(canonical.url, canonical.version)) !== null) return canonical;
  return (await context.valueSetById(codes.id)) === null ? canonical : { kind: 'id', id: codes.id };
}
