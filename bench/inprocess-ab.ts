/**
 * Two checkouts' hot routes in one process, in turn: the CPU time of a request through `app.fetch`
 * (no sockets), without the drift between runs that makes separate processes hard to compare on a
 * shared machine (both apps see the same heap, cores and moment):
 *
 *   bun bench/inprocess-ab.ts <checkout A> <checkout B> [--rounds N] [--route validate|read|vread|pages|update|transaction] [--postgres]
 *
 * Each checkout (a directory such as a git worktree with its dependencies installed) gets its own
 * in-process app on a fresh SQLite file (its `test/helpers/app.ts`), with what the route needs:
 * `validate` an is-a ValueSet over 100,000 generated concepts and 1,000 request bodies as in
 * `bench/http.ts` (about 90% of the codes outside it), `read` one Patient, `vread` its version 1, `pages` 6,000 Observations
 * (three codes, a date each) and the later pages of two sorted searches (`_sort=-date`, and with
 * `code=`, 20 a page), reached by each checkout's own `next` links, `update` PUTs of 1,000 Patients in turn
(each a new version), `transaction` transactions of 10 such PUTs each. Then rounds of 2,000
 * requests (200 for `pages`) alternate between the two (A B, B A, ...), the first two rounds discarded as warm-up.
 * Prints the lowest, lower-quartile and median CPU µs per request of each. `--postgres`: each app on a database of
 * its own on the test PostgreSQL (CINDER_TEST_POSTGRES_URL, its checkout's `test/helpers/stores.ts`), dropped at the
 * end, and the wall µs per request beside the CPU (the server's work and the round trips are not this process's CPU).
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { benchDatabase } from './lib/databases.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '30' }, route: { type: 'string', default: 'validate' }, postgres: { type: 'boolean', default: false } },
});
if (positionals.length !== 2 || !['validate', 'read', 'vread', 'pages', 'update', 'transaction'].includes(values.route)) {
  console.error('usage: bun bench/inprocess-ab.ts <checkout A> <checkout B> [--rounds N] [--route validate|read|vread|pages|update|transaction] [--postgres]');
  process.exit(2);
}
const rounds = Number(values.rounds);
const PER_ROUND = values.route === 'pages' || values.route === 'transaction' ? 200 : 2000;
const CONCEPTS = 100_000;

interface Side {
  dir: string;
  fetch: (req: Request) => Promise<Response>;
  request: (i: number) => Request;
  perRequest: number[];
  wallPerRequest: number[];
  cleanup(): Promise<void>;
}

async function side(dir: string): Promise<Side> {
  const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
  const { BENCH_SYSTEM, BENCH_VALUE_SET, generatedCodeSystem, generatedIsAValueSet } = await import(`${dir}/bench/lib/terminology.ts`);
  let store: unknown;
  let cleanup = async () => {};
  if (values.postgres) {
    const db = await benchDatabase(dir, 'postgres');
    store = db.open();
    cleanup = db.drop;
  }
  const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' }, ...(store !== undefined && { store }) });
  const token: string = await t.token();
  const fhir: string = t.fhir();
  const put = async (path: string, body: unknown) => {
    const res: Response = await t.request(`${fhir}/${path}`, fhirInit(token, 'PUT', body));
    if (res.status >= 300) throw new Error(`${dir}: PUT ${path}: ${res.status} ${await res.text()}`);
  };
  const headers = { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' };
  let request: (i: number) => Request;
  if (values.route === 'validate') {
    await put('CodeSystem/generated', generatedCodeSystem(CONCEPTS));
    await put('ValueSet/generated-is-a', generatedIsAValueSet('C1'));
    const bodies = Array.from({ length: 1000 }, (_, i) => JSON.stringify({
      resourceType: 'Parameters',
      parameter: [{ name: 'url', valueUri: BENCH_VALUE_SET }, { name: 'system', valueUri: BENCH_SYSTEM }, { name: 'code', valueCode: `C${(i * 7919) % CONCEPTS}` }],
    }));
    const url = `${fhir}/ValueSet/$validate-code`;
    // With a Content-Length, as a server request has: the body is read at once, not as a stream.
    request = (i) => new Request(url, { method: 'POST', headers: { ...headers, 'Content-Length': String(bodies[i % 1000]!.length) }, body: bodies[i % 1000] });
  } else if (values.route === 'pages') {
    const day = (i: number) => new Date(Date.UTC(2020, 0, 1) + (i * 7_919 % 2_000) * 86_400_000).toISOString().slice(0, 10);
    for (let batch = 0; batch < 12; batch++) {
      const entry = Array.from({ length: 500 }, (_, j) => {
        const i = batch * 500 + j;
        return { resource: { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: `c${i % 3}` }] }, effectiveDateTime: day(i) }, request: { method: 'POST', url: 'Observation' } };
      });
      const res: Response = await t.request(fhir, fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'batch', entry }));
      if (res.status !== 200) throw new Error(`${dir}: batch: ${res.status} ${await res.text()}`);
    }
    // Pages 2 to 11 of each search, by the checkout's own links (an offset, or the place of the page before).
    const urls: string[] = [];
    for (const query of ['Observation?_sort=-date&_count=20', 'Observation?code=c1&_sort=-date&_count=20']) {
      let next: string | undefined = `${fhir}/${query}`;
      for (let page = 1; page <= 11 && next !== undefined; page++) {
        const res: Response = await t.request(next, { headers });
        const bundle = (await res.json()) as { link?: { relation: string; url: string }[] };
        next = bundle.link?.find((l) => l.relation === 'next')?.url;
        if (next !== undefined && page < 11) urls.push(next);
      }
    }
    if (urls.length !== 20) throw new Error(`${dir}: expected 20 later pages, got ${urls.length}`);
    request = (i) => new Request(urls[i % urls.length]!, { headers });
  } else if (values.route === 'update') {
    const body = (i: number) => JSON.stringify({ resourceType: 'Patient', id: `p${i % 1000}`, name: [{ family: `Family${i}`, given: ['Write'] }], gender: 'female', birthDate: '1970-01-01' });
    request = (i) => new Request(`${fhir}/Patient/p${i % 1000}`, { method: 'PUT', headers, body: body(i) });
  } else if (values.route === 'transaction') {
    const entry = (i: number, k: number) => ({
      resource: { resourceType: 'Patient', id: `t${k}`, name: [{ family: `Family${i}`, given: ['Write'] }], gender: 'female', birthDate: '1970-01-01' },
      request: { method: 'PUT', url: `Patient/t${k}` },
    });
    const body = (i: number) => JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: Array.from({ length: 10 }, (_, k) => entry(i, (i % 100) * 10 + k)) });
    request = (i) => new Request(fhir, { method: 'POST', headers, body: body(i) });
  } else {
    await put('Patient/bench', { resourceType: 'Patient', id: 'bench', name: [{ family: 'Bench', given: ['Read'] }], gender: 'female', birthDate: '1970-01-01' });
    const url = `${fhir}/Patient/bench${values.route === 'vread' ? '/_history/1' : ''}`;
    request = () => new Request(url, { headers });
  }
  const first = await t.app.fetch(request(0));
  if (first.status !== 200 && first.status !== 201) throw new Error(`${dir}: ${values.route} answered ${first.status}: ${await first.text()}`);
  return { dir, fetch: (req) => t.app.fetch(req), request, perRequest: [], wallPerRequest: [], cleanup };
}

const sides = [await side(resolve(positionals[0]!)), await side(resolve(positionals[1]!))];
for (let round = 0; round < rounds + 2; round++) {
  for (const s of round % 2 ? sides : [...sides].reverse()) {
    const requests = Array.from({ length: PER_ROUND }, (_, i) => s.request(i));
    const before = process.cpuUsage();
    const started = performance.now();
    for (const req of requests) await (await s.fetch(req)).text();
    const used = process.cpuUsage(before);
    if (round >= 2) {
      s.perRequest.push((used.user + used.system) / PER_ROUND);
      s.wallPerRequest.push(((performance.now() - started) * 1000) / PER_ROUND);
    }
  }
}
const quantiles = (values: number[]) => {
  const v = [...values].sort((a, b) => a - b);
  const at = (q: number) => v[Math.floor(q * (v.length - 1))]!.toFixed(2);
  return `${at(0)} | ${at(0.25)} | ${at(0.5)}`;
};
const wall = values.postgres ? ' | wall lowest µs | wall lower quartile µs | wall median µs' : '';
console.log(`| checkout (${values.route}${values.postgres ? ', PostgreSQL' : ''}, ${rounds} rounds of ${PER_ROUND}) | lowest µs | lower quartile µs | median µs${wall} |`);
console.log(`|---|---:|---:|---:${values.postgres ? '|---:|---:|---:' : ''}|`);
for (const s of sides) console.log(`| ${s.dir} | ${quantiles(s.perRequest)}${values.postgres ? ` | ${quantiles(s.wallPerRequest)}` : ''} |`);
for (const s of sides) await s.cleanup();
process.exit(0);
