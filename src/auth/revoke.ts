import { OAuthError } from '../errors.ts';
import { authenticateClient, type AuthenticatedClient, type TokenRequest } from './client-auth.ts';
import type { AuthDeps } from './deps.ts';
import { revokeGrant } from './issue.ts';
import { clientLimitKey, enforce } from './rate-limit.ts';
import { sha256Hex } from './secrets.ts';
import { assertionAudiences, rejectDuplicates } from './token-endpoint.ts';

/** Authenticates the caller of the revocation or introspection endpoint and reads the `token` parameter. */
export async function tokenEndpointCall(deps: AuthDeps, req: TokenRequest, path: string): Promise<{ client: AuthenticatedClient; token: string }> {
  const base = deps.config.baseUrl;
  const client = await authenticateClient(deps, req, assertionAudiences(base, `${base}${path}`));
  enforce(deps.limits.tokenClient, clientLimitKey(client.client.clientId, client.method, req.ip));
  rejectDuplicates(req.form);
  const token = req.form.get('token');
  if (!token) throw new OAuthError('invalid_request', 'token is required');
  return { client, token };
}

async function revokeRefresh(deps: AuthDeps, token: string, clientId: string): Promise<boolean> {
  const t = await deps.store.oauth.getRefreshToken(sha256Hex(token));
  if (!t) return false;
  if (t.clientId === clientId) await revokeGrant(deps, t.grantId);
  return true;
}

async function revokeAccess(deps: AuthDeps, token: string, clientId: string): Promise<boolean> {
  let verified;
  try {
    verified = await deps.verifyAccess(token);
  } catch {
    return false;
  }
  if (verified.client_id === clientId) {
    await deps.revocations.add({ kind: 'jti', value: verified.jti, revokedAt: deps.clock.now(), expiresAt: verified.exp * 1000 });
  }
  return true;
}

/**
 * Token revocation (RFC 7009 2.1): a refresh token revokes its whole grant (and the access tokens issued
 * from it); an access token is revoked by its `jti`. Unknown, invalid or other clients' tokens change
 * nothing and still answer 200, so the endpoint reveals nothing about them (RFC 7009 2.2).
 */
export async function revokeToken(deps: AuthDeps, req: TokenRequest): Promise<void> {
  const { client, token } = await tokenEndpointCall(deps, req, '/oauth2/revoke');
  const id = client.client.clientId;
  const accessFirst = req.form.get('token_type_hint') === 'access_token' || token.split('.').length === 3;
  if (accessFirst) {
    if (!(await revokeAccess(deps, token, id))) await revokeRefresh(deps, token, id);
  } else if (!(await revokeRefresh(deps, token, id))) {
    await revokeAccess(deps, token, id);
  }
}
