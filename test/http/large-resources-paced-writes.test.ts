/**
 * Large resources written beside other writes, through the API on both stores: a version of more than PACED_ROWS
 * index rows is written a slice at a time on SQLite (writer.ts pacedRows) and indexed in pieces (storedIndexPaced).
 * Search must find exactly what is stored: a transaction refused after its large write leaves the old rows, a
 * large write beside a delete and another large write in one transaction, a batch writing one large resource twice,
 * same-length updates told apart (storesSame), the words of a large CodeSystem found by `_content`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

/** A List of `n` entries naming Patient `${prefix}0`, `${prefix}1`, ... (n above 2,048: more index rows than a slice). */
const list = (id: string, n: number, prefix: string, extra: Json = {}): Json => ({
  resourceType: 'List', id, status: 'current', mode: 'working', ...extra,
  entry: Array.from({ length: n }, (_, i) => ({ item: { reference: `Patient/${prefix}${i}` } })),
});

await eachStore((kind, fresh) => {
  describe(`large resources written beside other writes (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());
    const found = async (query: string) => ids(await api.search(`${query}&_elements=id`));

    test('a transaction refused after its large update leaves the version before and its rows alone', async () => {
      await api.put200(list('refused', 3000, 'a'));
      await api.put200(list('guard', 2, 'y'));
      const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
        { resource: list('refused', 3000, 'b'), request: { method: 'PUT', url: 'List/refused' } },
        { resource: list('guard', 2, 'z'), request: { method: 'PUT', url: 'List/guard', ifMatch: 'W/"7"' } },
      ] });
      expect(res.status).toBe(412);
      expect(await found('List?item=Patient/a2999')).toEqual(['refused']);
      for (const p of ['b0', 'b2999', 'z0']) expect(await found(`List?item=Patient/${p}`)).toEqual([]);
      expect(ids(await api.search('List/refused/_history'))).toEqual(['refused']);
    });

    test('two large writes and a delete in one transaction: each found by its own rows, the deleted by none', async () => {
      await api.put200(list('gone', 100, 'c'));
      const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
        { resource: list('five', 5000, 'd'), request: { method: 'PUT', url: 'List/five' } },
        { request: { method: 'DELETE', url: 'List/gone' } },
        { resource: list('two', 2500, 'd'), request: { method: 'PUT', url: 'List/two' } },
      ] });
      expect(res.status).toBe(200);
      expect(await found('List?item=Patient/d4999')).toEqual(['five']);
      expect(await found('List?item=Patient/d2499')).toEqual(['five', 'two']);
      expect(await found('List?item=Patient/c0')).toEqual([]);
    });

    test('a batch updating one large resource twice: only the second version\'s rows', async () => {
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [
        { resource: list('twice', 3000, 'e'), request: { method: 'PUT', url: 'List/twice' } },
        { resource: list('twice', 2100, 'f'), request: { method: 'PUT', url: 'List/twice' } },
      ] });
      expect(res.status).toBe(200);
      expect(await found('List?item=Patient/e2999')).toEqual([]);
      expect(await found('List?item=Patient/e0')).toEqual([]);
      expect(await found('List?item=Patient/f2099')).toEqual(['twice']);
    });

    test('updates of a large resource that keep its length: a change is a new version, the same content none', async () => {
      await api.put200(list('same', 3000, 'g', { title: 'ab' }));
      expect((await api.put200(list('same', 3000, 'g', { title: 'ba' }))).meta.versionId).toBe('2');
      // The same value with its keys in another order: no new version.
      const { entry, ...rest } = list('same', 3000, 'g', { title: 'ba' });
      expect((await api.put200({ entry, ...rest })).meta.versionId).toBe('2');
      // Two entries swapped: the same characters, another resource.
      const swapped = list('same', 3000, 'g', { title: 'ba' });
      [swapped.entry[0], swapped.entry[1]] = [swapped.entry[1], swapped.entry[0]];
      expect((await api.put200(swapped)).meta.versionId).toBe('3');
      expect(await found('List?item=Patient/g2999')).toEqual(['same']);
    });

    test('the words of a CodeSystem of 30,000 concepts are found by _content, its codes by code', async () => {
      const concept = Array.from({ length: 30_000 }, (_, i) => ({ code: `c${i}`, display: `Zqxword number ${i}` }));
      await api.put200({ resourceType: 'CodeSystem', id: 'large', url: 'http://example.org/cs', status: 'draft', content: 'complete', concept });
      expect(await found('CodeSystem?_content=zqxword')).toEqual(['large']);
      expect(await found('CodeSystem?_content=c10%20zqxword')).toEqual(['large']);
      expect(await found('CodeSystem?code=c29999')).toEqual(['large']);
    });
  });
});
