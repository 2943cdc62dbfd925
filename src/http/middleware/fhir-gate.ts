import type { MiddlewareHandler } from 'hono';
import type { TokenVerifier } from '../../auth/tokens.ts';
import type { Store } from '../../store/types.ts';
import type { AppEnv } from '../env.ts';
import { checkAccept } from '../fhir-response.ts';
import { bearerAuthenticator } from './bearer.ts';
import { tenantChecker } from './tenant.ts';

export interface FhirGateOptions {
  store: Store;
  verify: TokenVerifier;
  /** Told after every successful write request (not a GET/HEAD, not an operation) of a tenant. */
  onWrite(tenant: string): void;
}

/** Paths below a tenant's FHIR base that need no token (discovery). */
const PUBLIC = new Set(['/metadata', '/.well-known/smart-configuration']);

/**
 * The one middleware in front of a tenant's FHIR routes, as a pipeline of steps: tenant exists (404)
 * -> `Accept`/`_format` is JSON (406; not for the discovery document) -> bearer token of this tenant
 * (401/403; not for public paths) -> route -> write notification. One middleware instead of four keeps
 * the per-request cost of the chain low.
 */
export function fhirGate(o: FhirGateOptions): MiddlewareHandler<AppEnv> {
  const checkTenant = tenantChecker(o.store);
  const authenticate = bearerAuthenticator(o.verify);
  return async (c, next) => {
    const tenant = await checkTenant(c.req.param('tenant'));
    c.set('tenant', tenant);
    const rest = c.req.path.slice(`/tenants/${tenant}/fhir/R4`.length).replace(/\/$/, '');
    if (rest !== '/.well-known/smart-configuration') {
      const format = c.req.url.includes('_format=') ? (c.req.query('_format') ?? null) : null;
      checkAccept(c.req.header('accept'), format);
    }
    if (!PUBLIC.has(rest)) await authenticate(c, tenant);
    await next();
    const method = c.req.method;
    if (method !== 'GET' && method !== 'HEAD' && c.res.status < 400 && !rest.includes('/$')) o.onWrite(tenant);
  };
}
