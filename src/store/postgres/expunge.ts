import type { ExpungeBatch, ExpungeRepo } from '../types.ts';
import { expungeBatch, type ExpungeStatements } from '../expunge-batch.ts';
import type { Pg, PgTx } from './db.ts';
import { deleteIndexRows, markWrite } from './write-sql.ts';
import { transaction } from './transaction.ts';

/**
 * Expunge batches on PostgreSQL, each in one transaction. The resource rows a batch examines (for
 * mode `deleted`, the deleted ones alone) are locked first (FOR UPDATE, in row order), so a write to one of them waits for the batch, then finds
 * the row gone and creates the resource anew; a batch waits for a write in progress the same way.
 */
export function createPostgresExpunge(sql: Pg): ExpungeRepo {
  const statements = (tx: PgTx): ExpungeStatements => {
    const version = (b: ExpungeBatch, column = 'version_id') => (b.versionId === undefined ? tx`` : tx`AND ${tx(column)} = ${b.versionId}`);
    return {
      async candidates(b, limit) {
        const ids = b.ids ? tx`AND id = ANY(${b.ids}::text[])` : tx``;
        // Only the rows the batch may remove are locked: writes to live resources never wait for a batch of deleted ones.
        const deleted = b.mode === 'deleted' ? tx`AND deleted` : tx``;
        const rows = await tx<{ pk: string; id: string; deleted: boolean }[]>`
          SELECT pk, id, deleted FROM resources WHERE tenant = ${b.tenant} AND type = ${b.type} AND pk > ${b.after} ${ids} ${deleted}
          ORDER BY pk LIMIT ${limit} FOR UPDATE`;
        return rows.map((r) => ({ pk: Number(r.pk), id: r.id, deleted: r.deleted }));
      },
      async historyCounts(b, ids) {
        // One index probe per resource (a lateral count): no plan that reads the history of the whole type.
        const rows = await tx<{ id: string; n: number }[]>`
          SELECT i.id, (SELECT count(*)::int FROM resource_history h
            WHERE h.tenant = ${b.tenant} AND h.type = ${b.type} AND h.id = i.id ${version(b, 'h.version_id')}) AS n
          FROM unnest(${ids}::text[]) AS i(id)`;
        return new Map(rows.map((r) => [r.id, r.n]));
      },
      async removeHistory(b, ids) {
        const [row] = await tx<{ n: number }[]>`
          WITH gone AS (
            DELETE FROM resource_history WHERE tenant = ${b.tenant} AND type = ${b.type} AND id = ANY(${ids}::text[]) ${version(b)}
            RETURNING id, version_id
          ), notified AS (
            DELETE FROM subscription_notifications n USING gone g
            WHERE n.tenant = ${b.tenant} AND n.type = ${b.type} AND n.resource_id = g.id AND n.version_id = g.version_id
          ), events AS (
            DELETE FROM subscription_events e USING gone g
            WHERE e.tenant = ${b.tenant} AND e.type = ${b.type} AND e.resource_id = g.id AND e.version_id = g.version_id
          )
          SELECT count(*)::int AS n FROM gone`;
        return row!.n;
      },
      async removeOldestHistory(b, id, n) {
        const [row] = await tx<{ n: number }[]>`
          WITH oldest AS (
            SELECT version_id FROM resource_history WHERE tenant = ${b.tenant} AND type = ${b.type} AND id = ${id} ${version(b)}
            ORDER BY version_id LIMIT ${n}
          ), gone AS (
            DELETE FROM resource_history WHERE tenant = ${b.tenant} AND type = ${b.type} AND id = ${id}
            AND version_id IN (SELECT version_id FROM oldest) RETURNING version_id
          ), notified AS (
            DELETE FROM subscription_notifications WHERE tenant = ${b.tenant} AND type = ${b.type} AND resource_id = ${id}
            AND version_id IN (SELECT version_id FROM gone)
          ), events AS (
            DELETE FROM subscription_events WHERE tenant = ${b.tenant} AND type = ${b.type} AND resource_id = ${id}
            AND version_id IN (SELECT version_id FROM gone)
          )
          SELECT count(*)::int AS n FROM gone`;
        return row!.n;
      },
      async removeResources(b, rows) {
        const pks = rows.map((r) => r.pk);
        const ids = rows.map((r) => r.id);
        await deleteIndexRows(tx, pks);
        await tx`
          WITH notified AS (
            DELETE FROM subscription_notifications WHERE tenant = ${b.tenant}
            AND ((type = ${b.type} AND resource_id = ANY(${ids}::text[])) OR (${b.type === 'Subscription'} AND subscription_id = ANY(${ids}::text[])))
          ), state AS (
            DELETE FROM subscription_state WHERE ${b.type === 'Subscription'} AND tenant = ${b.tenant} AND id = ANY(${ids}::text[])
          ), events AS (
            DELETE FROM subscription_events WHERE tenant = ${b.tenant}
            AND ((type = ${b.type} AND resource_id = ANY(${ids}::text[])) OR (${b.type === 'Subscription'} AND subscription_id = ANY(${ids}::text[])))
          ), tally AS (
            DELETE FROM subscription_event_tally WHERE ${b.type === 'Subscription'} AND tenant = ${b.tenant} AND subscription_id = ANY(${ids}::text[])
          )
          DELETE FROM resources WHERE pk = ANY(${pks}::bigint[])`;
        // Current rows removed: the tenant's counts may change, so its write mark moves (ResourceRepo.writeMark).
        await markWrite(tx, b.tenant);
      },
    };
  };
  return {
    async batch(b) {
      return transaction(sql, (tx) => expungeBatch(statements(tx), b));
    },
  };
}
