/**
 * The superset statement a transaction's grouped conditions are searched by (bundle-held-searches.ts requireGroupUnchanged,
 * bundle-condition-answers.ts together): `family` of the group's families and `given` of the group's given names, each a
 * string condition of prefixes, searched through the store of one or two checkouts in turn (paired, order alternating):
 *
 *   bun bench/prefix-ranges.ts <checkout A> [<checkout B>] [--patients 5000] [--sizes 25,100,250,1000] [--runs 7] [--store sqlite|postgres|both] [--at-most 10,25,50] [--alone] [--crossed 0]
 *
 * Each side gets a fresh database holding `--patients` Patients (97 families, a given name each), analysed on
 * PostgreSQL; for each size n, the first n Patients' conditions merged (as valuesMerged makes them) are searched `--runs`
 * times, and the median ms printed per side, with the rows found (which must agree), then the ms per search of the group
 * (the median over n). With one checkout, also a group of n split in groups of `--at-most` (MERGED_AT_MOST) for each
 * value given: `--at-most 10,25,50,100` times the statements of one group of n done so many at a time; `--alone` times the
 * n searches of the group each alone (as a transaction's planning searched them without merging).
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    patients: { type: 'string', default: '5000' }, sizes: { type: 'string', default: '25,100,250,1000' }, runs: { type: 'string', default: '7' },
    store: { type: 'string', default: 'both' }, 'at-most': { type: 'string', default: '' }, crossed: { type: 'string', default: '0' }, alone: { type: 'boolean', default: false },
  },
});
if (positionals.length < 1 || positionals.length > 2 || !['sqlite', 'postgres', 'both'].includes(values.store)) {
  console.error('usage: bun bench/prefix-ranges.ts <checkout A> [<checkout B>] [--patients 5000] [--sizes 25,100,250,1000] [--runs 7] [--store sqlite|postgres|both] [--at-most 10,25,50] [--alone] [--crossed 0]');
  process.exit(2);
}
const patients = Number(values.patients);
const sizes = values.sizes.split(',').map(Number);
const runs = Number(values.runs);
const atMost = values['at-most'] === '' ? [] : values['at-most'].split(',').map(Number);
const kinds = storeKinds(values.store);
const crossed = Number(values.crossed);
// With `--crossed k`, 10 families, and for each given name k more Patients of it under the other families (as
// bench/conditional-creates.ts --crossed): a superset of N searches then holds about (k + 1) N rows.
const FAMILIES = crossed > 0 ? 10 : 97;

const patient = (i: number) => ({ resourceType: 'Patient', name: [{ family: `Family${i % FAMILIES}`, given: [`Given${i}x`] }] });
const prefixes = (param: string, vs: string[]) => ({ kind: 'string', param, values: [...new Set(vs)].map((value) => ({ value, match: 'prefix' })) });
/** The merged conditions of the first `from`..`to` Patients' `family=F&given=G` (lower-cased: their normalised values). */
const merged = (from: number, to: number) => {
  const ids = Array.from({ length: to - from }, (_, k) => from + k);
  return [prefixes('family', ids.map((i) => `family${i % FAMILIES}`)), prefixes('given', ids.map((i) => `given${i}x`))];
};

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[xs.length >> 1]!;

interface Side { search: (where: unknown[], count: number) => Promise<number>; close: () => Promise<void> }

async function open(dir: string, kind: StoreKind): Promise<Side> {
  const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
  const db = await benchDatabase(dir, kind);
  const store = db.open();
  const t = await createTestApp({ store, env: { CINDER_RATE_LIMITS: 'off' } });
  const token: string = await t.token();
  const all = [...Array.from({ length: patients }, (_, i) => patient(i)),
    ...Array.from({ length: patients * crossed }, (_, k) => {
      const i = Math.floor(k / crossed);
      return { resourceType: 'Patient', name: [{ family: `Family${(i + 1 + (k % crossed)) % FAMILIES}`, given: [`Given${i}x`] }] };
    })];
  for (let i = 0; i < all.length; i += 1000) {
    const entry = all.slice(i, i + 1000).map((resource) => ({ resource, request: { method: 'POST', url: 'Patient' } }));
    const res: Response = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'batch', entry }));
    if (res.status !== 200) throw new Error(`${dir}: seed ${res.status}`);
  }
  if (kind === 'postgres' && typeof db.url === 'string') {
    const { default: postgres } = await import('postgres');
    const sql = postgres(db.url, { max: 1, onnotice: () => {} });
    await sql`ANALYZE`;
    await sql.end();
  }
  return {
    search: async (where, count) => (await store.resources.search('t1', { type: 'Patient', sort: [], where, count })).length,
    close: async () => {
      await t.close();
      await db.drop();
    },
  };
}

/** ms of `fn`, median of `runs` after one warm-up, and its result. */
async function timed(fn: () => Promise<number>): Promise<[number, number]> {
  let found = await fn();
  const ms: number[] = [];
  for (let r = 0; r < runs; r++) {
    const started = performance.now();
    found = await fn();
    ms.push(performance.now() - started);
  }
  return [median(ms), found];
}

const dirs = positionals.map((p) => resolve(p));
for (const kind of kinds) {
  const sides = [] as Side[];
  for (const dir of dirs) sides.push(await open(dir, kind));
  try {
    for (const n of sizes) {
      const where = merged(0, n);
      const got: [number, number][] = [];
      // Paired: each round runs both sides, the order alternating.
      const ms: number[][] = sides.map(() => []);
      let found: number[] = [];
      for (let r = 0; r < 3; r++) {
        const order = r % 2 === 0 ? sides.map((_, i) => i) : sides.map((_, i) => i).reverse();
        found = [];
        for (const i of order) {
          const [m, f] = await timed(() => sides[i]!.search(where, n + 101));
          ms[i]!.push(m);
          found[i] = f;
        }
      }
      for (let i = 0; i < sides.length; i++) got.push([median(ms[i]!), found[i]!]);
      if (got.length === 2 && got[0]![1] !== got[1]![1]) throw new Error(`${kind} n=${n}: the checkouts found ${got[0]![1]} and ${got[1]![1]}`);
      console.log(`${kind} n=${n}: ${got.map(([m, f]) => `${m.toFixed(1)} ms (${f} rows, ${(m / n * 1000).toFixed(0)} µs a search)`).join('  ')}${got.length === 2 ? `  B / A ${(got[1]![0] / got[0]![0]).toFixed(3)}` : ''}`);
      if (values.alone) {
        const [m] = await timed(async () => {
          let rows = 0;
          for (let i = 0; i < n; i++) rows += await sides[0]!.search(merged(i, i + 1), 3);
          return rows;
        });
        console.log(`${kind} n=${n} each alone: ${m.toFixed(1)} ms (${(m / n * 1000).toFixed(0)} µs a search)`);
      }
      for (const k of atMost) {
        if (k >= n) continue;
        const [m] = await timed(async () => {
          let rows = 0;
          for (let i = 0; i < n; i += k) rows += await sides[0]!.search(merged(i, Math.min(n, i + k)), Math.min(k, n - i) + 101);
          return rows;
        });
        console.log(`${kind} n=${n} in groups of ${k}: ${m.toFixed(1)} ms (${(m / n * 1000).toFixed(0)} µs a search)`);
      }
    }
  } finally {
    for (const s of sides) await s.close();
  }
}
