import type { SyncOrAsync } from '../sync-or-async.ts';
import { patientOf } from './claims.ts';
import { CLIENT_CACHE_TTL_MS } from './client-cache.ts';
import type { AuthDeps } from './deps.ts';
import { mayStillHaveInContext } from './patient-picker.ts';
import type { VerifiedToken } from './tokens.ts';
import type { UserLookup } from './user-cache.ts';

/** A patient in context a user's sign-in chose, with an app: what a user token or a Subscription activated with one carries. */
export interface PatientChoice {
  tenant: string;
  clientId: string;
  userId: string;
  patient: string;
}

/** Whether a choice (PatientChoice) still holds: at once when known, else once read. */
export type PatientChoiceCheck = (choice: PatientChoice) => SyncOrAsync<boolean>;

/** Whether the patient in context of a verified access token is still one its user may have there. */
export type PatientHeldCheck = (token: VerifiedToken) => SyncOrAsync<boolean>;

/** The choice a token carries: a user grant's (gid) patient in context; null for none, or a client's own token. */
export function tokenChoice(token: VerifiedToken): PatientChoice | null {
  return token.patient === undefined || token.gid === undefined
    ? null
    : { tenant: token.tenant, clientId: token.client_id, userId: token.sub, patient: token.patient };
}

/**
 * Whether the user of a choice may still have its patient in context (mayHaveInContext, the picker's rules; the rule a
 * refresh applies, issue.ts chosenPatientHeld), the user read with `users`: not when their record no longer names it (a
 * guardian's RelatedPerson), the Patient was deleted, or the user is gone or disabled. A patient that is the user's own
 * record (a Patient user) is derived anew by each refresh, never chosen, and holds. Uncached: introspection asks it of
 * the database, the FHIR gate and the Subscription hub through createPatientChoiceCheck.
 *
 * While a reindex refuses the search the picker's rules run (503, src/fhir/reindex.ts gatedStore), the answer is that
 * the choice holds (createPatientChoiceCheck: the last answer it knew, else that): the check adds to what the token already says, and a user's reads, which
 * the reindex does not refuse, and every write of the tenant (which matches Subscriptions activated with such tokens)
 * must not fail for it for the minutes a reindex takes.
 */
export async function patientHeld(deps: AuthDeps, users: UserLookup, choice: PatientChoice): Promise<boolean> {
  return (await readHeld(deps, users, choice)) ?? true;
}

/** patientHeld's answer; undefined when its search is refused for the moment (mayStillHaveInContext). */
async function readHeld(deps: AuthDeps, users: UserLookup, choice: PatientChoice): Promise<boolean | undefined> {
  const user = await users(choice.tenant, choice.userId);
  if (user === null || user.disabled) return false;
  return choice.patient === patientOf(user, deps.config.baseUrl) || mayStillHaveInContext(deps, choice.clientId, user, choice.patient);
}

/**
 * patientHeld, each answer remembered for `ttlMs` as the client and user caches remember theirs (a change seen by every
 * process within it): one user read and one search per user, app and patient each `ttlMs` while they are asked, a map
 * lookup in between. So a guardian whose record no longer names the child stops reading the child's records (the FHIR
 * gate) and being notified of them (the Subscription hub) within seconds, not at the token's expiry an hour later, nor
 * never. A failed read is not remembered.
 */
export function createPatientChoiceCheck(deps: AuthDeps, users: UserLookup, ttlMs = CLIENT_CACHE_TTL_MS, maxEntries = 10_000): PatientChoiceCheck {
  const answers = new Map<string, { held: SyncOrAsync<boolean>; until: number }>();
  return (choice) => {
    const now = deps.clock.now();
    const key = `${choice.tenant}\u0000${choice.clientId}\u0000${choice.userId}\u0000${choice.patient}`;
    const hit = answers.get(key);
    if (hit && hit.until > now && hit.until - ttlMs <= now) return hit.held;
    // The last answer known, for a moment the search is refused (patientHeld).
    const last = hit !== undefined && typeof hit.held === 'boolean' ? hit.held : true;
    if (answers.size >= maxEntries) answers.clear();
    const pending = readHeld(deps, users, choice).then((held) => held ?? last);
    const entry: { held: SyncOrAsync<boolean>; until: number } = { held: pending, until: now + ttlMs };
    answers.set(key, entry);
    pending.then(
      (held) => void (entry.held = held),
      () => answers.get(key) === entry && answers.delete(key),
    );
    return pending;
  };
}

/** The FHIR gate's check of a token (bearerAuthenticator): one without a chosen patient (tokenChoice) needs nothing. */
export function tokenPatientHeld(check: PatientChoiceCheck): PatientHeldCheck {
  return (token) => {
    const choice = tokenChoice(token);
    return choice === null ? true : check(choice);
  };
}
