/**
 * A Binary of several MiB keeps its content to the byte, written as native content or as FHIR JSON with base64 `data`
 * and read back either way, its earlier version too: on PostgreSQL its stored text (more than a Mi character) goes to
 * the server before its statement, in pieces (src/store/postgres/staged-content.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';

/** `n` bytes of every value, in an order that repeats nowhere within a MiB. */
function content(n: number, seed: number): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    bytes[i] = x >>> 24;
  }
  return bytes;
}

const same = (a: Uint8Array, b: Uint8Array) => a.byteLength === b.byteLength && Buffer.compare(a, b) === 0;

await eachStore((kind, fresh) => {
  describe(`a Binary of several MiB, byte for byte (${kind})`, () => {
    let t: TestApp;
    let auth: { Authorization: string };
    const native = async (path: string) => new Uint8Array(await (await t.request(`${t.fhir()}/${path}`, { headers: auth })).arrayBuffer());
    const asJson = async (path: string) => (await (await t.request(`${t.fhir()}/${path}`, { headers: { ...auth, Accept: 'application/fhir+json' } })).json()) as Json;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      auth = { Authorization: `Bearer ${await t.token()}` };
    });
    afterAll(() => t.close());

    test('native content written is read back as written, natively and as base64 in FHIR JSON', async () => {
      const bytes = content(3 * 1024 * 1024 + 1, 7);
      const res = await t.request(`${t.fhir()}/Binary`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/octet-stream' }, body: bytes });
      expect(res.status).toBe(201);
      const id = ((await res.json()) as Json).id as string;
      expect(same(await native(`Binary/${id}`), bytes)).toBe(true);
      const read = await asJson(`Binary/${id}`);
      expect([read.contentType, read.data === Buffer.from(bytes).toString('base64')]).toEqual(['application/octet-stream', true]);
    });

    test('an update as FHIR JSON with base64 data is the new content; the first version keeps its own', async () => {
      const first = content(2 * 1024 * 1024, 11);
      const second = content(4 * 1024 * 1024 - 2, 13);
      const put = (body: BodyInit, type: string) => t.request(`${t.fhir()}/Binary/doc`, { method: 'PUT', headers: { ...auth, 'Content-Type': type }, body });
      expect((await put(first, 'application/pdf')).status).toBe(201);
      const json = JSON.stringify({ resourceType: 'Binary', id: 'doc', contentType: 'image/png', data: Buffer.from(second).toString('base64') });
      const updated = await put(json, 'application/fhir+json');
      expect([updated.status, updated.headers.get('etag')]).toEqual([200, 'W/"2"']);
      const current = await t.request(`${t.fhir()}/Binary/doc`, { headers: auth });
      expect([current.headers.get('content-type'), same(new Uint8Array(await current.arrayBuffer()), second)]).toEqual(['image/png', true]);
      expect(same(await native('Binary/doc/_history/1'), first)).toBe(true);
      expect((await asJson('Binary/doc/_history/2')).data === Buffer.from(second).toString('base64')).toBe(true);
    });

    test('FHIR JSON with base64 data before other elements is stored with its elements in their order, the data to the byte', async () => {
      const bytes = content(1024 * 1024 + 2, 17);
      const data = Buffer.from(bytes).toString('base64');
      const body = { resourceType: 'Binary', id: 'ordered', meta: { tag: [{ system: 'http://example.org/t', code: 'x' }] }, data, contentType: 'image/png', securityContext: { reference: 'Patient/nobody' } };
      const put = await t.request(`${t.fhir()}/Binary/ordered`, { method: 'PUT', headers: { ...auth, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(body) });
      expect(put.status).toBe(201);
      const read = await t.request(`${t.fhir()}/Binary/ordered`, { headers: { ...auth, Accept: 'application/fhir+json' } });
      const json = (await read.json()) as Json;
      expect(Object.keys(json)).toEqual(['resourceType', 'id', 'meta', 'data', 'contentType', 'securityContext']);
      expect([json.data === data, json.contentType, json.securityContext, (json.meta as Json).tag]).toEqual([true, 'image/png', body.securityContext, body.meta.tag]);
      expect(same(await native('Binary/ordered'), bytes)).toBe(true);
    });

    test('an update with content of the same length is a new version holding it; the same content sent again changes nothing', async () => {
      const put = (bytes: Uint8Array) => t.request(`${t.fhir()}/Binary/same-length`, {
        method: 'PUT', headers: { ...auth, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Binary', id: 'same-length', contentType: 'application/octet-stream', data: Buffer.from(bytes).toString('base64') }),
      });
      const first = content(1024 * 1024 + 5, 19);
      const second = content(1024 * 1024 + 5, 23);
      expect((await put(first)).status).toBe(201);
      const changed = await put(second);
      expect([changed.status, changed.headers.get('etag')]).toEqual([200, 'W/"2"']);
      const again = await put(second);
      expect([again.status, again.headers.get('etag')]).toEqual([200, 'W/"2"']);
      expect(same(await native('Binary/same-length'), second)).toBe(true);
      expect(same(await native('Binary/same-length/_history/1'), first)).toBe(true);
    });
  });
});
