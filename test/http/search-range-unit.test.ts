/**
 * A Range is searched by its stated human unit as a Quantity is (search.html, quantity: `5.4||mg`
 * matches "either the code (code) or the stated human unit (unit)"), also where its ends have a code, in
 * a quantity parameter and in a composite's quantity component, on both databases, in SQL and in the
 * in-memory matcher; a database indexed by model 11, which kept a Range's code alone, reindexed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, readsRowsBeingRebuilt, reindex, touchedSince } from '../../src/fhir/reindex.ts';
import type { Condition } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectBothWays, fhirClient, searchIds, type FhirClient, type Json } from '../helpers/fhir.ts';

const UCUM = 'http://unitsofmeasure.org';
const years = (value: number) => ({ value, system: UCUM, code: 'a', unit: 'years' });
const condition = (id: string, onset: Json): Json => ({ resourceType: 'Condition', id, subject: { reference: 'Patient/x' }, ...onset });

const DATA: Json[] = [
  condition('range', { onsetRange: { low: years(30), high: years(40) } }),
  condition('age', { onsetAge: years(35) }),
  condition('high', { onsetRange: { high: years(10) } }),
  condition('coded', { onsetRange: { low: { value: 30, system: UCUM, code: 'a' } } }),
  {
    resourceType: 'Library', id: 'lib', status: 'active', type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/library-type', code: 'logic-library' }] },
    useContext: [{ code: { system: 'http://terminology.hl7.org/CodeSystem/usage-context-type', code: 'age' }, valueRange: { low: years(18), high: years(65) } }],
  },
];

const AGE = encodeURIComponent('http://terminology.hl7.org/CodeSystem/usage-context-type|age');
/** Query, and the ids it finds among DATA of its type. */
const CASES: [string, string, string[]][] = [
  ['Condition', 'onset-age=gt20%7C%7Cyears', ['age', 'range']],
  ['Condition', 'onset-age=gt20%7C%7Ca', ['age', 'coded', 'range']],
  ['Condition', `onset-age=gt20%7C${encodeURIComponent(UCUM)}%7Ca`, ['age', 'coded', 'range']],
  ['Condition', 'onset-age=lt20%7C%7Cyears', ['high']],
  ['Condition', 'onset-age=gt50%7C%7Cyears', []],
  ['Library', `context-type-quantity=${AGE}$gt60%7C%7Cyears`, ['lib']],
  ['Library', `context-type-quantity=${AGE}$gt70%7C%7Cyears`, []],
];

await eachStore((kind, fresh) => {
  describe(`a Range's unit on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = (q: string) => searchIds(api, q);
    const ofType = (type: string) => DATA.filter((r) => r.resourceType === type).map((r) => r.id as string);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('value||unit finds a Range by its stated unit as a Quantity, in SQL and in memory', async () => {
      for (const [type, query, expected] of CASES) {
        await expectBothWays(t, api, type, query, ofType(type), expected);
      }
      // The unit's row changes no sort and no :missing.
      expect(((await api.search('Condition?_sort=onset-age&_elements=id')).entry ?? []).map((e: Json) => e.resource.id)).toEqual(['high', 'coded', 'range', 'age']);
      expect(await ids('Condition?onset-age:missing=false')).toEqual(['age', 'coded', 'high', 'range']);
    });

    test('a database indexed by model 11 is reindexed from its resources holding a Range end and a unit', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 11 wrote them: no row of a Range's stated unit (the Library's composite rows included).
      const unit = (system: string, code: string, range: boolean) => !(range && system === '' && code === 'years');
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const resource = JSON.parse(r.content) as Json;
        const index = storedIndex(resource);
        const range = resource.onsetRange !== undefined || resource.resourceType === 'Library';
        index.ranges = index.ranges.filter((e) => unit(e.system, e.code, range));
        index.composites = index.composites.filter((e) => unit(e.system2, e.value2, range));
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_range', 'search_composite']));
      await t.store.resources.indexing.setState({ model: 11, after: 0 });
      expect(await ids('Condition?onset-age=gt20%7C%7Cyears')).toEqual(['age']);

      const run = await reindex(t.store);
      // Every one: range, high and lib hold a Range end and a unit (model 12), and each holds a number value,
      // which model 16 gave a sort row.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 5 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [type, query, expected] of CASES) expect({ query, found: await ids(`${type}?${query}`) }).toEqual({ query, found: expected });
    });
  });
});

describe('model 12', () => {
  test('touches the resources holding a Range end and a unit; quantity tests by a unit code alone read its rows', () => {
    const since11 = touchedSince(11);
    expect(since11('{"resourceType":"Condition","onsetRange":{"low":{"value":1,"unit":"years"}}}')).toBe(true);
    expect(since11('{"resourceType":"Observation","valueRange":{"high" : {"value":1,"code":"mg","unit":"mg"}}}')).toBe(true);
    // (A number value without a unit on a Range end is rebuilt too: model 16 gave it a sort row.)
    expect(since11('{"resourceType":"Observation","valueQuantity":{"value":1,"unit":"mg"}}')).toBe(true);
    expect(since11('{"resourceType":"Observation","valueRange":{"low":{"value":1,"system":"http://unitsofmeasure.org","code":"mg"}}}')).toBe(true);
    expect(since11('{"resourceType":"Observation","valueString":"1 mg"}')).toBe(false);
    const query = (c: Condition) => ({ type: 'Condition', where: [c], sort: [], count: 10 });
    const test = { op: 'gt' as const, value: 20, low: 19.5, high: 20.5 };
    expect(readsRowsBeingRebuilt(11, query({ kind: 'number', param: 'onset-age', tests: [{ ...test, code: 'years' }] }))).toBe(true);
    // (Other quantity tests wait too, from model 13: model 14 changed every quantity's rows that has a comparator.)
    expect(readsRowsBeingRebuilt(11, query({ kind: 'number', param: 'onset-age', tests: [{ ...test, system: UCUM, code: 'a' }] }))).toBe(true);
    expect(readsRowsBeingRebuilt(13, query({ kind: 'number', param: 'onset-age', tests: [test] }))).toBe(true);
    expect(readsRowsBeingRebuilt(11, query({ kind: 'composite', param: 'x', tests: [{ value1: 'age', parts: [{ kind: 'number', column: 'both', test: { ...test, code: 'years' } }] }] }))).toBe(true);
  });
});
