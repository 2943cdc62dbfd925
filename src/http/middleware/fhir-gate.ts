import type { PatientHeldCheck } from '../../auth/patient-held.ts';
import type { Context, MiddlewareHandler, Next } from 'hono';
import { withRegexAccounts } from '../../regex-guard.ts';
import type { CompleteConditions } from '../../auth/scopes.ts';
import type { TokenVerifier } from '../../auth/tokens.ts';
import type { Store } from '../../store/types.ts';
import type { SyncOrAsync } from '../../sync-or-async.ts';
import { parseExact, stringifyExact } from '../../fhir/exact-json.ts';
import type { AppEnv } from '../env.ts';
import { negotiatesAccept } from '../binary.ts';
import { checkAccept } from '../fhir-response.ts';
import { rememberText } from '../content-coding.ts';
import { bearerAuthenticator, type Bearer } from './bearer.ts';
import { tenantChecker } from './tenant.ts';

export interface FhirGateOptions {
  store: Store;
  verify: TokenVerifier;
  /** Completes the scope filters that need the server's data (`:in`); without it such scopes grant nothing. */
  completeConditions?: CompleteConditions;
  /** Whether a user token's patient in context is still one its user may choose (src/auth/patient-held.ts); without it, not asked. */
  patientHeld?: PatientHeldCheck;
  /** Told after every successful write request (not a GET/HEAD, not an operation) of a tenant. */
  onWrite(tenant: string): void;
}

/** Where a tenant's FHIR API is mounted (`{fhir_base}`), as Hono routes and labels it. */
export const FHIR_BASE_ROUTE = '/tenants/:tenant/fhir/R4';

/** The gate's own route in the FHIR sub-app: a request it refuses is counted under FHIR_BASE_ROUTE + this. */
export const GATE_ROUTE = '/*';

/** Paths below a tenant's FHIR base that need no token (discovery). */
const PUBLIC = new Set(['/metadata', '/.well-known/smart-configuration']);

/** The parts of a request below `/tenants/{tenant}/fhir/R4` that the gate looks at. */
export interface GateRequest {
  /** The tenant path segment as routed. */
  tenant: string | undefined;
  /** The path below the FHIR base, without a trailing slash (`/Patient/1`). */
  rest: string;
  /** The `_format` query parameter, or null. */
  format: string | null;
  accept: string | null | undefined;
  authorization: string | null | undefined;
}

/** What the gate admits: the tenant, and the bearer token unless the path is public. */
export interface Admitted {
  tenant: string;
  bearer: Bearer | null;
}

/**
 * Runs the admission checks: at once (no promise) in the steady state, a known tenant and a token
 * verified before; else as a promise. A refusal known at once is thrown at once.
 */
export type FhirAdmission = (r: GateRequest) => SyncOrAsync<Admitted>;

/**
 * The checks in front of a tenant's FHIR routes, as a pipeline of steps: tenant exists (404) ->
 * `Accept`/`_format` is JSON (406; not for the discovery document, nor Binary instances and `$graphql`,
 * which negotiate their content themselves) -> bearer token of this tenant
 * (401/403; not for public paths). Shared by the Hono middleware and the hot-route dispatcher.
 */
export function fhirAdmission(o: Pick<FhirGateOptions, 'store' | 'verify' | 'completeConditions' | 'patientHeld'>): FhirAdmission {
  const checkTenant = tenantChecker(o.store);
  const authenticate = bearerAuthenticator(o.verify, o.completeConditions, o.patientHeld);
  const admitTenant = (r: GateRequest, tenant: string): SyncOrAsync<Admitted> => {
    if (r.rest !== '/.well-known/smart-configuration' && !negotiatesAccept(r.rest) && !r.rest.endsWith('/$graphql')) checkAccept(r.accept ?? undefined, r.format);
    if (PUBLIC.has(r.rest)) return { tenant, bearer: null };
    const bearer = authenticate(r.authorization ?? null, tenant);
    return bearer instanceof Promise ? bearer.then((b) => ({ tenant, bearer: b })) : { tenant, bearer };
  };
  return (r) => {
    const tenant = checkTenant(r.tenant);
    return tenant instanceof Promise ? tenant.then((t) => admitTenant(r, t)) : admitTenant(r, tenant);
  };
}

/** The FHIR admission as the one middleware of the FHIR sub-app, plus the write notification. */
export function fhirGate(o: FhirGateOptions, admit: FhirAdmission = fhirAdmission(o)): MiddlewareHandler<AppEnv> {
  // The request runs with its tenant's regex accounts (src/regex-guard.ts): what another tenant's patterns cost is not its.
  return (c, next) => withRegexAccounts(c.req.param('tenant') ?? '', () => gate(c, next));
  async function gate(c: Context<AppEnv>, next: Next): Promise<void> {
    const tenantParam = c.req.param('tenant');
    const rest = c.req.path.slice(`/tenants/${tenantParam}/fhir/R4`.length).replace(/\/$/, '');
    const { tenant, bearer } = await admit({
      tenant: tenantParam,
      rest,
      format: c.req.url.includes('_format=') ? (c.req.query('_format') ?? null) : null,
      accept: c.req.header('accept'),
      authorization: c.req.header('authorization'),
    });
    c.set('tenant', tenant);
    if (bearer) {
      c.set('token', bearer.token);
      c.set('access', bearer.access);
    }
    await next();
    const asked = c.get('answerFormat');
    if (asked ? asked.pretty : c.req.url.includes('_pretty=') && c.req.query('_pretty') === 'true') {
      const text = await prettyText(c.res);
      if (text !== null) {
        const headers = new Headers(c.res.headers);
        headers.delete('content-length');
        c.res = new Response(text, { status: c.res.status, statusText: c.res.statusText, headers });
        // Assigning c.res copies the Response: remember the text against the copy, for compression.
        rememberText(c.res, text);
      }
    }
    const method = c.req.method;
    if (method !== 'GET' && method !== 'HEAD' && c.res.status < 400 && !rest.includes('/$')) o.onWrite(tenant);
  }
}

/**
 * `_pretty=true` (FHIR R4 http 3.1.0.1.10): a FHIR JSON answer indented for people to read, or null to
 * keep the answer (not FHIR JSON, no body, or not JSON after all). Answers are written compact (stored
 * resources spliced in as they are), so this re-serialises one asked for, numbers as they were written
 * (exact-json.ts).
 */
async function prettyText(res: Response): Promise<string | null> {
  if (!res.body || !(res.headers.get('content-type') ?? '').startsWith('application/fhir+json')) return null;
  try {
    return stringifyExact(parseExact(await res.clone().text()), 2);
  } catch {
    return null;
  }
}
