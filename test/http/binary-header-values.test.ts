/**
 * A Binary read as its native content carries its `contentType` in `Content-Type` and its securityContext's
 * reference in `X-Security-Context`. Both are FHIR strings a client stored, and may hold characters no HTTP
 * field value can (RFC 9110 5.5: a field value is octets, new fields' US-ASCII; `€` is no octet at all): those
 * are sent percent-encoded as UTF-8 (RFC 3987 3.1, an IRI mapped to a URI), so the read answers 200 instead of
 * failing, and the FHIR representation keeps the values as stored. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const CONTEXT = 'http://example.org/fhir/Patient/ü€';
const CONTENT_TYPE = 'text/plain; name=ü€';

await eachStore((kind, fresh) => {
  describe(`native Binary reads with non-ASCII header values (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Binary', id: 'b1', contentType: CONTENT_TYPE, data: btoa('hello'), securityContext: { reference: CONTEXT } });
    });
    afterAll(() => t.close());

    test('read, vread and HEAD answer the content with the values percent-encoded', async () => {
      for (const [method, path] of [['GET', 'Binary/b1'], ['GET', 'Binary/b1/_history/1'], ['HEAD', 'Binary/b1']] as const) {
        const res = await api.call(method, path, undefined, { Accept: '*/*' });
        expect({ method, path, status: res.status, type: res.headers.get('content-type'), context: res.headers.get('x-security-context') })
          .toEqual({ method, path, status: 200, type: 'text/plain; name=%C3%BC%E2%82%AC', context: 'http://example.org/fhir/Patient/%C3%BC%E2%82%AC' });
        expect(await res.text()).toBe(method === 'HEAD' ? '' : 'hello');
      }
    });

    test('the FHIR representation keeps the values as stored', async () => {
      const res = await api.get('Binary/b1', { Accept: 'application/fhir+json' });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect([body.contentType, body.securityContext.reference]).toEqual([CONTENT_TYPE, CONTEXT]);
    });
  });
});
