/**
 * The latency of a plain REST read while clients send varied GraphQL introspection queries:
 *
 *   bun bench/graphql-introspection.ts [--seconds S] [--clients N]
 *
 * Against `cinder serve` from source on a real port (SQLite, a fresh data directory, rate limits off;
 * bench/lib/server.ts): N clients (default 4) each send
 * full introspection queries (getIntrospectionQuery()), each one a different document (an alias of
 * `__schema` numbered per request, so no answer is kept for another), one after the other; a refused one
 * (429) is sent again 100 ms later. Meanwhile a reader sends `GET Patient/p1` every 50 ms and records
 * how long each took. Prints the reads' latency percentiles and what the introspection clients got.
 */
import { getIntrospectionQuery } from 'graphql';
import { parseArgs } from 'node:util';
import { adminToken, startServer } from './lib/server.ts';

const { values } = parseArgs({ args: Bun.argv.slice(2), options: { seconds: { type: 'string', default: '20' }, clients: { type: 'string', default: '4' } }, strict: true });
const seconds = Number(values.seconds);
const clients = Number(values.clients);

const server = await startServer();
const token = await adminToken(server);
const api = {
  get: (path: string) => fetch(`${server.fhir}/${path}`, { headers: { Authorization: `Bearer ${token}` } }),
  post: (path: string, body: string, headers: Record<string, string>) =>
    fetch(`${server.fhir}/${path}`, { method: 'POST', body, headers: { Authorization: `Bearer ${token}`, ...headers } }),
};
const put = await fetch(`${server.fhir}/Patient/p1`, {
  method: 'PUT', body: JSON.stringify({ resourceType: 'Patient', id: 'p1', gender: 'female' }),
  headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
});
if (!put.ok) throw new Error(`PUT: ${put.status}`);
// Warm: the app's schema, the read path.
await api.post('$graphql', JSON.stringify({ query: '{ Patient(id: "p1") { id } }' }), { 'Content-Type': 'application/json' });
for (let i = 0; i < 20; i++) await api.get('Patient/p1');

const full = getIntrospectionQuery();
const end = performance.now() + seconds * 1000;
const tally = { answered: 0, refused: 0, other: 0 };
let n = 0;
const client = async (c: number) => {
  while (performance.now() < end) {
    const query = full.replace('__schema {', `c${c}q${n++}: __schema {`);
    const res = await api.post('$graphql', JSON.stringify({ query }), { 'Content-Type': 'application/json' });
    await res.arrayBuffer();
    if (res.status === 200) tally.answered++;
    else if (res.status === 429) {
      tally.refused++;
      await Bun.sleep(100);
    } else tally.other++;
  }
};
const latencies: number[] = [];
const reader = async () => {
  while (performance.now() < end) {
    const started = performance.now();
    const res = await api.get('Patient/p1');
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`read: ${res.status}`);
    latencies.push(performance.now() - started);
    await Bun.sleep(50);
  }
};
await Promise.all([reader(), ...Array.from({ length: clients }, (_, c) => client(c))]);
latencies.sort((a, b) => a - b);
const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!.toFixed(1);
console.log(`${seconds} s, ${clients} introspection clients: ${latencies.length} reads, ms p50 ${at(50)} p90 ${at(90)} p99 ${at(99)} max ${latencies.at(-1)!.toFixed(1)}; introspections answered ${tally.answered}, refused (429) ${tally.refused}, other ${tally.other}`);
await server.stop();
process.exit(0);
