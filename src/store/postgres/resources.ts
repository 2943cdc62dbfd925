import { META_PARAMS, storableVersion, type CodingPair, type Condition, type CodingPairsQuery, type IndexedRow, type MetaValue, type ResourceRepo, type ResourceVersion, type SearchQuery, type WriteMethod } from '../types.ts';
import { asConflict } from './db.ts';
import type { Pg, PgTx } from './db.ts';
import { countForm, countSql, countsOnIndex, driverCandidates, matchingSql, onlyContainedKeys, plannedSearch, planSearch, POSTGRES, POSTGRES_MISJUDGED, selectsNothing, SqlBuilder, withoutAbsentKeys, type Dialect, type SqlValue, type StatementForm } from '../search-sql.ts';
import { boundedQuery } from '../index-limits.ts';
import { keyName } from '../search-keys.ts';
import { createTypeSizes, type TypeSizes } from '../type-sizes.ts';
import { outgrown } from '../stale.ts';
import { createPostgresCompartments } from './compartments.ts';
import { historyQuery } from './search-sql.ts';
import { createPostgresSnapshot } from './snapshot.ts';
import { createPostgresKeys } from './search-keys.ts';
import type { KeysConnection } from './keys-connection.ts';
import { createPostgresWriter } from './writer.ts';
import { textColumns } from './write-sql.ts';
import { transaction } from './transaction.ts';

/** A resource row as the statements select it. */
export interface Row {
  type: string;
  id: string;
  version_id: number;
  last_updated: number;
  deleted: boolean;
  content: string;
}

/**
 * ResourceRepo.readWithoutData's columns, over a row and `at`, where `,"data":"` starts in its content: the text before
 * it, closed, when the rest is a string of base64 closing the resource (`"}` its only quote, no escapes).
 */
const WITHOUT_DATA = `type, id, version_id, last_updated, deleted, CASE WHEN at > 0 AND right(content, 2) = '"}'
  AND strpos(substr(content, at + 9), '"') = length(content) - at - 9 AND strpos(substr(content, at + 9), '\\') = 0
  THEN left(content, at - 1) || '}' ELSE content END AS content`;

function toVersion(r: Row): ResourceVersion {
  return { type: r.type, id: r.id, versionId: r.version_id, lastUpdated: r.last_updated, deleted: r.deleted, content: r.content };
}

/** A history row: its method where it was recorded (NULL before migration 30). */
type HistoryRow = Row & { method: WriteMethod | null; revived: boolean | null };

function toHistoryVersion(r: HistoryRow): ResourceVersion {
  const v = toVersion(r);
  if (r.method !== null) v.method = r.method;
  if (!v.deleted) v.created = v.versionId === 1 || r.revived === true;
  return v;
}

/**
 * Runs a planner's count (planSearch, plannedSearch): the candidate drivers' index rows up to a
 * limit, by the value-first indexes. Postgres' own plan of the sets is as good when one of them is
 * small and its statistics are fresh (analyze()), but reads every set in full when all are large
 * (`Patient?birthdate=ge1970&gender=male&_count=50`: 22 ms against 3.6 ms planned; a month of
 * Encounters sorted by date: 26 ms against 5.4 ms), on a million resources.
 */
function countRows(sql: Pg, genericSql: Pg) {
  // The counts are prepared: one bounded index range each, which a generic plan serves as well (3% to
  // 20% more searches/s). Those of a plain form run on the pool of generic plans, with the searches of
  // that form, whose page statements then run on the same connections. The undriven searches with sets
  // are not prepared: generic plans of them, chosen after five runs of a statement, answered some `_has`
  // searches in 3.5 s instead of 0.3 s (p99) on a million resources.
  return async (text: string, values: SqlValue[], form?: StatementForm) =>
    Number((await (form === 'plain' ? genericSql : sql).unsafe<{ n: number }[]>(text, values, { prepare: true }))[0]!.n);
}

/** How long a planner's count answers again for the same statement and values (recentCounts). */
const PLAN_COUNT_MS = 5_000;

/** recentCounts keeps at most this many statements' counts; past that it starts afresh. */
const PLAN_COUNTS_KEPT = 2_000;

type CountFn = ReturnType<typeof countRows>;

/**
 * The counts that only steer a plan (SearchRunner.planCount), each statement's answer taken again for
 * PLAN_COUNT_MS (one in flight shared). A walk through a search's pages asked the same candidates'
 * counts for every page, and a page with `_total` asked them twice, for the page and for the count run
 * beside it: `Observation?patient.gender=female&status=final&_count=50&_total=accurate` ran nine such
 * counts a page, 12 of its 28 ms. A plan from counts a few seconds old is no worse than one from
 * PostgreSQL's statistics, which are older; what a search answers never depends on them.
 */
function recentCounts(count: CountFn): CountFn {
  const kept = new Map<number | bigint, { at: number; n: Promise<number> }>();
  return (text, values, form) => {
    // A digest, not the text (a statement of 1,000 ids is tens of kB): two statements sharing one would share a
    // plan's count, never an answer.
    const key = Bun.hash(`${form ?? ''}\u0000${text}\u0000${JSON.stringify(values)}`);
    const now = performance.now();
    const hit = kept.get(key);
    if (hit !== undefined && now - hit.at < PLAN_COUNT_MS) return hit.n;
    if (kept.size >= PLAN_COUNTS_KEPT) kept.clear();
    const entry = { at: now, n: count(text, values, form) };
    kept.set(key, entry);
    // A failed count is not kept: the next plan asks again.
    entry.n.catch(() => {
      if (kept.get(key) === entry) kept.delete(key);
    });
    return entry.n;
  };
}

/** A type PostgreSQL estimates below this many rows is counted (estimatedSizes). */
const COUNT_BELOW = 10_000;

/** estimatedSizes counts a type's rows up to this many: beyond, the type is taken for this size. */
const COUNT_AT_MOST = 100_000;

/** The type sizes of estimatedSizes. */
interface PostgresSizes extends TypeSizes {
  /**
   * Whether PostgreSQL's statistics take the type for far fewer rows than it holds (none yet, or older than the
   * type's writes), by its last measurement: the search's dialect is then POSTGRES_MISJUDGED.
   */
  misjudged(tenant: string, type: string): boolean;
}

/**
 * The sizes of the types for the planner (TypeSizes): Postgres' own estimate from its statistics,
 * which the statistics watch and analyze() refresh after bulk writes and autovacuum after others.
 * Counting every row costs what the type holds (0.39 s for 686,776 Observations); the estimate costs one
 * plan (under 1 ms). Without statistics (a database filled through the API, not yet analysed) the
 * estimate is a few rows for every type (11 for 200,000 Conditions), and with statistics older than a
 * tenant's or a type's writes it is as small: so a type estimated below COUNT_BELOW rows is counted, by
 * its key's index, up to COUNT_AT_MOST (a type that small costs at most the count of its rows; one
 * estimated wrongly, the first count of at most COUNT_AT_MOST rows, every TYPE_SIZE_MAX_AGE_MS).
 */
function estimatedSizes(sql: Pg | PgTx, known?: PostgresSizes): PostgresSizes {
  const misjudged = new Map<string, boolean>();
  const sizes = createTypeSizes(async (tenant, type) => {
    // A transaction's sizes (searchIn) are the pool's where it has measured them (never one it is measuring: that
    // measurement may be waiting for a connection of the pool).
    const measured = known?.measured(tenant, type);
    if (measured !== undefined) return measured;
    const [row] = await sql.unsafe<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }[]>(
      'EXPLAIN (FORMAT JSON) SELECT 1 FROM resources WHERE tenant = $1 AND type = $2', [tenant, type]);
    const estimate = row!['QUERY PLAN'][0].Plan['Plan Rows'];
    const key = `${tenant}\u0000${type}`;
    if (estimate >= COUNT_BELOW) {
      misjudged.set(key, false);
      return estimate;
    }
    const [counted] = await sql.unsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM resources WHERE tenant = $1 AND type = $2 LIMIT ${COUNT_AT_MOST}) x`, [tenant, type], { prepare: true });
    misjudged.set(key, counted!.n > MISJUDGED_BY * estimate + MISJUDGED_ROWS);
    return counted!.n;
  });
  return {
    ...sizes,
    misjudged: (tenant, type) => misjudged.get(`${tenant}\u0000${type}`) ?? known?.misjudged(tenant, type) ?? false,
    forget() {
      sizes.forget();
      misjudged.clear();
    },
  };
}

/** A type holding more than MISJUDGED_BY times its estimate, and MISJUDGED_ROWS more, is misjudged (PostgresSizes). */
const MISJUDGED_BY = 4;
const MISJUDGED_ROWS = 100;

/** Whether `where` holds a `_has` (SqlBuilder.referring's set, where it is not probed), a chain or a compartment (sets), at any depth. */
function holdsSet(where: Condition[] | undefined): boolean {
  return (where ?? []).some((c) => c.kind === 'has' || c.kind === 'chain' || c.kind === 'compartment' || (c.kind === 'or' && holdsSet(c.any)) || (c.kind === 'and' && holdsSet(c.all)) || (c.kind === 'not' && holdsSet([c.condition])));
}

/** Whether `where` holds a chain, at any depth (inside a `_has`'s or another chain's conditions too). */
function holdsChain(where: Condition[] | undefined): boolean {
  return (where ?? []).some((c) => {
    switch (c.kind) {
      case 'chain': return true;
      case 'has': return holdsChain(c.where);
      case 'or': return holdsChain(c.any);
      case 'and': return holdsChain(c.all);
      case 'not': return holdsChain([c.condition]);
      default: return false;
    }
  });
}

/**
 * The dialect of a search of `query` in `tenant`: POSTGRES_MISJUDGED where it holds a chain (at any depth), whatever the statistics;
 * where it holds a `_has` or a compartment condition, or is kept to a patient's compartment (`query.compartment`, a set where it does
 * not drive), POSTGRES_MISJUDGED if PostgreSQL's statistics misjudge its type or a type its sets read (measured with its size, if not
 * yet); else POSTGRES.
 *
 * A chain's set is its targets' ids found by keys computed in the statement (`k = ANY(ARRAY(...))`, an InitPlan), which no statistics
 * describe: analysed, PostgreSQL still took it for a row or so and joined it to every match, for each page
 * (`Observation?patient.gender=female&status=final&_count=50`, 3,553 of 6,923 Observations: 34-99 ms a page, every match's resource
 * read and sorted), where the set hashed once and the type walked in id order found the page in 12-20 ms (docs/PERFORMANCE.md,
 * fifty-fourth session). A `_has` alone was as fast either way analysed (0.9-1.15 ×), so it keeps the statistics' plans.
 */
async function dialectOf(sizes: PostgresSizes, tenant: string, query: Pick<SearchQuery, 'type' | 'where' | 'compartment'>): Promise<Dialect> {
  if (holdsChain(query.where)) return POSTGRES_MISJUDGED;
  if (!holdsSet(query.where) && query.compartment === undefined) return POSTGRES;
  for (const type of [query.type, ...setTypes(query.where ?? [])]) {
    await sizes.get(tenant, type);
    if (sizes.misjudged(tenant, type)) return POSTGRES_MISJUDGED;
  }
  return POSTGRES;
}

/** The types whose resources `where`'s sets read (a `_has`'s referring resources), at any depth. */
function setTypes(where: Condition[]): string[] {
  return where.flatMap((c): string[] => {
    switch (c.kind) {
      case 'has': return [c.type, ...setTypes(c.where)];
      case 'or': return setTypes(c.any);
      case 'and': return setTypes(c.all);
      case 'not': return setTypes([c.condition]);
      default: return [];
    }
  });
}

/*
 * A table's statistics are stale (analyze's `onlyStale`) once more than STALE_ROWS rows and STALE_SHARE of
 * the rows it held at its last ANALYZE have changed since (src/store/stale.ts). An ANALYZE reads a sample of at most
 * 30,000 rows (300 × default_statistics_target) whatever the table holds, and the statistics watch checks
 * once a minute, so a growing table costs at most one such sample a minute while it grows by a tenth, and
 * a new tenant's or type's rows are planned from statistics that know them once they are a tenth of it.
 */

/**
 * The advisory lock (any constant; "cinderst" in ASCII) under which analyze's `onlyStale` runs: processes
 * sharing a database check and analyse one at a time, the others skipping the check.
 */
export const STATISTICS_LOCK = String(0x63696e6465727374n);

/** The tables whose statistics the searches' plans depend on. */
const SEARCHED_TABLES = ['resources', 'resource_history', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'search_text', 'compartments'];

/**
 * Resources on Postgres: current versions in `resources`, older ones in `resource_history`, search
 * values in `search_index` and `compartments`. Reads run at READ COMMITTED on the pool; writes run in
 * transactions (`transaction`, sql.begin guarded against a lost connection) that lock the rows they replace. `keys`: the connection that creates
 * search keys (see createPostgresKeys), not one of the pool's; `genericSql`: the pool that runs the
 * searches of a plain form (and their planner's counts) with generic plans (connectGeneric).
 */
/** The keys of `param` of `type` (codingPairs, codeTexts). */
function paramKeys(b: SqlBuilder, type: string, param: string): string {
  return `SELECT k FROM search_keys WHERE tenant = ${b.v(b.tenant)} AND type = ${b.v(type)} AND param = ${b.v(param)} AND code = ''`;
}

/**
 * codingPairs' and codeTexts' reference rows `s` (key `sk`): with `also`, only those of resources
 * holding one of its values; with `matching`, only those whose resource row `r` its probes keep
 * (matchingSql).
 */
function viaSql(b: SqlBuilder, q: CodingPairsQuery): { from: string; where: string } {
  const where = [`sk.tenant = ${b.v(b.tenant)}`, `sk.type = ${b.v(q.type)}`, `sk.param = ${b.v(q.via.param)}`, `sk.system = ${b.v(q.via.target)}`, "sk.code = ''"];
  if (q.also) {
    const values = q.also.values.map((v) => b.v(v.toLowerCase())).join(', ');
    where.push(`EXISTS (SELECT 1 FROM search_index x WHERE x.res = s.res AND x.k IN (${paramKeys(b, q.type, q.also.param)}) AND lower(x.value) IN (${values}))`);
  }
  const from = `search_keys sk JOIN search_index s ON s.k = sk.k AND s.value = ${b.v(q.via.id)}`;
  if (q.matching === undefined) return { from, where: where.join(' AND ') };
  return { from: `${from} JOIN resources r ON r.pk = s.res`, where: [...where, matchingSql(b, q.type, q.matching)].join(' AND ') };
}

export function createPostgresResources(sql: Pg, keys: KeysConnection, genericSql: Pg): ResourceRepo {
  const searchKeys = createPostgresKeys(keys);
  const sizes = estimatedSizes(sql);
  const snapshot = createPostgresSnapshot(sql, (tenant, type, where) => dialectOf(sizes, tenant, { type, where }));
  const count = countRows(sql, genericSql);
  const planCount = recentCounts(count);
  // Keys of reference and token rows found (a key is never removed), for withoutAbsentKeys.
  const foundKeys = new Set<string>();
  // `on`: the pool, or a write's transaction (searchIn).
  const keyExists = (tenant: string, on: Pg | PgTx = sql) => async (type: string, param: string, system: string) => {
    const name = keyName({ tenant, type, param, system, code: '' });
    if (foundKeys.has(name)) return true;
    const [row] = await on`SELECT 1 AS hit FROM search_keys WHERE tenant = ${tenant} AND type = ${type} AND param = ${param} AND system = ${system} AND code = ''`;
    if (row) foundKeys.add(name);
    return row !== undefined;
  };
  /**
   * A search in a write's transaction `tx` (ResourceWriter.search): every statement on its connection, the
   * planner's counts and the types' sizes included (measured there when not known), so that it sees the
   * transaction's writes and never waits for another connection of the pool while it holds one.
   */
  const searchIn = (tx: PgTx, tenant: string) => {
    const txSizes = estimatedSizes(tx, sizes);
    return async (query: SearchQuery) => {
      query = await withoutAbsentKeys(boundedQuery(query), keyExists(tenant, tx));
      if (selectsNothing(query)) return [];
      const rows = await plannedSearch<Row>(await dialectOf(txSizes, tenant, query), tenant, query, {
        count: async (text, values) => Number((await tx.unsafe<{ n: number }[]>(text, values, { prepare: true }))[0]!.n),
        rows: (text, values, form) => tx.unsafe<Row[]>(text, values, { prepare: form !== undefined }),
      }, (type) => txSizes.get(tenant, type));
      return rows.map(toVersion);
    };
  };
  /** A codingPairs or codeTexts statement (viaSql's `select`), run. */
  const viaRead = <R extends object>(tenant: string, query: CodingPairsQuery, select: (b: SqlBuilder, via: { from: string; where: string }, keys: (param: string) => string) => string) => {
    const b = new SqlBuilder(POSTGRES, tenant, 'exists');
    const text = select(b, viaSql(b, query), (param) => paramKeys(b, query.type, param));
    return sql.unsafe<R[]>(text, b.values);
  };
  /**
   * analyze({ onlyStale }): the searched tables without statistics that hold rows, or whose statistics are
   * stale (STALE_ROWS, STALE_SHARE), analysed in one transaction under STATISTICS_LOCK; none where another
   * process holds it (that one is analysing them). The changes are PostgreSQL's count since the last
   * ANALYZE (inserted, updated or deleted rows, counted whether or not autovacuum runs). The types' sizes
   * measured are forgotten when it analyses a table, or finds one analysed since its last check (by another
   * process or autovacuum), so that the searches are planned by the new statistics.
   */
  let lastAnalysedAt: string | undefined;
  const staleAnalysed = () => transaction(sql, async (tx) => {
    const [lock] = await tx<{ held: boolean }[]>`SELECT pg_try_advisory_xact_lock(${STATISTICS_LOCK}::bigint) AS held`;
    if (!lock!.held) return [];
    const stats = await tx<{ table: string; analysed: boolean; changed: number; held: number; at: string | null }[]>`
      SELECT c.relname AS table, EXISTS (SELECT 1 FROM pg_stats p WHERE p.schemaname = current_schema() AND p.tablename = c.relname) AS analysed,
        pg_stat_get_mod_since_analyze(c.oid)::float8 AS changed, GREATEST(c.reltuples, 0)::float8 AS held,
        GREATEST(pg_stat_get_last_analyze_time(c.oid), pg_stat_get_last_autoanalyze_time(c.oid))::text AS at
      FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND c.relname IN ${tx(SEARCHED_TABLES)}`;
    // Statistics another process or autovacuum gathered since the last check: the sizes measured were the old ones'.
    const analysedAt = stats.map((r) => `${r.table}@${r.at ?? ''}`).sort().join();
    if (lastAnalysedAt !== undefined && analysedAt !== lastAnalysedAt) sizes.forget();
    lastAnalysedAt = analysedAt;
    const stale: string[] = [];
    for (const t of SEARCHED_TABLES) {
      const s = stats.find((r) => r.table === t);
      if (!s) continue;
      if (s.analysed) {
        if (outgrown(s.changed, s.held)) stale.push(t);
        continue;
      }
      // No statistics: an empty table (or one analysed while empty) has none either.
      const [row] = await tx<{ some: boolean }[]>`SELECT EXISTS (SELECT 1 FROM ${tx(t)}) AS some`;
      if (row!.some) stale.push(t);
    }
    // ANALYZE, unlike VACUUM, runs in a transaction: the lock is held until its statistics are committed.
    if (stale.length) await tx.unsafe(`ANALYZE ${stale.join(', ')}`);
    return stale;
  }).then((stale) => {
    // The sizes measured, and the types they judged misjudged, were the old statistics'.
    if (stale.length) sizes.forget();
    return stale;
  });
  return {
    ...createPostgresCompartments(sql),
    async read(tenant, type, id) {
      const [row] = await sql<Row[]>`
        SELECT type, id, version_id, last_updated, deleted, content FROM resources
        WHERE tenant = ${tenant} AND type = ${type} AND id = ${id}`;
      return row ? toVersion(row) : null;
    },
    async measured(tenant, type, id) {
      // The length from the TOAST pointer (`octet_length` detoasts nothing), the text only when short: write-sql.ts textColumns.
      const [row] = await sql<{ version_id: number; last_updated: number; deleted: boolean; bytes: number | null; content: string | null }[]>`
        SELECT version_id, last_updated, deleted${textColumns(sql, 'measured')} FROM resources
        WHERE tenant = ${tenant} AND type = ${type} AND id = ${id}`;
      if (!row) return null;
      const head = { versionId: row.version_id, lastUpdated: row.last_updated, deleted: row.deleted };
      return row.content === null ? { ...head, bytes: row.bytes! } : { ...head, content: row.content };
    },
    async vread(tenant, type, id, versionId) {
      const [row] = await sql<Row[]>`
        SELECT type, id, version_id, last_updated, deleted, content FROM resources
        WHERE tenant = ${tenant} AND type = ${type} AND id = ${id} AND version_id = ${versionId}
        UNION ALL
        SELECT type, id, version_id, last_updated, deleted, content FROM resource_history
        WHERE tenant = ${tenant} AND type = ${type} AND id = ${id} AND version_id = ${versionId}
        LIMIT 1`;
      return row ? toVersion(row) : null;
    },
    // The database cuts the content before `,"data":"` where `data` is its last element, a string of base64 alone
    // (as splitStoredBinary reads it: every Binary written from native content); any other content is sent whole.
    // Text functions only: no JSON parse that a stored text could fail (jsonb refuses \u0000).
    async readWithoutData(tenant, type, id, versionId) {
      const [row] = versionId === undefined
        ? await sql.unsafe<Row[]>(
          `SELECT ${WITHOUT_DATA} FROM (SELECT *, strpos(content, ',"data":"') AS at FROM resources WHERE tenant = $1 AND type = $2 AND id = $3) r`,
          [tenant, type, id],
        )
        : await sql.unsafe<Row[]>(
          `SELECT ${WITHOUT_DATA} FROM (SELECT *, strpos(content, ',"data":"') AS at FROM (
            SELECT type, id, version_id, last_updated, deleted, content FROM resources WHERE tenant = $1 AND type = $2 AND id = $3 AND version_id = $4
            UNION ALL
            SELECT type, id, version_id, last_updated, deleted, content FROM resource_history WHERE tenant = $1 AND type = $2 AND id = $3 AND version_id = $4
            LIMIT 1) v) r`,
          [tenant, type, id, versionId],
        );
      return row ? toVersion(row) : null;
    },
    // `left` of a text kept out of line uncompressed reads only the TOAST chunks it needs; the rest stays in the database.
    async readHead(tenant, type, id, chars, versionId) {
      const [row] = versionId === undefined
        ? await sql<Row[]>`
          SELECT type, id, version_id, last_updated, deleted, left(content, ${chars}) AS content FROM resources
          WHERE tenant = ${tenant} AND type = ${type} AND id = ${id}`
        : await sql<Row[]>`
          SELECT type, id, version_id, last_updated, deleted, left(content, ${chars}) AS content FROM resources
          WHERE tenant = ${tenant} AND type = ${type} AND id = ${id} AND version_id = ${versionId}
          UNION ALL
          SELECT type, id, version_id, last_updated, deleted, left(content, ${chars}) AS content FROM resource_history
          WHERE tenant = ${tenant} AND type = ${type} AND id = ${id} AND version_id = ${versionId}
          LIMIT 1`;
      return row ? toVersion(row) : null;
    },
    async vreadMany(tenant, type, versions) {
      // Each version asked once, of those a store could hold (a version past int's range fails the cast).
      const keys = new Map(versions.filter(storableVersion).map((v) => [`${v.id}\u0000${v.versionId}`, v]));
      if (keys.size === 0) return [];
      versions = [...keys.values()];
      // One probe of each table's key per version (LATERAL), as `present` probes: never a scan of the type's rows.
      const rows = await sql<Row[]>`
        SELECT hit.* FROM unnest(${versions.map((v) => v.id)}::text[], ${versions.map((v) => v.versionId)}::int[]) AS u(id, v)
        CROSS JOIN LATERAL (
          (SELECT type, id, version_id, last_updated, deleted, content FROM resources
           WHERE tenant = ${tenant} AND type = ${type} AND id = u.id AND version_id = u.v)
          UNION ALL
          (SELECT type, id, version_id, last_updated, deleted, content FROM resource_history
           WHERE tenant = ${tenant} AND type = ${type} AND id = u.id AND version_id = u.v)
          LIMIT 1
        ) hit`;
      return rows.map(toVersion);
    },
    async present(tenant, type, ids) {
      if (ids.length === 0) return [];
      // One index probe per id (LATERAL ... LIMIT 1): `id = ANY(...)`, or a join the planner may hash,
      // read every row of the type when the table has no statistics (0.9 s for 1,317 ids among 100,000).
      const rows = await sql<{ id: string }[]>`
        SELECT u.id FROM unnest(${ids}::text[]) AS u(id)
        CROSS JOIN LATERAL (SELECT 1 FROM resources r WHERE r.tenant = ${tenant} AND r.type = ${type} AND r.id = u.id LIMIT 1) hit`;
      return rows.map((r) => r.id);
    },
    async claims(tenant, keys) {
      if (keys.length === 0) return [];
      const rows = await sql<{ key: string; n: string }[]>`
        SELECT key, n::text AS n FROM condition_claims WHERE tenant = ${tenant} AND key = ANY(${keys}::text[])`;
      const counts = new Map(rows.map((r) => [r.key, Number(r.n)]));
      return keys.map((key) => counts.get(key) ?? 0);
    },
    async types(tenant) {
      // The next type after each, from the (tenant, type, id) index: a probe per type.
      const rows = await sql<{ type: string }[]>`
        WITH RECURSIVE t(type) AS (
          SELECT MIN(type) FROM resources WHERE tenant = ${tenant}
          UNION ALL
          SELECT (SELECT MIN(r.type) FROM resources r WHERE r.tenant = ${tenant} AND r.type > t.type) FROM t WHERE t.type IS NOT NULL
        ) SELECT type FROM t WHERE type IS NOT NULL`;
      return rows.map((r) => r.type);
    },
    async referrers(tenant, targets) {
      if (targets.length === 0) return [];
      return sql<{ type: string; param: string; target: string }[]>`
        SELECT DISTINCT type, param, system AS target FROM search_keys WHERE tenant = ${tenant} AND system = ANY(${targets}::text[])`;
    },
    async codingPairs(tenant, query, cap) {
      // The reference's rows (by the (k, value, res) index), then each resource's rows of the parameter (by res),
      // then the pairs within each resource. In steps (materialised CTEs): as one statement of seven joins and three
      // subqueries the planner weighed its join orders for 40-90 ms a call, for every subject of a `$lastn` (one of
      // 10 Observations executed in under 1 ms); a join of the codes with themselves is costed as one row a side (a
      // CTE has no statistics) and run as a nested loop (3.5 s for 5,515 codes), so each resource's pairs come from
      // its own arrays instead.
      return viaRead<CodingPair>(tenant, query, (b, via, keys) => `
        WITH res AS MATERIALIZED (SELECT DISTINCT s.res FROM ${via.from} WHERE ${via.where}),
        codes AS MATERIALIZED (
          SELECT c.res, k.system, c.value FROM res
          JOIN search_index c ON c.res = res.res AND c.k IN (${keys(query.param)})
          JOIN search_keys k ON k.k = c.k
        ),
        grouped AS MATERIALIZED (SELECT array_agg(system) AS systems, array_agg(value) AS vals FROM codes GROUP BY res)
        SELECT DISTINCT a.system AS system1, a.value AS value1, z.system AS system2, z.value AS value2
        FROM grouped
        CROSS JOIN LATERAL unnest(grouped.systems, grouped.vals) AS a(system, value)
        CROSS JOIN LATERAL unnest(grouped.systems, grouped.vals) AS z(system, value)
        LIMIT ${b.v(cap)}`);
    },
    async codeTexts(tenant, query, cap) {
      const rows = await viaRead<{ exact: string }>(tenant, query, (b, via, keys) => `
        SELECT DISTINCT t.exact
        FROM ${via.from}
        JOIN search_string t ON t.res = s.res AND t.k IN (${keys(`${query.param}:text`)})
        WHERE ${via.where}
        LIMIT ${b.v(cap)}`);
      return rows.map((r) => r.exact);
    },
    async metaInUse(tenant, types, cap) {
      const keys = await sql<{ k: number; param: string; system: string }[]>`
        SELECT k, param, system FROM search_keys
        WHERE tenant = ${tenant} AND type = ANY(${types}::text[]) AND param = ANY(${[...META_PARAMS]}::text[]) AND code = ''`;
      const out: MetaValue[] = [];
      for (const key of keys) {
        // A loose index scan of (k, value): each step one probe for the next value, `cap` at most.
        const rows = await sql<{ value: string }[]>`
          WITH RECURSIVE v(value) AS (
            (SELECT value FROM search_index WHERE k = ${key.k} ORDER BY value LIMIT 1)
            UNION ALL
            SELECT (SELECT i.value FROM search_index i WHERE i.k = ${key.k} AND i.value > v.value ORDER BY i.value LIMIT 1) FROM v WHERE v.value IS NOT NULL
          ) SELECT value FROM v WHERE value IS NOT NULL LIMIT ${cap}`;
        for (const r of rows) out.push({ param: key.param, system: key.system, value: r.value });
      }
      return out;
    },
    async containedKeys(tenant, type) {
      return onlyContainedKeys(await sql<{ type: string; param: string }[]>`
        SELECT DISTINCT type, param FROM search_keys WHERE tenant = ${tenant} AND system = '' AND param LIKE ${`%:${type}._id`}`, type);
    },
    async search(tenant, query) {
      query = await withoutAbsentKeys(boundedQuery(query), keyExists(tenant));
      if (selectsNothing(query)) return [];
      const rows = await plannedSearch<Row>(await dialectOf(sizes, tenant, query), tenant, query, {
        count,
        planCount,
        rows: (text, values, form) => (form === 'plain' ? genericSql : sql).unsafe<Row[]>(text, values, { prepare: form !== undefined }),
      }, (type) => sizes.get(tenant, type));
      return rows.map(toVersion);
    },
    async count(tenant, query) {
      // A driver of few rows (at most DRIVER_MAX_ROWS) counts with probes of the others: a patient's 76
      // vital signs, 5-10 ms either way, against 150-180 ms for the intersection of the sets. Counting
      // every match of large conditions, Postgres' hash joins of the sets beat probing row by row (42 ms
      // against 209 ms), and their intersection the sets tested on each resource (countSql).
      query = await withoutAbsentKeys(boundedQuery(query), keyExists(tenant));
      if (selectsNothing(query)) return 0;
      const dialect = await dialectOf(sizes, tenant, query);
      const plan = countsOnIndex(query) ? undefined : await planSearch(driverCandidates(dialect, tenant, query), planCount);
      const planned = plan?.driver === undefined ? undefined : plan;
      const q = countSql(dialect, tenant, query, planned);
      const form = countForm(query, planned);
      const [row] = await (form === 'plain' ? genericSql : sql).unsafe<{ n: number }[]>(q.sql, q.values, { prepare: form !== undefined });
      return Number(row!.n);
    },
    indexing: {
      async state() {
        const rows = await sql<{ name: string; value: number }[]>`SELECT name, value FROM index_state`;
        const get = (name: string) => Number(rows.find((r) => r.name === name)?.value ?? 0);
        return { model: get('model'), after: get('reindex_after') };
      },
      async setState({ model, after }) {
        await sql`UPDATE index_state SET value = CASE name WHEN 'model' THEN ${model}::bigint ELSE ${after}::bigint END
          WHERE name IN ('model', 'reindex_after')`;
      },
      async page(after, limit) {
        const rows = await sql<IndexedRow[]>`
          SELECT pk, tenant, type, id, version_id AS "versionId", content FROM resources WHERE pk > ${after} AND NOT deleted ORDER BY pk LIMIT ${limit}`;
        return rows.map((r) => ({ ...r, pk: Number(r.pk) }));
      },
      async analyze(opts = {}) {
        if (opts.onlyStale) return staleAnalysed();
        if (opts.wrote !== undefined) {
          // The rows the resources table held at its last statistics (-1: never counted), as analyze's `onlyStale` reads them.
          const [row] = await sql<{ held: number }[]>`SELECT reltuples::float8 AS held FROM pg_class WHERE oid = 'resources'::regclass`;
          if (!outgrown(opts.wrote, row?.held ?? -1)) return [];
        }
        // A bulk change is vacuumed as well, so that index-only scans need not visit the rows to learn
        // that they are visible: `_total=accurate` over 6,634 active Conditions of a million resources
        // took 11.3 ms before and 5.7 ms after (docs/PERFORMANCE.md, fourteenth session).
        await sql.unsafe(`VACUUM (ANALYZE) ${SEARCHED_TABLES.join(', ')}`);
        // A type judged misjudged by the old statistics was searched in POSTGRES_MISJUDGED for up to
        // TYPE_SIZE_MAX_AGE_MS after them; the next search measures it by the new ones.
        sizes.forget();
        return [...SEARCHED_TABLES];
      },
    },
    async history(tenant, query) {
      const rows = await sql<HistoryRow[]>`${historyQuery(sql, tenant, query)}`;
      return rows.map(toHistoryVersion);
    },
    async write(tenant, fn) {
      let fromFn = false;
      try {
        const result = await transaction(sql, async (tx) => {
          const w = createPostgresWriter(tx, tenant, searchKeys, searchIn(tx, tenant));
          fromFn = true;
          const value = await fn(w);
          fromFn = false;
          // The last versions written with the tenant's write mark in their statement (writer.ts finish).
          await w.finish();
          return [value];
        });
        return result[0] as Awaited<ReturnType<typeof fn>>;
      } catch (err) {
        // What fn throws is passed on as is; a failing COMMIT (e.g. deadlock) becomes a conflict.
        throw fromFn ? err : asConflict(err, 'write');
      }
    },
    async versionsSince(tenant, type, since, count) {
      // Each branch is limited on its own too: past `count` in either table, the answer is `count` of them. Ordered by
      // `last_updated` as history is, so that the plan walks the tables' `last_updated` indexes from `since` (without
      // an order, a LIMIT let the generic plan scan the type's rows for the first few that match).
      const rows = await sql<{ id: string; version_id: number }[]>`
        (SELECT id, version_id FROM resources WHERE tenant = ${tenant} AND type = ${type} AND last_updated >= ${since} ORDER BY last_updated DESC LIMIT ${count})
        UNION ALL
        (SELECT id, version_id FROM resource_history WHERE tenant = ${tenant} AND type = ${type} AND last_updated >= ${since} ORDER BY last_updated DESC LIMIT ${count})
        LIMIT ${count}`;
      return rows.map((r) => ({ id: r.id, versionId: r.version_id }));
    },
    async writeMark(tenant) {
      const [row] = await sql<{ n: string }[]>`SELECT COALESCE(sum(n), 0)::text AS n FROM tenant_writes WHERE tenant = ${tenant}`;
      return row!.n;
    },
    async changeToken(tenant, types) {
      // seq only grows and every write gives its row a seq drawn after the row was locked, so the sum
      // over current rows grows with every committed write, whatever order concurrent writers commit in
      // (MAX(seq) alone would miss a slower transaction committing a smaller seq).
      const [row] = await sql<{ s: string; n: number }[]>`
        SELECT COALESCE(sum(seq), 0)::text AS s, count(*)::int AS n FROM resources
        WHERE tenant = ${tenant} AND type = ANY(${types}::text[])`;
      return `${row!.s}:${row!.n}`;
    },
    async changeTokens(tenants, types) {
      if (tenants.length === 0) return new Map();
      const rows = await sql<{ tenant: string; s: string; n: number }[]>`
        SELECT t.tenant, COALESCE(sum(r.seq), 0)::text AS s, count(r.seq)::int AS n
        FROM unnest(${[...tenants]}::text[]) AS t(tenant)
        LEFT JOIN resources r ON r.tenant = t.tenant AND r.type = ANY(${types}::text[])
        GROUP BY t.tenant`;
      return new Map(rows.map((r) => [r.tenant, `${r.s}:${r.n}`]));
    },
    snapshot,
  };
}
