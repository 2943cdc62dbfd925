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
import { MIX_SCENARIOS as SCENARIOS, type MixSample as Sample } from './lib/mix.ts';
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

const VARIANTS = 1000;

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
