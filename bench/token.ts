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
import { parseArgs } from 'node:util';
import { createClient, createTenant } from '../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../src/auth/client-assertion.ts';
import { systemClock } from '../src/clock.ts';
import { openStore } from '../src/store/open.ts';
import { runLoad, type LoadResult } from './lib/load.ts';
import { launchServer } from './lib/server.ts';

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

const server = await launchServer();
const base = server.base;
const databaseUrl = server.databaseUrl;

/** A tenant of its own with a Basic and a private_key_jwt client, in the server's (migrated) database. */
async function setUp() {
  const store = openStore(databaseUrl);
  const tenant = `bench-${Date.now().toString(36)}`;
  await createTenant(store, systemClock, tenant);
  const basic = await createClient(store, systemClock, { tenant, name: 'bench-basic', scopes: ['system/*.read', 'system/*.write'] });
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench-1', alg: 'ES256' };
  const asym = await createClient(store, systemClock, { tenant, name: 'bench-jwt', scopes: ['system/*.read'], jwks: { keys: [jwk] } });
  await store.close();
  return { tenant, basic, asymId: asym.client.clientId, privateKey };
}

try {
  const setup = await setUp();
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
  await server.stop();
}
