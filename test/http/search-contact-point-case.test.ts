/**
 * A ContactPoint's value (an email address above all) is a token value compared without case
 * (src/fhir/contact-points.ts contactKey; R4 search.html: a token over a string "is not case sensitive"),
 * on both databases, in SQL and in the in-memory matcher: `email`, `phone` and `telecom`, with a system or
 * without, in a chain and `_filter` too; other tokens keep their case. A database indexed by model 16,
 * whose rows held the values as written, reindexed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, readsRowsBeingRebuilt, reindex, touchedSince } from '../../src/fhir/reindex.ts';
import type { Condition } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectBothWays, fhirClient, searchIds, type FhirClient, type Json } from '../helpers/fhir.ts';

const patient = (id: string, ...telecom: Json[]): Json => ({ resourceType: 'Patient', id, ...(telecom.length ? { telecom } : {}) });
const DATA: Json[] = [
  { ...patient('alice', { system: 'email', value: 'alice@example.org' }), identifier: [{ value: 'abc' }] },
  patient('bob', { system: 'email', value: 'Bob.Smith@Example.ORG', use: 'work' }, { system: 'phone', value: '555-0100' }),
  patient('site', { system: 'url', value: 'https://Example.org/Bob' }, { system: 'phone', value: '1-800-FLOWERS' }),
  patient('none'),
];
const IDS = DATA.map((r) => r.id as string);
const email = encodeURIComponent('email|');

/** Query, and the Patients it finds. */
const CASES: [string, string[]][] = [
  ['email=Alice@Example.org', ['alice']],
  ['email=alice@example.org', ['alice']],
  ['email=bob.smith@example.org', ['bob']],
  ['email=BOB.SMITH@EXAMPLE.ORG', ['bob']],
  ['email=Bob.Smith@Example.ORG,ALICE@example.org', ['alice', 'bob']],
  ['email=bob@example.org', []],
  [`telecom=${email}ALICE@EXAMPLE.ORG`, ['alice']],
  ['telecom=Bob.Smith@example.org', ['bob']],
  [`telecom=${encodeURIComponent('|')}bob.smith@EXAMPLE.org`, ['bob']],
  ['email:not=ALICE@example.org', ['bob', 'none', 'site']],
  // Every ContactPoint alike.
  ['telecom=https://Example.org/Bob', ['site']],
  ['telecom=https://example.org/bob', ['site']],
  ['phone=555-0100', ['bob']],
  ['phone=1-800-Flowers', ['site']],
  [`telecom=${encodeURIComponent('phone|1-800-flowers')}`, ['site']],
  ['telecom=email%7C1-800-flowers', []],
  // An identifier is no ContactPoint: its case counts.
  ['identifier=ABC', []],
  ['identifier=abc', ['alice']],
];

await eachStore((kind, fresh) => {
  describe(`contact point tokens without case (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
      await api.put200({ resourceType: 'Observation', id: 'obs-bob', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/bob' } });
    });
    afterAll(() => t.close());

    test('email, phone and telecom find a value whatever its case, in SQL and in memory', async () => {
      for (const [query, expected] of CASES) await expectBothWays(t, api, 'Patient', query, IDS, expected);
      expect(await searchIds(api, 'Observation?subject:Patient.email=BOB.smith@example.ORG')).toEqual(['obs-bob']);
      // The CapabilityStatement says so, of the ContactPoint parameters alone.
      const statement = (await (await api.get('metadata')).json()) as Json;
      const params = statement.rest[0].resource.find((r: Json) => r.type === 'Patient').searchParam as Json[];
      for (const name of ['email', 'phone', 'telecom']) expect(params.find((p) => p.name === name)!.documentation).toContain('compared without case');
      expect(params.find((p) => p.name === 'identifier')!.documentation).not.toContain('without case');
      expect(await searchIds(api, 'Observation?patient.telecom=bob.smith@example.org')).toEqual(['obs-bob']);
      expect(await searchIds(api, `Patient?_filter=${encodeURIComponent('email eq "ALICE@example.org" or telecom eq "email|BOB.SMITH@example.org"')}`)).toEqual(['alice', 'bob']);
    });

    test('a database indexed by model 16 is reindexed from its resources holding an email address', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 16 wrote them: the address as written.
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const resource = JSON.parse(r.content) as Json;
        const index = storedIndex(resource);
        const written = new Map<string, string>((resource.telecom ?? []).map((c: Json) => [c.value.toLowerCase(), c.value]));
        index.tokens = index.tokens.map((e) => (['email', 'phone', 'telecom'].includes(e.param) ? { ...e, value: written.get(e.value) ?? e.value } : e));
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_index']));
      await t.store.resources.indexing.setState({ model: 16, after: 0 });
      expect(await searchIds(api, 'Patient?email=bob.smith@example.org')).toEqual([]);

      const run = await reindex(t.store);
      // alice, bob and site; not the Patient without a telecom nor the Observation.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 3 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [query, expected] of CASES) expect({ query, found: await searchIds(api, `Patient?${query}`) }).toEqual({ query, found: expected });
    });

    test('while a reindex from model 16 runs beside the server, a sort on a contact point parameter waits as a search by one does', async () => {
      // Rows as written and lower-cased side by side would order `Bob.Smith@` before `alice@`, and a row
      // rewritten between two pages would move across the sealed cursor.
      const beside = await createTestApp({ store: await fresh(), rebuilding: () => ({ from: 16, examined: 1 }) });
      try {
        const client = fhirClient(beside, await beside.token());
        for (const r of DATA) await client.put200(r);
        for (const sort of ['email', '-email', 'telecom', 'phone', 'family,-telecom']) {
          const res = await client.get(`Patient?_sort=${sort}`);
          expect({ sort, status: res.status, retryAfter: res.headers.get('Retry-After') }).toEqual({ sort, status: 503, retryAfter: '30' });
        }
        // Sorts on other parameters read no rows being rebuilt (a sort on any token parameter waits for
        // model 19, a system without a code, and one on a string parameter for model 22, normalised strings:
        // reindex-serving.test.ts).
        for (const sort of ['birthdate', '-_lastUpdated']) expect({ sort, status: (await client.get(`Patient?_sort=${sort}`)).status }).toEqual({ sort, status: 200 });
      } finally {
        await beside.close();
      }
    });
  });
});

describe('model 17', () => {
  test('touches the resources holding a telecom or contact element; token conditions on contact points read its rows', () => {
    const since16 = touchedSince(16);
    expect(since16('{"resourceType":"Patient","telecom":[{"system" : "email","value":"a@b.c"}]}')).toBe(true);
    expect(since16('{"resourceType":"Subscription","contact" :[{"value":"A"}]}')).toBe(true);
    expect(since16('{"resourceType":"Patient","name":[{"text":"telecom"}],"identifier":[{"system":"email","value":"x"}]}')).toBe(false);
    const query = (c: Condition) => ({ type: 'Patient', where: [c], sort: [], count: 10 });
    expect(readsRowsBeingRebuilt(16, query({ kind: 'token', param: 'email', values: [{ value: 'a@b.c' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(16, query({ kind: 'token', param: 'telecom', values: [{ system: 'phone', value: '1' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(16, query({ kind: 'chain', param: 'general-practitioner', targetType: 'Practitioner', where: [{ kind: 'token', param: 'email', values: [{ value: 'a' }] }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(16, query({ kind: 'token', param: 'identifier', values: [{ value: 'a' }] }))).toBe(false);
    // A sort on one orders by them; one on another token parameter does not.
    const sorted = (param: string) => ({ type: 'Patient', where: [], sort: [{ by: 'param' as const, table: 'search_index' as const, param, descending: false }], count: 10 });
    expect(readsRowsBeingRebuilt(16, sorted('email'))).toBe(true);
    expect(readsRowsBeingRebuilt(15, sorted('telecom'))).toBe(true);
    // (Model 19 changed the sort rows of every token parameter: a system without a code.)
    expect(readsRowsBeingRebuilt(16, sorted('identifier'))).toBe(true);
    expect(readsRowsBeingRebuilt(19, sorted('identifier'))).toBe(false);
  });
});

describe('older models', () => {
  test('a date sort waits while models 9 and 13 rebuild date rows, a string sort while model 10 rebuilds folded text', () => {
    const sorted = (table: 'search_range' | 'search_string' | 'search_index', param: string) =>
      ({ type: 'Observation', where: [], sort: [{ by: 'param' as const, table, param, descending: true }], count: 10 });
    expect(readsRowsBeingRebuilt(8, sorted('search_range', 'date'))).toBe(true);
    expect(readsRowsBeingRebuilt(12, sorted('search_range', 'date'))).toBe(true);
    expect(readsRowsBeingRebuilt(9, sorted('search_string', 'code-text'))).toBe(true);
    expect(readsRowsBeingRebuilt(13, sorted('search_range', 'date'))).toBe(false);
    // (A token sort waits for model 19 alone, a system without a code.)
    expect(readsRowsBeingRebuilt(12, sorted('search_index', 'status'))).toBe(true);
    expect(readsRowsBeingRebuilt(19, sorted('search_index', 'status'))).toBe(false);
    expect(readsRowsBeingRebuilt(12, { type: 'Observation', where: [], sort: [{ by: 'lastUpdated' as const, descending: true }], count: 10 })).toBe(false);
  });
});
