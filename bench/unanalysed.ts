/**
 * Searches whose plans PostgreSQL made from statistics it does not have yet: negations and absent values
 * (`:missing=true`, `:not`) and a driver's rows read with their resources, among Conditions written in
 * transactions of 500 (as writes through the API leave a database: never analysed while autovacuum is off
 * or has not come round), through the store of one or two checkouts, in turn (wall time: the database's
 * work counts):
 *
 *   bun bench/unanalysed.ts <checkout A> [<checkout B>] [--sizes 20000] [--rounds N] [--store sqlite|postgres|both] [--analyze] [--only <text>]
 *
 * For each size, one database of that many Conditions (bench/lib/databases.ts, made by checkout A: a SQLite
 * file, or a PostgreSQL database on the test server, dropped at the end) that both checkouts search (their
 * migrations must agree); `--analyze` gathers its statistics first. Condition `i` has a SNOMED CT code
 * (one of 50) but eight, an onset but five, a clinical status (a third `resolved`), a verification status
 * (`refuted` every 500th, otherwise `confirmed`) and one of 300 patients.
 * The 300 Patients are written too, for the Patient searches by `_has` (the code's Conditions are all six
 * Patients': many references to each of a few targets), and the Conditions by a chain to their Patients' gender. A search
 * written `[p1]...` holds patient p1's compartment as a condition (as a patient-context token's search does); one written
 * `export:Type?...` reads every page of an export snapshot with the query's conditions as its `_typeFilter`; one written
 * `pages:Type?...` reads its first ten pages, each after the last's last id (the keyset place a `_cursor` holds); `--only`
 * times only the searches whose text holds the one given. Each round times each search once per side, A then B (B then A on odd rounds), after one warm-up round,
 * and checks that both answer the same ids. Prints the median ms of each, and the median of the rounds'
 * ratios B / A.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { benchDatabase, type BenchStore, storeKinds, type StoreKind } from './lib/databases.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    sizes: { type: 'string', default: '20000' },
    rounds: { type: 'string', default: '5' },
    store: { type: 'string', default: 'both' },
    analyze: { type: 'boolean', default: false },
    only: { type: 'string' },
  },
});
if (positionals.length < 1 || positionals.length > 2 || !['sqlite', 'postgres', 'both'].includes(values.store)) {
  console.error('usage: bun bench/unanalysed.ts <checkout A> [<checkout B>] [--sizes 20000] [--rounds N] [--store sqlite|postgres|both] [--analyze] [--only <text>]');
  process.exit(2);
}
const sizes = values.sizes.split(',').map(Number);
const rounds = Number(values.rounds);
const TENANT = 't1';
const PATIENTS = 300;
const UNCODED = [17, 512, 1333, 2048, 2999, 7000, 15000, 19999];
const UNDATED = [5, 1200, 2500, 9000, 18000];

/** Each search: its type's name and its query (a Condition's where the name is left out). */
const EVERY_SEARCH = [
  'code:missing=true&_count=10',
  'onset-date:missing=true&_count=10',
  'clinical-status=resolved&code:missing=true&_count=10',
  'code:not=http://snomed.info/sct|38341003&_count=10',
  '_filter=code ne http://snomed.info/sct|38341003&_count=10',
  'subject=Patient/p1&_count=10',
  'code=http://snomed.info/sct|38341003&_count=10',
  'Patient?_has:Condition:subject:code=http://snomed.info/sct|38341003&_count=10',
  'Patient?_has:Condition:subject:clinical-status=resolved&_count=10',
  'subject:Patient.gender=male&_count=10',
  'subject:Patient._id=p1&_count=10',
  'clinical-status=resolved&subject:Patient.gender=male&_count=10',
  // A patient's compartment as a condition (a patient-context token's search): `[p1]` before the query.
  '[p1]code=http://snomed.info/sct|38341003&_count=10',
  '[p1]clinical-status=resolved&_count=10',
  '[p1]_count=10',
  // A sort on a parameter of 50 values: the first page's ties.
  '_sort=code&_count=1',
  '_sort=code&_count=10',
  '_sort=-code&_count=10',
  '_sort=code&_count=100',
  // A sort whose first rows cross from a few values (40 `refuted`) into many ties (`confirmed`).
  '_sort=-verification-status&_count=10',
  '_sort=-verification-status&_count=300',
  '_sort=-verification-status,onset-date&_count=100',
  // The walks' caps: the ties walked by the next key (at most four times the ties counted), with matches
  // common, every 50th and every 300th in that order; ties in id order in growing windows; pages of 1,000; a
  // page at an offset among the last dated (`_offset` applied as the route applies it).
  '_sort=verification-status,onset-date&_count=10',
  'clinical-status=resolved&_sort=verification-status,-onset-date&_count=10',
  'code=http://snomed.info/sct|38341003&_sort=verification-status,onset-date&_count=10',
  'subject=Patient/p1&_sort=verification-status,onset-date&_count=10',
  'clinical-status=resolved&_sort=verification-status&_count=10',
  '_sort=verification-status&_count=1000',
  '_sort=-verification-status&_count=1000',
  'clinical-status=resolved&_sort=onset-date&_count=10&_offset=6660',
  // Ties whose matches are too rare for the walks' caps (8 uncoded, 5 undated among 19,960 `confirmed`):
  // the windows in id order, or the walk of the next key, give way and the walk reads every tie.
  'code:missing=true&_sort=verification-status&_count=10',
  'code:missing=true&_sort=verification-status,onset-date&_count=10',
  'onset-date:missing=true&_sort=verification-status,code&_count=10',
  // An export page filtered by `_has` (`_typeFilter`), through the snapshot: `export:` before the type's query.
  'export:Patient?_has:Condition:subject:code=http://snomed.info/sct|38341003',
  'export:Patient?_has:Condition:subject:clinical-status=resolved',
  'export:Condition?subject:Patient.gender=male',
  // Pages 1..10 of a `_has` search (alone, and with a chain inside), each after the last's last id (the
  // keyset place a `_cursor` holds): `pages:` before the query; the time of all ten.
  'pages:Patient?_has:Condition:subject:clinical-status=resolved&_count=10',
  'pages:Patient?_has:Condition:subject:subject:Patient.gender=male&_count=10',
  // Pages 1..10 of a chain beside a common token (half the Conditions refer to a male patient, a third are
  // resolved): driven by the chain's rows, or the type walked in id order with the chain's set hashed.
  'pages:Condition?clinical-status=resolved&subject:Patient.gender=male&_count=10',
  'pages:Condition?clinical-status=resolved&subject:Patient.gender=male&_count=50',
];
/** The searches timed: those whose text holds `--only`'s, or all. */
const SEARCHES = EVERY_SEARCH.filter((search) => values.only === undefined || search.includes(values.only));
const bare = (search: string) => search.replace(/^(export|pages):/, '').replace(/^\[[^\]]*\]/, '');
const typeOf = (search: string) => (bare(search).includes('?') ? bare(search).slice(0, bare(search).indexOf('?')) : 'Condition');
const queryOf = (search: string) => (bare(search).includes('?') ? bare(search).slice(bare(search).indexOf('?') + 1) : bare(search));
/** The patient of a `[id]` search's compartment condition. */
const compartmentOf = (search: string) => /^\[([^\]]*)\]/.exec(search)?.[1];

type Json = Record<string, unknown>;

interface Store extends BenchStore {
  resources: BenchStore['resources'] & {
    snapshot(tenant: string, q: Json): Promise<{ lines: Uint8Array; count: number; next: number | null }>;
  };
}

const condition = (i: number, size: number) => ({
  resourceType: 'Condition', id: `c${String((i * 7919) % size).padStart(6, '0')}`, subject: { reference: `Patient/p${i % PATIENTS}` },
  clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: i % 3 ? 'active' : 'resolved' }] },
  ...(!UNDATED.includes(i) && { onsetDateTime: new Date(Date.parse('2020-01-01T00:00:00Z') + i * 3_600_000).toISOString() }),
  ...(!UNCODED.includes(i) && { code: { coding: [{ system: 'http://snomed.info/sct', code: `${38341003 + (i % 50)}` }] } }),
  verificationStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-ver-status', code: i % 500 === 7 ? 'refuted' : 'confirmed' }] },
});

interface Database {
  /** A store of checkout `dir` on the database. */
  open(dir: string): Promise<Store>;
  drop(): Promise<void>;
}

async function database(dir: string, kind: StoreKind, size: number): Promise<Database> {
  const db = await benchDatabase<Store>(dir, kind);
  const open = async (at: string): Promise<Store> => {
    if (at === dir) return db.open();
    if (kind === 'postgres') return (await import(`${at}/src/store/postgres/index.ts`)).createPostgresStore(db.url);
    return (await import(`${at}/src/store/sqlite/index.ts`)).createSqliteStore(db.url);
  };
  const { firstVersions } = await import(`${dir}/test/helpers/versions.ts`);
  const store = await open(dir);
  await store.migrate();
  for (let i = 0; i < size; i += 500) {
    const batch = Array.from({ length: Math.min(500, size - i) }, (_, j) => condition(i + j, size));
    await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(batch)));
  }
  const patients = Array.from({ length: PATIENTS }, (_, i) => ({ resourceType: 'Patient', id: `p${i}`, gender: i % 2 ? 'male' : 'female' }));
  await store.resources.write(TENANT, (w) => w.insertNew(firstVersions(patients)));
  if (values.analyze) await store.resources.indexing.analyze();
  await store.close();
  return { open, drop: db.drop };
}

const dirs = positionals.map((d) => resolve(d));
const { compileSearch } = await import(`${dirs[0]}/src/fhir/search.ts`);
const compiled = (search: string): Json => {
  const c = compileSearch(typeOf(search), new URLSearchParams(queryOf(search)), true);
  const patient = compartmentOf(search);
  // `_offset`, which the route applies (searchAtOffset), as the store's offset.
  const offset = new URLSearchParams(queryOf(search)).get('_offset');
  return { ...c.query, ...(offset !== null && { offset: Number(offset) }), where: patient === undefined ? c.pending : [...c.pending, { kind: 'compartment', patient }] };
};
/** A search's answer: its ids, or an export's, page by page (1,000 a page, as the export reads them). */
async function answer(store: Store, search: string): Promise<string> {
  if (search.startsWith('pages:')) {
    const q = compiled(search);
    const ids: string[] = [];
    for (let page = 0; page < PAGES; page++) {
      const last = ids.at(-1);
      const found = await store.resources.search(TENANT, { ...q, ...(last !== undefined && { after: { id: last, lastUpdated: 0 } }) });
      ids.push(...found.map((v) => v.id));
      if (found.length < (q.count as number)) break;
    }
    return ids.join();
  }
  if (!search.startsWith('export:')) return (await store.resources.search(TENANT, compiled(search))).map((v) => v.id).join();
  const q = compiled(search);
  const ids: string[] = [];
  let after: number | undefined;
  for (;;) {
    const page = await store.resources.snapshot(TENANT, { type: q.type, at: Date.now(), filters: [q.where], limit: 1000, ...(after !== undefined && { after }) });
    ids.push(...new TextDecoder().decode(page.lines).split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { id: string }).id));
    if (page.next === null) return ids.sort().join();
    after = page.next;
  }
}
/** The pages a `pages:` search reads. */
const PAGES = 10;
const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor((v.length - 1) / 2)]!;
for (const kind of storeKinds(values.store)) {
  for (const size of sizes) {
    const db = await database(dirs[0]!, kind, size);
    const stores = await Promise.all(dirs.map((d) => db.open(d)));
    const times = SEARCHES.map(() => dirs.map(() => [] as number[]));
    try {
      for (let round = 0; round < rounds + 1; round++) {
        for (const [k, query] of SEARCHES.entries()) {
          const order = round % 2 ? [...dirs.keys()].reverse() : [...dirs.keys()];
          const answers: string[] = [];
          for (const i of order) {
            const start = performance.now();
            answers[i] = await answer(stores[i]!, query);
            if (round >= 1) times[k]![i]!.push(performance.now() - start);
          }
          if (answers.length === 2 && answers[0] !== answers[1]) throw new Error(`${kind}, ${query}: the checkouts answer differently`);
        }
      }
    } finally {
      for (const s of stores) await s.close();
      await db.drop();
    }
    console.log(`\n### ${kind}, ${size.toLocaleString('en')} Conditions, ${rounds} rounds${values.analyze ? ', analysed' : ', no statistics'} (median ms${dirs.length === 2 ? "; B / A: median of the rounds' ratios" : ''})\n`);
    console.log(`| Search | ${dirs.map((d, i) => `${'AB'[i]}: ${d}`).join(' | ')} |${dirs.length === 2 ? ' B / A |' : ''}`);
    console.log(`|---|${dirs.map(() => '---:').join('|')}|${dirs.length === 2 ? '---:|' : ''}`);
    for (const [k, query] of SEARCHES.entries()) {
      const cells = times[k]!.map((t) => median(t).toFixed(1));
      const ratio = dirs.length === 2 ? ` ${median(times[k]![1]!.map((b, r) => b / times[k]![0]![r]!)).toFixed(3)} |` : '';
      console.log(`| \`${query.replaceAll('|', '\\|')}\` | ${cells.join(' | ')} |${ratio}`);
    }
  }
}
process.exit(0);
