import type { Database } from 'bun:sqlite';
import { filtersSql, SqlBuilder, SQLITE, type SqlValue } from '../search-sql.ts';
import { snapshotWindow, type CrowdedSince, type SnapshotWindow } from '../snapshot-window.ts';
import type { SnapshotPage, SnapshotQuery, SnapshotRow } from '../types.ts';

type Param = string | number;

/**
 * Rows of the type one page statement reads at most when it tests a filter on each (no window narrows
 * them): on a filter that matches few, it would otherwise read the whole type at once, and a bun:sqlite
 * statement holds the export worker's thread, its lease heartbeat included, until it ends (56 s for one
 * query of 1,000 codes on 137,000 Observations: past the lease, so another worker took the job too, and
 * a cancel waited for it). The page then ends short, and the next starts after the last row it read.
 */
export const SCAN_ROWS = 10_000;

type PageRow = [pk: number, id: string, versionId: number, lastUpdated: number, deleted: number, content: Uint8Array];
type HistoryRow = { version_id: number; last_updated: number; deleted: number; content: string };

function compartmentCondition(q: SnapshotQuery, joinedOnly: boolean, params: Param[]): string {
  const c = q.compartment!;
  if (c.kind === 'any') return 'EXISTS (SELECT 1 FROM compartments c WHERE c.res = r.pk)';
  params.push(c.jobId);
  return (
    'EXISTS (SELECT 1 FROM compartments c JOIN export_patients p ON p.job_id = ? AND p.patient = c.patient ' +
    `WHERE c.res = r.pk${joinedOnly || c.joinedOnly ? ' AND p.joined = 1' : ''})`
  );
}

/**
 * The page statement: rows of the type in pk order. A current, live version updated at or before `at`
 * must pass every condition here; rows updated after `at` (and, with `since`, deletions) come back for
 * the caller to resolve and check. `window`: the only resources the page can hold (snapshotWindow), as
 * a JSON array, read by their pk (tenant and type unindexed, or SQLite walks the type's index to them);
 * an exact window's resources pass the filters already.
 */
export function snapshotSql(tenant: string, q: SnapshotQuery, window?: SnapshotWindow, reach?: number): { sql: string; params: Param[] } {
  const params: Param[] = [tenant, q.type, q.after ?? 0];
  const where = window ? ['+r.tenant = ?', '+r.type = ?', 'r.pk > ?', 'r.pk IN (SELECT value FROM json_each(?))'] : ['r.tenant = ?', 'r.type = ?', 'r.pk > ?'];
  if (window) params.push(JSON.stringify(window.pks));
  if (reach !== undefined) {
    where.push('r.pk <= ?');
    params.push(reach);
  }
  if (q.ids) {
    where.push(`r.id IN (${q.ids.map(() => '?').join(', ')})`);
    params.push(...q.ids);
  }
  const live = ['r.deleted = 0', 'r.last_updated <= ?'];
  params.push(q.at);
  if (q.since !== undefined) {
    if (q.joinedSince && q.compartment?.kind === 'job') {
      params.push(q.since);
      const joined = compartmentCondition(q, true, params);
      live.push(`(r.last_updated > ? OR ${joined})`);
    } else {
      live.push('r.last_updated > ?');
      params.push(q.since);
    }
  }
  if (q.compartment) live.push(compartmentCondition(q, false, params));
  if (q.filters?.length && !window?.exact) {
    // Numbered placeholders continuing the plain ones (a plain `?` takes the largest number so far + 1),
    // `EXISTS` probes per row, so a page costs what its rows cost, never the whole type.
    const b = new SqlBuilder(SQLITE, tenant, 'exists', params.length);
    live.push(filtersSql(b, q.type, q.filters));
    params.push(...b.values);
  }
  const alternatives = [`(${live.join(' AND ')})`, 'r.last_updated > ?'];
  params.push(q.at);
  if (q.since !== undefined) {
    alternatives.push('(r.deleted = 1 AND r.last_updated > ?)');
    params.push(q.since);
  }
  where.push(`(${alternatives.join(' OR ')})`);
  params.push(q.limit);
  return {
    // Content as a BLOB: the stored UTF-8 bytes go out as they are, never decoded to a string.
    sql: `SELECT r.pk, r.id, r.version_id, r.last_updated, r.deleted, CAST(r.content AS BLOB) FROM resources r WHERE ${where.join(' AND ')} ORDER BY r.pk LIMIT ?`,
    params,
  };
}

const NEWLINE = 10;

/** The stored texts of `rows`, each followed by a newline, in one buffer. */
function ndjson(rows: PageRow[]): Uint8Array {
  let size = 0;
  for (const r of rows) size += r[5].byteLength + 1;
  const out = new Uint8Array(size);
  let at = 0;
  for (const r of rows) {
    out.set(r[5], at);
    at += r[5].byteLength;
    out[at++] = NEWLINE;
  }
  return out;
}

/**
 * Resource snapshots on SQLite (see ResourceRepo.snapshot), read through `db`: bulk exports open a
 * connection of their own without memory-mapping, so a scan of any size keeps the process's memory flat.
 */
export function createSqliteSnapshot(db: Database) {
  db.exec('PRAGMA mmap_size = 0');
  db.exec('PRAGMA cache_size = -8192');
  const asOf = db.query<HistoryRow, [string, string, string, number]>(
    'SELECT version_id, last_updated, deleted, content FROM resource_history WHERE tenant = ? AND type = ? AND id = ? ' +
      'AND last_updated <= ? ORDER BY version_id DESC LIMIT 1',
  );
  const stored = db.query<{ one: number }, [string, string, string, number]>(
    'SELECT 1 AS one FROM resource_history WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?',
  );
  const liveBefore = db.query<HistoryRow, [string, string, string, number]>(
    'SELECT version_id, last_updated, deleted, content FROM resource_history WHERE tenant = ? AND type = ? AND id = ? ' +
      'AND version_id < ? AND deleted = 0 ORDER BY version_id DESC LIMIT 1',
  );
  // The key of the SCAN_ROWS-th row of the type after a page's start, from the (tenant, type) index.
  const reachOf = db.query<{ pk: number }, [string, string, number, number]>(
    'SELECT pk FROM resources WHERE tenant = ? AND type = ? AND pk > ? ORDER BY pk LIMIT 1 OFFSET ?',
  );
  const statements = new Map<string, ReturnType<Database['query']>>();
  const statement = (sql: string) => {
    let stmt = statements.get(sql);
    if (!stmt) {
      if (statements.size > 64) statements.clear();
      stmt = db.query(sql);
      statements.set(sql, stmt);
    }
    return stmt;
  };
  const rows = (sql: string, values: SqlValue[]) => statement(sql).all(...values) as Record<string, unknown>[];

  /** The version as of `at` of a row that changed after it (or a deletion), or null when nothing is to be reported. */
  function resolve(tenant: string, q: SnapshotQuery, r: PageRow): SnapshotRow | null {
    const [, id, versionId, lastUpdated, deleted] = r;
    const v = lastUpdated > q.at ? asOf.get(tenant, q.type, id, q.at) : { version_id: versionId, last_updated: lastUpdated, deleted, content: '' };
    if (!v) return null;
    // The version after it expunged: the one current at `at` may be gone (SnapshotRow.expunged).
    if (v.deleted === 0 && lastUpdated > q.at && v.version_id + 1 !== versionId && !stored.get(tenant, q.type, id, v.version_id + 1)) {
      return { id, versionId: v.version_id, lastUpdated: v.last_updated, deleted: false, content: v.content, expunged: true };
    }
    if (v.deleted === 0) return { id, versionId: v.version_id, lastUpdated: v.last_updated, deleted: false, content: v.content };
    if (q.since === undefined || v.last_updated <= q.since) return null;
    const before = liveBefore.get(tenant, q.type, id, v.version_id);
    if (!before) return null;
    return { id, versionId: v.version_id, lastUpdated: v.last_updated, deleted: true, content: before.content };
  }

  const crowded: CrowdedSince = new Set();
  return async function snapshot(tenant: string, q: SnapshotQuery): Promise<SnapshotPage> {
    const window = await snapshotWindow(SQLITE, tenant, q, rows, crowded);
    if (window?.pks.length === 0) return { lines: new Uint8Array(0), count: 0, recheck: [], next: null };
    const filtered = !window && q.filters !== undefined && q.filters.length > 0 && q.ids === undefined;
    const reach = filtered ? reachOf.get(tenant, q.type, q.after ?? 0, SCAN_ROWS - 1)?.pk : undefined;
    const { sql, params } = snapshotSql(tenant, q, window, reach);
    const raw = statement(sql).values(...params) as unknown as PageRow[];
    const judged: PageRow[] = [];
    const recheck: SnapshotRow[] = [];
    for (const r of raw) {
      if (r[4] === 0 && r[3] <= q.at) judged.push(r);
      else {
        const v = resolve(tenant, q, r);
        if (v) recheck.push(v);
      }
    }
    const last = raw[raw.length - 1];
    // A window's resources may all fail the conditions: the next page starts after the window, wherever its rows ended.
    if (window) return { lines: ndjson(judged), count: judged.length, recheck, next: window.full ? window.pks[window.pks.length - 1]! : null };
    // A full page goes on after its last row; one the reach ended, after the reach; else the type is done.
    return { lines: ndjson(judged), count: judged.length, recheck, next: raw.length === q.limit && last ? last[0] : (reach ?? null) };
  };
}
