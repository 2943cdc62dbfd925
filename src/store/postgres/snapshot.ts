import { boundedConditions } from '../index-limits.ts';
import { filtersSql, POSTGRES, SqlBuilder, type Dialect, type SqlValue } from '../search-sql.ts';
import { snapshotWindow, type CrowdedSince, type SnapshotWindow } from '../snapshot-window.ts';
import type { Condition, SnapshotPage, SnapshotQuery, SnapshotRow } from '../types.ts';
import type { Pg } from './db.ts';

/**
 * Per-row probes as LATERAL subqueries with LIMIT 1 (SqlBuilder correlation 'lateral'): the planner must
 * run them as a nested loop on the `res` indexes. (Written as EXISTS under an OR, Postgres may hash
 * every matching index row once per page instead, which makes a scan quadratic.)
 */
function compartmentCondition(b: SqlBuilder, q: SnapshotQuery, joinedOnly: boolean): string {
  const c = q.compartment!;
  if (c.kind === 'any') return b.lateral('SELECT 1 AS hit FROM compartments c WHERE c.res = r.pk');
  const joined = joinedOnly || c.joinedOnly ? 'AND p.joined' : '';
  // Nested LATERALs fix the order: the resource's compartment rows first, then one key probe per patient.
  return b.lateral(`SELECT 1 AS hit FROM compartments c
    CROSS JOIN LATERAL (SELECT 1 FROM export_patients p WHERE p.job_id = ${b.v(c.jobId)} AND p.patient = c.patient ${joined} LIMIT 1) jp
    WHERE c.res = r.pk`);
}

/**
 * The page statement (the same shape as the SQLite adapter's): a current, live version updated at or
 * before `at` must pass every condition here; rows updated after `at` (and, with `since`, deletions)
 * come back for resolving from the history and checking by the caller. `window`: the only resources
 * the page can hold (snapshotWindow), read by their pk; an exact window's resources pass the filters already.
 */
function pageQuery(dialect: Dialect, tenant: string, q: SnapshotQuery, window?: SnapshotWindow): { sql: string; values: SqlValue[] } {
  const b = new SqlBuilder(dialect, tenant, 'lateral');
  const live: string[] = ['NOT r.deleted', `r.last_updated <= ${b.v(q.at)}`];
  if (q.since !== undefined) {
    live.push(q.joinedSince && q.compartment?.kind === 'job'
      ? `(r.last_updated > ${b.v(q.since)} OR ${compartmentCondition(b, q, true)})`
      : `r.last_updated > ${b.v(q.since)}`);
  }
  if (q.compartment) live.push(compartmentCondition(b, q, false));
  if (q.filters?.length && !window?.exact) live.push(filtersSql(b, q.type, q.filters));
  const alternatives = [`(${live.join(' AND ')})`, `r.last_updated > ${b.v(q.at)}`];
  if (q.since !== undefined) alternatives.push(`(r.deleted AND r.last_updated > ${b.v(q.since)})`);
  const within = window ? `AND r.pk = ANY(${b.v(`{${window.pks.join(',')}}`)}::bigint[])` : '';
  const where = `r.pk > ${b.v(q.after ?? 0)} ${within} AND (${alternatives.join(' OR ')})`;
  // Three columns only (every raw column costs a Buffer per row): the key, whether the database judged
  // the row (current, live, updated at or before `at`), and the stored text.
  const columns = `r.pk, (NOT r.deleted AND r.last_updated <= ${b.v(q.at)}) AS judged, r.content`;
  // Named ids (a page of Provenance's targets, the latest Provenance's ids) are each read by the
  // (tenant, type, id) key, the page's conditions probed on its row (Dialect.byIds, as a search by ids
  // is). As `r.id IN (...)` beside the scan's `(tenant || '/' || type)`, which no index holds with the
  // id, every page read every resource of the type and tested it against the list, whatever the
  // statistics: 2,000 ids among 50,000 Observations read all 50,000 (docs/PERFORMANCE.md).
  if (q.ids) {
    const ids = [...new Set(q.ids)];
    if (ids.length === 0) return { sql: `SELECT ${columns} FROM resources r WHERE false`, values: b.values };
    const key = `r.tenant = ${b.v(tenant)} AND r.type = ${b.v(q.type)} AND ${where}`;
    const from = POSTGRES.byIds!(b, ids, ['resources r', ...b.laterals].join(' '), key);
    return { sql: `SELECT ${columns} FROM ${from} ORDER BY r.pk LIMIT ${b.v(q.limit)}`, values: b.values };
  }
  const sql = `SELECT ${columns} FROM resources r ${b.laterals.join(' ')}
    WHERE (r.tenant || '/' || r.type) = ${b.v(`${tenant}/${q.type}`)} AND ${where}
    ORDER BY r.pk LIMIT ${b.v(q.limit)}`;
  return { sql, values: b.values };
}

/** A raw text-format column: numbers and booleans parsed, content kept as bytes. */
const num = (b: Buffer) => Number(b.toString('latin1'));
const T = 0x74;
const NEWLINE = 10;

interface Candidate {
  id: string;
  versionId: number;
  lastUpdated: number;
  deleted: boolean;
}

interface HistoryRow {
  id: string;
  version_id: number;
  last_updated: number;
  deleted: boolean;
  content: string;
  /** Whether the version after it is still stored in history (SnapshotRow.expunged). */
  followed: boolean;
}

/** For rows changed after `at`: their versions as of `at`, by id (one query per page). */
async function versionsAsOf(sql: Pg, tenant: string, q: SnapshotQuery, ids: string[]): Promise<Map<string, HistoryRow>> {
  if (ids.length === 0) return new Map();
  const rows = await sql<HistoryRow[]>`
    SELECT a.*, EXISTS (SELECT 1 FROM resource_history s WHERE s.tenant = ${tenant} AND s.type = ${q.type} AND s.id = a.id AND s.version_id = a.version_id + 1) AS followed
    FROM (
      SELECT DISTINCT ON (id) id, version_id, last_updated, deleted, content FROM resource_history
      WHERE tenant = ${tenant} AND type = ${q.type} AND id = ANY(${ids}::text[]) AND last_updated <= ${q.at}
      ORDER BY id, version_id DESC
    ) a`;
  return new Map(rows.map((r) => [r.id, r]));
}

/** For deletions: the last live version before each, by id. */
async function livesBefore(sql: Pg, tenant: string, type: string, deletions: { id: string; versionId: number }[]): Promise<Map<string, string>> {
  if (deletions.length === 0) return new Map();
  const rows = await sql<{ id: string; content: string }[]>`
    SELECT DISTINCT ON (h.id) h.id, h.content
    FROM resource_history h JOIN unnest(${deletions.map((d) => d.id)}::text[], ${deletions.map((d) => d.versionId)}::int[]) AS v(id, version_id)
      ON h.id = v.id AND h.version_id < v.version_id
    WHERE h.tenant = ${tenant} AND h.type = ${type} AND NOT h.deleted
    ORDER BY h.id, h.version_id DESC`;
  return new Map(rows.map((r) => [r.id, r.content]));
}

/** Resolves the rows the database could not judge into their versions as of `at` (see ResourceRepo.snapshot). */
async function resolve(sql: Pg, tenant: string, q: SnapshotQuery, pks: number[]): Promise<SnapshotRow[]> {
  const current = await sql<{ id: string; version_id: number; last_updated: number; deleted: boolean }[]>`
    SELECT id, version_id, last_updated, deleted FROM resources WHERE pk = ANY(${pks}::bigint[]) ORDER BY pk`;
  const candidates = current.map((c) => ({ id: c.id, versionId: c.version_id, lastUpdated: c.last_updated, deleted: c.deleted }));
  const asOf = await versionsAsOf(sql, tenant, q, candidates.filter((c) => c.lastUpdated > q.at).map((c) => c.id));
  const versions: Candidate[] = [];
  const live = new Map<string, string>();
  const expunged: SnapshotRow[] = [];
  for (const c of candidates) {
    const h = c.lastUpdated > q.at ? asOf.get(c.id) : undefined;
    if (c.lastUpdated > q.at && !h) continue;
    // The version after it expunged: the one current at `at` may be gone (SnapshotRow.expunged).
    if (h && !h.deleted && h.version_id + 1 !== c.versionId && !h.followed) {
      expunged.push({ id: c.id, versionId: h.version_id, lastUpdated: h.last_updated, deleted: false, content: h.content, expunged: true });
      continue;
    }
    if (!h && !c.deleted) continue;
    const v = h ? { id: c.id, versionId: h.version_id, lastUpdated: h.last_updated, deleted: h.deleted } : c;
    if (!v.deleted) live.set(c.id, h!.content);
    if (!v.deleted || (q.since !== undefined && v.lastUpdated > q.since)) versions.push(v);
  }
  const before = await livesBefore(sql, tenant, q.type, versions.filter((v) => v.deleted));
  const out: SnapshotRow[] = [];
  for (const v of versions) {
    const content = v.deleted ? before.get(v.id) : live.get(v.id);
    if (content !== undefined) out.push({ ...v, content });
  }
  return [...out, ...expunged];
}

/**
 * The dialect of a snapshot's filters, as a search's (`dialectOf` in resources.ts): POSTGRES_MISJUDGED where
 * they hold a chain, or another set and the statistics misjudge the type.
 */
export type FiltersDialect = (tenant: string, type: string, conditions: Condition[]) => Promise<Dialect>;

/**
 * Resource snapshots on Postgres: raw rows, so stored content goes out as the bytes Postgres sent. A page's
 * filters are written in `dialect`'s (a chain's targets read from their condition's rows where PostgreSQL has
 * no statistics for them: each page of `Condition?subject:Patient.gender=male` among 20,000 Conditions never
 * analysed compared each of 300 Patients with the 113 gender rows, 33,675 comparisons, 9 ms of 36 ms a page).
 */
export function createPostgresSnapshot(sql: Pg, dialect: FiltersDialect = async () => POSTGRES) {
  const rows = (text: string, values: SqlValue[]) => sql.unsafe<Record<string, unknown>[]>(text, values);
  const crowded: CrowdedSince = new Set();
  return async function snapshot(tenant: string, q: SnapshotQuery): Promise<SnapshotPage> {
    // Filters compare the bounded forms of long values, as the index holds them (index-limits.ts).
    if (q.filters?.length) q = { ...q, filters: q.filters.map(boundedConditions) };
    const window = await snapshotWindow(POSTGRES, tenant, q, rows, crowded);
    if (window?.pks.length === 0) return { lines: new Uint8Array(0), count: 0, recheck: [], next: null };
    const page = pageQuery(q.filters?.length ? await dialect(tenant, q.type, q.filters.flat()) : POSTGRES, tenant, q, window);
    const raw = (await sql.unsafe(page.sql, page.values).raw()) as unknown as Buffer[][];
    const judged: Buffer[] = [];
    const others: number[] = [];
    let size = 0;
    for (const r of raw) {
      if (r[1]![0] === T) {
        judged.push(r[2]!);
        size += r[2]!.byteLength + 1;
      } else others.push(num(r[0]!));
    }
    const lines = new Uint8Array(size);
    let at = 0;
    for (const b of judged) {
      lines.set(b, at);
      at += b.byteLength;
      lines[at++] = NEWLINE;
    }
    const recheck = others.length ? await resolve(sql, tenant, q, others) : [];
    const last = raw[raw.length - 1];
    // A window's resources may all fail the conditions: the next page starts after the window, wherever its rows ended.
    if (window) return { lines, count: judged.length, recheck, next: window.full ? window.pks[window.pks.length - 1]! : null };
    return { lines, count: judged.length, recheck, next: raw.length < q.limit || !last ? null : num(last[0]!) };
  };
}
