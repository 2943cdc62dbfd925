/**
 * FHIR search throughput and latency on a generated data set, SQLite and/or PostgreSQL:
 *
 *   bun bench/search.ts [--patients N] [--seconds S] [--connections C] [--sqlite PATH] [--postgres URL]
 *                       [--out DIR] [--only LIST] [--json]
 *
 * Loads `bench/generate.ts` data (N patients, about 100 resources each; 10,000 gives about 1,000,000
 * resources) into each database once, as bench/export.ts does (a database that already holds the
 * tenant `bench` is reused, so both benchmarks can share one), starts one `cinder serve` process on it
 * and drives each query of a fixed mix with wrk at C connections for S seconds after a warm-up run of
 * S/2 seconds. Each scenario cycles through 1,000 variants (different patients, names, dates) so that
 * no single cached page answers them all. Reports requests/s, p50 and p99 latency and non-2xx answers.
 */
import { parseArgs } from 'node:util';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';
import { createClient } from '../src/auth/admin.ts';
import { systemClock } from '../src/clock.ts';
import { openStore } from '../src/store/open.ts';
import { BENCH_TENANT, loadDataset } from './lib/dataset.ts';
import { CHRONIC_CONDITIONS } from './lib/catalog/clinical.ts';
import { VITALS } from './lib/catalog/measurements.ts';
import { FAMILY_NAMES } from './lib/catalog/people.ts';
import { launchServer } from './lib/server.ts';
import { hasWrk, runWrk, type WrkResult } from './lib/wrk.ts';

const { values } = parseArgs({
  options: {
    patients: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '10' },
    connections: { type: 'string', default: '64' },
    sqlite: { type: 'string' },
    postgres: { type: 'string' },
    out: { type: 'string', default: join(tmpdir(), 'cinder-bench-export') },
    only: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
});
const patients = Number(values.patients);
const seconds = Number(values.seconds);
const connections = Number(values.connections);
if (!hasWrk()) {
  console.error('bench/search.ts needs wrk (Debian: apt-get install wrk)');
  process.exit(2);
}

const LOINC = 'http://loinc.org';
const VARIANTS = 1000;

interface Sample {
  patients: string[];
}

/** A scenario: its name, whether it is patient-scoped (the tighter latency target), and its i-th query. */
interface Scenario {
  name: string;
  patientScoped: boolean;
  query: (i: number, s: Sample) => string;
}

const pick = <T>(list: readonly T[], i: number): T => list[(i * 7919) % list.length]!;
const year = (i: number) => 2015 + (i % 10);
const month = (i: number) => String(1 + (i % 12)).padStart(2, '0');
const vitals = Object.values(VITALS).map((v) => v.code);

const SCENARIOS: Scenario[] = [
  { name: 'Observation?patient=..&code=..&date=ge..', patientScoped: true, query: (i, s) => `Observation?patient=${pick(s.patients, i)}&code=${LOINC}|${pick(vitals, i)}&date=ge${year(i)}-${month(i)}-01` },
  { name: 'Condition?clinical-status=active&patient=..', patientScoped: true, query: (i, s) => `Condition?clinical-status=active&patient=${pick(s.patients, i)}` },
  { name: 'Observation?patient=..&_include=Observation:performer', patientScoped: true, query: (i, s) => `Observation?patient=${pick(s.patients, i)}&category=vital-signs&_include=Observation:performer` },
  { name: 'Patient?name=<prefix>', patientScoped: false, query: (i) => `Patient?name=${pick(FAMILY_NAMES, i).slice(0, 3 + (i % 2))}` },
  { name: 'Patient?birthdate=ge..&gender=..&_count=50', patientScoped: false, query: (i) => `Patient?birthdate=ge${1940 + (i % 70)}-${month(i)}&gender=${i % 2 ? 'female' : 'male'}&_count=50` },
  { name: 'Encounter?date=..&_sort=-date', patientScoped: false, query: (i) => `Encounter?date=${year(i)}-${month(i)}&_sort=-date` },
  { name: 'chained: Observation?subject:Patient.family=..&code=..', patientScoped: false, query: (i) => `Observation?subject:Patient.family=${encodeURIComponent(pick(FAMILY_NAMES, i))}&code=${LOINC}|${pick(vitals, i)}` },
  { name: '_has: Patient?_has:Condition:patient:code=..', patientScoped: false, query: (i) => `Patient?_has:Condition:patient:code=${pick(CHRONIC_CONDITIONS, i).code}` },
  { name: 'Condition?clinical-status=active&_total=accurate', patientScoped: false, query: (i) => `Condition?clinical-status=active&_total=accurate&_count=${10 + (i % 10)}` },
];

type Row = WrkResult & { database: string; scenario: string; patientScoped: boolean };

/** A client of the bench tenant allowed to read and search everything, and its access token. */
async function token(base: string, url: string): Promise<string> {
  const store = openStore(url);
  const { client, clientSecret } = await createClient(store, systemClock, { tenant: BENCH_TENANT, scopes: ['system/*.read'] });
  await store.close();
  const res = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Authorization: `Basic ${btoa(`${client.clientId}:${clientSecret}`)}` },
    body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'system/*.read' }),
  });
  if (!res.ok) throw new Error(`token: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}

/** Patient ids to vary the patient-scoped queries over (the first 1,000 by id). */
async function sample(fhir: string, bearer: Record<string, string>): Promise<Sample> {
  const res = await fetch(`${fhir}/Patient?_count=1000&_elements=id&_sort=_id`, { headers: bearer });
  if (!res.ok) throw new Error(`sample: ${res.status} ${await res.text()}`);
  const bundle = (await res.json()) as { entry?: { resource: { id: string } }[] };
  const ids = (bundle.entry ?? []).map((e) => e.resource.id);
  if (!ids.length) throw new Error('the data set has no patients');
  return { patients: ids };
}

async function measureDatabase(database: string, url: string): Promise<Row[]> {
  await loadDataset(database, url, patients, Math.min(patients, 10_000), values.out!);
  const server = await launchServer({ CINDER_DATABASE_URL: url });
  const rows: Row[] = [];
  try {
    const bearer = { Authorization: `Bearer ${await token(server.base, url)}` };
    const fhir = `${server.base}/tenants/${BENCH_TENANT}/fhir/R4`;
    const s = await sample(fhir, bearer);
    const only = values.only?.split(',').map(Number);
    for (const [n, scenario] of SCENARIOS.entries()) {
      if (only && !only.includes(n + 1)) continue;
      const paths = Array.from({ length: VARIANTS }, (_, i) => `${new URL(fhir).pathname}/${scenario.query(i, s)}`);
      // Every variant must be a valid search: one failing query would make the figures meaningless.
      const probe = await fetch(`${server.base}${paths[0]}`, { headers: bearer });
      if (!probe.ok) throw new Error(`${scenario.name}: ${probe.status} ${await probe.text()}`);
      await runWrk({ url: server.base, paths, headers: bearer, connections, seconds: Math.max(1, Math.round(seconds / 2)) });
      const r = await runWrk({ url: server.base, paths, headers: bearer, connections, seconds });
      rows.push({ database, scenario: scenario.name, patientScoped: scenario.patientScoped, ...r });
      if (!values.json) process.stderr.write(`  ${scenario.name}: ${Math.round(r.perSecond)}/s p50 ${r.p50ms.toFixed(2)} ms p99 ${r.p99ms.toFixed(2)} ms\n`);
    }
  } finally {
    await server.stop();
  }
  return rows;
}

const targets: [string, string][] = [['sqlite', 'sqlite:' + resolve(values.sqlite ?? join(values.out!, `bench-${patients}.db`))]];
if (values.postgres) targets.push(['postgres', values.postgres]);
const rows: Row[] = [];
for (const [name, url] of targets) rows.push(...(await measureDatabase(name, url)));
if (values.json) console.log(JSON.stringify({ patients, connections, seconds, rows }, null, 2));
else {
  console.log(`| database | query (${connections} connections, ${seconds} s, wrk, 1 server process) | requests/s | p50 ms | p99 ms | p99 target ms | non-2xx |`);
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| ${r.database} | ${r.scenario} | ${Math.round(r.perSecond)} | ${r.p50ms.toFixed(2)} | ${r.p99ms.toFixed(2)} | ${r.patientScoped ? 10 : 50} | ${r.non2xx + r.errors} |`);
  }
}
