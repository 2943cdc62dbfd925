import { FhirError } from '../../errors.ts';
import type { Store } from '../../store/types.ts';
import type { SyncOrAsync } from '../../sync-or-async.ts';

/**
 * Throws 404 for a tenant that does not exist. Tenants are never deleted, so known ones are remembered:
 * the check reads the database only the first time, and answers at once (no promise) after that.
 */
export function tenantChecker(store: Store): TenantChecker {
  const known = new Set<string>();
  const exists = async (tenant: string) => {
    if (!(await store.tenants.get(tenant))) throw new FhirError('not-found', `Tenant '${tenant}' does not exist`);
    known.add(tenant);
    return tenant;
  };
  return (tenant) => {
    if (!tenant) throw new FhirError('not-found', 'No tenant in the path');
    return known.has(tenant) ? tenant : exists(tenant);
  };
}

/** The tenant, at once when it was seen to exist, else once read; a 404 when there is none. */
export type TenantChecker = (tenant: string | undefined) => SyncOrAsync<string>;
