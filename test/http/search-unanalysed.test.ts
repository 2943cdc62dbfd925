/**
 * Searches of a database filled through the REST API, whose PostgreSQL tables have no planner statistics
 * yet (autovacuum off here, as where it has not come round), and how the statistics are kept afterwards.
 *
 * - The planner's type sizes (src/store/postgres/resources.ts, estimatedSizes): PostgreSQL's estimate is a
 *   few rows for every type without statistics, so a type it estimates small is counted. With the sizes,
 *   `_has` of a code whose Conditions are all a few Patients' keeps the set of those Patients (probesHas),
 *   and the set is run once (POSTGRES_MISJUDGED), not once per Patient over a scan of `search_index`.
 * - analyze({ onlyStale }): a table is analysed again once 50 rows and a tenth of what it held have
 *   changed (PostgreSQL's autovacuum defaults), one process at a time (an advisory lock).
 *
 * The answers are checked on both stores, against the data's own arithmetic.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { compileSearch } from '../../src/fhir/search.ts';
import * as pgResources from '../../src/store/postgres/resources.ts';
import type { Condition } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { bundlePoster, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';

const PATIENTS = 300;
const CONDITIONS = 3000;
const SCT = 'http://snomed.info/sct';
const CLINICAL = 'http://terminology.hl7.org/CodeSystem/condition-clinical';
const pid = (p: number) => `up${String(p).padStart(3, '0')}`;
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

/** Patient p is male where p % 4 is 0. */
const patient = (p: number) => ({ resourceType: 'Patient', id: pid(p), gender: p % 4 === 0 ? 'male' : 'female' });
/** SNOMED CT disorders: the first (hypertension) is crowded, the others share the rest. */
const CODES = ['38341003', '44054006', '195967001', '13645005', '35489007', '73211009', '22298006', '49436004', '230690007', '84114007'];
/**
 * Condition i: of Patient i % 300, coded 38341003 where i % 50 is 0 (on Patients 0, 50, ... 250 alone, ten
 * each: many references to each of a few targets) and one of the other nine codes else, resolved where i % 3
 * is 0 (every Condition of the Patients p % 3 = 0). Ids a permutation, so that id order is not the Patients' order.
 */
const condition = (i: number) => ({
  resourceType: 'Condition', id: `uc${String((i * 7919) % 100_000).padStart(5, '0')}`,
  subject: { reference: `Patient/${pid(i % PATIENTS)}` },
  clinicalStatus: { coding: [{ system: CLINICAL, code: i % 3 ? 'active' : 'resolved' }] },
  code: { coding: [{ system: SCT, code: i % 50 === 0 ? CODES[0] : CODES[1 + (i % 9)] }] },
});

const CROWDED = `code=${SCT}|38341003`;

/** The tables these tests write, their autovacuum off so that nothing analyses them behind the tests' backs. */
const TABLES = ['resources', 'resource_history', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'search_text', 'compartments'];

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** Writes `resources` through the API, in transaction Bundles of PUTs. */
async function writeAll(t: TestApp, api: FhirClient, resources: Json[]): Promise<void> {
  const { ok } = bundlePoster(() => t, () => api);
  for (let i = 0; i < resources.length; i += 250) {
    await ok({
      resourceType: 'Bundle', type: 'transaction',
      entry: resources.slice(i, i + 250).map((r) => ({ resource: r, request: { method: 'PUT', url: `${r.resourceType}/${r.id}` } })),
    });
  }
}

async function app(db: StoreDatabase): Promise<{ t: TestApp; api: FhirClient }> {
  const store = db.open();
  await store.migrate();
  const t = await createTestApp({ store });
  return { t, api: fhirClient(t, await t.token()) };
}

/** An app on a fresh database whose searched tables autovacuum leaves alone (PostgreSQL), filled through the API. */
async function filled(kind: string, db: StoreDatabase): Promise<{ t: TestApp; api: FhirClient }> {
  if (kind === 'postgres') {
    const conn = postgres(db.url, { max: 1, onnotice: () => undefined });
    for (const table of TABLES) await conn.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
    await conn.end();
  }
  const { t, api } = await app(db);
  await writeAll(t, api, range(0, PATIENTS).map(patient));
  await writeAll(t, api, range(0, CONDITIONS).map(condition));
  return { t, api };
}

for (const target of targets) {
  describe(`_has on tables filled through the API, never analysed (${target.kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (query: string) => ((await api.search(query)).entry ?? []).map((e: Json) => e.resource.id);

    beforeAll(async () => {
      ({ t, api } = await filled(target.kind, await target.migrated()));
    }, 120_000);
    afterAll(() => t?.close());

    test('a code whose Conditions are a few Patients\', a status of a third of them: every match, in order', async () => {
      const crowded = [0, 50, 100, 150, 200, 250].map(pid);
      expect(await ids(`Patient?_has:Condition:subject:${CROWDED}&_count=10`)).toEqual(crowded);
      expect(await ids(`Patient?_has:Condition:subject:${CROWDED}&_count=10&_sort=-_id`)).toEqual([...crowded].reverse());
      expect(await ids(`Patient?gender=male&_has:Condition:subject:${CROWDED}&_count=10`)).toEqual([0, 100, 200].map(pid));
      expect(await ids('Patient?_has:Condition:subject:clinical-status=resolved&_count=10')).toEqual(range(0, 10).map((p) => pid(3 * p)));
      expect((await api.search(`Patient?_has:Condition:subject:${CROWDED}&_summary=count`)).total).toBe(6);
      expect((await api.search('Patient?_has:Condition:subject:clinical-status=resolved&_summary=count')).total).toBe(100);
    });
  });
}

const pg = targets.find((t) => t.kind === 'postgres');

/** Rows of `search_index` read by scans and index scans, as PostgreSQL counted them. */
async function indexRowsRead(conn: postgres.Sql): Promise<number> {
  const [row] = await conn<{ n: number }[]>`
    SELECT (COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0))::float8 AS n FROM pg_stat_user_tables WHERE relname = 'search_index'`;
  return row!.n;
}

/** Waits until the database has no backend but `conn`'s: the others have ended, their counts reported. */
async function othersGone(conn: postgres.Sql): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const [row] = await conn<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`;
    if (row!.n === 0) return;
    await Bun.sleep(50);
  }
  throw new Error('the store\'s connections did not end in 10 s');
}

describe.if(pg !== undefined)('_has on PostgreSQL tables never analysed: the rows read', () => {
  let db: StoreDatabase;
  let conn: postgres.Sql;
  beforeAll(async () => {
    db = await pg!.migrated();
    await (await filled('postgres', db)).t.close();
    conn = postgres(db.url, { max: 1, onnotice: () => undefined });
  }, 120_000);
  afterAll(() => conn?.end());

  test('the statistics are absent, as the search below assumes', async () => {
    const [row] = await conn<{ n: number }[]>`SELECT COUNT(*)::int AS n FROM pg_stats WHERE schemaname = current_schema() AND tablename IN ('resources', 'search_index')`;
    expect(row!.n).toBe(0);
  });

  test.each([['search', 6], ['count', 6]] as const)(
    `Patient?_has:Condition:subject:${CROWDED}, a %s: the code's 60 Conditions and their references read once, not every Patient's`,
    async (kind, matches) => {
      await othersGone(conn);
      const before = await indexRowsRead(conn);
      // A store of its own, as a server just started (its type sizes not yet measured).
      const store = db.open();
      const c = compileSearch('Patient', new URLSearchParams(`_has:Condition:subject:${CROWDED}&_count=10`), true);
      const query = { ...c.query, where: c.pending as Condition[] };
      expect(kind === 'search' ? (await store.resources.search('t1', query)).length : await store.resources.count('t1', query)).toBe(matches);
      await store.close();
      await othersGone(conn);
      // The 60 code rows, their 60 resources' rows read by `res` (three each), the Patients' own: a few hundred.
      // Before, the first Patients were probed for their references (ten each, with the code tested on each
      // of them), or the set was run again for each Patient over a scan of all of `search_index`.
      expect(await indexRowsRead(conn) - before).toBeLessThan(1500);
    },
  );
});

describe.if(pg !== undefined)('planner statistics of tables filled through the API (PostgreSQL)', () => {
  let db: StoreDatabase;
  let t: TestApp;
  let api: FhirClient;
  let conn: postgres.Sql;
  beforeAll(async () => {
    db = await pg!.migrated();
    // Filled by an app closed after, as the writes below are (writtenApart).
    await (await filled('postgres', db)).t.close();
    ({ t, api } = await app(db));
    conn = postgres(db.url, { max: 1, onnotice: () => undefined });
  }, 120_000);
  afterAll(async () => {
    await conn?.end();
    await t?.close();
  });

  /** The planner's estimate of the tenant's Conditions. */
  async function estimated(): Promise<number> {
    const [row] = await conn.unsafe<{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }[]>(
      "EXPLAIN (FORMAT JSON) SELECT 1 FROM resources WHERE tenant = 't1' AND type = 'Condition'");
    return row!['QUERY PLAN'][0].Plan['Plan Rows'];
  }

  /**
   * writeAll through an app of its own, closed after: as another process's writes. A backend reports its changes
   * when it ends; one kept open reports them up to 10 s after its commit when it reported others within the
   * second before (PostgreSQL 15's PGSTAT_MIN_INTERVAL and PGSTAT_IDLE_INTERVAL): the waits for the counts
   * below spent most of this test's 30 s on that.
   */
  async function writtenApart(resources: Json[]): Promise<void> {
    const writer = await app(db);
    try {
      await writeAll(writer.t, writer.api, resources);
    } finally {
      await writer.t.close();
    }
  }

  /** Waits until PostgreSQL counts at least `rows` changes of `resources` since its last ANALYZE (reported within a second or so of a commit, or up to 10 s). */
  async function counted(rows: number): Promise<void> {
    for (let i = 0; i < 300; i++) {
      const [row] = await conn<{ n: number }[]>`SELECT n_mod_since_analyze::float8 AS n FROM pg_stat_user_tables WHERE relname = 'resources'`;
      if ((row?.n ?? 0) >= rows) return;
      await Bun.sleep(50);
    }
    throw new Error(`PostgreSQL did not count ${rows} changes of resources in 15 s`);
  }

  test('analysed once the writes reach PostgreSQL\'s count, and again once a tenth of the table and 50 rows more have changed; one process at a time', async () => {
    // The writes' counts reach the statistics first: counted after the ANALYZE, they would be taken for changes since.
    await counted(PATIENTS + CONDITIONS);
    expect(await estimated()).toBeLessThan(300);
    const analysed = await t.store.resources.indexing.analyze({ onlyStale: true });
    expect(analysed).toEqual(expect.arrayContaining(['resources', 'search_index', 'compartments']));
    expect(await estimated()).toBeGreaterThan(CONDITIONS * 0.8);
    expect(await t.store.resources.indexing.analyze({ onlyStale: true })).toEqual([]);

    // 3,300 resources held: 200 new Conditions are fewer than 50 + 330, and leave the statistics alone.
    await writtenApart(range(CONDITIONS, CONDITIONS + 200).map(condition));
    await counted(200);
    expect(await t.store.resources.indexing.analyze({ onlyStale: true })).not.toContain('resources');
    // 400 are more: stale (the rule before, as many rows as the table held, waited for 3,300).
    await writtenApart(range(CONDITIONS + 200, CONDITIONS + 400).map(condition));
    await counted(400);
    // Another process holding the lock is analysing them: this one leaves them to it.
    const other = postgres(db.url, { max: 1, onnotice: () => undefined });
    try {
      await other`SELECT pg_advisory_lock(${pgResources.STATISTICS_LOCK}::bigint)`;
      expect(await t.store.resources.indexing.analyze({ onlyStale: true })).toEqual([]);
      await other`SELECT pg_advisory_unlock(${pgResources.STATISTICS_LOCK}::bigint)`;
    } finally {
      await other.end();
    }
    expect(await t.store.resources.indexing.analyze({ onlyStale: true })).toEqual(expect.arrayContaining(['resources', 'search_index']));
    expect(await estimated()).toBeGreaterThan((CONDITIONS + 400) * 0.9);
    expect((await api.search(`Condition?${CROWDED}&_summary=count`)).total).toBe((CONDITIONS + 400) / 50);
  }, 120_000);
});
