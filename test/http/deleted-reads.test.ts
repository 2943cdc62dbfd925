/**
 * A read or vread of a deletion (FHIR R4 http.html#read, #vread: 410 Gone) answers the deletion's version
 * headers, as a read of a live version does: `ETag` names the version the deletion is and `Last-Modified`
 * when it was deleted, so that a client (a cache, a sync) learns which version it missed and since when.
 * In a batch, the GET entry's response carries them as `etag` and `lastModified`. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`reads of a deletion (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let deletedAt: number;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'gone', active: true });
      t.clock.advance(65_000);
      deletedAt = t.clock.now();
      expect((await api.del('Patient/gone')).status).toBe(200);
    });
    afterAll(() => t.close());

    const httpDate = () => new Date(deletedAt).toUTCString();

    test('read: 410 with the deletion version\'s ETag and Last-Modified, on GET and HEAD', async () => {
      for (const method of ['GET', 'HEAD']) {
        const res = await api.call(method, 'Patient/gone');
        expect({ method, status: res.status, etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') })
          .toEqual({ method, status: 410, etag: 'W/"2"', lastModified: httpDate() });
      }
      await expectOutcome(await api.get('Patient/gone'), 410, 'deleted');
    });

    test('vread of the deletion: 410 with its ETag and Last-Modified, on GET and HEAD', async () => {
      for (const method of ['GET', 'HEAD']) {
        const res = await api.call(method, 'Patient/gone/_history/2');
        expect({ method, status: res.status, etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') })
          .toEqual({ method, status: 410, etag: 'W/"2"', lastModified: httpDate() });
      }
      await expectOutcome(await api.get('Patient/gone/_history/2'), 410, 'deleted');
      // The version before it is read as it was.
      expect((await api.get('Patient/gone/_history/1')).headers.get('etag')).toBe('W/"1"');
    });

    test('batch: a GET entry of the deletion answers 410 with etag and lastModified', async () => {
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [
        { request: { method: 'GET', url: 'Patient/gone' } },
        { request: { method: 'GET', url: 'Patient/gone/_history/2' } },
      ] });
      expect(res.status).toBe(200);
      const responses = ((await res.json()) as Json).entry.map((e: Json) => ({ ...e.response, outcome: e.response.outcome?.issue[0].code }));
      const expected = { status: '410 Gone', etag: 'W/"2"', lastModified: new Date(deletedAt).toISOString(), outcome: 'deleted' };
      expect(responses).toEqual([expected, expected]);
    });
  });
});
