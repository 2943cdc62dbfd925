/**
 * A DELETE entry of a transaction or batch that deletes a resource answers the version the deletion is, as a REST
 * DELETE answers it in `ETag`: `response.etag` and `response.lastModified` (R4 Bundle.entry.response: "the Etag
 * for the resource, if the operation for the entry produced a versioned resource"), so that a client learns which
 * version its delete made and can tell it from a later one. A DELETE that deletes nothing has no version to tell.
 * On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`DELETE entries answer the deletion's version (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    for (const type of ['transaction', 'batch']) {
      test(`${type}: by id and by condition, etag and lastModified; nothing deleted, neither`, async () => {
        await api.put200({ resourceType: 'Patient', id: `${type}-a` });
        await api.put200({ resourceType: 'Patient', id: `${type}-b`, identifier: [{ system: 'urn:del', value: type }] });
        await api.put200({ resourceType: 'Patient', id: `${type}-b`, identifier: [{ system: 'urn:del', value: type }], active: true });
        t.clock.advance(3_000);
        const res = await api.post('', { resourceType: 'Bundle', type, entry: [
          { request: { method: 'DELETE', url: `Patient/${type}-a` } },
          { request: { method: 'DELETE', url: `Patient?identifier=urn:del|${type}` } },
          { request: { method: 'DELETE', url: `Patient/${type}-never` } },
          { request: { method: 'DELETE', url: `Patient?identifier=urn:del|nobody-${type}` } },
        ] });
        expect(res.status).toBe(200);
        const when = new Date(t.clock.now()).toISOString().slice(0, 19);
        const responses = ((await res.json()) as Json).entry.map((e: Json) => ({ ...e.response, ...(e.response.lastModified && { lastModified: e.response.lastModified.slice(0, 19) }) }));
        expect(responses).toEqual([
          { status: '204 No Content', etag: 'W/"2"', lastModified: when },
          { status: '204 No Content', etag: 'W/"3"', lastModified: when },
          { status: '204 No Content' },
          { status: '204 No Content' },
        ]);
        // The version told is the deletion a vread answers 410 for.
        expect((await api.get(`Patient/${type}-b/_history/3`)).status).toBe(410);
      });
    }
  });
});
