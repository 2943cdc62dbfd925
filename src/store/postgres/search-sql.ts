import type postgres from 'postgres';
import type { HistoryQuery, ParamCriterion, SearchQuery, TimeCriterion } from '../types.ts';
import type { Pg } from './db.ts';

type Fragment = postgres.Fragment;

/** Joins fragments with AND / OR; values stay parameters throughout. */
function join(sql: Pg, parts: Fragment[], op: 'AND' | 'OR'): Fragment {
  return parts.reduce((acc, p) => (op === 'AND' ? sql`${acc} AND ${p}` : sql`${acc} OR ${p}`));
}

/** The condition for one `_lastUpdated` criterion: `low`/`high` are the value's precision bounds. */
export function timeCondition(sql: Pg, t: TimeCriterion): Fragment {
  switch (t.op) {
    case 'eq':
      return sql`(r.last_updated >= ${t.low} AND r.last_updated < ${t.high})`;
    case 'ne':
      return sql`(r.last_updated < ${t.low} OR r.last_updated >= ${t.high})`;
    case 'gt':
      return sql`r.last_updated >= ${t.high}`;
    case 'ge':
      return sql`r.last_updated >= ${t.low}`;
    case 'lt':
      return sql`r.last_updated < ${t.low}`;
    case 'le':
      return sql`r.last_updated < ${t.high}`;
  }
}

/** One alternative: a missing system matches any system, a missing value any value (token `system|`). */
function valueCondition(sql: Pg, v: ParamCriterion['values'][number]): Fragment {
  if (v.system === undefined) return v.value === undefined ? sql`true` : sql`s.value = ${v.value}`;
  return v.value === undefined ? sql`s.system = ${v.system}` : sql`(s.value = ${v.value} AND s.system = ${v.system})`;
}

/** `pk IN (index rows of this parameter matching any of its values)`. */
function paramCondition(sql: Pg, tenant: string, type: string, p: ParamCriterion): Fragment {
  const alts = p.values.map((v) => valueCondition(sql, v));
  const any = alts.length ? join(sql, alts, 'OR') : sql`false`;
  return sql`r.pk IN (SELECT s.res FROM search_index s
    WHERE s.tenant = ${tenant} AND s.type = ${type} AND s.param = ${p.param} AND (${any}))`;
}

function whereClause(sql: Pg, tenant: string, q: SearchQuery, withCursor: boolean): Fragment {
  const where = [sql`r.tenant = ${tenant}`, sql`r.type = ${q.type}`, sql`NOT r.deleted`];
  if (q.ids) where.push(sql`r.id = ANY(${q.ids}::text[])`);
  for (const t of q.lastUpdated ?? []) where.push(timeCondition(sql, t));
  for (const p of q.params ?? []) where.push(paramCondition(sql, tenant, q.type, p));
  if (q.compartment !== undefined) {
    where.push(sql`r.pk IN (SELECT c.res FROM compartments c
      WHERE c.tenant = ${tenant} AND c.patient = ${q.compartment} AND c.type = ${q.type})`);
  }
  const a = withCursor ? q.after : undefined;
  if (a) {
    if (q.sort === 'id') where.push(sql`r.id > ${a.id}`);
    else if (q.sort === 'lastUpdated') where.push(sql`(r.last_updated, r.id) > (${a.lastUpdated}, ${a.id})`);
    else where.push(sql`(r.last_updated, r.id) < (${a.lastUpdated}, ${a.id})`);
  }
  return join(sql, where, 'AND');
}

/** Current, non-deleted resources matching the query, in `sort` order (keyset `after`), at most `count`. */
export function searchQuery(sql: Pg, tenant: string, q: SearchQuery): Fragment {
  const order =
    q.sort === 'id' ? sql`r.id` : q.sort === 'lastUpdated' ? sql`r.last_updated, r.id` : sql`r.last_updated DESC, r.id DESC`;
  return sql`SELECT r.type, r.id, r.version_id, r.last_updated, r.deleted, r.content FROM resources r
    WHERE ${whereClause(sql, tenant, q, true)} ORDER BY ${order} LIMIT ${q.count}`;
}

/** How many current, non-deleted resources match (ignores `count` and `after`). */
export function countQuery(sql: Pg, tenant: string, q: SearchQuery): Fragment {
  return sql`SELECT count(*)::int AS n FROM resources r WHERE ${whereClause(sql, tenant, q, false)}`;
}

function historyCondition(sql: Pg, tenant: string, q: HistoryQuery): Fragment {
  const where = [sql`r.tenant = ${tenant}`];
  if (q.type) where.push(sql`r.type = ${q.type}`);
  if (q.id) where.push(sql`r.id = ${q.id}`);
  if (q.since !== undefined) where.push(sql`r.last_updated >= ${q.since}`);
  if (q.at !== undefined) where.push(sql`r.last_updated <= ${q.at}`);
  const b = q.before;
  if (b) where.push(sql`(r.last_updated, r.type, r.id, r.version_id) < (${b.lastUpdated}, ${b.type}, ${b.id}, ${b.versionId})`);
  return join(sql, where, 'AND');
}

/** Current and past versions, newest first (lastUpdated, then type/id/version descending), at most `count`. */
export function historyQuery(sql: Pg, tenant: string, q: HistoryQuery): Fragment {
  // Each branch is limited on its own too, so Postgres can read just the newest rows of each table.
  const branch = (table: Fragment) => sql`(SELECT r.type, r.id, r.version_id, r.last_updated, r.deleted, r.content
    FROM ${table} r WHERE ${historyCondition(sql, tenant, q)}
    ORDER BY r.last_updated DESC, r.type DESC, r.id DESC, r.version_id DESC LIMIT ${q.count})`;
  return sql`SELECT * FROM (${branch(sql`resources`)} UNION ALL ${branch(sql`resource_history`)}) h
    ORDER BY last_updated DESC, type DESC, id DESC, version_id DESC LIMIT ${q.count}`;
}
