import { OAuthError } from '../../errors.ts';
import type { AuthCode, RevocationQuery } from '../../store/types.ts';
import { OFFLINE_SCOPES } from '../claims.ts';
import { mayHoldRefreshTokens, type AuthenticatedClient, type AuthMethod } from '../client-auth.ts';
import type { AuthDeps } from '../deps.ts';
import { grantContext } from '../grant-context.ts';
import { checkReadableScopes, grantUser, issueUserTokens, revokeGrant, signedInUser, stillRegistered } from '../issue.ts';
import { CODE_VERIFIER, s256, verifierMatches } from '../pkce.ts';
import { splitScopes } from '../scopes.ts';
import { randomToken, sha256Hex } from '../secrets.ts';
import type { Grant } from './types.ts';

function required(form: URLSearchParams, name: string): string {
  const v = form.get(name);
  if (!v) throw new OAuthError('invalid_request', `${name} is required`);
  return v;
}

/**
 * RFC 7636 4.6 and RFC 9700 2.1.1: a code requested with PKCE needs the matching verifier, and only it. The contract
 * makes code_verifier a required parameter of such a code, and a required parameter missing `invalid_request`; a
 * verifier that does not match, or one sent for a code without PKCE, is `invalid_grant`.
 */
function checkPkce(code: AuthCode, verifier: string | null): void {
  if (code.codeChallenge === null) {
    if (verifier !== null) throw new OAuthError('invalid_grant', 'code_verifier sent for a code requested without PKCE');
    return;
  }
  if (verifier === null) throw new OAuthError('invalid_request', 'code_verifier is required: the code was requested with PKCE');
  if (!verifierMatches(verifier, code.codeChallenge)) throw new OAuthError('invalid_grant', 'code_verifier does not match the code_challenge');
}

/**
 * Whether the request presenting a used code proves it comes from the party the code was issued to: a client
 * that authenticated (a secret, a key), or, for a public one (which authenticates by naming itself), the PKCE
 * verifier of the code's challenge. Whoever only read the code (intercepted on its way to a native app's
 * redirect, in a log, a browser's history) proves neither: PKCE gave them no token, so there is nothing of theirs
 * to revoke, and revoking would only end the user's session with the app.
 */
function provesOwnership(code: AuthCode, method: AuthMethod, verifier: string | null): boolean {
  if (method !== 'none') return true;
  return code.codeChallenge !== null && verifier !== null && verifierMatches(verifier, code.codeChallenge);
}

/**
 * Redeems the code with one conditional UPDATE that also requires the request's redirect URI and PKCE verifier to
 * match it (as node-oidc-provider checks them before consuming): a request that does not match is refused and leaves
 * the code unused, so whoever intercepted a code without its verifier cannot use it up before its client does. A
 * replay by its client revokes everything issued from it (RFC 9700 4.4) when the request proves it is that client's
 * (provesOwnership). A used code presented by another client is a client mismatch (RFC 6749 4.1.3), as an unused one
 * is: anyone who read a used code (a log, a Referer) could otherwise end its user's grant through any client, a
 * public one needing no secret; so too through its own public client without its verifier.
 */
async function redeem(deps: AuthDeps, value: string, { client, method }: AuthenticatedClient, redirectUri: string, verifier: string | null): Promise<AuthCode> {
  const clientId = client.clientId;
  const proof = { redirectUri, challenge: verifier === null ? null : s256(verifier) };
  const r = await deps.store.oauth.redeemCode(sha256Hex(value), clientId, deps.clock.now(), proof);
  if (r.status === 'redeemed') return r.code;
  if (r.status === 'refused') {
    if (r.code.redirectUri !== redirectUri) throw new OAuthError('invalid_grant', 'redirect_uri differs from the one of the authorization request');
    checkPkce(r.code, verifier);
    throw new OAuthError('invalid_grant', 'the code_verifier does not match the code');
  }
  if (r.status === 'replayed' && r.code.clientId === clientId) {
    if (provesOwnership(r.code, method, verifier)) {
      await revokeGrant(deps, r.code.grantId);
      deps.log.warn('authorization code replayed; its grant is revoked', { clientId, grantId: r.code.grantId });
    } else {
      deps.log.warn('authorization code replayed without its PKCE verifier; its grant is kept', { clientId, grantId: r.code.grantId });
    }
    throw new OAuthError('invalid_grant', 'the authorization code was already used');
  }
  throw new OAuthError('invalid_grant', 'the authorization code is unknown, expired or was issued to another client');
}

/**
 * Stores the refresh token of a redeemed code and returns its value. A revocation of the client's or the user's tokens
 * that committed after the redemption's checks and before this insert did not see the token (it updates the refresh
 * tokens stored then): it is looked for again once the token is stored, and if found the grant is revoked (the token
 * with it) and the redemption fails, as it would have a moment earlier.
 */
async function storeRefreshToken(deps: AuthDeps, code: AuthCode, clientId: string, scope: string, signedInClient: NonNullable<RevocationQuery['client']>): Promise<string> {
  const refresh = randomToken(32);
  const now = deps.clock.now();
  await deps.store.oauth.createRefreshToken({
    tokenHash: sha256Hex(refresh), grantId: code.grantId, clientId, tenant: code.tenant, userId: code.userId, scope, authTime: code.authTime,
    ...(code.authRevocationSeq !== undefined && { authRevocationSeq: code.authRevocationSeq }), createdAt: now,
    expiresAt: now + deps.config.refreshTokenTtl * 1000, revokedAt: null, ...grantContext(code),
  });
  if (await deps.store.oauth.isRevoked({ client: signedInClient, user: signedInUser(code.userId, code) })) {
    await revokeGrant(deps, code.grantId);
    throw new OAuthError('invalid_grant', "the client's or the user's tokens were revoked after this sign-in: authorize again");
  }
  return refresh;
}

/**
 * authorization_code (RFC 6749 4.1.3, OIDC Core 3.1.3): single-use, short-lived codes bound to client
 * and redirect URI, PKCE S256. Issues access_token and id_token; a refresh_token only when the
 * sign-in was granted `offline_access` / `offline` and the client may hold one (mayHoldRefreshTokens).
 */
export const authorizationCode: Grant = {
  grantType: 'authorization_code',
  parameters: ['code', 'redirect_uri', 'code_verifier'],
  async handle(deps, authenticated, form) {
    const { client } = authenticated;
    const value = required(form, 'code');
    const redirectUri = required(form, 'redirect_uri');
    const verifier = form.get('code_verifier');
    if (verifier !== null && !CODE_VERIFIER.test(verifier)) throw new OAuthError('invalid_request', 'code_verifier must be 43-128 characters of [A-Za-z0-9._~-]');
    // The redirect URI and the verifier were matched by the redemption itself (redeem).
    const code = await redeem(deps, value, authenticated, redirectUri, verifier);
    // A sign-in that a revocation of the client's tokens came after (a disable, even one undone; a secret rotated for a
    // leak; keys or scopes taken away) gives none: the code is the promise of an access token. "After" by the
    // revocation's number where the code kept the client record's at the sign-in, else by its time (at or after).
    const signedInClient = { id: client.clientId, readAt: code.authTime, ...(code.authClientRevocationSeq !== undefined && { seq: code.authClientRevocationSeq }) };
    if (await deps.store.oauth.isRevoked({ client: signedInClient })) {
      throw new OAuthError('invalid_grant', "the client's tokens were revoked after this sign-in: authorize again");
    }
    // A code issued before its client could no longer hold refresh tokens (a public one) gives none, and says so; nor
    // resource scopes the client's registration no longer implies.
    const scopes = stillRegistered(client, splitScopes(code.scope)).filter((s) => !OFFLINE_SCOPES.includes(s) || mayHoldRefreshTokens(client));
    checkReadableScopes(client, scopes);
    const { user, userReadAt } = await grantUser(deps, code.tenant, code.userId, code);
    const grant = {
      client, tenant: code.tenant, userId: code.userId, scopes, grantId: code.grantId, authTime: code.authTime, nonce: code.nonce, userReadAt,
      ...grantContext(code),
    };
    const body = await issueUserTokens(deps, grant, user);
    // The refresh token keeps the scopes granted (without patient/ ones when no patient is in context).
    if (scopes.some((s) => OFFLINE_SCOPES.includes(s))) body.refresh_token = await storeRefreshToken(deps, code, client.clientId, body.scope, signedInClient);
    return body;
  },
};
