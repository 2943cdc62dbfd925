import { Hono, type Context } from 'hono';
import { bearerChallenge, verifyBearer, type BearerRefusal } from '../auth/bearer.ts';
import type { TokenRequest } from '../auth/client-auth.ts';
import type { AuthDeps } from '../auth/deps.ts';
import { openidConfiguration, smartConfiguration } from '../auth/discovery.ts';
import { introspectToken } from '../auth/introspect.ts';
import { JWKS_MAX_AGE_S } from '../auth/keys.ts';
import { enforce, rateLimitKey } from '../auth/rate-limit.ts';
import { revokeToken } from '../auth/revoke.ts';
import { handleTokenRequest } from '../auth/token-endpoint.ts';
import { userInfo } from '../auth/userinfo.ts';
import { FhirError, OAuthError } from '../errors.ts';
import { bodyLimits } from '../config.ts';
import { strictQuery } from '../fhir/query-encoding.ts';
import { formCharsetNote, readFormBody } from './body.ts';
import { clientIp, requestIp } from './client-ip.ts';

const JSON_TYPE = 'application/json;charset=UTF-8';
const NO_STORE = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
/**
 * Reads an `application/x-www-form-urlencoded` body (RFC 6749 3.2), as the token endpoint requires, gzip
 * or deflate Content-Encoding decoded as on the FHIR API. One over `limit` bytes (decoded), or in
 * another coding or not in the coding it names, or not UTF-8 (its bytes, or the bytes it percent-encodes, whatever
 * charset it declares: RFC 6749 Appendix B), is `invalid_request` (every token error is a 400, README).
 */
export async function readForm(req: Request, limit: number): Promise<URLSearchParams> {
  const type = (req.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/x-www-form-urlencoded') {
    throw new OAuthError('invalid_request', 'the body must be application/x-www-form-urlencoded');
  }
  let text: string;
  try {
    text = await readFormBody(req, limit);
  } catch (err) {
    const message = err instanceof FhirError && err.category !== 'too-large' ? err.message : `the request body exceeds the limit of ${limit} bytes`;
    throw new OAuthError('invalid_request', message, 400, {}, { cause: err });
  }
  try {
    // Percent-encoded bytes that are not UTF-8 (`%FC`) refused too: URLSearchParams would read them as U+FFFD.
    return strictQuery(text);
  } catch (err) {
    throw new OAuthError('invalid_request', `${(err as Error).message}${formCharsetNote(req.headers.get('content-type') ?? undefined)}`, 400, {}, { cause: err });
  }
}

/** Rate limit per IP, then the form body only (RFC 6749 3.2: parameters in the body, none in the query). */
async function tokenRequest(deps: AuthDeps, req: Request, ip: string): Promise<TokenRequest> {
  enforce(deps.limits.tokenIp, rateLimitKey(ip));
  if (new URL(req.url).search.length > 1) throw new OAuthError('invalid_request', 'send the parameters in the form body, not in the query string');
  return { form: await readForm(req, bodyLimits(deps.config).form), authorization: req.headers.get('authorization') ?? undefined, ip };
}

const requestOf = (deps: AuthDeps, c: Context) => tokenRequest(deps, c.req.raw, clientIp(c, deps.config.trustProxy === 'on'));

/** The token endpoint's path: its Hono route and its hot-route label. */
export const TOKEN_ROUTE = '/oauth2/token';

/** `POST /oauth2/token` of a request and the server Bun passed beside it (the Hono env). */
export type TokenRoute = (req: Request, server: unknown) => Promise<Response>;

/** The token endpoint's handler, for its Hono route and the hot-route dispatcher alike. */
export function tokenRoute(deps: AuthDeps): TokenRoute {
  const trustProxy = deps.config.trustProxy === 'on';
  return async (req, server) => json(await handleTokenRequest(deps, await tokenRequest(deps, req, requestIp(req, server, trustProxy))), 200, NO_STORE);
}

function json(body: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': JSON_TYPE, ...headers } });
}

const postOnly = () => {
  throw new OAuthError('invalid_request', 'this endpoint accepts POST only', 405, { Allow: 'POST' });
};

/** A refused bearer token as an OAuth error (RFC 6750 3.1); no token at all is `invalid_token` in the body. */
const unauthorized = (r: BearerRefusal) => new OAuthError(r.error ?? 'invalid_token', r.message, 401, bearerChallenge(r), { cause: r.cause });

async function bearerUserInfo(deps: AuthDeps, c: Context): Promise<Response> {
  const token = await verifyBearer(c.req.header('authorization'), deps.verifyAccess, unauthorized);
  return json(await userInfo(deps, token), 200, NO_STORE);
}

/** `.well-known/smart-configuration` (SMART App Launch 2.x), served at the root and under each FHIR base. */
export function smartConfigurationResponse(baseUrl: string): Response {
  return json(smartConfiguration(baseUrl), 200, { 'Cache-Control': 'public, max-age=300' });
}

/** The authorization server's JSON endpoints (global, not per tenant); the login page is in authorize.ts. */
export function oauthRoutes(deps: AuthDeps): Hono {
  const app = new Hono();
  const base = deps.config.baseUrl;
  const token = tokenRoute(deps);
  app.post(TOKEN_ROUTE, (c) => token(c.req.raw, c.env));
  app.post('/oauth2/revoke', async (c) => {
    await revokeToken(deps, await requestOf(deps, c));
    return new Response(null, { status: 200, headers: NO_STORE });
  });
  app.post('/oauth2/introspect', async (c) => json(await introspectToken(deps, await requestOf(deps, c)), 200, NO_STORE));
  for (const path of [TOKEN_ROUTE, '/oauth2/revoke', '/oauth2/introspect']) app.all(path, postOnly);
  app.on(['GET', 'POST'], '/oauth2/userinfo', (c) => bearerUserInfo(deps, c));
  app.get('/oauth2/jwks', async (c) => c.json(await deps.keys.jwks(), 200, { 'Cache-Control': `public, max-age=${JWKS_MAX_AGE_S}` }));
  app.get('/.well-known/openid-configuration', () => json(openidConfiguration(base), 200, { 'Cache-Control': 'public, max-age=300' }));
  app.get('/.well-known/smart-configuration', () => smartConfigurationResponse(base));
  return app;
}
