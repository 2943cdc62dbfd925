import { OAuthError } from '../../errors.ts';
import type { RefreshToken } from '../../store/types.ts';
import type { AuthDeps } from '../deps.ts';
import { grantContext } from '../grant-context.ts';
import { checkReadableScopes, grantUser, issueUserTokens } from '../issue.ts';
import { splitScopes } from '../scopes.ts';
import { sha256Hex } from '../secrets.ts';
import type { Grant } from './types.ts';

/** The stored refresh token, if it is usable by this client: unknown, revoked, expired or foreign ones are not. */
async function usableToken(deps: AuthDeps, value: string, clientId: string): Promise<RefreshToken> {
  const t = await deps.store.oauth.getRefreshToken(sha256Hex(value));
  const now = deps.clock.now();
  if (!t || t.clientId !== clientId) throw new OAuthError('invalid_grant', 'the refresh token is unknown or was issued to another client');
  if (t.revokedAt !== null || (await deps.store.oauth.isRevoked(null, t.grantId))) throw new OAuthError('invalid_grant', 'the refresh token was revoked');
  if (t.expiresAt <= now) throw new OAuthError('invalid_grant', 'the refresh token has expired');
  return t;
}

/** RFC 6749 6: a requested scope may only narrow the original grant. */
function narrowedScopes(form: URLSearchParams, granted: string[]): string[] {
  if (!form.has('scope')) return granted;
  const requested = splitScopes(form.get('scope'));
  const extra = requested.filter((s) => !granted.includes(s));
  if (requested.length === 0 || extra.length > 0) {
    throw new OAuthError('invalid_scope', extra.length ? `scope exceeds the original grant: ${extra.join(' ')}` : 'scope is empty');
  }
  return requested;
}

/**
 * refresh_token (RFC 6749 6, OIDC Core 12): returns a new access_token and id_token. The refresh token
 * stays valid until it expires or is revoked; no new refresh_token is issued (it is not rotated).
 */
export const refreshToken: Grant = {
  grantType: 'refresh_token',
  parameters: ['refresh_token', 'scope'],
  async handle(deps, { client }, form) {
    const value = form.get('refresh_token');
    if (!value) throw new OAuthError('invalid_request', 'refresh_token is required');
    const t = await usableToken(deps, value, client.clientId);
    const scopes = narrowedScopes(form, splitScopes(t.scope));
    checkReadableScopes(client, scopes);
    const user = await grantUser(deps, t.tenant, t.userId);
    const grant = { client, tenant: t.tenant, userId: t.userId, scopes, grantId: t.grantId, authTime: t.authTime, nonce: null, ...grantContext(t) };
    return issueUserTokens(deps, grant, user);
  },
};
