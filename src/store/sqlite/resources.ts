import type { Database } from 'bun:sqlite';
import type {
  CurrentVersion,
  HistoryQuery,
  ResourceRepo,
  ResourceVersion,
  ResourceWriter,
  SearchQuery,
  VersionToWrite,
} from '../types.ts';
import { StoreConflictError } from '../types.ts';
import { createMutex } from './db.ts';
import { buildSearch } from './search-sql.ts';
import { createSqliteSnapshot } from './snapshot.ts';

interface Row {
  type: string;
  id: string;
  version_id: number;
  last_updated: number;
  deleted: number;
  content: string;
}

const COLS = 'type, id, version_id, last_updated, deleted, content';

export function toVersion(r: Row): ResourceVersion {
  return { type: r.type, id: r.id, versionId: r.version_id, lastUpdated: r.last_updated, deleted: r.deleted === 1, content: r.content };
}

/**
 * Resources on SQLite: current versions in `resources`, older ones in `resource_history`.
 * `writer` is the connection used for writes (serialised); `reader` a second connection whose
 * reads never see another request's uncommitted transaction.
 */
export function createSqliteResources(writer: Database, reader: Database, serial = createMutex(), scanner = reader): ResourceRepo {
  let snapshot: ReturnType<typeof createSqliteSnapshot> | undefined;
  const q = {
    read: reader.query<Row, [string, string, string]>(`SELECT ${COLS} FROM resources WHERE tenant = ? AND type = ? AND id = ?`),
    vreadCurrent: reader.query<Row, [string, string, string, number]>(
      `SELECT ${COLS} FROM resources WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?`,
    ),
    vreadHistory: reader.query<Row, [string, string, string, number]>(
      `SELECT ${COLS} FROM resource_history WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?`,
    ),
  };

  return {
    async read(tenant, type, id) {
      const row = q.read.get(tenant, type, id);
      return row ? toVersion(row) : null;
    },
    async vread(tenant, type, id, versionId) {
      const row = q.vreadCurrent.get(tenant, type, id, versionId) ?? q.vreadHistory.get(tenant, type, id, versionId);
      return row ? toVersion(row) : null;
    },
    async search(tenant, query) {
      const { sql, params } = buildSearch(tenant, query, false);
      return reader.query<Row, (string | number)[]>(sql).all(...params).map(toVersion);
    },
    async count(tenant, query) {
      const { sql, params } = buildSearch(tenant, query, true);
      return reader.query<{ n: number }, (string | number)[]>(sql).get(...params)!.n;
    },
    async history(tenant, query) {
      return historyRows(reader, tenant, query).map(toVersion);
    },
    write(tenant, fn) {
      return serial(async () => {
        writer.exec('BEGIN IMMEDIATE');
        try {
          const w = createWriter(writer, tenant);
          const result = await fn(w);
          w.finish();
          writer.exec('COMMIT');
          return result;
        } catch (err) {
          writer.exec('ROLLBACK');
          throw err;
        }
      });
    },
    async changeToken(tenant, types) {
      const marks = types.map(() => '?').join(', ');
      const row = reader
        .query<{ s: number | null; n: number }, string[]>(
          `SELECT MAX(seq) AS s, COUNT(*) AS n FROM resources WHERE tenant = ? AND type IN (${marks})`,
        )
        .get(tenant, ...types)!;
      return `${row.s ?? 0}:${row.n}`;
    },
    snapshot(tenant, query) {
      return (snapshot ??= createSqliteSnapshot(scanner))(tenant, query);
    },
  };
}

function historyRows(db: Database, tenant: string, query: HistoryQuery): Row[] {
  const where = ['tenant = ?'];
  const params: (string | number)[] = [tenant];
  if (query.type) (where.push('type = ?'), params.push(query.type));
  if (query.id) (where.push('id = ?'), params.push(query.id));
  if (query.since !== undefined) (where.push('last_updated >= ?'), params.push(query.since));
  if (query.at !== undefined) (where.push('last_updated <= ?'), params.push(query.at));
  if (query.before) {
    const b = query.before;
    where.push('(last_updated, type, id, version_id) < (?, ?, ?, ?)');
    params.push(b.lastUpdated, b.type, b.id, b.versionId);
  }
  const cond = where.join(' AND ');
  const sql =
    `SELECT ${COLS} FROM (SELECT ${COLS} FROM resources WHERE ${cond} UNION ALL SELECT ${COLS} FROM resource_history WHERE ${cond}) ` +
    'ORDER BY last_updated DESC, type DESC, id DESC, version_id DESC LIMIT ?';
  return db.query<Row, (string | number)[]>(sql).all(...params, ...params, query.count);
}

type CurrentRow = { pk: number; version_id: number; last_updated: number; deleted: number };

/**
 * A transaction's writer. The transaction holds SQLite's write lock, so rows change only through this
 * writer: current rows it has looked up or written are remembered, and `seq` values are counted here
 * and stored once, by finish() before COMMIT.
 */
function createWriter(db: Database, tenant: string): ResourceWriter & { finish(): void } {
  const q = {
    current: db.query<CurrentRow, [string, string, string]>(
      'SELECT pk, version_id, last_updated, deleted FROM resources WHERE tenant = ? AND type = ? AND id = ?',
    ),
    readSeq: db.query<{ value: number }, []>("SELECT value FROM counters WHERE name = 'resource_seq'"),
    storeSeq: db.query("UPDATE counters SET value = ? WHERE name = 'resource_seq'"),
    toHistory: db.query(
      'INSERT INTO resource_history (tenant, type, id, version_id, last_updated, deleted, seq, content) ' +
        'SELECT tenant, type, id, version_id, last_updated, deleted, seq, content FROM resources WHERE pk = ?',
    ),
    update: db.query(
      'UPDATE resources SET version_id = ?, last_updated = ?, deleted = ?, seq = ?, content = ? WHERE pk = ?',
    ),
    insert: db.query<{ pk: number }, (string | number)[]>(
      'INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING pk',
    ),
    clearIndex: db.query('DELETE FROM search_index WHERE res = ?'),
    clearCompartments: db.query('DELETE FROM compartments WHERE res = ?'),
    addIndex: db.query('INSERT INTO search_index (res, tenant, type, param, system, value) VALUES (?, ?, ?, ?, ?, ?)'),
    addCompartment: db.query('INSERT INTO compartments (res, tenant, patient, type) VALUES (?, ?, ?, ?)'),
  };
  const known = new Map<string, CurrentRow | null>();
  function lookup(type: string, id: string): CurrentRow | null {
    const key = `${type}/${id}`;
    let row = known.get(key);
    if (row === undefined) known.set(key, (row = q.current.get(tenant, type, id)));
    return row;
  }
  let seq: number | undefined;
  return {
    async current(type, id): Promise<CurrentVersion | null> {
      const row = lookup(type, id);
      return row ? { versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted === 1 } : null;
    },
    async exists(type, id) {
      const row = lookup(type, id);
      return !!row && row.deleted === 0;
    },
    finish() {
      if (seq !== undefined) q.storeSeq.run(seq);
    },
    async put(v: VersionToWrite) {
      const existing = lookup(v.type, v.id);
      if (existing && v.versionId <= existing.version_id) {
        // Equal or older version numbers would corrupt history (its key is type/id/version).
        throw new StoreConflictError(`${v.type}/${v.id}: version ${v.versionId} is not newer than stored version ${existing.version_id}`);
      }
      seq = (seq ?? q.readSeq.get()!.value) + 1;
      let pk: number;
      if (existing) {
        pk = existing.pk;
        q.toHistory.run(pk);
        q.update.run(v.versionId, v.lastUpdated, v.deleted ? 1 : 0, seq, v.content, pk);
        q.clearIndex.run(pk);
        q.clearCompartments.run(pk);
      } else {
        pk = q.insert.get(tenant, v.type, v.id, v.versionId, v.lastUpdated, v.deleted ? 1 : 0, seq, v.content)!.pk;
      }
      known.set(`${v.type}/${v.id}`, { pk, version_id: v.versionId, last_updated: v.lastUpdated, deleted: v.deleted ? 1 : 0 });
      if (v.deleted) return;
      for (const e of v.index) q.addIndex.run(pk, tenant, v.type, e.param, e.system, e.value);
      for (const p of v.compartments) q.addCompartment.run(pk, tenant, p, v.type);
    },
  };
}
