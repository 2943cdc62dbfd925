import type { CodeSet } from './fhir/search-compile.ts';
import { MAX_SEARCH_VALUES } from './fhir/search-values.ts';
import { subsumptionValueSet, valueSetByCanonical, valueSetCodes } from './terminology/ops/value-set-codes.ts';
import type { TerminologyService } from './terminology/service.ts';

/**
 * Search's `expandCodes` (FhirDeps) over a terminology service: the codes of a CodeSet in the tenant's
 * terminology context (its stored code systems and value sets, and the core ones).
 */
export function codesExpander(service: TerminologyService) {
  return async (tenant: string, codes: CodeSet) => {
    const target = codes.kind === 'value-set' ? valueSetByCanonical(codes.canonical) : subsumptionValueSet(codes.op, codes.codes);
    return valueSetCodes(await service.context(tenant), target, MAX_SEARCH_VALUES);
  };
}
