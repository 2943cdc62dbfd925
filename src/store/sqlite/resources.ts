import type { Database } from 'bun:sqlite';
import type {
  HistoryQuery,
  ResourceRepo,
  ResourceVersion,
  SearchQuery,
} from '../types.ts';
import type { Checkpointer } from './checkpointer.ts';
import { createMutex } from './db.ts';
import { buildSearch } from './search-sql.ts';
import { createSqliteSnapshot } from './snapshot.ts';
import { createWriter } from './writer.ts';

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

/** SQLite's default wal_autocheckpoint (pages), which the writer connection keeps outside bulk writes. */
const AUTOCHECKPOINT_PAGES = 1000;
/** Transactions writing at least this many versions leave their checkpoint to the checkpointer thread. */
const BULK_WRITE = 1000;
/** WAL size from which a bulk writer waits for the checkpointer to catch up, so the WAL restarts. */
const WAL_RESTART_BYTES = 256 << 20;

/**
 * After a bulk commit: the checkpointer thread copies the new frames while the writer goes on. Frames
 * are reused only once every frame is copied when a transaction starts, which a writer that never waits
 * would not allow, so past WAL_RESTART_BYTES it waits for the copy of its last transaction.
 */
async function checkpointAfterBulk(writer: Database, checkpointer: Checkpointer): Promise<void> {
  writer.exec(`PRAGMA wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
  const done = checkpointer.request();
  if (checkpointer.walBytes() >= WAL_RESTART_BYTES) await done;
}

/**
 * Resources on SQLite: current versions in `resources`, older ones in `resource_history`.
 * `writer` is the connection used for writes (serialised); `reader` a second connection whose
 * reads never see another request's uncommitted transaction. With a `checkpointer`, a bulk
 * transaction's commit does not checkpoint the WAL in line but asks the checkpointer thread to.
 */
export function createSqliteResources(
  writer: Database, reader: Database, serial = createMutex(), scanner = reader, checkpointer?: Checkpointer,
): ResourceRepo {
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
        let bulk = false;
        try {
          const w = createWriter(writer, tenant);
          const result = await fn(w);
          bulk = !!checkpointer && w.finish() >= BULK_WRITE;
          if (bulk) writer.exec('PRAGMA wal_autocheckpoint = 0');
          writer.exec('COMMIT');
          return result;
        } catch (err) {
          writer.exec('ROLLBACK');
          throw err;
        } finally {
          if (bulk) await checkpointAfterBulk(writer, checkpointer!);
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
