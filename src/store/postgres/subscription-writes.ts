import type { NotificationToWrite } from '../types.ts';
import { EVENTS_KEPT } from '../types.ts';
import type { PgTx } from './db.ts';

/** An activation (ownSubscription) noted and not yet written. */
interface Activation {
  owner: string;
  channel: string;
  heartbeat?: { periodMs: number; now: number };
  restart: boolean;
}

/** A subscription_notifications row, as inserted. */
interface NotificationRow {
  tenant: string;
  subscription_id: string;
  type: string;
  resource_id: string;
  version_id: number;
  created_at: number;
  event: string | null;
  event_number: number | null;
  /** Kept for $events alone (NotificationToWrite.unsent). */
  unsent: boolean;
}

/** One transaction's writes of subscriptions' delivery state (the writer's `notify`, `ownSubscription`, `endSubscription`, and the commit's). */
export interface SubscriptionWrites {
  notify(notifications: NotificationToWrite[], now: number): Promise<void>;
  own(id: string, owner: string, channel: string, heartbeat?: { periodMs: number; now: number }, restart?: boolean): void;
  end(id: string): void;
  /** Writes what is still noted, before COMMIT. */
  commit(): Promise<void>;
}

/**
 * The delivery state a transaction writes on PostgreSQL. Every lock it takes on subscription_state rows is taken
 * in id order, in one pass: a deletion (`end`) and an activation (`own`) are only noted, and written in the pass
 * `notify` makes over the rows it numbers events by, or at the commit. Written at once, a transaction activating
 * (or deleting) Subscription b and numbering an event of a locked b then a, and a write numbering events of both
 * (a then b) waited for it in a cycle: a deadlock. For each subscription, the state row is locked before its
 * outbox rows and events, as delivery (`delivered`, `drop`) locks them.
 */
export function createSubscriptionWrites(tx: PgTx, tenant: string): SubscriptionWrites {
  /** Subscriptions ended and not yet deleted. */
  const ending = new Set<string>();
  /** Subscriptions activated and not yet written (after their end, when both are noted: deleted, then created again). */
  const owning = new Map<string, Activation>();
  /** Notifications of subscriptions in `owning`, inserted once their activation is written (its restart, or its new owner, deletes those recorded before it). */
  let held: NotificationRow[] = [];

  /** Deletes subscription `id`'s delivery state: its state row first, then its outbox rows and events. */
  async function deleteState(id: string): Promise<void> {
    await tx`DELETE FROM subscription_state WHERE tenant = ${tenant} AND id = ${id}`;
    await tx`DELETE FROM subscription_notifications WHERE tenant = ${tenant} AND subscription_id = ${id}`;
    await tx`DELETE FROM subscription_events WHERE tenant = ${tenant} AND subscription_id = ${id}`;
    await tx`DELETE FROM subscription_event_tally WHERE tenant = ${tenant} AND subscription_id = ${id}`;
  }

  /**
   * Reads criteria Subscription `id`'s owner, its row locked FOR KEY SHARE (as a write notifying it always did), and
   * counts the `n` events matched for `matchedFor` when that is the owner: into its state row when no other write holds
   * it (FOR NO KEY UPDATE SKIP LOCKED), folding in the tally rows committed before, else as a row of
   * subscription_event_tally. One statement; no write waits for another notifying the same Subscription, as a topic's
   * numbered events do. The count is read as the state's and the tally's sum (SubscriptionRepo.events); the tally holds
   * at most a row per write that found the state row held, until the next write that holds it.
   *
   * The update names the row by its key, not by the ctid `locked` returns: when the write holding the row before
   * committed after this statement's snapshot, the lock follows the row to its newest version, whose ctid the
   * snapshot cannot see, so an update by ctid changed nothing and the folded tally rows were lost (a count short
   * under concurrent writes). By key, the update finds the version it sees and follows it to the newest.
   */
  async function ownerCounting(id: string, matchedFor: string, n: number): Promise<string | null> {
    const [row] = await tx<{ owner: string }[]>`
      WITH shared AS (SELECT owner FROM subscription_state WHERE tenant = ${tenant} AND id = ${id} FOR KEY SHARE),
      locked AS (SELECT ctid FROM subscription_state WHERE tenant = ${tenant} AND id = ${id} AND owner = ${matchedFor} FOR NO KEY UPDATE SKIP LOCKED),
      folded AS (DELETE FROM subscription_event_tally WHERE tenant = ${tenant} AND subscription_id = ${id} AND EXISTS (SELECT 1 FROM locked) RETURNING events),
      counted AS (
        UPDATE subscription_state SET events = events + ${n} + (SELECT COALESCE(SUM(events), 0) FROM folded)
        WHERE tenant = ${tenant} AND id = ${id} AND EXISTS (SELECT 1 FROM locked) RETURNING 1 AS one),
      tallied AS (
        INSERT INTO subscription_event_tally (tenant, subscription_id, events)
        SELECT ${tenant}, ${id}, ${n} FROM shared WHERE shared.owner = ${matchedFor} AND NOT EXISTS (SELECT 1 FROM counted))
      SELECT owner FROM shared`;
    return row?.owner ?? null;
  }

  /**
   * Writes subscription `id`'s owner; an activation anew (`restart`), or one by another owner than the one stored,
   * then deletes the notifications still waiting: they were matched with what the earlier owner could read.
   */
  async function writeOwner(id: string, a: Activation): Promise<void> {
    // The state row is locked first (in the pass's id order), and its owner compared as it is locked: as committed last.
    const [stored] = await tx<{ changed: boolean }[]>`
      SELECT owner <> ${a.owner} AS changed FROM subscription_state WHERE tenant = ${tenant} AND id = ${id} FOR UPDATE`;
    await tx`
      INSERT INTO subscription_state (tenant, id, owner, channel, heartbeat_ms, last_notified_at)
      VALUES (${tenant}, ${id}, ${a.owner}, ${a.channel}, ${a.heartbeat?.periodMs ?? 0}, ${a.heartbeat?.now ?? 0})
      ON CONFLICT (tenant, id) DO UPDATE SET owner = excluded.owner, channel = excluded.channel, failures = 0, next_attempt_at = 0, last_error = NULL,
        heartbeat_ms = excluded.heartbeat_ms, last_notified_at = excluded.last_notified_at`;
    if (a.restart || stored?.changed === true) await tx`DELETE FROM subscription_notifications WHERE tenant = ${tenant} AND subscription_id = ${id}`;
  }

  /** Writes what is noted of subscription `id`: its end, then its activation. */
  async function settle(id: string): Promise<void> {
    if (ending.delete(id)) await deleteState(id);
    const activation = owning.get(id);
    if (activation === undefined) return;
    owning.delete(id);
    await writeOwner(id, activation);
  }

  /** Inserts notification rows (the held ones first, once their activations are written), and keeps topic events for $events. */
  async function insert(rows: NotificationRow[]): Promise<void> {
    const ready = owning.size ? rows.filter((r) => !owning.has(r.subscription_id)) : rows;
    const all = [...(owning.size ? held.filter((r) => !owning.has(r.subscription_id)) : held), ...ready];
    held = [...held.filter((r) => owning.has(r.subscription_id)), ...rows.filter((r) => owning.has(r.subscription_id))];
    if (!all.length) return;
    const queued = all.filter((r) => !r.unsent);
    if (queued.length) await tx`INSERT INTO subscription_notifications ${tx(queued, 'tenant', 'subscription_id', 'type', 'resource_id', 'version_id', 'created_at', 'event', 'event_number')}`;
    // Topic events are kept for $events, the last EVENTS_KEPT of each subscription.
    const kept = all.filter((r) => r.event_number !== null);
    if (!kept.length) return;
    await tx`INSERT INTO subscription_events ${tx(kept, 'tenant', 'subscription_id', 'event_number', 'type', 'resource_id', 'version_id', 'event', 'created_at')}`;
    for (const r of kept) {
      if (r.event_number! > EVENTS_KEPT) await tx`DELETE FROM subscription_events WHERE tenant = ${tenant} AND subscription_id = ${r.subscription_id} AND event_number <= ${r.event_number! - EVENTS_KEPT}`;
    }
  }

  return {
    async notify(notifications, now) {
      if (!notifications.length) return;
      const numbers = new Map<NotificationToWrite, number | null>();
      // A topic event is numbered by its subscription's count, moved here (the row stays locked until the
      // write commits, so concurrent writes number one subscription's events one after the other): each
      // subscription's count moved once by its number of events, the subscriptions in id order, so that two
      // writes numbering events of the same subscriptions never wait for each other in a cycle (a deadlock).
      const bySubscription = new Map<string, NotificationToWrite[]>();
      // The subscriptions with notifications a match made: their owner is read as their row is locked, in the same pass.
      const matched = new Set<string>();
      // A criteria Subscription's events (a topic's are numbered below), by the owner they were matched for: counted as
      // its owner is read, those matched for the owner it has (the others are not queued). The hub matches each
      // subscription for one owner in a write.
      const criteria = new Map<string, { matchedFor: string; n: number }>();
      for (const n of notifications) {
        if (n.matchedFor !== undefined) matched.add(n.subscriptionId);
        if (n.event === undefined && n.matchedFor !== undefined && n.unsent !== true) {
          const c = criteria.get(n.subscriptionId);
          if (c === undefined) criteria.set(n.subscriptionId, { matchedFor: n.matchedFor, n: 1 });
          else if (c.matchedFor === n.matchedFor) c.n++;
        }
        if (n.event === undefined || n.event === 'handshake' || n.event === 'heartbeat') continue;
        const list = bySubscription.get(n.subscriptionId) ?? [];
        list.push(n);
        bySubscription.set(n.subscriptionId, list);
      }
      const stamps = new Map<NotificationToWrite, number>();
      /** The owner stored (null: no state row), as committed last by an activation, once the row is locked. */
      const owners = new Map<string, string | null>();
      // The subscriptions this transaction ended or activated are written in the same pass, in id order with the counts.
      const ids = new Set([...bySubscription.keys(), ...matched]);
      const noted = ids.size ? [...ending, ...owning.keys()] : [];
      for (const id of [...new Set([...ids, ...noted])].sort()) {
        await settle(id);
        const events = bySubscription.get(id);
        if (events === undefined) {
          // FOR KEY SHARE: writes notifying the same subscription, and delivery's updates of its state, do not wait for it;
          // an activation or deletion (FOR UPDATE, DELETE) waits for it, and deletes what it recorded (its count too), or it
          // waits for them, and reads the owner they committed. A criteria one's events are counted with it (ownerCounting).
          const counting = criteria.get(id);
          if (counting !== undefined) owners.set(id, await ownerCounting(id, counting.matchedFor, counting.n));
          else if (matched.has(id)) {
            const [row] = await tx<{ owner: string }[]>`SELECT owner FROM subscription_state WHERE tenant = ${tenant} AND id = ${id} FOR KEY SHARE`;
            owners.set(id, row?.owner ?? null);
          }
          continue;
        }
        const [r] = await tx<{ events: string; owner: string }[]>`
          UPDATE subscription_state SET events = events + ${events.length}, last_notified_at = ${now} WHERE tenant = ${tenant} AND id = ${id} RETURNING events, owner`;
        owners.set(id, r?.owner ?? null);
        const first = r ? Number(r.events) - events.length + 1 : null;
        // `now` was taken before the transaction, so a write that waited for the row may carry an earlier time than
        // the event numbered before it: read once the row is locked (that event committed), the later of the two.
        const [previous] = first !== null && first > 1
          ? await tx<{ created_at: string }[]>`SELECT created_at FROM subscription_events WHERE tenant = ${tenant} AND subscription_id = ${id} AND event_number = ${first - 1}`
          : [];
        const at = Math.max(now, previous ? Number(previous.created_at) : 0);
        events.forEach((n, i) => {
          numbers.set(n, first === null ? null : first + i);
          stamps.set(n, at);
        });
      }
      await insert(notifications.map((n) => ({
        tenant, subscription_id: n.subscriptionId, type: n.type, resource_id: n.id, version_id: n.versionId, created_at: stamps.get(n) ?? now,
        event: n.event ?? null, event_number: numbers.get(n) ?? null,
        // Matched with another owner's reach than the one stored (another process's set, read before an activation committed).
        unsent: n.unsent === true || (n.matchedFor !== undefined && owners.get(n.subscriptionId) !== n.matchedFor),
      })));
    },
    own(id, owner, channel, heartbeat, restart) {
      owning.set(id, { owner, channel, ...(heartbeat && { heartbeat }), restart: restart === true || owning.get(id)?.restart === true });
    },
    end(id) {
      // An activation noted in this transaction ends too, with what it held back.
      owning.delete(id);
      held = held.filter((r) => r.subscription_id !== id);
      ending.add(id);
    },
    async commit() {
      for (const id of [...new Set([...ending, ...owning.keys()])].sort()) await settle(id);
      await insert([]);
    },
  };
}
