/**
 * `_sort` on a quantity parameter orders by the value in its canonical UCUM unit where it has one (500 mg
 * before 1 g), as a search by value compares it (src/fhir/ucum.ts; indexer.ts sortParam), on both
 * databases, paged by sealed cursors; a value without a canonical
 * form (no system, another system, a special unit such as [pH]) by its value as written; none last.
 * A database indexed by model 15, which had no sort rows, reindexed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, readsRowsBeingRebuilt, reindex, touchedSince } from '../../src/fhir/reindex.ts';
import type { SortKey } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const UCUM = 'http://unitsofmeasure.org';
const observation = (id: string, value?: Json): Json => ({
  resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2345-7' }] }, ...(value ? { valueQuantity: value } : {}),
});

const DATA: Json[] = [
  observation('g1', { value: 1, system: UCUM, code: 'g', unit: 'g' }),
  observation('mg500', { value: 500, system: UCUM, code: 'mg', unit: 'mg' }),
  observation('kg0002', { value: 0.002, system: UCUM, code: 'kg' }),
  observation('mg750', { value: 750, system: UCUM, code: 'mg' }),
  observation('ug900000', { value: 900000, system: UCUM, code: 'ug' }),
  // No canonical form: no system (its unit is no UCUM code it may be read as), a UCUM unit search does not convert.
  observation('plain3', { value: 3, unit: 'mg' }),
  observation('widgets04', { value: 0.4, system: UCUM, code: '[pH]' }),
  observation('none'),
];

/** Ascending: 0.4 [pH] as written (a UCUM unit of no canonical form: a logarithm); 0.5, 0.75, 0.9, 1 and 2 g; 3 as written; none last. */
const ASCENDING = ['widgets04', 'mg500', 'mg750', 'ug900000', 'g1', 'kg0002', 'plain3', 'none'];
const DESCENDING = ['plain3', 'kg0002', 'g1', 'ug900000', 'mg750', 'mg500', 'widgets04', 'none'];

await eachStore((kind, fresh) => {
  describe(`_sort on a quantity by its canonical UCUM value (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** The ids of every page of `query`, `count` a page. */
    const paged = async (query: string, count: number) => {
      const out: string[] = [];
      for (let url: string | undefined = `${query}&_count=${count}`; url; ) {
        const bundle = await api.search(url.startsWith('http') ? url.slice(api.base.length + 1) : url);
        out.push(...ids(bundle));
        url = link(bundle, 'next');
      }
      return out;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('orders commensurable units by magnitude, the others by their value as written, none last; pages agree', async () => {
      expect(ids(await api.search('Observation?_sort=value-quantity&_count=100'))).toEqual(ASCENDING);
      expect(ids(await api.search('Observation?_sort=-value-quantity&_count=100'))).toEqual(DESCENDING);
      for (const count of [1, 2, 3]) {
        expect({ count, ids: await paged('Observation?_sort=value-quantity', count) }).toEqual({ count, ids: ASCENDING });
        expect({ count, ids: await paged('Observation?_sort=-value-quantity', count) }).toEqual({ count, ids: DESCENDING });
      }
      // With a condition that drives the search, and a second key.
      expect(ids(await api.search('Observation?code=2345-7&_sort=value-quantity,_id&_count=100'))).toEqual(ASCENDING);
      // The CapabilityStatement says so.
      const statement = (await (await api.get('metadata')).json()) as Json;
      const observation = statement.rest[0].resource.find((r: Json) => r.type === 'Observation');
      expect(observation.searchParam.find((p: Json) => p.name === 'value-quantity').documentation).toContain('_sort orders by the value in its canonical UCUM unit');
      // A search by value still reads the values as before: 1 g and more.
      expect(ids(await api.search(`Observation?value-quantity=ge1%7C${encodeURIComponent(UCUM)}%7Cg&_sort=value-quantity`))).toEqual(['g1', 'kg0002']);
    });

    test('a database indexed by model 15 is reindexed from its resources holding a number value', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 15 wrote them: no sort rows.
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const index = storedIndex(JSON.parse(r.content) as Json);
        index.ranges = index.ranges.filter((e) => !e.param.endsWith(':sort'));
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_range']));
      await t.store.resources.indexing.setState({ model: 15, after: 0 });
      expect(ids(await api.search('Observation?_sort=value-quantity&_count=100'))).not.toEqual(ASCENDING);

      const run = await reindex(t.store);
      // Every Observation with a value; not the one without.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: DATA.length - 1 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(ids(await api.search('Observation?_sort=value-quantity&_count=100'))).toEqual(ASCENDING);
    });
  });
});

describe('model 16', () => {
  test('touches the resources holding a number value; a sort on a quantity parameter reads its rows', () => {
    const since15 = touchedSince(15);
    expect(since15('{"resourceType":"Observation","valueQuantity":{"value":1,"unit":"mg"}}')).toBe(true);
    expect(since15('{"resourceType":"Condition","onsetRange":{"low":{"value" : -2}}}')).toBe(true);
    expect(since15('{"resourceType":"Patient","name":[{"family":"x"}]}')).toBe(false);
    const query = (sort: SortKey[]) => ({ type: 'Observation', where: [], sort, count: 10 });
    expect(readsRowsBeingRebuilt(15, query([{ by: 'param', table: 'search_range', param: 'value-quantity:sort', descending: false }]))).toBe(true);
    expect(readsRowsBeingRebuilt(15, query([{ by: 'param', table: 'search_range', param: 'date', descending: false }]))).toBe(false);
    expect(readsRowsBeingRebuilt(15, query([{ by: 'lastUpdated', descending: true }]))).toBe(false);
  });
});
