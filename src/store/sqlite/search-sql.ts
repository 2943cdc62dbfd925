import type { SearchQuery, TimeCriterion } from '../types.ts';

/** The SQL condition (with `?` placeholders) for one `_lastUpdated` criterion on column `col`. */
export function timeCondition(col: string, t: TimeCriterion): { sql: string; params: number[] } {
  switch (t.op) {
    case 'eq':
      return { sql: `(${col} >= ? AND ${col} < ?)`, params: [t.low, t.high] };
    case 'ne':
      return { sql: `(${col} < ? OR ${col} >= ?)`, params: [t.low, t.high] };
    case 'gt':
      return { sql: `${col} >= ?`, params: [t.high] };
    case 'ge':
      return { sql: `${col} >= ?`, params: [t.low] };
    case 'lt':
      return { sql: `${col} < ?`, params: [t.low] };
    case 'le':
      return { sql: `${col} < ?`, params: [t.high] };
  }
}

/** Builds a parameterised search over current, non-deleted resources. Values are never spliced into SQL. */
export function buildSearch(tenant: string, q: SearchQuery, countOnly: boolean): { sql: string; params: (string | number)[] } {
  const where = ['r.tenant = ?', 'r.type = ?', 'r.deleted = 0'];
  const params: (string | number)[] = [tenant, q.type];
  if (q.ids) {
    where.push(`r.id IN (${q.ids.map(() => '?').join(', ')})`);
    params.push(...q.ids);
  }
  for (const t of q.lastUpdated ?? []) {
    const c = timeCondition('r.last_updated', t);
    where.push(c.sql);
    params.push(...c.params);
  }
  for (const p of q.params ?? []) {
    const alts = p.values.map((v) =>
      v.system === undefined
        ? v.value === undefined ? '1' : 's.value = ?'
        : v.value === undefined ? 's.system = ?' : '(s.value = ? AND s.system = ?)',
    );
    where.push(
      `r.pk IN (SELECT s.res FROM search_index s WHERE s.tenant = ? AND s.type = ? AND s.param = ? AND (${alts.join(' OR ') || '0'}))`,
    );
    params.push(tenant, q.type, p.param);
    for (const v of p.values) {
      if (v.value !== undefined) params.push(v.value);
      if (v.system !== undefined) params.push(v.system);
    }
  }
  if (q.compartment !== undefined) {
    where.push('r.pk IN (SELECT c.res FROM compartments c WHERE c.tenant = ? AND c.patient = ? AND c.type = ?)');
    params.push(tenant, q.compartment, q.type);
  }
  if (countOnly) return { sql: `SELECT COUNT(*) AS n FROM resources r WHERE ${where.join(' AND ')}`, params };
  if (q.after) {
    if (q.sort === 'id') (where.push('r.id > ?'), params.push(q.after.id));
    else if (q.sort === 'lastUpdated') (where.push('(r.last_updated, r.id) > (?, ?)'), params.push(q.after.lastUpdated, q.after.id));
    else (where.push('(r.last_updated, r.id) < (?, ?)'), params.push(q.after.lastUpdated, q.after.id));
  }
  const order = q.sort === 'id' ? 'r.id' : q.sort === 'lastUpdated' ? 'r.last_updated, r.id' : 'r.last_updated DESC, r.id DESC';
  params.push(q.count);
  return {
    sql: `SELECT r.type, r.id, r.version_id, r.last_updated, r.deleted, r.content FROM resources r WHERE ${where.join(' AND ')} ORDER BY ${order} LIMIT ?`,
    params,
  };
}
