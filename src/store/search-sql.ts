/**
 * Renders compiled searches (Condition, SortKey) to SQL for both adapters: one text with numbered
 * placeholders (`?N` for SQLite, `$N` for PostgreSQL) and its values, which never enter the text. The
 * dialects differ only in placeholders, in how `deleted` is stored, in how a planned search probes a
 * row and in how a row's key is matched against the keys a subquery of `search_keys` selects.
 */
import { nearBound, nearBox } from './geo.ts';
import { INDEX_TABLES } from './index-tables.ts';
import { boundedVersions } from './index-limits.ts';
import type { SearchKey } from './search-keys.ts';
import { textScope } from './text-scope.ts';
import { VERSIONED_URL_PARAM } from './types.ts';
import type { CompositePart, CompositeTest, Condition, DateTest, IndexTable, NearPoint, NumberTest, SearchCursor, SearchQuery, SortKey, StringValue, TextQuery, TextTerm, TokenValue } from './types.ts';

export type SqlValue = string | number;

export interface Dialect {
  /**
   * A string condition's prefix ranges, when it drives, are a join on a list of them (SqlBuilder.rangesJoined: an
   * index range read for each), not an `or`: SQLite weighs an `or` of ranges for every row of the parameter's key (a
   * merged given name of 250 prefixes among 5,000 Patients: 91 ms against 0.7 ms as the join; docs/PERFORMANCE.md),
   * and PostgreSQL tests every range of it on each row of the parameter the bitmap of its ranges reads. The FROM item
   * (aliased `alias`) of `ranges`, [low, high) each, and the expressions of a range's two ends.
   */
  rangeList?: (b: SqlBuilder, ranges: [low: string, high: string][], alias: string) => { from: string; low: string; high: string };
  /** The SQL for "row `a` is not a deletion". */
  live(alias: string): string;
  placeholder(n: number): string;
  /** How a planned search (SearchPlan) probes each row, and joins its driver's rows to resources. */
  probe: Exclude<Correlation, 'in'>;
  driverJoin: string;
  /**
   * The join of a driver's row (its resource's key `pk`) to its resource, `resources <alias>` (`r` unless
   * given), each read by that key whatever the plan (a driven search's page, fromWhere; sortedDriven, whose
   * conditions on `r` hold correlated subqueries; a chain's targets read from their condition's rows).
   */
  resourceOf(pk: string, alias?: string): string;
  /** The FROM item, aliased `alias` with the column `res`, of a driver's resource rows (`select`: SELECT DISTINCT ... res). */
  driven(select: string, alias: string): string;
  /** As `driven`, with the columns `res` and `key` (`select`: SELECT DISTINCT ... res, ... key): a driver carrying the sort key (carriedKey). */
  drivenKeyed(select: string, alias: string): string;
  /**
   * `SELECT ... res`: the resource rows of `type` (live or not: the search tests that) without a row
   * `s` of `table` that `keys` accepts (SqlBuilder.keyIn, not by res), for `:missing=true` as a driver.
   */
  missingRows(b: SqlBuilder, type: string, table: IndexTable, keys: (s: string) => string): string;
  /**
   * "Column `k` is among the keys `keys` selects" (search_keys). `byRes`: the rows are found by their
   * `res`, and the key only filters them.
   */
  keyIn(k: string, keys: string, byRes: boolean): string;
  /**
   * Column `col` of a row, as an expression that no index is read by: a driving date or number test
   * reads one of `search_range`'s value-first indexes, (k, low) or (k, high), and its test on the other
   * column must not make the planner choose that one instead.
   */
  unindexed(col: string): string;
  /**
   * Text column `col` of a row probed by its `res`, as compared with a list of values: SQLite reads the
   * resource's rows of the key (the primary key's `(res, k)` range, a few rows) and tests each against
   * the list, where it probed `(k, value, res)` once per value, 1,000 probes a row for a filter of 1,000
   * codes (an export page of 34,000 Observations: 11-14 s against 0.1 s); PostgreSQL plans it as it is.
   * Likewise a probed reference row's `res` tested against a set (SqlBuilder.setKey).
   */
  probedValue(col: string): string;
  /**
   * Column `col` is (`not`: is not) one of `ids`. SQLite reads the list as `IN (?, ?, ...)`, each value
   * one probe of the (tenant, type, id) key; PostgreSQL as one array value (textArray), so that a list
   * of any length is one statement, prepared once.
   */
  idIn(b: SqlBuilder, col: string, ids: string[], not: boolean): string;
  /**
   * "`col` is among the values `set` selects": a `_has`'s set of referenced ids (SqlBuilder.referring), not
   * probed, or a chain's set of resource keys (with its contained resources' rows or without).
   */
  inSet(col: string, set: string): string;
  /**
   * Where a page in id order without a driver reads a `_has` set (SqlBuilder.referring, whose rows are `value`s):
   * the FROM item of the set's distinct ids, aliased `h` (`h.id`), which the page joins to the resources by their
   * key in id order, reading only the page's resource rows. PostgreSQL read every resource the set names before
   * sorting the page from them (279 Patients for a page of 51: docs/PERFORMANCE.md, fifty-eighth session). Undefined:
   * the set is a condition of the resource rows (SQLite, which walks its IN list in order and stops at the page's end).
   */
  hasIds?(set: string): string;
  /**
   * Whether a chain's targets are read from the rows of one of their conditions that can drive, each
   * row's resource then by its key (chainTarget), rather than as the target type's rows with each
   * condition a set of them. Without statistics PostgreSQL made that set a nested-loop semi-join, the
   * condition's rows read again for each target resource (POSTGRES_MISJUDGED).
   */
  drivenChainTargets: boolean;
  /**
   * Where a search lists ids (idsDrive): the FROM item, aliased `r` as `resources r` is, that reads each
   * of `ids` (distinct) by its key from `from` (`resources r` and the probes' lateral joins) with `where`
   * (on `r`) tested on it. Undefined: the ids are a condition of `resources r` like any other (SQLite,
   * whose planner reads each by key from the IN list whatever the statistics).
   */
  byIds?(b: SqlBuilder, ids: string[], from: string, where: string): string;
  /** Text `col` with its ASCII letters, and those alone, in lower case (`_filter`'s token comparisons; foldAscii in memory). */
  foldAscii(col: string): string;
  /** Text `col` matches the regular expression `pattern` (bound), read as JavaScript's RegExp reads it (`missing` conditions' `urls`). */
  matches(col: string, pattern: string): string;
  /**
   * Whether Cinder plans `_lastUpdated` itself: a driver candidate, and written unindexed on rows read in
   * id order when it does not drive (SQLite, whose planner has no statistics and read a wide range by its
   * index, then sorted it). PostgreSQL's statistics plan it well (0.8 ms for the same page), and
   * counting it as a candidate there cost 2-3 ms.
   */
  plansLastUpdated: boolean;
  /**
   * Whether a sort walk's count of the matches with the key (withoutKey after an offset: countSql with `driver: 'sort'`,
   * over every row of the key) probes a chain on each of those rows, as the walk's windows do (chainProbed), rather
   * than building the chain's set of referring resources once. Measured (bench/keyless-count-ab.ts, 30,000
   * Observations, 500 with the key): SQLite 0.70-0.89 × the set's time; PostgreSQL, which hashes the set once,
   * 1.06-1.50 ×, so it keeps the set (docs/PERFORMANCE.md, fifty-sixth session).
   */
  countProbesChains: boolean;
  /**
   * Whether the type's first rows in a keyset order (nthRow, plannedSearch's first reading in order) are
   * read with a range of their first key that every row is in, written as constants: without statistics
   * PostgreSQL took the type's (tenant, type) rows for a few and read every one of them by a bitmap, then
   * sorted them all for the 500th (166-440 ms among 200,000 Conditions, each page read in order); the
   * range makes them fewer still to it, and it walks the index in order (under 1 ms). With statistics the
   * range holds the whole column and changes no estimate. SQLite plans the index in order as it is.
   */
  rangesFirstRows: boolean;
  /**
   * The `k` of a key that exists and is committed, when the adapter can tell at once (else undefined,
   * and the statement looks the key up itself). A key once committed never changes.
   */
  knownKey?(key: SearchKey): number | undefined;
  /** What the planner weighs a wide driver with (wideDriver). */
  costs: PlanCosts;
  /**
   * Full-text search (`_text`, `_content`; the adapter's tables): `rows` selects the resource rows
   * (`res`) whose words match; `has` tests the resource row `key` (a probe). Words are letters and digits only (src/fhir/text-index.ts), so they need no escaping in
   * either query language.
   */
  text: {
    /** The rows of `type` in the builder's tenant (by their scope: an unlucky hash may add others). */
    rows(b: SqlBuilder, c: TextCondition, type: string): string;
    has(b: SqlBuilder, key: string, c: TextCondition): string;
    /**
     * Whether a statement without a driver reads the matching rows once as a set (`pk IN`) rather
     * than testing each resource (`has`): SQLite's FTS5 answers a query per row in 40-80 µs, and lists
     * three thousand matches in 0.8 ms; PostgreSQL tests a row by its key in a few µs.
     */
    setWhenUndriven: boolean;
  };
}

type TextCondition = Condition & { kind: 'text' };
type TokenCondition = Extract<Condition, { kind: 'token' }>;
type MissingCondition = Extract<Condition, { kind: 'missing' }>;

const allOf = (values: TextTerm[][], term: (t: TextTerm) => string, and: string, or: string): string =>
  values.map((terms) => `(${terms.map(term).join(and)})`).join(or);

/**
 * A text condition in a full-text query language: its expression as written where it has one (each word
 * read once from the index: the OR of ANDs read `(a* OR b*) (c* OR d*) ...` of 10 words 160 times, 3.4 s
 * on SQLite), else its alternatives.
 */
function textExpression(c: TextCondition, term: (t: TextTerm) => string, and: string, or: string): string {
  const render = (q: TextQuery): string =>
    'word' in q ? term(q) : `(${('all' in q ? q.all : q.any).map(render).join('all' in q ? and : or)})`;
  return c.query ? render(c.query) : allOf(c.values, term, and, or);
}

/** An FTS5 query: a column filter on quoted words, ` *` after a prefix; with a scope, its rows alone. */
const fts5Query = (c: TextCondition, scope?: string) =>
  `${scope ? `{scope} : "${scope}" AND ` : ''}{${c.field}} : (${textExpression(c, (t) => `"${t.word}"${t.prefix ? ' *' : ''}`, ' AND ', ' OR ')})`;

/**
 * The same test on the recent rows' space-separated words (SQLite keeps words written by small
 * transactions out of FTS5 for a while: see sqlite/text.ts).
 */
function recentMatch(b: SqlBuilder, p: string, c: TextCondition): string {
  const col = `' ' || ${p}.${c.field}`;
  return `(${allOf(c.values, (t) => (t.prefix ? `${col} LIKE ${b.v(`% ${t.word}%`)}` : `${col} || ' ' LIKE ${b.v(`% ${t.word} %`)}`), ' AND ', ' OR ')})`;
}

/** SQLite: the FTS5 table (less the rows of resources changed since, `search_text_stale`) and the recent rows. */
const SQLITE_TEXT: Dialect['text'] = {
  rows: (b, c, type) => {
    const scope = textScope(b.tenant, type);
    return `SELECT t.rowid AS res FROM search_text t WHERE t.search_text MATCH ${b.v(fts5Query(c, scope))} AND t.rowid NOT IN (SELECT x.res FROM search_text_stale x)` +
      ` UNION ALL SELECT p.res FROM search_text_recent p WHERE p.scope = ${b.v(scope)} AND ${recentMatch(b, 'p', c)}`;
  },
  has: (b, key, c) =>
    `(EXISTS (SELECT 1 FROM search_text t WHERE t.rowid = ${key} AND t.search_text MATCH ${b.v(fts5Query(c))}) AND ${key} NOT IN (SELECT x.res FROM search_text_stale x)` +
    ` OR EXISTS (SELECT 1 FROM search_text_recent p WHERE p.res = ${key} AND ${recentMatch(b, 'p', c)}))`,
  setWhenUndriven: true,
};

/** PostgreSQL: a tsquery of quoted lexemes, `:*` after a prefix, on the column's GIN index. */
const pgQuery = (c: TextCondition) => textExpression(c, (t) => `'${t.word}'${t.prefix ? ':*' : ''}`, ' & ', ' | ');

const POSTGRES_TEXT: Dialect['text'] = {
  // The scope's lexeme is in `content`: a narrative search ANDs the two columns' GIN scans.
  rows: (b, c, type) => {
    const scope = `'#${textScope(b.tenant, type)}'`;
    if (c.field === 'content') return `SELECT t.res FROM search_text t WHERE t.content @@ ${b.v(`${scope} & (${pgQuery(c)})`)}::tsquery`;
    return `SELECT t.res FROM search_text t WHERE t.narrative @@ ${b.v(pgQuery(c))}::tsquery AND t.content @@ ${b.v(scope)}::tsquery`;
  },
  has: (b, key, c) => {
    const body = `SELECT 1 AS hit FROM search_text t WHERE t.res = ${key} AND t.${c.field} @@ ${b.v(pgQuery(c))}::tsquery`;
    return b.correlation === 'lateral' ? b.lateral(body) : `EXISTS (${body})`;
  },
  setWhenUndriven: false,
};

/**
 * The planner's costs of a search's steps, in µs, as measured on a million resources (10,000
 * generated patients; 686,776 Observations): wideDriver weighs a driver with them.
 */
export interface PlanCosts {
  /** A resource read in order without a driver and rejected by probes (its row and index rows). */
  undrivenRow: number;
  /** The same when a set (a chain, `_has`, full text) rejects it. */
  undrivenSetRow: number;
  /** A row of a set the search reads (a chain's reference rows). */
  setRow: number;
  /** A driver row, with the probes of the other conditions. */
  driverRow: number;
  /** A match: its resource row read and sorted. */
  match: number;
  /** A resource of the type, read to find those without a parameter's rows (Dialect.missingRows). */
  missingRow: number;
  /**
   * An index row of a condition intersected as a set with a wide driver's rows (SearchPlan.intersect),
   * in place of the probes of every driver row; none: never (SQLite, whose intersections build a B-tree
   * of the set, measured level with its probes: docs/PERFORMANCE.md, twenty-ninth session).
   */
  intersectRow?: number;
}

/**
 * `values` as one PostgreSQL array literal of text (bound as a string and cast with `::text[]`): each
 * element quoted, with its `"` and `\` escaped, so that any text (commas, braces, spaces) is one element.
 */
export const textArray = (values: string[]): string => `{${values.map((v) => `"${v.replace(/["\\]/g, '\\$&')}"`).join(',')}}`;

export const SQLITE: Dialect = {
  rangeList: (b, ranges, j) => ({ from: `json_each(${b.v(JSON.stringify(ranges))}) ${j}`, low: `${j}.value ->> '$[0]'`, high: `${j}.value ->> '$[1]'` }),
  live: (a) => `${a}.deleted = 0`, placeholder: (n) => `?${n}`, probe: 'exists', driverJoin: 'CROSS JOIN',
  // CROSS JOIN keeps the driver first: each row's resource is read by its key.
  resourceOf: (pk, a = 'r') => `CROSS JOIN resources ${a} ON ${a}.pk = ${pk}`,
  // With the connections' 64 MB page cache: probes of rows in id order are random reads, 2 to 7 µs;
  // a set rejects a row on its key, 0.2 µs; a driver's rows come in key order, and the probes of
  // their neighbours share pages.
  costs: { undrivenRow: 1, undrivenSetRow: 0.2, setRow: 0.25, driverRow: 0.75, match: 1.1, missingRow: 0.2 },
  // A list subquery, run once per statement; the value-first index is probed once per key.
  keyIn: (k, keys) => `${k} IN (${keys})`,
  driven: (select, alias) => `(${select}) ${alias}`,
  drivenKeyed: (select, alias) => `(${select}) ${alias}`,
  // The type's rows from the (tenant, type) index and the parameter's from its value-first index, both
  // sorted and merged: 123-138 ms for 686,776 Observations, where NOT EXISTS probed each one (5.6 s).
  missingRows: (b, type, table, keys) =>
    `SELECT x.pk AS res FROM resources x WHERE x.tenant = ${b.v(b.tenant)} AND x.type = ${b.v(type)} EXCEPT SELECT s.res FROM ${table} s WHERE ${keys('s')}`,
  unindexed: (col) => `+${col}`,
  probedValue: (col) => `+${col}`,
  idIn: (b, col, ids, not) => `${col} ${not ? 'NOT IN' : 'IN'} (${ids.map((id) => b.v(id)).join(', ')})`,
  inSet: (col, set) => `${col} IN (${set})`,
  drivenChainTargets: false,
  // SQLite's own lower() changes ASCII letters alone (no ICU extension is loaded).
  foldAscii: (col) => `lower(${col})`,
  // The connection's `regexp` function (src/store/sqlite/db.ts), a JavaScript RegExp.
  matches: (col, pattern) => `${col} REGEXP ${pattern}`,
  plansLastUpdated: true,
  countProbesChains: true,
  rangesFirstRows: false,
  text: SQLITE_TEXT,
};

export const POSTGRES: Dialect = {
  // Two arrays unnested together, each element a range's end (the column's "C" collation compares them).
  rangeList: (b, ranges, j) => ({
    from: `unnest(${b.v(textArray(ranges.map((r) => r[0])))}::text[], ${b.v(textArray(ranges.map((r) => r[1])))}::text[]) AS ${j}(low, high)`,
    low: `${j}.low`, high: `${j}.high`,
  }),
  live: (a) => `NOT ${a}.deleted`, placeholder: (n) => `$${n}`, probe: 'lateral', driverJoin: 'JOIN',
  // Each row's resource by its key, in a lateral subquery the LIMIT keeps from being flattened: as a join, a
  // plan without statistics (a new database, a bulk import not yet analyzed) read the type's rows by (tenant,
  // type) for each of the driver's and tested the conditions on each pair: a later page of `Observation?
  // _sort=status` took 0.6-4.6 s among 389 Observations (its first key tested 83,425 times), 5-25 ms analyzed.
  resourceOf: (pk, a = 'r') => `CROSS JOIN LATERAL (SELECT * FROM resources ${a} WHERE ${a}.pk = ${pk} LIMIT 1) ${a}`,
  // A set is read whole and its resources joined, in place of reading the type in order; a driver
  // row is joined with its resource row before the other conditions' probes.
  // A set intersected with a driver's rows is hashed with them (0.38 µs a row, measured from 19,379 to
  // 80,295 rows: docs/PERFORMANCE.md, twenty-ninth session).
  costs: { undrivenRow: 6, undrivenSetRow: 0, setRow: 5.7, driverRow: 3.6, match: 1, missingRow: 0.9, intersectRow: 0.45 },
  // An array computed once (an InitPlan), so the value-first index reads `k = ANY(...)` whatever the
  // statistics. Found by res, `k + 0` keeps the planner from also reading the value-first index by
  // its key, which without statistics (after a bulk load) it thought selective: the index range of the
  // key (every row of the parameter), per row probed or sorted.
  keyIn: (k, keys, byRes) => `${byRes ? `${k} + 0` : k} = ANY(ARRAY(${keys}))`,
  // An array of the rows, which the planner takes for a few: it then reads each one's resource by its
  // key, as a driver is meant to be read. As a subquery, it was estimated from statistics that know
  // neither the key nor, for a range, the parameter (every parameter's dates and quantities share one
  // histogram): 423,877 rows expected for 21,127 of `value-quantity=gt150`, and each of the 686,776
  // Observations read in id order joined with all of them (39 s).
  driven: (select, alias) => `unnest(ARRAY(${select})) AS ${alias}(res)`,
  // Both columns aggregated in one pass (their orders agree), then unnested together, as `driven`.
  drivenKeyed: (select, alias) =>
    `(SELECT array_agg(${alias}_r.res) AS res, array_agg(${alias}_r.key) AS key FROM (${select}) ${alias}_r) ${alias}_a CROSS JOIN LATERAL unnest(${alias}_a.res, ${alias}_a.key) AS ${alias}(res, key)`,
  // Two scans, each of one index range (the type's resources by (tenant, type), the parameter's rows by
  // its keys), and their difference hashed or sorted: the same plan with statistics or without. As NOT
  // EXISTS, an anti-join the planner hashed or merged once it had statistics (587 ms for 686,776
  // Observations, EXCEPT 987 ms), but without them it took the type for a few rows and probed the
  // parameter's every row (its value-first index read by the key alone) for each resource:
  // `Condition?code:missing=true` took 9-24 s among 20,000 Conditions, now 70 ms (docs/PERFORMANCE.md,
  // forty-ninth session).
  missingRows: (b, type, table, keys) =>
    `SELECT x.pk AS res FROM resources x WHERE x.tenant = ${b.v(b.tenant)} AND x.type = ${b.v(type)} EXCEPT SELECT s.res FROM ${table} s WHERE ${keys('s')}`,
  unindexed: (col) => `(${col} + 0)`,
  probedValue: (col) => col,
  idIn: (b, col, ids, not) => `${not ? 'NOT ' : ''}${col} = ANY(${b.v(textArray(ids))}::text[])`,
  // A semi-join, hashed or merged with statistics (a chain's set, and any set without statistics, is written in POSTGRES_MISJUDGED).
  inSet: (col, set) => `${col} IN (${set})`,
  // An array computed once and unnested, which the planner takes for a few rows whatever the statistics: sorted, each
  // id's resource probed by its key until the page is full.
  hasIds: (set) => `(SELECT DISTINCT h.id FROM unnest(ARRAY(${set})) AS h(id))`,
  drivenChainTargets: false,
  // Each id one probe of the (tenant, type, id) key, the rows found then sorted (the LIMIT keeps the
  // lateral subquery from being flattened into a join, which the planner turned around without
  // statistics: the type walked, each row joined with every id). As a condition of `resources r`, a plan
  // generic or made without statistics walked the type's key range in id order for the ORDER BY and
  // tested every row against the list: 1,000 ids took 125-230 ms among 5,000 Binaries and 1.3-2.1 s among
  // 50,000 (docs/PERFORMANCE.md, forty-fifth session).
  byIds: (b, ids, from, where) => {
    const q = b.alias('ids');
    return `unnest(${b.v(textArray(ids))}::text[]) AS ${q}(id) CROSS JOIN LATERAL (SELECT r.* FROM ${from} WHERE ${where} AND r.id = ${q}.id LIMIT 1) r`;
  },
  // lower() follows the column's collation ("C": ASCII alone, but a newer provider may fold more); translate() does not.
  foldAscii: (col) => `translate(${col}, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')`,
  // An advanced regular expression: the patterns Cinder writes (urlNamingPattern) mean the same there.
  matches: (col, pattern) => `${col} ~ ${pattern}`,
  plansLastUpdated: false,
  countProbesChains: false,
  rangesFirstRows: true,
  text: POSTGRES_TEXT,
};

/**
 * POSTGRES for a search holding a chain, and for one with other sets (a `_has`, a compartment) whose type
 * PostgreSQL's statistics take for far fewer rows than it holds (none yet, or older than the type's
 * writes: the adapter's type sizes tell, src/store/postgres/resources.ts `dialectOf`). A `_has`'s set is
 * then a hashed subplan, run once and its values hashed, each resource tested against them: as a
 * semi-join, the planner took the resources for a row or so and ran the set again for each of them, its
 * reference rows hash-joined with a scan of all of `search_index` (`Patient?_has:Condition:
 * subject:code=..` among 20,000 Conditions never analysed: 300 Patients, the set run 300 times, 9.0 s;
 * hashed once, 20 ms, its reference rows probed by their `res`). A chain's set likewise: as a semi-join it
 * was run again for each resource read (`Condition?subject:Patient.gender=male&_count=10` among 20,000
 * Conditions never analysed, some with a contained Patient: the set run for each of 32 Conditions read in
 * id order, 4,401 reference rows each, 121 ms; hashed once, 25 ms). Statistics do not
 * make a chain's semi-join good: its keys are computed in the statement (`k = ANY(ARRAY(...))`), which they
 * do not describe, and analysed the planner still joined the set to every match and sorted them for each
 * page (docs/PERFORMANCE.md, fifty-fourth session).
 * The set is an array computed once (an InitPlan, as `driven` reads a driver's rows) and unnested: the
 * planner hashes a subplan only where it estimates its rows fit in the hash memory (`work_mem` ×
 * `hash_mem_multiplier`), and a set estimated from the statistics of another type (the referring type
 * analysed, the search's type misjudged) beyond that was a plain subplan, its rows materialised once and
 * scanned again for each resource read (20,000 Conditions analysed, then 3,000 Patients written, at
 * `work_mem = 64kB`: `Patient?_has:Condition:subject:clinical-status=active`'s 13,333 references scanned
 * for each of 114 Patients read, 244-328 ms; hashed, 72-146 ms: docs/PERFORMANCE.md, fifty-first
 * session, pg-sets). An unnested array is estimated at a few rows whatever it holds, so the subplan is
 * hashed; the hash table grows past `work_mem` as a hashed subplan's does (it never spills), holding what
 * the array holds.
 */
export const POSTGRES_MISJUDGED: Dialect = {
  ...POSTGRES, inSet: (col, set) => `(${col} IN (SELECT unnest(ARRAY(${set})))) IS TRUE`, drivenChainTargets: true,
  // Read without a driver, a set is built once and hashed (1.3 µs a row: a chain's 3,553 reference rows in
  // 4.2-4.7 ms), and the type is walked in id order, each resource probed and tested against the hash, as
  // one rejected by probes costs: not POSTGRES's set joined row by row to its resources. With POSTGRES's
  // costs, `Observation?patient.gender=female&status=final&_count=50` (3,553 of 6,923 Observations
  // referring to a female patient, 6,754 final) was driven by the chain's rows intersected with the
  // status's, every match read for each page (22-28 ms a page), where the walk finds a page within its
  // first 91 Observations (10-13 ms; docs/PERFORMANCE.md, fifty-third session).
  costs: { ...POSTGRES.costs, undrivenSetRow: POSTGRES.costs.undrivenRow, setRow: 1.3 },
};

/**
 * ORed terms at most this many to a parenthesised group: SQLite parses `a OR b OR ...` as a tree as
 * deep as its terms, and refuses one deeper than 1,000 (a date search of 1,000 values was a 500).
 */
const OR_GROUP = 64;

/** `parts` ORed ('1 = 0' for none), nested in groups of OR_GROUP so that the expression stays shallow. */
function orOf(parts: string[]): string {
  if (parts.length === 0) return '1 = 0';
  if (parts.length === 1) return parts[0]!;
  if (parts.length <= OR_GROUP) return `(${parts.join(' OR ')})`;
  const groups: string[] = [];
  for (let i = 0; i < parts.length; i += OR_GROUP) groups.push(orOf(parts.slice(i, i + OR_GROUP)));
  return orOf(groups);
}

/** The most statements one compound of UNION ALL holds (SQLite refuses more than 500). */
const MAX_COMPOUND = 400;

/**
 * Row statements (each selecting `res`) joined by UNION ALL; past MAX_COMPOUND statements in all (those
 * of compound rows counted), each is read as a subquery, in groups of MAX_COMPOUND read so in turn: a
 * `_filter` ORing 600 case-insensitive codes was a 500 on SQLite.
 */
function unionAll(b: SqlBuilder, rows: string[]): string {
  const joined = rows.join(' UNION ALL ');
  if (joined.split(' UNION ALL ').length <= MAX_COMPOUND) return joined;
  const each = (list: string[]) => list.map((r) => {
    const u = b.alias('u');
    return `SELECT ${u}.res FROM (${r}) ${u}`;
  });
  let level = each(rows);
  while (level.length > MAX_COMPOUND) {
    const groups: string[] = [];
    for (let i = 0; i < level.length; i += MAX_COMPOUND) groups.push(level.slice(i, i + MAX_COMPOUND).join(' UNION ALL '));
    level = each(groups);
  }
  return level.join(' UNION ALL ');
}

/** Upper bound of every string starting with a prefix (U+10FFFF sorts after any character, in UTF-8 bytes and in "C" collation). */
const AFTER_PREFIX = '\u{10FFFF}';

/** The fewest prefixes of a string condition joined as a list of ranges where the dialect does (Dialect.rangeList). */
const RANGES_JOINED_FROM = 8;

/** `s` with its ASCII letters, and those alone, in lower case: what Dialect.foldAscii computes in SQL. */
export function foldAscii(s: string): string {
  return /[A-Z]/.test(s) ? s.replace(/[A-Z]+/g, (m) => m.toLowerCase()) : s;
}

/**
 * The ranges [low, high] of the values that fold (foldAscii) to `folded`, narrowed by the case of its
 * first two ASCII letters (`fi` of `final`: `FI`, `Fi`, `fI`, `fi`): each from the rest in upper case to
 * the rest as it is, between which its every case variant sorts (upper case letters sort before lower
 * case ones, in UTF-8 bytes and in "C" collation). Without letters, one range of the value alone.
 */
export function foldedRanges(folded: string): [low: string, high: string][] {
  let heads = [''];
  let i = 0;
  for (let letters = 0; i < folded.length && letters < 2; i++) {
    const ch = folded[i]!;
    if (ch >= 'a' && ch <= 'z') {
      heads = heads.flatMap((h) => [h + ch.toUpperCase(), h + ch]);
      letters++;
    } else heads = heads.map((h) => h + ch);
  }
  const rest = folded.slice(i);
  const upper = rest.replace(/[a-z]+/g, (m) => m.toUpperCase());
  return heads.map((h) => [h + upper, h + rest]);
}

/** `LIKE` pattern text with its wildcards escaped (`ESCAPE '\'`). */
function likeEscape(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * How a condition on the outer resource row `r` reaches an index table: as a set (`pk IN`, for searches),
 * or a probe per row (`EXISTS`; or on PostgreSQL a `LEFT JOIN LATERAL ... LIMIT 1` that the planner must
 * run as a nested loop, which bulk export's page scans need: under an OR it may otherwise hash every
 * matching index row once per page). Conditions nested in chains and `_has` are always sets.
 */
export type Correlation = 'in' | 'exists' | 'lateral';

export class SqlBuilder {
  readonly values: SqlValue[] = [];
  /** `LEFT JOIN LATERAL` clauses the conditions need (correlation 'lateral'), for the FROM clause. */
  readonly laterals: string[] = [];
  private lateralCount = 0;
  private aliases = 0;

  /** `base`: how many values the statement has before this builder's (placeholders continue from there). */
  constructor(
    readonly dialect: Dialect,
    readonly tenant: string,
    readonly correlation: Correlation = 'in',
    readonly base = 0,
  ) {}

  /** Adds a value, returning its placeholder. */
  v(value: SqlValue): string {
    this.values.push(value);
    return this.dialect.placeholder(this.base + this.values.length);
  }

  alias(prefix: string): string {
    return `${prefix}${++this.aliases}`;
  }

  /**
   * `a.pk` is among the `res` of the rows of `table` meeting `where` (rendered on alias `s`; `byRes`
   * when the rows are probed by their `res`), which names their keys (keyIn).
   */
  private rowsOf(a: string, table: IndexTable, where: (s: string, byRes: boolean) => string, not = false): string {
    const key = this.probeKey(a);
    if (key !== undefined) {
      const s = this.alias('s');
      const body = `SELECT 1 AS hit FROM ${table} ${s} WHERE ${s}.res = ${key} AND ${where(s, true)}`;
      if (this.correlation === 'exists') return `${not ? 'NOT ' : ''}EXISTS (${body})`;
      return this.lateral(body, not);
    }
    // Negated, correlated: PostgreSQL plans NOT EXISTS as an anti-join, and NOT IN over a set larger
    // than its work memory as a scan of that set per row (a count of `Observation?patient:missing=true`
    // ran for more than 16 minutes on a million resources).
    if (not) {
      const s = this.alias('s');
      return `NOT EXISTS (SELECT 1 FROM ${table} ${s} WHERE ${s}.res = ${a}.pk AND ${where(s, true)})`;
    }
    return `${a}.pk IN (${this.select(table, where)})`;
  }

  /**
   * The key by which conditions on row `a` are probed (rowsOf), or undefined where they are sets: the
   * outer resource row `r`'s `pk`, the driver row's `res`, and those of the rows a `_has` probe adds.
   */
  private probeKey(a: string): string | undefined {
    if (this.correlation === 'in') return undefined;
    if (a === 'r') return 'r.pk';
    if (a === DRIVER_ROW) return `${DRIVER_ROW}.res`;
    return this.probedRows.get(a);
  }

  /**
   * The key of row `a` tested against a set (a chain's, a compartment's): its `pk`, or inside a `_has` probe the
   * reference row's `res` (onProbedRows), as a probed value: SQLite took the set for the values of the
   * `(k, value, res)` index's last column, probing it once per member for each reference row (5,934 probes a
   * Patient of `Patient?_has:Observation:subject:encounter.class=AMB`).
   */
  private setKey(a: string): string {
    const key = this.probedRows.get(a);
    return key === undefined || key === `${a}.pk` ? `${a}.pk` : this.dialect.probedValue(key);
  }

  /** Rows inside a `_has` probe, with the key by which their conditions are probed (probeKey). */
  private readonly probedRows = new Map<string, string>();
  /** Inside a `_has` probe: probes there are scalar subqueries (SqlBuilder.lateral), a lateral join having no place in a subquery. */
  private nested = 0;

  /**
   * `_has` on the outer resource row is probed (each resource read tests whether a referring resource
   * matches) rather than read as the set of the resources referred to: plannedSearch's first rows,
   * where a page of common matches is found among a few resources, and the set (every referring
   * resource's reference) would be large.
   */
  hasProbed = false;
  /**
   * A chain on the resource row (or the driver's row) is probed per row, its reference rows by their `res` and their
   * values tested against the targets (SqlBuilder.chainTarget), rather than a set of every referring resource: in a
   * sort walk's statements (searchSql with `driver: 'sort'`), which read a bounded window of the sort key's rows and
   * where no condition is small enough to drive (so neither is the chain's referring set), each statement built
   * that set again (`Observation?subject:Patient.gender=female&_sort=date`: every Observation of a female patient,
   * for every window and tie the walk read).
   */
  chainProbed = false;

  /** Full-text conditions as sets even where the others are probed (Dialect.text.setWhenUndriven). */
  textAsSet = false;
  /**
   * `_lastUpdated` tests on the outer resource rows are written unindexed (searchSql, a page read in id
   * order with no driver): its rows are then too many to drive (planSearch counted them), and SQLite,
   * planning without statistics, would read them all by the (tenant, type, last_updated) index and sort
   * them by id rather than read in id order until the page is full (781 ms against about 1 ms for
   * `Observation?_lastUpdated=gt2000-01-01&_count=10` on a million resources).
   */
  lastUpdatedUnindexed = false;

  /** `_text` / `_content` on row `a`: its words match, as a set or probed by the resource row (as rowsOf). */
  private text(a: string, c: TextCondition, type: string): string {
    const key = this.probeKey(a);
    if (key !== undefined && !this.textAsSet) return this.dialect.text.has(this, key, c);
    return `${key ?? `${a}.pk`} IN (${this.dialect.text.rows(this, c, type)})`;
  }

  /** The `res` of the rows of `table` meeting `where`, read by the value-first index. */
  private select(table: IndexTable, where: (s: string, byRes: boolean) => string, key?: string): string {
    const s = this.alias('s');
    return `SELECT ${s}.res${key === undefined ? '' : `, ${s}.${key} AS key`} FROM ${table} ${s} WHERE ${where(s, false)}`;
  }

  /**
   * Row `s` (of `table`)'s key is one of those of `type`'s `params` in the tenant, narrowed to the given
   * systems (a token's system, a reference's target type, a quantity's unit system) and unit code when
   * given. A key nobody has written does not exist, and then no row matches. When the parts name one
   * key and the dialect knows it (Dialect.knownKey), the row's key is compared with it directly: a
   * subquery of search_keys costs SQLite an ephemeral table per statement, about a quarter of a
   * patient-scoped search.
   */
  private keyIn(s: string, table: IndexTable, type: string, params: string[], byRes: boolean, narrow: { systems?: string[]; code?: string; fold?: boolean } = {}, valueEquals = false): string {
    const exact = this.dialect.knownKey && !narrow.fold && exactKey(this.tenant, table, type, params, narrow);
    const known = exact ? this.dialect.knownKey!(exact) : undefined;
    // Found by `res`, the key only filters the resource's rows (`+` keeps SQLite from using it in an
    // index) unless the value is compared with `=` too, which the value-first index (k, value, res)
    // answers exactly: compared with a constant alone, SQLite read that index for a prefix, a range or
    // a sort key, all of the key's rows for each resource (`Patient?_sort=family` 24 against 1.7 ms
    // on 1,000 Patients; the cost grows with their square).
    if (known !== undefined) return `${byRes && !valueEquals ? '+' : ''}${s}.k = ${this.v(known)}`;
    const k = this.alias('k');
    const where = [`${k}.tenant = ${this.v(this.tenant)}`, `${k}.type = ${this.v(type)}`, this.oneOf(`${k}.param`, params)];
    if (narrow.systems !== undefined) where.push(this.oneOf(narrow.fold ? this.dialect.foldAscii(`${k}.system`) : `${k}.system`, narrow.systems));
    if (narrow.code !== undefined) where.push(`${k}.code = ${this.v(narrow.code)}`);
    return this.dialect.keyIn(`${s}.k`, `SELECT ${k}.k FROM search_keys ${k} WHERE ${where.join(' AND ')}`, byRes);
  }

  /** `col` equals one of `values` (at least one). */
  private oneOf(col: string, values: string[]): string {
    const distinct = [...new Set(values)];
    return distinct.length === 1 ? `${col} = ${this.v(distinct[0]!)}` : `${col} IN (${distinct.map((x) => this.v(x)).join(', ')})`;
  }

  /** Row `s` (of `table`)'s key is one of `param`'s (narrowed as keyIn), and `test` holds (ANDed). */
  private keyed(s: string, table: IndexTable, type: string, param: string, byRes: boolean, test: string, narrow: { systems?: string[]; code?: string } = {}): string {
    return `${this.keyIn(s, table, type, [param], byRes, narrow)} AND ${test}`;
  }

  /**
   * The resource rows (`res`) a top-level condition selects, as a statement its value-first index answers
   * by a range (so that reading them first is cheap when they are few); undefined for a condition that
   * cannot drive a search (negations, `_has`, `_id`, `_lastUpdated` `ne`, string `:exact` and `:contains`, a
   * date or number test `ne`, an OR of which one alternative cannot). An OR's rows are its
   * alternatives' (UNION ALL: the driver's rows are DISTINCT). `:missing=true` has the type's resources
   * without the parameter's rows (Dialect.missingRows), `:not` those without rows of its values, last
   * resorts (lastResort).
   */
  driverRows(c: Condition, type: string, key?: string): string | undefined {
    if (!canDrive(c) && !isLastResort(c)) return undefined;
    if (key !== undefined && c.kind !== 'date') throw new Error(`a ${c.kind} condition's rows carry no sort key`);
    switch (c.kind) {
      case 'token':
        if (c.not) return this.dialect.missingRows(this, type, 'search_index', (s) => this.tokens(s, type, c, false));
        if (c.fold && !c.unequal) return this.foldedRows(type, c);
        return this.select('search_index', (s, byRes) => this.tokens(s, type, c, byRes));
      case 'uri-prefix':
        return this.select('search_index', (s, byRes) => this.keyed(s, 'search_index', type, c.param, byRes, this.any(c.values.map((v) => this.prefix(`${s}.value`, v)))));
      case 'string':
        if (this.dialect.rangeList && c.values.length >= RANGES_JOINED_FROM && c.values.every((v) => v.match === 'prefix')) return this.rangesJoined(type, c);
        return this.select('search_string', (s, byRes) => this.keyed(s, 'search_string', type, c.param, byRes, this.any(c.values.map((v) => this.stringTest(s, v)))));
      case 'date':
        return this.select('search_range', (s, byRes) => this.keyed(s, 'search_range', type, c.param, byRes, this.drivingRanges(s, c.tests.map((t) =>
          ({ bounds: dateBounds(t)!, test: (lo: string, hi: string) => this.date(lo, hi, t) }))), DATE_KEY), key);
      case 'composite':
        return this.select('search_composite', (s, byRes) => this.keyed(s, 'search_composite', type, c.param, byRes, this.composites(s, c.tests)));
      case 'near':
        return this.select('search_range', (s, byRes) => this.keyed(s, 'search_range', type, c.param, byRes, this.near(s, c.points), DATE_KEY));
      case 'chain':
        return this.select('search_index', (s) => this.chainTarget(s, type, c));
      case 'or':
        return unionAll(this, c.any.map((x) => this.driverRows(x, type)!));
      case 'missing':
        if (c.missing) return this.dialect.missingRows(this, type, c.table, (s) => this.missingKeys(s, type, c, false));
        return this.select(c.table, (s) => this.missingKeys(s, type, c, false));
      case 'number':
        return this.select('search_range', (s) => this.numbers(s, type, c.param, c.tests, false, true));
      case 'lastUpdated': {
        // The resource rows themselves, by the (tenant, type, last_updated) index.
        const lu = this.alias('lu');
        return `SELECT ${lu}.pk AS res FROM resources ${lu} WHERE ${lu}.tenant = ${this.v(this.tenant)} AND ${lu}.type = ${this.v(type)} ` +
          `AND ${this.dialect.live(lu)} AND ${this.any(c.tests.map((t) => this.instant(`${lu}.last_updated`, t)))}`;
      }
      case 'text':
        // The full-text rows of this tenant and type by their scope, checked against the resource rows
        // (a count must be exact, and a hash may collide).
        return `SELECT tx.res FROM (${this.dialect.text.rows(this, c, type)}) tx ${this.dialect.driverJoin} resources tr ON tr.pk = tx.res ` +
          `WHERE tr.tenant = ${this.v(this.tenant)} AND tr.type = ${this.v(type)} AND ${this.dialect.live('tr')}`;
      default:
        return undefined;
    }
  }

  /**
   * The rows of a string condition of prefixes (Dialect.rangeList) as a join on the list of their ranges, each an
   * index range of the parameter's key: a resource with values in several ranges comes once for each, as an `or`'s
   * alternatives do (a driver's rows are made DISTINCT where they drive).
   */
  private rangesJoined(type: string, c: Extract<Condition, { kind: 'string' }>): string {
    const s = this.alias('s');
    // Well-formed, as a bound value is: JSON's `\ud800` of a lone surrogate is read by json_each as bytes no stored value holds.
    const list = this.dialect.rangeList!(this, c.values.map((v) => [v.value.toWellFormed(), v.value.toWellFormed() + AFTER_PREFIX]), this.alias('j'));
    return `SELECT ${s}.res FROM ${list.from} CROSS JOIN search_string ${s} WHERE ${this.keyIn(s, 'search_string', type, [c.param], false)} ` +
      `AND ${s}.value >= ${list.low} AND ${s}.value < ${list.high}`;
  }

  /**
   * `SELECT ... AS n`: how many resources the rows of a condition that can drive a search name. Rows
   * of one key with one value are one per resource (each table's key is (res, k, value)), so those of
   * a token of one code are counted as rows: a DISTINCT count took SQLite 4.7 times as long (6,634
   * rows, 1.95 against 0.42 ms). `system|code` names one key; a code alone has a key per system
   * written, so whether it has one is read in the same statement (the same snapshot as the rows).
   */
  countResources(c: Condition, type: string): string {
    // One row per resource.
    if (c.kind === 'lastUpdated') return `SELECT COUNT(*) AS n FROM (${this.driverRows(c, type)}) d`;
    const distinct = () => `SELECT COUNT(DISTINCT d.res) AS n FROM (${this.driverRows(c, type)}) d`;
    // Folded, one resource may have several rows of one value (`ABC` and `abc`).
    if (c.kind !== 'token' || c.not || c.fold || c.values.length !== 1 || c.values[0]!.value === undefined) return distinct();
    const rows = `SELECT COUNT(*) AS n FROM (${this.driverRows(c, type)}) d`;
    if (c.values[0]!.system !== undefined) return rows;
    const k = this.alias('k');
    const keys = `SELECT COUNT(*) FROM search_keys ${k} WHERE ${k}.tenant = ${this.v(this.tenant)} AND ${k}.type = ${this.v(type)} AND ${k}.param = ${this.v(c.param)}`;
    return `SELECT CASE WHEN (${keys}) <= 1 THEN (${rows}) ELSE (${distinct()}) END AS n`;
  }

  /** A chain's reference rows (of `type`; `byRes`: probed by their `res`) point at targets meeting the rest of the chain. */
  private chainTarget(s: string, type: string, c: Condition & { kind: 'chain' }, byRes = false): string {
    if (c.canonical) return this.canonicalChain(s, type, c);
    const r = this.alias('r');
    const driver = this.dialect.drivenChainTargets ? c.where.findIndex(canDrive) : -1;
    if (driver >= 0) {
      // The driver's rows, each one's resource by its key, the other conditions tested on it.
      const d = this.alias('d');
      const rows = this.driverRows(c.where[driver]!, c.targetType)!;
      const inner = [`${r}.tenant = ${this.v(this.tenant)}`, `${r}.type = ${this.v(c.targetType)}`, this.dialect.live(r), ...c.where.filter((_, i) => i !== driver).map((w) => this.condition(w, r, c.targetType))];
      const key = this.keyIn(s, 'search_index', type, [c.param], byRes, { systems: [c.targetType] });
      // Each row's resource read by its key (Dialect.resourceOf): joined, PostgreSQL took the misjudged target
      // type for a row or a few and read the condition's rows again for each target resource.
      return `${key} AND ${this.targetIds(`${s}.value`, `SELECT ${r}.id FROM (${rows}) ${d} ${this.dialect.resourceOf(`${d}.res`, r)} WHERE ${inner.join(' AND ')}`, byRes)}`;
    }
    const inner = [`${r}.tenant = ${this.v(this.tenant)}`, `${r}.type = ${this.v(c.targetType)}`, this.dialect.live(r), ...c.where.map((w) => this.condition(w, r, c.targetType))];
    const key = this.keyIn(s, 'search_index', type, [c.param], byRes, { systems: [c.targetType] });
    return `${key} AND ${this.targetIds(`${s}.value`, `SELECT ${r}.id FROM resources ${r} WHERE ${inner.join(' AND ')}`, byRes)}`;
  }

  /**
   * `value` among a chain's target ids: inside the set, a semi-join; probed per row (chainProbed), a set of the dialect
   * (Dialect.inSet), which PostgreSQL builds once per statement (an array hashed), where as a semi-join inside each
   * row's lateral probe it looked the targets up again for every row (4 to 8 times the set's time).
   */
  private targetIds(value: string, ids: string, byRes: boolean): string {
    return byRes ? this.dialect.inSet(value, ids) : `${value} IN (${ids})`;
  }

  /**
   * A canonical chain's rows (of `type`, system ''): their value is the `url` of a target meeting the
   * rest of the chain, or its `url|version` (src/fhir/search-canonical.ts), and is no `url` row beside
   * a `url|...` one (canonicalRow).
   */
  private canonicalChain(s: string, type: string, c: Condition & { kind: 'chain' }): string {
    // A target's `url|version` is its row of VERSIONED_URL_PARAM, bounded as a reference's row is.
    const targets = (versioned: boolean) => {
      const r = this.alias('r');
      const u = this.alias('u');
      const where = [
        `${r}.tenant = ${this.v(this.tenant)}`, `${r}.type = ${this.v(c.targetType)}`, this.dialect.live(r),
        this.keyIn(u, 'search_index', c.targetType, [versioned ? VERSIONED_URL_PARAM : 'url'], true, { systems: [''] }),
        ...c.where.map((w) => this.condition(w, r, c.targetType)),
      ];
      return `SELECT ${u}.value FROM resources ${r} JOIN search_index ${u} ON ${u}.res = ${r}.pk WHERE ${where.join(' AND ')}`;
    };
    const key = this.keyIn(s, 'search_index', type, [c.param], false, { systems: [''] });
    return `${key} AND ${s}.value IN (${targets(false)} UNION ALL ${targets(true)}) AND ${this.canonicalRow(s)}`;
  }

  /**
   * Reference row `s` of system '' names what its value says: a versioned canonical `url|v` is indexed
   * with its `url` alone too, so a `url` row beside a `url|...` row of its key is that reference's and
   * names no other version (namedCanonicals in src/fhir/search-canonical.ts).
   */
  private canonicalRow(s: string): string {
    const w = this.alias('s');
    return `NOT EXISTS (SELECT 1 FROM search_index ${w} WHERE ${w}.res = ${s}.res AND ${w}.k = ${s}.k AND ${w}.value >= ${s}.value || '|' AND ${w}.value < ${s}.value || '}')`;
  }

  /**
   * The resources of `type` whose `url`, or `url|version`, is among the canonicals `named` selects
   * (a canonical `_has`), as res.
   */
  private canonicalsNamed(type: string, named: () => string): string {
    const u = this.alias('u');
    const w = this.alias('u');
    const key = (alias: string, param: string) => this.keyIn(alias, 'search_index', type, [param], false, { systems: [''] });
    return `SELECT ${u}.res FROM search_index ${u} WHERE ${key(u, 'url')} AND ${u}.value IN (${named()}) UNION ALL ` +
      `SELECT ${w}.res FROM search_index ${w} WHERE ${key(w, VERSIONED_URL_PARAM)} AND ${w}.value IN (${named()})`;
  }

  /**
   * Adds `LEFT JOIN LATERAL (<body> LIMIT 1) mN ON true`; returns the condition that it found a row (or none).
   * Inside a `_has` probe, the same probe as a scalar subquery, `(<body> LIMIT 1) IS NOT NULL`: as an
   * `EXISTS`, PostgreSQL pulled it up into a semi-join, and without statistics (the condition's rows taken
   * for a few) read them all once and compared each reference row with every one of them
   * (`Patient?_has:Condition:subject:clinical-status=resolved&_count=10` among 20,000 Conditions never
   * analysed: 1,216 reference rows × 6,612 status rows, 726 ms). A scalar subquery is never made a join:
   * each row probes the condition's rows by its key.
   */
  lateral(body: string, not = false): string {
    if (this.nested > 0) return `(${body} LIMIT 1) IS ${not ? '' : 'NOT '}NULL`;
    const m = `m${this.lateralCount++}`;
    this.laterals.push(`LEFT JOIN LATERAL (${body} LIMIT 1) ${m} ON true`);
    return `${m}.hit IS ${not ? '' : 'NOT '}NULL`;
  }

  /**
   * Token condition `c` on `search_index` rows `s`: a row matching one of its values (tokenValues), with
   * `canonical` one naming what it says (canonicalRow), or with `unequal` a row of the parameter (of its
   * `systems`) matching none of them.
   */
  private tokens(s: string, type: string, c: TokenCondition, byRes: boolean): string {
    if (c.canonical) return `${this.tokenValues(s, type, c, byRes)} AND ${this.canonicalRow(s)}`;
    if (!c.unequal) return this.tokenValues(s, type, c, byRes);
    const rows = this.keyIn(s, 'search_index', type, [c.param], byRes, c.systems ? { systems: c.systems } : {});
    // A reference's canonical URL without a version is equal to its versions (`url|1.0`) too; on PostgreSQL a
    // version of a url past the bound is a row of its bounded start beside the url's marker (boundedVersions).
    const versions = !c.reference ? [] : c.values.filter((v) => v.system === '' && v.value !== undefined).flatMap((v) => {
      const prefix = this.prefix(`${s}.value`, `${v.value}|`);
      const bounded = boundedVersions(v.value!);
      if (bounded === undefined) return [prefix];
      const w = this.alias('s');
      return [prefix, `(${this.prefix(`${s}.value`, bounded.start)} AND EXISTS (SELECT 1 FROM search_index ${w} WHERE ${w}.res = ${s}.res AND ${w}.k = ${s}.k AND ${w}.value = ${this.v(bounded.marker)}))`];
    });
    return `${rows} AND NOT ${this.any([this.tokenValues(s, type, c, byRes), ...versions])}`;
  }

  /**
   * The rows of a folded token condition (`_filter`'s case-insensitive `eq`), one statement per range
   * of each value (foldedRanges) joined by UNION ALL: the ranges are disjoint, and ORed in one
   * statement SQLite merged them through a set of row ids (a candidate count of 2,001 `active`
   * Conditions of a million resources: 2.4 ms against 0.17 ms).
   */
  private foldedRows(type: string, c: TokenCondition): string {
    const keys = (s: string, system: string | undefined) => this.keyIn(s, 'search_index', type, [c.param], false, system === undefined ? {} : { systems: [system], fold: true }, true);
    if (c.values.some((v) => v.system === undefined && v.value === undefined)) return this.select('search_index', (s) => this.keyIn(s, 'search_index', type, [c.param], false));
    return unionAll(this, c.values.flatMap((v) => {
      if (v.value === undefined) return [this.select('search_index', (s) => this.keyIn(s, 'search_index', type, [c.param], false, { systems: [v.system!], fold: true }))];
      return foldedRanges(v.value).map(([low, high]) => this.select('search_index', (s) => low === high
        ? `${keys(s, v.system)} AND ${s}.value = ${this.v(low)}`
        : `${keys(s, v.system)} AND ${s}.value >= ${this.v(low)} AND ${s}.value <= ${this.v(high)} AND ${this.dialect.foldAscii(`${s}.value`)} = ${this.v(v.value!)}`));
    }));
  }

  /**
   * Token values (ORed) on `search_index` rows `s` of `c.param`, whose keys hold the system: one term per
   * system (its keys, and its values IN a list, one range of the value-first index per value), one for
   * the values without a system (every key of the parameter), one for the systems without a value.
   * Folded (`c.fold`), a system is compared folded, and a value by foldedRanges of the index, then folded.
   */
  private tokenValues(s: string, type: string, c: TokenCondition, byRes: boolean): string {
    const { param, values } = c;
    const fold = c.fold === true;
    if (values.some((v) => v.system === undefined && v.value === undefined)) return this.keyIn(s, 'search_index', type, [param], byRes);
    const systemsOnly: string[] = [];
    const bySystem = new Map<string | undefined, string[]>();
    for (const v of values) {
      if (v.value === undefined) systemsOnly.push(v.system!);
      else (bySystem.get(v.system) ?? bySystem.set(v.system, []).get(v.system)!).push(v.value);
    }
    const keys = (system: string | undefined) => this.keyIn(s, 'search_index', type, [param], byRes, system === undefined ? {} : { systems: [system], fold }, true);
    const terms = [...bySystem].flatMap(([system, codes]) => {
      // Probed by the resource, several codes are tested on its rows of the key (Dialect.probedValue).
      if (!fold) return [`(${keys(system)} AND ${this.oneOf(byRes && codes.length > 1 ? this.dialect.probedValue(`${s}.value`) : `${s}.value`, codes)})`];
      // Probed by the resource, its rows of the parameter are few: their values folded, one term.
      if (byRes) return [`(${keys(system)} AND ${this.oneOf(this.dialect.foldAscii(`${s}.value`), codes)})`];
      return codes.flatMap((code) => foldedRanges(code).map(([low, high]) => low === high
        ? `(${keys(system)} AND ${s}.value = ${this.v(low)})`
        : `(${keys(system)} AND ${s}.value >= ${this.v(low)} AND ${s}.value <= ${this.v(high)} AND ${this.dialect.foldAscii(`${s}.value`)} = ${this.v(code)})`));
    });
    if (systemsOnly.length) terms.push(this.keyIn(s, 'search_index', type, [param], byRes, { systems: systemsOnly, fold }));
    return this.any(terms);
  }

  /** A token value on the columns `system` and `value` of a composite row `s`. */
  private token(s: string, v: TokenValue, system: string, value: string): string {
    if (v.system === undefined) return v.value === undefined ? '1 = 1' : `${s}.${value} = ${this.v(v.value)}`;
    if (v.value === undefined) return `${s}.${system} = ${this.v(v.system)}`;
    return `(${s}.${value} = ${this.v(v.value)} AND ${s}.${system} = ${this.v(v.system)})`;
  }

  /**
   * `near` points (ORed) on a position row `s` (low: latitude, high: longitude; src/fhir/near.ts): within
   * the box around a point's circle (its latitude band read by the `(k, low)` index) and within the
   * circle by the haversine term, which both databases compute as the in-memory matcher does.
   */
  private near(s: string, points: NearPoint[]): string {
    return this.any(points.map((p) => {
      const bound = nearBound(p);
      if (bound === undefined) return '1 = 1';
      const box = nearBox(p);
      const terms = [`${s}.low >= ${this.v(box.latitude[0])}`, `${s}.low <= ${this.v(box.latitude[1])}`];
      if (box.longitudes) terms.push(this.any(box.longitudes.map(([west, east]) => `(${s}.high >= ${this.v(west)} AND ${s}.high <= ${this.v(east)})`)));
      const cosine = Math.cos((p.latitude * Math.PI) / 180);
      terms.push(`power(sin(radians(${s}.low - ${this.v(p.latitude)}) / 2), 2) + ${this.v(cosine)} * cos(radians(${s}.low)) * ` +
        `power(sin(radians(${s}.high - ${this.v(p.longitude)}) / 2), 2) <= ${this.v(bound)}`);
      return `(${terms.join(' AND ')})`;
    }));
  }

  /** Composite tests (ORed) on a composite row `s`. */
  private composites(s: string, tests: CompositeTest[]): string {
    return this.any(tests.map((t) => {
      const parts = [this.token(s, { system: t.system1, value: t.value1 }, 'system1', 'value1'), ...t.parts.map((p) => this.compositePart(s, p))];
      return `(${parts.join(' AND ')})`;
    }));
  }

  /**
   * Row `s` is one `:missing` condition `c` counts: of its parameters (and systems, when given), or of
   * system '' with a value matching one of its `urls` (Dialect.matches). With `urls`, the rows are read
   * by the keys of both (one list, as without: an OR of two lists made SQLite read each row's key range
   * by a MULTI-INDEX OR, not by the value-first index alone), and those of system '' tested.
   */
  private missingKeys(s: string, type: string, c: MissingCondition, byRes: boolean): string {
    if (!c.urls?.length || c.systems === undefined) return this.keyIn(s, c.table, type, c.params, byRes, { systems: c.systems });
    const either = this.keyIn(s, c.table, type, c.params, byRes, { systems: [...c.systems, ''] });
    const url = this.any(c.urls.map((u) => this.dialect.matches(`${s}.value`, this.v(u))));
    return `${either} AND (${this.keyIn(s, c.table, type, c.params, true, { systems: c.systems })} OR ${url})`;
  }

  private any(parts: string[]): string {
    return orOf(parts);
  }

  /** A date test on stored [lo, hi) (search.html 3.1.1.4.1, both sides ranges). */
  date(lo: string, hi: string, t: DateTest): string {
    const ql = () => this.v(t.low);
    const qh = () => this.v(t.high);
    switch (t.op) {
      case 'eq': return `(${lo} >= ${ql()} AND ${hi} <= ${qh()})`;
      case 'ne': return `(${lo} < ${ql()} OR ${hi} > ${qh()})`;
      case 'gt': return `${hi} > ${qh()}`;
      case 'lt': return `${lo} < ${ql()}`;
      case 'ge': return `(${hi} > ${qh()} OR (${lo} >= ${ql()} AND ${hi} <= ${qh()}))`;
      case 'le': return `(${lo} < ${ql()} OR (${lo} >= ${ql()} AND ${hi} <= ${qh()}))`;
      case 'sa': return `${lo} >= ${qh()}`;
      case 'eb': return `${hi} <= ${ql()}`;
      case 'ap': return `(${lo} < ${qh()} AND ${hi} > ${ql()})`;
      case 'co': return `(${lo} <= ${ql()} AND ${hi} >= ${qh()})`;
    }
  }

  /**
   * A number test on stored [lo, hi] (a point: lo = hi): `eq`, `ne` and `ap` by the search value's
   * precision range [low, high) (`ap` widened), the others by the value itself (search.html, number:
   * with "lt, ge, le, sa & eb ... the implicit precision of the number is ignored"): `sa` / `eb` the
   * stored range wholly above or below it.
   */
  number(lo: string, hi: string, t: NumberTest): string {
    switch (t.op) {
      case 'eq': return `(${lo} >= ${this.v(t.low)} AND ${hi} < ${this.v(t.high)})`;
      case 'ne': return `(${lo} < ${this.v(t.low)} OR ${hi} >= ${this.v(t.high)})`;
      case 'gt': return `${hi} > ${this.v(t.value)}`;
      case 'sa': return `${lo} > ${this.v(t.value)}`;
      case 'ge': return `${hi} >= ${this.v(t.value)}`;
      case 'lt': return `${lo} < ${this.v(t.value)}`;
      case 'eb': return `${hi} < ${this.v(t.value)}`;
      case 'le': return `${lo} <= ${this.v(t.value)}`;
      case 'ap': return `(${hi} >= ${this.v(t.low)} AND ${lo} < ${this.v(t.high)})`;
    }
  }

  /** A quantity's unit on the columns `system` and `code` of a composite row `s` ('' when the test names none). */
  private unit(s: string, t: NumberTest, system: string, code: string): string {
    const parts: string[] = [];
    if (t.system !== undefined) parts.push(`${s}.${system} = ${this.v(t.system)}`);
    if (t.code !== undefined) parts.push(`${s}.${code} = ${this.v(t.code)}`);
    return parts.join(' AND ');
  }

  /**
   * Number and quantity tests (ORed) on `search_range` rows `s` of `param`, whose keys hold the unit:
   * a test naming a unit reads the keys of that unit, the others every key of the parameter.
   */
  private numbers(s: string, type: string, param: string, tests: NumberTest[], byRes: boolean, driving = false): string {
    const united = (t: NumberTest) => t.system !== undefined || t.code !== undefined;
    const ranged = (t: NumberTest) => ({ bounds: numberBounds(t)!, test: (lo: string, hi: string) => this.number(lo, hi, t) });
    const test = (t: NumberTest) => (driving ? this.drivingRange(s, ranged(t)) : this.number(`${s}.low`, `${s}.high`, t));
    if (!tests.some(united)) {
      return this.keyed(s, 'search_range', type, param, byRes, driving ? this.drivingRanges(s, tests.map(ranged)) : this.any(tests.map(test)));
    }
    return this.any(tests.map((t) => {
      const narrow = united(t) ? { ...(t.system !== undefined && { systems: [t.system] }), ...(t.code !== undefined && { code: t.code }) } : {};
      return `(${this.keyIn(s, 'search_range', type, [param], byRes, narrow)} AND ${test(t)})`;
    }));
  }

  /**
   * A date or number test on `search_range` rows `s` that drive a search: the bounds on the stored
   * end that `bounds` names, which its value-first index reads by, and the test itself, whose other
   * end is unindexed (Dialect.unindexed).
   */
  private drivingRange(s: string, { bounds, test }: RangedTest): string {
    return `(${[...bounds.bounds.map(([op, value]) => `${s}.${bounds.end} ${op} ${this.v(value)}`), this.rangeTest(s, bounds.end, test)].join(' AND ')})`;
  }

  /** `test` on row `s`'s low and high ends, the one not `end` unindexed (Dialect.unindexed). */
  private rangeTest(s: string, end: 'low' | 'high', test: RangedTest['test']): string {
    const col = (e: 'low' | 'high') => (e === end ? `${s}.${e}` : this.dialect.unindexed(`${s}.${e}`));
    return test(col('low'), col('high'));
  }

  /**
   * Driving tests ORed (drivingRange). When each bounds the same end on the same side, once (`gt`
   * and `ge`, or `lt` and `le`, with any values), their loosest bound is written once, before the
   * tests ORed: one range of the index. Written per test, PostgreSQL read
   * `value-quantity=gt190,gt150` by every row of the range table's `res` index instead (1.8 million).
   */
  private drivingRanges(s: string, tests: RangedTest[]): string {
    const [first] = tests;
    const side = (op: string) => op[0];
    const shared = tests.length > 1 && tests.every(({ bounds }) => bounds.end === first!.bounds.end && bounds.bounds.length === 1 &&
      side(bounds.bounds[0]![0]) === side(first!.bounds.bounds[0]![0]));
    if (!shared) return this.any(tests.map((t) => this.drivingRange(s, t)));
    const end = first!.bounds.end;
    const above = side(first!.bounds.bounds[0]![0]) === '>';
    // The loosest: the least lower bound (the greatest upper one), inclusive where a tie allows.
    const [op, value] = tests.map(({ bounds }) => bounds.bounds[0]!).reduce((a, b) =>
      (a[1] === b[1] ? (a[0].length > b[0].length ? a : b) : (a[1] < b[1]) === above ? a : b));
    return `(${s}.${end} ${op} ${this.v(value)} AND ${this.any(tests.map(({ test }) => this.rangeTest(s, end, test)))})`;
  }

  private prefix(col: string, value: string): string {
    return `(${col} >= ${this.v(value)} AND ${col} < ${this.v(value + AFTER_PREFIX)})`;
  }

  private compositePart(s: string, p: CompositePart): string {
    switch (p.kind) {
      case 'token': return this.token(s, p, 'system2', 'value2');
      case 'string': return this.prefix(`${s}.value2`, p.value);
      case 'date': return this.date(`${s}.low`, `${s}.high`, p.test);
      case 'number': {
        const lo = p.column === 'high' ? `${s}.high` : `${s}.low`;
        const hi = p.column === 'low' ? `${s}.low` : `${s}.high`;
        const unit = this.unit(s, p.test, 'system2', 'value2');
        const test = this.number(lo, hi, p.test);
        return unit ? `(${test} AND ${unit})` : test;
      }
    }
  }

  /** One condition on resource rows aliased `a` of `type`. */
  condition(c: Condition, a: string, type: string): string {
    switch (c.kind) {
      case 'id':
        if (c.ids.length === 0) return c.not ? '1 = 1' : '1 = 0';
        return this.dialect.idIn(this, `${a}.id`, c.ids, c.not === true);
      case 'lastUpdated': {
        const col = `${a}.last_updated`;
        return this.any(c.tests.map((t) => this.instant(a === 'r' && this.lastUpdatedUnindexed ? this.dialect.unindexed(col) : col, t)));
      }
      case 'token':
        return this.rowsOf(a, 'search_index', (s, byRes) => this.tokens(s, type, c, byRes), c.not);
      case 'token-text':
        return this.rowsOf(a, 'search_index', (s, byRes) =>
          this.keyed(s, 'search_index', type, c.param, byRes, this.any(c.values.map((v) => `${s}.display LIKE ${this.v(`%${likeEscape(v)}%`)} ESCAPE '\\'`))));
      case 'uri-prefix':
        return this.rowsOf(a, 'search_index', (s, byRes) => this.keyed(s, 'search_index', type, c.param, byRes, this.any(c.values.map((v) => this.prefix(`${s}.value`, v)))));
      case 'string':
        return this.rowsOf(a, 'search_string', (s, byRes) => this.keyed(s, 'search_string', type, c.param, byRes, this.any(c.values.map((v) => this.stringTest(s, v)))));
      case 'date':
        return this.rowsOf(a, 'search_range', (s, byRes) => this.keyed(s, 'search_range', type, c.param, byRes, this.any(c.tests.map((t) => this.date(`${s}.low`, `${s}.high`, t))), DATE_KEY));
      case 'number':
        return this.rowsOf(a, 'search_range', (s, byRes) => this.numbers(s, type, c.param, c.tests, byRes));
      case 'composite':
        return this.rowsOf(a, 'search_composite', (s, byRes) => this.keyed(s, 'search_composite', type, c.param, byRes, this.composites(s, c.tests)));
      case 'near':
        return this.rowsOf(a, 'search_range', (s, byRes) => this.keyed(s, 'search_range', type, c.param, byRes, this.near(s, c.points), DATE_KEY));
      case 'missing':
        return this.rowsOf(a, c.table, (s, byRes) => this.missingKeys(s, type, c, byRes), c.missing);
      case 'text':
        return this.text(a, c, type);
      case 'chain':
        // A sort walk's bounded window: each row's reference rows probed (chainProbed), the targets one set.
        if (!c.canonical && this.probesChains(a)) {
          return this.rowsOf(a, 'search_index', (s, byRes) => this.chainTarget(s, type, c, byRes));
        }
        // Otherwise a set: probed per row, SQLite would look the targets up again for every row. Its rows' `res`
        // (live versions' alone), so a `_has` probe tests it on the reference row's (onProbedRows).
        return this.dialect.inSet(this.setKey(a), this.select('search_index', (s) => this.chainTarget(s, type, c)));
      case 'compartment':
        // A set, hashed where the statistics misjudge the type (POSTGRES_MISJUDGED): as a semi-join, PostgreSQL
        // read the patient's rows again for each resource (`r.pk IN` among 20,000 Conditions never analysed:
        // 67 rows for each of 2,820 read in id order, 163 ms by EXPLAIN ANALYZE).
        return this.dialect.inSet(this.setKey(a), compartmentRows(this, type, c.patient));
      case 'has':
        // A canonical `_has` names the resources by their `url` and `version`, never probed.
        if (c.canonical) return `${a}.pk IN (${this.canonicalsNamed(type, () => this.referring(c, type))})`;
        if (this.hasProbed && this.probeKey(a) !== undefined && a !== DRIVER_ROW) return this.hasProbe(c, a, type);
        return this.dialect.inSet(`${a}.id`, this.referring(c, type));
      case 'or':
        // A chain or the same on contained resources' rows: one set, as the chain alone is (the
        // contained resources' rows probed for each resource row the chain's set rejected took SQLite
        // 1.6-1.9 × the time of the chain alone).
        // In a sort walk's window (chainProbed), each alternative probed on the row instead.
        if (c.contained !== undefined && canDrive(c) && !this.probesChains(a)) return this.dialect.inSet(this.setKey(a), this.driverRows(c, type)!);
        return this.any(c.any.map((x) => this.condition(x, a, type)));
      case 'not':
        return `NOT (${this.condition(c.condition, a, type)})`;
      case 'and':
        return c.all.length === 0 ? '1 = 1' : `(${c.all.map((x) => this.condition(x, a, type)).join(' AND ')})`;
    }
  }

  /** The distinct ids a `_has` names (referring), as the FROM item `h` that a page in id order reads first (Dialect.hasIds). */
  hasIdRows(c: Extract<Condition, { kind: 'has' }>, type: string): string {
    return this.dialect.hasIds!(this.referring(c, type));
  }

  /** Whether a chain on row `a` is probed per row (chainProbed): the resource row's, or the driver row's. */
  private probesChains(a: string): boolean {
    return this.chainProbed && (a === 'r' || a === DRIVER_ROW) && this.probeKey(a) !== undefined;
  }

  /**
   * The values of the reference rows by which the resources of a `_has` refer to resources of `type`:
   * their ids, or with `canonical` the canonicals they name (canonicalRow).
   */
  private referring(c: Extract<Condition, { kind: 'has' }>, type: string): string {
    const r = this.alias('r');
    const s = this.alias('s');
    const reference = (byRes: boolean) => c.canonical
      ? `${this.keyIn(s, 'search_index', c.type, [c.param], byRes, { systems: [''] })} AND ${this.canonicalRow(s)}`
      : this.keyIn(s, 'search_index', c.type, [c.param], byRes, { systems: [type] });
    // Planned, the referring resources are read from one of their own conditions' index rows
    // first (their reference rows then by the res-first key): read the other way, every reference
    // of the type would be probed.
    const driver = this.correlation === 'in' ? -1 : c.where.findIndex(canDrive);
    if (driver >= 0) {
      const d = this.alias('d');
      const rows = this.driverRows(c.where[driver]!, c.type)!;
      const rest = c.where.filter((_, i) => i !== driver);
      // The driver's rows alone: index rows exist for current, live versions only (writers remove
      // them on update and delete), and the IN ignores repeats, so neither the referring resources'
      // rows nor a DISTINCT are needed (on SQLite they were more than half of the statement).
      if (rest.length === 0) return `SELECT ${s}.value FROM (${rows}) ${d} ${this.dialect.driverJoin} search_index ${s} ON ${s}.res = ${d}.res WHERE ${reference(true)}`;
      const inner = [reference(true), this.dialect.live(r), ...rest.map((w) => this.condition(w, r, c.type))];
      return `SELECT ${s}.value FROM (SELECT DISTINCT ${d}.res FROM (${rows}) ${d}) ${d} ${this.dialect.driverJoin} search_index ${s} ON ${s}.res = ${d}.res JOIN resources ${r} ON ${r}.pk = ${d}.res WHERE ${inner.join(' AND ')}`;
    }
    const inner = [reference(false), this.dialect.live(r), ...c.where.map((w) => this.condition(w, r, c.type))];
    return `SELECT ${s}.value FROM search_index ${s} JOIN resources ${r} ON ${r}.pk = ${s}.res WHERE ${inner.join(' AND ')}`;
  }

  /**
   * `_has` probed on resource row `a` (SqlBuilder.hasProbed): some reference of the parameter to it is
   * from a resource meeting the conditions. The reference rows are read by the value-first index, and
   * the conditions probe each by its `res` (index rows exist for current, live versions only, so the
   * referring resource's own row is read only where a condition needs it: `_id`, `_lastUpdated`, a
   * nested `_has`; a chain's or a compartment's set is of index rows' `res`, tested on the reference row's).
   */
  private hasProbe(c: Extract<Condition, { kind: 'has' }>, a: string, type: string): string {
    const s = this.alias('s');
    const reference = `${this.keyIn(s, 'search_index', c.type, [c.param], false, { systems: [type] })} AND ${s}.value = ${a}.id`;
    let body: string;
    this.nested++;
    try {
      if (c.where.every(onProbedRows)) {
        this.probedRows.set(s, `${s}.res`);
        const tests = c.where.map((w) => this.condition(w, s, c.type));
        body = `SELECT 1 AS hit FROM search_index ${s} WHERE ${[reference, ...tests].join(' AND ')}`;
      } else {
        const r = this.alias('r');
        this.probedRows.set(r, `${r}.pk`);
        const tests = c.where.map((w) => this.condition(w, r, c.type));
        body = `SELECT 1 AS hit FROM search_index ${s} ${this.dialect.driverJoin} resources ${r} ON ${r}.pk = ${s}.res WHERE ${[reference, this.dialect.live(r), ...tests].join(' AND ')}`;
      }
    } finally {
      this.nested--;
    }
    // PostgreSQL's lateral join keeps the probe a nested loop: as an EXISTS, it hashed every row of the
    // referring resources' condition (a sequential scan, 430 ms, for a page of Patients with a Condition).
    return this.correlation === 'lateral' ? this.lateral(body) : `EXISTS (${body})`;
  }

  /** A string value on a `search_string` row `s` (SqlBuilder.prefix for starts-with; LIKE for the others, wildcards escaped). */
  private stringTest(s: string, v: StringValue): string {
    switch (v.match) {
      case 'prefix': return this.prefix(`${s}.value`, v.value);
      case 'equal': return `${s}.value = ${this.v(v.value)}`;
      case 'exact': return `${s}.exact = ${this.v(v.value)}`;
      case 'contains': return `${s}.value LIKE ${this.v(`%${likeEscape(v.value)}%`)} ESCAPE '\\'`;
      case 'suffix': return `${s}.value LIKE ${this.v(`%${likeEscape(v.value)}`)} ESCAPE '\\'`;
      // Code point order: SQLite compares text as UTF-8 bytes, PostgreSQL in the columns' "C" collation.
      case 'unequal': return `${s}.value <> ${this.v(v.value)}`;
      case 'gt': return `${s}.value > ${this.v(v.value)}`;
      case 'ge': return `${s}.value >= ${this.v(v.value)}`;
      case 'lt': return `${s}.value < ${this.v(v.value)}`;
      case 'le': return `${s}.value <= ${this.v(v.value)}`;
    }
  }

  /** A `_lastUpdated` test on an instant column (a point [t, t + 1 ms)). */
  instant(col: string, t: DateTest): string {
    switch (t.op) {
      case 'eq': return `(${col} >= ${this.v(t.low)} AND ${col} < ${this.v(t.high)})`;
      case 'ne': return `(${col} < ${this.v(t.low)} OR ${col} >= ${this.v(t.high)})`;
      case 'gt': case 'sa': return `${col} >= ${this.v(t.high)}`;
      case 'ge': return `${col} >= ${this.v(t.low)}`;
      case 'lt': case 'eb': return `${col} < ${this.v(t.low)}`;
      case 'le': return `${col} < ${this.v(t.high)}`;
      case 'ap': return `(${col} >= ${this.v(t.low)} AND ${col} < ${this.v(t.high)})`;
      // The instant's own millisecond holds the value's range.
      case 'co': return `(${col} <= ${this.v(t.low)} AND ${col} >= ${this.v(t.high - 1)})`;
    }
  }

  /** A sort key on row `a` of `type`: its expression and what follows it in ORDER BY (direction, NULLS LAST). */
  sortKey(k: SortKey, a: string, type: string, pk = `${a}.pk`): [expr: string, order: string] {
    const dir = k.descending ? ' DESC' : '';
    if (k.by === 'id') return [`${a}.id`, dir];
    if (k.by === 'lastUpdated') return [`${a}.last_updated`, dir];
    const fn = k.descending ? 'MAX' : 'MIN';
    const s = this.alias('s');
    const narrow = k.target === undefined ? {} : { systems: [k.target] };
    return [`(SELECT ${fn}(${s}.${sortColumn(k)}) FROM ${k.table} ${s} WHERE ${s}.res = ${pk} AND ${this.keyIn(s, k.table, type, [k.param], true, narrow)})`, `${dir} NULLS LAST`];
  }

  /**
   * The `res` of the rows of sort key `k`'s parameter in `range` (in the sort's order), by the
   * value-first index on the key and the sorted column: a sort walk's driver (plannedSearch). Each
   * resource whose key is at or before the range's end has a row there.
   */
  sortRows(k: ParamSortKey, range: SortRange): string {
    const col = sortColumn(k);
    const [first, last] = k.descending ? ['<=', range.before ? '>' : '>='] : ['>=', range.before ? '<' : '<='];
    return this.select(k.table, (s) => [
      `${s}.k IN (${range.keys.map((key) => this.v(key)).join(', ')})`,
      ...(range.from === null ? [] : [`${s}.${col} ${first} ${this.v(range.from)}`]),
      ...(range.to === null ? [] : [`${s}.${col} ${last} ${this.v(range.to)}`]),
    ].join(' AND '));
  }
}

type ParamSortKey = SortKey & { by: 'param' };

/**
 * The column a sort on a parameter orders its table's rows by, which the table's value-first index
 * holds after the key: a range's low end ascending (its key is the least), its high end descending.
 */
function sortColumn(k: ParamSortKey): string {
  if (k.table === 'search_range') return k.descending ? 'high' : 'low';
  return k.table === 'search_composite' ? 'value1' : 'value';
}

/** A date's range rows (and a position's) have neither unit system nor code: their one key per parameter has both ''. */
const DATE_KEY = { systems: [''], code: '' };

/** How many entry fields each table's keys hold after the parameter (IndexTableSpec.key). */
const KEY_FIELDS = new Map(INDEX_TABLES.map((t) => [t.table, t.key.length]));

/** The one key that `params` narrowed so names (one parameter, each key field given once), else undefined. */
function exactKey(tenant: string, table: IndexTable, type: string, params: string[], narrow: { systems?: string[]; code?: string }): SearchKey | undefined {
  const fields = KEY_FIELDS.get(table)!;
  if (params.length !== 1) return undefined;
  if (fields === 0) return narrow.systems === undefined && narrow.code === undefined ? { tenant, type, param: params[0]!, system: '', code: '' } : undefined;
  if (narrow.systems?.length !== 1) return undefined;
  if (fields === 1) return narrow.code === undefined ? { tenant, type, param: params[0]!, system: narrow.systems[0]!, code: '' } : undefined;
  return narrow.code === undefined ? undefined : { tenant, type, param: params[0]!, system: narrow.systems[0]!, code: narrow.code };
}

/**
 * `:missing=true`, and a token's `:not`: their rows (Dialect.missingRows: the type's resources without
 * the parameter's rows, or without those of the values) cost a read of every resource of the type, so
 * they are no candidates (planSearch counts none of them), and drive only a search that would
 * otherwise read more of the type in order (lastResort).
 */
const isLastResort = (c: Condition): boolean => (c.kind === 'missing' && c.missing) || (c.kind === 'token' && c.not === true);

/**
 * `plan` where it has no driver, and `q` has a top-level `:missing=true` or `:not` condition: that condition
 * drives instead when reading its rows costs less than reading in order until the page is full: for a
 * count or a sort on a parameter, every resource; for a page, at the matches' rate among the first
 * resources read (`tried`), and every resource when they held none (a wrong guess there costs a read
 * of every resource with its probes, 5.6 s for 686,776 Observations, against 0.14 s for the rows).
 */
export async function lastResort(plan: SearchPlan, q: SearchQuery, context: PlanContext, tried?: { hits: number; rows: number }): Promise<SearchPlan> {
  const at = (q.where ?? []).findIndex(isLastResort);
  if (plan.driver !== undefined || at < 0) return plan;
  const { need, costs } = context;
  if (Number.isFinite(need) && tried && tried.hits > 0) {
    const size = await context.typeSize();
    if (size * costs.missingRow >= Math.min(size, (need * tried.rows) / tried.hits) * costs.undrivenRow) return plan;
  }
  return { driver: at };
}

/** Whether a condition was added by withImpliedDrivers (tested only where it drives). */
const isImplied = (c: Condition): boolean => c.kind === 'or' && c.implied === true;

/** Which conjunct of an `and` drivingPart takes: codes first (references, then tokens), or ranges and strings first. */
type Preference = 'codes' | 'ranges';

/**
 * A condition implied by `c` that can drive a search where `c` cannot, or undefined: `c` itself when it
 * can; of an `and`, one conjunct's, by `prefer`; of an `or`, each alternative's, ORed (`_filter`'s
 * `(code eq a and value-quantity gt 5) or (code eq b and ...)` gives `code` a or b, or the two
 * `value-quantity` tests).
 */
function drivingPart(c: Condition, prefer: Preference): Condition | undefined {
  if (canDrive(c)) return c;
  if (c.kind === 'and') {
    const parts = c.all.map((x) => drivingPart(x, prefer)).filter((x): x is Condition => x !== undefined);
    const codes = parts.find(isReference) ?? parts.find((x) => x.kind === 'token');
    return prefer === 'codes' ? codes ?? parts[0] : parts.find((x) => x.kind !== 'token') ?? codes;
  }
  if (c.kind === 'or' && c.any.length > 0) {
    const parts = c.any.map((x) => drivingPart(x, prefer));
    return parts.every((x) => x !== undefined) ? { kind: 'or', any: parts as Condition[] } : undefined;
  }
  return undefined;
}

/**
 * The conditions with, after them, conditions implied by each `or` that cannot drive but holds
 * alternatives that can be read by their index rows (drivingPart, codes first and ranges first when
 * they differ): ANDed, they change no answer, and the planner, counting them as it counts any
 * candidate, may read the fewest rows instead of every resource of the type, testing the `or` on those
 * (a million resources, an `or` of two `and`s with no match: 5-11 s read in order).
 */
export function withImpliedDrivers(where: Condition[]): Condition[] {
  const implied: Condition[] = [];
  for (const c of where) {
    if (c.kind !== 'or' || canDrive(c)) continue;
    const codes = drivingPart(c, 'codes');
    const ranges = drivingPart(c, 'ranges');
    const mark = (x: Condition): Condition => (x.kind === 'or' ? { ...x, implied: true } : x);
    if (codes) implied.push(mark(codes));
    if (ranges && JSON.stringify(ranges) !== JSON.stringify(codes)) implied.push(mark(ranges));
  }
  return implied.length ? [...where, ...implied] : where;
}

/** A condition no resource meets (an `or` of no alternatives: `1 = 0`). */
export const NOTHING: Condition = { kind: 'or', any: [] };

/** Whether `q` has a condition no resource meets (withoutAbsentKeys), so that it selects nothing. */
export function selectsNothing(q: SearchQuery): boolean {
  return (q.where ?? []).some((c) => c.kind === 'or' && c.any.length === 0);
}

/**
 * The keys of a `containedKeys` statement (`param LIKE '%:Type._id'`, whose `_` matches any character)
 * whose parameter ends in exactly `:<type>._id`.
 */
export function onlyContainedKeys<K extends { param: string }>(keys: K[], type: string): K[] {
  const suffix = `:${type}._id`;
  return keys.filter((k) => k.param.endsWith(suffix));
}

/**
 * `q` without what the rows of search keys that do not exist would be read for. A key exists once a
 * resource of its type has had a row of it (keys are never removed), so where `exists(type, param,
 * system)` says one does not: a `_has` whose referring type never referred to the searched type through
 * its parameter, or a chain whose type never referred to its target type so, selects nothing (NOTHING;
 * its statement read every row of the referring resources' own condition: `Observation?_has:Observation:
 * has-member:category=vital-signs` with no `has-member` reference, 46 ms on SQLite and 330 ms on
 * PostgreSQL on a million resources); and an alternative on contained resources' rows (Condition `or`'s
 * `contained`) whose id rows' key does not exist is dropped (the chain's statements as they were before
 * chains reached into contained resources, which the alternative cost 1.2-1.4 × their time on SQLite).
 */
export async function withoutAbsentKeys(q: SearchQuery, exists: (type: string, param: string, system: string) => boolean | Promise<boolean>): Promise<SearchQuery> {
  let changed = false;
  const prune = async (c: Condition, type: string): Promise<Condition> => {
    switch (c.kind) {
      case 'or': {
        if (c.contained !== undefined && !(await exists(type, c.contained, ''))) {
          changed = true;
          return prune(c.any[0]!, type);
        }
        // An alternative that selects nothing is dropped, so that the others can drive (canDrive).
        const any: Condition[] = [];
        for (const x of c.any) {
          const kept = await prune(x, type);
          if (kept.kind === 'or' && kept.any.length === 0) changed = true;
          else any.push(kept);
        }
        return { ...c, any };
      }
      case 'and': {
        const all: Condition[] = [];
        for (const x of c.all) all.push(await prune(x, type));
        return { ...c, all };
      }
      case 'not': return { ...c, condition: await prune(c.condition, type) };
      case 'chain': case 'has': {
        // The reference rows: of the searched type to the target (a chain), of the referring type to the searched one (`_has`).
        // Canonical references are rows of system ''.
        const key = c.kind === 'chain' ? await exists(type, c.param, c.canonical ? '' : c.targetType) : await exists(c.type, c.param, c.canonical ? '' : type);
        if (!key) {
          changed = true;
          return NOTHING;
        }
        const inner = c.kind === 'chain' ? c.targetType : c.type;
        const where: Condition[] = [];
        for (const x of c.where) where.push(await prune(x, inner));
        return { ...c, where };
      }
      default: return c;
    }
  };
  if (!(q.where ?? []).some(readsKeys)) return q;
  const where: Condition[] = [];
  for (const c of q.where!) where.push(await prune(c, q.type));
  return changed ? { ...q, where } : q;
}

/** Whether `c` or a condition it nests is a chain, a `_has` or an alternative on contained resources (withoutAbsentKeys). */
function readsKeys(c: Condition): boolean {
  switch (c.kind) {
    case 'or': return c.contained !== undefined || c.any.some(readsKeys);
    case 'and': return c.all.some(readsKeys);
    case 'not': return readsKeys(c.condition);
    case 'chain': case 'has': return true;
    default: return false;
  }
}

/** Whether a condition's rows can be read by a range of its value-first index (SqlBuilder.driverRows). */
function canDrive(c: Condition): boolean {
  switch (c.kind) {
    // `unequal` reads every row of the parameter but those of its values.
    case 'token': return !c.not && !c.unequal;
    case 'uri-prefix': case 'chain': case 'text': return true;
    // A range of the (tenant, type, last_updated) index (`ne` would be two).
    case 'lastUpdated': return c.tests.every((t) => t.op !== 'ne');
    // `:exact` compares a column that no index leads with; `:contains` and ends-with read every row.
    case 'string': return c.values.every((v) => v.match === 'prefix' || v.match === 'equal');
    case 'date': return c.tests.every((t) => dateBounds(t) !== undefined);
    case 'number': return c.tests.every((t) => numberBounds(t) !== undefined);
    case 'composite': return c.tests.every((t) => t.value1 !== undefined);
    // A latitude band of the `(k, low)` index.
    case 'near': return true;
    // Alternatives that can each drive: their rows together (`combo-code`, a union of `code` and
    // `component-code`).
    case 'or': return c.any.length > 0 && c.any.every(canDrive);
    // `:missing=false`: every row of the parameters' keys (few where the element is rare).
    case 'missing': return !c.missing;
    default: return false;
  }
}

/**
 * The end of a stored range that one of `search_range`'s value-first indexes, (k, low) or (k, high),
 * reads a driving test's rows by, and bounds on it that the test implies: redundant with the test, but
 * answerable by the index.
 */
interface RangeBounds {
  end: 'low' | 'high';
  bounds: [op: string, value: number][];
}

/** A driving date or number test: its bounds, and the test on given columns (low, high). */
interface RangedTest {
  bounds: RangeBounds;
  test: (lo: string, hi: string) => string;
}

/**
 * A number test's bounds on a stored [lo, hi] (SqlBuilder.number; lo <= hi): on the low end where the
 * test bounds it (`eb`'s hi < value bounds lo too), else on the high end (`gt`, `ge`); none for `ne`,
 * which a range of neither index answers.
 */
function numberBounds(t: NumberTest): RangeBounds | undefined {
  switch (t.op) {
    case 'eq': return { end: 'low', bounds: [['>=', t.low], ['<', t.high]] };
    case 'lt': case 'eb': return { end: 'low', bounds: [['<', t.value]] };
    case 'le': return { end: 'low', bounds: [['<=', t.value]] };
    case 'ap': return { end: 'low', bounds: [['<', t.high]] };
    case 'sa': return { end: 'low', bounds: [['>', t.value]] };
    case 'gt': return { end: 'high', bounds: [['>', t.value]] };
    case 'ge': return { end: 'high', bounds: [['>=', t.value]] };
    default: return undefined;
  }
}

/**
 * A date test's bounds on a stored range [lo, hi) (SqlBuilder.date; lo < hi): on the low end where the
 * test bounds it, else on the high end (`gt`; `ge`, whose matches end after the value's start); none
 * for `ne`.
 */
function dateBounds(t: DateTest): RangeBounds | undefined {
  switch (t.op) {
    case 'eq': return { end: 'low', bounds: [['>=', t.low], ['<', t.high]] };
    case 'lt': case 'eb': return { end: 'low', bounds: [['<', t.low]] };
    case 'le': case 'ap': return { end: 'low', bounds: [['<', t.high]] };
    case 'sa': return { end: 'low', bounds: [['>=', t.high]] };
    case 'co': return { end: 'low', bounds: [['<=', t.low]] };
    case 'gt': return { end: 'high', bounds: [['>', t.high]] };
    case 'ge': return { end: 'high', bounds: [['>', t.low]] };
    default: return undefined;
  }
}

/** Whether the sort pages by keyset (`_id` or `_lastUpdated`, alone) rather than by offset. */
export function keysetSort(sort: SortKey[]): SortKey | undefined {
  if (sort.length === 0) return { by: 'id', descending: false };
  const [k] = sort;
  if (sort.length === 1 && k!.by !== 'param') return k;
  if (sort.length === 2 && k!.by === 'lastUpdated' && sort[1]!.by === 'id' && sort[1]!.descending === k!.descending) return k;
  return undefined;
}

/**
 * How to run a search. Without a plan, every condition is a set (`pk IN (...)`) and the database's
 * planner decides. With one (both adapters plan their searches: SQLite has no statistics of the index
 * tables and would read every set in full), `driver` names the condition of `where` (by position), or
 * the compartment, or the first sort key's rows up to a bound (`'sort'`), whose index rows are read
 * first; the resources they name are then checked against the other conditions one by one (probes by
 * the tables' `res`-first keys). With no driver, the type's resources are read in the sort order and
 * probed, which stops after one page when matches are common.
 */
export interface SearchPlan {
  driver?: number | 'compartment' | 'sort';
  /**
   * With a numbered driver, the condition whose index rows are intersected with the driver's as a set
   * (wideDriver), instead of being probed for each driver row.
   */
  intersect?: number;
  /** With `driver: 'sort'` (a sort walk: plannedSearch), the range of the first sort key's rows that drive. */
  sortRange?: SortRange;
  /** Sort keys whose value each resource must have (tiesPage): a probe of its key per resource. */
  tied?: TiedKey[];
  /** With a lone candidate as the driver (planSearch), its rows as counted: all of them. */
  rows?: number;
}

/**
 * The rows of a sort key's parameter, of its keys `keys`, from the first value in the sort's order
 * (`from`) to `to` (null: to the last). `from` bounds nothing (no row comes before it), and the keys
 * are those the statement would look up, but PostgreSQL estimates the rows of a range from its
 * statistics, which know neither otherwise: reading the first 38 dates of a million range rows (one
 * histogram mixes every parameter's dates and quantities) it expected 142,288 rows, and joined them
 * to every Observation by a hash (1.07 s, against 1.6 ms with both).
 */
export interface SortRange {
  keys: number[];
  from: SqlValue | null;
  to: SqlValue | null;
  /** The rows before `to` alone (crossingTies: its ties are read apart). */
  before?: boolean;
}

/** The alias of a planned search's driver rows (their `res`); no other alias is unnumbered. */
const DRIVER_ROW = 'd';

/** Index rows a driver may have at most without a closer look (planSearch's wide drivers may have more). */
export const DRIVER_MAX_ROWS = 2000;

/** A candidate with at most this many rows is taken without counting the others (reading it is cheap). */
export const DRIVER_TAKE_AT = 200;

/** Index rows a wide driver may have at most (wideDriver): they bound its cost. */
export const DRIVER_WIDE_MAX_ROWS = 100_000;

/** The resources of the type, first in id order, that a narrowed search tests to estimate its matches. */
export const PLAN_SAMPLE_ROWS = 100;

/** The resources plannedSearch reads first without a driver (at least; twice the page when larger). */
export const PLAN_TRY_ROWS = 500;

/**
 * The plan for `q` from its candidates (driverCandidates), counted one after another by `count`. First
 * each is counted up to DRIVER_TAKE_AT + 1 rows, and the first with at most DRIVER_TAKE_AT is taken at
 * once: a selective condition behind an unselective one (`category=laboratory&code=..`) then costs
 * the unselective one a read of 201 index rows, not 2,001 (and a reference to a resource, counted
 * first, costs it nothing). Only when none is that small are they counted up to DRIVER_MAX_ROWS + 1,
 * and the one with the fewest rows drives. A lone candidate is counted once, up to DRIVER_MAX_ROWS + 1.
 * When none has at most DRIVER_MAX_ROWS, a `context` lets a larger one drive where that costs less
 * (wideDriver). With `most` = DRIVER_TAKE_AT (plannedSearch, where reading in order first costs less
 * than any larger driver), only the first counts are made.
 */
export async function planSearch(
  candidates: DriverCandidate[], count: SearchRunner<unknown>['count'], context?: PlanContext,
  most: typeof DRIVER_MAX_ROWS | typeof DRIVER_TAKE_AT = DRIVER_MAX_ROWS,
): Promise<SearchPlan> {
  const counted = (c: DriverCandidate, limit: number) => {
    const { sql, values, form } = c.count(limit);
    return count(sql, values, form);
  };
  if (candidates.length === 0) return {};
  // One candidate is counted once, up to `most` + 1: there is no other to prefer.
  if (candidates.length === 1) {
    const rows = await counted(candidates[0]!, most + 1);
    if (rows <= most) return { driver: candidates[0]!.driver, rows };
    return context ? wideDriver(candidates, count, context) : {};
  }
  for (const c of candidates) {
    if ((await counted(c, DRIVER_TAKE_AT + 1)) <= DRIVER_TAKE_AT) return { driver: c.driver };
  }
  if (most === DRIVER_TAKE_AT) return {};
  let best: { driver: number | 'compartment'; n: number } | undefined;
  for (const c of candidates) {
    const n = await counted(c, DRIVER_MAX_ROWS + 1);
    if (n <= DRIVER_MAX_ROWS && (best === undefined || n < best.n)) best = { driver: c.driver, n };
  }
  if (best) return { driver: best.driver };
  return context ? wideDriver(candidates, count, context) : {};
}

/** What planSearch needs, besides the candidates, to weigh a driver of more than DRIVER_MAX_ROWS rows. */
export interface PlanContext {
  /**
   * The matches the statement reads: for a page in id or `_lastUpdated` order its offset, its count and
   * one more (the next page's test); every match (Infinity) for a count or a sort on a parameter.
   */
  need: number;
  /** Whether other conditions than the driver narrow its rows (several conditions, or one and a compartment). */
  narrowed: boolean;
  /** The dialect's (Dialect.costs). */
  costs: PlanCosts;
  /** The resources of the type (an estimate: TypeSizes): what a search without a driver reads at most. */
  typeSize(): number | Promise<number>;
  /**
   * The statement counting the matches among the type's first `rows` resources in id order, of the
   * conditions tested by probes (DriverCandidate.sampled); sets (chains, `_has`, full text) are left
   * out, as reading one costs as much as the search.
   */
  sample(rows: number): { sql: string; values: SqlValue[] };
  /**
   * The condition that the sample tests, when it tests one alone (no compartment) and its index rows can
   * be read as a set: what a wide driver may intersect (SearchPlan.intersect), its rows estimated by the
   * sample.
   */
  lone?: number;
  /**
   * The two conditions that the sample tests, when it tests two (no compartment) and each one's index rows
   * can be read as a set: when one drives wide, the other may be intersected (SearchPlan.intersect) where
   * its rows, counted, cost less so than probing each driver row (a date range's `ge` and `lt`, each of
   * tens of thousands of rows).
   */
  pair?: readonly [number, number];
}

/**
 * A search that every candidate drives with more than DRIVER_MAX_ROWS rows is read without a driver:
 * the type in sort order, each resource probed, which finds a page of `need` matches after about
 * `need × size / matches` resources, and reads all of them for a count, a sort on a parameter, or
 * conditions no resource meets together. One of up to DRIVER_WIDE_MAX_ROWS rows may cost less: the
 * Observations of the 170 patients named Smith (11,685) with a code a tenth of them have; a category
 * and a code that no Observation has together (6.5 s for 686,776 Observations on SQLite, 44 ms driven
 * by the code's 80,295 rows). The matches are estimated from the first resources of the type: those
 * plannedSearch read (`tried`, every condition tested), or else a sample (PlanContext.sample) and
 * the counts of the conditions left out of it, taken as independent. A candidate is counted only up
 * to the rows at which it would cost more than reading in order. Where the sample tests one condition
 * alone (PlanContext.lone) and another drives, that condition's rows are intersected with the driver's
 * as a set where, counted or else estimated by the sample, they cost less so (PlanCosts.intersectRow)
 * than probing each driver row for it: the Smiths' 11,685 Observations with a vital sign's
 * code, of 19,379-80,295 rows, in 15-43 ms instead of 31-71 on PostgreSQL.
 */
async function wideDriver(
  candidates: DriverCandidate[], count: SearchRunner<unknown>['count'], context: PlanContext,
  tried?: { hits: number; rows: number },
): Promise<SearchPlan> {
  const counted = (c: DriverCandidate, limit: number) => {
    const { sql, values, form } = c.count(limit + 1);
    return count(sql, values, form);
  };
  const { need, costs } = context;
  // Rows counted, by candidate: in full, or at least so many (past the count's limit).
  const exact = new Map<number | 'compartment', number>();
  const atLeast = new Map<number | 'compartment', number>();
  /** The condition that may be intersected with `driver`'s rows: `context.lone`, or the other of `context.pair`. */
  const other = (driver: number | 'compartment'): number | undefined => {
    if (context.lone !== undefined) return driver === context.lone ? undefined : context.lone;
    const pair = context.pair;
    return pair === undefined || !pair.includes(driver as number) ? undefined : pair[0] === driver ? pair[1] : pair[0];
  };
  /** Driving by `driver`'s `n` rows, with other(driver)'s rows intersected where `m`, their count or estimate, makes that cheaper. */
  const plan = (driver: number | 'compartment', n: number, m: number | undefined): SearchPlan => {
    const set = other(driver);
    if (costs.intersectRow === undefined || set === undefined || m === undefined) return { driver };
    return m * costs.intersectRow < n * costs.driverRow ? { driver, intersect: set } : { driver };
  };
  // A lone condition of more than DRIVER_MAX_ROWS rows: reading in order finds its page after about
  // need × size / rows resources, which a driver beats only by a little and for a few more rows
  // than DRIVER_MAX_ROWS (about 2,200 for a page of 50 among 686,776 resources), not worth a count.
  if (Number.isFinite(need) && !context.narrowed) return {};
  const size = await context.typeSize();
  let best: { driver: number | 'compartment'; n: number } | undefined;
  const consider = (c: DriverCandidate, n: number, limit: number) => {
    (n <= limit ? exact : atLeast).set(c.driver, n);
    if (n <= limit && (best === undefined || n < best.n)) best = { driver: c.driver, n };
  };
  // Every match is read either way: the driver's rows cost against the type's resources.
  const widest = Math.min(DRIVER_WIDE_MAX_ROWS, Math.floor((size * costs.undrivenRow) / costs.driverRow));
  if (widest <= DRIVER_MAX_ROWS) return {};
  if (!Number.isFinite(need)) {
    for (const c of candidates) consider(c, await counted(c, widest), widest);
    if (best === undefined) return {};
    const counting: { driver: number | 'compartment'; n: number } = best;
    const set = other(counting.driver);
    return plan(counting.driver, counting.n, set === undefined ? undefined : exact.get(set));
  }
  // No match among the first rows: a tenth of one (conditions that no resource meets together are
  // common, and reading in order then reads every resource).
  const share = (hits: number, rows: number) => (hits > 0 ? hits : 0.1) / Math.max(rows, 1);
  let matches: number;
  // Of the conditions tried or sampled, each has at least the matches of all of them together.
  let floor: number;
  // Rows of the sets that reading in order reads (the chains counted), and what it then costs a resource.
  let setRows = 0;
  let perResource = costs.undrivenRow;
  if (tried) matches = floor = size * share(tried.hits, tried.rows);
  else {
    // The conditions left out of the sample narrow its matches by their share of the type.
    let narrowing = 1;
    for (const c of candidates.filter((c) => !c.sampled)) {
      const n = await counted(c, widest);
      narrowing *= Math.min(n, size) / Math.max(size, 1);
      setRows += n;
      consider(c, n, widest);
    }
    perResource = costs.undrivenSetRow;
    const rows = Math.min(PLAN_SAMPLE_ROWS, size);
    // The sample tests the conditions that probes test (no sets): a plain form.
    const { sql, values } = context.sample(rows);
    floor = size * share(await count(sql, values, 'plain'), rows);
    matches = floor * narrowing;
  }
  const undriven = Math.min(size, (need * size) / matches) * perResource + costs.setRow * setRows + costs.match * Math.min(matches, need);
  /** Driving by `n` rows, of which `matches` match. */
  const driven = (n: number) => costs.driverRow * n + costs.match * Math.min(matches, n);
  // A candidate is counted up to the rows at which it would cost as much as reading in order.
  const limit = Math.min(widest, Math.floor((undriven - costs.match * matches) / costs.driverRow));
  for (const c of candidates.filter((c) => tried || c.sampled)) {
    if (limit <= DRIVER_MAX_ROWS || (best !== undefined && floor >= best.n)) break;
    consider(c, await counted(c, limit), limit);
  }
  if (best === undefined) return {};
  const chosen: { driver: number | 'compartment'; n: number } = best;
  if (driven(chosen.n) >= undriven) return {};
  // The lone condition's rows: counted, or else the sample's estimate (which tested it alone), no fewer
  // than a count that stopped at its limit; the other of a pair's: counted.
  const set = other(chosen.driver);
  const estimate = (c: number) => (tried || c !== context.lone ? undefined : Math.max(floor, atLeast.get(c) ?? 0));
  const m = set === undefined ? undefined : exact.get(set) ?? estimate(set);
  return plan(chosen.driver, chosen.n, m);
}

/**
 * What a statement's form says of its plan (SearchRunner.rows):
 * - `fixed`: the form sets the plan (a driver's rows read first, each probed; a sort key's index
 *   walked) whatever the values, so a database may keep a plan of it. PostgreSQL prepares it: parsed
 *   once per connection, run without the round trip that first describes an unprepared statement's
 *   parameters, and planned generically where PostgreSQL finds that as cheap (`Patient?name=smi` 0.63 ×,
 *   a patient's active Conditions 0.81 × the time on a million resources).
 * - `plain`: fixed, and every condition is an index range read by its keys or probed by its resource
 *   (no chain, `_has` or full-text set inside, whose plans depend on their values' rows), or the
 *   resources are selected by their ids alone (byIds), or read undriven in a keyset order with every
 *   condition so probed (inOrderForm), or counted on one such condition's index rows (countForm): one
 *   generic plan serves every value. PostgreSQL runs it so, where it would otherwise plan it anew on
 *   each run, its estimate of the generic plan being above that of the values' own (docs/PERFORMANCE.md,
 *   twenty-eighth and twenty-ninth sessions).
 * Without either the statement is left to the database's plan of its values (an undriven search's
 * sets, a count of intersected sets).
 */
export type StatementForm = 'fixed' | 'plain';

/** How an adapter runs plannedSearch's statements. */
export interface SearchRunner<R> {
  /** A count of a planner's (planSearch), `plain` where it reads a condition of that form (StatementForm). */
  count(sql: string, values: SqlValue[], form?: StatementForm): number | Promise<number>;
  /**
   * A count that only steers the plan (the candidates' counts of planSearch and wideDriver, wideDriver's sample,
   * probesHas), never what the search answers: the adapter may answer it with a count of the same statement made
   * a moment before. Absent: `count`.
   */
  planCount?(sql: string, values: SqlValue[], form?: StatementForm): number | Promise<number>;
  rows(sql: string, values: SqlValue[], form?: StatementForm): R[] | Promise<R[]>;
}

/** Whether a condition reads only index rows by their keys or resource (StatementForm `plain`): no chain, `_has` or full-text set. */
function plainCondition(c: Condition): boolean {
  switch (c.kind) {
    case 'chain': case 'has': case 'text': return false;
    case 'or': return c.any.every(plainCondition);
    case 'and': return c.all.every(plainCondition);
    case 'not': return plainCondition(c.condition);
    default: return true;
  }
}

/**
 * Whether `q` selects resources by their ids alone (`_id`, and the targets of `_include`): undriven, yet
 * a plain form, each id one probe of the resources' key whatever the values.
 */
function byIds(q: SearchQuery): boolean {
  const where = q.where ?? [];
  return where.length > 0 && q.compartment === undefined && where.every((c) => c.kind === 'id' && !c.not);
}

/** A condition listing the ids a resource must have (`_id`, `_include`'s targets, reads of many). */
const listsIds = (c: Condition): c is Extract<Condition, { kind: 'id' }> => c.kind === 'id' && !c.not;

/**
 * Whether the ids that `q` lists drive its statement (Dialect.byIds): each read by the resources' key,
 * the other conditions probed on it, in place of any other driver or of reading the type in order. A
 * list has at most one resource per id, 1,000 at most (a search's values), each a probe of the key.
 */
export function idsDrive(dialect: Dialect, q: SearchQuery): boolean {
  return dialect.byIds !== undefined && (q.where ?? []).some(listsIds);
}

/** The form of a fixed statement of `q` (StatementForm). */
function fixedForm(q: SearchQuery): StatementForm {
  return (q.where ?? []).every(plainCondition) ? 'plain' : 'fixed';
}

/**
 * The form of an undriven search read in a keyset order (`_id`, `_lastUpdated`), each resource probed:
 * plain where every condition is (no chain, `_has` or full-text set), the statement then walking the
 * type's key index and probing each row whatever the values; else left to the database's plan.
 */
function inOrderForm(q: SearchQuery): StatementForm | undefined {
  return keysetSort(q.sort) !== undefined && fixedForm(q) === 'plain' ? 'plain' : undefined;
}

/**
 * Plans and runs a search (searchSql). A search sorted on a parameter that no candidate drives
 * (planSearch) walks the sort key's index (sortWalk). When no candidate drives outright, and the page
 * is read in id or `_lastUpdated` order with every condition probed, the first PLAN_TRY_ROWS
 * resources of the type are searched first, as reading in order would (in one statement with the key
 * where they end): where matches are common that is the page, and where they are not, the matches
 * found there tell wideDriver (and lastResort, for `:missing=true`) how rare they are, and the rest of
 * the page is searched after them, as planned then. The first rows probe `_has` conditions whose sets
 * would be large (probesHas); the rest reads them as sets. `typeSizes` estimates a type's resources.
 */
export async function plannedSearch<R>(
  dialect: Dialect, tenant: string, q: SearchQuery, run: SearchRunner<R>, typeSizes: (type: string) => number | Promise<number>,
): Promise<R[]> {
  if (idsDrive(dialect, q)) {
    // A set (a chain, `_has`, full text) or the compartment probed per id: planned for its values.
    const { sql, values } = searchSql(dialect, tenant, q);
    return run.rows(sql, values, q.compartment === undefined ? fixedForm(q) : 'fixed');
  }
  const typeSize = () => typeSizes(q.type);
  const candidates = driverCandidates(dialect, tenant, q);
  const context = planContext(dialect, tenant, q, false, typeSize);
  const resort = (q.where ?? []).some(isLastResort);
  const keyset = keysetSort(q.sort) !== undefined;
  const hasProbes = keyset && await probesHas(dialect, tenant, q, run, typeSizes);
  const inOrder = keyset && (context.narrowed || resort || hasProbes) && (q.where ?? []).every((c) => probedAlone(c) || (hasProbes && c.kind === 'has'));
  const tryRows = Math.max(PLAN_TRY_ROWS, 2 * q.count);
  // Among so few resources that a driver of DRIVER_MAX_ROWS rows, were its condition the only one,
  // would fill the page within the first rows read in order, only a small driver is worth its rows
  // and their probes; the others are not even counted, and the first rows are read first
  // (`Patient?birthdate=ge2009-11&gender=female&_count=50`, 1,922 of 10,000 Patients driving: 20.8
  // against 2.0 ms on PostgreSQL, whose probes cost about 4 µs each).
  const readFirst = inOrder && candidates.length > 0 && (q.count * (await typeSize())) / DRIVER_MAX_ROWS <= tryRows;
  const planCount = run.planCount ?? run.count;
  let plan = await planSearch(candidates, planCount, undefined, readFirst ? DRIVER_TAKE_AT : DRIVER_MAX_ROWS);
  if (await readsLoneInOrder(plan, candidates, context)) plan = {};
  if (plan.driver === undefined) {
    const walked = await sortWalk(dialect, tenant, q, run, typeSizes);
    if (walked !== undefined) return walked;
  }
  let found: R[] = [];
  let rest = q;
  if (plan.driver === undefined && (candidates.length > 0 || resort || hasProbes)) {
    let tried: { hits: number; rows: number } | undefined;
    if (inOrder) {
      // With `_has` probed, where the matches of the first rows predict the rest of the page within as
      // many rows again, those are read the same way too, before anything else: the rest would read
      // the `_has` set (`Patient?_has:Condition:patient:code=..`, 44 of 50 among the first 500 patients:
      // the set of the code's Conditions took 5.6-6.0 ms on SQLite for the other 6, the next rows 0.5).
      for (let read = 1; ; read++) {
        const bounded = searchSql(dialect, tenant, rest, {}, tryRows);
        const rows = await run.rows(bounded.sql, bounded.values, inOrderForm(rest));
        found = found.length ? [...found, ...rows] : rows;
        if (found.length >= q.count) return found;
        tried = { hits: found.length, rows: tryRows * read };
        // The rest of the page after the last of these rows, whose keys the rows found carry, read
        // with them. With none found, the rest is as before them (the rows, if they were all, are
        // read again, and match nothing again).
        if (rows.length === 0) break;
        const { bound_id: id, bound_last_updated: lastUpdated } = rows[0] as { bound_id: string | null; bound_last_updated: number | string | null };
        // None: fewer than `rows` resources remained, and every match has been found.
        if (id === null) return found;
        rest = { ...q, after: { id, lastUpdated: Number(lastUpdated) }, count: q.count - found.length };
        if (read > 1 || !hasProbes || rest.count > found.length) break;
      }
    }
    if (candidates.length > 0) plan = await wideDriver(candidates, planCount, context, tried);
    plan = await lastResort(plan, q, context, tried);
  }
  const { sql, values } = searchSql(dialect, tenant, rest, plan);
  const rows = await run.rows(sql, values, plan.driver !== undefined ? fixedForm(rest) : byIds(rest) ? 'plain' : inOrderForm(rest));
  return found.length ? [...found, ...rows] : rows;
}

/**
 * Whether the page of a search of one probed condition alone (no other, no compartment), in id or
 * `_lastUpdated` order, costs less read in order than driven by the condition's `n` rows, which
 * planSearch counted (at most DRIVER_MAX_ROWS): driven, every row is read and its resource sorted;
 * in order, the page's `need` matches come after about `need × size / n` resources, each probed
 * (wideDriver reads a lone condition of more rows so). `Condition?clinical-status=active` among 7,306
 * Conditions, 1,034 active: the page of 10-19 found after about 130 Conditions, where the driver read
 * and sorted all 1,034 (docs/PERFORMANCE.md, fifty-eighth session).
 */
async function readsLoneInOrder(plan: SearchPlan, candidates: DriverCandidate[], context: PlanContext): Promise<boolean> {
  const n = plan.rows;
  if (n === undefined || n === 0 || candidates.length !== 1 || !candidates[0]!.sampled) return false;
  const { need, costs } = context;
  if (!Number.isFinite(need) || context.narrowed) return false;
  const size = await context.typeSize();
  const inOrder = Math.min(size, (need * size) / n) * costs.undrivenRow + costs.match * Math.min(n, need);
  return inOrder < n * (costs.driverRow + costs.match);
}

/** What a `_has` set costs per referring resource, in reference rows probed (about 3 against 1 µs on SQLite). */
const HAS_SET_ROW_COST = 3;

/** How many times as many referring resources a `_has` set may have beside other conditions (probesHas). */
const HAS_SET_BESIDE = 4;

/**
 * How many times the set's cost the first rows' probes may cost at worst, none of them matching (probesHas):
 * what reading in order risks for what it may save.
 */
const HAS_PROBE_RISK = 4;

/**
 * Whether plannedSearch's first rows probe the query's `_has` conditions (SqlBuilder.hasProbed): each
 * top-level condition is probed alone or is a `_has`, and each `_has`'s set costs more than its probes
 * would. The set costs a reference row and its lookup for each of the `n` referring resources its
 * driving condition selects (every referring resource when none drives). Read in order, a page of
 * `need` matches takes, were each of the `n` to refer to a different resource, `need × referring / n`
 * reference rows probed, `referring` being the referring type's size: so the set is kept while `n²` is
 * at most `need × referring / HAS_SET_ROW_COST` (`Patient?_has:Observation:patient:code=<a vital>`:
 * 130,000 Observations, of 686,776, against about 1,600 for a page of 10). Where the `n` are fewer
 * resources than that assumes, the first rows end the probes, and the set reads the rest. Beside
 * other conditions, which the page's matches must meet too, the set is kept up to HAS_SET_BESIDE
 * times as many rows (`Patient?gender=male&_has:Condition:patient:code=<hypertension>`: 1,744
 * Conditions, 4.4 ms as the set, against 3.9 ms of first rows that found 42 of 51 before it). The
 * estimate assumes the `n` spread over as many resources; where they are a few resources' (each referred to
 * by many: `referring ÷ targets`), the first rows probe every one of their referring resources and find
 * nothing. So the set is kept too while the first rows, matching none, would probe more than
 * HAS_PROBE_RISK times its cost: `Patient?_has:Condition:subject:code=..` with 200,000 Conditions of 300
 * Patients (667 each), the code's 4,000 on 6 Patients, probed 196,006 reference rows for its first rows
 * (2.3-4.0 s on PostgreSQL). A `_has` under `:not` or in an `or` is always a set.
 */
async function probesHas<R>(
  dialect: Dialect, tenant: string, q: SearchQuery, run: SearchRunner<R>, typeSize: (type: string) => number | Promise<number>,
): Promise<boolean> {
  const where = q.where ?? [];
  const has = where.filter((c): c is Extract<Condition, { kind: 'has' }> => c.kind === 'has');
  // A canonical `_has` is a set (SqlBuilder.condition).
  if (has.length === 0 || has.some((c) => c.canonical) || !where.every((c) => c.kind === 'has' || probedAlone(c))) return false;
  const beside = where.some((c) => c.kind !== 'has' && !isImplied(c)) || q.compartment !== undefined ? HAS_SET_BESIDE : 1;
  const targets = Math.max(1, await typeSize(q.type));
  const firstRows = Math.min(Math.max(PLAN_TRY_ROWS, 2 * q.count), targets);
  for (const c of has) {
    const driving = c.where.find(canDrive);
    if (driving === undefined) continue;
    const referring = await typeSize(c.type);
    const spread = beside * Math.ceil(Math.sqrt((q.count * referring) / HAS_SET_ROW_COST));
    const most = Math.max(spread, Math.floor((firstRows * referring) / targets / (HAS_SET_ROW_COST * HAS_PROBE_RISK)));
    const b = new SqlBuilder(dialect, tenant, 'exists');
    const rows = b.driverRows(driving, c.type)!;
    if ((await (run.planCount ?? run.count)(`SELECT COUNT(*) AS n FROM (${rows} LIMIT ${most + 1}) x`, b.values)) <= most) return false;
  }
  return true;
}

/** The index rows a sort walk reads first, beyond two for each resource the page reaches. */
const SORT_WALK_FIRST_ROWS = 16;

/** A sort walk reads at least this many times as many rows as its last try, while the page is not yet full. */
const SORT_WALK_GROWTH = 8;

/** A sort walk reads this much beyond the rows at which the matches' rate so far would fill the page. */
const SORT_WALK_MARGIN = 1.5;

/** The index rows a sort walk reads at most, before the search is planned as if there were none. */
export const SORT_WALK_MAX_ROWS = 25_000;

/**
 * A search sorted on a parameter with no condition to drive it (planSearch: none has at most
 * DRIVER_MAX_ROWS rows) read by walking the sort key's value-first index in order: the resources whose
 * key is at or before the walk's bound (the key's value `rows` index rows in) drive it, probed for the
 * other conditions, and sorted. Every resource whose key is at or before the bound is among them (its
 * key is its least, or greatest, row), so a full page of them is the search's page; otherwise the walk
 * goes further, as far as the matches' rate so far says the page needs, and gives way (undefined) to
 * the plan without it where that is beyond `most` rows (SORT_WALK_MAX_ROWS; a walk of ties, tiesPage, fewer).
 * Without a walk every resource of the type was read and its key computed, however few the page:
 * `Observation?_sort=-date&_count=10` read 686,776 Observations. Resources without the key sort last,
 * so they are reached only when the walk has read every row of the key without filling the page.
 * `tied`: keys of earlier sort keys every resource of the page has (tiesPage walking the next key).
 * `beyond`: the place's first key is passed (every resource at it is on an earlier page or this one's
 * start), and the walk starts after it.
 */
async function sortWalk<R>(
  dialect: Dialect, tenant: string, q: SearchQuery, run: SearchRunner<R>, typeSizes: (type: string) => number | Promise<number>, tied: TiedKey[] = [], beyond = false,
  most = SORT_WALK_MAX_ROWS,
): Promise<R[] | undefined> {
  const first = q.sort[0];
  if (first?.by !== 'param' || keysetSort(q.sort) !== undefined) return undefined;
  // The rest of the page is of resources without the key (sorted last): searched as such where the walk is not a tie's.
  const keyless = (found: R[], keys?: number[]) => (tied.length === 0 ? withoutKey(dialect, tenant, q, run, typeSizes, first, found, keys) : undefined);
  // A page after a place (SearchQuery.afterKeys) is walked from the place's first key: the resources
  // after it have that key or one further on (or none: the walk cannot reach those, sorted last).
  const start = q.afterKeys === undefined ? undefined : q.afterKeys.keys[0];
  if (start === null) return keyless([]);
  const need = (q.offset ?? 0) + q.count;
  // The range read last and what it found: a bound that did not move (the rows more than the last try
  // still end among the same value's ties) reads the same rows again, so they are not read again.
  let last: { range: SortRange; found: R[] } | undefined;
  for (let rows = 2 * need + SORT_WALK_FIRST_ROWS; rows <= most;) {
    const bound = sortBoundSql(dialect, tenant, q.type, first, rows, start, beyond);
    const keys = (await run.rows(bound.sql, bound.values, 'plain')) as unknown as { k: number; f: SqlValue | null; v: SqlValue | null }[];
    // No key: no resource has the parameter.
    if (keys.length === 0) return undefined;
    const sortRange = { keys: keys.map((x) => Number(x.k)), from: keys[0]!.f, to: keys[0]!.v };
    // Nothing at or after the place: the rest of the walk is of resources without the key.
    if (sortRange.from === null) return keyless([], sortRange.keys);
    if (rows === 2 * need + SORT_WALK_FIRST_ROWS) {
      const crossed = await crossingTies(dialect, tenant, q, run, first, sortRange, typeSizes, tied);
      if (crossed !== undefined && crossed.before.length >= q.count) return crossed.before;
      const before = crossed?.before ?? [];
      const at = crossed === undefined ? sortRange : { keys: sortRange.keys, from: sortRange.to, to: sortRange.to };
      const page = { ...q, count: q.count - before.length };
      const ties = await tiesPage(dialect, tenant, page, run, first, at, typeSizes, tied, crossed !== undefined);
      // Matches too rare among the ties for the windows, and a `:missing=true` or `:not` to drive instead
      // (lastResort, which a sort on a parameter takes): where the ties cost more to read (each with its key:
      // a driver's row) than that condition's rows (the type's: Dialect.missingRows), the walk gives way
      // rather than read them (`Condition?code:missing=true&_sort=verification-status`, 8 uncoded among
      // 19,960 `confirmed`: the ties read, too few, and then the missing rows; docs/PERFORMANCE.md, fifty-third session).
      if (ties === 'rare' && (q.where ?? []).some(isLastResort) && await costlierTies(dialect, tenant, q, run, first, at, typeSizes)) return undefined;
      if (ties !== undefined && ties !== 'rare' && ties.complete) return [...before, ...ties.rows];
      if (ties !== undefined && ties !== 'rare') {
        // Every tie at the value after the place, fewer than the page: the rest of it comes after them.
        const next = q.sort[1];
        const past = (descending: boolean) => (descending ? '' : AFTER_PREFIX);
        const placeAfter = { keys: [at.from, ...(next === undefined ? [] : [past(next.descending)])], id: AFTER_PREFIX };
        const rest = await sortWalk(dialect, tenant, { ...page, count: page.count - ties.rows.length, afterKeys: placeAfter }, run, typeSizes, tied, true);
        return rest === undefined ? undefined : [...before, ...ties.rows, ...rest];
      }
      // The ties' window ended before the page filled: the walk reads them as before (the rows before them again).
    }
    let found: R[];
    if (last !== undefined && sameRange(last.range, sortRange)) found = last.found;
    else {
      const { sql, values } = searchSql(dialect, tenant, q, { driver: 'sort', sortRange, ...(tied.length > 0 && { tied }) });
      found = await run.rows(sql, values, fixedForm(q));
      last = { range: sortRange, found };
    }
    if (found.length >= q.count) return found;
    // Every row of the key was read: the rest of the page is of resources without it.
    if (sortRange.to === null) return keyless(found, sortRange.keys);
    // The rows the page would need at the matches' rate so far (with none, at least `need` times
    // these): beyond SORT_WALK_MAX_ROWS the walk gives way now rather than read that far for nothing
    // (`Observation?category=laboratory&code=<a vital sign>&_sort=-date`, no match: 33 against 16 ms).
    const matches = found.length > 0 ? (q.offset ?? 0) + found.length : 0;
    const wanted = matches > 0 ? (need * rows * SORT_WALK_MARGIN) / matches : need * rows;
    // At `most` already, none matching (`wanted` is then `need` times the rows: with one to find, `most`
    // itself): the walk gives way, not read the same rows again for ever.
    if (wanted > most || rows >= most) return undefined;
    rows = Math.min(most, Math.max(rows * SORT_WALK_GROWTH, Math.ceil(wanted)));
  }
  return undefined;
}

/** Whether a walk's ties (`range`, one value's) cost more to read than a condition of last resort's rows, counted up to the ties that would (PlanCosts). */
async function costlierTies<R>(
  dialect: Dialect, tenant: string, q: SearchQuery, run: SearchRunner<R>, first: ParamSortKey, range: SortRange, typeSizes: (type: string) => number | Promise<number>,
): Promise<boolean> {
  const { missingRow, driverRow } = dialect.costs;
  const ties = Math.ceil(((await typeSizes(q.type)) * missingRow) / driverRow);
  return range.from !== null && await manyTies(dialect, tenant, run, first, range.keys, range.from, ties);
}

/**
 * Whether two of a sort walk's ranges read the same rows: the same keys, first value and bound
 * (`Condition?code:missing=true&_sort=verification-status`, 8 matches among 19,960 `confirmed` ties: the
 * bound stayed at `confirmed` as the walk read 8 and 64 times as many rows, and every tie was read, its
 * key computed, four times over).
 */
function sameRange(a: SortRange, b: SortRange): boolean {
  return a.from !== null && a.to !== null && a.from === b.from && a.to === b.to && a.before === b.before
    && a.keys.length === b.keys.length && a.keys.every((k, i) => k === b.keys[i]);
}

/**
 * The rest of a sort walk's page once every resource with the first sort key is on it or before it
 * (`found`, in order): the resources without the key, which sort last, in the order of the sort's other
 * keys (ties by id), found as the search of the parameter's rows missing (`:missing=true`; for a key of one
 * target type, a reference sorted on one type's rows, no row of that type: a resource may have rows of
 * others), planned as any search, after the place where the place is among them. After an offset, the
 * resources without the key start where the page's keyed ones end: at the offset's place among them less
 * the resources with the key (`found`, the page's, ends them; with none found, counted on the key's rows
 * `keys`, which the walk read all of; in a keyset order, which takes no offset, the resources passed are
 * read, up to KEYLESS_READ_PAST). Before, the plan without the walk computed the key of every resource of
 * the type for them. Undefined (that plan) after a place whose other keys are `_lastUpdated` ascending
 * alone, or after an offset with a place, or with none found and no keys known.
 */
async function withoutKey<R>(
  dialect: Dialect, tenant: string, q: SearchQuery, run: SearchRunner<R>, typeSizes: (type: string) => number | Promise<number>,
  first: ParamSortKey, found: R[], keys?: number[],
): Promise<R[] | undefined> {
  const missing: Condition = { kind: 'missing', table: first.table, params: [first.param], missing: true, ...(first.target !== undefined && { systems: [first.target] }) };
  // Ties by id ascending, as on the rest of the page, named: alone, `-_lastUpdated` would be a keyset sort, its ties by id descending.
  const byId = q.sort.some((k) => k.by === 'id');
  const sort = byId ? q.sort.slice(1) : [...q.sort.slice(1), { by: 'id' as const, descending: false }];
  const rest: SearchQuery = { ...q, sort, count: q.count - found.length, where: [...(q.where ?? []), missing] };
  delete rest.afterKeys;
  delete rest.offset;
  const place = q.afterKeys;
  // The resources without the key that the offset passes.
  let skip = 0;
  if (q.offset && found.length === 0) {
    if (place !== undefined || keys === undefined) return undefined;
    const keyed = countSql(dialect, tenant, q, { driver: 'sort', sortRange: { keys, from: null, to: null } });
    skip = Math.max(0, q.offset - Number(await run.count(keyed.sql, keyed.values, countForm(q, { driver: 'sort' }))));
  }
  // In a keyset order (ties by id alone) a search takes no offset: the rows it passes are read.
  const keysetRest = keysetSort(rest.sort) !== undefined;
  if (skip > 0 && keysetRest && skip > KEYLESS_READ_PAST) return undefined;
  if (skip > 0) {
    if (keysetRest) rest.count += skip;
    else rest.offset = skip;
  }
  if (place !== undefined && place.keys[0] === null) {
    const keyset = keysetSort(rest.sort);
    if (keyset === undefined) rest.afterKeys = { keys: [...place.keys.slice(1), ...(byId ? [] : [place.id])], id: place.id };
    else if (keyset.by === 'id') rest.after = { id: place.id, lastUpdated: 0 };
    else return undefined;
  }
  const read = await plannedSearch(dialect, tenant, rest, run, typeSizes);
  const rows = skip > 0 && keysetRest ? read.slice(skip) : read;
  return found.length ? [...found, ...rows] : rows;
}

/**
 * The resources without a walk's key that withoutKey reads at most to pass an offset in a keyset order
 * (the sort's one other key, or none: ties by id); beyond, the plan without the walk.
 */
const KEYLESS_READ_PAST = DRIVER_MAX_ROWS;

/** A sort key's value that every resource of a page has (SearchPlan.tied). */
export interface TiedKey {
  key: ParamSortKey;
  value: SqlValue;
  /** The key's keys (SortRange.keys) whose rows hold the value. */
  keys: number[];
  /** Whether the value is the first of every resource's (no place before it): a row of it is then the key. */
  first: boolean;
}

/**
 * Resource `r`'s sort key `t.key` is `t.value` (SearchPlan.tied): it has a row of the value, probed by the
 * value-first index (most resources read in id order among a few ties have none), and unless the value is
 * the first of all, none before it (its key computed). Scalar subqueries, which PostgreSQL never makes joins.
 */
function tiedSql(b: SqlBuilder, t: TiedKey, type: string): string {
  const s = b.alias('s');
  const has = `(SELECT 1 FROM ${t.key.table} ${s} WHERE ${s}.k IN (${t.keys.map((k) => b.v(k)).join(', ')}) AND ${s}.${sortColumn(t.key)} = ${b.v(t.value)} AND ${s}.res = r.pk LIMIT 1) IS NOT NULL`;
  return t.first ? has : `${has} AND ${b.sortKey(t.key, 'r', type)[0]} = ${b.v(t.value)}`;
}

/**
 * How many times the probes of the type in id order may cost what reading the ties would (tiesPage):
 * they are a guess from an even spread of the ties among the ids.
 */
const TIES_PROBE_RISK = 4;

/**
 * A page of a sort walk whose first rows are all of one value `v` (`sortRange.from` = `to`:
 * `Condition?_sort=code&_count=1`, the first code's 4,000 Conditions among 200,000; or a later page
 * of `Observation?_sort=status&_count=300`, 6,694 of 6,923 `final`), read without reading every tie:
 * the walk reads each tie for its id (the value-first index holds resource keys, not ids) and computes
 * its key, on every page at that value. The page's resources are then those whose key is `v` (their
 * least row ascending, greatest descending: SearchPlan.tied), after the place's id where the place is
 * at `v`, in the order of the sort's next key: by id (none, or `_id`), read in id order within a window
 * of the type and probed; or by the next parameter, walked as its own sort (sortWalk with `v` tied).
 * That costs about `count × size / T` probes against `T` ties read, so it is taken only where the
 * ties, counted up to it, make `T² > TIES_PROBE_RISK × count × size`; in id order the first window holds
 * half as many again as the ties' spread says the page needs, and where it ends before the page is
 * filled (a condition whose matches are rare, a place at the last ties) the next, eight times as large,
 * goes on from its last resource, so that the windows read at most TIES_PROBE_RISK times the ties counted
 * before the walk reads the ties. Not `complete` where a window held the rest of the type and the page is
 * not filled at `v`: the rows are then every tie after the place, and the page goes on after `v`.
 * Undefined where it does not apply, and `rare` where the windows in id order end before the page is
 * filled: the walk reads the ties as before, or gives way to a condition of last resort.
 */
async function tiesPage<R>(
  dialect: Dialect, tenant: string, q: SearchQuery, run: SearchRunner<R>, first: ParamSortKey, range: SortRange,
  typeSizes: (type: string) => number | Promise<number>, tied: TiedKey[], counted = false,
): Promise<{ rows: R[]; complete: boolean } | 'rare' | undefined> {
  const value = range.from;
  if (value === null || value !== range.to || !tiesApply(q)) return undefined;
  const next = q.sort[1];
  const inIdOrder = next === undefined || (next.by === 'id' && q.sort.length === 2);
  const size = await typeSizes(q.type);
  const enough = tiesEnough(q, size);
  if (!counted && !(await manyTies(dialect, tenant, run, first, range.keys, value, enough))) return undefined;
  // A place at `v` (the walk's range starts at the place's key): the ties after it. A place whose key
  // no resource has any longer: every tie at `v` comes after it.
  const place = q.afterKeys !== undefined && q.afterKeys.keys[0] === value ? q.afterKeys : undefined;
  // `v` is the first value of all where no place and no value before it (`counted`: the page crossed into it) precede it.
  const sameKey = [...tied, { key: first, value, keys: range.keys, first: q.afterKeys === undefined && !counted }];
  if (!inIdOrder) {
    const rest: SearchQuery = { ...q, sort: q.sort.slice(1) };
    delete rest.afterKeys;
    if (place !== undefined) rest.afterKeys = { keys: place.keys.slice(1), id: place.id };
    // Its rows at most what the windows in id order read at most (below): reading the ties costs at least `enough`.
    const most = Math.max(2 * q.count + SORT_WALK_FIRST_ROWS, TIES_PROBE_RISK * enough);
    const rows = await sortWalk(dialect, tenant, rest, run, typeSizes, sameKey, false, most);
    return rows === undefined ? undefined : { rows, complete: true };
  }
  const byId: SearchQuery = { ...q, sort: next === undefined ? [] : [next] };
  delete byId.afterKeys;
  let window = Math.max(2 * q.count, Math.ceil((SORT_WALK_MARGIN * q.count * size) / enough));
  // The windows read at most this many resources in all: reading the ties costs at least `enough` rows.
  const most = Math.max(window, TIES_PROBE_RISK * enough);
  let rows: R[] = [];
  let after = place?.id;
  for (let read = 0; ;) {
    const page: SearchQuery = { ...byId, count: q.count - rows.length, ...(after !== undefined && { after: { id: after, lastUpdated: 0 } }) };
    const { sql, values } = searchSql(dialect, tenant, page, { tied: sameKey }, window);
    const found = await run.rows(sql, values, inOrderForm(page));
    rows = rows.length ? [...rows, ...found] : found;
    if (rows.length >= q.count) return { rows, complete: true };
    read += window;
    // The window's last resource (null: the window reached the type's last, and these are every tie
    // after the place). With no tie in it, read alone (nthRow): a place at the last tie found none.
    const bound = found.length > 0 ? (found[0] as { bound_id?: string | null }).bound_id ?? null : await windowEnd(dialect, tenant, page, run, window);
    if (bound === null) return { rows, complete: false };
    // Beyond what reading the ties costs, the walk reads them as before.
    if (read >= most) return 'rare';
    after = bound;
    window = Math.min(window * SORT_WALK_GROWTH, most - read);
  }
}

/** The id of the `rows`-th resource of `q`'s type after its cursor in its keyset order (nthRow), or null where the type has fewer. */
async function windowEnd<R>(dialect: Dialect, tenant: string, q: SearchQuery, run: SearchRunner<R>, rows: number): Promise<string | null> {
  const b = new SqlBuilder(dialect, tenant, 'in');
  const sql = nthRow(b, q, rows, 'x.id AS id');
  const found = (await run.rows(sql, b.values, 'plain')) as unknown as { id: string }[];
  return found[0]?.id ?? null;
}

/** Whether tiesPage can read a page of a walk's ties: no offset, conditions probed alone, the next sort key (if any) `_id` alone or a parameter. */
function tiesApply(q: SearchQuery): boolean {
  const next = q.sort[1];
  const nextFits = next === undefined || (next.by === 'id' && q.sort.length === 2) || next.by === 'param';
  return nextFits && !q.offset && (q.where ?? []).every(probedAlone);
}

/** The ties at which reading a page's resources in id order repays (tiesPage): `T² > TIES_PROBE_RISK × count × size`. */
const tiesEnough = (q: SearchQuery, size: number): number => Math.ceil(Math.sqrt(TIES_PROBE_RISK * q.count * size));

/** Whether sort key `first`'s rows hold `value` at least `enough` times (counted up to that). */
async function manyTies<R>(
  dialect: Dialect, tenant: string, run: SearchRunner<R>, first: ParamSortKey, keys: number[], value: SqlValue, enough: number,
): Promise<boolean> {
  const b = new SqlBuilder(dialect, tenant, 'in');
  const ties = `SELECT COUNT(*) AS n FROM (SELECT 1 FROM ${first.table} s WHERE s.k IN (${keys.map((k) => b.v(k)).join(', ')}) AND s.${sortColumn(first)} = ${b.v(value)} LIMIT ${enough}) x`;
  return Number(await run.count(ties, b.values, 'plain')) >= enough;
}

/**
 * A sort walk's first rows that cross from values before its bound into the bound's many ties
 * (`Observation?_sort=status&_count=300`: 17 `amended`, then 6,694 `final`): the page's resources whose
 * key is before the bound (`before`: read by the rows before it, `SortRange.before`), the rest of the page
 * being the bound's ties, read as tiesPage reads them (in id order, or walked by the next sort key),
 * where the ties, counted, would repay it. Before, the walk read every tie for its id and computed its key.
 * Undefined where that does not apply: the walk reads its rows as before.
 */
async function crossingTies<R>(
  dialect: Dialect, tenant: string, q: SearchQuery, run: SearchRunner<R>, first: ParamSortKey, range: SortRange,
  typeSizes: (type: string) => number | Promise<number>, tied: TiedKey[],
): Promise<{ before: R[] } | undefined> {
  const value = range.to;
  if (value === null || range.from === value || !tiesApply(q)) return undefined;
  if (!(await manyTies(dialect, tenant, run, first, range.keys, value, tiesEnough(q, await typeSizes(q.type))))) return undefined;
  const sortRange = { ...range, before: true };
  const { sql, values } = searchSql(dialect, tenant, q, { driver: 'sort', sortRange, ...(tied.length > 0 && { tied }) });
  return { before: await run.rows(sql, values, fixedForm(q)) };
}

/**
 * `SELECT k, f, v`, in one snapshot: each key `k` of sort key `k`'s parameter (a quantity has one
 * per unit, a token one per system; a reference one per target type, only the sort key's `target`'s
 * where it names one), with the range (SortRange) a sort walk reads, the same on every
 * row: `f` the first value of any of them in the sort's order, and `v` the first of their values
 * `rows` index rows in, so that at least `rows` rows are at or before it (null when every key has
 * fewer rows). The database compares the values, as it orders them. `start`: the values from it on alone
 * (after it, `beyond`).
 */
function sortBoundSql(
  dialect: Dialect, tenant: string, type: string, k: ParamSortKey, rows: number, start?: string | number, beyond = false,
): { sql: string; values: SqlValue[] } {
  const b = new SqlBuilder(dialect, tenant, 'in');
  const col = sortColumn(k);
  const from = start === undefined ? '' : ` AND s.${col} ${k.descending ? '<' : '>'}${beyond ? '' : '='} ${b.v(start)}`;
  const nth = (offset: number) => `(SELECT s.${col} FROM ${k.table} s WHERE s.k = kk.k${from} ORDER BY s.${col}${k.descending ? ' DESC' : ''} LIMIT 1${offset ? ` OFFSET ${offset}` : ''})`;
  const fn = k.descending ? 'MAX' : 'MIN';
  const sql = `SELECT x.k AS k, ${fn}(x.f) OVER () AS f, ${fn}(x.v) OVER () AS v FROM (SELECT kk.k AS k, ${nth(0)} AS f, ${nth(Math.trunc(rows) - 1)} AS v ` +
    `FROM search_keys kk WHERE kk.tenant = ${b.v(tenant)} AND kk.type = ${b.v(type)} AND kk.param = ${b.v(k.param)}` +
    `${k.target === undefined ? '' : ` AND kk.system = ${b.v(k.target)}`}) x`;
  return { sql, values: b.values };
}

/** A condition that could drive a search, with the statement counting its rows up to a limit. */
export interface DriverCandidate {
  driver: number | 'compartment';
  /** Whether PlanContext.sample tests its condition (see sampled). */
  sampled: boolean;
  /**
   * The statement and its values, with the limit written in (planSearch uses two): with the limit
   * bound as a value, SQLite took about three times as long to count a patient's few rows (34-48
   * against 10-12 µs). Rendered when first asked for: most plans count only the first candidate.
   */
  count(limit: number): { sql: string; values: SqlValue[]; form: StatementForm };
}

/** The candidates of SearchPlan.driver for `q`, in the order planSearch counts them. */
export function driverCandidates(dialect: Dialect, tenant: string, q: SearchQuery): DriverCandidate[] {
  // The ids drive (idsDrive): no other condition is counted.
  if (idsDrive(dialect, q)) return [];
  const candidate = (driver: number | 'compartment', rows: (b: SqlBuilder) => string): DriverCandidate => {
    let rendered: { rows: string; values: SqlValue[] } | undefined;
    return {
      driver,
      sampled: driver === 'compartment' || sampled(q.where![driver]!),
      count(limit) {
        const form: StatementForm = driver === 'compartment' || plainCondition(q.where![driver]!) ? 'plain' : 'fixed';
        if (rendered === undefined) {
          const b = new SqlBuilder(dialect, tenant, 'exists');
          rendered = { rows: rows(b), values: b.values };
        }
        return { sql: `SELECT COUNT(*) AS n FROM (${rendered.rows} LIMIT ${Math.trunc(limit)}) x`, values: rendered.values, form };
      },
    };
  };
  const out: DriverCandidate[] = [];
  // The compartment first: a patient's resources are usually few, and then the others need no count.
  if (q.compartment !== undefined) out.push(candidate('compartment', (b) => compartmentRows(b, q.type, q.compartment!)));
  // Then references to resources (`patient=123`: a patient's rows are usually few), then the others, in
  // the query's order: the first pass takes the first candidate with few rows, and counting an
  // unselective one first (`clinical-status=active`) reads DRIVER_TAKE_AT + 1 of its rows for nothing.
  // `_lastUpdated` comes last: its rows are usually many (every resource but those changed lately), and
  // counting each costs a read of its resource row. In a page sorted by `_lastUpdated` it is none: the
  // resources are read in that index's order, from the range's start, whatever its size.
  const byLastUpdated = keysetSort(q.sort)?.by === 'lastUpdated';
  const where = (q.where ?? []).map((c, i) => ({ c, i }))
    .filter(({ c }) => canDrive(c) && !(c.kind === 'lastUpdated' && (byLastUpdated || !dialect.plansLastUpdated)));
  const rank = ({ c }: { c: Condition }) => (isReference(c) ? 0 : c.kind === 'lastUpdated' ? 2 : 1);
  const ordered = [0, 1, 2].flatMap((r) => where.filter((x) => rank(x) === r));
  for (const { c, i } of ordered) out.push(candidate(i, (b) => b.driverRows(c, q.type)!));
  return out;
}

const isReference = (c: Condition): boolean => c.kind === 'token' && c.reference === true;

/** Whether a condition, and each it nests, is of none of `kinds`. */
function noneOf(c: Condition, kinds: ReadonlySet<Condition['kind']>): boolean {
  switch (c.kind) {
    case 'or': return c.any.every((x) => noneOf(x, kinds));
    case 'and': return c.all.every((x) => noneOf(x, kinds));
    case 'not': return noneOf(c.condition, kinds);
    default: return !kinds.has(c.kind);
  }
}

/** Conditions a search without a driver reads as sets: chains, `_has`, full text. */
const SETS: ReadonlySet<Condition['kind']> = new Set(['chain', 'has', 'text']);
/** And `_id` and `_lastUpdated`, columns of the resource row, which PlanContext.sample does not read. */
const UNSAMPLED: ReadonlySet<Condition['kind']> = new Set([...SETS, 'id', 'lastUpdated']);

/** Whether PlanContext.sample tests a condition: one that probes index rows by the resource's key alone. */
const sampled = (c: Condition): boolean => noneOf(c, UNSAMPLED);

/** Whether reading a search without a driver tests a condition by probes alone (no set). */
const probedAlone = (c: Condition): boolean => noneOf(c, SETS);

/** Resource row `a` is in the patient's compartment, probed (correlation 'exists' or 'lateral'). */
function compartmentProbe(b: SqlBuilder, a: string, patient: string): string {
  const body = `SELECT 1 AS hit FROM compartments c WHERE c.res = ${a}.pk AND c.patient = ${b.v(patient)}`;
  return b.correlation === 'lateral' ? b.lateral(body) : `EXISTS (${body})`;
}

function compartmentRows(b: SqlBuilder, type: string, patient: string): string {
  return `SELECT c.res FROM compartments c WHERE c.tenant = ${b.v(b.tenant)} AND c.patient = ${b.v(patient)} AND c.type = ${b.v(type)}`;
}

/**
 * Whether a `_has` probe tests `c` on its reference rows' `res` alone (SqlBuilder.hasProbe): index rows, or a
 * chain's or a compartment's set of rows' `res` (live versions' alone, as index rows are). Joined to the
 * referring resources' rows for a chain, PostgreSQL without statistics read \`resources\` in full for each
 * resource probed, hash-joined with its reference rows (`Patient?_has:Observation:subject:encounter.class=AMB`:
 * 2,235 rows and 1,250 buffers a Patient).
 */
function onProbedRows(c: Condition): boolean {
  switch (c.kind) {
    case 'chain': case 'compartment': return true;
    case 'or': return c.any.every(onProbedRows);
    default: return onIndexRows(c);
  }
}

/**
 * Whether a condition reads index rows alone (found by their `res`), so that it can test a driver's row
 * before the resource's own row is read.
 */
function onIndexRows(c: Condition): boolean {
  switch (c.kind) {
    case 'token': case 'token-text': case 'uri-prefix': case 'string': case 'date': case 'number': case 'composite': case 'near': case 'missing': case 'text':
      return true;
    case 'or':
      return c.any.every(onIndexRows);
    case 'not':
      return onIndexRows(c.condition);
    default:
      return false;
  }
}

/**
 * Whether `c` holds only for a resource that has index or compartment rows of its own, which exist for
 * current, live versions alone. Not `_id`, `_lastUpdated` (the resource row), `_has` (other resources'
 * rows), a negation or `:missing=true`, nor full text (whose words a deletion may leave for the merger).
 */
export function readsOwnRows(c: Condition): boolean {
  switch (c.kind) {
    case 'token': return !c.not;
    case 'missing': return !c.missing;
    case 'string': case 'uri-prefix': case 'token-text': case 'date': case 'number': case 'composite': case 'near': case 'chain': case 'compartment':
      return true;
    case 'or': return c.any.length > 0 && c.any.every(readsOwnRows);
    case 'and': return c.all.some(readsOwnRows);
    default: return false;
  }
}

/**
 * The FROM clause and WHERE conditions of a search, as `plan` (or, without one, the sets) has it.
 * Driven: `driven` is the driver's distinct rows (`d.res`) with the conditions tested on them, and
 * `alone` whether those rows are the whole answer (nothing else is tested on the resource rows: index
 * and compartment rows are those of this tenant's current, live versions of the type).
 */
function fromWhere(
  b: SqlBuilder, q: SearchQuery, withCursor: boolean, plan?: SearchPlan, bounded = false, resourceRows = true, key?: string,
): { from: string; where: string; driven?: string; alone: boolean } {
  const driver = plan?.driver;
  // Read undriven, a resource that one of its own index or compartment rows selects is live (those rows
  // are its current, live version's), so `deleted` is not tested: SQLite then walks the type's (tenant,
  // type, id) index and reads the resource rows of matches alone (`Patient?birthdate=ge..&gender=..`
  // 538 → 400 µs a statement on a million resources). Driven, the row is read anyway.
  const live = driver !== undefined || (q.compartment === undefined && !(q.where ?? []).some((c) => !isImplied(c) && readsOwnRows(c)));
  const base = resourceRows ? [`r.tenant = ${b.v(b.tenant)}`, `r.type = ${b.v(q.type)}`, ...(live ? [b.dialect.live('r')] : [])] : [];
  const where = [...base];
  let driven: string | undefined;
  let from = 'resources r';
  b.textAsSet = driver === undefined && b.dialect.text.setWhenUndriven;
  // The conditions on index rows test each driver row (its `res`) before its resource row is read:
  // a patient's 80 Observations are narrowed to the 8 of a code on the compact index B-trees, and
  // only those 8 resource rows (with their stored text on the same pages) are visited. SQLite probes
  // by EXISTS; PostgreSQL's lateral probes join the driver's rows inside its subquery (the Observations
  // of 170 patients named Smith, 11,685 probed for a code: 48 against 39 ms).
  const early: string[] = [];
  const earlyLaterals: string[] = [];
  // Ids listed, and no other driver, the resources are read by their keys where the dialect does so
  // (idsDrive): the ids every list names, each once, the other conditions probed on each.
  const ids = driver === undefined && !bounded && resourceRows && idsDrive(b.dialect, q) ? commonIds(q) : undefined;
  // Nor those, a page in id order reads the ids of its first `_has` set first where the dialect does (Dialect.hasIds),
  // sorted, each one's resource read by its key until the page is full; a count reads them all either way.
  const hasIds = withCursor && driver === undefined && !bounded && resourceRows && ids === undefined && b.dialect.hasIds !== undefined &&
    keysetSort(q.sort)?.by === 'id' ? (q.where ?? []).findIndex((c) => c.kind === 'has' && !c.canonical) : -1;
  (q.where ?? []).forEach((c, i) => {
    // An implied condition (withImpliedDrivers) that does not drive holds wherever the others do.
    if (i === driver || i === plan?.intersect || i === hasIds || isImplied(c) || (ids !== undefined && listsIds(c))) return;
    if (driver !== undefined && b.correlation !== 'in' && onIndexRows(c)) {
      const before = b.laterals.length;
      early.push(b.condition(c, DRIVER_ROW, q.type));
      earlyLaterals.push(...b.laterals.splice(before));
    } else where.push(b.condition(c, 'r', q.type));
  });
  if (driver !== undefined) {
    let rows = driver === 'compartment' ? compartmentRows(b, q.type, q.compartment!)
      : driver === 'sort' ? b.sortRows(q.sort[0] as ParamSortKey, plan!.sortRange!)
      : b.driverRows(q.where![driver]!, q.type, key);
    if (rows === undefined) throw new Error(`condition ${driver} cannot drive a search`);
    if (plan?.intersect !== undefined) {
      // The set's index rows hashed with the driver's (wideDriver), in place of a probe per driver row.
      const set = b.driverRows(q.where![plan.intersect]!, q.type);
      if (set === undefined) throw new Error(`condition ${plan.intersect} cannot be intersected`);
      const [i, j] = [b.alias('i'), b.alias('i')];
      rows = `SELECT ${i}.res FROM (${rows}) ${i} INTERSECT SELECT ${j}.res FROM (${set}) ${j}`;
    }
    const d = DRIVER_ROW;
    const tested = early.length ? ` WHERE ${early.join(' AND ')}` : '';
    const select = `SELECT DISTINCT ${d}.res${key === undefined ? '' : `, ${d}.key`} FROM (${rows}) ${d}${earlyLaterals.map((l) => ` ${l}`).join('')}${tested}`;
    driven = key === undefined ? b.dialect.driven(select, d) : b.dialect.drivenKeyed(select, d);
    // Each driver row's resource read by its key (Dialect.resourceOf): SQLite keeps the left side of a
    // CROSS JOIN as the outer loop; PostgreSQL, joining without statistics, took the type for a few
    // rows and walked it in id order, each resource compared with every driver row
    // (`Condition?subject=Patient/p1`, 67 of 20,000 Conditions: 24-89 ms, now under 1 ms).
    from = `${driven} ${b.dialect.resourceOf(`${d}.res`)}`;
  }
  if (hasIds >= 0) from = `${b.hasIdRows(q.where![hasIds] as Extract<Condition, { kind: 'has' }>, q.type)} h JOIN resources r ON r.id = h.id`;
  if (q.compartment !== undefined && driver !== 'compartment') {
    // A set as a condition's is (Dialect.inSet): hashed once where PostgreSQL misjudges the type, as a semi-join it re-read
    // the compartment's rows for each resource (a patient token's AuditEvent count, docs/PERFORMANCE.md, fiftieth session).
    if (b.correlation === 'in') where.push(b.dialect.inSet('r.pk', compartmentRows(b, q.type, q.compartment)));
    else where.push(compartmentProbe(b, 'r', q.compartment));
  }
  const keyset = keysetSort(q.sort);
  if (withCursor && q.after && keyset) where.push(keysetAfter(b, 'r', keyset, q.after));
  // A place in a sort on parameters keeps a driven search `alone` (sortedDriven narrows on it).
  const afterPlace = withCursor && q.afterKeys !== undefined && !keyset;
  for (const t of plan?.tied ?? []) where.push(tiedSql(b, t, q.type));
  // Driven alone and sorted on a parameter (sortedDriven), the place is compared with the first key its
  // rows carry (`m.k0`), not computed again for each resource three times over.
  const sortsDriven = driven !== undefined && where.length === base.length && b.laterals.length === 0 && !keyset && q.sort[0]?.by === 'param';
  if (afterPlace) where.push(sortedAfter(b, 'r', q, sortsDriven ? 'm.k0' : undefined));
  if (bounded && keyset) where.push(withinBound(b, q));
  // A later page as of the first page's time (SearchQuery.asOf): a test of each resource row read, never a way
  // into the type (unindexed outside `_lastUpdated` order, where SQLite would read every older row by that index).
  if (withCursor && q.asOf !== undefined && keyset) {
    const col = keyset.by === 'lastUpdated' ? 'r.last_updated' : b.dialect.unindexed('r.last_updated');
    where.push(`${col} <= ${b.v(q.asOf)}`);
  }
  if (ids !== undefined) return { from: b.dialect.byIds!(b, ids, ['resources r', ...b.laterals].join(' '), where.join(' AND ')), where: '1 = 1', alone: false };
  const alone = driven !== undefined && where.length === base.length + (afterPlace ? 1 : 0) && b.laterals.length === 0;
  return { from: [from, ...b.laterals].join(' '), where: where.join(' AND '), ...(driven !== undefined && { driven }), alone };
}

/** The ids that every list of `q` names (listsIds), each once, in the first's order. */
function commonIds(q: SearchQuery): string[] {
  const [first, ...rest] = (q.where ?? []).filter(listsIds);
  const others = rest.map((c) => new Set(c.ids));
  return [...new Set(first!.ids)].filter((id) => others.every((o) => o.has(id)));
}

/**
 * The type's `rows`-th resource in a keyset sort's order after the query's cursor (from the (tenant,
 * type, key) index alone: deletions count among the rows), as `SELECT <columns> FROM ...`: where
 * plannedSearch's first reading of the type in order ends.
 */
function nthRow(b: SqlBuilder, q: SearchQuery, rows: number, columns: string): string {
  const keyset = keysetSort(q.sort)!;
  const dir = keyset.descending ? ' DESC' : '';
  const where = [`x.tenant = ${b.v(b.tenant)}`, `x.type = ${b.v(q.type)}`];
  if (b.dialect.rangesFirstRows) where.push(keyset.by === 'id' ? `x.id > '' AND x.id < '${AFTER_PREFIX}'` : `x.last_updated > ${-Number.MAX_SAFE_INTEGER} AND x.last_updated < ${Number.MAX_SAFE_INTEGER}`);
  if (q.after) where.push(keysetAfter(b, 'x', keyset, q.after));
  const order = keyset.by === 'id' ? `x.id${dir}` : `x.last_updated${dir}, x.id${dir}`;
  return `SELECT ${columns} FROM resources x WHERE ${where.join(' AND ')} ORDER BY ${order} LIMIT 1 OFFSET ${Math.max(0, Math.trunc(rows) - 1)}`;
}

/**
 * Row `r` is among the type's first resources in a keyset sort's order, up to the one the statement's
 * `bound` holds (nthRow), or the type has fewer: a bound on the sort key, so that the resources are
 * still read in order, and the reading stops at the page's last match.
 */
function withinBound(b: SqlBuilder, q: SearchQuery): string {
  const keyset = keysetSort(q.sort)!;
  const op = keyset.descending ? '>=' : '<=';
  const past = (col: string, value: SqlValue) => `COALESCE((SELECT ${col} FROM bound), ${b.v(value)})`;
  // Past every resource id: '' descending; ascending, a string after any (ids are of `[A-Za-z0-9\-.]`).
  const pastIds = keyset.descending ? '' : AFTER_PREFIX;
  if (keyset.by === 'id') return `r.id ${op} ${past('id', pastIds)}`;
  const pastTimes = keyset.descending ? -Number.MAX_SAFE_INTEGER : Number.MAX_SAFE_INTEGER;
  return `(r.last_updated, r.id) ${op} (${past('last_updated', pastTimes)}, ${past('id', pastIds)})`;
}

/** Row `a` comes after the cursor in the keyset sort's order. */
function keysetAfter(b: SqlBuilder, a: string, keyset: SortKey, at: SearchCursor): string {
  const op = keyset.descending ? '<' : '>';
  if (keyset.by === 'id') return `${a}.id ${op} ${b.v(at.id)}`;
  return `(${a}.last_updated, ${a}.id) ${op} (${b.v(at.lastUpdated)}, ${b.v(at.id)})`;
}

/**
 * Row `a` comes after `q.afterKeys` in a sort on parameters (SearchQuery.afterKeys): its keys, then its
 * id, compared as the page's ORDER BY compares them (each key in its direction, nulls last; ties by id
 * ascending unless the sort names `_id`). A key of none (null) is followed only by others of none.
 * `firstKey`: the first key's expression where the statement has it already (sortedDriven's `m.k0`).
 */
function sortedAfter(b: SqlBuilder, a: string, q: SearchQuery, firstKey?: string): string {
  const at = q.afterKeys!;
  // Each key's expression is made where the statement uses it: its values are bound as it is made, and
  // a value bound but not used is one PostgreSQL cannot type (a last key of none is never compared).
  const lazy = (make: () => string): (() => string) => {
    let expr: string | undefined;
    return () => (expr ??= make());
  };
  const terms: { expr: () => string; value: string | number | null; descending: boolean; nullable: boolean }[] = q.sort.map((k, i) => ({
    expr: lazy(() => (i === 0 && firstKey !== undefined ? firstKey : b.sortKey(k, a, q.type)[0])), value: at.keys[i] ?? null, descending: k.descending, nullable: k.by === 'param',
  }));
  if (!q.sort.some((k) => k.by === 'id')) terms.push({ expr: () => `${a}.id`, value: at.id, descending: false, nullable: false });
  const after = (i: number): string => {
    const t = terms[i]!;
    let beyond: string;
    if (t.value === null) beyond = '1 = 0';
    else {
      const past = `${t.expr()} ${t.descending ? '<' : '>'} ${b.v(t.value)}`;
      beyond = t.nullable ? `(${past} OR ${t.expr()} IS NULL)` : past;
    }
    if (i === terms.length - 1) return beyond;
    const same = t.value === null ? `${t.expr()} IS NULL` : `${t.expr()} = ${b.v(t.value)}`;
    return `(${beyond} OR (${same} AND ${after(i + 1)}))`;
  };
  return after(0);
}

const COLUMNS = 'r.type, r.id, r.version_id, r.last_updated, r.deleted, r.content';

/**
 * The page of current, live resources a query selects, in its sort order (ties by id). `within` (for
 * plannedSearch, undriven in a keyset sort's order): of those among the type's first so many
 * resources, each row with the keys of the last of them (`bound_id`, `bound_last_updated`; null when
 * the type has fewer), read in the same statement.
 */
export function searchSql(dialect: Dialect, tenant: string, q: SearchQuery, plan?: SearchPlan, within?: number): { sql: string; values: SqlValue[] } {
  const b = new SqlBuilder(dialect, tenant, plan || idsDrive(dialect, q) ? dialect.probe : 'in');
  const keyset = keysetSort(q.sort);
  const bounded = within !== undefined && plan?.driver === undefined && keyset !== undefined;
  // The last of the first resources, read once (nthRow; its values come first in the statement).
  b.lastUpdatedUnindexed = dialect.plansLastUpdated && plan?.driver === undefined && keyset?.by !== 'lastUpdated';
  b.hasProbed = bounded;
  // A sort walk's windows, and those of its ties (tiesPage): each reads a bounded window of rows.
  b.chainProbed = plan?.driver === 'sort' || plan?.tied !== undefined;
  const bound = bounded ? `WITH bound AS MATERIALIZED (${nthRow(b, q, within!, keyset!.by === 'id' ? 'x.id AS id' : 'x.id AS id, x.last_updated AS last_updated')}) ` : '';
  const key = carriedKey(q, plan);
  const { from, where, driven, alone } = fromWhere(b, q, true, plan, bounded, true, key);
  if (alone && !keyset && q.sort[0]!.by === 'param') return sortedDriven(b, q, driven!, where, key !== undefined);
  let keys: [string, string][];
  if (keyset) {
    const dir = keyset.descending ? ' DESC' : '';
    keys = keyset.by === 'id' ? [['r.id', dir]] : [['r.last_updated', dir], ['r.id', dir]];
  } else {
    keys = q.sort.map((k, i) => (i === 0 && key !== undefined ? carried(k) : b.sortKey(k, 'r', q.type)));
    if (!q.sort.some((k) => k.by === 'id')) keys.push(['r.id', '']);
  }
  const page = ` LIMIT ${b.v(q.count)}${!keyset && q.offset ? ` OFFSET ${b.v(q.offset)}` : ''}`;
  if (plan?.driver === undefined) {
    // The (tenant, type, id) index has no `last_updated`: in id order the key is the id alone.
    const boundKeys = !bounded ? '' : `, (SELECT id FROM bound) AS bound_id, ${keyset!.by === 'id' ? '0' : '(SELECT last_updated FROM bound)'} AS bound_last_updated`;
    return { sql: `${bound}SELECT ${COLUMNS}${boundKeys} FROM ${from} WHERE ${where} ORDER BY ${keys.map(([e, o]) => e + o).join(', ')}${page}`, values: b.values };
  }
  // Driven, every matching row is sorted: the page is chosen on the keys alone and only its rows'
  // content is read (the sort would otherwise carry every match's content).
  const inner = `SELECT r.pk AS pk, ${keys.map(([e], i) => `${e} AS k${i}`).join(', ')} FROM ${from} WHERE ${where} ` +
    `ORDER BY ${keys.map(([, o], i) => `k${i}${o}`).join(', ')}${page}`;
  const sql = `SELECT ${COLUMNS} FROM (${inner}) p ${dialect.driverJoin} resources r ON r.pk = p.pk ORDER BY ${keys.map(([, o], i) => `p.k${i}${o}`).join(', ')}`;
  return { sql, values: b.values };
}

/**
 * The column of the driver's rows that is each resource's first sort key, carried with them (`key`)
 * in place of a probe of the resource's rows of the parameter per match: the driver is a date test on
 * the sort's own parameter, of which a resource has at most one row (SortKey.oneRow). On SQLite
 * `Encounter?date=<month>&_sort=-date` (653 matches of a million resources) took 2.7 ms a statement
 * with a `MAX(high)` probe per match, 0.93 ms carrying the rows' `high`.
 */
function carriedKey(q: SearchQuery, plan: SearchPlan | undefined): string | undefined {
  const driver = plan?.driver;
  const k = q.sort[0];
  if (typeof driver !== 'number' || plan!.intersect !== undefined || k?.by !== 'param' || !k.oneRow || k.target !== undefined) return undefined;
  const c = q.where![driver]!;
  return c.kind === 'date' && c.param === k.param && k.table === 'search_range' ? sortColumn(k) : undefined;
}

/** The sort key the driver's rows carry (carriedKey), as SqlBuilder.sortKey gives it. */
const carried = (k: SortKey): [string, string] => [`${DRIVER_ROW}.key`, `${k.descending ? ' DESC' : ''} NULLS LAST`];

/**
 * The page of a driven search sorted on a parameter, when the driver's rows are the whole answer
 * (fromWhere's `alone`). The first sort key is computed on the driver's rows alone, and the page's
 * last row's value of it (the threshold: the (offset + count)-th in that order) bounds the page: only
 * the rows at least as far up as the threshold are read from the resources, for their id (ties are
 * ordered by id) and the other keys; `where` (tenant, type, liveness) is tested on those alone.
 * Before, every match's resource row was read: on SQLite a third of `Encounter?date=<month>
 * &_sort=-date` (653 matches) on a million resources. No threshold (fewer matches than the page
 * reaches, or a page reaching the resources without the key, which sort last): every match is read.
 */
function sortedDriven(b: SqlBuilder, q: SearchQuery, driven: string, where: string, keyed: boolean): { sql: string; values: SqlValue[] } {
  const [first, order] = keyed ? carried(q.sort[0]!) : b.sortKey(q.sort[0]!, 'r', q.type, `${DRIVER_ROW}.res`);
  const rest = q.sort.slice(1).map((k) => b.sortKey(k, 'r', q.type));
  if (!q.sort.some((k) => k.by === 'id')) rest.push(['r.id', '']);
  const keys: [string, string][] = [['m.k0', order], ...rest];
  const offset = q.offset ?? 0;
  const threshold = `(SELECT t.v FROM t)`;
  const descending = q.sort[0]!.descending;
  const cmp = descending ? '>=' : '<=';
  // After a place (`where` holds sortedAfter): the rows whose first key is at the place's or beyond it
  // (or none) are read, and the threshold is that of the rows strictly beyond it, so that the rows tied
  // with the place, before or after it, leave the page's rows within the threshold.
  const place = q.afterKeys === undefined ? undefined : q.afterKeys.keys[0] ?? null;
  const beyond = place === undefined ? '' : ` WHERE ${place === null ? '1 = 0' : `m.k0 ${descending ? '<' : '>'} ${b.v(place)}`}`;
  const from = place === undefined ? '' : ` AND ${place === null ? 'm.k0 IS NULL' : `(m.k0 ${descending ? '<=' : '>='} ${b.v(place)} OR m.k0 IS NULL)`}`;
  const sql =
    `WITH m AS MATERIALIZED (SELECT ${DRIVER_ROW}.res AS pk, ${first} AS k0 FROM ${driven}), ` +
    `t AS MATERIALIZED (SELECT m.k0 AS v FROM m${beyond} ORDER BY m.k0${order} LIMIT 1 OFFSET ${b.v(Math.max(0, offset + q.count - 1))}) ` +
    `SELECT ${COLUMNS} FROM (SELECT m.pk AS pk, ${keys.map(([e], i) => `${e} AS k${i}`).join(', ')} FROM m ${b.dialect.resourceOf('m.pk')} ` +
    `WHERE ${where}${from} AND (${threshold} IS NULL OR m.k0 ${cmp} ${threshold}) ORDER BY ${keys.map(([, o], i) => `k${i}${o}`).join(', ')} LIMIT ${b.v(q.count)}${offset ? ` OFFSET ${b.v(offset)}` : ''}) p ` +
    `${b.dialect.driverJoin} resources r ON r.pk = p.pk ORDER BY ${keys.map(([, o], i) => `p.k${i}${o}`).join(', ')}`;
  return { sql, values: b.values };
}

/**
 * The form of countSql's statement for `q` as planned: a count on the index rows of one plain condition
 * (or of the compartment) is plain, a driven count as its page statement is (fixedForm), and the others
 * (sets intersected, or a condition whose rows are a set) are left to the database's plan of their values.
 */
export function countForm(q: SearchQuery, plan?: SearchPlan): StatementForm | undefined {
  if (countsOnIndex(q) && plan?.driver !== 'sort') return fixedForm(q) === 'plain' ? 'plain' : undefined;
  return plan?.driver !== undefined ? fixedForm(q) : undefined;
}

/** How many current, live resources a query selects (no paging). */
export function countSql(dialect: Dialect, tenant: string, q: SearchQuery, plan?: SearchPlan): { sql: string; values: SqlValue[] } {
  // Ids listed, each is read by its key and the other conditions probed on it (fromWhere, idsDrive).
  const ids = plan === undefined && idsDrive(dialect, q);
  const b = new SqlBuilder(dialect, tenant, plan || ids ? dialect.probe : 'in');
  // Driven by a sort key's rows (withoutKey: the matches with the key), a chain probed on each of them where the
  // dialect measured that faster (Dialect.countProbesChains), as the walk's windows probe it (searchSql).
  b.chainProbed = plan?.driver === 'sort' && dialect.countProbesChains;
  // Driven by a sort key's rows (withoutKey: the matches with the key), not the one condition's (or the compartment's) alone.
  const direct = ids || plan?.driver === 'sort' ? undefined : indexCount(b, q);
  if (direct !== undefined) return { sql: direct, values: b.values };
  const sets = plan === undefined && !ids ? intersected(b, q) : undefined;
  if (sets !== undefined) return { sql: `SELECT COUNT(*) AS n FROM (${sets}) x`, values: b.values };
  // Driven, with every other condition tested on the driver's rows: those rows are index (or
  // compartment) rows, which exist for the current, live versions of the tenant's type only, so their
  // distinct resources are the count, and no resource row is read (`Observation?category=vital-signs
  // &code=8867-4&_summary=count`, 80,295 of 686,776: 399 against 119 ms on SQLite). Not `_lastUpdated`,
  // whose rows are the resources', nor a last resort (`:missing=true`, `:not`: the type's resources,
  // deleted ones too, without the parameter's rows).
  const driver = plan?.driver;
  const onDriverRows = (driver === 'compartment' || (typeof driver === 'number' && drivesOnIndexRows(q.where![driver]!))) &&
    (q.compartment === undefined || driver === 'compartment') &&
    (q.where ?? []).every((c, i) => i === driver || isImplied(c) || onIndexRows(c));
  const { from, where, driven } = fromWhere(b, q, false, plan, false, !onDriverRows);
  if (onDriverRows) return { sql: `SELECT COUNT(*) AS n FROM ${driven!}`, values: b.values };
  return { sql: `SELECT COUNT(*) AS n FROM ${from} WHERE ${where}`, values: b.values };
}

/** Whether a condition's driver rows (SqlBuilder.driverRows) are index rows: not `_lastUpdated`'s, nor a last resort's. */
const drivesOnIndexRows = (c: Condition): boolean => canDrive(c) && c.kind !== 'lastUpdated';

/**
 * For an unplanned count (PostgreSQL's, where no condition has few rows), the conditions' index rows
 * (and the compartment's) intersected, less those of the negated ones (a token's `:not`,
 * `:missing=true`), when every condition is one of those and one at least is not negated: index rows
 * exist for current, live versions only, so no resource row is read, and PostgreSQL hashes the sets
 * rather than test each resource of the type against each (`Observation?category=vital-signs
 * &code=8867-4&_summary=count`, 80,295 of 686,776: 1.7 s against 0.24 s). Each set is a subquery of
 * its own: a condition's rows may be a compound statement (an `or`'s UNION ALL, SQLite's words).
 * Not `_lastUpdated`, whose rows are the resources'.
 */
function intersected(b: SqlBuilder, q: SearchQuery): string | undefined {
  const where = (q.where ?? []).filter((c) => !isImplied(c));
  const positive = where.filter(drivesOnIndexRows);
  const negated = where.flatMap((c): Condition[] => (c.kind === 'token' && c.not ? [{ ...c, not: false }] : c.kind === 'missing' && c.missing ? [{ ...c, missing: false }] : []));
  const sets = positive.length + (q.compartment === undefined ? 0 : 1);
  if (sets === 0 || sets + negated.length < 2 || positive.length + negated.length < where.length) return undefined;
  const rows = (sql: string) => `SELECT res FROM (${sql}) ${b.alias('i')}`;
  const kept = positive.map((c) => rows(b.driverRows(c, q.type)!));
  if (q.compartment !== undefined) kept.push(rows(compartmentRows(b, q.type, q.compartment)));
  return [kept.join(' INTERSECT '), ...negated.map((c) => rows(b.driverRows(c, q.type)!))].join(' EXCEPT ');
}

/**
 * A count the index rows answer alone, for a query of one condition that can drive a search, or of
 * the compartment alone: index and compartment rows exist for current, live versions only (writers
 * remove them on update and delete), so the resources need not be read.
 */
function indexCount(b: SqlBuilder, q: SearchQuery): string | undefined {
  if (!countsOnIndex(q)) return undefined;
  if (q.compartment !== undefined) return `SELECT COUNT(*) AS n FROM (${compartmentRows(b, q.type, q.compartment)}) d`;
  return b.countResources(q.where![0]!, q.type);
}

/**
 * The PlanContext of `q` for planSearch: `counting` for countSql (every match is read), `typeSize` the
 * adapter's estimate of the resources of `q.type` (TypeSizes).
 */
export function planContext(dialect: Dialect, tenant: string, q: SearchQuery, counting: boolean, typeSize: () => number | Promise<number>): PlanContext {
  const keyset = !counting && keysetSort(q.sort) !== undefined;
  const tested = (q.where ?? []).map((c, i) => ({ c, i })).filter(({ c }) => sampled(c) && !isImplied(c));
  const lone = q.compartment === undefined && tested.length === 1 && canDrive(tested[0]!.c) ? tested[0]!.i : undefined;
  const pair = q.compartment === undefined && tested.length === 2 && tested.every(({ c }) => canDrive(c)) ? [tested[0]!.i, tested[1]!.i] as const : undefined;
  return {
    ...(lone !== undefined && { lone }),
    ...(pair !== undefined && { pair }),
    need: keyset ? (q.offset ?? 0) + q.count : Infinity,
    narrowed: (q.where ?? []).filter((c) => !isImplied(c)).length + (q.compartment === undefined ? 0 : 1) > 1,
    costs: dialect.costs,
    typeSize,
    sample(rows) {
      // The type's first rows in id order, from its (tenant, type, id) index alone: an estimate need
      // not skip deletions, and the conditions sampled probe index rows by `r.pk` alone.
      const b = new SqlBuilder(dialect, tenant, dialect.probe);
      const tests = (q.where ?? []).filter((c) => sampled(c) && !isImplied(c)).map((c) => b.condition(c, 'r', q.type));
      if (q.compartment !== undefined) tests.push(compartmentProbe(b, 'r', q.compartment));
      const from = `(SELECT x.pk FROM resources x WHERE x.tenant = ${b.v(tenant)} AND x.type = ${b.v(q.type)} ORDER BY x.id LIMIT ${Math.trunc(rows)}) r`;
      return { sql: `SELECT COUNT(*) AS n FROM ${[from, ...b.laterals].join(' ')}${tests.length ? ` WHERE ${tests.join(' AND ')}` : ''}`, values: b.values };
    },
  };
}

/** Whether countSql counts `q` on the index rows alone (then it needs no SearchPlan). */
export function countsOnIndex(q: SearchQuery): boolean {
  const where = q.where ?? [];
  return q.compartment === undefined ? where.length === 1 && canDrive(where[0]!) : where.length === 0;
}

/** ORed filters, each its ANDed conditions, on the outer row `r` of `type` ('1 = 1' for none). */
export function filtersSql(b: SqlBuilder, type: string, filters: Condition[][]): string {
  return `(${orOf(filters.map((f) => (f.length ? `(${f.map((c) => b.condition(c, 'r', type)).join(' AND ')})` : '1 = 1')))})`;
}

/**
 * Conditions on the resource row `r` of `type` (joined by its `pk`) that keep what a search's
 * conditions and patient compartment select, each an index probe by `r.pk` (EXISTS), never a set: for
 * reads that walk a few resources' index rows and keep those of matches (codingPairs' `matching`).
 * `b` must probe by EXISTS ('exists'); '1 = 1' for none.
 */
export function matchingSql(b: SqlBuilder, type: string, matching: { where: Condition[]; compartment?: string }): string {
  if (b.correlation !== 'exists') throw new Error('matchingSql probes by EXISTS');
  b.hasProbed = true;
  // SQLite's full-text probe per resource costs far more than reading the words' rows once as a set
  // (`_text=blood` over a patient's 6,675 Observations: 1.2 s probed, 5 ms as a set), so there they
  // are a set, as in an undriven search.
  b.textAsSet = b.dialect.text.setWhenUndriven;
  const tests = matching.where.filter((c) => !isImplied(c)).map((c) => b.condition(c, 'r', type));
  if (matching.compartment !== undefined) tests.push(compartmentProbe(b, 'r', matching.compartment));
  if (b.laterals.length) throw new Error('matchingSql: a condition needs a lateral join');
  return tests.length ? tests.join(' AND ') : '1 = 1';
}
