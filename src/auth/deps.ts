import type { AuthAudit } from '../audit/trail.ts';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { ResolveHost } from '../fhir/subscriptions/endpoint.ts';
import type { Logger } from '../log.ts';
import type { Store } from '../store/types.ts';
import { createKeySetResolver, type KeySetResolver } from './client-assertion.ts';
import { createClientCache, type ClientLookup } from './client-cache.ts';
import { createJwksFetcher, type JwksFetcher } from './jwks-fetch.ts';
import type { KeyRing } from './keys.ts';
import { createRateLimits, type RateLimits } from './rate-limit.ts';
import { createRevocationList, type RevocationList } from './revocation.ts';
import { createSealer, type Sealer } from './sealed.ts';
import { createTokenVerifier, type TokenVerifier } from './tokens.ts';
import { createPatientChoiceCheck, type PatientChoiceCheck } from './patient-held.ts';
import { createUserCache, type UserLookup, type UsersLookup } from './user-cache.ts';

/** What the authorization server's functions need; built once in createApp. */
export interface AuthDeps {
  store: Store;
  keys: KeyRing;
  clock: Clock;
  config: Config;
  log: Logger;
  /** Clients' registered JWK Set URLs (private_key_jwt). */
  jwks: JwksFetcher;
  /** Verification key resolvers per JWK Set, reused while the set is cached. */
  keySets: KeySetResolver;
  /** Revoked access tokens and grants, mirrored in memory for the bearer check. */
  revocations: RevocationList;
  limits: RateLimits;
  /** Client records for client authentication, cached for a few seconds. */
  clients: ClientLookup;
  /** Seals a sorted search's place into its opaque `_cursor` (src/fhir/search.ts sortedCursor): the REST API's and the patient picker's. */
  searchCursors: Sealer;
  /** Seals the sign-in device cookies (src/auth/device-cookie.ts). */
  deviceCookies: Sealer;
  /** Verifies access tokens locally and checks the in-memory revocation list (the FHIR API's check). */
  verifyAccess: TokenVerifier;
  /** User records as the FHIR gate and the Subscription hub read them: cached, a change seen within 5 s. */
  users: UserLookup & { many: UsersLookup };
  /**
   * Whether a user's chosen patient in context still holds (a guardian's record may stop naming the child): the FHIR gate
   * asks it of user tokens, the Subscription hub of Subscriptions activated with one, introspection anew (`fresh`).
   */
  patientChoices: PatientChoiceCheck;
  /** The audit trail (CINDER_AUDIT=on): sign-ins and token requests are recorded (src/audit/trail.ts). */
  audit?: AuthAudit;
}

export interface AuthDepsInput {
  store: Store;
  keys: KeyRing;
  clock: Clock;
  config: Config;
  log: Logger;
  /** Overrides the fetch used for JWK Set URLs. */
  fetch?: typeof fetch;
  /** Overrides how the hosts of JWK Set URLs resolve. */
  resolveHost?: ResolveHost;
}

/** Builds the authorization server's per-app state (caches, limiters); STYLE rule 1, no globals. */
export function createAuthDeps(i: AuthDepsInput): AuthDeps {
  const revocations = createRevocationList(i.store, i.clock);
  const deps: Omit<AuthDeps, 'patientChoices'> & Partial<Pick<AuthDeps, 'patientChoices'>> = {
    store: i.store, keys: i.keys, clock: i.clock, config: i.config, log: i.log, revocations,
    jwks: createJwksFetcher(i.clock, {
      allowPrivate: i.config.jwksAllowPrivate === 'true', ...(i.fetch ? { fetch: i.fetch } : {}), ...(i.resolveHost ? { resolve: i.resolveHost } : {}),
    }),
    keySets: createKeySetResolver(),
    limits: createRateLimits(i.config, i.store, i.clock),
    clients: createClientCache(i.store, i.clock),
    searchCursors: createSealer(i.keys, 'search cursor'),
    deviceCookies: createSealer(i.keys, 'sign-in device'),
    verifyAccess: createTokenVerifier(i.keys, i.clock, i.config.baseUrl, revocations),
    users: createUserCache(i.store, i.clock),
  };
  // The check searches with the deps it belongs to.
  deps.patientChoices = createPatientChoiceCheck(deps as AuthDeps, deps.users);
  return deps as AuthDeps;
}


/** The token endpoint URL. */
export function tokenEndpoint(baseUrl: string): string {
  return `${baseUrl}/oauth2/token`;
}
