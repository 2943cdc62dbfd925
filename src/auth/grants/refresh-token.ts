import { OAuthError } from '../../errors.ts';
import type { RefreshToken, User } from '../../store/types.ts';
import { scopesForUser } from '../claims.ts';
import type { AuthDeps } from '../deps.ts';
import { grantContext } from '../grant-context.ts';
import { checkReadableScopes, chosenPatientHeld, grantUser, issueUserTokens, patientInContext, stillRegistered } from '../issue.ts';
import { linkingPairs, parseResourceScope, patientBoundsLifted, scopesNotImplied, splitScopes } from '../scopes.ts';
import { sha256Hex } from '../secrets.ts';
import type { Grant } from './types.ts';

/** The stored refresh token, if it is usable by this client: unknown, revoked, expired or foreign ones are not. */
async function usableToken(deps: AuthDeps, value: string, clientId: string): Promise<RefreshToken> {
  const t = await deps.store.oauth.getRefreshToken(sha256Hex(value));
  const now = deps.clock.now();
  if (!t || t.clientId !== clientId) throw new OAuthError('invalid_grant', 'the refresh token is unknown or was issued to another client');
  if (t.revokedAt !== null || (await deps.store.oauth.isRevoked({ grantId: t.grantId }))) throw new OAuthError('invalid_grant', 'the refresh token was revoked');
  if (t.expiresAt <= now) throw new OAuthError('invalid_grant', 'the refresh token has expired');
  return t;
}

/**
 * RFC 6749 6: a requested scope may only narrow the original grant, by meaning (scopesNotImplied: `patient/*.read`
 * narrows to `patient/Patient.read`, `patient/*.rs` or `patient/Observation.rs?category=laboratory`, a `user/`
 * scope to its `patient/` form while the grant has a patient in context `patient`); one that widens it is an
 * unsupported parameter value, the contract's `invalid_request` (its token errors name no `invalid_scope`). A user
 * who acts for patients holds a `user/` scope as its `patient/` form (scopesForUser), so asking again for the
 * `user/` scope the sign-in asked for (or one stored before) narrows to that form. Where the grant keeps a type
 * to the patient in context (a `patient/` scope beside filtered `user/` ones), the scopes asked must keep it there
 * too (patientBoundsLifted): a filtered `user/` scope asked alone would read every patient's records. So with no
 * patient in context, where the grant's tokens read nothing of what it binds (scopesWithoutPatient). The scopes
 * asked are the token's; the refresh token keeps its grant, which a later refresh may ask for whole again.
 */
function narrowedScopes(form: URLSearchParams, granted: string[], user: User, patient: string | undefined): string[] {
  if (!form.has('scope')) return granted;
  const requested = splitScopes(form.get('scope'));
  if (requested.length === 0) throw new OAuthError('invalid_request', 'scope is empty');
  const held = scopesForUser(granted, user);
  const asked = requested.map((s) => scopesForUser([s], user)[0]!);
  // Implied one by one, and together keeping the patient bound wherever the grant bound it.
  // With no patient in context too: the grant's tokens then read nothing of what it binds (scopesWithoutPatient).
  const lifted = new Set(patientBoundsLifted(asked, held));
  const extra = requested.filter((_, i) => scopesNotImplied([asked[i]!], held, patient !== undefined).length > 0 || lifted.has(asked[i]!));
  if (extra.length > 0) {
    const unbound = patient === undefined && extra.some((s) => s.startsWith('patient/')) ? ' (the grant has no patient in context for a patient/ scope)' : '';
    const beyond = !extra.some((s) => lifted.has(asked[requested.indexOf(s)]!)) ? ''
      : patient === undefined
        ? ' (the grant keeps it to a patient in context by the patient/ scopes beside it, and has no patient: its tokens read none of it)'
        : ' (asked without the patient/ scopes the grant holds beside it, it would reach beyond the patient in context, to which the grant keeps it)';
    const linked = extra.flatMap((s) => linkingPairs(parseResourceScope(s)).map(([k, v]) => `${k}=${v}`));
    const reads = linked.length ? ` (unless the granted filter holds it, a filter may not add ${linked.join(', ')}: it reads other resources)` : '';
    throw new OAuthError('invalid_request', `scope exceeds the original grant: ${extra.join(' ')}${unbound}${beyond}${reads}`);
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
    const { user, userReadAt } = await grantUser(deps, t.tenant, t.userId, t);
    const granted = stillRegistered(client, splitScopes(t.scope));
    const patient = patientInContext(scopesForUser(granted, user), t.patient, user, deps.config.baseUrl);
    if (!(await chosenPatientHeld(deps, client.clientId, user, t.patient, patient))) {
      throw new OAuthError('invalid_grant', 'the patient in context of this sign-in is no longer one the user may choose (their record no longer names it, or it was deleted): sign in again');
    }
    const scopes = narrowedScopes(form, granted, user, patient);
    checkReadableScopes(client, scopes);
    const grant = { client, tenant: t.tenant, userId: t.userId, scopes, grantId: t.grantId, authTime: t.authTime, nonce: null, userReadAt, ...grantContext(t) };
    return issueUserTokens(deps, grant, user);
  },
};
