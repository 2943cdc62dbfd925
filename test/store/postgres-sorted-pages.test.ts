/**
 * A later page of a sort on a parameter (SearchQuery.afterKeys) on PostgreSQL reads each of the driver's
 * resources by its key, however the planner estimates the type: joined to `resources`, a plan made without
 * statistics (a database just filled, as an import leaves it) read the type's rows by (tenant, type) for
 * each driver row and tested the page's place (three correlated subqueries) on every pair: a later page of
 * `Observation?_sort=status` among 389 Observations took 0.6-4.6 s, its first key tested 83,425 times.
 * The rows the statements examine are counted from EXPLAIN ANALYZE of the statements the store sends.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { plannedSearch, POSTGRES, type SqlValue } from '../../src/store/search-sql.ts';
import type { SearchQuery, Store } from '../../src/store/types.ts';
import { firstVersions } from '../helpers/versions.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets();
const pg = targets.find((t) => t.kind === 'postgres');
afterAll(async () => {
  for (const t of targets) await t.cleanup();
}, 60_000);

const OBSERVATIONS = 600;
const TENANT = 't1';
const STATUSES = ['amended', 'final', 'preliminary'];
const observationId = (i: number) => `o-${String(i).padStart(4, '0')}`;

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

/** The rows of `resources` a plan read: those it returned and those its filters removed, over every loop. */
function resourceRowsRead(node: PlanNode): number {
  const own = node['Relation Name'] === 'resources'
    ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
    : (node['Rows Removed by Join Filter'] ?? 0) * node['Actual Loops'];
  return own + (node.Plans ?? []).reduce((n, p) => n + resourceRowsRead(p), 0);
}

describe.if(pg !== undefined)('later pages of a sort on a parameter on PostgreSQL', () => {
  let store: Store;
  let conn: postgres.Sql;
  beforeAll(async () => {
    const db = await pg!.fresh();
    store = db.open();
    await store.migrate();
    // Three statuses, 200 Observations each (ties broken by id), none analysed.
    const observations = Array.from({ length: OBSERVATIONS }, (_, i) => ({
      resourceType: 'Observation', id: observationId(i), status: STATUSES[i % 3], code: { text: 'x' },
    }));
    await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(observations, Date.parse('2026-01-01T00:00:00Z'))));
    conn = postgres(db.url, { max: 1, onnotice: () => undefined, connection: { jit: 'off' } });
  }, 60_000);
  afterAll(() => conn.end());

  /** The statements plannedSearch sends for `q`'s rows (each run: a sort walk reads its bound, then its page), as the store's sizes have the type. */
  async function statements(q: SearchQuery): Promise<{ sql: string; values: SqlValue[] }[]> {
    const sent: { sql: string; values: SqlValue[] }[] = [];
    await plannedSearch(POSTGRES, TENANT, q, {
      count: async (sql, values) => Number((await conn.unsafe<{ n: number }[]>(sql, values as never[]))[0]!.n),
      rows: async (sql, values) => (sent.push({ sql, values }), await conn.unsafe(sql, values as never[])) as never[],
    }, () => OBSERVATIONS);
    return sent;
  }

  test('a page after a place among many ties reads each tied resource once, not the type for each', async () => {
    // The page after the 250th in `status` order (the 50th `final`): the 150 `final` after it and the 20 of a page.
    const sorted = Array.from({ length: OBSERVATIONS }, (_, i) => i).sort((a, b) => STATUSES[a % 3]!.localeCompare(STATUSES[b % 3]!) || a - b).map(observationId);
    const place = sorted[249]!;
    const q: SearchQuery = {
      type: 'Observation', where: [], count: 20,
      sort: [{ by: 'param', table: 'search_index', param: 'status', descending: false }],
      afterKeys: { keys: ['final'], id: place },
    };
    const sent = await statements(q);
    // The sort key's rows drive the page (a sort walk).
    expect(sent.some(({ sql }) => sql.startsWith('WITH m AS MATERIALIZED'))).toBe(true);
    for (const { sql, values } of sent) {
      const [row] = await conn.unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, values as never[]);
      // The 200 `final` (at the place or after it) and those of the page: before, 600 for each of them.
      expect(resourceRowsRead(row!["QUERY PLAN"][0].Plan)).toBeLessThanOrEqual(2 * OBSERVATIONS);
    }
    const page = await store.resources.search(TENANT, q);
    expect(page.map((v) => v.id)).toEqual(sorted.slice(250, 270));
  });
});
