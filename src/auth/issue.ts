import { OAuthError } from '../errors.ts';
import type { Client, FhirContextItem, RevocationQuery, User } from '../store/types.ts';
import { OFFLINE_SCOPES, patientOf, scopesForUser, unreadableScopes, userClaims } from './claims.ts';
import { fhirBaseOf } from '../config.ts';
import type { AuthDeps } from './deps.ts';
import type { GrantContext } from './grant-context.ts';
import { mayStillHaveInContext } from './patient-picker.ts';
import type { TokenResponse } from './grants/types.ts';
import { isResourceScope, needsPatientContext, patientBoundsLifted, releasesEncounter, scopesAsPatient, scopesNotImplied, scopesWithoutPatient } from './scopes.ts';
import { MAX_TOKEN_TTL, signAccessToken, signIdToken, type AccessClaims } from './tokens.ts';

/** What a user-facing grant (authorization_code, refresh_token) issues tokens for, its stored context included. */
export interface UserGrant extends GrantContext {
  client: Client;
  tenant: string;
  userId: string;
  scopes: string[];
  grantId: string;
  /** Epoch ms of the sign-in. */
  authTime: number;
  nonce: string | null;
  /** When the user was read to issue these tokens (grantUser), epoch ms: the access token says so (`urt`). */
  userReadAt: number;
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

/**
 * The scopes of a grant or token its client still holds: a resource scope only while the client's registered scopes
 * imply it by meaning (they may have been narrowed since the sign-in, `cinder client update --scope`), so a refresh
 * never yields more than the client may now be granted. By meaning (scopesNotImplied), not by isImpliedBy, which
 * decides what a sign-in is granted: a scope a refresh narrowed to (a filter with more pairs than the registered
 * one's, permissions from two registered scopes) is within the registration too, and a Subscription its token
 * activated keeps it (restoreAccess in src/app.ts). A filtered `user/` scope whose patient bound a dropped `patient/`
 * scope gave is kept in its `patient/` form. OpenID and launch scopes stay as granted.
 */
export function stillRegistered(client: Client, scopes: string[]): string[] {
  // A user who acts for patients holds a registered `user/` scope as its `patient/` form (scopesForUser), stored so.
  const registered = [...client.scopes, ...scopesAsPatient(client.scopes)];
  const kept = scopes.filter((s) => !isResourceScope(s) || scopesNotImplied([s], registered, false).length === 0);
  // A filtered `user/` scope the grant kept to the patient in context by a `patient/` scope the registration
  // dropped would read every patient's records: it keeps its `patient/` form, the registration's and the grant's
  // reach together (patientBoundsLifted).
  const lifted = new Set(patientBoundsLifted(kept, scopes));
  return lifted.size === 0 ? kept : [...new Set(kept.map((s) => (lifted.has(s) ? scopesAsPatient([s])[0]! : s)))];
}

/**
 * The grant's user, who must still exist and be enabled, and when they were read (taken before the read; the record
 * carries the number of their last revocation, User.revocationSeq, which the access token states as `urs`). A
 * sign-in that a user revocation (`cinder user update --password-stdin`, disable, delete) came after is refused too:
 * its code, or a login ticket's, gives no tokens though the user may be enabled again. "After" is told by the
 * revocation's number where the sign-in kept the user record's (`authRevocationSeq`), else by its time (`authTime`).
 */
export async function grantUser(deps: AuthDeps, tenant: string, userId: string, signIn: SignInMark): Promise<{ user: User; userReadAt: number }> {
  const userReadAt = deps.clock.now();
  const user = await deps.store.users.get(tenant, userId);
  if (!user || user.disabled) throw new OAuthError('invalid_grant', 'the user of this grant no longer exists or is disabled');
  if (await deps.store.oauth.isRevoked({ user: signedInUser(userId, signIn) })) {
    throw new OAuthError('invalid_grant', "the user's tokens were revoked after this sign-in (a new password, or a disable): sign in again");
  }
  return { user, userReadAt };
}

/**
 * When a user signed in (epoch ms), the number of their last revocation then (User.revocationSeq), and that of the
 * last revocation of the client's tokens then (Client.revocationSeq of the record the authorization request was read
 * on), where kept.
 */
export interface SignInMark {
  authTime: number;
  authRevocationSeq?: number;
  authClientRevocationSeq?: number;
}

/** The revocation query of a sign-in (RevocationQuery.user): by the number where it was kept, else by the time. */
export function signedInUser(userId: string, s: SignInMark): NonNullable<RevocationQuery['user']> {
  return { id: userId, readAt: s.authTime, ...(s.authRevocationSeq !== undefined && { seq: s.authRevocationSeq }) };
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

/** What a user grant's tokens carry: the patient in context, and the scopes granted with it (releasedContext states the rest). */
export interface PatientContext {
  patient: string | undefined;
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
 * The launch context a token states beside its `patient` (SMART App Launch 2.2, "Launch context arrives
 * with your access_token"), under the names of the token response, which the access token's claims and
 * introspection use too.
 */
export interface ReleasedContext {
  encounter?: string;
  fhirContext?: FhirContextItem[];
  need_patient_banner?: boolean;
}

/**
 * What of a grant's stored context its tokens state beside the patient in context, and nothing without
 * one: the encounter (encounterInContext); the EHR launch's `fhirContext` when `launch` is granted (the
 * scope that asks for the EHR's context, which 2.2 says the fhirContext items are "requested by"); and
 * `need_patient_banner`, which is no context a scope asks for but how the app is shown, so always.
 */
export function releasedContext(scopes: string[], patient: string | undefined, stored: GrantContext): ReleasedContext {
  if (patient === undefined) return {};
  const released: ReleasedContext = {};
  const encounter = encounterInContext(scopes, patient, stored.encounter);
  if (encounter !== undefined) released.encounter = encounter;
  if (stored.fhirContext !== null && scopes.includes('launch')) released.fhirContext = stored.fhirContext;
  released.need_patient_banner = stored.needPatientBanner;
  return released;
}

/**
 * The patient in context of a user grant whose scopes need one: the chosen one, else a Patient user's
 * own record (codes and grants stored without a choice); undefined without such scopes, or none.
 */
export function patientInContext(scopes: string[], chosen: string | null, user: User | null, baseUrl: string): string | undefined {
  if (!scopes.some(needsPatientContext)) return undefined;
  return chosen ?? (user ? patientOf(user, baseUrl) : undefined);
}

/**
 * Whether the patient a sign-in chose (`chosen`: the picker's choice, an EHR launch's patient), when it is the one a
 * token of the grant would carry (`patient`), is still one the user may have in context by the picker's rules
 * (mayHaveInContext: an existing Patient; for a RelatedPerson or Person user, one their record names). A refresh token
 * outlives the relationship it was chosen under: a guardian whose RelatedPerson record no longer names the child, or
 * a record deleted, went on refreshing tokens of the child's records for the refresh token's 30 days. One search per
 * refresh of such a grant, none for a grant without a chosen patient (a Patient user's own record is derived anew).
 */
export async function chosenPatientHeld(deps: AuthDeps, clientId: string, user: User, chosen: string | null, patient: string | undefined): Promise<boolean> {
  // While a reindex refuses the search, the refresh goes on (mayStillHaveInContext): the FHIR gate checks its token
  // again within seconds of the reindex's end, and a refresh refused by a 503 signs the user out of many apps.
  return chosen === null || patient !== chosen || ((await mayStillHaveInContext(deps, clientId, user, chosen)) ?? true);
}

/**
 * What the tokens of a user grant carry: the patient in context (patientInContext) and the scopes (the
 * rest of the context is releasedContext's). A token never carries `patient/` scopes (or `launch/patient`,
 * `launch`) without a patient (SMART App Launch 2.2: granting such a scope, "the EHR SHALL establish a
 * patient in context"): a grant that has none (stored before the picker inferred `launch/patient`, or its
 * user is no longer a Patient) loses them, and with them what they kept to the patient of the filtered
 * `user/` scopes beside them (scopesWithoutPatient: `user/Observation.rs?category=laboratory` beside
 * `patient/Observation.rs` was the patient's laboratory results, never every patient's); one left with
 * nothing but `offline_access` is `invalid_grant`. Nor does it carry `launch/encounter` without an encounter.
 */
export function patientContext(scopes: string[], chosen: string | null, user: User | null, baseUrl: string, encounter: string | null = null): PatientContext {
  const patient = patientInContext(scopes, chosen, user, baseUrl);
  const inContext = encounterInContext(scopes, patient, encounter);
  const withEncounter = inContext === undefined ? scopes.filter((s) => s !== 'launch/encounter') : scopes;
  if (patient || !withEncounter.some(needsPatientContext)) return { patient, scopes: withEncounter };
  const kept = scopesWithoutPatient(withEncounter);
  if (kept.every((s) => OFFLINE_SCOPES.includes(s))) {
    throw new OAuthError('invalid_grant', 'the grant has patient/ scopes but no patient in context: authorize again to choose one');
  }
  return { patient: undefined, scopes: kept };
}

/** Access token and id_token (OIDC Core 3.1.3.3) for a user grant; the refresh token is the caller's. */
export async function issueUserTokens(deps: AuthDeps, g: UserGrant, user: User): Promise<TokenResponse> {
  const { config } = deps;
  const fhirBase = fhirBaseOf(config.baseUrl, g.tenant);
  const readable = (a: string) => g.client.readAttributes === null || g.client.readAttributes.includes(a);
  // A code or refresh token stored before its user's `user/` scopes were held as `patient/` ones narrows too.
  const { patient, scopes } = patientContext(scopesForUser(g.scopes, user), g.patient, user, config.baseUrl, g.encounter);
  const context = releasedContext(scopes, patient, g);
  const claims: AccessClaims = {
    sub: user.id, aud: fhirBase, client_id: g.client.clientId, scope: scopes.join(' '), tenant: g.tenant, gid: g.grantId,
    crt: deps.clients.readAt(g.client), urt: g.userReadAt,
  };
  if (g.client.revocationSeq !== undefined) claims.crs = g.client.revocationSeq;
  if (user.revocationSeq !== undefined) claims.urs = user.revocationSeq;
  const fhirUser = readable('fhirUser') ? absoluteFhirUser(fhirBase, user.fhirUser) : undefined;
  if (fhirUser) claims.fhirUser = fhirUser;
  if (patient) Object.assign(claims, { patient }, context);
  const ttl = g.client.accessTokenTtl ?? config.accessTokenTtl;
  const { token, expiresIn } = await signAccessToken(deps.keys, deps.clock, config.baseUrl, claims, ttl);
  const released = userClaims({ ...user, fhirUser: fhirUser ?? null }, scopes, g.client.readAttributes);
  const idToken = await signIdToken(deps.keys, deps.clock, config.baseUrl, {
    sub: user.id, aud: g.client.clientId, authTime: Math.floor(g.authTime / 1000), nonce: g.nonce, accessToken: token, claims: released,
  }, ttl);
  const body: TokenResponse = { access_token: token, token_type: 'Bearer', expires_in: expiresIn, scope: claims.scope, id_token: idToken };
  if (patient) Object.assign(body, { patient }, context);
  return body;
}
