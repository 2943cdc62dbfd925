/**
 * What compressing answers costs and saves, in process (no sockets, no load generator, so it can run on
 * a shared machine):
 *
 *   bun bench/compression.ts [--patients N] [--rounds N]
 *
 * Loads N generated patients (bench/lib, about 100 resources each) into an in-process app on SQLite,
 * takes the bodies the server answers (searches of several sizes, a long read, metadata) and times
 * `Bun.gzipSync` on each at zlib levels 1, 6 and 9 (median of repeated calls). Then the whole request in
 * process (`app.fetch`, CPU time per request, rounds alternating between `Accept-Encoding: gzip` and
 * none, the first two discarded): for an answer under the threshold, which must cost nothing more, and
 * for searches above it. Prints Markdown tables.
 */
import { parseArgs } from 'node:util';
import { generateBundles } from './lib/bundle.ts';
import { createTestApp, fhirInit } from '../test/helpers/app.ts';
import { COMPRESS_MIN_CHARS, encode } from '../src/http/content-coding.ts';

const { values } = parseArgs({ options: { patients: { type: 'string', default: '20' }, rounds: { type: 'string', default: '12' } } });
const patients = Number(values.patients);
const rounds = Number(values.rounds);

const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' } });
const token = await t.token();
const fhir = t.fhir();
for (const bundle of generateBundles({ patients, seed: 1 })) {
  const res = await t.request(fhir, fhirInit(token, 'POST', bundle));
  if (res.status !== 200) throw new Error(`load: ${res.status} ${await res.text()}`);
}
const somePatient = ((await (await t.request(`${fhir}/Patient?_count=1`, fhirInit(token))).json()) as { entry: { resource: { id: string } }[] }).entry[0]!.resource.id;

const paths: [string, string][] = [
  ['read, 1 Patient (hot route)', `${fhir}/Patient/${somePatient}`],
  ['search, 2 Patients', `${fhir}/Patient?_count=2`],
  ['search, 10 Observations', `${fhir}/Observation?_count=10`],
  ['search, 20 Patients', `${fhir}/Patient?_count=20`],
  ['search, 50 Observations', `${fhir}/Observation?_count=50`],
  ['search, 100 Observations', `${fhir}/Observation?_count=100`],
  ['$everything, 100 entries', `${fhir}/Patient/${somePatient}/$everything?_count=100`],
  ['search, 1000 Observations', `${fhir}/Observation?_count=1000`],
  ['metadata', `${fhir}/metadata`],
];

/** Median of `fn`'s wall time in µs over enough calls to take about 200 ms (at least 5). */
function median(fn: () => void): number {
  const times: number[] = [];
  const until = performance.now() + 200;
  while (times.length < 5 || performance.now() < until) {
    const start = performance.now();
    fn();
    times.push((performance.now() - start) * 1000);
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
}

console.log(`\n### gzip of the answers (${patients} patients; threshold ${COMPRESS_MIN_CHARS} characters)\n`);
console.log('| answer | bytes | level 1: bytes, µs, MB/s | level 6: bytes, µs, MB/s | level 9: bytes, µs |');
console.log('|---|---:|---|---|---|');
for (const [name, url] of paths) {
  const text = await (await t.request(url, fhirInit(token))).text();
  const bytes = Buffer.byteLength(text);
  const cell = (level: 1 | 6 | 9) => {
    const size = Bun.gzipSync(text, { level }).byteLength;
    const us = median(() => Bun.gzipSync(text, { level }));
    return { size, us, text: `${size} (${((100 * size) / bytes).toFixed(1)}%), ${us.toFixed(0)} µs, ${(bytes / us).toFixed(0)}` };
  };
  const l1 = cell(1);
  const l6 = cell(6);
  const l9 = cell(9);
  console.log(`| ${name} | ${bytes} | ${l1.text} | ${l6.text} | ${l9.size}, ${l9.us.toFixed(0)} µs |`);
}

// What the negotiation itself costs on an answer under the threshold (a WeakMap miss and a header read).
const small = new Response('{"resourceType":"Patient"}', { headers: { 'Content-Type': 'application/fhir+json' } });
const req = new Request(`${fhir}/Patient/x`, { headers: { 'Accept-Encoding': 'gzip, deflate, br, zstd' } });
const N = 1_000_000;
let start = performance.now();
for (let i = 0; i < N; i++) encode(req, small);
console.log(`\nencode() on an answer under the threshold: ${(((performance.now() - start) * 1e6) / N).toFixed(0)} ns per call\n`);

console.log('### Whole requests in process (CPU µs per request, median of rounds; gzip / none)\n');
console.log('| request | none | Accept-Encoding: gzip | ratio |');
console.log('|---|---:|---:|---:|');
for (const [name, url] of [paths[0]!, paths[1]!, paths[3]!, paths[4]!, paths[5]!]) {
  const per: Record<string, number[]> = { none: [], gzip: [] };
  const count = name.includes('100') ? 200 : 1000;
  for (let round = 0; round < rounds + 2; round++) {
    for (const kind of round % 2 ? ['none', 'gzip'] : ['gzip', 'none']) {
      const headers: Record<string, string> = kind === 'gzip' ? { 'Accept-Encoding': 'gzip' } : {};
      const requests = Array.from({ length: count }, () => new Request(url, fhirInit(token, 'GET', undefined, headers)));
      const before = process.cpuUsage();
      for (const r of requests) await (await t.app.fetch(r)).arrayBuffer();
      const used = process.cpuUsage(before);
      if (round >= 2) per[kind]!.push((used.user + used.system) / count);
    }
  }
  const med = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  console.log(`| ${name} | ${med(per.none!).toFixed(1)} | ${med(per.gzip!).toFixed(1)} | ${(med(per.gzip!) / med(per.none!)).toFixed(2)} |`);
}
await t.close();
process.exit(0);
