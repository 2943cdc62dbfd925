import { compareVersions } from './version.ts';
import type { TerminologySource } from './source.ts';

/**
 * A tenant's own terminology in front of the shared FHIR R4 core: a CodeSystem or ValueSet the
 * tenant stored wins over the core one with the same URL (and version), and by id over the core one
 * with the same id (a deleted one too: it is gone, not replaced by the core). The change token
 * belongs to the tenant alone; the core is read-only and never changes.
 */
export function layeredSource(tenant: TerminologySource, core: TerminologySource): TerminologySource {
  return {
    async codeSystem(url, version, asOf) {
      return (await tenant.codeSystem(url, version, asOf)) ?? core.codeSystem(url, version, asOf);
    },
    async codeSystemVersions(url) {
      const [own, shared] = await Promise.all([tenant.codeSystemVersions?.(url) ?? [], core.codeSystemVersions?.(url) ?? []]);
      return [...new Set([...own, ...shared])].sort(compareVersions);
    },
    async valueSet(url, version, asOf) {
      return (await tenant.valueSet(url, version, asOf)) ?? core.valueSet(url, version, asOf);
    },
    async codeSystemById(id) {
      const own = await tenant.codeSystemById(id);
      return own !== null || (await tenant.holds?.('CodeSystem', id)) ? own : core.codeSystemById(id);
    },
    async valueSetById(id) {
      const own = await tenant.valueSetById(id);
      return own !== null || (await tenant.holds?.('ValueSet', id)) ? own : core.valueSetById(id);
    },
    changeToken: () => tenant.changeToken(),
  };
}
