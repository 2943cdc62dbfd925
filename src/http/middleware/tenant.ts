import type { MiddlewareHandler } from 'hono';
import { FhirError } from '../../errors.ts';
import type { Store } from '../../store/types.ts';
import type { AppEnv } from '../env.ts';

/**
 * 404 for a tenant that does not exist. Tenants are never deleted, so known ones are remembered and
 * the check costs a database read only the first time.
 */
export function tenantGuard(store: Store): MiddlewareHandler<AppEnv> {
  const known = new Set<string>();
  return async (c, next) => {
    const tenant = c.req.param('tenant');
    if (!tenant) throw new FhirError('not-found', 'No tenant in the path');
    if (!known.has(tenant)) {
      if (!(await store.tenants.get(tenant))) throw new FhirError('not-found', `Tenant '${tenant}' does not exist`);
      known.add(tenant);
    }
    c.set('tenant', tenant);
    await next();
  };
}
