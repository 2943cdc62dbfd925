/**
 * Token endpoint and bearer-verification benchmark over HTTP against a `cinder serve` subprocess.
 *
 *   bun bench/token.ts [--seconds N] [--connections N] [--warmup N] [--json]
 *
 * Measures client_credentials tokens/s with client_secret_basic and with private_key_jwt (ES256
 * assertions signed beforehand, one fresh jti each), and FHIR read requests/s with a bearer token,
 * each at `--connections` concurrent connections, with p50/p99 latency. The server runs with
 * CINDER_RATE_LIMITS=off on a fresh SQLite database (or CINDER_DATABASE_URL when set). BENCH_BUN_FLAGS adds
 * flags to the server's `bun` (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`).
 */
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createClient, createTenant } from '../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../src/auth/client-assertion.ts';
import { systemClock } from '../src/clock.ts';
import { openStore } from '../src/store/open.ts';
import { runLoad, type LoadResult } from './lib/load.ts';

const { values: args } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    warmup: { type: 'string', default: '2' },
    json: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (args.help) {
  console.log('Usage: bun bench/token.ts [--seconds N] [--connections N] [--warmup N] [--json]');
  process.exit(0);
}
const SECONDS = Number(args.seconds);
const CONNECTIONS = Number(args.connections);
const WARMUP = Number(args.warmup);

function freePort(): number {
  const s = Bun.serve({ port: 0, fetch: () => new Response() });
  const port = s.port!;
  s.stop(true);
  return port;
}

const dir = mkdtempSync(join(tmpdir(), 'cinder-bench-'));
const databaseUrl = process.env.CINDER_DATABASE_URL ?? `sqlite:${join(dir, 'cinder.db')}`;
const port = freePort();
const base = `http://127.0.0.1:${port}`;

async function setUp() {
  const store = openStore(databaseUrl);
  await store.migrate();
  const tenant = `bench-${Date.now().toString(36)}`;
  await createTenant(store, systemClock, tenant);
  const basic = await createClient(store, systemClock, { tenant, name: 'bench-basic', scopes: ['system/*.read', 'system/*.write'] });
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench-1', alg: 'ES256' };
  const asym = await createClient(store, systemClock, { tenant, name: 'bench-jwt', scopes: ['system/*.read'], jwks: { keys: [jwk] } });
  await store.close();
  return { tenant, basic, asymId: asym.client.clientId, privateKey };
}

async function waitReady(): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    await Bun.sleep(100);
  }
  throw new Error('cinder serve did not become ready');
}

const setup = await setUp();
const server = Bun.spawn(['bun', ...(process.env.BENCH_BUN_FLAGS?.split(' ').filter(Boolean) ?? []), 'src/main.ts', 'serve'], {
  cwd: join(import.meta.dir, '..'),
  env: { ...process.env, CINDER_PORT: String(port), CINDER_HOST: '127.0.0.1', CINDER_BASE_URL: base, CINDER_DATA_DIR: dir,
    CINDER_DATABASE_URL: databaseUrl, CINDER_RATE_LIMITS: 'off', CINDER_LOG_LEVEL: 'warn' },
  stdout: 'ignore',
  stderr: 'inherit',
});

try {
  await waitReady();
  const tokenUrl = `${base}/oauth2/token`;
  const basicAuth = 'Basic ' + btoa(`${setup.basic.client.clientId}:${setup.basic.clientSecret}`);
  const form = { 'Content-Type': 'application/x-www-form-urlencoded' };
  const basicRequest = () => new Request(tokenUrl, { method: 'POST', headers: { ...form, Authorization: basicAuth }, body: 'grant_type=client_credentials&scope=system%2F*.read' });

  // Assertions are signed before the run (each needs a fresh jti), so the load generator spends no CPU on them.
  const assertionCount = Math.ceil((SECONDS + WARMUP) * 8000);
  const now = Math.floor(Date.now() / 1000);
  const assertions: string[] = [];
  for (let i = 0; i < assertionCount; i++) {
    assertions.push(await new SignJWT({ iss: setup.asymId, sub: setup.asymId, aud: tokenUrl, jti: crypto.randomUUID(), exp: now + 280, iat: now })
      .setProtectedHeader({ alg: 'ES256', kid: 'bench-1', typ: 'JWT' }).sign(setup.privateKey));
  }
  let used = 0;
  const jwtRequest = () => new Request(tokenUrl, {
    method: 'POST', headers: form,
    body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'system/*.read', client_assertion_type: ASSERTION_TYPE, client_assertion: assertions[used++ % assertions.length]! }),
  });

  const tokenFor = async (scope: string) => {
    const res = await fetch(tokenUrl, { method: 'POST', headers: { ...form, Authorization: basicAuth }, body: new URLSearchParams({ grant_type: 'client_credentials', scope }) });
    return ((await res.json()) as { access_token: string }).access_token;
  };
  const token = await tokenFor('system/*.read');
  const fhirBase = `${base}/tenants/${setup.tenant}/fhir/R4`;
  const created = await fetch(`${fhirBase}/Patient`, {
    method: 'POST', headers: { Authorization: `Bearer ${await tokenFor('system/*.write')}`, 'Content-Type': 'application/fhir+json' },
    body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Bench', given: ['Mark'] }], birthDate: '1970-01-01' }),
  });
  if (created.status !== 201) throw new Error(`creating the benchmark Patient failed: ${created.status} ${await created.text()}`);
  const patientId = ((await created.json()) as { id: string }).id;
  const readRequest = () => new Request(`${fhirBase}/Patient/${patientId}`, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/fhir+json' } });

  const scenarios: [string, () => Request][] = [
    ['client_credentials, client_secret_basic', basicRequest],
    ['client_credentials, private_key_jwt (ES256)', jwtRequest],
    ['FHIR read Patient/{id} with bearer token', readRequest],
  ];
  const results: Record<string, LoadResult> = {};
  for (const [name, request] of scenarios) {
    if (WARMUP > 0) await runLoad({ connections: CONNECTIONS, seconds: WARMUP, request });
    results[name] = await runLoad({ connections: CONNECTIONS, seconds: SECONDS, request });
  }
  if (args.json) {
    console.log(JSON.stringify({ connections: CONNECTIONS, seconds: SECONDS, database: databaseUrl.split(':')[0], results }, null, 2));
  } else {
    console.log(`\n${CONNECTIONS} connections, ${SECONDS} s per scenario, database ${databaseUrl.split(':')[0]}\n`);
    console.log('| scenario | requests/s | p50 ms | p99 ms | errors |');
    console.log('|---|---:|---:|---:|---:|');
    for (const [name, r] of Object.entries(results)) {
      const errs = r.errors ? `${r.errors} ${JSON.stringify(r.unexpected)}` : '0';
      console.log(`| ${name} | ${Math.round(r.perSecond).toLocaleString('en')} | ${r.p50ms.toFixed(2)} | ${r.p99ms.toFixed(2)} | ${errs} |`);
    }
  }
} finally {
  server.kill('SIGTERM');
  await server.exited;
  rmSync(dir, { recursive: true, force: true });
}
