import type { SyncOrAsync } from '../sync-or-async.ts';
import { patientOf } from './claims.ts';
import { CLIENT_CACHE_TTL_MS } from './client-cache.ts';
import type { AuthDeps } from './deps.ts';
import { pickerReach, stillChoosableAmong, type PickerReach } from './patient-picker.ts';
import type { User } from '../store/types.ts';
import type { VerifiedToken } from './tokens.ts';
import type { UserLookup } from './user-cache.ts';

/** A patient in context a user's sign-in chose, with an app: what a user token or a Subscription activated with one carries. */
export interface PatientChoice {
  tenant: string;
  clientId: string;
  userId: string;
  patient: string;
}

/**
 * Whether a choice (PatientChoice) still holds: at once when known, else once read. `all` asks it of many choices
 * together (the Subscription hub, before a write, and its delivery loop, before a round: each user read once, and one
 * search per tenant, app, reach and hundred patients, not one per choice);
 * `fresh` reads it anew (introspection: the database is authoritative), remembers the answer for the others, and
 * answers as they do while a reindex refuses the search (the last answer known).
 */
export interface PatientChoiceCheck {
  (choice: PatientChoice): SyncOrAsync<boolean>;
  all(choices: readonly PatientChoice[]): SyncOrAsync<boolean[]>;
  /** The answers remembered for `choices` while current, reading nothing: undefined for each not known (or still being read). */
  known(choices: readonly PatientChoice[]): (boolean | undefined)[];
  fresh(choice: PatientChoice): Promise<boolean>;
}

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
 * record (a Patient user) is derived anew by each refresh, never chosen, and holds. Asked through
 * createPatientChoiceCheck: by the FHIR gate and the Subscription hub cached, by introspection anew (`fresh`).
 *
 * undefined while a reindex refuses the search the picker's rules run (503, src/fhir/reindex.ts gatedStore): the check
 * then answers with the last answer it knew, else that the choice holds. The check adds to what the token already says,
 * and a user's reads, which the reindex does not refuse, and every write of the tenant (which matches Subscriptions
 * activated with such tokens) must not fail for it for the minutes a reindex takes; and introspection answers as the API
 * does, which keeps its last refusal.
 */
async function readHeld(deps: AuthDeps, users: UserLookup, choice: PatientChoice): Promise<boolean | undefined> {
  return (await readHeldOfUsers(deps, users, [[choice]]))[0]![0];
}

/**
 * readHeld of the choices of several users, `groups` each of one user and app (the same tenant, clientId and userId): each
 * user read once, the users side by side, and then the patients chosen by the users of one tenant and app whose reach is the
 * same (mayHaveAmong's rules: staff reach any Patient of the tenant, a RelatedPerson or Person user those their record
 * names) in one search (stillChoosableAmong), which answers for each of them alike; each undefined when its search is
 * refused for the moment. A Patient user may hold their own record alone (no search), one without a reach nothing.
 */
async function readHeldOfUsers(deps: AuthDeps, users: UserLookup, groups: readonly (readonly PatientChoice[])[]): Promise<(boolean | undefined)[][]> {
  const read = await Promise.all(groups.map((g) => users(g[0]!.tenant, g[0]!.userId)));
  const answers: (boolean | undefined)[][] = [];
  const searches = new Map<string, { clientId: string; user: User; reach: PickerReach; ids: Set<string>; waiting: [group: number, at: number][] }>();
  groups.forEach((choices, g) => {
    const user = read[g]!;
    if (user === null || user.disabled) return void (answers[g] = choices.map(() => false));
    const own = patientOf(user, deps.config.baseUrl);
    answers[g] = choices.map((c) => c.patient === own);
    const reach = pickerReach(deps, user);
    // A Patient user may have their own record alone; one whose record is not this tenant's, none.
    if (reach === null || own !== undefined) return;
    choices.forEach((c, at) => {
      const key = `${user.tenant}\u0000${c.clientId}\u0000${JSON.stringify(reach)}`;
      const search = searches.get(key) ?? searches.set(key, { clientId: c.clientId, user, reach, ids: new Set(), waiting: [] }).get(key)!;
      search.ids.add(c.patient);
      search.waiting.push([g, at]);
    });
  });
  await Promise.all([...searches.values()].map(async ({ clientId, user, reach, ids, waiting }) => {
    const may = await stillChoosableAmong(deps, clientId, user, reach, [...ids]);
    for (const [g, at] of waiting) answers[g]![at] = may === undefined ? undefined : may.has(groups[g]![at]!.patient);
  }));
  return answers;
}

/**
 * readHeld, each answer remembered for `ttlMs` as the client and user caches remember theirs (a change seen by every
 * process within it): one user read and one search per user, app and patient each `ttlMs` while they are asked, a map
 * lookup in between. So a guardian whose record no longer names the child stops reading the child's records (the FHIR
 * gate) and being notified of them (the Subscription hub) within seconds, not at the token's expiry an hour later, nor
 * never. A failed read is not remembered.
 */
export function createPatientChoiceCheck(deps: AuthDeps, users: UserLookup, ttlMs = CLIENT_CACHE_TTL_MS, maxEntries = 10_000): PatientChoiceCheck {
  const answers = new Map<string, { held: SyncOrAsync<boolean>; until: number }>();
  const keyOf = (c: PatientChoice) => `${c.tenant}\u0000${c.clientId}\u0000${c.userId}\u0000${c.patient}`;
  /** The answer remembered for `key` while it is current; undefined when it must be read. */
  const known = (key: string, now: number) => {
    const hit = answers.get(key);
    return hit && hit.until > now && hit.until - ttlMs <= now ? hit.held : undefined;
  };
  // The last answer known, for a moment the search is refused (patientHeld).
  const lastOf = (key: string) => {
    const held = answers.get(key)?.held;
    return typeof held === 'boolean' ? held : true;
  };
  /** Remembers `read` (the answer for `key`, undefined for refused now) from `now`, as its last answer when refused. */
  const remember = (key: string, now: number, read: Promise<boolean | undefined>): Promise<boolean> => {
    const last = lastOf(key);
    if (answers.size >= maxEntries) answers.clear();
    const pending = read.then((held) => held ?? last);
    const entry: { held: SyncOrAsync<boolean>; until: number } = { held: pending, until: now + ttlMs };
    answers.set(key, entry);
    pending.then(
      (held) => void (entry.held = held),
      () => answers.get(key) === entry && answers.delete(key),
    );
    return pending;
  };
  const all = (choices: readonly PatientChoice[]): SyncOrAsync<boolean[]> => {
    const now = deps.clock.now();
    const answered: SyncOrAsync<boolean>[] = [];
    // Those to read, by user and app, each key once, with the places that wait for it.
    const toRead = new Map<string, Map<string, { choice: PatientChoice; at: number[] }>>();
    choices.forEach((c, i) => {
      const key = keyOf(c);
      const held = known(key, now);
      answered.push(held ?? true);
      if (held !== undefined) return;
      const of = `${c.tenant}\u0000${c.clientId}\u0000${c.userId}`;
      const group = toRead.get(of) ?? toRead.set(of, new Map()).get(of)!;
      const wanted = group.get(key) ?? group.set(key, { choice: c, at: [] }).get(key)!;
      wanted.at.push(i);
    });
    // Each user's choices in one read, the users side by side, those of a reach searched together.
    const groups = [...toRead.values()].map((group) => [...group.entries()]);
    const read = groups.length ? readHeldOfUsers(deps, users, groups.map((wanted) => wanted.map(([, w]) => w.choice))) : undefined;
    groups.forEach((wanted, g) => {
      wanted.forEach(([key, w], i) => {
        const held = remember(key, now, read!.then((h) => h[g]![i]));
        for (const at of w.at) answered[at] = held;
      });
    });
    return answered.some((h) => h instanceof Promise) ? Promise.all(answered) : (answered as boolean[]);
  };
  const check = ((choice) => {
    const key = keyOf(choice);
    const now = deps.clock.now();
    return known(key, now) ?? remember(key, now, readHeld(deps, users, choice));
  }) as PatientChoiceCheck;
  check.all = all;
  check.known = (choices) => {
    const now = deps.clock.now();
    return choices.map((c) => {
      const held = known(keyOf(c), now);
      return typeof held === 'boolean' ? held : undefined;
    });
  };
  check.fresh = (choice) => remember(keyOf(choice), deps.clock.now(), readHeld(deps, (tenant, id) => deps.store.users.get(tenant, id), choice));
  return check;
}

/** The FHIR gate's check of a token (bearerAuthenticator): one without a chosen patient (tokenChoice) needs nothing. */
export function tokenPatientHeld(check: PatientChoiceCheck): PatientHeldCheck {
  return (token) => {
    const choice = tokenChoice(token);
    return choice === null ? true : check(choice);
  };
}
