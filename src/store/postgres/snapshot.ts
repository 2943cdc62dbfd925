import type postgres from 'postgres';
import type { SnapshotFilter, SnapshotPage, SnapshotQuery, SnapshotRow } from '../types.ts';
import type { Pg } from './db.ts';
import { timeCondition } from './search-sql.ts';

type Fragment = postgres.Fragment;

function join(sql: Pg, parts: Fragment[], op: 'AND' | 'OR'): Fragment {
  return parts.reduce((acc, p) => (op === 'AND' ? sql`${acc} AND ${p}` : sql`${acc} OR ${p}`));
}

/**
 * Per-row probes as LATERAL subqueries with LIMIT 1: the planner must run them as a nested loop on the
 * `res` indexes. (Written as EXISTS under an OR, Postgres may hash every matching index row once per
 * page instead, which makes a scan quadratic.)
 */
class Probes {
  readonly joins: Fragment[] = [];
  constructor(private readonly sql: Pg) {}

  /** Adds `LEFT JOIN LATERAL (<select 1 ... LIMIT 1>) mN` and returns the condition that it matched. */
  add(select: Fragment): Fragment {
    const alias = this.sql(`m${this.joins.length}`);
    this.joins.push(this.sql`LEFT JOIN LATERAL (${select} LIMIT 1) ${alias} ON true`);
    return this.sql`${alias}.hit IS NOT NULL`;
  }
}

function filterCondition(sql: Pg, probes: Probes, f: SnapshotFilter): Fragment {
  const parts: Fragment[] = [];
  if (f.ids) parts.push(sql`r.id = ANY(${f.ids}::text[])`);
  for (const t of f.lastUpdated ?? []) parts.push(timeCondition(sql, t));
  for (const p of f.params ?? []) {
    const alts = p.values.map((v) =>
      v.system === undefined ? sql`s.value = ${v.value!}` : v.value === undefined ? sql`s.system = ${v.system}` : sql`(s.value = ${v.value} AND s.system = ${v.system})`,
    );
    const any = alts.length ? join(sql, alts, 'OR') : sql`false`;
    parts.push(probes.add(sql`SELECT 1 AS hit FROM search_index s WHERE s.res = r.pk AND s.param = ${p.param} AND (${any})`));
  }
  return parts.length ? sql`(${join(sql, parts, 'AND')})` : sql`true`;
}

function compartmentCondition(sql: Pg, probes: Probes, q: SnapshotQuery, joinedOnly: boolean): Fragment {
  const c = q.compartment!;
  if (c.kind === 'any') return probes.add(sql`SELECT 1 AS hit FROM compartments c WHERE c.res = r.pk`);
  const joined = joinedOnly ? sql`AND p.joined` : sql``;
  // Nested LATERALs fix the order: the resource's compartment rows first, then one key probe per patient.
  return probes.add(sql`SELECT 1 AS hit FROM compartments c
    CROSS JOIN LATERAL (SELECT 1 FROM export_patients p WHERE p.job_id = ${c.jobId} AND p.patient = c.patient ${joined} LIMIT 1) jp
    WHERE c.res = r.pk`);
}

/**
 * The page statement (the same shape as the SQLite adapter's): a current, live version updated at or
 * before `at` must pass every condition here; rows updated after `at` (and, with `since`, deletions)
 * come back for resolving from the history and checking by the caller.
 */
function pageQuery(sql: Pg, tenant: string, q: SnapshotQuery): Fragment {
  const probes = new Probes(sql);
  const live: Fragment[] = [sql`NOT r.deleted`, sql`r.last_updated <= ${q.at}`];
  if (q.since !== undefined) {
    live.push(q.joinedSince && q.compartment?.kind === 'job' ? sql`(r.last_updated > ${q.since} OR ${compartmentCondition(sql, probes, q, true)})` : sql`r.last_updated > ${q.since}`);
  }
  if (q.compartment) live.push(compartmentCondition(sql, probes, q, false));
  if (q.filters?.length) live.push(sql`(${join(sql, q.filters.map((f) => filterCondition(sql, probes, f)), 'OR')})`);
  const alternatives = [sql`(${join(sql, live, 'AND')})`, sql`r.last_updated > ${q.at}`];
  if (q.since !== undefined) alternatives.push(sql`(r.deleted AND r.last_updated > ${q.since})`);
  const ids = q.ids ? sql`AND r.id = ANY(${q.ids}::text[])` : sql``;
  const laterals = probes.joins.length ? probes.joins.reduce((acc, j) => sql`${acc} ${j}`) : sql``;
  // Three columns only (every raw column costs a Buffer per row): the key, whether the database judged
  // the row (current, live, updated at or before `at`), and the stored text.
  return sql`SELECT r.pk, (NOT r.deleted AND r.last_updated <= ${q.at}) AS judged, r.content FROM resources r ${laterals}
    WHERE (r.tenant || '/' || r.type) = ${`${tenant}/${q.type}`} AND r.pk > ${q.after ?? 0} ${ids} AND (${join(sql, alternatives, 'OR')})
    ORDER BY r.pk LIMIT ${q.limit}`;
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
}

/** For rows changed after `at`: their versions as of `at`, by id (one query per page). */
async function versionsAsOf(sql: Pg, tenant: string, q: SnapshotQuery, ids: string[]): Promise<Map<string, HistoryRow>> {
  if (ids.length === 0) return new Map();
  const rows = await sql<HistoryRow[]>`
    SELECT DISTINCT ON (id) id, version_id, last_updated, deleted, content FROM resource_history
    WHERE tenant = ${tenant} AND type = ${q.type} AND id = ANY(${ids}::text[]) AND last_updated <= ${q.at}
    ORDER BY id, version_id DESC`;
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
  for (const c of candidates) {
    const h = c.lastUpdated > q.at ? asOf.get(c.id) : undefined;
    if (c.lastUpdated > q.at && !h) continue;
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
  return out;
}

/** Resource snapshots on Postgres: raw rows, so stored content goes out as the bytes Postgres sent. */
export function createPostgresSnapshot(sql: Pg) {
  return async function snapshot(tenant: string, q: SnapshotQuery): Promise<SnapshotPage> {
    const raw = (await sql`${pageQuery(sql, tenant, q)}`.raw()) as unknown as Buffer[][];
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
    return { lines, count: judged.length, recheck, next: raw.length < q.limit || !last ? null : num(last[0]!) };
  };
}
