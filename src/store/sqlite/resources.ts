import { AsyncLocalStorage } from 'node:async_hooks';
import type { Database } from 'bun:sqlite';
import { MEASURED_TEXT_BYTES, META_PARAMS, storableVersion } from '../types.ts';
import { utf8LengthOfContent } from './text-length.ts';
import type {
  HistoryQuery,
  CodingPair,
  CodingPairsQuery,
  IndexedRow,
  MetaValue,
  ResourceRepo,
  ResourceWriter,
  ResourceVersion,
  SearchQuery,
  WriteMethod,
} from '../types.ts';
import type { Checkpointer } from './checkpointer.ts';
import { autocheckpointPages, beginImmediate, createMutex, indexState, writeTransaction } from './db.ts';
import { countSql, countsOnIndex, driverCandidates, lastResort, matchingSql, onlyContainedKeys, planContext, plannedSearch, planSearch, SQLITE, selectsNothing, SqlBuilder, withoutAbsentKeys, type Dialect, type SqlValue } from '../search-sql.ts';
import { createTypeSizes } from '../type-sizes.ts';
import { createSqliteCompartments } from './compartments.ts';
import { createSqliteKeys, type SqliteKeys } from './search-keys.ts';
import { createSqliteSnapshot } from './snapshot.ts';
import { createTextMover, mergeText, type TextMover, type TextMoverOptions } from './text.ts';
import { createWriter } from './writer.ts';
import { createPacer, UNPACED, WRITE_SLICE_MS } from './pacer.ts';
import { outgrown } from '../stale.ts';

/** A resource row as the statements select it. */
export interface Row {
  type: string;
  id: string;
  version_id: number;
  last_updated: number;
  deleted: number;
  content: string;
}

const COLS = 'type, id, version_id, last_updated, deleted, content';
/** COLS with the content's top-level `data` left out (ResourceRepo.readWithoutData). */
const WITHOUT_DATA = "type, id, version_id, last_updated, deleted, CASE WHEN deleted = 1 THEN content ELSE json_remove(content, '$.data') END AS content";

/** Each version once (the current row's version may also be a history row), in the order first met. */
function onceEach(versions: ResourceVersion[]): ResourceVersion[] {
  const seen = new Set<string>();
  return versions.filter((v) => {
    const key = `${v.id}\u0000${v.versionId}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** A current row as ResourceRepo.measured reads it: its text only when short (or of a length not known). */
type MeasuredRow = { version_id: number; last_updated: number; deleted: number; bytes: number | null; content: string | null };

export function toVersion(r: Row): ResourceVersion {
  return { type: r.type, id: r.id, versionId: r.version_id, lastUpdated: r.last_updated, deleted: r.deleted === 1, content: r.content };
}

/** A history row: its method where it was recorded (NULL before migration 27). */
type HistoryRow = Row & { method: WriteMethod | null; revived: number | null };

function toHistoryVersion(r: HistoryRow): ResourceVersion {
  const v = toVersion(r);
  if (r.method !== null) v.method = r.method;
  if (!v.deleted) v.created = v.versionId === 1 || r.revived === 1;
  return v;
}

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
  writer.exec(`PRAGMA wal_autocheckpoint = ${autocheckpointPages(writer)}`);
  const done = checkpointer.request();
  if (checkpointer.walBytes() >= WAL_RESTART_BYTES) await done;
}

/** A resource transaction waiting for its group commit. */
interface PendingWrite {
  tenant: string;
  fn: (w: ResourceWriter) => Promise<unknown>;
  resolve(result: unknown): void;
  reject(err: unknown): void;
}

/** Most resource transactions committed together. */
const GROUP_LIMIT = 128;

/**
 * Group commit: the resource transactions that queued while the writer connection was busy run one
 * after another in one SQLite transaction, each inside a savepoint of its own, and are acknowledged
 * when the single COMMIT has succeeded. A transaction that fails is rolled back to its savepoint alone;
 * the others still commit. One commit writes each page the group dirtied to the WAL once, instead of
 * once per transaction (the index pages that every create touches, the seq counter's page). Search keys
 * the group reads or creates are cached once the COMMIT has succeeded, those of a savepoint rolled back
 * never. With a `sliceMs` budget the group's writes let the event loop turn between slices of that length
 * (pacer.ts): reads, on the reader connection, go on meanwhile; other writes wait in the writer's queue, so
 * nothing else runs in the transaction, and it still commits or rolls back whole.
 */
async function commitGroup(
  writer: Database, keys: SqliteKeys, group: PendingWrite[], checkpointer: Checkpointer | undefined, text: TextMover, search: ResourceRepo['search'],
  sliceMs: number,
): Promise<void> {
  // A promise settles once, so rejecting a whole group also leaves its already failed writes as they are.
  const fail = (writes: PendingWrite[], err: unknown) => writes.forEach((w) => w.reject(err));
  let written: { write: PendingWrite; result: unknown }[] = [];
  let versions = 0;
  let textWaiting = 0;
  let bulk = false;
  let txKeys = keys.transaction();
  const pacer = Number.isFinite(sliceMs) ? createPacer(sliceMs) : UNPACED;
  try {
    for (const write of group) {
      const turn = pacer.pace();
      if (turn) await turn;
      // The group's transaction, or a new one after an error ended it (see below). Another process's
      // write lock is waited for without blocking the thread, so reads go on meanwhile.
      if (!writer.inTransaction) await beginImmediate(writer);
      writer.exec('SAVEPOINT write');
      const spKeys = txKeys.savepoint();
      try {
        const w = createWriter(writer, write.tenant, spKeys.keyOf(write.tenant), (query) => search(write.tenant, query), pacer);
        // Once the function settles its writer is closed: a write it left running (Promise.all, another rejected) writes nothing more.
        const result = await write.fn(w).finally(() => w.close());
        versions += w.finish();
        writer.exec('RELEASE write');
        textWaiting += w.textWaiting();
        spKeys.release();
        written.push({ write, result });
      } catch (err) {
        write.reject(err);
        if (writer.inTransaction) {
          writer.exec('ROLLBACK TO write');
          writer.exec('RELEASE write');
        } else {
          // Some errors (a full disk, say) roll back the transaction, and with it the group's earlier writes.
          fail(written.splice(0).map((x) => x.write), err);
          versions = 0;
          textWaiting = 0;
          txKeys = keys.transaction();
        }
      }
    }
    bulk = !!checkpointer && versions >= BULK_WRITE;
    if (bulk) writer.exec('PRAGMA wal_autocheckpoint = 0');
    if (writer.inTransaction) writer.exec('COMMIT');
    txKeys.commit();
    text.noted(textWaiting);
  } catch (err) {
    // BEGIN, a savepoint or COMMIT failed: nothing of the group is stored.
    try {
      if (writer.inTransaction) writer.exec('ROLLBACK');
    } catch {
      // Rolled back already (the error ended the transaction).
    }
    fail(group, err);
    written = [];
  } finally {
    // The checkpoint only keeps the WAL small: its failure (a closed connection) leaves the commit as it is.
    if (bulk) await checkpointAfterBulk(writer, checkpointer!).catch(() => undefined);
  }
  for (const { write, result } of written) write.resolve(result);
}

/**
 * Resources on SQLite: current versions in `resources`, older ones in `resource_history`.
 * `writer` is the connection used for writes (serialised); `reader` a second connection whose
 * reads never see another request's uncommitted transaction. With a `checkpointer`, a bulk
 * transaction's commit does not checkpoint the WAL in line but asks the checkpointer thread to.
 * `writeSliceMs` is the pacer's budget (pacer.ts); writes are not paced where `reader` is `writer` (in
 * memory), whose reads would see the open transaction.
 */

/**
 * codingPairs' and codeTexts' statement parameters: ?1 tenant, ?2 type, ?3-?5 the reference (param,
 * target type, id), ?6 the parameter read, ?7 the cap, ?8-?9 `also` (param, or '' for none; its values
 * in lower case, as JSON).
 */
type ViaParameters = [string, string, string, string, string, string, number, string, string];

function viaParameters(tenant: string, query: CodingPairsQuery, param: string, cap: number): ViaParameters {
  const { type, via } = query;
  const also = query.also ?? { param: '', values: [] };
  return [tenant, type, via.param, via.target, via.id, param, cap, also.param, JSON.stringify(also.values.map((v) => v.toLowerCase()))];
}

/** The rows `s` of the reference (key `sk`), and with `also` only those of resources holding one of its values. */
const VIA_ROWS = "sk.tenant = ?1 AND sk.type = ?2 AND sk.param = ?3 AND sk.system = ?4 AND sk.code = '' AND s.k = sk.k AND s.value = ?5 " +
  "AND (?8 = '' OR EXISTS (SELECT 1 FROM search_index x WHERE x.res = s.res AND x.k IN (SELECT k FROM search_keys WHERE tenant = ?1 AND type = ?2 AND param = ?8 AND code = '') " +
  'AND lower(x.value) IN (SELECT value FROM json_each(?9))))';

/** The keys of the parameter read (?6). */
const PARAM_KEYS = "SELECT k FROM search_keys WHERE tenant = ?1 AND type = ?2 AND param = ?6 AND code = ''";

/**
 * The reference's rows `s` (by the (k, value) index) and, with `matching` (CodingPairsQuery), the
 * resource row `r` of each, kept when its probes (matchingSql, placeholders from ?10) hold; CROSS JOIN
 * keeps that order, so the conditions test each of the subject's resources before its rows are read.
 */
function viaFrom(matching: string | undefined): { from: string; where: string } {
  return matching === undefined
    ? { from: 'search_keys sk CROSS JOIN search_index s', where: VIA_ROWS }
    : { from: 'search_keys sk CROSS JOIN search_index s CROSS JOIN resources r', where: `${VIA_ROWS} AND r.pk = s.res AND ${matching}` };
}

/**
 * codingPairs: then each resource's rows of the parameter (by its (res, k, value) key), twice for the
 * pairs. Parameters: ViaParameters, then matchingSql's.
 */
function codingPairsSql(matching?: string): string {
  const { from, where } = viaFrom(matching);
  return 'SELECT DISTINCT k1.system AS system1, c1.value AS value1, k2.system AS system2, c2.value AS value2 ' +
    `FROM ${from} CROSS JOIN search_index c1 CROSS JOIN search_keys k1 CROSS JOIN search_index c2 CROSS JOIN search_keys k2 ` +
    `WHERE ${where} AND c1.res = s.res AND c1.k IN (${PARAM_KEYS}) AND k1.k = c1.k AND c2.res = s.res AND c2.k IN (${PARAM_KEYS}) AND k2.k = c2.k LIMIT ?7`;
}

/** codeTexts: then each resource's string rows of the parameter's `:text`. */
function codeTextsSql(matching?: string): string {
  const { from, where } = viaFrom(matching);
  return `SELECT DISTINCT t.exact FROM ${from} CROSS JOIN search_string t WHERE ${where} AND t.res = s.res AND t.k IN (${PARAM_KEYS}) LIMIT ?7`;
}

/** A codingPairs or codeTexts statement for `query`, and the values of its `matching` probes (after ViaParameters). */
function viaStatement(dialect: Dialect, tenant: string, query: CodingPairsQuery, statement: (matching?: string) => string): { text: string; values: SqlValue[] } {
  if (query.matching === undefined) return { text: statement(), values: [] };
  const b = new SqlBuilder(dialect, tenant, 'exists', 9);
  const text = statement(matchingSql(b, query.type, query.matching));
  return { text, values: b.values };
}

export function createSqliteResources(
  writer: Database, reader: Database, serial = createMutex(), scanner = reader, checkpointer?: Checkpointer, textOptions?: TextMoverOptions,
  writeSliceMs = WRITE_SLICE_MS,
): ResourceRepo {
  const sliceMs = reader === writer ? Infinity : writeSliceMs;
  let snapshot: ReturnType<typeof createSqliteSnapshot> | undefined;
  // Words that small transactions leave outside FTS5 are moved in batches (text.ts), paced as writes are.
  const text = createTextMover(writer, serial, textOptions, sliceMs);
  const keys = createSqliteKeys(writer);
  // Searches compare index rows with the keys the writers have committed, found without a subquery.
  const dialect: Dialect = { ...SQLITE, knownKey: keys.known(reader) };
  // The sizes of the types, for wide drivers (planSearch): counted on the (tenant, type) index, 16 ms
  // for 686,776 Observations, at most once per TYPE_SIZE_MAX_AGE_MS.
  const sizeOf = reader.query<{ n: number }, [string, string]>('SELECT COUNT(*) AS n FROM resources WHERE tenant = ? AND type = ?');
  const sizes = createTypeSizes((tenant, type) => sizeOf.get(tenant, type)!.n);
  /** Whether a key of a reference or token row exists (withoutAbsentKeys). */
  const keyExists = (tenant: string) => (type: string, param: string, system: string) => dialect.knownKey!({ tenant, type, param, system, code: '' }) !== undefined;
  /**
   * A search in a write's open transaction (ResourceWriter.search): on the writer connection, with the keys it
   * sees, so that it finds what the transaction (and the group before it) wrote, as PostgreSQL's does.
   */
  const inWrite: Dialect = { ...SQLITE, knownKey: keys.inTransaction(writer) };
  const searchInWrite = async (tenant: string, query: SearchQuery): Promise<ResourceVersion[]> => {
    query = await withoutAbsentKeys(query, (type, param, system) => inWrite.knownKey!({ tenant, type, param, system, code: '' }) !== undefined);
    if (selectsNothing(query)) return [];
    const rows = await plannedSearch<Row>(inWrite, tenant, query, {
      count: (sql, values) => writer.query<{ n: number }, SqlValue[]>(sql).get(...values)!.n,
      rows: (sql, values) => writer.query<Row, SqlValue[]>(sql).all(...values),
    }, (type) => sizes.get(tenant, type));
    return rows.map(toVersion);
  };
  /** A planner's count (planSearch, plannedSearch) on the reader. */
  const countRows = (sql: string, values: SqlValue[]) => reader.query<{ n: number }, SqlValue[]>(sql).get(...values)!.n;
  /** A count's plan (SearchPlan), from the candidates' bounded counts; `:missing=true` where none drives. */
  const plan = async (tenant: string, query: SearchQuery) => {
    const context = planContext(dialect, tenant, query, true, () => sizes.get(tenant, query.type));
    return lastResort(await planSearch(driverCandidates(dialect, tenant, query), countRows, context), query, context);
  };
  const q = {
    read: reader.query<Row, [string, string, string]>(`SELECT ${COLS} FROM resources WHERE tenant = ? AND type = ? AND id = ?`),
    // The text's length in UTF-8 from the record's header (text-length.ts), and the text only when under MEASURED_TEXT_BYTES.
    measured: reader.query<MeasuredRow, [string, string, string]>(
      `SELECT version_id, last_updated, deleted, bytes, CASE WHEN bytes IS NULL OR bytes < ${MEASURED_TEXT_BYTES} THEN content END AS content ` +
        `FROM (SELECT version_id, last_updated, deleted, ${utf8LengthOfContent(reader)} AS bytes, content FROM resources WHERE tenant = ? AND type = ? AND id = ?)`,
    ),
    vreadCurrent: reader.query<Row, [string, string, string, number]>(
      `SELECT ${COLS} FROM resources WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?`,
    ),
    vreadHistory: reader.query<Row, [string, string, string, number]>(
      `SELECT ${COLS} FROM resource_history WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?`,
    ),
    // SQLite's JSON parse holds the text twice while it runs (measured: 3 copies of a 67 Mi character content at the
    // peak against 4 reading it whole, and none left as garbage for the JavaScript heap).
    readWithoutData: reader.query<Row, [string, string, string]>(
      `SELECT ${WITHOUT_DATA} FROM resources WHERE tenant = ? AND type = ? AND id = ?`,
    ),
    vreadWithoutDataCurrent: reader.query<Row, [string, string, string, number]>(
      `SELECT ${WITHOUT_DATA} FROM resources WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?`,
    ),
    readHead: reader.query<Row, [number, string, string, string]>(
      `SELECT type, id, version_id, last_updated, deleted, substr(content, 1, ?) AS content FROM resources WHERE tenant = ? AND type = ? AND id = ?`,
    ),
    vreadHeadCurrent: reader.query<Row, [number, string, string, string, number]>(
      `SELECT type, id, version_id, last_updated, deleted, substr(content, 1, ?) AS content FROM resources WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?`,
    ),
    vreadHeadHistory: reader.query<Row, [number, string, string, string, number]>(
      `SELECT type, id, version_id, last_updated, deleted, substr(content, 1, ?) AS content FROM resource_history WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?`,
    ),
    vreadWithoutDataHistory: reader.query<Row, [string, string, string, number]>(
      `SELECT ${WITHOUT_DATA} FROM resource_history WHERE tenant = ? AND type = ? AND id = ? AND version_id = ?`,
    ),
    // Each [id, version] of the JSON array: a probe of each table's (tenant, type, id, version) key. CROSS JOIN keeps the
    // array the outer loop (SQLite's planner, estimating json_each large, scanned every row of the type and probed the
    // array for each: 500 versions among 200,000 Observations took 40 s, against 6 ms for 500 vreads).
    vreadMany: reader.query<Row, [string, string, string]>(
      `WITH k(id, v) AS (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?3)) ` +
        `SELECT ${COLS.split(', ').map((c) => `r.${c}`).join(', ')} FROM k CROSS JOIN resources r ON r.tenant = ?1 AND r.type = ?2 AND r.id = k.id AND r.version_id = k.v ` +
        `UNION ALL SELECT ${COLS.split(', ').map((c) => `h.${c}`).join(', ')} FROM k CROSS JOIN resource_history h ON h.tenant = ?1 AND h.type = ?2 AND h.id = k.id AND h.version_id = k.v`,
    ),
    present: reader.query<{ id: string }, [string, string, string]>(
      'SELECT id FROM resources WHERE tenant = ? AND type = ? AND id IN (SELECT value FROM json_each(?))',
    ),
    // The next type after each, from the (tenant, type, id) index: a probe per type.
    types: reader.query<{ type: string }, [string, string]>(
      'WITH RECURSIVE t(type) AS (SELECT MIN(type) FROM resources WHERE tenant = ?1 UNION ALL ' +
        'SELECT (SELECT MIN(r.type) FROM resources r WHERE r.tenant = ?2 AND r.type > t.type) FROM t WHERE t.type IS NOT NULL) ' +
        'SELECT type FROM t WHERE type IS NOT NULL',
    ),
    referrers: reader.query<{ type: string; param: string; target: string }, [string, string]>(
      'SELECT DISTINCT type, param, system AS target FROM search_keys WHERE tenant = ? AND system IN (SELECT value FROM json_each(?))',
    ),
    metaKeys: reader.query<{ k: number; param: string; system: string }, [string, string, string]>(
      "SELECT k, param, system FROM search_keys WHERE tenant = ? AND type IN (SELECT value FROM json_each(?)) AND param IN (SELECT value FROM json_each(?)) AND code = ''",
    ),
    // The next value after `value` under key `k`, by the (k, value) index: one probe.
    firstValue: reader.query<{ value: string }, [number]>('SELECT value FROM search_index WHERE k = ? ORDER BY value LIMIT 1'),
    nextValue: reader.query<{ value: string }, [number, string]>('SELECT value FROM search_index WHERE k = ? AND value > ? ORDER BY value LIMIT 1'),
    containedKeys: reader.query<{ type: string; param: string }, [string, string]>(
      "SELECT DISTINCT type, param FROM search_keys WHERE tenant = ? AND system = '' AND param LIKE ?",
    ),
  };

  const pending: PendingWrite[] = [];
  let scheduled = false;
  /**
   * Queues a group commit behind the writer connection's other work. It starts one event-loop turn
   * later, so that the writes of the requests that arrived with this one join it: a group runs
   * synchronously to its COMMIT, and without the wait no other request could ever queue behind it.
   */
  function schedule(): void {
    scheduled = true;
    void serial(async () => {
      await new Promise((r) => setImmediate(r));
      scheduled = false;
      const group = pending.splice(0, GROUP_LIMIT);
      if (pending.length) schedule();
      try {
        await commitGroup(writer, keys, group, checkpointer, text, searchInWrite, sliceMs);
      } catch (err) {
        // commitGroup settles every write itself; should it throw, none is left waiting (a promise settles once).
        for (const w of group) w.reject(err);
      }
    });
  }

  return {
    ...createSqliteCompartments(reader),
    async read(tenant, type, id) {
      const row = q.read.get(tenant, type, id);
      return row ? toVersion(row) : null;
    },
    async measured(tenant, type, id) {
      const row = q.measured.get(tenant, type, id);
      if (!row) return null;
      const head = { versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted === 1 };
      return row.content === null ? { ...head, bytes: row.bytes! } : { ...head, content: row.content };
    },
    async vread(tenant, type, id, versionId) {
      const row = q.vreadCurrent.get(tenant, type, id, versionId) ?? q.vreadHistory.get(tenant, type, id, versionId);
      return row ? toVersion(row) : null;
    },
    async readWithoutData(tenant, type, id, versionId) {
      const row = versionId === undefined
        ? q.readWithoutData.get(tenant, type, id)
        : (q.vreadWithoutDataCurrent.get(tenant, type, id, versionId) ?? q.vreadWithoutDataHistory.get(tenant, type, id, versionId));
      return row ? toVersion(row) : null;
    },
    async readHead(tenant, type, id, chars, versionId) {
      const row = versionId === undefined
        ? q.readHead.get(chars, tenant, type, id)
        : (q.vreadHeadCurrent.get(chars, tenant, type, id, versionId) ?? q.vreadHeadHistory.get(chars, tenant, type, id, versionId));
      return row ? toVersion(row) : null;
    },
    async vreadMany(tenant, type, versions) {
      versions = versions.filter(storableVersion);
      if (versions.length === 0) return [];
      const rows = q.vreadMany.all(tenant, type, JSON.stringify(versions.map((v) => [v.id, v.versionId])));
      return onceEach(rows.map(toVersion));
    },
    async present(tenant, type, ids) {
      if (ids.length === 0) return [];
      return q.present.all(tenant, type, JSON.stringify(ids)).map((r) => r.id);
    },
    async types(tenant) {
      return q.types.all(tenant, tenant).map((r) => r.type);
    },
    async claims(tenant, keys) {
      const claim = reader.query<{ n: number }, [string, string]>('SELECT n FROM condition_claims WHERE tenant = ? AND key = ?');
      return keys.map((key) => claim.get(tenant, key)?.n ?? 0);
    },
    async referrers(tenant, targets) {
      return targets.length ? q.referrers.all(tenant, JSON.stringify(targets)) : [];
    },
    async codingPairs(tenant, query, cap) {
      const { text, values } = viaStatement(dialect, tenant, query, codingPairsSql);
      return reader.query<CodingPair, SqlValue[]>(text).all(...viaParameters(tenant, query, query.param, cap), ...values);
    },
    async codeTexts(tenant, query, cap) {
      const { text, values } = viaStatement(dialect, tenant, query, codeTextsSql);
      return reader.query<{ exact: string }, SqlValue[]>(text).all(...viaParameters(tenant, query, `${query.param}:text`, cap), ...values).map((r) => r.exact);
    },
    async metaInUse(tenant, types, cap) {
      const out: MetaValue[] = [];
      for (const key of q.metaKeys.all(tenant, JSON.stringify(types), JSON.stringify(META_PARAMS))) {
        // The first probe finds the smallest value ('', a tag of a system alone, too), each next one the value after it.
        let n = 0;
        for (let row = q.firstValue.get(key.k); row && n < cap; row = q.nextValue.get(key.k, row.value), n++) out.push({ param: key.param, system: key.system, value: row.value });
      }
      return out;
    },
    async containedKeys(tenant, type) {
      return onlyContainedKeys(q.containedKeys.all(tenant, `%:${type}._id`), type);
    },
    async search(tenant, query) {
      query = await withoutAbsentKeys(query, keyExists(tenant));
      if (selectsNothing(query)) return [];
      const rows = await plannedSearch<Row>(dialect, tenant, query, {
        count: countRows,
        rows: (sql, values) => reader.query<Row, SqlValue[]>(sql).all(...values),
      }, (type) => sizes.get(tenant, type));
      return rows.map(toVersion);
    },
    async count(tenant, query) {
      query = await withoutAbsentKeys(query, keyExists(tenant));
      if (selectsNothing(query)) return 0;
      const { sql, values } = countSql(dialect, tenant, query, countsOnIndex(query) ? undefined : await plan(tenant, query));
      return reader.query<{ n: number }, (string | number)[]>(sql).get(...values)!.n;
    },
    async history(tenant, query) {
      return historyRows(reader, tenant, query).map(toHistoryVersion);
    },
    write(tenant, fn) {
      return new Promise((resolve, reject) => {
        // A group runs every write's fn in one turn: each in the async context of the request that asked for it
        // (its tenant's regex accounts: src/regex-guard.ts), not in that of the request that started the group.
        pending.push({ tenant, fn: AsyncLocalStorage.bind(fn), resolve: resolve as (v: unknown) => void, reject });
        if (!scheduled) schedule();
      });
    },
    async versionsSince(tenant, type, since, count) {
      const branch = (table: string) => `SELECT id, version_id AS versionId FROM ${table} WHERE tenant = ? AND type = ? AND last_updated >= ?`;
      return reader
        .query<{ id: string; versionId: number }, (string | number)[]>(`SELECT id, versionId FROM (${branch('resources')} UNION ALL ${branch('resource_history')}) LIMIT ?`)
        .all(tenant, type, since, tenant, type, since, count);
    },
    async writeMark(tenant) {
      return String(reader.query<{ n: number | null }, [string]>('SELECT sum(n) AS n FROM tenant_writes WHERE tenant = ?').get(tenant)!.n ?? 0);
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
    async changeTokens(tenants, types) {
      const marks = types.map(() => '?').join(', ');
      // Grouped by tenant, each tenant's rows read through the (tenant, type, ...) index as changeToken reads them.
      const rows = reader
        .query<{ tenant: string; s: number | null; n: number }, string[]>(
          `SELECT t.value AS tenant, (SELECT MAX(seq) FROM resources WHERE tenant = t.value AND type IN (${marks})) AS s,
             (SELECT COUNT(*) FROM resources WHERE tenant = t.value AND type IN (${marks})) AS n
           FROM json_each(?) t`,
        )
        .all(...types, ...types, JSON.stringify(tenants));
      return new Map(rows.map((r) => [r.tenant, `${r.s ?? 0}:${r.n}`]));
    },
    snapshot(tenant, query) {
      return (snapshot ??= createSqliteSnapshot(scanner))(tenant, query);
    },
    indexing: {
      async state() {
        return indexState(reader);
      },
      async setState({ model, after }) {
        await serial(() => writeTransaction(writer, () => {
          writer.query("UPDATE index_state SET value = ? WHERE name = 'model'").run(model);
          writer.query("UPDATE index_state SET value = ? WHERE name = 'reindex_after'").run(after);
        }));
      },
      async page(after, limit) {
        return reader
          .query<IndexedRow, [number, number]>('SELECT pk, tenant, type, id, version_id AS versionId, content FROM resources WHERE pk > ? AND deleted = 0 ORDER BY pk LIMIT ?')
          .all(after, limit);
      },
      async analyze(opts = {}) {
        // A bulk writer's few resources change no size the plans would notice (the largest key: about what the table holds).
        if (opts.wrote !== undefined) {
          const held = reader.query<{ held: number }, []>('SELECT COALESCE(MAX(pk), 0) AS held FROM resources').get()!.held;
          if (!outgrown(opts.wrote, held - opts.wrote)) return [];
        }
        // Nothing to refresh for the planner, but a reindex leaves the full-text index to merge.
        await mergeText(reader, writer, (fn) => serial(() => writeTransaction(writer, fn)));
        // The types' sizes counted before the bulk change (an import, a reindex) are counted again at the next search.
        sizes.forget();
        return [];
      },
    },
  };
}

function historyRows(db: Database, tenant: string, query: HistoryQuery): HistoryRow[] {
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
  const cols = `${COLS}, method`;
  const order = 'ORDER BY last_updated DESC, type DESC, id DESC, version_id DESC';
  // `revived`: whether the version before a live one is a deletion (ResourceVersion.created), by the history's primary key.
  const sql =
    `SELECT p.*, CASE WHEN p.deleted = 0 AND p.version_id > 1 THEN (SELECT b.deleted FROM resource_history b ` +
    'WHERE b.tenant = ? AND b.type = p.type AND b.id = p.id AND b.version_id < p.version_id ORDER BY b.version_id DESC LIMIT 1) END AS revived ' +
    `FROM (SELECT ${cols} FROM (SELECT ${cols} FROM resources WHERE ${cond} UNION ALL SELECT ${cols} FROM resource_history WHERE ${cond}) ` +
    `${order} LIMIT ?) p ${order}`;
  return db.query<HistoryRow, (string | number)[]>(sql).all(tenant, ...params, ...params, query.count);
}
