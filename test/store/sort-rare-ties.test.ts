/**
 * A sort on a parameter whose first value holds nearly every resource, with a `:missing=true` condition that
 * few of them meet (`Condition?code:missing=true&_sort=verification-status`): the windows in id order find too
 * few, and the walk gives way to the missing rows (lastResort) rather than read every tie with its key. The
 * answers are checked on both stores, the first page and the next through the API; on PostgreSQL tables never
 * analysed, the resource rows the statements read (EXPLAIN ANALYZE of each, as plannedSearch sends them).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { compileSearch } from '../../src/fhir/search.ts';
import { plannedSearch, POSTGRES, type SqlValue } from '../../src/store/search-sql.ts';
import type { Condition, SearchQuery } from '../../src/store/types.ts';
import { createTestApp, fhirInit, BASE, type TestApp } from '../helpers/app.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const targets = await storeTargets();
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const TENANT = 't1';
const base = `${BASE}/tenants/${TENANT}/fhir/R4`;
const CONDITIONS = 3000;
const SCT = 'http://snomed.info/sct';
const VERIFICATION = 'http://terminology.hl7.org/CodeSystem/condition-ver-status';
/** The Conditions (by number) without a code: 17 is `refuted` (every 500th from 7), the others `confirmed`. */
const UNCODED = [3, 17, 512, 1333, 2048, 2999, 1001, 1500, 2222, 2501, 2750, 2900];
const SEARCH = 'code:missing=true&_sort=verification-status&_count=10';

const conditionId = (i: number) => `c${String((i * 7919) % CONDITIONS).padStart(4, '0')}`;
const condition = (i: number) => ({
  resourceType: 'Condition', id: conditionId(i), subject: { reference: `Patient/p${i % 300}` },
  ...(!UNCODED.includes(i) && { code: { coding: [{ system: SCT, code: `${38341003 + (i % 50)}` }] } }),
  verificationStatus: { coding: [{ system: VERIFICATION, code: i % 500 === 7 ? 'refuted' : 'confirmed' }] },
});
/** The uncoded Conditions in the sort's order: `confirmed` before `refuted`, ties by id. */
const EXPECTED = [...UNCODED.filter((i) => i % 500 !== 7).map(conditionId).sort(), ...UNCODED.filter((i) => i % 500 === 7).map(conditionId).sort()];

async function fill(store: TestApp['store']): Promise<void> {
  for (let i = 0; i < CONDITIONS; i += 500) {
    await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(Array.from({ length: 500 }, (_, j) => condition(i + j)))));
  }
}

async function withoutAutovacuum(url: string): Promise<void> {
  const conn = postgres(url, { max: 1, onnotice: () => undefined });
  for (const table of ['resources', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'compartments']) {
    await conn.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
  }
  await conn.end();
}

for (const target of targets) {
  describe(`a rare match among one value's many ties (${target.kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      const db = await target.migrated();
      if (target.kind === 'postgres') await withoutAutovacuum(db.url);
      t = await createTestApp({ store: db.open() });
      await fill(t.store);
    }, 120_000);
    afterAll(() => t.close());

    test('the first page and the next through its link: the matches in the sort\'s order', async () => {
      const token = await t.token();
      const first = await t.request(`${base}/Condition?${SEARCH}`, fhirInit(token));
      expect(first.status).toBe(200);
      const page = await first.json() as { entry: { resource: { id: string } }[]; link: { relation: string; url: string }[] };
      expect(page.entry.map((e) => e.resource.id)).toEqual(EXPECTED.slice(0, 10));
      const next = page.link.find((l) => l.relation === 'next')!.url;
      const second = await (await t.request(next, fhirInit(token))).json() as { entry: { resource: { id: string } }[]; link: { relation: string }[] };
      expect(second.entry.map((e) => e.resource.id)).toEqual(EXPECTED.slice(10));
      expect(second.link.some((l) => l.relation === 'next')).toBe(false);
    }, 60_000);
  });
}

interface PlanNode {
  'Relation Name'?: string;
  'Actual Loops': number;
  Plans?: PlanNode[];
}

/** How many times a plan scanned `search_index` (its nodes' loops: a probe or a key computed per row is one each). */
function indexScans(node: PlanNode): number {
  return (node['Relation Name'] === 'search_index' ? node['Actual Loops'] : 0) + (node.Plans ?? []).reduce((n, p) => n + indexScans(p), 0);
}

const pg = targets.find((t) => t.kind === 'postgres');

describe.if(pg !== undefined)('its statements on PostgreSQL tables never analysed', () => {
  let conn: postgres.Sql;
  beforeAll(async () => {
    const db = await pg!.migrated();
    await withoutAutovacuum(db.url);
    conn = postgres(db.url, { max: 1, onnotice: () => undefined, connection: { jit: 'off' } });
    const store = db.open();
    await fill(store);
    await store.close();
  }, 120_000);
  afterAll(() => conn.end());

  test('the page is read from the missing rows, not from every tie with its key', async () => {
    const c = compileSearch('Condition', new URLSearchParams(SEARCH), true);
    const q: SearchQuery = { ...c.query, where: c.pending as Condition[] };
    const sent: { sql: string; values: SqlValue[] }[] = [];
    const rows = await plannedSearch(POSTGRES, TENANT, q, {
      count: async (sql, values) => Number((await conn.unsafe<{ n: number }[]>(sql, values as never[], { prepare: true }))[0]!.n),
      rows: async (sql, values) => (sent.push({ sql, values }), await conn.unsafe(sql, values as never[], { prepare: true })) as never[],
    }, () => CONDITIONS);
    expect(rows.map((r) => (r as { id: string }).id)).toEqual(EXPECTED.slice(0, 10));
    const { sql, values } = sent.at(-1)!;
    const [row] = await conn.unsafe<{ 'QUERY PLAN': [{ Plan: PlanNode }] }[]>(`EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`, values as never[], { prepare: true });
    // The 12 uncoded Conditions' keys; before, the 3,000 ties' (`confirmed`), each probed for its code and its key computed.
    expect(indexScans(row!['QUERY PLAN'][0].Plan)).toBeLessThan(100);
  }, 60_000);
});
