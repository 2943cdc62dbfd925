/**
 * A search of 1,000 ids (`Binary?_id=a,b,...`, as `_include`'s targets and reads of many are read) among
 * Binaries of two table sizes, through the store of one or two checkouts, in turn (wall time: the
 * database's work counts):
 *
 *   bun bench/id-lists.ts <checkout A> [<checkout B>] [--sizes 5000,50000] [--rounds N] [--store sqlite|postgres|both]
 *
 * Each checkout (a directory with its dependencies, such as a git worktree) gets, for each size, a store
 * of its own (bench/lib/databases.ts: a SQLite file, or a PostgreSQL database on the test server, dropped
 * at the end), holding that many Binaries written in one transaction and left without
 * statistics, as an import leaves a database until its statistics are gathered (`--analyze` gathers
 * them first). The ids are every (size / 1,000)-th Binary, listed out of order. Each round times one
 * search per size and side, A then B (B then A on odd rounds), after two warm-up rounds, and checks
 * that both answer the same 1,000. Prints the median ms of each, and the median of the rounds' ratios
 * B / A.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { benchDatabase, type BenchStore, storeKinds, type StoreKind } from './lib/databases.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    sizes: { type: 'string', default: '5000,50000' },
    rounds: { type: 'string', default: '15' },
    store: { type: 'string', default: 'both' },
    analyze: { type: 'boolean', default: false },
  },
});
if (positionals.length < 1 || positionals.length > 2 || !['sqlite', 'postgres', 'both'].includes(values.store)) {
  console.error('usage: bun bench/id-lists.ts <checkout A> [<checkout B>] [--sizes 5000,50000] [--rounds N] [--store sqlite|postgres|both] [--analyze]');
  process.exit(2);
}
const sizes = values.sizes.split(',').map(Number);
const rounds = Number(values.rounds);
const IDS = 1000;
const TENANT = 't1';

interface Side {
  /** Searches the 1,000 ids; their ids as found. */
  search(): Promise<string[]>;
  close(): Promise<void>;
}

const binaryId = (i: number) => `b-${String(i).padStart(6, '0')}`;

async function side(dir: string, kind: StoreKind, size: number): Promise<Side> {
  const { firstVersions } = await import(`${dir}/test/helpers/versions.ts`);
  const db = await benchDatabase<BenchStore>(dir, kind);
  const store = db.open();
  await store.migrate();
  for (let i = 0; i < size; i += 10_000) {
    const binaries = Array.from({ length: Math.min(10_000, size - i) }, (_, j) => ({ resourceType: 'Binary', id: binaryId(i + j), contentType: 'text/plain', data: 'aGk=' }));
    await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(binaries)));
  }
  if (values.analyze) await store.resources.indexing.analyze();
  // Every (size / 1,000)-th, from the middle on and round again: not in id order.
  const step = Math.floor(size / IDS);
  const ids = Array.from({ length: IDS }, (_, i) => binaryId(((i + IDS / 2) % IDS) * step));
  const query = { type: 'Binary', where: [{ kind: 'id', ids }], sort: [], count: IDS + 1 };
  return {
    search: async () => (await store.resources.search(TENANT, query)).map((v) => v.id),
    async close() {
      await store.close();
      await db.drop();
    },
  };
}

const dirs = positionals.map((d) => resolve(d));
for (const kind of storeKinds(values.store)) {
  const sides: Side[][] = [];
  for (const size of sizes) sides.push(await Promise.all(dirs.map((d) => side(d, kind, size))));
  const times = sizes.map(() => dirs.map(() => [] as number[]));
  try {
    for (let round = 0; round < rounds + 2; round++) {
      for (const [k] of sizes.entries()) {
        const order = round % 2 ? [...dirs.keys()].reverse() : [...dirs.keys()];
        const answers: string[][] = [];
        for (const i of order) {
          const start = performance.now();
          answers[i] = await sides[k]![i]!.search();
          if (round >= 2) times[k]![i]!.push(performance.now() - start);
        }
        if (answers.some((a) => a.length !== IDS) || (answers.length === 2 && answers[0]!.join() !== answers[1]!.join())) {
          throw new Error(`${kind}, ${sizes[k]} Binaries: answers of ${answers.map((a) => a.length).join(' and ')} ids, or different ones`);
        }
      }
    }
  } finally {
    for (const s of sides.flat()) await s.close();
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
  console.log(`\n### ${kind}, ${IDS} ids, ${rounds} rounds${values.analyze ? ', analysed' : ', no statistics'} (median ms${dirs.length === 2 ? "; B / A: median of the rounds' ratios" : ''})\n`);
  console.log(`| Binaries | ${dirs.map((d, i) => `${'AB'[i]}: ${d}`).join(' | ')} |${dirs.length === 2 ? ' B / A |' : ''}`);
  console.log(`|---:|${dirs.map(() => '---:').join('|')}|${dirs.length === 2 ? '---:|' : ''}`);
  for (const [k, size] of sizes.entries()) {
    const cells = times[k]!.map((t) => median(t).toFixed(1));
    const ratio = dirs.length === 2 ? ` ${median(times[k]![1]!.map((b, r) => b / times[k]![0]![r]!)).toFixed(3)} |` : '';
    console.log(`| ${size.toLocaleString('en')} | ${cells.join(' | ')} |${ratio}`);
  }
}
process.exit(0);
