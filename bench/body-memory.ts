/**
 * The server's peak memory for one large write, in a fresh `cinder serve` per measurement: a Binary created
 * from native content (`POST /Binary`, `application/octet-stream`), a Binary written as FHIR JSON
 * (`PUT /Binary/{id}`, create-on-update), and an update as FHIR JSON of a Binary holding as much already (the
 * first write not measured), each of `--mib` MiB of random bytes. `update-longer` updates such a Binary with content of
 * 3 bytes more (a change of another length); `docref` and `docref-update` do the same two writes as `put` and
 * `update-longer` with a DocumentReference whose `content[0].attachment.data` holds the base64 (a nested large string).
 *
 *   ulimit -v 4000000; bun bench/body-memory.ts [--mib 10,50] [--runs 1] [--kinds post,put,update,update-longer,docref,docref-update] [--postgres postgres://server/db]
 *
 * With --postgres each server runs on a database of its own, created on that server and dropped after.
 * Each measurement is one server process: started, warmed up with a small write of each kind, then its peak
 * RSS (VmHWM) reset (Linux `clear_refs` 5) after a full collection, and the one large request sent with
 * `Prefer: return=minimal`. The figure is the peak above the server's RSS after the warm-up (before any large body:
 * what the server holds after the first write of an update, freed heap not yet handed back, is counted as the
 * update's, which may reuse it), and that over the body's size.
 * The content is then read back raw and compared with what was sent.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { adminToken, startServer } from './lib/server.ts';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const sizes = arg('--mib', '10,50').split(',').map(Number);
const runs = Number(arg('--runs', '1'));
const postgresServer = process.argv.includes('--postgres') ? arg('--postgres', '') : undefined;

const status = (pid: number, field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

type Kind = 'POST native' | 'PUT FHIR JSON' | 'PUT FHIR JSON, update' | 'PUT FHIR JSON, update of another length' | 'PUT DocumentReference' | 'PUT DocumentReference, update of another length';
const KINDS: Record<string, Kind> = {
  post: 'POST native', put: 'PUT FHIR JSON', update: 'PUT FHIR JSON, update', 'update-longer': 'PUT FHIR JSON, update of another length',
  docref: 'PUT DocumentReference', 'docref-update': 'PUT DocumentReference, update of another length',
};
const UPDATES: Kind[] = ['PUT FHIR JSON, update', 'PUT FHIR JSON, update of another length', 'PUT DocumentReference, update of another length'];
const documents = (kind: Kind) => kind.startsWith('PUT DocumentReference');
const kinds = arg('--kinds', 'post,put,update').split(',').map((k) => KINDS[k]!);

/** One fresh server, one large write of `kind`: the server's RSS after the warm-up and just before, and its peak during, in MiB. */
async function measure(kind: Kind, mib: number): Promise<{ idle: number; before: number; peak: number; ms: number }> {
  const admin = postgresServer ? postgres(postgresServer, { max: 1, onnotice: () => undefined }) : undefined;
  const database = `cinder_bench_bodies_${process.pid}`;
  if (admin) await admin.unsafe(`CREATE DATABASE ${database}`);
  const url = postgresServer ? Object.assign(new URL(postgresServer), { pathname: '/' + database }).toString() : undefined;
  const server = await startServer({
    CINDER_MAX_BODY_BYTES: String(256 * 1024 * 1024), CINDER_MAX_BINARY_BYTES: String(256 * 1024 * 1024),
    CINDER_MAX_RESOURCE_BYTES: String(256 * 1024 * 1024),
    ...(url ? { CINDER_DATABASE_URL: url } : {}),
  });
  try {
    const auth = { Authorization: `Bearer ${await adminToken(server)}` };
    const send = (bytes: Uint8Array<ArrayBuffer>, id: string) => kind === 'POST native'
      ? fetch(`${server.fhir}/Binary`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/octet-stream', Prefer: 'return=minimal' }, body: bytes })
      : documents(kind)
        ? fetch(`${server.fhir}/DocumentReference/${id}`, {
          method: 'PUT', headers: { ...auth, 'Content-Type': 'application/fhir+json', Prefer: 'return=minimal' },
          body: JSON.stringify({
            resourceType: 'DocumentReference', id, status: 'current', subject: { display: 'Bench' },
            content: [{ attachment: { contentType: 'application/pdf', title: 'scan', data: Buffer.from(bytes).toString('base64') } }],
          }),
        })
        : fetch(`${server.fhir}/Binary/${id}`, {
          method: 'PUT', headers: { ...auth, 'Content-Type': 'application/fhir+json', Prefer: 'return=minimal' },
          body: JSON.stringify({ resourceType: 'Binary', id, contentType: 'application/octet-stream', data: Buffer.from(bytes).toString('base64') }),
        });
    const written = async (res: Response, want = 201) => {
      if (res.status !== want) throw new Error(`${kind}: expected ${want}, got ${res.status}: ${(await res.text()).slice(0, 300)}`);
      await res.arrayBuffer();
      return /(?:Binary|DocumentReference)\/([^/]+)\//.exec(res.headers.get('location') ?? '')?.[1];
    };
    // Warm up the routes and the code they compile.
    await written(await send(new Uint8Array(randomBytes(4096)), 'warm-up'));
    await Bun.sleep(1000);
    const idle = status(server.pid, 'VmRSS');
    const longer = kind === 'PUT FHIR JSON, update of another length' || kind === 'PUT DocumentReference, update of another length';
    const body = new Uint8Array(randomBytes(mib * 1024 * 1024 + (longer ? 3 : 0)));
    if (UPDATES.includes(kind)) await written(await send(new Uint8Array(randomBytes(mib * 1024 * 1024)), 'large'));
    await Bun.sleep(300);
    // The server collects its garbage when idle; give it the time, then reset its peak.
    await Bun.sleep(1000);
    const before = status(server.pid, 'VmRSS');
    writeFileSync(`/proc/${server.pid}/clear_refs`, '5');
    const started = performance.now();
    const id = (await written(await send(body, 'large'), UPDATES.includes(kind) ? 200 : 201)) ?? 'large';
    const ms = performance.now() - started;
    const peak = status(server.pid, 'VmHWM');
    if (documents(kind)) {
      const read = (await (await fetch(`${server.fhir}/DocumentReference/${id}`, { headers: { ...auth, Accept: 'application/fhir+json' } })).json()) as { content: { attachment: { data: string } }[] };
      if (read.content[0]!.attachment.data !== Buffer.from(body).toString('base64')) throw new Error(`${kind}: the content read back differs from what was sent`);
    } else {
      const read = await fetch(`${server.fhir}/Binary/${id}`, { headers: auth });
      if (!Buffer.from(await read.arrayBuffer()).equals(body)) throw new Error(`${kind}: the content read back differs from what was sent`);
    }
    return { idle, before, peak, ms };
  } finally {
    await server.stop();
    if (admin) {
      await admin.unsafe(`DROP DATABASE IF EXISTS ${database}`);
      await admin.end();
    }
  }
}

console.log(`${postgresServer ? 'PostgreSQL' : 'SQLite'}, a fresh server per measurement, ${runs} run(s) each\n`);
console.log('| request | body (MiB) | server RSS after warm-up (MiB) | RSS just before (MiB) | peak - after warm-up (MiB) | ratio to the body | request (ms) |');
console.log('|---|---:|---:|---:|---:|---:|---:|');
for (const kind of kinds) {
  for (const mib of sizes) {
    for (let run = 0; run < runs; run++) {
      const { idle, before, peak, ms } = await measure(kind, mib);
      console.log(`| ${kind} | ${mib} | ${idle.toFixed(0)} | ${before.toFixed(0)} | ${(peak - idle).toFixed(0)} | ${((peak - idle) / mib).toFixed(1)}x | ${ms.toFixed(0)} |`);
    }
  }
}
