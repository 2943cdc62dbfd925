import { Hono, type Context } from 'hono';
import { bearerChallenge, verifyBearer, type BearerRefusal } from '../auth/bearer.ts';
import type { AuthDeps } from '../auth/deps.ts';
import { LaunchRequest, mintLaunch } from '../auth/launch-mint.ts';
import { accessFromScopes, splitScopes, type CompleteConditions } from '../auth/scopes.ts';
import { bodyLimits } from '../config.ts';
import { FhirError, OAuthError } from '../errors.ts';
import type { FhirDeps, FhirRequest } from '../fhir/crud.ts';
import { readLimited } from './body.ts';

/** The EHR launch endpoint's path. */
export const LAUNCH_ROUTE = '/oauth2/launch';

const unauthorized = (r: BearerRefusal) => new OAuthError(r.error ?? 'invalid_token', r.message, 401, bearerChallenge(r), { cause: r.cause });

/** The request's token, of any tenant, and what its scopes read there (as on the FHIR API, scope filters completed). */
async function bearerRequest(deps: AuthDeps, header: string | undefined, completeConditions: CompleteConditions): Promise<FhirRequest> {
  const token = await verifyBearer(header, deps.verifyAccess, unauthorized);
  const access = accessFromScopes(splitScopes(token.scope), token.client_id, token.patient);
  if (access.incomplete) await access.complete(token.tenant, completeConditions);
  return { tenant: token.tenant, access };
}

/** A body field as JSON paths name it: `fhirContext[1].identifier.value`. */
const fieldPath = (path: readonly PropertyKey[]) => path.map((p, n) => (typeof p === 'number' ? `[${p}]` : `${n ? '.' : ''}${String(p)}`)).join('');

/** The JSON body, checked by LaunchRequest: anything else is `invalid_request` naming what is wrong. */
async function launchBody(c: Context, limit: number): Promise<LaunchRequest> {
  const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') throw new OAuthError('invalid_request', 'the body must be application/json');
  let body: unknown;
  try {
    body = JSON.parse(await readLimited(c.req.raw, limit, 'the launch request (JSON)'));
  } catch (err) {
    throw new OAuthError('invalid_request', err instanceof FhirError ? err.message : 'the body is not JSON', 400, {}, { cause: err });
  }
  const parsed = LaunchRequest.safeParse(body);
  if (!parsed.success) {
    const problems = parsed.error.issues.slice(0, 5).map((i) => (i.path.length ? `${fieldPath(i.path)}: ${i.message}` : i.message));
    throw new OAuthError('invalid_request', `the body is not valid: ${problems.join('; ')}`);
  }
  return parsed.data;
}

/**
 * A refused read as the OAuth endpoints answer (RFC 6750 3.1): 403 `insufficient_scope` with its
 * challenge; 404 `not_found` for a resource unknown in the token's tenant or deleted (a launch has no
 * use for the difference, and another tenant's id is simply unknown here); other FHIR errors
 * (an invalid id) `invalid_request`. A 5xx is left to the error handler.
 */
function asOAuth(err: unknown): unknown {
  if (!(err instanceof FhirError) || err.status >= 500) return err;
  if (err.status === 403) {
    return new OAuthError('insufficient_scope', err.message, 403, bearerChallenge({ error: 'insufficient_scope', message: err.message }), { cause: err });
  }
  if (err.status === 404 || err.status === 410) return new OAuthError('not_found', err.message, 404, {}, { cause: err });
  return new OAuthError('invalid_request', err.message, 400, {}, { cause: err });
}

const postOnly = () => {
  throw new OAuthError('invalid_request', 'this endpoint accepts POST only', 405, { Allow: 'POST' });
};

/**
 * `POST /oauth2/launch`: an EHR's front-end mints the `launch` of a SMART EHR launch (src/auth/launch-mint.ts)
 * with its bearer token; errors as every OAuth endpoint's, `{error, error_description}`.
 */
export function launchRoutes(deps: AuthDeps, fhir: FhirDeps, completeConditions: CompleteConditions): Hono {
  const app = new Hono();
  const limit = bodyLimits(deps.config).form;
  app.post(LAUNCH_ROUTE, async (c) => {
    const req = await bearerRequest(deps, c.req.header('authorization'), completeConditions);
    const input = await launchBody(c, limit);
    const minted = await mintLaunch(deps, fhir, req, input).catch((err: unknown) => Promise.reject(asOAuth(err)));
    return new Response(JSON.stringify(minted), {
      status: 201, headers: { 'Content-Type': 'application/json;charset=UTF-8', 'Cache-Control': 'no-store', Pragma: 'no-cache' },
    });
  });
  app.all(LAUNCH_ROUTE, postOnly);
  return app;
}
