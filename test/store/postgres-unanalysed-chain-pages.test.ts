/**
 * A chain beside a common token, page after page, on PostgreSQL tables never analysed and analysed (the search's
 * dialect POSTGRES_MISJUDGED either way): `Condition?subject:Patient.gender=male&clinical-status=active`, each of them
 * thousands of rows, a third of the Conditions matching both. Read without a driver, the chain's set is
 * hashed once and the Conditions walked in id order, so a page reads about its own Conditions; driven by
 * the chain's rows (intersected with the status's), every page read every match's resource row to find
 * its few (`Observation?patient.gender=female&status=final&_count=50` in
 * test/store/postgres-unanalysed-differential.test.ts, 72 pages). The answers are checked on both stores
 * through the API, page by page through the next links.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { compileSearch } from '../../src/fhir/search.ts';
import { plannedSearch, POSTGRES_MISJUDGED, type SqlValue } from '../../src/store/search-sql.ts';
import type { Condition, SearchQuery } from '../../src/store/types.ts';
import { createTestApp, fhirInit, BASE, type TestApp } from '../helpers/app.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const targets = await storeTargets();
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const TENANT = 't1';
const base = `${BASE}/tenants/${TENANT}/fhir/R4`;
const CONDITIONS = 6000;
const PATIENTS = 300;
const CLINICAL = 'http://terminology.hl7.org/CodeSystem/condition-clinical';
const SEARCH = 'subject:Patient.gender=male&clinical-status=active&_count=20';

const conditionId = (i: number) => `c${String((i * 7919) % CONDITIONS).padStart(4, '0')}`;
const condition = (i: number) => ({
  resourceType: 'Condition', id: conditionId(i), subject: { reference: `Patient/p${i % PATIENTS}` },
  clinicalStatus: { coding: [{ system: CLINICAL, code: i % 3 ? 'active' : 'resolved' }] },
});
const patient = (i: number) => ({ resourceType: 'Patient', id: `p${i}`, gender: i % 2 ? 'male' : 'female' });
/** The matches in id order: an odd (male) patient's active Conditions, 2,000 of the 6,000. */
const EXPECTED = Array.from({ length: CONDITIONS }, (_, i) => i).filter((i) => (i % PATIENTS) % 2 === 1 && i % 3 !== 0).map(conditionId).sort();

interface PlanNode {
  'Relation Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** The rows of `resources` a plan read: those its scans returned and those their filters removed, over every loop. */
function resourceRowsRead(node: PlanNode): number {
  const own = node['Relation Name'] === 'resources' ? (node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0)) * node['Actual Loops'] : 0;
  return own + (node.Plans ?? []).reduce((n, p) => n + resourceRowsRead(p), 0);
}

async function fill(store: TestApp['store']): Promise<void> {
  await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(Array.from({ length: PATIENTS }, (_, i) => patient(i)))));
  for (let i = 0; i < CONDITIONS; i += 500) {
    const batch = Array.from({ length: Math.min(500, CONDITIONS - i) }, (_, j) => condition(i + j));
    await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(batch)));
  }
}

for (const target of targets) {
  describe(`a chain beside a common token, page by page (${target.kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      const db = await target.migrated();
      if (target.kind === 'postgres') {
        const conn = postgres(db.url, { max: 1, onnotice: () => undefined });
        for (const table of ['resources', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'compartments']) {
          await conn.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
        }
        await conn.end();
      }
      t = await createTestApp({ store: db.open() });
      await fill(t.store);
    }, 120_000);
    afterAll(() => t.close());

    test('every page through the next links: the matches in id order, each once', async () => {
      const token = await t.token();
      const found: string[] = [];
      let url: string | undefined = `${base}/Condition?${SEARCH}`;
      let pages = 0;
      while (url && pages++ < 10) {
        const res = await t.request(url, fhirInit(token));
        const body = await res.json() as { entry?: { resource: { id: string } }[]; link?: { relation: string; url: string }[] };
        expect(res.status).toBe(200);
        found.push(...(body.entry ?? []).map((e) => e.resource.id));
        url = body.link?.find((l) => l.relation === 'next')?.url;
      }
      expect(found).toEqual(EXPECTED.slice(0, 200));
    }, 60_000);
  });
}

const pg = targets.find((t) => t.kind === 'postgres');

describe.if(pg !== undefined)('its pages\' plans on PostgreSQL tables never analysed', () => {
  let conn: postgres.Sql;
  beforeAll(async () => {
    const db = await pg!.migrated();
    conn = postgres(db.url, { max: 1, onnotice: () => undefined, connection: { jit: 'off' } });
    for (const table of ['resources', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'compartments']) {
      await conn.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
    }
    const store = db.open();
    await fill(store);
    await store.close();
    const [row] = await conn<{ n: number }[]>`SELECT COUNT(*)::int AS n FROM pg_stats WHERE schemaname = current_schema() AND tablename IN ('resources', 'search_index')`;
    expect(row!.n).toBe(0);
  }, 120_000);
  afterAll(() => conn.end());

  test('each page reads about its own Conditions, not every match\'s resource row', async () => {
    const c = compileSearch('Condition', new URLSearchParams(SEARCH), true);
    const q: SearchQuery = { ...c.query, where: c.pending as Condition[] };
    let last: string | undefined;
    for (let page = 0; page < 3; page++) {
      const sent: { sql: string; values: SqlValue[] }[] = [];
      const rows = await plannedSearch(POSTGRES_MISJUDGED, TENANT, { ...q, ...(last !== undefined && { after: { id: last, lastUpdated: 0 } }) }, {
        count: async (sql, values) => Number((await conn.unsafe<{ n: number }[]>(sql, values as never[], { prepare: true }))[0]!.n),
        rows: async (sql, values) => (sent.push({ sql, values }), await conn.unsafe(sql, values as never[], { prepare: true })) as never[],
      }, (type) => (type === 'Patient' ? PATIENTS : CONDITIONS));
      const ids = rows.map((r) => (r as { id: string }).id);
      expect(ids).toEqual(EXPECTED.slice(page * 20, page * 20 + 20));
      last = ids.at(-1);
      let read = 0;
      for (const { sql, values } of sent) {
        const [row] = await conn.unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, values as never[], { prepare: true });
        read += resourceRowsRead(row!['QUERY PLAN'][0].Plan);
      }
      // The page's Conditions walked in id order (about 60 for 20 matches) and the 150 male Patients the chain's
      // targets are read from; driven by the chain's rows, each of the 2,000 matches' resource rows was read.
      expect(read).toBeLessThan(1_000);
    }
  }, 60_000);
});

describe.if(pg !== undefined)('its pages through the store on PostgreSQL tables analysed', () => {
  /**
   * The statistics do not describe a set's rows (its keys are computed in the statement): analysed, PostgreSQL
   * joined the chain's set to every match for each page. The rows of `resources` the store's connections read are
   * counted by PostgreSQL's statistics of the table, flushed as each connection ends (the store closed).
   */
  test('each page reads about its own Conditions, not every match\'s resource row', async () => {
    const db = await pg!.migrated();
    const conn = postgres(db.url, { max: 1, onnotice: () => undefined });
    try {
      const filling = db.open();
      await fill(filling);
      await filling.close();
      await conn.unsafe('VACUUM ANALYZE');
      const t = await createTestApp({ store: db.open() });
      let url: string | undefined = `${base}/Condition?${SEARCH}`;
      const found: string[] = [];
      try {
        const token = await t.token();
        const page = async () => {
          const res = await t.request(url!, fhirInit(token));
          const body = await res.json() as { entry?: { resource: { id: string } }[]; link?: { relation: string; url: string }[] };
          expect(res.status).toBe(200);
          found.push(...(body.entry ?? []).map((e) => e.resource.id));
          url = body.link?.find((l) => l.relation === 'next')?.url;
        };
        // The first page measures the types' sizes (a count of their rows) before the table's counters start.
        await page();
        await conn`SELECT pg_stat_reset()`;
        for (let i = 0; i < 3; i++) await page();
      } finally {
        await t.close();
      }
      expect(found).toEqual(EXPECTED.slice(0, 80));
      // Every other session on the database ended: their counters are flushed.
      for (let i = 0; i < 100; i++) {
        const [row] = await conn<{ n: number }[]>`SELECT COUNT(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`;
        if (row!.n === 0) break;
        await Bun.sleep(50);
      }
      await conn`SELECT pg_stat_clear_snapshot()`;
      const [stats] = await conn<{ read: number }[]>`
        SELECT (COALESCE(idx_tup_fetch, 0) + COALESCE(seq_tup_read, 0))::int AS read FROM pg_stat_user_tables WHERE relname = 'resources'`;
      // Three pages of 20: their Conditions walked in id order (about 60 each), the chain's 150 Patients, and the
      // planner's counts of the chain (about 1,000 rows a page in all); driven by the chain's rows, or its set joined
      // to the Conditions, each page read at least the 2,000 matches' rows (13,284 for the three).
      expect(stats!.read).toBeLessThan(6_000);
    } finally {
      await conn.end();
    }
  }, 120_000);
});
