/**
 * A Quantity with a comparator (`<5`, `>=10`: "the actual value is less than the given value", R4
 * QuantityComparator) is searched as the range it bounds, open at one end, as a Range without a low or a
 * high end is (search.html's range semantics), in a quantity parameter, in canonical UCUM units and in a
 * composite's quantity component, on both databases, in SQL and in the in-memory matcher; a database
 * indexed by model 13, which kept the value alone, reindexed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectBothWays, fhirClient, searchIds, type FhirClient, type Json } from '../helpers/fhir.ts';

const UCUM = 'http://unitsofmeasure.org';
const LOINC = 'http://loinc.org';
const observation = (id: string, quantity: Json): Json => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: LOINC, code: '2345-7' }] },
  valueQuantity: { system: UCUM, code: 'mg', unit: 'mg', ...quantity },
});

const DATA: Json[] = [
  observation('below5', { value: 5, comparator: '<' }),
  observation('upto5', { value: 5, comparator: '<=' }),
  observation('from10', { value: 10, comparator: '>=' }),
  observation('exactly7', { value: 7 }),
];
const IDS = DATA.map((r) => r.id as string);

const Q = (v: string) => encodeURIComponent(v);
/** Query, and the ids it finds. */
const CASES: [string, string[]][] = [
  // A value below 5 may be below 4; no value below 5 is 5, or 20.
  ['value-quantity=lt4', ['below5', 'upto5']],
  ['value-quantity=5', []],
  ['value-quantity=gt20', ['from10']],
  ['value-quantity=lt10', ['below5', 'exactly7', 'upto5']],
  ['value-quantity=7', ['exactly7']],
  [`value-quantity=lt4${Q(`|${UCUM}|mg`)}`, ['below5', 'upto5']],
  // In canonical units (g), as UCUM converts them.
  [`value-quantity=lt4000${Q(`|${UCUM}|ug`)}`, ['below5', 'upto5']],
  [`value-quantity=gt0.02${Q(`|${UCUM}|g`)}`, ['from10']],
  [`code-value-quantity=${Q(`${LOINC}|2345-7$lt4`)}`, ['below5', 'upto5']],
  [`code-value-quantity=${Q(`${LOINC}|2345-7$gt20`)}`, ['from10']],
];

await eachStore((kind, fresh) => {
  describe(`a Quantity with a comparator on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('is searched as the range it bounds, in SQL and in memory', async () => {
      for (const [query, expected] of CASES) await expectBothWays(t, api, 'Observation', query, IDS, expected);
    });

    test('a database indexed by model 13 is reindexed from its resources holding a comparator', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 13 wrote them: the value alone.
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const resource = JSON.parse(r.content) as Json;
        delete resource.valueQuantity.comparator;
        return { type: r.type, id: r.id, versionId: r.versionId, index: storedIndex(resource), compartments: [] };
      }), ['search_range', 'search_composite']));
      await t.store.resources.indexing.setState({ model: 13, after: 0 });
      expect(await searchIds(api, 'Observation?value-quantity=lt4')).toEqual([]);

      const run = await reindex(t.store);
      // The three holding a comparator, and exactly7 too: every number value has a sort row from model 16.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 4 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [query, expected] of CASES) expect({ query, found: await searchIds(api, `Observation?${query}`) }).toEqual({ query, found: expected });
    });
  });
});
