/**
 * A sort walk that reads every row of its first key fills the rest of the page with the resources
 * without it (search-sql.ts withoutKey), which sort last in the order of the sort's other keys, ties by
 * id ascending as on the rest of the page. Resources written in one transaction share `_lastUpdated`:
 * after `family` they must come by `-_lastUpdated` and then by id ascending, on the first page that
 * reaches them and on every page after a place among them (each resource once, none left out).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const N = 400;
const pid = (i: number) => `p${String((i * 37) % N).padStart(3, '0')}`;
/** Every fourth Patient has no family; the others one of 7 families, many ties. */
const family = (i: number) => (i % 4 === 0 ? undefined : `Fam${i % 7}`);

await eachStore((kind, fresh) => {
  describe(`resources without the first sort key, after a walk of it (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      // One transaction: every Patient has the same _lastUpdated.
      const entry = Array.from({ length: N }, (_, i) => {
        const f = family(i);
        const resource: Json = { resourceType: 'Patient', id: pid(i), ...(f ? { name: [{ family: f }] } : {}) };
        return { resource, request: { method: 'PUT', url: `Patient/${resource.id}` } };
      });
      expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry })).status).toBe(200);
    }, 120_000);
    afterAll(() => t.close());

    /** Every match of every page, by the next links. */
    const allPages = async (query: string) => {
      const out: string[] = [];
      let next: string | undefined = query;
      for (let n = 0; next && n < 500; n++) {
        const b = await api.search(next);
        out.push(...ids(b));
        next = link(b, 'next');
      }
      return out;
    };
    /** The sort's definition: family (nulls last), then _lastUpdated (all equal), then id ascending. */
    const expected = (descending: boolean) => {
      const all = Array.from({ length: N }, (_, i) => ({ id: pid(i), f: family(i) }));
      const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : 1);
      const keyed = all.filter((x) => x.f !== undefined).sort((a, b) => (a.f === b.f ? byId(a, b) : (a.f! < b.f!) !== descending ? -1 : 1));
      return [...keyed.map((x) => x.id), ...all.filter((x) => x.f === undefined).sort(byId).map((x) => x.id)];
    };

    for (const sort of ['family,-_lastUpdated', '-family,-_lastUpdated', 'family,_lastUpdated']) {
      test(`_sort=${sort}`, async () => {
        const want = expected(sort.startsWith('-'));
        for (const count of [1000, 320, 7]) expect([count, await allPages(`Patient?_sort=${sort}&_count=${count}`)]).toEqual([count, want]);
      });
    }
  });
});
