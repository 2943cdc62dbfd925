/**
 * A page at an offset past every match with the sort's first key, under a chain (search-sql.ts withoutKey: the
 * matches with the key are counted, driven by the key's rows, `countSql` with `driver: 'sort'`), of two checkouts in
 * one process, in turn (wall time: the database's work counts too):
 *
 *   bun bench/keyless-count-ab.ts <checkout A> <checkout B> [--observations N] [--rounds N] [--store sqlite|postgres]
 *
 * Each checkout (a git worktree with its dependencies) gets its own in-process app (its `test/helpers/app.ts`) on a
 * fresh SQLite file, or on a PostgreSQL database of its own (its `test/helpers/stores.ts`), holding N Observations
 * (one in 60 dated, the rest undated) of two Patients, nearly all of the female one, written with the store's bulk
 * insert. `Observation?subject:Patient.gender=female&_sort=-date&_count=5&_offset=K` with K past the dated matches,
 * 20 requests a round, A then B (B then A on odd rounds) after one warm-up round; both must answer the same ids.
 * Prints the median ms a request and the median of the rounds' ratios B / A.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '7' }, observations: { type: 'string', default: '30000' }, store: { type: 'string', default: 'sqlite' } },
});
if (positionals.length !== 2 || !['sqlite', 'postgres'].includes(values.store)) {
  console.error('usage: bun bench/keyless-count-ab.ts <checkout A> <checkout B> [--observations N] [--rounds N] [--store sqlite|postgres]');
  process.exit(2);
}
const N = Number(values.observations);
const rounds = Number(values.rounds);
const PER_ROUND = 20;
const dated = (i: number) => i % 60 === 0;
const ofMale = (i: number) => i % 150 === 7;
const observation = (i: number) => ({
  resourceType: 'Observation', id: `o${i}`, status: 'final', code: { text: 'x' },
  subject: { reference: ofMale(i) ? 'Patient/m' : 'Patient/f' },
  ...(dated(i) && { effectiveDateTime: `2026-01-0${1 + (i % 3)}` }),
});
const keyed = Array.from({ length: N }, (_, i) => i).filter((i) => dated(i) && !ofMale(i)).length;
const query = `Observation?subject:Patient.gender=female&_sort=-date&_count=5&_offset=${keyed + 5}`;

interface Side {
  dir: string;
  get(): Promise<string>;
  ms: number[];
  cleanup(): Promise<void>;
}

async function side(dir: string): Promise<Side> {
  const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
  const { firstVersions } = await import(`${dir}/test/helpers/versions.ts`);
  let store: unknown;
  let cleanup = async () => {};
  if (values.store === 'postgres') {
    const { storeTargets } = await import(`${dir}/test/helpers/stores.ts`);
    const target = (await storeTargets({ main: false })).find((x: { kind: string }) => x.kind === 'postgres');
    if (!target) throw new Error('--store postgres: the test PostgreSQL is unreachable');
    store = (await target.migrated()).open();
    cleanup = () => target.cleanup();
  }
  const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' }, ...(store !== undefined && { store }) });
  const write = (rs: Record<string, unknown>[]) => t.store.resources.write('t1', (w: { insertNew(v: unknown): Promise<unknown> }) => w.insertNew(firstVersions(rs)));
  await write([{ resourceType: 'Patient', id: 'f', gender: 'female' }, { resourceType: 'Patient', id: 'm', gender: 'male' }]);
  for (let from = 0; from < N; from += 2000) await write(Array.from({ length: Math.min(2000, N - from) }, (_, k) => observation(from + k)));
  await t.store.resources.indexing.analyze();
  const token: string = await t.token();
  const url = `${t.fhir()}/${query}`;
  const get = async () => {
    const res: Response = await t.request(url, fhirInit(token));
    const body = (await res.json()) as { entry?: { resource: { id: string } }[] };
    if (res.status !== 200) throw new Error(`${dir}: ${res.status} ${JSON.stringify(body)}`);
    return (body.entry ?? []).map((e) => e.resource.id).join(',');
  };
  return { dir, get, ms: [], cleanup: async () => { await t.close(); await cleanup(); } };
}

const sides = [await side(resolve(positionals[0]!)), await side(resolve(positionals[1]!))];
const [a, b] = [await sides[0]!.get(), await sides[1]!.get()];
if (a !== b || a === '') throw new Error(`the checkouts answer differently: ${a} / ${b}`);
const ratios: number[] = [];
for (let round = 0; round < rounds + 1; round++) {
  const took = [0, 0];
  for (const k of round % 2 ? [1, 0] : [0, 1]) {
    const started = performance.now();
    for (let i = 0; i < PER_ROUND; i++) await sides[k]!.get();
    took[k] = (performance.now() - started) / PER_ROUND;
  }
  if (round === 0) continue;
  sides.forEach((s, k) => s.ms.push(took[k]!));
  ratios.push(took[1]! / took[0]!);
}
const median = (v: number[]) => [...v].sort((x, y) => x - y)[Math.floor((v.length - 1) / 2)]!;
console.log(`${values.store}, ${N} Observations (${keyed} of the female patient dated), ${rounds} rounds of ${PER_ROUND}: \`${query}\``);
console.log(`| checkout | median ms |\n|---|---:|`);
for (const s of sides) console.log(`| ${s.dir} | ${median(s.ms).toFixed(2)} |`);
console.log(`B / A: median ${median(ratios).toFixed(3)} (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')})`);
for (const s of sides) await s.cleanup();
