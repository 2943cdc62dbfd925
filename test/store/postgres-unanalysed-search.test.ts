/**
 * Searches on PostgreSQL tables that were never analysed (a database filled through the API, autovacuum
 * off or not yet round): the plans read what the search needs, however the planner estimates the type
 * (the statements as plannedSearch sends them, measured by EXPLAIN ANALYZE of each on the store's
 * database, the plain ones with generic plans as the store's pool of generic plans runs them).
 *
 * - `:missing=true` (and `:not`) as the driver: the type's resources without the parameter's rows. As
 *   NOT EXISTS, the planner took the type for a few rows and probed the parameter's value-first index by
 *   the key alone for each resource (every row of the key per resource: 9-24 s among 20,000 Conditions).
 * - A driver's rows joined to their resources: the type walked in id order and each resource compared
 *   with every driver row, instead of each driver row's resource read by its key.
 *
 * The answers are checked on both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { compileSearch } from '../../src/fhir/search.ts';
import { plannedSearch, POSTGRES, type SqlValue } from '../../src/store/search-sql.ts';
import type { Condition, SearchQuery, Store } from '../../src/store/types.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const targets = await storeTargets();
afterAll(async () => {
  for (const t of targets) await t.cleanup();
}, 60_000);

const CONDITIONS = 3000;
const PATIENTS = 300;
const TENANT = 't1';
const SCT = 'http://snomed.info/sct';
const CLINICAL = 'http://terminology.hl7.org/CodeSystem/condition-clinical';
/** The Conditions (by number) without a code, and without an onset. */
const UNCODED = [17, 512, 1333, 2048, 2999];
const UNDATED = [5, 1200, 2500];

const conditionId = (i: number) => `c${String((i * 7919) % CONDITIONS).padStart(4, '0')}`;
const condition = (i: number) => ({
  resourceType: 'Condition', id: conditionId(i), subject: { reference: `Patient/p${i % PATIENTS}` },
  clinicalStatus: { coding: [{ system: CLINICAL, code: i % 3 ? 'active' : 'resolved' }] },
  ...(!UNDATED.includes(i) && { onsetDateTime: new Date(Date.parse('2020-01-01T00:00:00Z') + i * 3_600_000).toISOString() }),
  ...(!UNCODED.includes(i) && { code: { coding: [{ system: SCT, code: `${38341003 + (i % 50)}` }] } }),
});
const all = Array.from({ length: CONDITIONS }, (_, i) => i);
const ids = (is: number[]) => is.map(conditionId).sort();

/** Each search, and its answer: the ids of every match in id order (the page holds them all). */
const SEARCHES: [query: string, expected: string[]][] = [
  ['code:missing=true&_count=50', ids(UNCODED)],
  ['onset-date:missing=true&_count=50', ids(UNDATED)],
  ['clinical-status=resolved&code:missing=true&_count=50', ids(UNCODED.filter((i) => i % 3 === 0))],
  ['subject=Patient/p17&_count=50', ids(all.filter((i) => i % PATIENTS === 17))],
  ['subject=Patient/p17&code:missing=true&_count=50', ids([17])],
];

/** Turns autovacuum off for the searched tables of a database, so that nothing analyses them while the tests run (where the server has it on). */
async function withoutAutovacuum(conn: postgres.Sql): Promise<void> {
  for (const table of ['resources', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'compartments']) {
    await conn.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
  }
}

function compiled(query: string): SearchQuery {
  const c = compileSearch('Condition', new URLSearchParams(query), true);
  return { ...c.query, where: c.pending as Condition[] };
}

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

/** How many times a plan scanned `table` (its nodes' loops). */
function scansOf(node: PlanNode, table: string): number {
  return (node['Relation Name'] === table ? node['Actual Loops'] : 0) + (node.Plans ?? []).reduce((n, p) => n + scansOf(p, table), 0);
}

/** The rows of `resources` a plan read: those it returned and those its filters removed, over every loop. */
function resourceRowsRead(node: PlanNode): number {
  const own = node['Relation Name'] === 'resources'
    ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops']
    : (node['Rows Removed by Join Filter'] ?? 0) * node['Actual Loops'];
  return own + (node.Plans ?? []).reduce((n, p) => n + resourceRowsRead(p), 0);
}

for (const target of targets) {
  describe(`searches on tables never analysed (${target.kind})`, () => {
    let store: Store;
    beforeAll(async () => {
      const db = await target.fresh();
      store = db.open();
      await store.migrate();
      // In transactions of 500, as many writes through the API leave a database: no statistics.
      for (let i = 0; i < CONDITIONS; i += 500) {
        await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(all.slice(i, i + 500).map(condition))));
      }
    }, 60_000);

    test.each(SEARCHES)('%s: every match', async (query, expected) => {
      expect((await store.resources.search(TENANT, compiled(query))).map((v) => v.id)).toEqual(expected);
    });
  });
}

const pg = targets.find((t) => t.kind === 'postgres');

describe.if(pg !== undefined)('the plans on PostgreSQL tables never analysed', () => {
  let store: Store;
  let conn: postgres.Sql;
  let generic: postgres.Sql;
  beforeAll(async () => {
    const db = await pg!.fresh();
    store = db.open();
    await store.migrate();
    conn = postgres(db.url, { max: 1, onnotice: () => undefined, connection: { jit: 'off' } });
    generic = postgres(db.url, { max: 1, onnotice: () => undefined, connection: { jit: 'off', plan_cache_mode: 'force_generic_plan' } });
    await withoutAutovacuum(conn);
    for (let i = 0; i < CONDITIONS; i += 500) {
      await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(all.slice(i, i + 500).map(condition))));
    }
  }, 60_000);
  afterAll(async () => {
    await conn.end();
    await generic.end();
  });

  /** The plan of each statement plannedSearch sends for `query`'s rows, as run on the store's connections. */
  async function plans(query: string): Promise<{ sql: string; plan: PlanNode }[]> {
    const sent: { sql: string; values: SqlValue[]; form?: string }[] = [];
    const on = (form?: string) => (form === 'plain' ? generic : conn);
    await plannedSearch(POSTGRES, TENANT, compiled(query), {
      count: async (sql, values, form) => Number((await on(form).unsafe<{ n: number }[]>(sql, values as never[], { prepare: true }))[0]!.n),
      rows: async (sql, values, form) => (sent.push({ sql, values, form }), await on(form).unsafe(sql, values as never[], { prepare: true })) as never[],
    }, () => CONDITIONS);
    const out: { sql: string; plan: PlanNode }[] = [];
    for (const { sql, values, form } of sent) {
      const [row] = await on(form).unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, values as never[], { prepare: true });
      out.push({ sql, plan: row!['QUERY PLAN'][0].Plan });
    }
    return out;
  }

  test('the statistics are absent, as the searches below assume', async () => {
    const [row] = await conn<{ n: number }[]>`SELECT COUNT(*)::int AS n FROM pg_stats WHERE schemaname = current_schema() AND tablename IN ('resources', 'search_index', 'search_range')`;
    expect(row!.n).toBe(0);
  });

  test.each([
    ['code:missing=true&_count=50', 'search_index'],
    ['onset-date:missing=true&_count=50', 'search_range'],
  ])('%s driven by the resources without the rows: the parameter\'s rows read once, not probed for each resource', async (query, table) => {
    const sent = await plans(query);
    // The first 500 in id order (each probed: the page's first rows, bounded), then the rest driven.
    expect(sent.length).toBe(2);
    expect(sent[0]!.sql).toStartWith('WITH bound AS MATERIALIZED');
    // Read once, by its keys; before, once for each of the 3,000 resources (by the key alone, every row of it).
    expect(scansOf(sent[1]!.plan, table)).toBeLessThanOrEqual(2);
  });

  test.each(['subject=Patient/p17&_count=50', 'subject=Patient/p17&code:missing=true&_count=50'])(
    "%s: each driver row's resource read by its key, not the type walked for them",
    async (query) => {
      const sent = await plans(query);
      expect(sent.length).toBeGreaterThan(0);
      // The 10 Conditions of the patient, read once each (and the page's once more); before, the type in
      // id order up to the page's last match, each resource compared with every driver row.
      for (const { plan } of sent) expect(resourceRowsRead(plan)).toBeLessThanOrEqual(4 * (CONDITIONS / PATIENTS));
    },
  );
});

describe.if(pg !== undefined)("the first rows read in order, in a large table never analysed", () => {
  /** Rows of another tenant that make `resources` large, so that the planner, without statistics, takes a type's rows for more than a few. */
  const PADDING = 400_000;
  let conn: postgres.Sql;
  let generic: postgres.Sql;
  beforeAll(async () => {
    const db = await pg!.fresh();
    const store = db.open();
    await store.migrate();
    conn = postgres(db.url, { max: 1, onnotice: () => undefined, connection: { jit: 'off' } });
    generic = postgres(db.url, { max: 1, onnotice: () => undefined, connection: { jit: 'off', plan_cache_mode: 'force_generic_plan' } });
    await withoutAutovacuum(conn);
    for (let i = 0; i < CONDITIONS; i += 500) {
      await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(all.slice(i, i + 500).map(condition))));
    }
    // Written as rows alone (their index rows would change nothing here): Basic resources of tenant `other`.
    await conn.unsafe(`INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content, method)
      SELECT 'other', 'Basic', 'b' || g, 1, 1767225600000, false, nextval('resource_seq'),
        '{"resourceType":"Basic","id":"b' || g || '","code":{"text":"' || repeat('padding ', 30) || '"}}', 'PUT'
      FROM generate_series(1, ${PADDING}) g`);
  }, 120_000);
  afterAll(async () => {
    await conn.end();
    await generic.end();
  });

  test.each(['code:not=http://snomed.info/sct|38341003&_count=10', 'code:not=http://snomed.info/sct|38341003&_count=10&_sort=_lastUpdated', 'code:not=http://snomed.info/sct|38341003&_count=10&_sort=-_lastUpdated'])(
    '%s: the first 500 in order read by the index in order, not the type read whole and sorted',
    async (query) => {
      const sent: { sql: string; values: SqlValue[]; form?: string }[] = [];
      const on = (form?: string) => (form === 'plain' ? generic : conn);
      const rows = await plannedSearch(POSTGRES, TENANT, compiled(query), {
        count: async (sql, values, form) => Number((await on(form).unsafe<{ n: number }[]>(sql, values as never[], { prepare: true }))[0]!.n),
        rows: async (sql, values, form) => (sent.push({ sql, values, form }), await on(form).unsafe(sql, values as never[], { prepare: true })) as never[],
      }, () => CONDITIONS);
      expect(rows.length).toBe(10);
      expect(sent.length).toBe(1);
      expect(sent[0]!.sql).toStartWith('WITH bound AS MATERIALIZED');
      const [row] = await on(sent[0]!.form).unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sent[0]!.sql}`, sent[0]!.values as never[], { prepare: true });
      // The 500 of the bound, and the page's few; before, every one of the 3,000 Conditions, then sorted.
      expect(resourceRowsRead(row!['QUERY PLAN'][0].Plan)).toBeLessThan(1000);
    },
  );
});

