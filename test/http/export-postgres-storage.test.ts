/**
 * Export files kept in PostgreSQL (`CINDER_EXPORT_STORAGE=postgres`, the default on PostgreSQL): files
 * of several chunks stream back byte for byte, ranges read only what they cover, gzip works as for the
 * other storages, cancel and expiry remove the rows, and a file that is gone answers 410. The missing
 * file and /readyz behaviour of `file:` storage is checked here too.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import postgres from 'postgres';
import { collectExports } from '../../src/export/gc.ts';
import { openSink } from '../../src/export/sink.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';
import { silentLogger } from '../../src/log.ts';
import { EXPORT_CHUNK_BYTES } from '../../src/store/postgres/export-files.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { finish, kickOff } from '../helpers/export.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
const pg = targets.find((t) => t.kind === 'postgres');
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

async function observations(t: TestApp, count: number) {
  const clock = { now: () => t.clock.now() - 60_000 };
  const writer = createBatchWriter({ store: t.store, clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
  for (let i = 0; i < count; i++) {
    await writer.addPrepared([writer.prepare({
      resourceType: 'Observation', id: `o${i}`, status: 'final', code: { text: 'x'.repeat(200) },
      subject: { reference: `Patient/p${i % 10}` }, valueQuantity: { value: i, unit: '/min' },
    })]);
  }
  await writer.drain();
}

describe.skipIf(!pg)('PostgreSQL export storage', () => {
  let t: TestApp;
  let url: string;
  const files = async (sql: postgres.Sql) => Number((await sql`SELECT count(*) AS n FROM export_files`)[0]!.n);
  const chunks = async (sql: postgres.Sql) => Number((await sql`SELECT count(*) AS n FROM export_file_chunks`)[0]!.n);

  test('a file of several chunks: whole, ranges across chunk boundaries, gzip; GC removes its rows after expiry', async () => {
    const db = await pg!.fresh();
    url = db.url;
    t = await createTestApp({ store: db.open(), env: { CINDER_DATABASE_URL: url } });
    expect(t.config.exportStorage).toBe('postgres');
    await observations(t, 5000);
    const token = await t.token();
    const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Observation'));
    const fileUrl = manifest.output[0]!.url;
    const whole = await t.request(fileUrl, fhirInit(token));
    expect(whole.status).toBe(200);
    const bytes = new Uint8Array(await whole.arrayBuffer());
    expect(bytes.byteLength).toBeGreaterThan(2 * EXPORT_CHUNK_BYTES);
    expect(new TextDecoder().decode(bytes).split('\n').filter(Boolean).length).toBe(5000);
    const sql = postgres(url, { max: 1, onnotice: () => undefined });
    try {
      // Chunks of whole lines, each at least EXPORT_CHUNK_BYTES but the last.
      const starts = (await sql`SELECT start FROM export_file_chunks ORDER BY start`).map((r) => Number(r.start));
      expect(starts.length).toBeGreaterThanOrEqual(2);
      expect(starts.length).toBeLessThanOrEqual(Math.ceil(bytes.byteLength / EXPORT_CHUNK_BYTES));
      for (const s of starts.slice(1)) expect(bytes[s - 1]).toBe(0x0a);
      const second = starts[1]!;
      for (const [start, end] of [[second - 10, second + 9], [second, second], [0, 0], [bytes.byteLength - 5, bytes.byteLength - 1], [5, bytes.byteLength - 5]]) {
        const part = await t.request(fileUrl, fhirInit(token, 'GET', undefined, { Range: `bytes=${start}-${end}` }));
        expect(part.status).toBe(206);
        expect(new Uint8Array(await part.arrayBuffer())).toEqual(bytes.subarray(start!, end! + 1));
      }
      const gz = await t.request(fileUrl, fhirInit(token, 'GET', undefined, { 'Accept-Encoding': 'gzip' }));
      expect(gz.headers.get('content-encoding')).toBe('gzip');
      expect(new Uint8Array(Bun.gunzipSync(new Uint8Array(await gz.arrayBuffer())))).toEqual(bytes);

      t.clock.advance(t.config.exportFileTtl * 1000 + 1000);
      const sink = openSink('postgres', {}, t.store);
      await collectExports({ store: t.store, sink, clock: t.clock, log: silentLogger, retentionMs: 86_400_000 });
      expect(await files(sql)).toBe(0);
      expect(await chunks(sql)).toBe(0);
    } finally {
      await sql.end();
      await t.close();
    }
  }, 60_000);

  test('written in pieces cut anywhere (inside UTF-8 characters too), long lines: read back byte for byte', async () => {
    const db = await pg!.fresh();
    const store = db.open();
    await store.migrate();
    try {
      const lines: string[] = [];
      for (let i = 0; i < 3000; i++) lines.push(JSON.stringify({ i, text: `Zoë 😀 ${'ü'.repeat(i % 300)}` }));
      lines.splice(1000, 0, JSON.stringify({ long: 'x'.repeat(3 * EXPORT_CHUNK_BYTES) }));
      const bytes = new TextEncoder().encode(lines.join('\n') + '\n');
      const w = store.exportFiles!.create('t/j/a1/f.ndjson');
      for (let at = 0, n = 1; at < bytes.byteLength; n = (n * 7919) % 65_521) {
        await w.write(bytes.subarray(at, at + n));
        at += n;
      }
      await w.close();
      expect(await store.exportFiles!.size('t/j/a1/f.ndjson')).toBe(bytes.byteLength);
      const read = async (range?: { start: number; end: number }) => new Uint8Array(await new Response(store.exportFiles!.read('t/j/a1/f.ndjson', range)).arrayBuffer());
      expect(await read()).toEqual(bytes);
      for (const [start, end] of [[3, 3], [EXPORT_CHUNK_BYTES, 2 * EXPORT_CHUNK_BYTES], [bytes.byteLength - 100, bytes.byteLength - 1]]) {
        expect(await read({ start: start!, end: end! })).toEqual(bytes.subarray(start!, end! + 1));
      }
      await store.exportFiles!.removePrefix('t/j');
      expect(await store.exportFiles!.size('t/j/a1/f.ndjson')).toBeNull();
    } finally {
      await store.close();
    }
  }, 60_000);

  test('cancel removes the rows; a file whose rows were deleted by hand answers 410', async () => {
    const db = await pg!.fresh();
    t = await createTestApp({ store: db.open(), env: { CINDER_DATABASE_URL: db.url } });
    await observations(t, 50);
    const token = await t.token();
    const sql = postgres(db.url, { max: 1, onnotice: () => undefined });
    try {
      const first = await kickOff(t, token, '/$export?_type=Observation');
      const manifest = await finish(t, token, first);
      await sql`DELETE FROM export_file_chunks`;
      await sql`DELETE FROM export_files`;
      const gone = await t.request(manifest.output[0]!.url, fhirInit(token));
      expect(gone.status).toBe(410);
      expect(((await gone.json()) as { issue: { code: string }[] }).issue[0]!.code).toBe('deleted');

      const second = await kickOff(t, token, '/$export?_type=Observation');
      await finish(t, token, second);
      expect(await files(sql)).toBe(1);
      expect((await t.request(second, fhirInit(token, 'DELETE'))).status).toBe(202);
      expect(await files(sql)).toBe(0);
      expect(await chunks(sql)).toBe(0);
    } finally {
      await sql.end();
      await t.close();
    }
  }, 60_000);
});

describe('file: storage', () => {
  test('a file removed by hand answers 410, not 500', async () => {
    const t = await createTestApp();
    try {
      const token = await t.token();
      await t.request(`${t.fhir()}/Patient/p1`, fhirInit(token, 'PUT', { resourceType: 'Patient', id: 'p1' }));
      t.clock.advance(5000);
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient'));
      rmSync(join(t.dir, 'exports'), { recursive: true, force: true });
      const res = await t.request(manifest.output[0]!.url, fhirInit(token));
      expect(res.status).toBe(410);
      expect(((await res.json()) as { issue: { details: { text: string } }[] }).issue[0]!.details.text).toContain('no longer in the export storage');
    } finally {
      await t.close();
    }
  });

  test('/readyz answers 503 when the export directory cannot be written', async () => {
    const t = await createTestApp({ env: { CINDER_EXPORT_STORAGE: 'file:/proc/cinder-exports' } });
    try {
      const res = await t.request('/readyz');
      expect(res.status).toBe(503);
      expect(await res.json()).toMatchObject({ status: 'unavailable', unavailable: 'export storage', exportStorage: 'file' });
      expect((await t.request('/healthz')).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  test('postgres storage on SQLite is refused at start with the variable named', async () => {
    const { loadConfig } = await import('../../src/config.ts');
    expect(() => loadConfig({ CINDER_EXPORT_STORAGE: 'postgres' })).toThrow(/CINDER_EXPORT_STORAGE/);
    expect(loadConfig({ CINDER_DATABASE_URL: 'postgres://x@h/db' }).exportStorage).toBe('postgres');
    expect(loadConfig({ CINDER_DATA_DIR: '/d' }).exportStorage).toBe('file:/d/exports');
  });
});

