/**
 * Binary native content through a listening `cinder serve`: time and the server's peak RSS for a
 * create with Content-Length, a chunked create (no Content-Length), a raw read and a FHIR JSON read of
 * one large body.
 *
 *   bun bench/binary.ts [--mib 32] [--runs 3] [--postgres postgres://server/db]
 *
 * With --postgres the server runs on a database of its own, created on that server and dropped after.
 *
 * Peak RSS is the server process's VmHWM, reset (Linux `clear_refs` 5) before each request, so each
 * figure is the most that request made the process hold; the base line is its RSS just before.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { adminToken, startServer } from './lib/server.ts';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const mib = Number(arg('--mib', '32'));
const runs = Number(arg('--runs', '3'));
const postgresServer = process.argv.includes('--postgres') ? arg('--postgres', '') : undefined;
const admin = postgresServer ? postgres(postgresServer, { max: 1, onnotice: () => undefined }) : undefined;
const database = `cinder_bench_binary_${process.pid}`;
if (admin) await admin.unsafe(`CREATE DATABASE ${database}`);
const postgresUrl = postgresServer ? Object.assign(new URL(postgresServer), { pathname: '/' + database }).toString() : undefined;

const status = (pid: number, field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
const resetPeak = (pid: number) => writeFileSync(`/proc/${pid}/clear_refs`, '5');

const server = await startServer({
  CINDER_MAX_BODY_BYTES: String(256 * 1024 * 1024), CINDER_MAX_BINARY_BYTES: String(256 * 1024 * 1024),
  ...(postgresUrl ? { CINDER_DATABASE_URL: postgresUrl } : {}),
});
const auth = { Authorization: `Bearer ${await adminToken(server)}` };
const body = randomBytes(mib * 1024 * 1024);
let idle = 0;

/** Runs `send` with the server's peak reset; returns ms, the server's RSS before and its peak during. */
async function measure(send: () => Promise<Response>, check: (res: Response) => Promise<void>) {
  Bun.gc(true);
  await Bun.sleep(200);
  const before = status(server.pid, 'VmRSS');
  resetPeak(server.pid);
  const started = performance.now();
  const res = await send();
  await check(res);
  const ms = performance.now() - started;
  return { ms, before, peak: status(server.pid, 'VmHWM') };
}

const chunked = () => {
  let at = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (at >= body.byteLength) return c.close();
      c.enqueue(body.subarray(at, at + 64 * 1024));
      at += 64 * 1024;
    },
  });
};

const expectStatus = (want: number) => async (res: Response) => {
  if (res.status !== want) throw new Error(`expected ${want}, got ${res.status}: ${(await res.text()).slice(0, 300)}`);
  await res.arrayBuffer();
};

type Row = Awaited<ReturnType<typeof measure>>;
const results: Record<string, Row[]> = {};
const record = (name: string, r: Row) => void (results[name] ??= []).push(r);
try {
  // Warm up the routes and the code they compile.
  await expectStatus(201)(await fetch(`${server.fhir}/Binary`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/octet-stream' }, body: randomBytes(1024) }));
  await Bun.sleep(500);
  idle = status(server.pid, 'VmRSS');
  for (let run = 0; run < runs; run++) {
    let id = '';
    record('POST, Content-Length', await measure(
      () => fetch(`${server.fhir}/Binary`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/octet-stream', Prefer: 'return=minimal' }, body }),
      async (res) => {
        await expectStatus(201)(res);
        id = /Binary\/([^/]+)\//.exec(res.headers.get('location')!)![1]!;
      },
    ));
    record('PUT, chunked', await measure(
      () => fetch(`${server.fhir}/Binary/${id}`, { method: 'PUT', headers: { ...auth, 'Content-Type': 'application/octet-stream', Prefer: 'return=minimal' }, body: chunked(), duplex: 'half' } as RequestInit),
      expectStatus(200),
    ));
    record('GET raw', await measure(() => fetch(`${server.fhir}/Binary/${id}`, { headers: auth }), async (res) => {
      if (res.status !== 200) throw new Error(`raw read: ${res.status}`);
      if (!Buffer.from(await res.arrayBuffer()).equals(body)) throw new Error('raw read: bytes differ');
    }));
    record('GET FHIR JSON', await measure(() => fetch(`${server.fhir}/Binary/${id}`, { headers: { ...auth, Accept: 'application/fhir+json' } }), expectStatus(200)));
  }
} finally {
  await server.stop();
  if (admin) {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${database}`);
    await admin.end();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`${mib} MiB body, ${postgresUrl ? 'PostgreSQL' : 'SQLite'}, median of ${runs} runs; server RSS when idle after warm-up: ${idle.toFixed(0)} MiB\n`);
console.log('| request | ms | server RSS before (MiB) | server peak RSS (MiB) | peak - before (MiB) |');
console.log('|---|---:|---:|---:|---:|');
for (const [name, rows] of Object.entries(results)) {
  const before = median(rows.map((r) => r.before));
  const peak = median(rows.map((r) => r.peak));
  console.log(`| ${name} | ${median(rows.map((r) => r.ms)).toFixed(0)} | ${before.toFixed(0)} | ${peak.toFixed(0)} | ${median(rows.map((r) => r.peak - r.before)).toFixed(0)} |`);
}
