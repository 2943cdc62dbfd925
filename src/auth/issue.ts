import { OAuthError } from '../errors.ts';
import type { Client, User } from '../store/types.ts';
import { OFFLINE_SCOPES, patientOf, unreadableScopes, userClaims } from './claims.ts';
import { fhirBaseOf } from '../config.ts';
import type { AuthDeps } from './deps.ts';
import type { TokenResponse } from './grants/types.ts';
import { needsPatientContext, releasesEncounter } from './scopes.ts';
import { MAX_TOKEN_TTL, signAccessToken, signIdToken, type AccessClaims } from './tokens.ts';

/** What a user-facing grant (authorization_code, refresh_token) issues tokens for. */
export interface UserGrant {
  client: Client;
  tenant: string;
  userId: string;
  scopes: string[];
  grantId: string;
  /** Epoch ms of the sign-in. */
  authTime: number;
  nonce: string | null;
  /** The patient the user chose at sign-in (the patient picker) or the EHR launched, or null: a Patient user's own record, or none. */
  patient: string | null;
  /** The encounter of the grant's EHR launch, or null. */
  encounter: string | null;
}

/**
 * The scope/attribute rule: asking for a scope whose user attributes the client may not all
 * read is `invalid_grant` (on the code and refresh grants).
 */
export function checkReadableScopes(client: Client, scopes: string[]): void {
  const refused = unreadableScopes(scopes, client.readAttributes);
  if (refused.length) {
    throw new OAuthError('invalid_grant', `the client may not read every attribute of scope ${refused.map((s) => `'${s}'`).join(', ')}`);
  }
}

/** The grant's user, who must still exist and be enabled. */
export async function grantUser(deps: AuthDeps, tenant: string, userId: string): Promise<User> {
  const user = await deps.store.users.get(tenant, userId);
  if (!user || user.disabled) throw new OAuthError('invalid_grant', 'the user of this grant no longer exists or is disabled');
  return user;
}

/** Revokes every token issued from a grant (RFC 9700 4.4: code replay; RFC 7009 2.1: refresh token revocation). */
export async function revokeGrant(deps: AuthDeps, grantId: string): Promise<void> {
  const now = deps.clock.now();
  const horizon = Math.max(deps.config.refreshTokenTtl, MAX_TOKEN_TTL) * 1000;
  await deps.revocations.add({ kind: 'grant', value: grantId, revokedAt: now, expiresAt: now + horizon });
}

function absoluteFhirUser(fhirBase: string, ref: string | null): string | undefined {
  if (!ref) return undefined;
  return /^https?:\/\//.test(ref) ? ref : `${fhirBase}/${ref}`;
}

/** What a user grant's tokens carry: the patient and encounter in context, and the scopes granted with them. */
export interface PatientContext {
  patient: string | undefined;
  encounter: string | undefined;
  scopes: string[];
}

/**
 * The encounter in context of a grant: its EHR launch's, released by `launch` or `launch/encounter`
 * (releasesEncounter), and only beside its patient in context.
 */
export function encounterInContext(scopes: string[], patient: string | undefined, stored: string | null): string | undefined {
  return patient !== undefined && stored !== null && scopes.some(releasesEncounter) ? stored : undefined;
}

/**
 * The patient in context of a user grant whose scopes need one: the chosen one, else a Patient user's
 * own record (codes and grants stored without a choice); undefined without such scopes, or none.
 */
export function patientInContext(scopes: string[], chosen: string | null, user: User | null): string | undefined {
  if (!scopes.some(needsPatientContext)) return undefined;
  return chosen ?? (user ? patientOf(user) : undefined);
}

/**
 * What the tokens of a user grant carry: the patient in context (patientInContext), the encounter
 * (encounterInContext) and the scopes. A token never carries `patient/` scopes (or `launch/patient`,
 * `launch`) without a patient (SMART App Launch 2.2: granting such a scope, "the EHR SHALL establish a
 * patient in context"): a grant that has none (stored before the picker inferred `launch/patient`, or its
 * user is no longer a Patient) loses them, and one left with nothing but `offline_access` is
 * `invalid_grant`. Nor does it carry `launch/encounter` without an encounter.
 */
export function patientContext(scopes: string[], chosen: string | null, user: User, encounter: string | null = null): PatientContext {
  const patient = patientInContext(scopes, chosen, user);
  const inContext = encounterInContext(scopes, patient, encounter);
  const withEncounter = inContext === undefined ? scopes.filter((s) => s !== 'launch/encounter') : scopes;
  if (patient || !withEncounter.some(needsPatientContext)) return { patient, encounter: inContext, scopes: withEncounter };
  const kept = withEncounter.filter((s) => !needsPatientContext(s));
  if (kept.every((s) => OFFLINE_SCOPES.includes(s))) {
    throw new OAuthError('invalid_grant', 'the grant has patient/ scopes but no patient in context: authorize again to choose one');
  }
  return { patient: undefined, encounter: undefined, scopes: kept };
}

/** Access token and id_token (OIDC Core 3.1.3.3) for a user grant; the refresh token is the caller's. */
export async function issueUserTokens(deps: AuthDeps, g: UserGrant, user: User): Promise<TokenResponse> {
  const { config } = deps;
  const fhirBase = fhirBaseOf(config.baseUrl, g.tenant);
  const readable = (a: string) => g.client.readAttributes === null || g.client.readAttributes.includes(a);
  const { patient, encounter, scopes } = patientContext(g.scopes, g.patient, user, g.encounter);
  const claims: AccessClaims = { sub: user.id, aud: fhirBase, client_id: g.client.clientId, scope: scopes.join(' '), tenant: g.tenant, gid: g.grantId };
  const fhirUser = readable('fhirUser') ? absoluteFhirUser(fhirBase, user.fhirUser) : undefined;
  if (fhirUser) claims.fhirUser = fhirUser;
  if (patient) claims.patient = patient;
  if (encounter) claims.encounter = encounter;
  const ttl = g.client.accessTokenTtl ?? config.accessTokenTtl;
  const { token, expiresIn } = await signAccessToken(deps.keys, deps.clock, config.baseUrl, claims, ttl);
  const released = userClaims({ ...user, fhirUser: fhirUser ?? null }, scopes, g.client.readAttributes);
  const idToken = await signIdToken(deps.keys, deps.clock, config.baseUrl, {
    sub: user.id, aud: g.client.clientId, authTime: Math.floor(g.authTime / 1000), nonce: g.nonce, accessToken: token, claims: released,
  }, ttl);
  const body: TokenResponse = { access_token: token, token_type: 'Bearer', expires_in: expiresIn, scope: claims.scope, id_token: idToken };
  if (patient) body.patient = patient;
  if (encounter) body.encounter = encounter;
  return body;
}
