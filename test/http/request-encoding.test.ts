/**
 * Request bodies in a Content-Encoding (RFC 9110 8.4), as HAPI FHIR's Java client can send them: gzip
 * (and x-gzip) and deflate are decoded on every route that reads a body, the size limits applying to the
 * decoded size, so a decompression bomb is a 413 after a few kilobytes; any other coding is a 415 with
 * `Accept-Encoding` (RFC 9110 15.5.16); a body that is not in the coding it names is a 400. The token
 * endpoint decodes alike and keeps its 400 `invalid_request` for every error. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { deflateSync } from 'node:zlib';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, type Json } from '../helpers/fhir.ts';
import { basic } from '../helpers/oauth.ts';

const LIMITS = { CINDER_MAX_RESOURCE_BYTES: '4096', CINDER_MAX_BUNDLE_BYTES: '65536', CINDER_MAX_BINARY_BYTES: '65536', CINDER_MAX_FORM_BYTES: '2048' };
const gzip = (text: string) => Bun.gzipSync(Buffer.from(text));

/** A body that hands out `bytes` a chunk at a time, counting what the server pulled. */
function counted(bytes: Uint8Array, chunk = 1024) {
  const seen = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (seen.pulled >= bytes.byteLength) return controller.close();
      controller.enqueue(bytes.slice(seen.pulled, seen.pulled + chunk));
      seen.pulled += chunk;
    },
    cancel() {
      seen.cancelled = true;
    },
  });
  return { stream, seen };
}

await eachStore((kind, fresh) => {
  describe(`request Content-Encoding (${kind})`, () => {
    let t: TestApp;
    let token: string;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: LIMITS });
      token = await t.token();
    });
    afterAll(() => t.close());

    const send = (method: string, path: string, body: BodyInit, headers: Record<string, string>) =>
      t.request(`${t.fhir()}/${path}`, { method, body, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', ...headers } });
    const json = async (res: Response): Promise<Json> => {
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${res.status} ${text}`);
      return JSON.parse(text) as Json;
    };

    test('create, update, patch, transaction and _search take gzip, x-gzip and deflate bodies', async () => {
      const created = await send('POST', 'Patient', gzip(JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Gzip' }] })), { 'Content-Encoding': 'gzip' });
      expect(created.status).toBe(201);
      const id = (await json(created)).id as string;
      const updated = await send('PUT', `Patient/${id}`, deflateSync(JSON.stringify({ resourceType: 'Patient', id, name: [{ family: 'Deflate' }] })), { 'Content-Encoding': 'deflate' });
      expect((await json(updated)).name).toEqual([{ family: 'Deflate' }]);
      const patched = await send('PATCH', `Patient/${id}`, gzip(JSON.stringify([{ op: 'add', path: '/active', value: true }])), {
        'Content-Encoding': 'X-GZIP', 'Content-Type': 'application/json-patch+json',
      });
      expect((await json(patched)).active).toBe(true);
      // Codings applied one after another are decoded in reverse; identity is no coding.
      const bundle = deflateSync(JSON.stringify({
        resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient', name: [{ family: 'Twice' }] }, request: { method: 'POST', url: 'Patient' } }],
      }));
      const tx = await send('POST', '', Bun.gzipSync(bundle), { 'Content-Encoding': 'deflate, identity, gzip' });
      expect((await json(tx)).entry[0].response.status).toBe('201 Created');
      const found = await send('POST', 'Patient/_search', gzip('family=Twice'), { 'Content-Encoding': 'gzip', 'Content-Type': 'application/x-www-form-urlencoded' });
      expect((await json(found)).entry.length).toBe(1);
    });

    test('native Binary content and $validate-code (a hot route) take gzip too', async () => {
      const bytes = new Uint8Array(3000).map((_, i) => i % 251);
      const created = await send('POST', 'Binary', Bun.gzipSync(bytes), { 'Content-Encoding': 'gzip', 'Content-Type': 'application/octet-stream' });
      expect(created.status).toBe(201);
      const read = await t.request(created.headers.get('location')!.replace(/\/_history\/\d+$/, ''), { headers: { Authorization: `Bearer ${token}` } });
      expect(new Uint8Array(await read.arrayBuffer())).toEqual(bytes);
      const params = { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' }, { name: 'code', valueCode: 'male' }, { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' }] };
      const validated = await send('POST', 'ValueSet/$validate-code', gzip(JSON.stringify(params)), { 'Content-Encoding': 'gzip' });
      expect((await json(validated)).parameter[0]).toEqual({ name: 'result', valueBoolean: true });
    });

    test('the limit is the decoded size: a decompression bomb is a 413 after a few kilobytes, whatever Content-Length says', async () => {
      const bomb = Bun.gzipSync(Buffer.alloc(64 * 1024 * 1024, ' '));
      expect(bomb.byteLength).toBeLessThan(4096 * 32);
      const { stream, seen } = counted(bomb);
      const res = await send('POST', 'Patient', stream, { 'Content-Encoding': 'gzip' });
      await expectOutcome(res, 413, 'too-costly');
      expect(seen.pulled).toBeLessThan(64 * 1024);
      expect(seen.cancelled).toBe(true);
      // A small declared length (the compressed size) does not let the decoded body past the limit.
      const framed = await send('POST', 'Patient', gzip(JSON.stringify({ resourceType: 'Patient', name: [{ family: 'x'.repeat(5000) }] })), { 'Content-Encoding': 'gzip' });
      const outcome = await expectOutcome(framed, 413);
      expect(outcome.issue[0].diagnostics).toContain('limit of 4096 bytes once decoded');
      const binary = await send('POST', 'Binary', counted(bomb).stream, { 'Content-Encoding': 'gzip', 'Content-Type': 'application/octet-stream' });
      expect(binary.status).toBe(413);
    });

    test('another coding, or more than two, is a 415 naming those decoded; a body not in its coding is a 400; nothing is written', async () => {
      const body = JSON.stringify({ resourceType: 'Patient' });
      // Two codings are undone, last first.
      const twice = await send('POST', 'Patient', Bun.gzipSync(gzip(body)), { 'Content-Encoding': 'gzip, gzip' });
      expect(twice.status).toBe(201);
      const before = await countVersions(t);
      for (const coding of ['br', 'compress', 'zstd', 'gzip, br', Array(3).fill('gzip').join(', '), Array(3000).fill('gzip').join(',')]) {
        const res = await send('POST', 'Patient', body, { 'Content-Encoding': coding });
        await expectOutcome(res, 415, 'not-supported');
        expect(res.headers.get('accept-encoding')).toBe('gzip, deflate');
      }
      const bad = await expectOutcome(await send('POST', 'Patient', body, { 'Content-Encoding': 'gzip' }), 400);
      expect(bad.issue[0].diagnostics).toContain('not valid gzip content');
      const truncated = gzip(body);
      await expectOutcome(await send('POST', 'Patient', truncated.subarray(0, truncated.byteLength - 6), { 'Content-Encoding': 'gzip' }), 400);
      expect(await countVersions(t)).toBe(before);
    });

    test('the token endpoint decodes a gzip form; its errors stay 400 invalid_request', async () => {
      const form = new URLSearchParams({ grant_type: 'client_credentials' }).toString();
      const headers = { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: basic(t.admin.client.clientId, t.admin.clientSecret!) };
      const ok = await t.request('/oauth2/token', { method: 'POST', body: gzip(form), headers: { ...headers, 'Content-Encoding': 'gzip' } });
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as Json).token_type).toBe('Bearer');
      for (const [coding, body] of [['br', form], ['gzip', form], ['gzip', gzip('grant_type=' + 'x'.repeat(10000))]] as const) {
        const res = await t.request('/oauth2/token', { method: 'POST', body, headers: { ...headers, 'Content-Encoding': coding } });
        expect(res.status).toBe(400);
        expect(res.headers.get('content-type')).toBe('application/json;charset=UTF-8');
        expect(((await res.json()) as Json).error).toBe('invalid_request');
      }
    });
  });
});
