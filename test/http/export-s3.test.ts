import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { S3Client } from 'bun';
import { collectExports } from '../../src/export/gc.ts';
import { openSink, type ExportSink } from '../../src/export/sink.ts';
import { silentLogger } from '../../src/log.ts';
import { createTestApp, fhirInit, testClock } from '../helpers/app.ts';
import { download, finish, kickOff, observation, patient, put, refs, type Manifest } from '../helpers/export.ts';
import { startS3 } from '../helpers/s3.ts';

let s3: Awaited<ReturnType<typeof startS3>>;
let client: S3Client;
const STORAGE = 's3://cinder-exports/bulk/v1';

beforeAll(async () => {
  s3 = await startS3();
  client = new S3Client({ endpoint: s3.env.S3_ENDPOINT, accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER', bucket: s3.bucket, region: 'us-east-1' });
});
afterAll(async () => s3.stop());

async function keys(prefix = 'bulk/v1/'): Promise<string[]> {
  return ((await client.list({ prefix })).contents ?? []).map((o) => o.key).sort();
}

async function app(extra: Record<string, string> = {}) {
  const sink = openSink(STORAGE, s3.env);
  const clock = testClock();
  const t = await createTestApp({ clock, exportSink: sink, env: { CINDER_EXPORT_STORAGE: STORAGE, ...extra } });
  await put(t, patient('p1'));
  for (let i = 0; i < 25; i++) await put(t, observation(`o${i}`, 'p1'));
  return { t, sink, clock, token: await t.token() };
}

describe('S3 export storage', () => {
  test('files go to the bucket under the prefix and download through the API with Range and gzip', async () => {
    const { t, sink, token } = await app();
    const status = await kickOff(t, token, '/$export?_type=Patient,Observation');
    const manifest = await finish(t, token, status, { sink });
    expect(manifest.requiresAccessToken).toBe(true);
    const jobId = status.split('/').pop()!;
    expect(await keys()).toEqual([`bulk/v1/t1/${jobId}/a1/Observation-1.ndjson`, `bulk/v1/t1/${jobId}/a1/Patient-1.ndjson`]);
    const files = await download(t, token, manifest.output);
    expect(refs(files)).toHaveLength(26);
    const url = manifest.output.find((o) => o.type === 'Observation')!.url;
    const whole = await (await t.request(url, fhirInit(token))).text();
    const part = await t.request(url, fhirInit(token, 'GET', undefined, { Range: 'bytes=5-24' }));
    expect(part.status).toBe(206);
    expect(await part.text()).toBe(Buffer.from(whole).subarray(5, 25).toString());
    const gz = await t.request(url, fhirInit(token, 'GET', undefined, { 'Accept-Encoding': 'gzip' }));
    expect(new TextDecoder().decode(Bun.gunzipSync(new Uint8Array(await gz.arrayBuffer())))).toBe(whole);
    await t.request(status, fhirInit(token, 'DELETE'));
    expect(await keys(`bulk/v1/t1/${jobId}/`)).toEqual([]);
    await t.close();
  });

  test('expired files are removed from the bucket by garbage collection', async () => {
    const { t, sink, clock, token } = await app({ CINDER_EXPORT_FILE_TTL: '60' });
    const status = await kickOff(t, token, '/$export?_type=Patient');
    await finish(t, token, status, { sink });
    const jobId = status.split('/').pop()!;
    expect(await keys(`bulk/v1/t1/${jobId}/`)).toHaveLength(1);
    clock.advance(61_000);
    expect((await collectExports({ store: t.store, sink, clock, log: silentLogger, retentionMs: 60_000 })).purged).toBe(1);
    expect(await keys(`bulk/v1/t1/${jobId}/`)).toEqual([]);
    await t.close();
  });

  test('with signed URLs the manifest needs no access token and the files come straight from the bucket', async () => {
    const { t, sink, token } = await app({ CINDER_EXPORT_SIGNED_URLS: 'on' });
    const manifest: Manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Observation'), { sink });
    expect(manifest.requiresAccessToken).toBe(false);
    const url = manifest.output[0]!.url;
    expect(url.startsWith(`${s3.env.S3_ENDPOINT}/cinder-exports/bulk/v1/t1/`)).toBe(true);
    expect(url).toContain('X-Amz-Signature=');
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect((await res.text()).trim().split('\n')).toHaveLength(25);
    await t.close();
  });

  test('signed URLs with file storage are refused at start', async () => {
    await expect(createTestApp({ env: { CINDER_EXPORT_SIGNED_URLS: 'on' } })).rejects.toThrow(/^invalid CINDER_EXPORT_SIGNED_URLS \(--export-signed-urls\): on needs s3:\/\//);
  });

  test('large files are uploaded in parts and read back by range', async () => {
    const sink: ExportSink = openSink(STORAGE, s3.env);
    const writer = sink.open('t9/big/a1/Observation-1.ndjson');
    const line = JSON.stringify({ resourceType: 'Basic', id: 'x', text: 'y'.repeat(1000) }) + '\n';
    const chunk = line.repeat(1000);
    for (let i = 0; i < 20; i++) await writer.write(chunk);
    await writer.close();
    const size = Buffer.byteLength(chunk) * 20;
    expect(await sink.size('t9/big/a1/Observation-1.ndjson')).toBe(size);
    const tail = await new Response(sink.read('t9/big/a1/Observation-1.ndjson', { start: size - line.length, end: size - 1 })).text();
    expect(tail).toBe(line);
    await sink.removePrefix('t9/big');
    expect(await keys('bulk/v1/t9/')).toEqual([]);
  });

  test('removing a job\'s files retries a DELETE the server fails, and reaches every file', async () => {
    // A proxy in front of the S3 server answers the first DELETE of each key with a 500, as S3 may.
    const failedOnce = new Set<string>();
    const upstream = new URL(s3.env.S3_ENDPOINT);
    const proxy = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      async fetch(req) {
        const url = new URL(req.url);
        if (req.method === 'DELETE' && !failedOnce.has(url.pathname)) {
          failedOnce.add(url.pathname);
          return new Response('<Error><Code>InternalError</Code><Message>try again</Message></Error>', { status: 500, headers: { 'Content-Type': 'application/xml' } });
        }
        url.host = upstream.host;
        const headers = new Headers(req.headers);
        headers.set('host', upstream.host);
        return fetch(url, { method: req.method, headers, body: req.body, redirect: 'manual' });
      },
    });
    try {
      const sink = openSink(STORAGE, { ...s3.env, S3_ENDPOINT: `http://127.0.0.1:${proxy.port}` });
      const names = ['Patient-1', 'Observation-1', 'Observation-2', 'Condition-1', 'Encounter-1'];
      for (const name of names) {
        const writer = sink.open(`t8/job/a1/${name}.ndjson`);
        await writer.write('{"resourceType":"Basic"}\n');
        await writer.close();
      }
      expect(await keys('bulk/v1/t8/')).toHaveLength(names.length);
      await sink.removePrefix('t8/job');
      expect(await keys('bulk/v1/t8/')).toEqual([]);
      expect(failedOnce.size).toBe(names.length);
    } finally {
      proxy.stop(true);
    }
  });
  test('a file whose stat S3 fails (5xx, or S3 unreachable) is a 503 with Retry-After, not the 410 of a missing key', async () => {
    const upstream = new URL(s3.env.S3_ENDPOINT);
    let failing = false;
    const proxy = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      async fetch(req) {
        if (failing) return new Response('<Error><Code>SlowDown</Code><Message>try again</Message></Error>', { status: 503, headers: { 'Content-Type': 'application/xml' } });
        const url = new URL(req.url);
        url.host = upstream.host;
        const headers = new Headers(req.headers);
        headers.set('host', upstream.host);
        return fetch(url, { method: req.method, headers, body: req.body, redirect: 'manual' });
      },
    });
    const sink = openSink(STORAGE, { ...s3.env, S3_ENDPOINT: `http://127.0.0.1:${proxy.port}` });
    const t = await createTestApp({ clock: testClock(), exportSink: sink, env: { CINDER_EXPORT_STORAGE: STORAGE } });
    try {
      const token = await t.token();
      await put(t, patient('p1'));
      const status = await kickOff(t, token, '/$export?_type=Patient');
      const url = (await finish(t, token, status, { sink })).output[0]!.url;
      failing = true;
      const down = await t.request(url, fhirInit(token));
      expect(down.status).toBe(503);
      expect(down.headers.get('retry-after')).toBe('5');
      failing = false;
      expect((await t.request(url, fhirInit(token))).status).toBe(200);
      proxy.stop(true);
      expect((await t.request(url, fhirInit(token))).status).toBe(503);
      // A key that is not in the bucket is a file removed for good.
      const jobId = status.split('/').pop()!;
      await client.delete(`bulk/v1/t1/${jobId}/a1/Patient-1.ndjson`);
      const direct = openSink(STORAGE, s3.env);
      expect(await direct.size(`t1/${jobId}/a1/Patient-1.ndjson`)).toBeNull();
    } finally {
      proxy.stop(true);
      await t.close();
    }
  });
});
