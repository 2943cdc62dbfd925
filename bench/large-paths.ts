/**
 * Peak memory and time of the writes and imports that read a stored resource's whole text where they need at most
 * part of it, each in a fresh `cinder serve` (or `cinder import`) per measurement:
 *
 * - `update`: the same update with no Subscription (what an update costs without the hub).
 * - `topic-update`: a DocumentReference of `--mib` MiB of base64 updated to content of another length, while a
 *   topic-based Subscription on every DocumentReference change is active (the hub read the version replaced whole).
 * - `delete`: a DELETE of such a DocumentReference (the delete read the version it deletes whole).
 * - `integrity`: with CINDER_REFERENTIAL_INTEGRITY=on, a client reading DocumentReference under a SMART v2 scope
 *   filter creates an Observation whose `derivedFrom` names the large DocumentReference (the check reads the target).
 * - `import-unchanged`, `import-changed`: `cinder import` of `--count` Patients of `--mib` MiB each (a photo) that
 *   strict validation refuses, stored before at CINDER_VALIDATION=structural, read again as they are (kept
 *   unchanged) or with one more character each (refused); the figure is the import process's.
 *
 *   ulimit -v 4000000; bun bench/large-paths.ts [--mib 30] [--count 40] [--runs 1] [--kinds topic-update,delete,integrity,import-unchanged,import-changed] [--postgres postgres://server/db]
 *
 * A server is warmed up with a small write of the kind, collected, and its peak RSS (VmHWM) reset (Linux `clear_refs`
 * 5) before the request measured; the figure is the peak above its RSS just before. An import's figure is its process's
 * VmHWM less that of an import of one small Patient in the same database (the code and the terminology loaded).
 */
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { adminToken, startServer, type BenchServer } from './lib/server.ts';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const mib = Number(arg('--mib', '30'));
const count = Number(arg('--count', '40'));
const runs = Number(arg('--runs', '1'));
const kinds = arg('--kinds', 'topic-update,delete,integrity,import-unchanged,import-changed').split(',');
const postgresServer = process.argv.includes('--postgres') ? arg('--postgres', '') : undefined;
const MAIN = join(import.meta.dir, '../src/main.ts');

const status = (pid: number, field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
/** Base64 of about `bytes` random bytes, a multiple of 3 (no padding: four more characters are base64 still). */
const base64 = (bytes: number) => randomBytes(bytes - (bytes % 3)).toString('base64');

/** A database of its own on the PostgreSQL server, or none (SQLite in the data directory). */
async function database<T>(fn: (url: string | undefined) => Promise<T>): Promise<T> {
  if (!postgresServer) return fn(undefined);
  const admin = postgres(postgresServer, { max: 1, onnotice: () => undefined });
  const name = `cinder_bench_large_${process.pid}_${Math.floor(Math.random() * 1e6)}`;
  await admin.unsafe(`CREATE DATABASE ${name}`);
  try {
    return await fn(Object.assign(new URL(postgresServer), { pathname: '/' + name }).toString());
  } finally {
    await admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

const document = (id: string, data: string) => ({
  resourceType: 'DocumentReference', id, status: 'current', subject: { display: 'Bench' },
  content: [{ attachment: { contentType: 'application/pdf', title: 'scan', data } }],
});

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const TOPIC = 'http://example.org/topics/documents';

/** One measured request: `setup` writes what it needs, `warm` one small request of the kind, `run` the large one. */
async function measureServer(env: Record<string, string>, steps: {
  setup: (s: BenchServer, call: Call) => Promise<void>;
  warm: (call: Call) => Promise<void>;
  run: (call: Call) => Promise<void>;
}): Promise<{ peak: number; ms: number }> {
  return database(async (url) => {
    const server = await startServer({
      CINDER_MAX_BODY_BYTES: String(256 * 1024 * 1024), CINDER_MAX_RESOURCE_BYTES: String(256 * 1024 * 1024),
      CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true', ...env, ...(url ? { CINDER_DATABASE_URL: url } : {}),
    });
    try {
      const token = await adminToken(server);
      const call = callOf(server, token);
      await steps.setup(server, call);
      await steps.warm(call);
      await Bun.sleep(1500);
      const before = status(server.pid, 'VmRSS');
      writeFileSync(`/proc/${server.pid}/clear_refs`, '5');
      const started = performance.now();
      await steps.run(call);
      const ms = performance.now() - started;
      return { peak: status(server.pid, 'VmHWM') - before, ms };
    } finally {
      await server.stop();
    }
  });
}

type Call = (method: string, path: string, body?: unknown, want?: number, token?: string) => Promise<Record<string, unknown>>;
function callOf(server: BenchServer, adminTok: string): Call {
  return async (method, path, body, want, token = adminTok) => {
    const res = await fetch(`${server.fhir}/${path}`, {
      method,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', Prefer: 'return=minimal' },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (want !== undefined && res.status !== want) throw new Error(`${method} ${path}: expected ${want}, got ${res.status}: ${text.slice(0, 400)}`);
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  };
}

/** A rest-hook receiver that accepts everything (the topic Subscription's endpoint). */
const hook = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: async (req) => (await req.arrayBuffer(), new Response(null, { status: 200 })) });

async function topicSubscription(call: Call): Promise<void> {
  await call('POST', 'Basic', {
    resourceType: 'Basic', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
    extension: [
      { url: `${X5}url`, valueUri: TOPIC },
      { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'DocumentReference' }] },
      { url: `${X5}canFilterBy`, extension: [{ url: 'filterParameter', valueString: 'status' }] },
      { url: `${X5}status`, valueCode: 'active' },
    ],
  }, 201);
  await call('POST', 'Subscription', {
    resourceType: 'Subscription', status: 'requested', reason: 'bench', criteria: TOPIC,
    channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${hook.port}/hook`, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
  }, 201);
  for (let i = 0; i < 200; i++) {
    const bundle = await call('GET', 'Subscription?status=active&_summary=count');
    if ((bundle.total as number) > 0) return;
    await Bun.sleep(100);
  }
  throw new Error('the topic Subscription was not activated');
}

async function run(kind: string): Promise<{ peak: number; ms: number }> {
  const large = base64(mib * 1024 * 1024);
  switch (kind) {
    case 'update':
    case 'topic-update':
      return measureServer({}, {
        setup: async (_, call) => {
          if (kind === 'topic-update') await topicSubscription(call);
          await call('PUT', 'DocumentReference/large', document('large', large), 201);
        },
        warm: async (call) => {
          await call('PUT', 'DocumentReference/warm', document('warm', base64(3000)), 201);
          await call('PUT', 'DocumentReference/warm', document('warm', base64(3003)), 200);
        },
        run: (call) => call('PUT', 'DocumentReference/large', document('large', large + 'AAAA'), 200).then(() => undefined),
      });
    case 'delete':
      return measureServer({}, {
        setup: async (_, call) => {
          await call('PUT', 'DocumentReference/large', document('large', large), 201);
        },
        warm: async (call) => {
          await call('PUT', 'DocumentReference/warm', document('warm', base64(3000)), 201);
          await call('DELETE', 'DocumentReference/warm', undefined, 204);
        },
        run: (call) => call('DELETE', 'DocumentReference/large', undefined, 204).then(() => undefined),
      });
    case 'integrity': {
      let filtered = '';
      const observation = (target: string) => ({
        resourceType: 'Observation', status: 'final', code: { text: 'bench' }, derivedFrom: [{ reference: `DocumentReference/${target}` }],
      });
      return measureServer({ CINDER_REFERENTIAL_INTEGRITY: 'on' }, {
        setup: async (server, call) => {
          await call('PUT', 'DocumentReference/large', document('large', large), 201);
          await call('PUT', 'DocumentReference/warm', document('warm', base64(3000)), 201);
          const client = Bun.spawnSync(['bun', MAIN, 'client', 'create', '--tenant', 'default', '--json', '--grant', 'client_credentials',
            '--scope', 'system/DocumentReference.rs?status=current', '--scope', 'system/Observation.cu'], {
            env: { ...process.env, CINDER_DATA_DIR: server.dataDir, CINDER_DATABASE_URL: server.databaseUrl, CINDER_LOG_LEVEL: 'warn' },
          });
          if (client.exitCode !== 0) throw new Error(`client create: ${client.stderr.toString()}`);
          const { client_id, client_secret } = JSON.parse(client.stdout.toString()) as { client_id: string; client_secret: string };
          filtered = await adminToken({ ...server, clientId: client_id, clientSecret: client_secret }, 'system/DocumentReference.rs?status=current system/Observation.cu');
        },
        warm: (call) => call('POST', 'Observation', observation('warm'), 201, filtered).then(() => undefined),
        run: (call) => call('POST', 'Observation', observation('large'), 201, filtered).then(() => undefined),
      });
    }
    case 'import-unchanged':
    case 'import-changed':
      return measureImport(kind === 'import-changed');
    default:
      throw new Error(`unknown kind ${kind}`);
  }
}

/** `cinder import` of `count` refused Patients of `mib` MiB each, stored before at CINDER_VALIDATION=structural. */
async function measureImport(changed: boolean): Promise<{ peak: number; ms: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-bench-large-import-'));
  try {
    return await database(async (url) => {
      const env = { ...process.env, CINDER_DATA_DIR: dir, CINDER_DATABASE_URL: url ?? `sqlite:${join(dir, 'cinder.db')}`, CINDER_LOG_LEVEL: 'warn' };
      const cli = (args: string[], extra: Record<string, string> = {}) => {
        const child = Bun.spawn(['bun', MAIN, ...args], { env: { ...env, ...extra }, stdout: 'pipe', stderr: 'pipe' });
        return child;
      };
      const wait = async (child: ReturnType<typeof cli>, what: string) => {
        if ((await child.exited) !== 0) throw new Error(`${what}: ${await new Response(child.stderr).text()}`);
      };
      await wait(cli(['tenant', 'create', 't1']), 'tenant create');
      const photo = base64(mib * 1024 * 1024 * 3 / 4 - 1024);
      const patient = (i: number, extra: string) => JSON.stringify({ resourceType: 'Patient', id: `p${i}`, gender: 'banana', name: [{ family: `Legacy${extra}` }], photo: [{ contentType: 'image/png', data: photo }] });
      const file = join(dir, 'patients.ndjson');
      writeFileSync(file, Array.from({ length: count }, (_, i) => patient(i, '')).join('\n') + '\n');
      await wait(cli(['import', '--tenant', 't1', file], { CINDER_VALIDATION: 'structural' }), 'structural import');
      const small = join(dir, 'small.ndjson');
      writeFileSync(small, JSON.stringify({ resourceType: 'Patient', id: 'small', name: [{ family: 'Small' }] }) + '\n');
      const peakOf = async (path: string) => {
        const child = cli(['import', '--tenant', 't1', '--json', path]);
        let peak = 0;
        const started = performance.now();
        const poll = setInterval(() => {
          try {
            peak = Math.max(peak, status(child.pid, 'VmHWM'));
          } catch {
            // exited
          }
        }, 20);
        const code = await child.exited;
        clearInterval(poll);
        const ms = performance.now() - started;
        const out = await new Response(child.stdout).text();
        if (code !== 0 && code !== 1) throw new Error(`import: ${code} ${await new Response(child.stderr).text()}`);
        return { peak, ms, out };
      };
      const baseline = await peakOf(small);
      if (changed) writeFileSync(file, Array.from({ length: count }, (_, i) => patient(i, 'x')).join('\n') + '\n');
      const measured = await peakOf(file);
      const summary = JSON.parse(measured.out) as { imported: number; unchanged: number; failed: number };
      if (changed ? summary.failed !== count : summary.unchanged !== count) throw new Error(`import: unexpected summary ${measured.out.slice(0, 300)}`);
      return { peak: measured.peak - baseline.peak, ms: measured.ms };
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`${postgresServer ? 'PostgreSQL' : 'SQLite'}, ${mib} MiB per resource${kinds.some((k) => k.startsWith('import')) ? `, ${count} resources per import` : ''}, a fresh process per measurement\n`);
console.log('| case | peak above before (MiB) | ratio to the resource | time (ms) |');
console.log('|---|---:|---:|---:|');
for (const kind of kinds) {
  for (let i = 0; i < runs; i++) {
    const { peak, ms } = await run(kind);
    const size = kind.startsWith('import') ? mib * count : mib;
    console.log(`| ${kind} | ${peak.toFixed(0)} | ${(peak / size).toFixed(2)}x | ${ms.toFixed(0)} |`);
  }
}
hook.stop(true);
