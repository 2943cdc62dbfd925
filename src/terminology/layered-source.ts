import type { TerminologySource } from './source.ts';

/**
 * A tenant's own terminology in front of the shared FHIR R4 core: a CodeSystem or ValueSet the
 * tenant stored wins over the core one with the same URL (and version). Instance-level access by
 * id and the change token belong to the tenant alone; the core is read-only and never changes.
 */
export function layeredSource(tenant: TerminologySource, core: TerminologySource): TerminologySource {
  return {
    async codeSystem(url, version, asOf) {
      return (await tenant.codeSystem(url, version, asOf)) ?? core.codeSystem(url, version, asOf);
    },
    async valueSet(url, version, asOf) {
      return (await tenant.valueSet(url, version, asOf)) ?? core.valueSet(url, version, asOf);
    },
    codeSystemById: (id) => tenant.codeSystemById(id),
    valueSetById: (id) => tenant.valueSetById(id),
    changeToken: () => tenant.changeToken(),
    currentChangeToken: () => tenant.currentChangeToken?.(),
  };
}
