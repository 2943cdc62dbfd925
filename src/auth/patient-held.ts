import type { SyncOrAsync } from '../sync-or-async.ts';
import { patientOf } from './claims.ts';
import { CLIENT_CACHE_TTL_MS } from './client-cache.ts';
import type { AuthDeps } from './deps.ts';
import { mayHaveInContext } from './patient-picker.ts';
import type { VerifiedToken } from './tokens.ts';
import type { UserLookup } from './user-cache.ts';

/** Whether the patient in context of a verified access token is still one its user may have there. */
export type PatientHeldCheck = (token: VerifiedToken) => SyncOrAsync<boolean>;

/** Whether a token's patient in context was chosen by its user (a user grant's, gid): a client's own token names none it chose. */
const chosePatient = (token: VerifiedToken): boolean => token.patient !== undefined && token.gid !== undefined;

/**
 * Whether the user of a token may still have its patient in context (mayHaveInContext), its user read with `users`; a
 * token with none chosen (chosePatient), or whose patient is its user's own record, is held. Uncached: introspection
 * asks it of the database, the FHIR gate through createPatientHeldCheck.
 */
export async function patientHeld(deps: AuthDeps, users: UserLookup, token: VerifiedToken): Promise<boolean> {
  if (!chosePatient(token)) return true;
  const user = await users(token.tenant, token.sub);
  if (user === null || user.disabled) return false;
  return token.patient === patientOf(user, deps.config.baseUrl) || mayHaveInContext(deps, token.client_id, user, token.patient!);
}

/**
 * The FHIR API's check that a user token's patient in context is still one the user may choose (mayHaveInContext, the
 * picker's rules; the rule a refresh applies, issue.ts chosenPatientHeld): a guardian whose RelatedPerson record no
 * longer names the child, or a Patient deleted, stops reading the child's records within `ttlMs`, not at the token's
 * expiry an hour later. A token without a patient, or whose patient is its user's own record (a Patient user: derived
 * anew by each refresh, never chosen), needs nothing. The answer for a user, client and patient is remembered for
 * `ttlMs` as the client and user caches remember theirs (a change seen by every process within it): one search each
 * `ttlMs` while such tokens are used, a map lookup per request in between. A failed read is not remembered.
 */
export function createPatientHeldCheck(deps: AuthDeps, users: UserLookup, ttlMs = CLIENT_CACHE_TTL_MS, maxEntries = 10_000): PatientHeldCheck {
  const answers = new Map<string, { held: SyncOrAsync<boolean>; until: number }>();
  return (token) => {
    if (!chosePatient(token)) return true;
    const now = deps.clock.now();
    const key = `${token.tenant}\u0000${token.client_id}\u0000${token.sub}\u0000${token.patient!}`;
    const hit = answers.get(key);
    if (hit && hit.until > now && hit.until - ttlMs <= now) return hit.held;
    if (answers.size >= maxEntries) answers.clear();
    const entry = { held: patientHeld(deps, users, token) as SyncOrAsync<boolean>, until: now + ttlMs };
    answers.set(key, entry);
    const pending = entry.held as Promise<boolean>;
    pending.then(
      (held) => void (entry.held = held),
      () => answers.get(key) === entry && answers.delete(key),
    );
    return pending;
  };
}
