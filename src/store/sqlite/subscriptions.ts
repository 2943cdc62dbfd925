import type { Database } from 'bun:sqlite';
import { DB_NOW } from './export-jobs.ts';
import type { ClaimedSubscription, KeptEvent, PendingBatch, PendingNotification, RecentNotification, SubscriptionRepo, TopicEvent } from '../types.ts';

interface NotificationRow {
  pk: number;
  subscription_id: string;
  type: string;
  resource_id: string;
  version_id: number;
  created_at: number;
  event: string | null;
  event_number: number | null;
}

/** A row of pendingBatch: the notification's columns are null in the one row left when none waits. */
type BatchRow = { [K in keyof NotificationRow]: NotificationRow[K] | null } & { sub_version: number | null; sub_owner: string | null };

const HELD_BY = 'tenant = ? AND id = ? AND leased_by = ?';

/**
 * Subscription owners and the notification outbox on SQLite. Every write runs in the writer's queue
 * inside a write transaction (src/store/sqlite/index.ts `repo`), which holds the database's write lock,
 * so a claim is atomic whichever processes share the file. A lease is set and judged by the database's clock
 * (`DB_NOW`), as on PostgreSQL; the caller's `now` only says which retries are due.
 */
export function createSqliteSubscriptions(db: Database): SubscriptionRepo {
  return {
    async owners(tenant) {
      const rows = db.query<{ id: string; owner: string }, [string]>('SELECT id, owner FROM subscription_state WHERE tenant = ?').all(tenant);
      return new Map(rows.map((r) => [r.id, r.owner]));
    },
    async ownersOf(tenant, ids) {
      if (ids.length === 0) return new Map();
      const rows = db
        .query<{ id: string; owner: string }, [string, string]>('SELECT id, owner FROM subscription_state WHERE tenant = ? AND id IN (SELECT value FROM json_each(?))')
        .all(tenant, JSON.stringify(ids));
      return new Map(rows.map((r) => [r.id, r.owner]));
    },
    async owner(tenant, id) {
      return db.query<{ owner: string }, [string, string]>('SELECT owner FROM subscription_state WHERE tenant = ? AND id = ?').get(tenant, id)?.owner ?? null;
    },
    async claim(worker, now, leaseMs, limit, exclude = []) {
      // The owner's app read only when some are excluded (the owner is the JSON of owner.ts ownerOf).
      const apps = exclude.length ? `AND coalesce(json_extract(s.owner, '$.clientId'), '') NOT IN (SELECT value FROM json_each(?5))` : '';
      const args: [number, string, number, number, ...string[]] = [leaseMs, worker, now, limit, ...(exclude.length ? [JSON.stringify(exclude)] : [])];
      return db
        .query<ClaimedSubscription, (string | number)[]>(
          `UPDATE subscription_state SET lease_until = ${DB_NOW} + ?1, leased_by = ?2
           WHERE (tenant, id) IN (
             SELECT s.tenant, s.id FROM subscription_state s
             WHERE s.channel = 'rest-hook' AND s.lease_until < ${DB_NOW} AND s.next_attempt_at <= ?3 ${apps}
               AND EXISTS (SELECT 1 FROM subscription_notifications n WHERE n.tenant = s.tenant AND n.subscription_id = s.id)
             ORDER BY s.next_attempt_at LIMIT ?4)
           RETURNING tenant, id, owner, failures`,
        )
        .all(...args);
    },
    async pending(tenant, id, limit) {
      const rows = db
        .query<NotificationRow, [string, string, number]>(
          'SELECT pk, subscription_id, type, resource_id, version_id, created_at, event, event_number FROM subscription_notifications WHERE tenant = ? AND subscription_id = ? ORDER BY pk LIMIT ?',
        )
        .all(tenant, id, limit);
      return rows.map(toPending);
    },
    async pendingBatch(tenant, id, limit) {
      // One statement: its snapshot holds the version, the owner and the notifications as one write left them.
      const rows = db
        .query<BatchRow, [string, string, number]>(
          `SELECT (SELECT version_id FROM resources WHERE tenant = ?1 AND type = 'Subscription' AND id = ?2) AS sub_version,
             (SELECT owner FROM subscription_state WHERE tenant = ?1 AND id = ?2) AS sub_owner,
             n.pk, n.subscription_id, n.type, n.resource_id, n.version_id, n.created_at, n.event, n.event_number
           FROM (SELECT 1) AS one
           LEFT JOIN (SELECT * FROM subscription_notifications WHERE tenant = ?1 AND subscription_id = ?2 ORDER BY pk LIMIT ?3) AS n ON 1
           ORDER BY n.pk`,
        )
        .all(tenant, id, limit);
      return {
        versionId: rows[0]?.sub_version ?? null,
        owner: rows[0]?.sub_owner ?? null,
        notifications: rows.filter((r): r is BatchRow & NotificationRow => r.pk !== null).map(toPending),
      } satisfies PendingBatch;
    },
    async delivered(tenant, id, worker, pk) {
      if (db.query(`UPDATE subscription_state SET failures = 0, last_error = NULL WHERE ${HELD_BY}`).run(tenant, id, worker).changes === 0) return false;
      return db.query('DELETE FROM subscription_notifications WHERE pk = ?').run(pk).changes > 0;
    },
    async failed(tenant, id, worker, failures, nextAttemptAt, error) {
      db.query(`UPDATE subscription_state SET failures = ?, next_attempt_at = ?, last_error = ? WHERE ${HELD_BY}`).run(failures, nextAttemptAt, error, tenant, id, worker);
    },
    async drop(tenant, id, keepHeartbeats = false) {
      const heartbeat = keepHeartbeats ? '' : ', heartbeat_ms = 0';
      db.query(`UPDATE subscription_state SET failures = 0, next_attempt_at = 0${heartbeat} WHERE tenant = ? AND id = ?`).run(tenant, id);
      return db.query('DELETE FROM subscription_notifications WHERE tenant = ? AND subscription_id = ?').run(tenant, id).changes;
    },
    async release(tenant, id, worker) {
      db.query(`UPDATE subscription_state SET lease_until = 0, leased_by = NULL WHERE ${HELD_BY}`).run(tenant, id, worker);
    },
    async yielded(tenant, id, worker, at) {
      db.query(`UPDATE subscription_state SET next_attempt_at = ? WHERE ${HELD_BY}`).run(at, tenant, id, worker);
    },
    async handBack(tenant, id, worker, at) {
      db.query(`UPDATE subscription_state SET next_attempt_at = ?, lease_until = 0, leased_by = NULL WHERE ${HELD_BY}`).run(at, tenant, id, worker);
    },
    async waiting() {
      return db.query<{ n: number }, []>('SELECT COUNT(*) AS n FROM subscription_notifications').get()!.n;
    },
    async waitingFor(tenant, id, cap) {
      return db.query<{ n: number }, [string, string, number]>(
        'SELECT COUNT(*) AS n FROM (SELECT 1 FROM subscription_notifications WHERE tenant = ? AND subscription_id = ? LIMIT ?)',
      ).get(tenant, id, cap)!.n;
    },
    async recent(subscriptions, since) {
      if (!subscriptions.length) return [];
      const pairs = subscriptions.map(() => '(?, ?)').join(', ');
      return db
        .query<NotificationRow & { tenant: string }, (string | number)[]>(
          `SELECT pk, tenant, subscription_id, type, resource_id, version_id, created_at, event, event_number FROM subscription_notifications
           WHERE created_at >= ? AND (tenant, subscription_id) IN (VALUES ${pairs}) ORDER BY pk`,
        )
        .all(since, ...subscriptions.flatMap((s) => [s.tenant, s.id]))
        .map((r): RecentNotification => ({ ...toPending(r), tenant: r.tenant }));
    },
    async purgeWebsocket(before) {
      return db.query(
        `DELETE FROM subscription_notifications WHERE created_at < ?
         AND (tenant, subscription_id) IN (SELECT tenant, id FROM subscription_state WHERE channel = 'websocket')`,
      ).run(before).changes;
    },
    async heartbeats(now) {
      const due = db.query<{ tenant: string; id: string }, [number, number]>(
        `UPDATE subscription_state SET last_notified_at = ?1
         WHERE heartbeat_ms > 0 AND channel = 'rest-hook' AND last_notified_at + heartbeat_ms <= ?2
           AND NOT EXISTS (SELECT 1 FROM subscription_notifications n WHERE n.tenant = subscription_state.tenant AND n.subscription_id = subscription_state.id)
         RETURNING tenant, id`,
      ).all(now, now);
      const add = db.query(`INSERT INTO subscription_notifications (tenant, subscription_id, type, resource_id, version_id, created_at, event) VALUES (?, ?, 'Subscription', ?, 0, ?, 'heartbeat')`);
      for (const d of due) add.run(d.tenant, d.id, d.id, now);
      return due.length;
    },
    async eventLog(tenant, id, from, to, limit) {
      return db.query<KeptEvent, [string, string, number, number, number]>(
        `SELECT event_number AS number, type, resource_id AS id, version_id AS versionId, event, created_at AS createdAt FROM subscription_events
         WHERE tenant = ? AND subscription_id = ? AND event_number >= ? AND event_number <= ? ORDER BY event_number LIMIT ?`,
      ).all(tenant, id, from, to, limit);
    },
    async events(tenant, id) {
      return db.query<{ events: number }, [string, string]>('SELECT events FROM subscription_state WHERE tenant = ? AND id = ?').get(tenant, id)?.events ?? null;
    },
  };
}

function toPending(r: NotificationRow): PendingNotification {
  return {
    pk: r.pk, subscriptionId: r.subscription_id, type: r.type, id: r.resource_id, versionId: r.version_id, createdAt: r.created_at,
    ...(r.event !== null && { event: r.event as TopicEvent }),
    ...(r.event_number !== null && { eventNumber: Number(r.event_number) }),
  };
}
