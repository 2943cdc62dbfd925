/**
 * A Coding, Identifier or ContactPoint with a system but no code or value (index model 19, indexer.ts
 * tokenValues): `[system]|` ("any code in the system", search.html token) finds it, as HAPI FHIR and
 * Medplum do, and `:missing`, `:not`, `:text` and `_sort` agree with that, in SQL and in the in-memory
 * matcher, on both databases; a database indexed by model 18 is reindexed from the resources holding one.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex, touchedSince } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectBothWays, fhirClient, matchesOfAllPages, searchIds, type FhirClient, type Json } from '../helpers/fhir.ts';

const condition = (id: string, code: Json) => ({ resourceType: 'Condition', id, subject: { reference: 'Patient/pd' }, code });
const DATA: Json[] = [
  { resourceType: 'Patient', id: 'pa', identifier: [{ system: 'urn:only' }], telecom: [{ system: 'phone', use: 'home', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'masked' }] }] },
  { resourceType: 'Patient', id: 'pb', identifier: [{ system: 'urn:only', value: 'v1' }] },
  { resourceType: 'Patient', id: 'pc', identifier: [{ system: 'urn:other', value: 'v2' }], telecom: [{ system: 'phone', value: '555' }] },
  { resourceType: 'Patient', id: 'pd' },
  condition('ca', { coding: [{ system: 'urn:cs', display: 'Lumbago' }] }),
  condition('cb', { coding: [{ system: 'urn:cs', code: 'k' }] }),
  condition('cc', { text: 'free text' }),
  condition('cd', { coding: [{ system: 'urn:other', code: 'm' }] }),
];

/** Query, and the ids it finds among DATA of its type. */
const CASES: [string, string, string[]][] = [
  ['Patient', 'identifier=urn:only|', ['pa', 'pb']],
  ['Patient', 'identifier=urn:only|v1', ['pb']],
  ['Patient', 'identifier:not=urn:only|', ['pc', 'pd']],
  ['Patient', 'identifier:missing=true', ['pd']],
  ['Patient', 'identifier:missing=false', ['pa', 'pb', 'pc']],
  ['Patient', 'phone=phone|', ['pa', 'pc']],
  ['Condition', 'code=urn:cs|', ['ca', 'cb']],
  ['Condition', 'code=urn:cs|k', ['cb']],
  ['Condition', 'code:not=urn:cs|', ['cc', 'cd']],
  ['Condition', 'code:text=lumbago', ['ca']],
  ['Condition', 'code:missing=false', ['ca', 'cb', 'cc', 'cd']],
];

await eachStore((kind, fresh) => {
  describe(`a token with a system but no code on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ofType = (type: string) => DATA.filter((r) => r.resourceType === type).map((r) => r.id as string);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('[system]| finds it; :not, :missing and :text agree, in SQL and in memory', async () => {
      for (const [type, query, expected] of CASES) await expectBothWays(t, api, type, query, ofType(type), expected);
      expect(await searchIds(api, `Patient?_filter=${encodeURIComponent('identifier eq urn:only|')}`)).toEqual(['pa', 'pb']);
    });

    test('_sort on the token: an empty code before the others ascending, after them descending, a resource without one last', async () => {
      expect(await matchesOfAllPages(api, 'Condition?_sort=code')).toEqual(['ca', 'cb', 'cd', 'cc']);
      expect(await matchesOfAllPages(api, 'Condition?_sort=code&_count=1')).toEqual(['ca', 'cb', 'cd', 'cc']);
      expect(await matchesOfAllPages(api, 'Condition?_sort=-code&_count=1')).toEqual(['cd', 'cb', 'ca', 'cc']);
    });

    test('a database indexed by model 18 is reindexed from the resources holding a system alone', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 18 wrote them: no row for a system alone.
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const index = storedIndex(JSON.parse(r.content) as Json);
        index.tokens = index.tokens.filter((e) => e.value !== '');
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_index']));
      await t.store.resources.indexing.setState({ model: 18, after: 0 });
      expect(await searchIds(api, 'Patient?identifier=urn:only|')).toEqual(['pb']);
      const run = await reindex(t.store);
      // pa and ca hold a system alone.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 2 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [type, query, expected] of CASES) expect({ query, found: await searchIds(api, `${type}?${query}`) }).toEqual({ query, found: expected });
    });
  });
});

describe('model 19', () => {
  test('touches the resources holding a system without a code or value, and no other', () => {
    const since18 = touchedSince(18);
    for (const r of DATA) expect({ id: r.id, touched: since18(JSON.stringify(r)) }).toEqual({ id: r.id, touched: r.id === 'pa' || r.id === 'ca' });
    expect(since18(JSON.stringify({ resourceType: 'Observation', valueQuantity: { value: 1, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' } }))).toBe(false);
  });
});
