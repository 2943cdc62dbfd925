/**
 * HTTP throughput of Cinder's hot paths, measured with wrk at 64 connections against `cinder serve`
 * (source, SQLite, rate limits off), beside a bare Bun endpoint as the machine's ceiling:
 *
 *   bun bench/http.ts [--seconds S] [--connections C] [--concepts N] [--processes N] [--only LIST] [--json]
 *
 * Scenarios: bare Bun, GET Patient/{id} with bearer verification, POST Patient, client_credentials
 * with Basic, client_credentials with private_key_jwt (pre-signed assertions), and
 * ValueSet/$validate-code against an is-a ValueSet over a generated hierarchy of N concepts.
 * Two more bare endpoints are the issues' reference points, measured here with the same client:
 * `bare-token` parses the form, checks a SHA-256 secret digest and signs an ES256 JWT with jose;
 * `bare-lookup` parses a JSON Parameters body and answers with one Set lookup.
 * `--only bare,bare-token,bare-lookup,read,create,basic,jwt,validate` runs a subset (default all).
 * With one server process (Linux), each Cinder scenario also reports the server's CPU time per request
 * (every thread, from /proc): it holds better than requests/s when the machine is shared, since time
 * the server waits for a core is not counted.
 */
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { createClient } from '../src/auth/admin.ts';
import { systemClock } from '../src/clock.ts';
import { openStore } from '../src/store/open.ts';
import { adminToken, freePort, startServer, type BenchServer } from './lib/server.ts';
import { BENCH_SYSTEM, BENCH_VALUE_SET, generatedCodeSystem, generatedIsAValueSet } from './lib/terminology.ts';
import { hasWrk, runWrk, type WrkResult } from './lib/wrk.ts';

const SCENARIOS_DEFAULT = 'bare,bare-token,bare-lookup,read,create,basic,jwt,validate';
const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    concepts: { type: 'string', default: '100000' },
    only: { type: 'string', default: SCENARIOS_DEFAULT },
    processes: { type: 'string', default: '1' },
    json: { type: 'boolean', default: false },
  },
});
const seconds = Number(values.seconds);
const connections = Number(values.connections);
const concepts = Number(values.concepts);
const SCENARIOS = ['bare', 'bare-token', 'bare-lookup', 'read', 'create', 'basic', 'jwt', 'validate'] as const;
const only = new Set(values.only.split(',').map((s) => s.trim()).filter(Boolean));
for (const name of only) {
  if (!(SCENARIOS as readonly string[]).includes(name)) {
    console.error(`--only: unknown scenario ${name} (one of ${SCENARIOS.join(', ')})`);
    process.exit(2);
  }
}
const runs = (name: (typeof SCENARIOS)[number]) => only.has(name);
if (!hasWrk()) {
  console.error('bench/http.ts needs wrk (Debian: apt-get install wrk)');
  process.exit(2);
}

/**
 * CPU time (user + system, every thread) a process has used, in µs, from /proc (Linux); undefined
 * elsewhere. Per request it holds better than requests/s on a machine shared with other work, since
 * time the server waits for a core is not counted.
 */
function cpuMicros(pid: number): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}
/** USER_HZ: 100 on every Linux architecture Bun runs on. */
const CLOCK_TICKS = 100;

type Row = WrkResult & { scenario: string; cpuMicrosPerRequest?: number };
const rows: Row[] = [];
/** Runs a scenario twice (the first a warm-up) and records the second, with `pid`'s CPU time per request when given. */
async function measure(scenario: string, run: () => Promise<WrkResult>, pid?: number) {
  await run(); // warm-up run, discarded
  const before = pid === undefined ? undefined : cpuMicros(pid);
  const r = await run();
  const after = pid === undefined ? undefined : cpuMicros(pid);
  const cpu = before === undefined || after === undefined || r.requests === 0 ? undefined : (after - before) / r.requests;
  rows.push({ scenario, ...r, ...(cpu === undefined ? {} : { cpuMicrosPerRequest: cpu }) });
  const perRequest = cpu === undefined ? '' : `, server CPU ${cpu.toFixed(1)} µs/request`;
  if (!values.json) console.error(`${scenario}: ${Math.round(r.perSecond)}/s p50 ${r.p50ms.toFixed(2)} ms p99 ${r.p99ms.toFixed(2)} ms${perRequest}`);
}

async function bare() {
  const port = await freePort();
  const server = Bun.serve({ port, hostname: '127.0.0.1', fetch: () => new Response('{"resourceType":"Patient","id":"x"}', { headers: { 'Content-Type': 'application/fhir+json' } }) });
  await measure('bare Bun endpoint (ceiling)', () => runWrk({ url: `http://127.0.0.1:${port}/`, connections, seconds }));
  await server.stop(true);
}

/** The token issue's reference: form, Basic secret digest check, ES256 JWT signed with jose. */
async function bareToken() {
  const { privateKey } = await generateKeyPair('ES256');
  const digest = createHash('sha256').update('bench-secret').digest('hex');
  const port = await freePort();
  const server = Bun.serve({
    port, hostname: '127.0.0.1',
    async fetch(req) {
      const form = new URLSearchParams(await req.text());
      const [id, secret] = atob((req.headers.get('authorization') ?? '').slice(6)).split(':');
      if (form.get('grant_type') !== 'client_credentials' || createHash('sha256').update(secret ?? '').digest('hex') !== digest) return new Response('{"error":"invalid_client"}', { status: 401 });
      const access_token = await new SignJWT({ scope: 'system/*.read', client_id: id }).setProtectedHeader({ alg: 'ES256', kid: 'k' })
        .setIssuer('http://bench').setSubject(id!).setIssuedAt().setExpirationTime('5m').setJti(crypto.randomUUID()).sign(privateKey);
      return Response.json({ access_token, token_type: 'Bearer', expires_in: 300, scope: 'system/*.read' }, { headers: { 'Cache-Control': 'no-store' } });
    },
  });
  const headers = { Authorization: `Basic ${btoa('bench:bench-secret')}`, 'Content-Type': 'application/x-www-form-urlencoded' };
  await measure('bare Bun token endpoint (form, digest, jose ES256)', () => runWrk({ url: `http://127.0.0.1:${port}/`, method: 'POST', headers, bodies: ['grant_type=client_credentials'], connections, seconds }));
  await server.stop(true);
}

/** The terminology issue's reference: a JSON Parameters body answered with one Set lookup. */
async function bareLookup() {
  const codes = new Set(Array.from({ length: concepts }, (_, i) => `C${i}`).filter((_, i) => i % 2 === 0));
  const port = await freePort();
  const server = Bun.serve({
    port, hostname: '127.0.0.1',
    async fetch(req) {
      const body = (await req.json()) as { parameter: { name: string; valueCode?: string }[] };
      const code = body.parameter.find((p) => p.name === 'code')?.valueCode ?? '';
      return Response.json({ resourceType: 'Parameters', parameter: [{ name: 'result', valueBoolean: codes.has(code) }] });
    },
  });
  const bodies = Array.from({ length: 1000 }, (_, i) => JSON.stringify({
    resourceType: 'Parameters',
    parameter: [{ name: 'url', valueUri: BENCH_VALUE_SET }, { name: 'system', valueUri: BENCH_SYSTEM }, { name: 'code', valueCode: `C${(i * 7919) % concepts}` }],
  }));
  await measure('bare Bun Set-lookup endpoint (JSON Parameters)', () => runWrk({ url: `http://127.0.0.1:${port}/`, method: 'POST', headers: { 'Content-Type': 'application/fhir+json' }, bodies, connections, seconds }));
  await server.stop(true);
}

async function privateKeyJwtClient(s: BenchServer) {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench', alg: 'ES256', use: 'sig' };
  const store = openStore(s.databaseUrl);
  const { client } = await createClient(store, systemClock, { tenant: 'default', scopes: ['system/*.read'], jwks: { keys: [jwk] } });
  await store.close();
  const aud = `${s.base}/oauth2/token`;
  const now = Math.floor(Date.now() / 1000);
  const bodies: string[] = [];
  // Every assertion needs a fresh jti; enough for warm-up and run at up to ~15,000/s.
  for (let i = 0; i < 15_000 * seconds * 2; i++) {
    const assertion = await new SignJWT({}).setProtectedHeader({ alg: 'ES256', kid: 'bench' }).setIssuer(client.clientId)
      .setSubject(client.clientId).setAudience(aud).setJti(crypto.randomUUID()).setIssuedAt(now).setExpirationTime(now + 290).sign(privateKey);
    bodies.push(new URLSearchParams({ grant_type: 'client_credentials', client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer', client_assertion: assertion }).toString());
  }
  return bodies;
}

async function cinder() {
  // CINDER_PROCESSES: HTTP server processes sharing the port (the load generator runs on the same cores).
  const s = await startServer({ CINDER_PROCESSES: values.processes });
  // Server CPU per request only with one process: the others' time is not the first's.
  const pid = values.processes === '1' ? s.pid : undefined;
  try {
    const token = await adminToken(s);
    const bearer = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' };
    const created = await fetch(`${s.fhir}/Patient`, { method: 'POST', headers: bearer, body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Bench', given: ['Read'] }], gender: 'female', birthDate: '1970-01-01' }) });
    const { id } = (await created.json()) as { id: string };
    if (runs('read')) await measure('FHIR read (GET Patient/{id}, bearer verified)', () => runWrk({ url: `${s.fhir}/Patient/${id}`, headers: bearer, connections, seconds }), pid);
    const patient = JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Bench', given: ['Create'] }], gender: 'male', birthDate: '1980-02-02', identifier: [{ system: 'urn:bench', value: 'x' }] });
    if (runs('create')) await measure('FHIR create (POST Patient)', () => runWrk({ url: `${s.fhir}/Patient`, method: 'POST', headers: { ...bearer, Prefer: 'return=minimal' }, bodies: [patient], connections, seconds }), pid);
    const basic = { Authorization: `Basic ${btoa(`${s.clientId}:${s.clientSecret}`)}`, 'Content-Type': 'application/x-www-form-urlencoded' };
    if (runs('basic')) await measure('token client_credentials (Basic)', () => runWrk({ url: `${s.base}/oauth2/token`, method: 'POST', headers: basic, bodies: ['grant_type=client_credentials'], connections, seconds }), pid);
    if (runs('jwt')) {
      const assertions = await privateKeyJwtClient(s);
      let half = 0;
      await measure('token client_credentials (private_key_jwt)', () => {
        const part = assertions.slice(half * (assertions.length / 2), (half + 1) * (assertions.length / 2));
        half++;
        return runWrk({ url: `${s.base}/oauth2/token`, method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, bodies: part, connections, seconds });
      }, pid);
    }
    if (!runs('validate')) return;
    await fetch(`${s.fhir}/CodeSystem/generated`, { method: 'PUT', headers: bearer, body: JSON.stringify(generatedCodeSystem(concepts)) });
    await fetch(`${s.fhir}/ValueSet/generated-is-a`, { method: 'PUT', headers: bearer, body: JSON.stringify(generatedIsAValueSet('C1')) });
    const bodies = Array.from({ length: 1000 }, (_, i) => JSON.stringify({
      resourceType: 'Parameters',
      parameter: [{ name: 'url', valueUri: BENCH_VALUE_SET }, { name: 'system', valueUri: BENCH_SYSTEM }, { name: 'code', valueCode: `C${(i * 7919) % concepts}` }],
    }));
    await measure(`ValueSet/$validate-code (is-a, ${concepts} concepts)`, () =>
      runWrk({ url: `${s.fhir}/ValueSet/$validate-code`, method: 'POST', headers: bearer, bodies, connections, seconds }), pid);
  } finally {
    await s.stop();
  }
}

if (runs('bare')) await bare();
if (runs('bare-token')) await bareToken();
if (runs('bare-lookup')) await bareLookup();
if (SCENARIOS.some((name) => !name.startsWith('bare') && runs(name))) await cinder();
if (values.json) console.log(JSON.stringify({ connections, seconds, rows }, null, 2));
else {
  console.log(`| scenario (${connections} connections, ${seconds} s, wrk, ${values.processes} server process(es)) | requests/s | p50 ms | p99 ms | non-2xx | server CPU µs/request |`);
  console.log('|---|---|---|---|---|---|');
  for (const r of rows) {
    const cpu = r.cpuMicrosPerRequest === undefined ? '–' : r.cpuMicrosPerRequest.toFixed(1);
    console.log(`| ${r.scenario} | ${Math.round(r.perSecond)} | ${r.p50ms.toFixed(2)} | ${r.p99ms.toFixed(2)} | ${r.non2xx + r.errors} | ${cpu} |`);
  }
}
