/**
 * The same generated data (bench/lib/generator.ts) in both stores, PostgreSQL's tables never analysed
 * (autovacuum off for them), then analysed: every search answers the same on both, page by page through
 * its next links (ids in order, totals, whether a next page is offered). The searches are those whose
 * plans PostgreSQL picks by its (absent) statistics: :missing, :not, _filter ne, _has (nested, with chains
 * and sorts), chains into contained resources, _sort with ties, small and large _count, _total=accurate.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import postgres from 'postgres';
import { generatePatients } from '../../bench/lib/generator.ts';
import { createTestApp, fhirInit, BASE, type TestApp } from '../helpers/app.ts';
import { craftToken } from '../helpers/fhir.ts';
import { compileSearch } from '../../src/fhir/search.ts';
import { boundedQuery } from '../../src/store/index-limits.ts';
import { plannedSearch, POSTGRES_MISJUDGED } from '../../src/store/search-sql.ts';
import type { Condition } from '../../src/store/types.ts';
import { STATISTICS_LOCK } from '../../src/store/postgres/resources.ts';
import { limiter } from '../helpers/in-flight.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const TENANT = 't1';
const base = `${BASE}/tenants/${TENANT}/fhir/R4`;
const data = [...generatePatients({ patients: 100, seed: 7 })] as unknown as Record<string, unknown>[];
// A Condition of a contained Patient (a chain reads the contained resources' rows too), and one uncoded.
data.push({
  resourceType: 'Condition', id: 'contained-subject', contained: [{ resourceType: 'Patient', id: 'pc', gender: 'female', name: [{ family: 'Contained' }] }],
  subject: { reference: '#pc' }, clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] },
});

const SEARCHES = [
  'Condition?code:missing=true',
  'Condition?code:missing=false&_count=7',
  'Condition?onset-date:missing=true&_count=3',
  'Condition?clinical-status:not=active&_count=5',
  'Condition?clinical-status:not=active&_sort=-_lastUpdated&_count=5',
  'Observation?code:not=http://loinc.org|8302-2&_count=100',
  'Observation?code:not=http://loinc.org|8302-2&_sort=_lastUpdated&_count=250&_total=accurate',
  'Observation?value-quantity:missing=true&_count=50&_total=accurate',
  'Observation?_filter=status ne final&_count=10',
  'Observation?_filter=code ne http://loinc.org|8302-2 and category eq vital-signs&_count=200',
  'Patient?_has:Condition:subject:clinical-status=resolved&_count=4',
  'Patient?_has:Condition:subject:clinical-status=resolved&_has:Observation:subject:code=http://loinc.org|8302-2&_count=3&_total=accurate',
  'Patient?_has:Encounter:subject:_has:Observation:encounter:code=http://loinc.org|8302-2&_count=5',
  'Patient?_has:Condition:subject:clinical-status=resolved&_sort=-birthdate&_count=3',
  'Patient?_has:Condition:subject:clinical-status=resolved&_sort=gender,-_id&_count=6',
  'Patient?_has:Observation:subject:encounter.class=AMB&_count=10',
  'Encounter?_has:Observation:encounter:code:not=http://loinc.org|8302-2&_sort=date&_count=20',
  'Condition?subject:Patient.gender=female&_count=15',
  'Condition?subject:Patient.name=Contained',
  'Condition?subject:Patient.gender:not=male&_count=30&_total=accurate',
  'Observation?subject:Patient.gender=male&code:not=http://loinc.org|8302-2&_count=200',
  'Observation?_sort=status&_count=300',
  'Observation?_sort=-_lastUpdated,status&_count=1000',
  'Encounter?_sort=class,-date&_count=25&_total=accurate',
  'Patient?_sort=gender&_count=2',
  'Patient?gender:missing=false&_count=1000&_total=accurate',
  'Immunization?patient:missing=false&status:not=completed&_count=10',
  'Observation?encounter:missing=true&_count=20',
  'Patient?_has:Observation:subject:code=http://loinc.org|51990-0&_count=2',
  'Patient?_has:Observation:subject:code:not=http://loinc.org|8302-2&_sort=-_lastUpdated,_id&_count=7',
  'Patient?_has:Condition:subject:code:missing=true&_count=5',
  'Patient?_has:Condition:subject:subject:Patient.gender=female&_count=9&_total=accurate',
  'Patient?_has:AllergyIntolerance:patient:criticality=low&_has:Condition:subject:clinical-status:not=active&_count=3',
  'Encounter?_has:Observation:encounter:_has:DiagnosticReport:result:status=final&_count=11',
  'Observation?_has:DiagnosticReport:result:status=final&_sort=-date&_count=17&_total=accurate',
  'Observation?subject:Patient._has:Condition:subject:clinical-status=resolved&code=http://loinc.org|8302-2&_count=13',
  'Observation?encounter.subject:Patient.gender=female&_sort=date&_count=50',
  'Condition?_filter=clinical-status ne active or code eq http://snomed.info/sct|162864005&_count=9',
  'Condition?_filter=clinical-status ne resolved and onset-date ge 2015-01-01&_count=40',
  'Observation?_filter=not (status eq final)&_count=10',
  'Observation?value-quantity:missing=false&_sort=value-quantity&_count=333',
  'Observation?_sort=-value-quantity,_id&_count=400&_total=accurate',
  'Observation?_sort=subject,_lastUpdated&_count=500',
  'MedicationRequest?_sort=status,-authoredon&_count=3',
  'Patient?birthdate:missing=true&_count=1',
  'Patient?_id:not=x&_count=33',
  'Observation?status:not=final&_count=4&_total=accurate',
  'Observation?code=http://snomed.info/sct|27113001&_count=10',
  'Observation?code:not=http://snomed.info/sct|27113001&status=amended&_count=10',
  'Observation?code:not=http://snomed.info/sct|27113001&_count=1000&_total=accurate',
  'Observation?_filter=code ne http://snomed.info/sct|27113001&_count=1000',
  'Patient?_has:Observation:subject:code:not=http://snomed.info/sct|27113001&_count=10',
  'Observation?encounter:missing=true&_sort=-date&_count=6&_total=accurate',
  'Observation?_filter=status ne final&_count=5',
  'Observation?_filter=code ne http://snomed.info/sct|27113001 and status eq amended&_count=5',
  'Patient?_has:Observation:subject:status=amended&_count=3',
  'Patient?_has:Observation:subject:encounter:missing=true&_sort=-_lastUpdated&_count=3',
  'Encounter?_has:Observation:encounter:status=amended&_count=5',
  'Encounter?subject:Patient.gender:missing=false&_count=100&_total=accurate',
  'Condition?subject:missing=false&_count=100&_total=accurate',
  // Chains whose target conditions can drive (read from their rows where the statistics misjudge the type).
  'Observation?subject:Patient.birthdate=lt1970&_count=20',
  'Encounter?subject:Patient.gender=male&subject:Patient.birthdate=ge1960&_count=9&_total=accurate',
  'Condition?subject:Patient._lastUpdated=gt2000-01-01&_count=25',
  'Observation?patient.gender=female&status=final&_count=50&_total=accurate',
  'Immunization?patient._has:Condition:subject:clinical-status=resolved&_count=15',
  // Sorts whose first value has many ties (each page found in id order from its place, tiesPage).
  'Immunization?_sort=status&_count=20',
  'Encounter?_sort=-status&_count=4',
  'Condition?_sort=clinical-status&_count=2',
  // A patient-context token (`@`): the compartment is a condition of each chain's targets and each `_has`'s referring resources.
  '@Condition?subject:Patient.gender=male&_count=5',
  '@Observation?subject:Patient.gender=male&_count=20&_total=accurate',
  '@Observation?encounter.subject:Patient.gender=male&_sort=date&_count=7',
  '@Patient?_has:Observation:subject:code=http://loinc.org|8302-2',
  '@Encounter?_has:Observation:encounter:status=final&_count=3',
  '@Patient?_has:Condition:subject:clinical-status=resolved&_has:Observation:subject:code=http://loinc.org|8302-2',
];

/** The patient of the `@` searches' token (male): one kept (the first of every 17 is deleted below). */
const PATIENT = data.filter((r) => r.resourceType === 'Patient')[1]!.id as string;

interface Answer { pages: string[][]; totals: (number | undefined)[] }

/** Every page of `search`, read through its next links. */
async function walk(t: TestApp, token: string, search: string): Promise<Answer> {
  const pages: string[][] = [];
  const totals: (number | undefined)[] = [];
  let url: string | undefined = `${base}/${search}`;
  while (url) {
    const res = await t.request(url, fhirInit(token));
    const body = await res.json() as { total?: number; entry?: { resource: { id: string }; search?: { mode?: string } }[]; link?: { relation: string; url: string }[]; issue?: unknown };
    if (res.status !== 200) throw new Error(`${search}: ${res.status} ${JSON.stringify(body)}`);
    pages.push((body.entry ?? []).filter((e) => e.search?.mode !== 'include').map((e) => e.resource.id));
    totals.push(body.total);
    url = body.link?.find((l) => l.relation === 'next')?.url;
    if (pages.length > 500) throw new Error(`${search}: more than 500 pages`);
  }
  return { pages, totals };
}

const answers: Record<string, Record<string, Answer>> = {};

for (const target of targets) {
  describe(`the generated data's searches (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let patientToken: string;
    let url = '';
    beforeAll(async () => {
      const db = await target.migrated();
      url = db.url;
      const store = db.open();
      if (target.kind === 'postgres') {
        const conn = postgres(db.url, { max: 1, onnotice: () => undefined });
        for (const table of ['resources', 'search_keys', 'search_index', 'search_string', 'search_range', 'search_composite', 'compartments']) {
          await conn.unsafe(`ALTER TABLE ${table} SET (autovacuum_enabled = off)`);
        }
        await conn.end();
      }
      t = await createTestApp({ store });
      token = await t.token();
      patientToken = await craftToken(t, 'patient/*.rs', { patient: PATIENT });
      // Batches of 500, each its own lastUpdated: ties within a batch, an order across them.
      for (let i = 0; i < data.length; i += 500) {
        await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(data.slice(i, i + 500), Date.parse('2026-01-01T00:00:00Z') + i)));
      }
      // Deleted resources (no index rows, their resource rows kept) and updated ones (their older versions'
      // rows gone): an EXCEPT of the type's rows, a chain or a _has must leave out what is deleted.
      const typed = (type: string) => data.filter((r) => r.resourceType === type);
      for (const [type, every] of [['Condition', 9], ['Observation', 41], ['Patient', 17], ['Encounter', 23]] as const) {
        for (const r of typed(type).filter((_, i) => i % every === 0)) {
          const res = await t.request(`${base}/${type}/${r.id}`, fhirInit(token, 'DELETE'));
          expect(res.status).toBeLessThan(300);
        }
      }
      for (const r of typed('Observation').filter((r) => !r.meta).filter((_, i) => i % 37 === 1)) {
        const { encounter: _e, ...rest } = r;
        const code = r.code as { coding: unknown[] };
        const res = await t.request(`${base}/Observation/${r.id}`, fhirInit(token, 'PUT', {
          ...rest, status: 'amended', code: { ...code, coding: [...code.coding, { system: 'http://snomed.info/sct', code: '27113001' }] } }, { 'Content-Type': 'application/fhir+json' }));
        if (res.status >= 300) throw new Error(`PUT ${res.status} ${await res.text()}`);
      }
      answers[target.kind] = {};
      if (target.kind === 'postgres') {
        const conn = postgres(db.url, { max: 1, onnotice: () => undefined });
        const [row] = await conn<{ n: number }[]>`SELECT COUNT(*)::int AS n FROM pg_stats WHERE schemaname = current_schema() AND tablename IN ('resources', 'search_index', 'search_range')`;
        await conn.end();
        expect(row!.n).toBe(0);
      }
    }, 120_000);

    /**
     * Every search's walk, a few searches at a time (each one's pages in turn), started by the phase's first test:
     * they wait mostly on the database. Each test awaits its own (and fails with it).
     */
    const walkAll = (): Map<string, Promise<Answer>> => {
      // On PostgreSQL the server's backends do the work; SQLite's run in this process, where overlapping gains nothing.
      const limit = limiter(target.kind === 'postgres' ? 4 : 1);
      return new Map(SEARCHES.map((search) => {
        const walked = limit(() => walk(t, search.startsWith('@') ? patientToken : token, search.replace(/^@/, '')));
        walked.catch(() => undefined); // reported by its own test, not as unhandled before that test runs
        return [search, walked];
      }));
    };
    let unanalysed: Map<string, Promise<Answer>> | undefined;
    let analysed: Map<string, Promise<Answer>> | undefined;

    test.each(SEARCHES)('%s', async (search) => {
      unanalysed ??= walkAll();
      answers[target.kind]![search] = await unanalysed.get(search)!;
    }, 60_000);

    if (target.kind === 'postgres') {
      // The dialect the store takes for a type its statistics misjudge (its _has sets hashed, its probes
      // scalar subqueries), whatever this type's estimate: the first page as SQLite's.
      // (The `@` searches' compartment conditions are the token's: through the store, misjudged as its types are.)
      test.each(SEARCHES.filter((s) => !s.startsWith('@')))('as misjudged: %s', async (search) => {
        const [type, query] = search.split('?') as [string, string];
        const c = compileSearch(type, new URLSearchParams(query), true);
        const q = boundedQuery({ ...c.query, where: c.pending as Condition[] });
        const conn = postgres(url, { max: 1, onnotice: () => undefined });
        try {
          const rows = await plannedSearch(POSTGRES_MISJUDGED, TENANT, q, {
            count: async (sql, values) => Number((await conn.unsafe<{ n: number }[]>(sql, values as never[], { prepare: true }))[0]!.n),
            rows: async (sql, values) => await conn.unsafe(sql, values as never[], { prepare: true }) as never[],
          }, (t) => (t === 'Patient' ? 10_000 : 100_000));
          answers.misjudged ??= {};
          answers.misjudged[search] = { pages: [rows.map((r) => (r as { id: string }).id).slice(0, q.count)], totals: [] };
        } finally {
          await conn.end();
        }
      }, 60_000);

      test.each(SEARCHES)('after ANALYZE: %s', async (search) => {
        if (!answers.analysedPg) {
          const conn = postgres(url, { max: 1, onnotice: () => undefined });
          await conn.unsafe('ANALYZE');
          await conn.end();
          answers.analysedPg = {};
        }
        analysed ??= walkAll();
        answers.analysedPg[search] = await analysed.get(search)!;
      }, 60_000);
    }
  });
}

describe.if(targets.length === 2)('both stores answer the same', () => {
  test.each(SEARCHES)('%s', (search) => {
    const lite = answers.sqlite?.[search];
    const pg = answers.postgres?.[search];
    expect(lite).toBeDefined();
    expect(pg).toEqual(lite);
    expect(answers.analysedPg?.[search]).toEqual(lite);
    if (!search.startsWith('@')) expect(answers.misjudged?.[search]?.pages[0]).toEqual(lite!.pages[0]);
    // The patient's token sees some of what each `@` search asks for (a search finding nothing would compare nothing).
    if (search.startsWith('@')) expect(lite!.pages.flat().length).toBeGreaterThan(0);
    expect(lite!.pages.flat().length).toBe(new Set(lite!.pages.flat()).size);
  });
});

const pg = targets.find((t) => t.kind === 'postgres');

describe.if(pg !== undefined)('the statistics watch beside writes and another process (PostgreSQL)', () => {
  test('while another process analyses under the lock (its ANALYZE not yet committed), writes go on and this process skips the check', async () => {
    const db = await pg!.migrated();
    const t = await createTestApp({ store: db.open() });
    const token = await t.token();
    const other = postgres(db.url, { max: 1, onnotice: () => undefined });
    try {
      const patient = (id: string) => ({ resourceType: 'Patient', id, gender: 'female' });
      expect((await t.request(`${base}/Patient/a`, fhirInit(token, 'PUT', patient('a')))).status).toBe(201);
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      let analysing!: () => void;
      const started = new Promise<void>((r) => (analysing = r));
      // The other process's watch: the lock taken and ANALYZE run in its transaction, held open (as a slow ANALYZE holds it).
      const held = other.begin(async (tx) => {
        await tx`SELECT pg_advisory_xact_lock(${STATISTICS_LOCK}::bigint)`;
        await tx.unsafe('ANALYZE resources, search_keys, search_index, search_string, search_range, search_composite, compartments');
        analysing();
        await released;
      });
      await started;
      // Writes (a create, an update, a delete, a transaction) answer while it is held.
      const writes = (async () => {
        expect((await t.request(`${base}/Patient/b`, fhirInit(token, 'PUT', patient('b')))).status).toBe(201);
        expect((await t.request(`${base}/Patient/a`, fhirInit(token, 'PUT', { ...patient('a'), gender: 'male' }))).status).toBe(200);
        expect((await t.request(`${base}/Patient/b`, fhirInit(token, 'DELETE'))).status).toBeLessThan(300);
        const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [{ fullUrl: 'urn:uuid:5b9d2c52-2a9e-4f8e-9a55-3f0c1f0d7a11', resource: patient('c'), request: { method: 'PUT', url: 'Patient/c' } }] };
        expect((await t.request(base, fhirInit(token, 'POST', bundle))).status).toBe(200);
        // This process's check finds the lock taken: it analyses nothing and does not wait.
        expect(await t.store.resources.indexing.analyze({ onlyStale: true })).toEqual([]);
        return 'done';
      })();
      expect(await Promise.race([writes, Bun.sleep(10_000).then(() => 'blocked')])).toBe('done');
      release();
      await held;
      const search = await (await t.request(`${base}/Patient?gender=male&_total=accurate`, fhirInit(token))).json() as { total: number };
      expect(search.total).toBe(1);
    } finally {
      await other.end();
      await t.close();
    }
  }, 60_000);
});
