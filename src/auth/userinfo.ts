import { OAuthError } from '../errors.ts';
import { bearerChallenge } from './bearer.ts';
import { userClaims } from './claims.ts';
import { fhirBaseOf } from '../config.ts';
import type { AuthDeps } from './deps.ts';
import { splitScopes } from './scopes.ts';
import type { VerifiedToken } from './tokens.ts';

function bearerError(error: 'invalid_token' | 'insufficient_scope', message: string, status: number): OAuthError {
  return new OAuthError(error, message, status, bearerChallenge({ error, message }));
}

/**
 * OIDC Core 5.3 UserInfo: the signed-in user's claims the token's scopes release and its client may read.
 * Needs an access token from a user sign-in that was granted `openid`.
 */
export async function userInfo(deps: AuthDeps, token: VerifiedToken): Promise<Record<string, unknown>> {
  const scopes = splitScopes(token.scope);
  if (!scopes.includes('openid')) throw bearerError('insufficient_scope', 'the access token was not granted the openid scope', 403);
  const [user, client] = await Promise.all([deps.store.users.get(token.tenant, token.sub), deps.store.clients.get(token.client_id)]);
  if (!user || user.disabled || !client) throw bearerError('invalid_token', 'the access token does not belong to a signed-in user', 401);
  const fhirUser = user.fhirUser && !/^https?:/.test(user.fhirUser) ? `${fhirBaseOf(deps.config.baseUrl, token.tenant)}/${user.fhirUser}` : user.fhirUser;
  return { sub: user.id, ...userClaims({ ...user, fhirUser }, scopes, client.readAttributes) };
}
