/**
 * Reads and vreads carry `Cache-Control: private, no-cache`. They carry `Last-Modified`, which without a
 * Cache-Control makes them heuristically fresh for a browser (RFC 9111 4.2.2: a tenth of the time since the last
 * change, a day for a record last changed ten days ago): the browser answered a SMART app's later read of the same
 * URL from its cache without asking, so the app showed a version another user had since replaced, and a token
 * revoked or another user's session in that browser read what the server would now refuse. With `no-cache` the
 * browser keeps the answer but asks every time (`If-None-Match`: a 304 when it still holds, judged with the
 * request's token); `private` keeps shared caches out. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient } from '../helpers/fhir.ts';

const revalidated = (res: Response) => {
  const directives = (res.headers.get('cache-control') ?? '').split(',').map((d) => d.trim().toLowerCase());
  return directives.includes('no-cache') && directives.includes('private');
};

await eachStore((kind, fresh) => {
  describe(`reads are revalidated, never heuristically fresh (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1', active: true });
      expect((await api.call('PUT', 'Binary/b1', 'hello', { 'Content-Type': 'text/plain' })).status).toBe(201);
    });
    afterAll(() => t.close());

    test('read (hot route and Hono), vread, HEAD, XML, Binary content and resource: 200 with Cache-Control: private, no-cache', async () => {
      for (const [method, path, headers] of [
        ['GET', 'Patient/p1', {}], ['GET', 'Patient/p1?_format=json', {}], ['GET', 'Patient/p1?_format=xml', {}], ['HEAD', 'Patient/p1', {}],
        ['GET', 'Patient/p1/_history/1', {}], ['GET', 'Binary/b1', {}], ['GET', 'Binary/b1', { Accept: 'application/fhir+json' }], ['GET', 'Binary/b1/_history/1', {}],
      ] as [string, string, Record<string, string>][]) {
        const res = await api.call(method, path, undefined, headers);
        expect({ method, path, headers, status: res.status, lastModified: res.headers.has('last-modified'), revalidated: revalidated(res) })
          .toEqual({ method, path, headers, status: 200, lastModified: true, revalidated: true });
        await res.arrayBuffer();
      }
    });

    test('a 304 carries it as its 200 does (RFC 9110 15.4.5)', async () => {
      for (const path of ['Patient/p1', 'Patient/p1/_history/1', 'Binary/b1']) {
        const res = await api.get(path, { 'If-None-Match': 'W/"1"' });
        expect({ path, status: res.status, revalidated: revalidated(res) }).toEqual({ path, status: 304, revalidated: true });
      }
    });
  });
});
