import type { ClaimedSubscription, KeptEvent, PendingBatch, PendingNotification, SubscriptionRepo, TopicEvent } from '../types.ts';
import type { Pg } from './db.ts';
import { dbNowOf } from './export-jobs.ts';
import { transaction } from './transaction.ts';

interface NotificationRow {
  pk: string;
  subscription_id: string;
  type: string;
  resource_id: string;
  version_id: number;
  created_at: string;
  event: string | null;
  event_number: string | null;
}

/** A row of pendingBatch: the notification's columns are null in the one row left when none waits. */
type BatchRow = { [K in keyof NotificationRow]: NotificationRow[K] | null } & { sub_version: number | null; sub_owner: string | null };

/**
 * Subscription owners and the notification outbox on PostgreSQL. A claim leases subscriptions with
 * `FOR UPDATE SKIP LOCKED`, so processes sharing the database never hold one subscription together
 * (each notification is delivered by one of them) and never wait on each other. A lease is set and judged by
 * the database's clock (`dbNowOf`), never the caller's `now`, which only says which retries are due.
 */
export function createPostgresSubscriptions(sql: Pg): SubscriptionRepo {
  const heldBy = (tenant: string, id: string, worker: string) => sql`tenant = ${tenant} AND id = ${id} AND leased_by = ${worker}`;
  return {
    async owners(tenant) {
      const rows = await sql<{ id: string; owner: string }[]>`SELECT id, owner FROM subscription_state WHERE tenant = ${tenant}`;
      return new Map(rows.map((r) => [r.id, r.owner]));
    },
    async ownersOf(tenant, ids) {
      if (ids.length === 0) return new Map();
      const rows = await sql<{ id: string; owner: string }[]>`SELECT id, owner FROM subscription_state WHERE tenant = ${tenant} AND id = ANY(${[...ids]}::text[])`;
      return new Map(rows.map((r) => [r.id, r.owner]));
    },
    async owner(tenant, id) {
      const [row] = await sql<{ owner: string }[]>`SELECT owner FROM subscription_state WHERE tenant = ${tenant} AND id = ${id}`;
      return row?.owner ?? null;
    },
    async claim(worker, now, leaseMs, limit, exclude = []) {
      // The owner's app read only when some are excluded (the owner is the JSON of owner.ts ownerOf).
      const apps = exclude.length ? sql`AND coalesce((s.owner::jsonb)->>'clientId', '') <> ALL(${[...exclude]}::text[])` : sql``;
      const rows = await sql<(Omit<ClaimedSubscription, 'failures'> & { failures: number })[]>`
        UPDATE subscription_state SET lease_until = ${dbNowOf(sql)} + ${leaseMs}, leased_by = ${worker}
        WHERE (tenant, id) IN (
          SELECT s.tenant, s.id FROM subscription_state s
          WHERE s.channel = 'rest-hook' AND s.lease_until < ${dbNowOf(sql)} AND s.next_attempt_at <= ${now} ${apps}
            AND EXISTS (SELECT 1 FROM subscription_notifications n WHERE n.tenant = s.tenant AND n.subscription_id = s.id)
          ORDER BY s.next_attempt_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING tenant, id, owner, failures`;
      return rows.map((r) => ({ tenant: r.tenant, id: r.id, owner: r.owner, failures: Number(r.failures) }));
    },
    async pending(tenant, id, limit) {
      const rows = await sql<NotificationRow[]>`
        SELECT pk, subscription_id, type, resource_id, version_id, created_at, event, event_number FROM subscription_notifications
        WHERE tenant = ${tenant} AND subscription_id = ${id} ORDER BY pk LIMIT ${limit}`;
      return rows.map(toPending);
    },
    async pendingBatch(tenant, id, limit) {
      // One statement: its snapshot holds the version, the owner and the notifications as one write left them.
      const rows = await sql<BatchRow[]>`
        SELECT r.version_id AS sub_version, s.owner AS sub_owner,
          n.pk, n.subscription_id, n.type, n.resource_id, n.version_id, n.created_at, n.event, n.event_number
        FROM (SELECT 1) AS one
        LEFT JOIN resources r ON r.tenant = ${tenant} AND r.type = 'Subscription' AND r.id = ${id}
        LEFT JOIN subscription_state s ON s.tenant = ${tenant} AND s.id = ${id}
        LEFT JOIN LATERAL (
          SELECT * FROM subscription_notifications WHERE tenant = ${tenant} AND subscription_id = ${id} ORDER BY pk LIMIT ${limit}) AS n ON true
        ORDER BY n.pk`;
      return toBatch(rows);
    },
    async delivered(tenant, id, worker, pk) {
      return transaction(sql, async (tx) => {
        const r = await tx`UPDATE subscription_state SET failures = 0, last_error = NULL WHERE ${heldBy(tenant, id, worker)}`;
        return r.count > 0 && (await tx`DELETE FROM subscription_notifications WHERE pk = ${pk}`).count > 0;
      });
    },
    async failed(tenant, id, worker, failures, nextAttemptAt, error) {
      await sql`UPDATE subscription_state SET failures = ${failures}, next_attempt_at = ${nextAttemptAt}, last_error = ${error} WHERE ${heldBy(tenant, id, worker)}`;
    },
    async drop(tenant, id, keepHeartbeats = false) {
      return transaction(sql, async (tx) => {
        const heartbeat = keepHeartbeats ? tx`` : tx`, heartbeat_ms = 0`;
        await tx`UPDATE subscription_state SET failures = 0, next_attempt_at = 0 ${heartbeat} WHERE tenant = ${tenant} AND id = ${id}`;
        const r = await tx`DELETE FROM subscription_notifications WHERE tenant = ${tenant} AND subscription_id = ${id}`;
        return r.count;
      });
    },
    async release(tenant, id, worker) {
      await sql`UPDATE subscription_state SET lease_until = 0, leased_by = NULL WHERE ${heldBy(tenant, id, worker)}`;
    },
    async yielded(tenant, id, worker, at) {
      await sql`UPDATE subscription_state SET next_attempt_at = ${at} WHERE ${heldBy(tenant, id, worker)}`;
    },
    async handBack(tenant, id, worker, at) {
      await sql`UPDATE subscription_state SET next_attempt_at = ${at}, lease_until = 0, leased_by = NULL WHERE ${heldBy(tenant, id, worker)}`;
    },
    async waiting() {
      const [r] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM subscription_notifications`;
      return r!.n;
    },
    async waitingFor(tenant, id, cap) {
      const [r] = await sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM (
          SELECT 1 FROM subscription_notifications WHERE tenant = ${tenant} AND subscription_id = ${id} LIMIT ${cap}) AS w`;
      return r!.n;
    },
    async recent(subscriptions, since) {
      if (!subscriptions.length) return [];
      const tenants = subscriptions.map((s) => s.tenant);
      const ids = subscriptions.map((s) => s.id);
      const rows = await sql<(NotificationRow & { tenant: string })[]>`
        SELECT pk, tenant, subscription_id, type, resource_id, version_id, created_at, event, event_number FROM subscription_notifications
        WHERE created_at >= ${since}
          AND (tenant, subscription_id) IN (SELECT * FROM unnest(${tenants}::text[], ${ids}::text[]))
        ORDER BY pk`;
      return rows.map((r) => ({ ...toPending(r), tenant: r.tenant }));
    },
    async purgeWebsocket(before) {
      const r = await sql`
        DELETE FROM subscription_notifications WHERE created_at < ${before}
          AND (tenant, subscription_id) IN (SELECT tenant, id FROM subscription_state WHERE channel = 'websocket')`;
      return r.count;
    },
    async heartbeats(now) {
      return transaction(sql, async (tx) => {
        // The UPDATE's row locks make one process record each heartbeat; SKIP LOCKED leaves those another holds.
        const due = await tx<{ tenant: string; id: string }[]>`
          UPDATE subscription_state SET last_notified_at = ${now}
          WHERE (tenant, id) IN (
            SELECT s.tenant, s.id FROM subscription_state s
            WHERE s.heartbeat_ms > 0 AND s.channel = 'rest-hook' AND s.last_notified_at + s.heartbeat_ms <= ${now}
              AND NOT EXISTS (SELECT 1 FROM subscription_notifications n WHERE n.tenant = s.tenant AND n.subscription_id = s.id)
            FOR UPDATE SKIP LOCKED)
          RETURNING tenant, id`;
        if (!due.length) return 0;
        const rows = due.map((d) => ({ tenant: d.tenant, subscription_id: d.id, type: 'Subscription', resource_id: d.id, version_id: 0, created_at: now, event: 'heartbeat' }));
        await tx`INSERT INTO subscription_notifications ${tx(rows, 'tenant', 'subscription_id', 'type', 'resource_id', 'version_id', 'created_at', 'event')}`;
        return due.length;
      });
    },
    async eventLog(tenant, id, from, to, limit) {
      const rows = await sql<{ number: string; type: string; id: string; version_id: number; event: KeptEvent['event']; created_at: string }[]>`
        SELECT event_number AS number, type, resource_id AS id, version_id, event, created_at FROM subscription_events
        WHERE tenant = ${tenant} AND subscription_id = ${id} AND event_number >= ${from} AND event_number <= ${to} ORDER BY event_number LIMIT ${limit}`;
      return rows.map((r) => ({ number: Number(r.number), type: r.type, id: r.id, versionId: r.version_id, event: r.event, createdAt: Number(r.created_at) }));
    },
    async events(tenant, id) {
      // A criteria Subscription's count is its state's and its tally's (subscription-writes.ts countEvents), read in one snapshot.
      const [r] = await sql<{ events: string }[]>`
        SELECT s.events + COALESCE((SELECT SUM(t.events) FROM subscription_event_tally t WHERE t.tenant = s.tenant AND t.subscription_id = s.id), 0) AS events
        FROM subscription_state s WHERE s.tenant = ${tenant} AND s.id = ${id}`;
      return r ? Number(r.events) : null;
    },
  };
}

/** The rows of pendingBatch (one without a notification when none waits) as a PendingBatch. */
function toBatch(rows: BatchRow[]): PendingBatch {
  const first = rows[0];
  return {
    versionId: first?.sub_version ?? null,
    owner: first?.sub_owner ?? null,
    notifications: rows.filter((r): r is BatchRow & NotificationRow => r.pk !== null).map(toPending),
  };
}

function toPending(r: NotificationRow): PendingNotification {
  return {
    pk: Number(r.pk), subscriptionId: r.subscription_id, type: r.type, id: r.resource_id, versionId: r.version_id, createdAt: Number(r.created_at),
    ...(r.event !== null && { event: r.event as TopicEvent }),
    ...(r.event_number !== null && { eventNumber: Number(r.event_number) }),
  };
}
