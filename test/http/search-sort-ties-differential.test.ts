/**
 * A sort on one token or reference parameter whose first value has many ties answers its first page from the
 * ties read in id order (search-sql.ts firstTiesInIdOrder). Differential: each page must be exactly the page
 * of the general path, reached here by adding a condition every resource meets (`_lastUpdated=gt2000-01-01`,
 * which turns the shortcut off): the ids, their order, `_total` and the next links over three pages, ascending
 * and descending, at page sizes around the shortcut's bounds, with ties spread over several code systems, a
 * resource holding the value twice, a deleted tie among the first by id, references of two target types to one id.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, ids, link, type FhirClient, type Json } from '../helpers/fhir.ts';

const N = 900;
const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const id = (i: number) => `o${String((i * 7919) % N).padStart(4, '0')}`;

/** Observation `i`: most of category `aaa` (in one of three systems), some `mmm`, every third also `zzz`, every 23rd none. */
function observation(i: number): Json {
  const category: Json[] = [];
  if (i % 23 !== 0) {
    if (i % 17 === 0) category.push({ coding: [{ system: 'http://example.org/other', code: 'aaa' }] });
    else if (i % 19 === 0) category.push({ coding: [{ system: CAT, code: 'aaa', display: 'Lab' }] });
    else if (i % 5 !== 0) category.push({ coding: [{ system: CAT, code: 'aaa' }] });
    else category.push({ coding: [{ system: CAT, code: 'mmm' }] });
    if (i % 3 === 0) category.push({ coding: [{ system: CAT, code: 'zzz' }] });
    if (i % 7 === 0) category.push({ coding: [{ system: CAT, code: 'aaa' }, { system: 'http://example.org/x', code: 'aaa' }] });
  }
  const subject = i % 11 === 0 ? 'Group/p0' : `Patient/p${i % 3}`;
  return { resourceType: 'Observation', id: id(i), status: 'final', ...(category.length ? { category } : {}), code: { text: 'x' }, subject: { reference: subject } };
}

await eachStore((kind, fresh) => {
  describe(`the first page among many ties, as the general path pages (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const p of [0, 1, 2]) await api.put200({ resourceType: 'Patient', id: `p${p}` });
      await api.put200({ resourceType: 'Group', id: 'p0', type: 'person', actual: true });
      for (let s = 0; s < N; s += 300) {
        const entry = Array.from({ length: Math.min(300, N - s) }, (_, k) => observation(s + k)).map((r) => ({ resource: r, request: { method: 'PUT', url: `Observation/${r.id}` } }));
        expect((await api.post('', { resourceType: 'Bundle', type: 'transaction', entry })).status).toBe(200);
      }
      // The first ties by id, deleted.
      for (const d of ['o0001', 'o0002', 'o0003', 'o0004', 'o0006']) expect((await api.del(`Observation/${d}`)).status).toBe(200);
    }, 120_000);
    afterAll(() => t.close());

    /** Up to three pages from `query` by the next links: ids, `total`, whether a next link. */
    const pages = async (query: string) => {
      const out: Json[] = [];
      let next: string | undefined = query;
      for (let n = 0; n < 3 && next; n++) {
        const b = await api.search(next);
        out.push({ ids: ids(b), total: b.total, next: link(b, 'next') !== undefined });
        next = link(b, 'next');
      }
      return out;
    };

    for (const sort of ['category', '-category', 'subject', '-subject']) {
      test(`_sort=${sort}`, async () => {
        for (const count of [1, 2, 5, 10, 37]) {
          for (const total of ['', '&_total=accurate']) {
            const query = `Observation?_sort=${sort}&_count=${count}${total}`;
            const got = await pages(query);
            expect([query, got]).toEqual([query, await pages(`${query}&_lastUpdated=gt2000-01-01`)]);
            expect(got[0].ids.length).toBe(count);
          }
        }
      });
    }
  });
});
