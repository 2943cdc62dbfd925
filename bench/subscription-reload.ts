/**
 * Measures what a tenant's Subscriptions in `error` cost each reload of the hub's set (docs/PERFORMANCE.md): the hub
 * compiles a tenant's active Subscriptions again after any write of a Subscription, ValueSet, CodeSystem or Basic (any
 * process's), and at that reload also looks for those the server paused for their topic (hub.ts pausedForTopic). The
 * write that comes first after such a change pays for the reload. Here: a PUT of a Basic (not a topic), then the timed
 * POST of an Observation, which reloads the set; with 0, then `E` rest-hook Subscriptions in `error` (as failed
 * deliveries leave them, none a topic pause; stored as `cinder import` stores them, then on PostgreSQL vacuumed and analyzed
 * as an import ends), beside 10 active ones and one paused for its topic. Through app.request()
 * on SQLite (or PostgreSQL: a new database of CINDER_BENCH_POSTGRES_URL's server, default
 * postgres://postgres@127.0.0.1:5432/test, dropped at the end).
 *   bun bench/subscription-reload.ts [E, default 10000] [sqlite|postgres] [reloads per case, default 40]
 */
import postgres from 'postgres';
import { createPostgresStore } from '../src/store/postgres/index.ts';
import { serverDatabase } from './lib/databases.ts';
import { heartRate } from './lib/fhir.ts';
import { topicPausedError } from '../src/fhir/subscriptions/client-authority.ts';
import type { Resource } from '../src/fhir/resource.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../src/fhir/import/batches.ts';
import { createTestApp } from '../test/helpers/app.ts';
import { fhirClient, type Json } from '../test/helpers/fhir.ts';

const E = Number(process.argv[2] ?? 10_000);
const onPostgres = process.argv[3] === 'postgres';
const N = Number(process.argv[4] ?? 40);
const database = onPostgres ? await serverDatabase() : undefined;
const t = await createTestApp({ resolveHost: async () => ['93.184.215.14'], ...(database && { store: createPostgresStore(database.url) }) });
const api = fhirClient(t, await t.token());
await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers' }] });
const obs = heartRate('Patient/p1');
const subscription = (status: string, i: number, error?: string): Json => ({
  resourceType: 'Subscription', status, reason: `${status}-${i}`, criteria: `Observation?code=http://loinc.org|x-${i}`,
  channel: { type: 'rest-hook', endpoint: `https://hooks-${i}.example.org/fhir`, payload: 'application/fhir+json', header: ['Authorization: Bearer bench'] },
  ...(error !== undefined && { error }),
});

/** Stored as `cinder import` stores them (indexed, words included; ids `s-<i>`): an API write of 10,000 takes minutes. */
async function batch(resources: Json[]): Promise<void> {
  const writer = createBatchWriter({ store: t.store, clock: t.clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
  for (const r of resources) await writer.addPrepared([writer.prepare({ ...r, id: `s-${String(r.reason)}` } as Resource)]);
  await writer.drain();
  // As `cinder import` ends on PostgreSQL (and autovacuum later): the statistics, and the GIN indexes' pending rows merged.
  if (database) {
    const db = postgres(database.url, { max: 1, onnotice: () => undefined });
    await db`VACUUM (ANALYZE)`;
    await db.end();
  }
}

async function measure(name: string): Promise<void> {
  const times: number[] = [];
  for (let i = 0; i < N + 5; i++) {
    await api.put200({ resourceType: 'Basic', id: 'bench-mark', code: { text: `change ${i}` } });
    const started = performance.now();
    const res = await api.post('Observation', obs);
    const took = performance.now() - started;
    if (res.status !== 201) throw new Error(`${name}: ${res.status} ${await res.text()}`);
    if (i >= 5) times.push(took);
  }
  times.sort((a, b) => a - b);
  const q = (p: number) => times[Math.floor(p * (times.length - 1))]!.toFixed(1);
  console.log(`${name.padEnd(60)} median ${q(0.5)} ms  p90 ${q(0.9)} ms  (${N} reloads)`);
}

for (let i = 0; i < 10; i++) await api.create(subscription('requested', i));
await batch([subscription('error', -1, topicPausedError(['Encounter']))]);
await measure(`${onPostgres ? 'postgres' : 'sqlite'}: 0 in error (10 active, 1 topic pause)`);
await batch(Array.from({ length: E }, (_, i) => subscription('error', i, `the delivery failed 5 times in a row; the last: HTTP 503 from https://hooks-${i}.example.org/fhir`)));
await measure(`${onPostgres ? 'postgres' : 'sqlite'}: ${E} in error (failed deliveries)`);
await t.close();
await database?.drop();
