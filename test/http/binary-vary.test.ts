/**
 * A Binary read answers its native content or its FHIR representation as `Accept` asks, so every answer says it
 * varies by `Accept` (RFC 9110 12.5.5), the native content's too: a browser keeps reads (an ETag and Last-Modified,
 * no Cache-Control, so heuristically fresh), and without `Vary: Accept` the bytes an `<img>` or a `*\/*` fetch got
 * would answer a later fetch of the same URL asking for application/fhir+json. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient } from '../helpers/fhir.ts';

const varies = (res: Response) => (res.headers.get('vary') ?? '').split(',').map((v) => v.trim().toLowerCase()).includes('accept');

await eachStore((kind, fresh) => {
  describe(`Binary reads vary by Accept (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      expect((await api.call('PUT', 'Binary/small', 'hello', { 'Content-Type': 'text/plain' })).status).toBe(201);
      // Long enough to be sent compressed to a client that takes gzip (content-coding.ts): Vary lists both.
      expect((await api.call('PUT', 'Binary/large', 'x'.repeat(20_000), { 'Content-Type': 'text/plain' })).status).toBe(201);
    });
    afterAll(() => t.close());

    test('native content, read, vread and HEAD: Vary names Accept', async () => {
      for (const id of ['small', 'large']) {
        for (const [method, path, accept] of [['GET', `Binary/${id}`, undefined], ['GET', `Binary/${id}`, '*/*'], ['GET', `Binary/${id}/_history/1`, 'text/plain'], ['HEAD', `Binary/${id}`, undefined]] as const) {
          const res = await api.call(method, path, undefined, { ...(accept && { Accept: accept }), 'Accept-Encoding': 'gzip' });
          expect({ path, method, status: res.status, type: res.headers.get('content-type'), varies: varies(res) }).toEqual({ path, method, status: 200, type: 'text/plain', varies: true });
          await res.arrayBuffer();
        }
      }
    });

    test('the FHIR representation and a 304 say so too', async () => {
      for (const headers of [{ Accept: 'application/fhir+json' }, { 'If-None-Match': 'W/"1"' }] as Record<string, string>[]) {
        const res = await api.get('Binary/small', headers);
        expect(varies(res)).toBe(true);
        await res.arrayBuffer();
      }
    });
  });
});
