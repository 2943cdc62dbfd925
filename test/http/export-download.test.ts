import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { finish, kickOff, observation, patient, put } from '../helpers/export.ts';

let t: TestApp;
let token: string;
let url: string;
let whole: string;
beforeAll(async () => {
  t = await createTestApp();
  token = await t.token();
  await put(t, patient('p1', { name: [{ family: 'Ünïcödé' }] }));
  for (let i = 0; i < 40; i++) await put(t, observation(`o${i}`, 'p1'));
  const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Observation'));
  url = manifest.output[0]!.url;
  whole = await (await t.request(url, fhirInit(token))).text();
});
afterAll(async () => t.close());

const get = (headers: Record<string, string> = {}, tok = token) => t.request(url, fhirInit(tok, 'GET', undefined, headers));

describe('downloads', () => {
  test('application/fhir+ndjson with Content-Length, ETag and Accept-Ranges', async () => {
    const res = await get();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/fhir+ndjson');
    expect(Number(res.headers.get('content-length'))).toBe(Buffer.byteLength(await res.text()));
    expect(res.headers.get('etag')).toMatch(/^"[^"]+"$/);
    expect(res.headers.get('accept-ranges')).toBe('bytes');
    expect(whole.trim().split('\n')).toHaveLength(40);
  });

  test('If-None-Match with the ETag: 304', async () => {
    const etag = (await get()).headers.get('etag')!;
    expect((await get({ 'If-None-Match': etag })).status).toBe(304);
    expect((await get({ 'If-None-Match': '"other"' })).status).toBe(200);
  });

  test('gzip when the client accepts it', async () => {
    const res = await get({ 'Accept-Encoding': 'br;q=1, gzip;q=0.5' });
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('content-length')).toBeNull();
    const bytes = new Uint8Array(await res.arrayBuffer());
    expect(new TextDecoder().decode(Bun.gunzipSync(bytes))).toBe(whole);
    expect((await get({ 'Accept-Encoding': 'gzip;q=0' })).headers.get('content-encoding')).toBeNull();
  });

  test('Range requests: 206 with Content-Range; suffix ranges; 416 beyond the end', async () => {
    const size = Buffer.byteLength(whole);
    const bytes = Buffer.from(whole);
    const part = await get({ Range: 'bytes=10-99' });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 10-99/${size}`);
    expect(part.headers.get('content-length')).toBe('90');
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(10, 100))).toBe(true);
    const tail = await get({ Range: 'bytes=-25', 'Accept-Encoding': 'gzip' });
    expect(tail.status).toBe(206);
    expect(tail.headers.get('content-encoding')).toBeNull();
    expect(Buffer.from(await tail.arrayBuffer()).equals(bytes.subarray(size - 25))).toBe(true);
    const open = await get({ Range: `bytes=${size - 5}-` });
    expect(await open.text()).toBe(bytes.subarray(size - 5).toString());
    const beyond = await get({ Range: `bytes=${size}-` });
    expect(beyond.status).toBe(416);
    expect(beyond.headers.get('content-range')).toBe(`bytes */${size}`);
  });

  test('a range whose unit is written in other case, or with blanks around the range, is served as one (RFC 9110 14.1), not the whole file', async () => {
    const bytes = Buffer.from(whole);
    for (const range of ['Bytes=10-19', 'BYTES=10-19', 'bytes= 10-19', 'bytes=10-19 ', 'bytes=\t10-19']) {
      const part = await get({ Range: range });
      expect([range, part.status, part.headers.get('content-range')]).toEqual([range, 206, `bytes 10-19/${bytes.length}`]);
      expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(10, 20))).toBe(true);
    }
  });

  test('If-Range with another validator sends the whole file', async () => {
    const res = await get({ Range: 'bytes=0-9', 'If-Range': '"stale"' });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(whole);
  });

  test('a token of the same client whose scopes do not cover the type gets 403', async () => {
    const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read', 'system/Patient.read'] });
    const wide = await t.token('system/*.read', client.clientId, clientSecret!);
    const m = await finish(t, wide, await kickOff(t, wide, '/$export?_type=Observation'));
    const narrow = await t.token('system/Patient.read', client.clientId, clientSecret!);
    expect((await t.request(m.output[0]!.url, fhirInit(wide))).status).toBe(200);
    expect((await t.request(m.output[0]!.url, fhirInit(narrow))).status).toBe(403);
  });

  test('an unknown file of a job is a 404', async () => {
    const res = await t.request(url.replace('Observation-1.ndjson', 'Secret-1.ndjson'), fhirInit(token));
    expect(res.status).toBe(404);
    const res2 = await t.request(url.replace('Observation-1.ndjson', '..%2F..%2Fcinder.db'), fhirInit(token));
    expect(res2.status).toBe(404);
  });
});
