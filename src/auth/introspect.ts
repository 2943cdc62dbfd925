import { OAuthError } from '../errors.ts';
import { mayHoldRefreshTokens, type TokenRequest } from './client-auth.ts';
import type { AuthDeps } from './deps.ts';
import { revocationQuery } from './revocation.ts';
import { tokenEndpointCall } from './revoke.ts';
import { scopesForUser } from './claims.ts';
import { chosenPatientHeld, patientContext, releasedContext, stillRegistered, type PatientContext } from './issue.ts';
import { tokenChoice } from './patient-held.ts';
import { needsPatientContext, splitScopes } from './scopes.ts';
import { sha256Hex } from './secrets.ts';
import type { Client, RefreshToken } from '../store/types.ts';

const INACTIVE = { active: false } as const;

/**
 * What `caller` is told of `token` as an access token: null when it is none the caller may be told about (not one, of
 * another tenant, or of another client when the caller is no resource server), so that the answer costs the same as
 * for a token that does not exist (introspectToken); otherwise its state, read from the database.
 */
async function accessTokenInfo(deps: AuthDeps, token: string, caller: Client): Promise<Record<string, unknown> | null> {
  let t;
  try {
    t = await deps.verifyAccess(token);
  } catch {
    return null;
  }
  if (t.tenant !== caller.tenant || !mayIntrospect(caller, 'access', t.client_id)) return null;
  // The database is authoritative here (the in-memory list may lag another process by a few seconds).
  if (await deps.store.oauth.isRevoked(revocationQuery(t))) return INACTIVE;
  // A disabled or deleted client's tokens are inactive at once, whatever was issued by a process that had not yet seen it.
  const client = await deps.clients.get(t.client_id);
  if (!client || client.disabled) return INACTIVE;
  // As the FHIR API refuses it: a patient in context the user may no longer choose (src/auth/patient-held.ts), read anew
  // and remembered for the API too; while a reindex refuses the search, the answer the API keeps (the last one known).
  const choice = tokenChoice(t);
  if (choice !== null && !(await deps.patientChoices.fresh(choice))) return INACTIVE;
  const info: Record<string, unknown> = {
    active: true, token_type: 'Bearer', scope: t.scope, client_id: t.client_id, sub: t.sub, aud: t.aud, iss: t.iss,
    exp: t.exp, iat: t.iat, jti: t.jti, tenant: t.tenant,
  };
  if (t.patient) info.patient = t.patient;
  if (t.encounter) info.encounter = t.encounter;
  if (t.fhirContext) info.fhirContext = t.fhirContext;
  if (t.need_patient_banner !== undefined) info.need_patient_banner = t.need_patient_banner;
  if (t.fhirUser) info.fhirUser = t.fhirUser;
  return info;
}

/**
 * The scopes and the patient in context a refresh of the token would issue its access token with (patientContext:
 * the grant's scopes as its user holds them, scopesForUser; without a patient, none that needs one, nor what those
 * kept to the patient), or null when it would issue none (nothing left but `offline_access`: invalid_grant).
 */
async function refreshTokenContext(deps: AuthDeps, t: RefreshToken, client: Client): Promise<PatientContext | null> {
  const stored = stillRegistered(client, splitScopes(t.scope));
  // A Patient user's own record is not stored on the grant, a `user/` scope stored before it was held as a `patient/`
  // one depends on the user, and so does whether a chosen patient is still theirs: one more read, for such grants only.
  const needsUser = stored.some((s) => s.startsWith('user/')) || stored.some(needsPatientContext);
  const user = needsUser ? await deps.store.users.get(t.tenant, t.userId) : null;
  const scopes = user ? scopesForUser(stored, user) : stored;
  let context: PatientContext;
  try {
    context = patientContext(scopes, t.patient, user, deps.config.baseUrl, t.encounter);
  } catch (err) {
    if (err instanceof OAuthError) return null;
    throw err;
  }
  // A refresh would be refused for a chosen patient the user may no longer have in context (chosenPatientHeld).
  if (user && !(await chosenPatientHeld(deps, client.clientId, user, t.patient, context.patient))) return null;
  return context;
}

/**
 * What `caller` is told of `token` as a refresh token: null when it is none of the caller's own (a refresh token is
 * only ever sent to its client), decided on the one read that finds it, before anything else is read, so that another
 * client's live token takes the work of one that does not exist and its timing tells nothing; otherwise its state.
 */
async function refreshTokenInfo(deps: AuthDeps, token: string, caller: Client): Promise<Record<string, unknown> | null> {
  const t = await deps.store.oauth.getRefreshToken(sha256Hex(token));
  if (!t || t.tenant !== caller.tenant || !mayIntrospect(caller, 'refresh', t.clientId)) return null;
  const now = deps.clock.now();
  if (t.revokedAt !== null || t.expiresAt <= now || (await deps.store.oauth.isRevoked({ grantId: t.grantId }))) return INACTIVE;
  // Active means the token endpoint would take it: its client still exists, enabled, and may hold refresh
  // tokens (a public one registered with the grant by an older release may not: mayHoldRefreshTokens).
  const client = await deps.clients.get(t.clientId);
  if (!client || client.disabled || !mayHoldRefreshTokens(client)) return INACTIVE;
  const context = await refreshTokenContext(deps, t, client);
  if (context === null) return INACTIVE;
  const { scopes, patient } = context;
  const info: Record<string, unknown> = {
    active: true, token_type: 'refresh_token', scope: scopes.join(' '), client_id: t.clientId, sub: t.userId, iss: deps.config.baseUrl,
    exp: Math.floor(t.expiresAt / 1000), iat: Math.floor(t.createdAt / 1000), tenant: t.tenant,
  };
  if (patient) Object.assign(info, { patient }, releasedContext(scopes, patient, t));
  return info;
}

/**
 * The scope registered on a client (`cinder client create --scope introspect`) that makes it a resource server: it may
 * introspect the access tokens of its tenant's other clients.
 */
export const INTROSPECT_SCOPE = 'introspect';

/**
 * Whether `caller` may be told about a token of `kind` issued to `owner` (RFC 7662 section 4: the server decides
 * which protected resources may introspect which tokens): a client its own tokens; a client registered with the
 * `introspect` scope (a resource server) the access tokens of its tenant's other clients too. A refresh token is
 * only ever sent to its own client, so no one else has a reason to ask about it.
 */
function mayIntrospect(caller: Client, kind: 'access' | 'refresh', owner: unknown): boolean {
  return owner === caller.clientId || (kind === 'access' && caller.scopes.includes(INTROSPECT_SCOPE));
}

/**
 * Token introspection (RFC 7662) for resource servers: confidential clients only, for tokens of their own tenant
 * that they may be told about (mayIntrospect); any other token is reported inactive (RFC 7662 2.2) after the same
 * work as a token that does not exist, so neither the answer nor its timing tells a caller of tokens not its business.
 */
export async function introspectToken(deps: AuthDeps, req: TokenRequest): Promise<Record<string, unknown>> {
  const { client, token } = await tokenEndpointCall(deps, req, '/oauth2/introspect');
  if (client.method === 'none') throw new OAuthError('invalid_client', 'introspection needs client authentication');
  const caller = client.client;
  const refreshFirst = req.form.get('token_type_hint') === 'refresh_token' || token.split('.').length !== 3;
  const lookups = refreshFirst ? (['refresh', 'access'] as const) : (['access', 'refresh'] as const);
  // A token the caller may not be told about is looked up as one that does not exist is (both kinds tried, nothing
  // more read): before, another client's live refresh token took three to four more reads (its grant's revocation,
  // its client, its user) before it was answered inactive, which timed told it apart from a guess.
  for (const kind of lookups) {
    const info = await (kind === 'access' ? accessTokenInfo : refreshTokenInfo)(deps, token, caller);
    if (info !== null) return info;
  }
  return INACTIVE;
}
