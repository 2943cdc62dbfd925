import type { Database } from 'bun:sqlite';
import type { ExpungeBatch, ExpungeRepo } from '../types.ts';
import { expungeBatch, type ExpungeCandidate, type ExpungeStatements } from '../expunge-batch.ts';
import { INDEX_TABLES } from '../index-tables.ts';
import { MARK_WRITE } from './writer.ts';

type Value = string | number;

const marks = (n: number) => Array(n).fill('?').join(', ');

/** `AND version_id = ?` when the batch names one version. */
function versionFilter(b: ExpungeBatch, column = 'version_id'): { sql: string; values: Value[] } {
  return b.versionId === undefined ? { sql: '', values: [] } : { sql: ` AND ${column} = ?`, values: [b.versionId] };
}

/**
 * Expunge batches on SQLite (statements prepared per call, not cached: their IN lists vary in length). Each call runs inside one write transaction of the writer's queue
 * (src/store/sqlite/index.ts `repo`): it commits whole or not at all. A resource row's words are
 * removed from every place they may be (FTS5 by rowid, the recent rows, the stale list), since a
 * resource row's pk may be given again to a later resource once it is the highest.
 */
export function createSqliteExpunge(db: Database): ExpungeRepo {
  const s: ExpungeStatements = {
    async candidates(b, limit) {
      const ids = b.ids ? ` AND id IN (${marks(b.ids.length)})` : '';
      return db
        .prepare<{ pk: number; id: string; deleted: number }, Value[]>(
          `SELECT pk, id, deleted FROM resources WHERE tenant = ? AND type = ? AND pk > ?${ids} ORDER BY pk LIMIT ?`,
        )
        .all(b.tenant, b.type, b.after, ...(b.ids ?? []), limit)
        .map((r) => ({ pk: r.pk, id: r.id, deleted: r.deleted === 1 }));
    },
    async historyCounts(b, ids) {
      const v = versionFilter(b);
      const rows = db
        .prepare<{ id: string; n: number }, Value[]>(
          `SELECT id, COUNT(*) AS n FROM resource_history WHERE tenant = ? AND type = ? AND id IN (${marks(ids.length)})${v.sql} GROUP BY id`,
        )
        .all(b.tenant, b.type, ...ids, ...v.values);
      return new Map(rows.map((r) => [r.id, r.n]));
    },
    async removeHistory(b, ids) {
      const v = versionFilter(b);
      const vn = versionFilter(b, 'n.version_id');
      // The outbox and the kept topic events of the versions that go (a history row's, not the current version's).
      for (const table of ['subscription_notifications', 'subscription_events']) {
        db.prepare(
          `DELETE FROM ${table} AS n WHERE tenant = ? AND type = ? AND resource_id IN (${marks(ids.length)})${vn.sql}
           AND EXISTS (SELECT 1 FROM resource_history h WHERE h.tenant = n.tenant AND h.type = n.type AND h.id = n.resource_id AND h.version_id = n.version_id)`,
        ).run(b.tenant, b.type, ...ids, ...vn.values);
      }
      return db
        .prepare(`DELETE FROM resource_history WHERE tenant = ? AND type = ? AND id IN (${marks(ids.length)})${v.sql}`)
        .run(b.tenant, b.type, ...ids, ...v.values).changes;
    },
    async removeOldestHistory(b, id, n) {
      const v = versionFilter(b);
      const last = db
        .prepare<{ version_id: number }, Value[]>(
          `SELECT version_id FROM resource_history WHERE tenant = ? AND type = ? AND id = ?${v.sql} ORDER BY version_id LIMIT 1 OFFSET ?`,
        )
        .get(b.tenant, b.type, id, ...v.values, n - 1);
      if (!last) return 0;
      for (const table of ['subscription_notifications', 'subscription_events']) {
        db.prepare(`DELETE FROM ${table} WHERE tenant = ? AND type = ? AND resource_id = ? AND version_id <= ?`).run(b.tenant, b.type, id, last.version_id);
      }
      return db
        .prepare(`DELETE FROM resource_history WHERE tenant = ? AND type = ? AND id = ? AND version_id <= ?${v.sql}`)
        .run(b.tenant, b.type, id, last.version_id, ...v.values).changes;
    },
    async removeResources(b, rows) {
      removeRows(db, b, rows);
    },
  };
  return { batch: (b) => expungeBatch(s, b) };
}

/** Deletes resource rows and every row they own, in one statement per table. */
function removeRows(db: Database, b: ExpungeBatch, rows: ExpungeCandidate[]): void {
  const pks = rows.map((r) => r.pk);
  const ids = rows.map((r) => r.id);
  const inPks = `(${marks(pks.length)})`;
  for (const t of INDEX_TABLES) db.prepare(`DELETE FROM ${t.table} WHERE res IN ${inPks}`).run(...pks);
  db.prepare(`DELETE FROM compartments WHERE res IN ${inPks}`).run(...pks);
  db.prepare(`DELETE FROM search_text WHERE rowid IN ${inPks}`).run(...pks);
  db.prepare(`DELETE FROM search_text_recent WHERE res IN ${inPks}`).run(...pks);
  db.prepare(`DELETE FROM search_text_stale WHERE res IN ${inPks}`).run(...pks);
  const inIds = `(${marks(ids.length)})`;
  db.prepare(`DELETE FROM subscription_notifications WHERE tenant = ? AND type = ? AND resource_id IN ${inIds}`).run(b.tenant, b.type, ...ids);
  db.prepare(`DELETE FROM subscription_events WHERE tenant = ? AND type = ? AND resource_id IN ${inIds}`).run(b.tenant, b.type, ...ids);
  if (b.type === 'Subscription') {
    db.prepare(`DELETE FROM subscription_notifications WHERE tenant = ? AND subscription_id IN ${inIds}`).run(b.tenant, ...ids);
    db.prepare(`DELETE FROM subscription_state WHERE tenant = ? AND id IN ${inIds}`).run(b.tenant, ...ids);
    db.prepare(`DELETE FROM subscription_events WHERE tenant = ? AND subscription_id IN ${inIds}`).run(b.tenant, ...ids);
  }
  db.prepare(`DELETE FROM resources WHERE pk IN ${inPks}`).run(...pks);
  // Current rows removed: the tenant's counts may change, so its write mark moves (ResourceRepo.writeMark).
  db.prepare(MARK_WRITE).run(b.tenant);
}
