import type postgres from 'postgres';
import type { HistoryQuery } from '../types.ts';
import type { Pg } from './db.ts';

type Fragment = postgres.Fragment;

/** Joins fragments with AND / OR; values stay parameters throughout. */
function join(sql: Pg, parts: Fragment[], op: 'AND' | 'OR'): Fragment {
  return parts.reduce((acc, p) => (op === 'AND' ? sql`${acc} AND ${p}` : sql`${acc} OR ${p}`));
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
  const branch = (table: Fragment) => sql`(SELECT r.type, r.id, r.version_id, r.last_updated, r.deleted, r.content, r.method
    FROM ${table} r WHERE ${historyCondition(sql, tenant, q)}
    ORDER BY r.last_updated DESC, r.type DESC, r.id DESC, r.version_id DESC LIMIT ${q.count})`;
  // `revived`: whether the version before a live one is a deletion (ResourceVersion.created), by the history's primary key.
  return sql`SELECT p.*, CASE WHEN NOT p.deleted AND p.version_id > 1 THEN (SELECT b.deleted FROM resource_history b
      WHERE b.tenant = ${tenant} AND b.type = p.type AND b.id = p.id AND b.version_id < p.version_id ORDER BY b.version_id DESC LIMIT 1) END AS revived
    FROM (SELECT * FROM (${branch(sql`resources`)} UNION ALL ${branch(sql`resource_history`)}) h
    ORDER BY last_updated DESC, type DESC, id DESC, version_id DESC LIMIT ${q.count}) p
    ORDER BY p.last_updated DESC, p.type DESC, p.id DESC, p.version_id DESC`;
}
