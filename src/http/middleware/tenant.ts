import { FhirError } from '../../errors.ts';
import type { Store } from '../../store/types.ts';

/**
 * Throws 404 for a tenant that does not exist. Tenants are never deleted, so known ones are remembered
 * and the check costs a database read only the first time.
 */
export function tenantChecker(store: Store): TenantChecker {
  const known = new Set<string>();
  const check = async (tenant: string | undefined) => {
    if (!tenant) throw new FhirError('not-found', 'No tenant in the path');
    if (!known.has(tenant)) {
      if (!(await store.tenants.get(tenant))) throw new FhirError('not-found', `Tenant '${tenant}' does not exist`);
      known.add(tenant);
    }
    return tenant;
  };
  return Object.assign(check, { known: (tenant: string | undefined) => tenant !== undefined && known.has(tenant) });
}

/** Resolves to the tenant or throws 404; `known` says without waiting whether it was seen to exist. */
export interface TenantChecker {
  (tenant: string | undefined): Promise<string>;
  known(tenant: string | undefined): boolean;
}
