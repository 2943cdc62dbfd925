/**
 * HEAD (RFC 9110 9.3.2): the header fields GET would send, no content. Content-Length is the length of
 * GET's content (8.6), never the 0 of the empty body, on every route: FHIR reads, searches and history,
 * metadata, $graphql and the terminology operations, native Binary (streamed content included, whose length is told without decoding it), export
 * status and downloads, discovery and the ops endpoints, errors. HEAD on an export kick-off starts
 * nothing. On both databases, and once through a listening server, whose framing is what clients see.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore, finish, kickOff, observation, patient, put } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { startCinder } from '../helpers/server.ts';
import { createTenant } from '../../src/auth/admin.ts';

/** The headers of an answer that must be the same for GET and HEAD (the request id is each request's own). */
function headersOf(res: Response): Record<string, string> {
  const out = Object.fromEntries(res.headers);
  delete out['x-request-id'];
  return out;
}

/**
 * Sends GET then HEAD; HEAD must have GET's status and headers, no content, and a Content-Length equal
 * to GET's content length (or, for content of unknown length, none). Returns both.
 */
async function sameAsGet(send: (method: string) => Response | Promise<Response>): Promise<{ get: Response; head: Response; bytes: number }> {
  const get = await send('GET');
  const bytes = (await get.arrayBuffer()).byteLength;
  const head = await send('HEAD');
  expect(head.status).toBe(get.status);
  expect(await head.text()).toBe('');
  const expected = headersOf(get);
  if (get.status !== 304 && get.status !== 204) {
    if (expected['content-encoding'] !== undefined && expected['content-length'] === undefined) expected['transfer-encoding'] = 'chunked';
    else expected['content-length'] ??= String(bytes);
  }
  expect(headersOf(head)).toEqual(expected);
  return { get, head, bytes };
}

await eachStore((kind, fresh) => {
  describe(`HEAD answers as GET would (${kind})`, () => {
    let t: TestApp;
    let token: string;
    let binaryId: string;
    let largeId: string;
    const large: Uint8Array<ArrayBuffer> = new Uint8Array(5 * 1024 * 1024).map((_, i) => (i * 7) % 256);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      await put(t, patient('h1', { name: [{ family: 'Ünïcödé', given: ['Zoë'] }] }));
      await put(t, patient('h1', { name: [{ family: 'Ünïcödé', given: ['Zoë', 'Ann'] }] }));
      await put(t, patient('h2'));
      await put(t, observation('o1', 'h1'));
      const native = async (bytes: Uint8Array<ArrayBuffer>) => {
        const res = await t.request(`${t.fhir()}/Binary`, { method: 'POST', body: bytes, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/octet-stream' } });
        expect(res.status).toBe(201);
        return ((await res.json()) as Json).id as string;
      };
      binaryId = await native(new TextEncoder().encode('a small file'));
      largeId = await native(large);
    });
    afterAll(() => t.close());

    const fhir = (path: string, headers: Record<string, string> = {}) => (method: string) =>
      t.request(`${t.fhir()}/${path}`, fhirInit(token, method, undefined, headers));

    test('searches, reads, vreads, history, metadata and errors: Content-Length of GET\'s content', async () => {
      const search = await sameAsGet(fhir('Patient?_count=2'));
      expect(search.bytes).toBeGreaterThan(100);
      expect(search.head.headers.get('content-length')).toBe(String(search.bytes));
      expect(search.head.headers.get('content-type')).toBe('application/fhir+json; charset=utf-8');
      const metadata = await sameAsGet((method) => t.request(`${t.fhir()}/metadata`, { method }));
      expect(Number(metadata.head.headers.get('content-length'))).toBeGreaterThan(100_000);
      for (const path of [
        'Patient/h1', 'Patient/h1?_summary=true', 'Patient/h1?_elements=name&_pretty=true', 'Patient/h1/_history/1', 'Patient/h1/_history',
        '_history', 'Observation?subject=Patient/h1&_include=Observation:subject', 'Patient/h1/$everything', 'Patient/nobody', 'Nothing/x',
      ]) {
        const { head, bytes } = await sameAsGet(fhir(path));
        expect({ path, length: head.headers.get('content-length') }).toEqual({ path, length: String(bytes) });
        expect(bytes).toBeGreaterThan(0);
      }
      // Unicode counts in bytes, not characters.
      const read = await sameAsGet(fhir('Patient/h1'));
      expect(read.bytes).toBeGreaterThan((await (await fhir('Patient/h1')('GET')).text()).length);
      await sameAsGet(fhir('Patient/h1', { 'If-None-Match': 'W/"2"' }));
      const noToken = await sameAsGet((method) => t.request(`${t.fhir()}/Patient/h1`, { method }));
      expect(noToken.head.status).toBe(401);
    });

    test('$graphql and the terminology operations take their inputs from the URL, as GET does', async () => {
      const gender = 'http://hl7.org/fhir/administrative-gender';
      for (const [path, status] of [
        [`$graphql?query=${encodeURIComponent('{PatientList{id name{family}}}')}`, 200],
        [`Patient/h1/$graphql?query=${encodeURIComponent('{id name{given}}')}`, 200],
        ['$graphql', 400],
        [`CodeSystem/$lookup?system=${gender}&code=male`, 200],
        ['ValueSet/$expand?url=http://hl7.org/fhir/ValueSet/administrative-gender', 200],
        [`ValueSet/$validate-code?url=http://hl7.org/fhir/ValueSet/administrative-gender&system=${gender}&code=female`, 200],
        [`CodeSystem/$subsumes?system=${gender}&codeA=male&codeB=male`, 200],
      ] as const) {
        const { head, bytes } = await sameAsGet(fhir(path));
        expect({ path, status: head.status, length: head.headers.get('content-length') }).toEqual({ path, status, length: String(bytes) });
      }
    });

    test('native Binary: the content\'s length, the large streamed one\'s too', async () => {
      const small = await sameAsGet(fhir(`Binary/${binaryId}`));
      expect(small.head.headers.get('content-length')).toBe('12');
      expect(small.head.headers.get('content-type')).toBe('application/octet-stream');
      const big = await sameAsGet(fhir(`Binary/${largeId}`));
      expect(big.head.headers.get('content-length')).toBe(String(large.byteLength));
      await sameAsGet(fhir(`Binary/${binaryId}?_format=json`));
      await sameAsGet(fhir(`Binary/${binaryId}/_history/1`, { Accept: 'application/fhir+json' }));
    });

    test('bulk export: HEAD on a kick-off starts nothing (405); status and downloads as GET', async () => {
      const before = await t.store.exports.jobs.countByState();
      for (const path of ['$export', 'Patient/$export', 'Group/g/$export']) {
        const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token, 'HEAD'));
        expect([res.status, res.headers.get('allow'), await res.text()]).toEqual([405, 'GET, POST', '']);
        expect(Number(res.headers.get('content-length'))).toBeGreaterThan(0);
      }
      expect(await t.store.exports.jobs.countByState()).toEqual(before);
      const status = await kickOff(t, token, '/$export?_type=Patient,Observation');
      await sameAsGet((method) => t.request(status, fhirInit(token, method)));
      const manifest = await finish(t, token, status);
      await sameAsGet((method) => t.request(status, fhirInit(token, method)));
      const file = manifest.output.find((o) => o.type === 'Patient')!.url;
      const identity = await sameAsGet((method) => t.request(file, fhirInit(token, method)));
      expect(identity.head.headers.get('content-length')).toBe(String(identity.bytes));
      // gzip is streamed (no length): HEAD says so, as GET sends it.
      const gzip = await sameAsGet((method) => t.request(file, fhirInit(token, method, undefined, { 'Accept-Encoding': 'gzip' })));
      expect([gzip.head.headers.get('content-encoding'), gzip.head.headers.get('content-length')]).toEqual(['gzip', null]);
      // A Range is defined for GET only (RFC 9110 14.2): HEAD describes the whole file.
      const ranged = await t.request(file, fhirInit(token, 'HEAD', undefined, { Range: 'bytes=0-9' }));
      expect([ranged.status, ranged.headers.get('content-length')]).toEqual([200, String(identity.bytes)]);
      await sameAsGet((method) => t.request(file, fhirInit(token, method, undefined, { 'If-None-Match': identity.get.headers.get('etag')! })));
    });

    test('discovery, JWKS, ops endpoints, unknown paths and a URL refused before any route', async () => {
      for (const path of [
        '/.well-known/smart-configuration', '/.well-known/openid-configuration', '/oauth2/jwks', '/healthz', '/readyz', '/no-such-path',
        '/tenants/t1/fhir/R4/.well-known/smart-configuration', '/tenants/nobody/fhir/R4/metadata', '/tenants/t1/fhir/R4/Patient?name=%00',
      ]) {
        const { head, bytes } = await sameAsGet((method) => t.request(path, { method }));
        expect({ path, length: head.headers.get('content-length') }).toEqual({ path, length: String(bytes) });
      }
    });
  });
});

describe('HEAD through a listening server', () => {
  test('the wire carries GET\'s Content-Length, not 0', async () => {
    const { createSqliteStore } = await import('../../src/store/sqlite/index.ts');
    const { mkdtempSync, rmSync } = await import('node:fs');
    const { join } = await import('node:path');
    const { tmpdir } = await import('node:os');
    const dir = mkdtempSync(join(tmpdir(), 'cinder-head-'));
    const store = createSqliteStore(join(dir, 'cinder.db'));
    const cinder = await startCinder({ store });
    try {
      await createTenant(store, cinder.clock, 't1');
      const identity = { 'Accept-Encoding': 'identity' };
      for (const url of [`${cinder.fhir('t1')}/metadata`, `${cinder.url}/.well-known/smart-configuration`, `${cinder.url}/no-such-path`]) {
        const get = await fetch(url, { headers: identity });
        const bytes = (await get.arrayBuffer()).byteLength;
        const head = await fetch(url, { method: 'HEAD', headers: identity });
        expect({ url, status: head.status, length: head.headers.get('content-length'), type: head.headers.get('content-type') })
          .toEqual({ url, status: get.status, length: String(bytes), type: get.headers.get('content-type') });
      }
      // What GET would compress: HEAD names the coding and leaves the length out (RFC 9110 9.3.2), never 0.
      const gzip = { 'Accept-Encoding': 'gzip' };
      const get = await fetch(`${cinder.fhir('t1')}/metadata`, { headers: gzip, decompress: false });
      expect([get.headers.get('content-encoding'), get.headers.get('content-length')]).toEqual(['gzip', String((await get.arrayBuffer()).byteLength)]);
      const head = await fetch(`${cinder.fhir('t1')}/metadata`, { method: 'HEAD', headers: gzip, decompress: false });
      expect([head.status, head.headers.get('content-encoding'), head.headers.get('content-length'), head.headers.get('vary')?.split(/\s*,\s*/).sort()]).toEqual([200, 'gzip', null, ['Accept', 'Accept-Encoding']]);
    } finally {
      cinder.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
