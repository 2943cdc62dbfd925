import { decodeJwt } from 'jose';
import { OAuthError } from '../errors.ts';
import { authenticateClient, mayHoldRefreshTokens, type AuthenticatedClient, type TokenRequest } from './client-auth.ts';
import { tokenEndpoint, type AuthDeps } from './deps.ts';
import { grants } from './grants/index.ts';
import type { Grant, TokenResponse } from './grants/types.ts';
import { clientLimitKey, enforce } from './rate-limit.ts';

/** RFC 6749 3.2: parameters must not be included more than once. */
export function rejectDuplicates(form: URLSearchParams): void {
  const seen = new Set<string>();
  for (const key of form.keys()) {
    if (seen.has(key)) throw new OAuthError('invalid_request', `parameter '${key}' is repeated`);
    seen.add(key);
  }
}

function supportedGrant(form: URLSearchParams): Grant {
  const type = form.get('grant_type');
  if (!type) throw new OAuthError('invalid_request', 'grant_type is required');
  const grant = grants.get(type);
  if (!grant) throw new OAuthError('unsupported_grant_type', `grant_type '${type}' is not supported`);
  return grant;
}

/**
 * The form as a grant's handler sees it: only the parameters the grant declares (node-oidc-provider
 * does the same), so its list is the whole of what it may read. Duplicates were refused before.
 */
function grantParameters(grant: Grant, form: URLSearchParams): URLSearchParams {
  const params = new URLSearchParams();
  for (const name of grant.parameters) {
    const value = form.get(name);
    if (value !== null) params.set(name, value);
  }
  return params;
}

function allowedGrant(grant: Grant, { client }: AuthenticatedClient): void {
  if (!client.grants.includes(grant.grantType)) {
    throw new OAuthError('unauthorized_client', `this client may not use the ${grant.grantType} grant`);
  }
  // A public client registered with the grant by an older release holds refresh tokens issued before.
  if (grant.grantType === 'refresh_token' && !mayHoldRefreshTokens(client)) {
    throw new OAuthError('unauthorized_client', 'a public client may not refresh tokens: they are neither rotated nor sender-constrained (RFC 9700 2.2.2); sign in again');
  }
}

/** Values a client assertion's `aud` may take at an endpoint: its URL or the issuer (RFC 7523 3, SMART). */
export function assertionAudiences(baseUrl: string, endpointUrl: string): string[] {
  return [endpointUrl, baseUrl, `${baseUrl}/`];
}

/**
 * The token endpoint (RFC 6749 3.2) as a pipeline: client authentication -> per-client rate limit ->
 * duplicate-parameter check -> grant type supported -> grant allowed for the client -> grant handler,
 * which is given the parameters its grant declares and no others.
 * (No-cache headers, the form-body check and the per-IP limit are the HTTP layer's.)
 */
export async function handleTokenRequest(deps: AuthDeps, req: TokenRequest): Promise<TokenResponse> {
  const url = tokenEndpoint(deps.config.baseUrl);
  const client = await authenticateClient(deps, req, assertionAudiences(deps.config.baseUrl, url));
  if (!deps.audit) return grantFor(deps, client, req);
  const audit = deps.audit;
  const grantType = req.form.get('grant_type') ?? '';
  const requestor = { clientId: client.client.clientId, ...(req.ip ? { address: req.ip } : {}) };
  try {
    const issued = await grantFor(deps, client, req);
    const claims = decodeJwt(issued.access_token);
    audit.record(client.client.tenant, {
      kind: 'token', ok: true, detail: grantType,
      requestor: { ...requestor, ...(claims.sub !== requestor.clientId && typeof claims.sub === 'string' ? { user: claims.sub } : {}), ...(typeof claims.fhirUser === 'string' ? { fhirUser: claims.fhirUser } : {}) },
    });
    return issued;
  } catch (err) {
    audit.record(client.client.tenant, { kind: 'token', ok: false, detail: `${grantType} (${err instanceof OAuthError ? err.error : 'server_error'})`, requestor });
    throw err;
  }
}

/** The pipeline's steps after client authentication. */
function grantFor(deps: AuthDeps, client: AuthenticatedClient, req: TokenRequest): Promise<TokenResponse> {
  enforce(deps.limits.tokenClient, clientLimitKey(client.client.clientId, client.method, req.ip));
  rejectDuplicates(req.form);
  const grant = supportedGrant(req.form);
  allowedGrant(grant, client);
  return grant.handle(deps, client, grantParameters(grant, req.form));
}
