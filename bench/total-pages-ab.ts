/**
 * The first page and the pages after it of searches with `_total=accurate` (`--only totals`), or of chains sorted on
 * a parameter that no condition drives, read by a sort walk (`--only chains`), of two checkouts in one process, in
 * turn (wall time, as the database's work counts too):
 *
 *   bun bench/total-pages-ab.ts <checkout A> <checkout B> [--patients N] [--rounds N] [--store sqlite|postgres|both] [--only totals|chains]
 *
 * Each checkout (a git worktree with its dependencies) gets its own in-process app (its `test/helpers/app.ts`)
 * on a database of its own (bench/lib/databases.ts: a SQLite file, or a PostgreSQL database on the test server,
 * dropped at the end), holding the same generated patients (bench/lib, seed 1; 1,000 patients: about 100,000
 * resources), written by id through the store's bulk insert and analysed. Each round walks every scenario's first
 * PAGES pages on A then B (B then A on odd rounds), after one warm-up round, and checks that both answer the same
 * entries and totals. Prints the median ms of the first page and of the later pages together, and the median of
 * the rounds' ratios B / A.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';
import { generatePatients } from './lib/generator.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '5' }, patients: { type: 'string', default: '1000' }, store: { type: 'string', default: 'both' }, only: { type: 'string', default: 'totals' } },
});
if (positionals.length !== 2 || !['sqlite', 'postgres', 'both'].includes(values.store) || !['totals', 'chains'].includes(values.only)) {
  console.error('usage: bun bench/total-pages-ab.ts <checkout A> <checkout B> [--patients N] [--rounds N] [--store sqlite|postgres|both] [--only totals|chains]');
  process.exit(2);
}
const rounds = Number(values.rounds);
const patients = Number(values.patients);
const PAGES = 5;

type Json = Record<string, any>;

const TOTALS = [
  { name: '`Observation?category=vital-signs&_count=50`', query: 'Observation?category=vital-signs&_total=accurate&_count=50' },
  { name: '`Condition?clinical-status=active&_count=20`', query: 'Condition?clinical-status=active&_total=accurate&_count=20' },
  { name: '`Observation?status=final&code=8867-4&_count=20`', query: 'Observation?status=final&code=http://loinc.org|8867-4&_total=accurate&_count=20' },
  { name: '`Observation?subject:Patient.gender=female&_count=50`', query: 'Observation?subject:Patient.gender=female&_total=accurate&_count=50' },
];
const CHAINS = [
  { name: '`Observation?subject:Patient.gender=female&_sort=-date&_count=20`', query: 'Observation?subject:Patient.gender=female&_sort=-date&_count=20' },
  { name: '`Observation?subject:Patient.gender=male&_sort=date&_count=50`', query: 'Observation?subject:Patient.gender=male&_sort=date&_count=50' },
  { name: '`Condition?subject:Patient.gender=female&_sort=-onset-date&_count=20`', query: 'Condition?subject:Patient.gender=female&_sort=-onset-date&_count=20' },
  { name: '`Encounter?subject:Patient.birthdate=ge1970&_sort=-date&_count=20`', query: 'Encounter?subject:Patient.birthdate=ge1970&_sort=-date&_count=20' },
];
const SCENARIOS = values.only === 'chains' ? CHAINS : TOTALS;

interface Walk {
  first: number;
  later: number;
  seen: string[];
}

interface Side {
  label: string;
  walk(query: string): Promise<Walk>;
  close(): Promise<void>;
}

async function side(dir: string, kind: StoreKind): Promise<Side> {
  const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
  const { firstVersions } = await import(`${dir}/test/helpers/versions.ts`);
  const db = await benchDatabase(dir, kind);
  const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' }, store: db.open() });
  const token = await t.token();
  let batch: Json[] = [];
  const flush = async () => {
    await t.store.resources.write('t1', (w: any) => w.insertNew(firstVersions(batch)));
    batch = [];
  };
  for (const r of generatePatients({ patients, seed: 1 })) {
    batch.push(r as Json);
    if (batch.length >= 2000) await flush();
  }
  if (batch.length) await flush();
  await t.store.resources.indexing.analyze();
  return {
    label: `${dir} (${kind})`,
    async walk(query) {
      const seen: string[] = [];
      let next: string | undefined = `${t.fhir()}/${query}`;
      let first = 0;
      let later = 0;
      for (let page = 0; page < PAGES && next; page++) {
        const start = performance.now();
        const res: Response = await t.request(next, fhirInit(token));
        const b = (await res.json()) as Json;
        if (page === 0) first = performance.now() - start;
        else later += performance.now() - start;
        if (res.status !== 200) throw new Error(`${dir}: ${next}: ${res.status} ${JSON.stringify(b).slice(0, 500)}`);
        seen.push(`total ${b.total}`, ...(b.entry ?? []).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`));
        next = b.link.find((l: Json) => l.relation === 'next')?.url;
      }
      return { first, later, seen };
    },
    async close() {
      await t.close();
      await db.drop();
    },
  };
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
for (const kind of storeKinds(values.store)) {
  const sides: Side[] = [];
  for (const dir of positionals) sides.push(await side(resolve(dir), kind));
  try {
    const times = sides.map(() => SCENARIOS.map(() => ({ first: [] as number[], later: [] as number[] })));
    for (let round = 0; round <= rounds; round++) {
      for (const [k, s] of SCENARIOS.entries()) {
        const order = round % 2 ? [1, 0] : [0, 1];
        const walks: Walk[] = [];
        for (const i of order) {
          walks[i] = await sides[i]!.walk(s.query);
          if (round > 0) {
            times[i]![k]!.first.push(walks[i]!.first);
            times[i]![k]!.later.push(walks[i]!.later);
          }
        }
        if (JSON.stringify(walks[0]!.seen) !== JSON.stringify(walks[1]!.seen)) throw new Error(`${s.name}: the checkouts answer differently`);
      }
    }
    console.log(`\n### ${kind}, ${patients} patients, ${rounds} rounds (median ms; B / A: median of the rounds' ratios)\n`);
    console.log(`| search (${PAGES} pages) | A first | B first | B / A | A pages 2-${PAGES} | B pages 2-${PAGES} | B / A |`);
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    for (const [k, s] of SCENARIOS.entries()) {
      const [a, b] = [times[0]![k]!, times[1]![k]!];
      const ratio = (x: number[], y: number[]) => median(y.map((v, r) => v / x[r]!)).toFixed(3);
      console.log(`| ${s.name} | ${median(a.first).toFixed(1)} | ${median(b.first).toFixed(1)} | ${ratio(a.first, b.first)} | ${median(a.later).toFixed(1)} | ${median(b.later).toFixed(1)} | ${ratio(a.later, b.later)} |`);
    }
  } finally {
    for (const s of sides) await s.close();
  }
}
process.exit(0);
