/**
 * Subscriptions the hub finds silenced for their owner's authority as a write begins (hub.ts notifying), shown in the
 * resource after that write commits: the next event is the one place some of them are known. The command line writes
 * the status as it cuts the authority (user-authority.ts, client-authority.ts), but a Subscription activated with a
 * token the servers had not yet refused (the seconds after `cinder user|client disable`), or written by its app at the
 * moment `cinder` wrote it, escapes that write and kept reading `active` while it notified nothing. At the next write in
 * its tenant, the server writes it as `cinder` would have: `off` once the sign-in it rests on is revoked, paused
 * (`error`) while its client is disabled, `off` once the client is deleted, paused (`error`) while its client's
 * registered scopes no longer let it search what it selects (a client's own or one activated on a user's sign-in,
 * found so as the set is loaded or as a compiled one is compiled again); `error` for good once the scopes
 * recorded at its activation no longer let it search what it selects (owner-reach.ts: an older release's grant);
 * and paused (`error`, topicPausedError) while its topic, edited since, selects types its owner may not search
 * (neither grant nor registration to blame), set back to the status it had (client-authority.ts statusBefore) once
 * the set's load finds it compiles again, unless its tenant holds the 1,000 activated Subscriptions the hub matches
 * already: then `off`, its `error` naming that bound (server-status.ts resumeServerPaused), as `cinder client enable` does.
 * A topic-based one its topic refuses when the set is loaded (a 422: the topic deleted or edited since, or a filter an
 * older release let through), or an R4 criteria one whose criteria no longer compile (a 4xx: the ValueSet its `:in`
 * names deleted, a search an older release ran), is set `error` saying what (refused.ts refusedError), and set back to
 * the status it had, as one paused for its topic is, once the set's load finds it compiles again.
 * A write of one that fails (a version the server cannot store, its database unreachable) is tried again only after
 * a wait that doubles with each failure (SHOW_RETRY_FIRST_MS to SHOW_RETRY_MAX_MS): one that always fails neither
 * takes the places of the others at every write nor costs every write a failed transaction.
 */
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { Client } from '../../store/types.ts';
import type { FhirDeps } from '../crud.ts';
import { isActivated } from './activation.ts';
import { deletedError, pausedError, resumablePause, topicPausedError } from './client-authority.ts';
import { ownerUser } from './owner.ts';
import { grantError } from './owner-reach.ts';
import { resumeServerPaused, writeServerStatus } from './server-status.ts';
import { signInRevokedError } from './user-authority.ts';

/** How many silenced Subscriptions one write shows at most (showSilenced). */
export const SHOWN_PER_WRITE = 16;
/** How long after a failed write of one it is tried again (ms); doubled after each further failure. */
export const SHOW_RETRY_FIRST_MS = 30_000;
/** The longest wait between two tries of one whose writes keep failing (ms). */
export const SHOW_RETRY_MAX_MS = 3_600_000;
/** The most failed ones remembered by a process (then the earliest remembered are forgotten: tried again at once). */
const FAILED_KEPT = 10_000;

/** A silenced Subscription whose write failed: for which owner, how many times in a row, and when it may be tried again. */
export interface ShowFailure {
  owner: string;
  failures: number;
  retryAt: number;
}

/**
 * A Subscription the hub skipped, and why: its sign-in revoked, its client (its own authority) disabled, or that client's
 * registered scopes no longer letting it search what it selects.
 */
export interface Silenced {
  id: string;
  /** The owner record it was skipped for (a Subscription activated again since by another owner is not touched). */
  owner: string;
  /** The client that activated it; null for the operator's (only a `refused` one may be). */
  clientId: string | null;
  why: 'sign-in' | 'client' | 'scopes' | 'grant' | 'topic' | 'refused';
  client: Client | null;
  /** For `scopes`: the client's registered scopes it was judged with (joined by spaces). */
  registered?: string | null;
  /** For `topic`: the types its topic now selects that its owner may not search (topicPausedError). */
  types?: string[];
  /** For `refused`: its `error`, what its topic or criteria refuse (refused.ts refusedError). */
  error?: string;
}

/**
 * A Subscription the server paused for its topic (`error`, topicPausedError), or set `error` as its topic or criteria
 * refused it (refused.ts), that compiles for its owner again, as the hub's set is loaded: set back to `status`
 * (statusBefore), if its version is still `versionId`, the one judged.
 */
export interface Resumed {
  id: string;
  owner: string;
  status: 'active' | 'requested';
  versionId: number;
}

/** The status and `error` the server writes for `s`. */
function statusOf(s: Silenced): { status: 'off' | 'error'; error: string } {
  if (s.why === 'sign-in') return { status: 'off', error: signInRevokedError };
  if (s.why === 'scopes') return { status: 'error', error: pausedError(s.clientId!, 'scopes') };
  if (s.why === 'grant') return { status: 'error', error: grantError(s.clientId!) };
  if (s.why === 'topic') return { status: 'error', error: topicPausedError(s.types ?? []) };
  if (s.why === 'refused') return { status: 'error', error: s.error! };
  return s.client?.deletedAt != null ? { status: 'off', error: deletedError(s.clientId!) } : { status: 'error', error: pausedError(s.clientId!, 'disabled') };
}

/** Remembers that the write of `key` (for `owner`) failed once more: it waits before it is tried again. */
function noteFailure(failed: Map<string, ShowFailure>, key: string, owner: string, now: number): void {
  const earlier = failed.get(key);
  const failures = earlier?.owner === owner ? earlier.failures + 1 : 1;
  failed.delete(key);
  if (failed.size >= FAILED_KEPT) failed.delete(failed.keys().next().value!);
  failed.set(key, { owner, failures, retryAt: now + Math.min(SHOW_RETRY_FIRST_MS * 2 ** (failures - 1), SHOW_RETRY_MAX_MS) });
}

/**
 * Writes each of `silenced` (of `tenant`) still activated for the owner it was skipped for with the status statusOf
 * gives, as the server (writeServerStatus: a client's write in between stands). `showing` holds the ones under way in
 * this process (a write of one does not start another); a failure is logged, the write that found them having committed,
 * and kept in `failed`: that one is not tried again before its wait is over (noteFailure), so the next writes show the others.
 * At most `limit` are written (each is a write transaction the response waits for: a client with hundreds of them
 * held one write for seconds); the others wait for the next writes, which find them still silenced. Whether the hub's
 * set is to be read again: one was written, or refused for scopes its client no longer has registered (judged again).
 */
export async function showSilenced(
  deps: { fhir: FhirDeps; clock: Clock; log: Logger; showing: Set<string>; failed: Map<string, ShowFailure> }, tenant: string, silenced: readonly (Silenced | Resumed)[],
  limit = SHOWN_PER_WRITE,
): Promise<boolean> {
  const { fhir, clock, log, showing, failed } = deps;
  // Each client as it is now, not as the hub's cache held it (up to 5 seconds old), read once: one enabled since,
  // whose Subscriptions `cinder client enable` set back, is not paused again.
  const clients = new Map<string, Promise<Client | null>>();
  let again = false;
  let tried = 0;
  for (let s of silenced) {
    if (tried >= limit) break;
    const key = `${tenant}\u0000${s.id}`;
    if (showing.has(key)) continue;
    const failure = failed.get(key);
    if (failure?.owner === s.owner && clock.now() < failure.retryAt) continue;
    showing.add(key);
    try {
      if (!('why' in s)) {
        // Set back, unless written since it was judged (a client's write stands, as writeServerStatus keeps it).
        const current = await fhir.store.resources.read(tenant, 'Subscription', s.id);
        const sub = current && !current.deleted ? (JSON.parse(current.content) as Record<string, unknown>) : undefined;
        if (!sub || current!.versionId !== s.versionId || !resumablePause(sub) || (await fhir.store.subscriptions.owner(tenant, s.id)) !== s.owner) continue;
        tried++;
        // Not past the tenant's bound of activated Subscriptions, which activation keeps: at the bound it is set off,
        // naming it (BOUND_ERROR), as `cinder client enable` sets one off; the hub matches no more than the bound.
        const written = await resumeServerPaused(fhir, clock, tenant, current!, sub, s.status);
        if (written !== undefined) again = true;
        if (written === 'off') log.warn('a Subscription paused for its topic was set off, not back: its tenant holds the most active Subscriptions Cinder matches', { tenant, subscription: s.id, status: s.status });
        failed.delete(key);
        continue;
      }
      if (s.why === 'client' || s.why === 'scopes') {
        let read = clients.get(s.clientId!);
        if (read === undefined) clients.set(s.clientId!, (read = fhir.store.clients.get(s.clientId!)));
        const client = await read;
        // A disabled client's users' sign-ins are revoked with it (its disable revokes every token): off for that.
        if (client?.disabled) s = ownerUser(s.owner) !== null ? { ...s, why: 'sign-in' } : { ...s, why: 'client', client };
        else if (s.why === 'client' || !client) continue;
        else if (client.scopes.join(' ') !== s.registered) {
          // Refused for scopes other than those registered now (changed since): the hub judges it again.
          again = true;
          continue;
        }
      }
      const current = await fhir.store.resources.read(tenant, 'Subscription', s.id);
      const sub = current && !current.deleted ? (JSON.parse(current.content) as Record<string, unknown>) : undefined;
      // One paused for its topic, or refused by its topic or criteria, is paused again naming what refuses now: other types
      // its topic selects than its `error` names, or its client's registration (hub.ts refusedBy); or turned off, the
      // sign-in it rests on revoked since; or refused by its topic or criteria, saying what refuses now (refused.ts).
      const renamed = (s.why === 'topic' || s.why === 'scopes' || s.why === 'sign-in' || s.why === 'refused') && sub !== undefined && resumablePause(sub);
      if (!sub || !(isActivated(sub) || renamed) || (await fhir.store.subscriptions.owner(tenant, s.id)) !== s.owner) continue;
      const { status, error } = statusOf(s);
      tried++;
      if (await writeServerStatus(fhir, clock, tenant, current!, sub, status, error)) again = true;
      failed.delete(key);
    } catch (err) {
      noteFailure(failed, key, s.owner, clock.now());
      log.warn('a silenced subscription could not be shown as such', { tenant, subscription: s.id, failures: failed.get(key)!.failures, err });
    } finally {
      showing.delete(key);
    }
  }
  return again;
}
