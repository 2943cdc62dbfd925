import { FhirError } from '../../errors.ts';
import type { Store } from '../../store/types.ts';

/**
 * Throws 404 for a tenant that does not exist. Tenants are never deleted, so known ones are remembered
 * and the check costs a database read only the first time.
 */
export function tenantChecker(store: Store): (tenant: string | undefined) => Promise<string> {
  const known = new Set<string>();
  return async (tenant) => {
    if (!tenant) throw new FhirError('not-found', 'No tenant in the path');
    if (!known.has(tenant)) {
      if (!(await store.tenants.get(tenant))) throw new FhirError('not-found', `Tenant '${tenant}' does not exist`);
      known.add(tenant);
    }
    return tenant;
  };
}
