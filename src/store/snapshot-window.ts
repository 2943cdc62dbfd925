/**
 * The resources a page of a filtered export snapshot (SnapshotQuery.filters, Bulk Data `_typeFilter`)
 * can hold, found through the filter's token rows instead of by probing every resource of the type:
 * `Observation?category=laboratory` on 686,776 Observations read them all and probed each for its
 * category (1.9 s on PostgreSQL for the 121,450 matches), where the laboratory rows of the category's
 * key, in resource order, name the matches alone. Both adapters' page statements keep every condition;
 * the window only narrows the resources they read.
 */
import { SqlBuilder, type Dialect, type SearchRunner } from './search-sql.ts';

/** Runs a statement on the snapshot's connection. */
export type WindowRows = SearchRunner<Record<string, unknown>>['rows'];
import type { Condition, SnapshotQuery, TokenValue } from './types.ts';

/**
 * Index ranges a window reads at most (one per code and key of the codes' parameter): beyond, the
 * page statement reads the type in order as before.
 */
export const WINDOW_MAX_RANGES = 32;

/** A token or reference condition whose every value names a code. */
type Codes = { param: string; values: (TokenValue & { value: string })[] };

/**
 * The condition of one ORed alternative whose rows are ranges of the value-first token index, each in
 * resource order (k, value, res): a token or reference of codes, not negated. A system alone, a string
 * prefix or a date range is a range of values, whose rows no index holds in resource order.
 */
function codesOf(alternative: Condition[]): Codes | undefined {
  for (const c of alternative) {
    // Folded (`_filter`'s `eq`), a code's rows are several ranges; `unequal` reads the others.
    if (c.kind === 'token' && !c.not && !c.fold && !c.unequal && c.values.length > 0 && c.values.every((v) => v.value !== undefined)) {
      return { param: c.param, values: c.values as Codes['values'] };
    }
  }
  return undefined;
}

/**
 * The resources (pks, ascending) a page may hold; `full` when more may follow the last. `exact`: each
 * alternative is its codes alone, so a resource updated at or before `at` is in the window only if it
 * passes the filter, and the page statement need not probe it again.
 */
export interface SnapshotWindow {
  pks: number[];
  full: boolean;
  exact: boolean;
}

/**
 * The first `q.limit` resources after `q.after` that a page of `q` can select: those with a row of
 * each alternative's codes (codesOf), and every resource of the type updated after `q.at` (the page
 * returns those for the caller to judge on their version as of `at`, whatever their rows say now).
 * Each range is read from `q.after` for at most `q.limit` rows, so a page costs what it holds, never
 * the whole range. Undefined where the page statement must read the type in order: no filter, an
 * alternative without codes, too many ranges, `since` (its deletions have no rows to find them by) or
 * named ids (already few).
 */
export async function snapshotWindow(
  dialect: Dialect, tenant: string, q: SnapshotQuery, rows: WindowRows, crowded?: CrowdedSince,
): Promise<SnapshotWindow | undefined> {
  if (q.referringTo && q.since === undefined && q.ids === undefined) return referringWindow(dialect, tenant, q, q.referringTo, rows);
  if (q.since !== undefined && !q.joinedSince && q.ids === undefined) return sinceWindow(dialect, tenant, q, q.since, rows, crowded);
  if (!q.filters?.length || q.since !== undefined || q.ids !== undefined) return undefined;
  const chosen: Codes[] = [];
  for (const alternative of q.filters) {
    const codes = codesOf(alternative);
    if (!codes) return undefined;
    chosen.push(codes);
  }
  // The keys of the codes' parameters: one range per key a code's system admits (any, without one).
  const kb = new SqlBuilder(dialect, tenant);
  const params = [...new Set(chosen.map((c) => c.param))];
  const keys = (await rows(
    `SELECT k, param, system FROM search_keys WHERE tenant = ${kb.v(tenant)} AND type = ${kb.v(q.type)} AND param IN (${params.map((p) => kb.v(p)).join(', ')})`,
    kb.values,
  )) as { k: number | string; param: string; system: string }[];
  const ranges = new Map<string, { k: number; value: string }>();
  for (const c of chosen) {
    for (const v of c.values) {
      for (const key of keys) {
        if (key.param !== c.param || (v.system !== undefined && key.system !== v.system)) continue;
        ranges.set(`${key.k}\u0000${v.value}`, { k: Number(key.k), value: v.value });
      }
    }
  }
  if (ranges.size > WINDOW_MAX_RANGES) return undefined;
  const b = new SqlBuilder(dialect, tenant);
  const after = q.after ?? 0;
  const arms = [...ranges.values()].map(({ k, value }, i) =>
    `SELECT a${i}.res FROM (SELECT s.res FROM search_index s WHERE s.k = ${b.v(k)} AND s.value = ${b.v(value)} AND s.res > ${b.v(after)} ORDER BY s.res LIMIT ${b.v(q.limit)}) a${i}`);
  arms.push(changedSince(b, tenant, q));
  const found = await rows(`SELECT DISTINCT w.res FROM (${arms.join(' UNION ALL ')}) w ORDER BY w.res LIMIT ${b.v(q.limit)}`, b.values);
  const pks = found.map((r) => Number(r.res));
  return { pks, full: pks.length === q.limit, exact: q.filters.every((alternative) => alternative.length === 1) };
}

/**
 * The arm of every resource of the type updated after `q.at`: few or none, read by the (tenant, type,
 * last_updated) index, their pk unindexed so that neither database walks the type in pk order looking for them.
 */
function changedSince(b: SqlBuilder, tenant: string, q: SnapshotQuery): string {
  const pk = b.dialect.unindexed('r.pk');
  return `SELECT u.res FROM (SELECT r.pk AS res FROM resources r WHERE r.tenant = ${b.v(tenant)} AND r.type = ${b.v(q.type)} ` +
    `AND r.last_updated > ${b.v(q.at)} AND ${pk} > ${b.v(q.after ?? 0)} ORDER BY ${pk} LIMIT ${b.v(q.limit)}) u`;
}

/**
 * Rows of a type changed since `_since` up to which a page finds them by the (tenant, type, last_updated) index
 * (sinceWindow); with more, the page reads the type in key order, testing each row's time.
 */
export const SINCE_WINDOW_MAX = 10_000;

/**
 * The (tenant, type, `_since`) of snapshots that found more than SINCE_WINDOW_MAX changed, kept by an adapter's
 * snapshot reader so that the later pages of that scan do not look again: the rows last updated after a time only
 * grow in number (a deletion keeps its row), so one found crowded stays so.
 */
export type CrowdedSince = Set<string>;
const CROWDED_KEPT = 1000;

/**
 * The window of a snapshot with `_since` (not of joined members, whose records count whatever their time): the
 * resources of the type last updated after it, which hold every version the page can return (an update since, a
 * deletion since, one changed after `q.at`), read by the last-updated index, at most SINCE_WINDOW_MAX + 1 of them,
 * and those after `q.after` kept in key order. Read in key order instead, an incremental export read every resource
 * of each type to find the few changed (100,000 Provenance for none: 80-110 ms a type; docs/PERFORMANCE.md).
 * Undefined when more changed: each page would read them all again, which costs more than the scan once they are many.
 */
async function sinceWindow(dialect: Dialect, tenant: string, q: SnapshotQuery, since: number, rows: WindowRows, crowded?: CrowdedSince): Promise<SnapshotWindow | undefined> {
  const key = `${tenant}\u0000${q.type}\u0000${since}`;
  if (crowded?.has(key)) return undefined;
  const b = new SqlBuilder(dialect, tenant);
  const found = await rows(
    `SELECT r.pk AS res FROM resources r WHERE r.tenant = ${b.v(tenant)} AND r.type = ${b.v(q.type)} AND r.last_updated > ${b.v(since)} LIMIT ${b.v(SINCE_WINDOW_MAX + 1)}`,
    b.values,
  );
  if (found.length > SINCE_WINDOW_MAX) {
    if (crowded && crowded.size >= CROWDED_KEPT) crowded.clear();
    crowded?.add(key);
    return undefined;
  }
  const after = q.after ?? 0;
  const pks = found.map((r) => Number(r.res)).filter((pk) => pk > after).sort((x, y) => x - y).slice(0, q.limit);
  return { pks, full: pks.length === q.limit, exact: false };
}

/**
 * The window of SnapshotQuery.referringTo: the resources whose `param` rows name a resource of `types` in the
 * compartment of one of the job's (joined) patients, read from the patients' compartment rows, each target's
 * rows of `param` by the value-first index; those naming a resource of `types` updated after `q.at` (its
 * compartment then may not be the index's), by the (tenant, type, last_updated) index; and the type's resources
 * updated after `q.at`. A Group export with `_since` read every Provenance of the tenant last updated before it
 * for the Provenance of the members who joined since (docs/PERFORMANCE.md). The joins are CROSS JOINs with
 * their conditions in WHERE, so that SQLite, without statistics, keeps this order; PostgreSQL plans them freely.
 * Each arm reads from `q.after` and stops at `q.limit` distinct resources (a Provenance naming several of the
 * members' records, or one record in two members' compartments, has a row for each: counted as rows, a page of
 * them ended short and the scan stopped there): a page costs the members' compartment rows, never the type.
 */
async function referringWindow(
  dialect: Dialect, tenant: string, q: SnapshotQuery, to: NonNullable<SnapshotQuery['referringTo']>, rows: WindowRows,
): Promise<SnapshotWindow> {
  const b = new SqlBuilder(dialect, tenant);
  const after = q.after ?? 0;
  const types = to.types.length ? to.types.map((t) => b.v(t)).join(', ') : 'NULL';
  /** The rows of `param` naming target `t` (a resources row), after the page's start. */
  const named = (t: string) => `CROSS JOIN search_keys k CROSS JOIN search_index s WHERE k.tenant = ${b.v(tenant)} AND k.type = ${b.v(q.type)} ` +
    `AND k.param = ${b.v(to.param)} AND k.system = ${t}.type AND k.code = '' AND s.k = k.k AND s.value = ${t}.id AND s.res > ${b.v(after)}`;
  const joined = to.compartment.joinedOnly ? 'AND p.joined = TRUE' : '';
  const members = `SELECT m.res FROM (SELECT DISTINCT s.res FROM export_patients p CROSS JOIN compartments c CROSS JOIN resources t ${named('t')} ` +
    `AND p.job_id = ${b.v(to.compartment.jobId)} ${joined} AND c.tenant = ${b.v(tenant)} AND c.patient = p.patient AND c.type IN (${types}) ` +
    `AND t.pk = c.res ORDER BY s.res LIMIT ${b.v(q.limit)}) m`;
  const changed = `SELECT x.res FROM (SELECT DISTINCT s.res FROM resources t ${named('t')} AND t.tenant = ${b.v(tenant)} AND t.type IN (${types}) ` +
    `AND t.last_updated > ${b.v(q.at)} ORDER BY s.res LIMIT ${b.v(q.limit)}) x`;
  const arms = [members, changed, changedSince(b, tenant, q)];
  const found = await rows(`SELECT DISTINCT w.res FROM (${arms.join(' UNION ALL ')}) w ORDER BY w.res LIMIT ${b.v(q.limit)}`, b.values);
  const pks = found.map((r) => Number(r.res));
  return { pks, full: pks.length === q.limit, exact: false };
}
