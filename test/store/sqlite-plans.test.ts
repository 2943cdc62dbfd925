/**
 * The statements SQLite runs for a search read an index row by its resource where the rows are found
 * by resource (probes, sort keys): with the key compared with a constant, SQLite chose the value-first
 * index (k, value) instead and read every row of the key for each resource, a cost that grows with
 * the square of the resources (`Patient?_sort=family` on 10,000 Patients: 2.4-3.4 s against 31-36 ms).
 */
import { Database } from 'bun:sqlite';
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileSearch } from '../../src/fhir/search.ts';
import { plannedSearch, SORT_WALK_MAX_ROWS, SQLITE, withImpliedDrivers, withoutAbsentKeys, type SqlValue } from '../../src/store/search-sql.ts';
import { reachCondition } from '../../src/fhir/provenance-reach.ts';
import type { Access } from '../../src/fhir/access.ts';
import { defineFunctions } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { snapshotSql } from '../../src/store/sqlite/snapshot.ts';
import type { Condition, Store } from '../../src/store/types.ts';
import { firstVersions } from '../helpers/versions.ts';

const dir = mkdtempSync(join(tmpdir(), 'cinder-plans-'));
const path = join(dir, 'c.db');
let store: Store;
let db: Database;
const FAMILIES = ['Adams', 'Baker', 'Clark', 'Diaz', 'Evans'];

beforeAll(async () => {
  store = createSqliteStore(path);
  await store.migrate();
  const patients = Array.from({ length: 300 }, (_, i) => ({
    resourceType: 'Patient', id: `p${i}`, gender: i % 2 ? 'female' : 'male', birthDate: `19${50 + (i % 50)}-01-01`,
    name: [{ family: FAMILIES[i % 5], given: [`G${i}`] }],
  }));
  const observations = Array.from({ length: 300 }, (_, i) => ({
    resourceType: 'Observation', id: `o${i}`, status: 'final', subject: { reference: `Patient/p${i % 30}` },
    code: { coding: [{ system: 'http://loinc.org', code: i % 3 ? '8302-2' : '29463-7' }] },
    valueQuantity: { value: i, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
  }));
  // A Provenance of each Observation: p1's are those of o1, o31, ... o271.
  const provenance = observations.map((o) => ({ resourceType: 'Provenance', id: `prov-${o.id}`, target: [{ reference: `Observation/${o.id}` }], recorded: '2026-01-01T00:00:00Z', agent: [{ who: { display: 'lab' } }] }));
  await store.resources.write('t1', (w) => w.insertNew(firstVersions([...patients, ...observations, ...provenance])));
  db = new Database(path, { readonly: true });
  defineFunctions(db);
});
afterAll(async () => {
  db.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The statements of a search, each with its query plan; the store's committed keys known, as a server knows them. */
async function plans(type: string, query: string, on = db, size = 300, more: Condition[] = [], offset = 0): Promise<{ sql: string; plan: string }[]> {
  const db = on;
  const known = new Map(db.query<{ k: number; type: string; param: string; system: string; code: string }, []>('SELECT k, type, param, system, code FROM search_keys').all()
    .map((r) => [`${r.type}|${r.param}|${r.system}|${r.code}`, r.k]));
  const dialect = { ...SQLITE, knownKey: (key: { type: string; param: string; system: string; code: string }) => known.get(`${key.type}|${key.param}|${key.system}|${key.code}`) };
  const compiled = compileSearch(type, new URLSearchParams(query), true);
  const out: { sql: string; plan: string }[] = [];
  const explain = (sql: string, values: SqlValue[]) =>
    out.push({ sql, plan: db.query<{ detail: string }, SqlValue[]>(`EXPLAIN QUERY PLAN ${sql}`).all(...values).map((r) => r.detail).join('\n') });
  // As the server does (searchResources), with the drivers an `or` of `and`s implies.
  // Without the chains and `_has` of keys that do not exist, as each adapter asks before it plans.
  const q = await withoutAbsentKeys({ ...compiled.query, where: [...(compiled.pending as Condition[]), ...more] }, (t, param, system) => [...known.keys()].some((k) => k.startsWith(`${t}|${param}|${system}|`)));
  await plannedSearch(dialect, 't1', { ...q, where: withImpliedDrivers(q.where ?? []), ...(offset > 0 && { offset }) }, {
    count: (sql, values) => (explain(sql, values), db.query<{ n: number }, SqlValue[]>(sql).get(...values)!.n),
    rows: (sql, values) => (explain(sql, values), db.query(sql).all(...values)),
  }, () => size);
  return out;
}

test('a patient\'s search of Provenance is driven by the target rows of the patient\'s records, not read in order', async () => {
  // A token reading every type of p1's compartment: one chain per type, of which those of types no Provenance targets are dropped.
  const access = { can: () => true, patientLimit: () => 'p1', filters: () => undefined } as unknown as Access;
  const statements = await plans('Provenance', '_count=5', db, 300, [reachCondition(access, 'p1')]);
  const last = statements.at(-1)!;
  expect(last.sql).toContain('SELECT DISTINCT d.res');
  expect(last.sql.match(/search_index/g)?.length).toBe(2);
  expect(last.plan).not.toMatch(/SCAN r\b/);
  const rows = await store.resources.search('t1', { type: 'Provenance', where: [reachCondition(access, 'p1')], sort: [], count: 20 });
  expect(rows.map((r) => r.id)).toEqual(Array.from({ length: 10 }, (_, i) => `prov-o${30 * i + 1}`).sort());
});

test('a `_has` probe tests a chain on each reference row\'s `res`, not probing the value-first index once per chain target', async () => {
  // 150 Observations of male Patients: too many for a set, so the first Patients read probe the `_has`.
  const statements = await plans('Patient', '_has:Observation:subject:subject:Patient.gender=male&_count=10');
  const page = statements.at(-1)!;
  expect(page.sql).toContain('AS hit');
  // The reference rows by (k, value), each `res` tested against the chain's set; before, the set's members were
  // the index's `res` keys, each probed for each Patient (through the join to the Observation's own row).
  expect(page.plan).toContain('search_index_value (k=? AND value=?)');
  expect(page.plan).not.toContain('(k=? AND value=? AND res=?)');
  const c = compileSearch('Patient', new URLSearchParams('_has:Observation:subject:subject:Patient.gender=male&_count=10'), true);
  const rows = await store.resources.search('t1', { ...c.query, where: c.pending as Condition[] });
  expect(rows.map((r) => r.id)).toEqual(['p0', 'p10', 'p12', 'p14', 'p16', 'p18', 'p2', 'p20', 'p22', 'p24']);
});

test('a sort key on a string reads the resource\'s rows by the primary key, not the value-first index', async () => {
  // A page further in than a sort walk may read rows for (SORT_WALK_MAX_ROWS): the search without it
  // computes the key of each resource (short of that, a walk that reads every row of the key searches
  // the rest as the family missing, after an offset too).
  const statements = await plans('Patient', '_sort=family&_count=10&given:contains=zz', db, 300, [], SORT_WALK_MAX_ROWS);
  const last = statements.at(-1)!;
  expect(last.sql).not.toContain('SELECT DISTINCT d.res');
  expect(last.plan).not.toContain('search_string_value');
  expect(last.plan).toContain('USING PRIMARY KEY (res=?)');
});

test('a sort walk reads the value-first index by key and range, and the sort keys by the primary key', async () => {
  const statements = await plans('Patient', '_sort=family&_count=10');
  // The bound, the count of the first family's ties (60 of 300: too few to read the type in id order
  // instead, tiesPage), and the walk's search.
  expect(statements.length).toBe(3);
  const [bound, ties, search] = statements as [{ sql: string; plan: string }, { sql: string; plan: string }, { sql: string; plan: string }];
  expect(ties.sql).toContain('SELECT COUNT(*) AS n FROM (SELECT 1 FROM search_string s');
  expect(ties.plan).toContain('SEARCH s USING COVERING INDEX search_string_value (k=? AND value=?)');
  expect(bound.sql).toContain('FROM search_keys kk');
  expect(bound.plan).toContain('SEARCH s USING COVERING INDEX search_string_value (k=?)');
  expect(search.plan).toContain('search_string_value (k=? AND value>? AND value<?)');
  for (const line of search.plan.split('\n').filter((l) => l.includes('search_string'))) {
    expect(line).toMatch(/search_string_value \(k=\? AND value>\? AND value<\?\)|USING PRIMARY KEY \(res=\?\)/);
  }
});

test('a string prefix probed per resource reads that resource\'s rows, not the prefix\'s range', async () => {
  const statements = await plans('Patient', 'gender=male&name=a&birthdate=ge1960&_count=10');
  const probing = statements.filter((s) => s.plan.includes('EXISTS'));
  expect(probing.length).toBeGreaterThan(0);
  for (const s of probing) expect(s.plan).not.toContain('search_string_value');
});

test('a token compared with = is still found by the value-first index, exactly', async () => {
  const statements = await plans('Observation', 'subject=Patient/p1&code=http://loinc.org|29463-7');
  const last = statements.at(-1)!;
  expect(last.sql).not.toMatch(/\+s\d+\.k = /);
  expect(last.plan).toContain('search_index_value (k=? AND value=? AND res=?)');
});

test('an or of ands is driven by the rows of one condition of each alternative, not read in order', async () => {
  const filter = '(subject re Patient/p1 and value-quantity gt 250) or (subject re Patient/p2 and code eq http://loinc.org|8302-2)';
  const statements = await plans('Observation', `_filter=${encodeURIComponent(filter)}`);
  const last = statements.at(-1)!;
  expect(last.sql).toContain('SELECT DISTINCT d.res');
  expect(last.plan).toContain('search_index_value (k=? AND value=?)');
  expect(last.plan).not.toMatch(/SCAN r\b/);
});

test('where each alternative\'s range is narrower than its code, the ranges drive', async () => {
  const filter = '(code eq http://loinc.org|8302-2 and value-quantity gt 280) or (code eq http://loinc.org|29463-7 and value-quantity gt 290)';
  const last = (await plans('Observation', `_filter=${encodeURIComponent(filter)}`)).at(-1)!;
  expect(last.sql).toContain('SELECT DISTINCT d.res');
  expect(last.plan).toMatch(/search_range_high \(k=\? AND high>\?\)/);
  // The codes' implied OR, counted and not chosen, is not tested again: the codes' rows are read only by the OR's own two tests.
  expect(last.sql.match(/FROM search_index /g)?.length).toBe(2);
});

/** The statements' plans that read `search_range` by one of its value-first indexes. */
const rangeReads = (statements: { plan: string }[]) =>
  statements.flatMap((s) => s.plan.split('\n')).filter((line) => /search_range_(low|high)/.test(line));

test('a date or number test that bounds only the stored high end reads the (k, high) index', async () => {
  for (const [type, query] of [['Patient', 'birthdate=gt1990'], ['Patient', 'birthdate=ge1990'], ['Observation', 'value-quantity=gt250'],
    ['Observation', 'value-quantity=ge250']] as const) {
    const reads = rangeReads(await plans(type, query));
    expect(reads.length, query).toBeGreaterThan(0);
    for (const line of reads) expect(line, query).toMatch(/search_range_high \(k=\? AND high>/);
  }
});

test('a test that bounds the stored low end still reads the (k, low) index, even where it also tests the high end', async () => {
  for (const [type, query] of [['Patient', 'birthdate=1960'], ['Patient', 'birthdate=ap1970-01'], ['Patient', 'birthdate=lt1960'],
    ['Observation', 'value-quantity=120'], ['Observation', 'value-quantity=ap120'], ['Observation', 'value-quantity=sa250|http://unitsofmeasure.org|kg']] as const) {
    const reads = rangeReads(await plans(type, query));
    expect(reads.length, query).toBeGreaterThan(0);
    for (const line of reads) expect(line, query).toMatch(/search_range_low \(k=\? AND low[<>]/);
  }
});

describe('2,500 Observations: `_lastUpdated`, `:missing` on a reference kept in another, `:not`', () => {
  const widePath = join(dir, 'wide.db');
  let wideStore: Store;
  let wide: Database;
  const RECENT = 100;
  beforeAll(async () => {
    wideStore = createSqliteStore(widePath);
    await wideStore.migrate();
    const observation = (i: number) => ({
      resourceType: 'Observation', id: `w${String(i).padStart(4, '0')}`, status: 'final', subject: { reference: `Patient/p${i % 30}` },
      code: { coding: [{ system: 'http://loinc.org', code: '8302-2' }] },
    });
    const older = Array.from({ length: 2_500 - RECENT }, (_, i) => observation(i));
    const recent = Array.from({ length: RECENT }, (_, i) => observation(2_500 - RECENT + i));
    await wideStore.resources.write('t1', (w) => w.insertNew([
      ...firstVersions(older, Date.parse('2026-01-01T00:00:00Z')), ...firstVersions(recent, Date.parse('2026-06-01T00:00:00Z')),
    ]));
    wide = new Database(widePath, { readonly: true });
    defineFunctions(wide);
  });
  afterAll(async () => {
    wide.close();
    await wideStore.close();
  });

  test('a `_lastUpdated` range of few resources drives the search by the (tenant, type, last_updated) index', async () => {
    const statements = await plans('Observation', '_lastUpdated=gt2026-03-01&_count=10', wide, 2_500);
    expect(statements[0]!.sql).toContain('FROM resources lu');
    expect(statements[0]!.plan).toContain('resources_updated');
    expect(statements.at(-1)!.sql).toContain('SELECT DISTINCT d.res FROM (SELECT lu');
  });

  test('a range of most resources is tested on each read in id order, not read by that index and sorted', async () => {
    const statements = await plans('Observation', '_lastUpdated=gt2025-01-01&_count=10', wide, 2_500);
    const last = statements.at(-1)!;
    expect(last.sql).toContain('+r.last_updated');
    expect(last.plan).not.toContain('resources_updated');
    expect(last.plan).not.toContain('TEMP B-TREE');
    // Sorted by `_lastUpdated`, that index is the order: the range stays on it.
    const sorted = (await plans('Observation', '_lastUpdated=gt2025-01-01&_sort=_lastUpdated&_count=10', wide, 2_500)).at(-1)!;
    expect(sorted.sql).not.toContain('+r.last_updated');
    expect(sorted.plan).toContain('resources_updated');
  });

  test('`patient:missing=true` and `status:not=final` with no match are read as the type without those rows, not probed per resource', async () => {
    for (const query of ['patient:missing=true&_count=10', 'status:not=final&_count=10']) {
      const statements = await plans('Observation', query, wide, 2_500);
      expect(statements.at(-1)!.sql).toContain('EXCEPT SELECT s.res FROM search_index s');
      // The parameter's rows by the value-first index alone, those of another server's URL (patient:missing) among them.
      if (query.startsWith('patient')) expect(statements.at(-1)!.plan).toContain('RIGHT\nSEARCH s USING COVERING INDEX search_index_value (k=?)');
    }
    // Where matches are common, the first resources read in order are the page.
    const common = await plans('Observation', 'status:not=cancelled&_count=10', wide, 2_500);
    expect(common.every((s) => !s.sql.includes('EXCEPT'))).toBe(true);
  });
});

test("_filter's case-insensitive token eq reads ranges of the value-first index, of its case variants' first two letters", async () => {
  // A page of 200 (the 150 males' rows drive, where a page of ten is found sooner among the first Patients in order).
  const statements = await plans('Patient', `_filter=${encodeURIComponent('gender eq MALE')}&_count=200`);
  const last = statements.at(-1)!;
  // `MA`, `Ma`, `mA`, `ma`: four ranges, each read by the index alone, then compared folded, their
  // rows joined by UNION ALL (ORed, SQLite merged them through a set of row ids, reading each row).
  expect(last.plan.match(/SEARCH s\d+ USING COVERING INDEX search_index_value \(k=\? AND value>\? AND value<\?\)/g)?.length).toBe(4);
  expect(last.plan).not.toContain('MULTI-INDEX OR');
  expect(last.plan).not.toMatch(/SCAN (s\d+|r)\b/);
  expect(last.sql).toContain('lower(s');
});

test("an export page's filter of many codes reads each resource's rows of the key, not a probe of the value-first index per code", () => {
  const codes = Array.from({ length: 1000 }, (_, i) => ({ system: 'http://loinc.org', value: `none-${i}` }));
  const { sql, params } = snapshotSql('t1', { type: 'Observation', at: Date.now(), limit: 1000, filters: [[{ kind: 'token', param: 'code', values: codes }]] }, undefined, 1e12);
  const plan = db.query<{ detail: string }, SqlValue[]>(`EXPLAIN QUERY PLAN ${sql}`).all(...(params as SqlValue[])).map((r) => r.detail).join('\n');
  // One range of the primary key (res, k) a resource: its few rows of `code`, each tested against the list.
  expect(plan).toContain('USING PRIMARY KEY (res=? AND k=?)');
  expect(plan).not.toContain('search_index_value (k=? AND value=? AND res=?)');
  expect(db.query(sql).all(...(params as SqlValue[]))).toEqual([]);
  // One code is still probed exactly.
  const one = snapshotSql('t1', { type: 'Observation', at: Date.now(), limit: 1000, filters: [[{ kind: 'token', param: 'code', values: [{ system: 'http://loinc.org', value: '8302-2' }] }]] }, undefined, 1e12);
  expect(db.query(one.sql).all(...(one.params as SqlValue[]))).toHaveLength(200);
});
