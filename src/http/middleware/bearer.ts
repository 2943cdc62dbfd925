import { bearerChallenge, verifyBearer, type BearerRefusal } from '../../auth/bearer.ts';
import { revocationQuery } from '../../auth/revocation.ts';
import { accessFromScopes, splitScopes, type CompleteConditions, type ScopedAccess } from '../../auth/scopes.ts';
import type { PatientHeldCheck } from '../../auth/patient-held.ts';
import type { TokenVerifier, VerifiedToken } from '../../auth/tokens.ts';
import type { Access } from '../../fhir/access.ts';
import { FhirError } from '../../errors.ts';
import type { SyncOrAsync } from '../../sync-or-async.ts';

/** Why a user token whose patient in context the user may no longer choose is refused (src/auth/patient-held.ts). */
const PATIENT_NOT_HELD = 'The patient in context of this access token is no longer one its user may choose (their record no longer names it, or it was deleted): sign in again';

const unauthorized = (r: BearerRefusal) => new FhirError('unauthorized', r.message, { headers: bearerChallenge(r), cause: r.cause });

/** A verified bearer token and what its scopes allow. */
export interface Bearer {
  token: VerifiedToken;
  access: Access;
}

/**
 * Bearer-token authentication for a tenant's FHIR routes (RFC 6750): verifies the JWT locally,
 * refuses a token of another tenant with 403, and one whose patient in context its user may no longer choose
 * (`patientHeld`) with 401 `invalid_token`, and answers the token with its SMART-scope access.
 * The verifier returns the same object for a cached token, so parsed scopes are kept beside it.
 */
export function bearerAuthenticator(verify: TokenVerifier, completeConditions?: CompleteConditions, patientHeld?: PatientHeldCheck): BearerAuthenticator {
  const accessOf = new WeakMap<VerifiedToken, ScopedAccess>();
  // A token's scope filters are completed once (`:in` expanded, a hierarchy walked), by its first request.
  const completing = new WeakMap<VerifiedToken, Promise<void>>();
  function bearer(token: VerifiedToken): SyncOrAsync<Bearer> {
    let access = accessOf.get(token);
    if (!access) {
      const user = revocationQuery(token).user;
      access = accessFromScopes(splitScopes(token.scope), token.client_id, token.patient, user && { ...user, ...(token.crs !== undefined && { clientSeq: token.crs }) });
      accessOf.set(token, access);
    }
    if (!access.incomplete || !completeConditions) return { token, access };
    let done = completing.get(token);
    if (!done) {
      done = access.complete(token.tenant, completeConditions);
      completing.set(token, done);
      done.catch(() => completing.delete(token));
    }
    const ready = access;
    return done.then(() => ({ token, access: ready }));
  }
  const held = (token: VerifiedToken, isHeld: boolean): SyncOrAsync<Bearer> => {
    if (!isHeld) throw unauthorized({ error: 'invalid_token', message: PATIENT_NOT_HELD });
    return bearer(token);
  };
  const admitted = (token: VerifiedToken, tenant: string): SyncOrAsync<Bearer> => {
    if (token.tenant !== tenant) throw new FhirError('forbidden', 'The access token is not valid for this tenant');
    if (patientHeld === undefined) return bearer(token);
    const isHeld = patientHeld(token);
    return isHeld instanceof Promise ? isHeld.then((h) => held(token, h)) : held(token, isHeld);
  };
  return function authenticate(header: string | null, tenant: string): SyncOrAsync<Bearer> {
    const token = verifyBearer(header, verify, unauthorized);
    return token instanceof Promise ? token.then((t) => admitted(t, tenant)) : admitted(token, tenant);
  };
}

/**
 * Authenticates the Authorization header for a tenant: at once for a token verified before (the
 * steady state), else as a promise; a refusal known at once is thrown at once.
 */
export type BearerAuthenticator = (header: string | null, tenant: string) => SyncOrAsync<Bearer>;
