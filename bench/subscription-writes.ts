/**
 * Measures what R4 Subscriptions add to a write (docs/PERFORMANCE.md): POSTs of the same Observation through
 * app.request() on a SQLite store (or PostgreSQL), with no Subscription, then with 1, 10, 100 and 1,000 active rest-hook
 * Subscriptions on Observation whose criteria do not match it (`code=`, each another code), then with one
 * matching it (a notification recorded in each write's transaction), and with 100 whose criteria chain
 * (`subject:Patient.name=`). Nothing is delivered (the delivery loop is not started). With `postgres`, on a
 * new PostgreSQL database of CINDER_BENCH_POSTGRES_URL's server (default postgres://postgres@127.0.0.1:5432/test),
 * dropped at the end.
 *   bun bench/subscription-writes.ts [writes per case, default 2000] [sqlite|postgres]
 */
import { createPostgresStore } from '../src/store/postgres/index.ts';
import { serverDatabase } from './lib/databases.ts';
import { heartRate } from './lib/fhir.ts';
import { createTestApp } from '../test/helpers/app.ts';
import { fhirClient, type Json } from '../test/helpers/fhir.ts';

const N = Number(process.argv[2] ?? 2000);
const onPostgres = process.argv[3] === 'postgres';
const database = onPostgres ? await serverDatabase() : undefined;
const t = await createTestApp({ resolveHost: async () => ['93.184.215.14'], ...(database && { store: createPostgresStore(database.url) }) });
const api = fhirClient(t, await t.token());
await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Chalmers' }] });
const obs = heartRate('Patient/p1');
const subscription = (criteria: string): Json => ({
  resourceType: 'Subscription', status: 'requested', reason: 'bench', criteria, channel: { type: 'rest-hook', endpoint: 'https://hooks.example.org/fhir' },
});

async function measure(name: string): Promise<void> {
  for (let i = 0; i < 200; i++) await api.post('Observation', obs);
  const times: number[] = [];
  for (let i = 0; i < N; i++) {
    const started = performance.now();
    const res = await api.post('Observation', obs);
    times.push(performance.now() - started);
    if (res.status !== 201) throw new Error(`${name}: ${res.status} ${await res.text()}`);
  }
  times.sort((a, b) => a - b);
  const q = (p: number) => times[Math.floor(p * (times.length - 1))]!.toFixed(3);
  console.log(`${name.padEnd(56)} median ${q(0.5)} ms  p90 ${q(0.9)} ms  (${N} writes)`);
}

const created: string[] = [];
const add = async (criteria: string) => created.push((await api.create(subscription(criteria))).id as string);
const clear = async () => {
  for (const id of created.splice(0)) await api.del(`Subscription/${id}`);
};

await measure('no Subscription');
let have = 0;
for (const n of [1, 10, 100, 1000]) {
  for (; have < n; have++) await add(`Observation?code=http://loinc.org|x-${have}`);
  await measure(`${n} active, criteria not matching (code=)`);
}
await clear();
await add('Observation?code=http://loinc.org|8867-4');
await measure('1 active, matching (a notification each write)');
await clear();
for (let i = 0; i < 100; i++) await add(`Observation?subject:Patient.name=nobody-${i}`);
await measure('100 active, chained criteria (subject:Patient.name=)');
await t.close();
await database?.drop();
