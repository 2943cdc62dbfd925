/**
 * A transaction of conditional creates by family and given name (`ifNoneExist: family=F&given=G`), as an
 * import of Patients keyed by name sends, or with `--by identifier` by identifier (`identifier=urn:x|idN`), through
 * the in-process app of one or two checkouts, in turn (wall time: the database's work counts):
 *
 *   bun bench/conditional-creates.ts <checkout A> [<checkout B>] [--entries 1000] [--rounds 3] [--store sqlite|postgres|both] [--crossed 0] [--by name|identifier]
 *
 * Each round, each side gets a fresh database (SQLite file, or a PostgreSQL database made from the test
 * helpers' migrated template) holding `--entries` / 2 of the Patients already, then one transaction of
 * `--entries` POSTs: half find a stored Patient (200), half create (201). With `--crossed k`, the database holds instead,
 * for each entry's given name, k Patients of it under other families of the Bundle (10 families): every entry creates,
 * and the superset its searches are searched again by at the commit finds k others for each (bundle-held-searches.ts:
 * past 100, the `or` of the searches). Both sides' responses must agree
 * (statuses, and the created count). Prints each round's ms and this process's CPU ms (user and system: SQLite's work,
 * not PostgreSQL's, which runs in its server; steadier than wall time on a machine others load), and the median
 * ratios B / A of both.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    entries: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '3' }, store: { type: 'string', default: 'both' }, crossed: { type: 'string', default: '0' },
    by: { type: 'string', default: 'name' },
  },
});
// At most 9 other families of 10, so that no stored Patient meets its own given name's condition.
const badBy = !['name', 'identifier'].includes(values.by) || (values.by === 'identifier' && values.crossed !== '0');
if (positionals.length < 1 || positionals.length > 2 || !['sqlite', 'postgres', 'both'].includes(values.store) || !(Number(values.crossed) >= 0 && Number(values.crossed) <= 9) || badBy) {
  console.error('usage: bun bench/conditional-creates.ts <checkout A> [<checkout B>] [--entries 1000] [--rounds 3] [--store sqlite|postgres|both] [--crossed 0] [--by name|identifier] (--crossed with --by name only)');
  process.exit(2);
}
const entries = Number(values.entries);
const rounds = Number(values.rounds);
const kinds = storeKinds(values.store);
const crossed = Number(values.crossed);
const families = crossed > 0 ? 10 : 97;

/** The `i`th entry's Patient, of the `f`th family (its own by default). */
const patient = (i: number, f = i) => ({
  resourceType: 'Patient', name: [{ family: `Family${f % families}`, given: [`Given${i}x`] }], gender: i % 2 ? 'male' : 'female',
  ...(values.by === 'identifier' ? { identifier: [{ system: 'urn:x', value: `id${i}` }] } : {}),
});
/** The `i`th entry's condition. */
const condition = (i: number) => (values.by === 'identifier' ? `identifier=urn:x|id${i}` : `family=Family${i % families}&given=Given${i}x`);
/** What the database holds before the transaction: half the entries' Patients, or `crossed` of each given name under other families. */
const stored = () => crossed > 0
  ? Array.from({ length: entries * crossed }, (_, k) => patient(Math.floor(k / crossed), Math.floor(k / crossed) + 1 + (k % crossed)))
  : Array.from({ length: entries / 2 }, (_, j) => patient(2 * j));

function bundle(): unknown {
  return {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: Array.from({ length: entries }, (_, i) => ({
      fullUrl: `urn:uuid:${crypto.randomUUID()}`,
      resource: patient(i),
      request: { method: 'POST', url: 'Patient', ifNoneExist: condition(i) },
    })),
  };
}

/** One side's transaction on a fresh database: [ms, statuses, CPU ms]. */
async function once(dir: string, kind: StoreKind): Promise<[number, string, number]> {
  const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
  const db = await benchDatabase(dir, kind);
  const t = await createTestApp({ store: db.open(), env: { CINDER_RATE_LIMITS: 'off' } });
  try {
    const token: string = await t.token();
    const fhir: string = t.fhir();
    const seed = { resourceType: 'Bundle', type: 'batch', entry: stored().map((resource) => ({ resource, request: { method: 'POST', url: 'Patient' } })) };
    const seeded: Response = await t.request(fhir, fhirInit(token, 'POST', seed));
    if (seeded.status !== 200) throw new Error(`${dir}: seed ${seeded.status} ${await seeded.text()}`);
    const body = JSON.stringify(bundle());
    const cpu = process.cpuUsage();
    const started = performance.now();
    const res: Response = await t.request(fhir, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body });
    const text = await res.text();
    const ms = performance.now() - started;
    const used = process.cpuUsage(cpu);
    if (res.status !== 200) throw new Error(`${dir}: ${res.status} ${text.slice(0, 500)}`);
    const statuses = (JSON.parse(text) as { entry: { response: { status: string } }[] }).entry.map((e) => e.response.status.split(' ')[0]).join(',');
    return [ms, statuses, (used.user + used.system) / 1000];
  } finally {
    await t.close();
    await db.drop();
  }
}

const dirs = positionals.map((p) => resolve(p));
for (const kind of kinds) {
  const ratios: number[] = [];
  const cpuRatios: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? dirs : [...dirs].reverse();
    const got = new Map<string, [number, string, number]>();
    for (const dir of order) got.set(dir, await once(dir, kind));
    const [a, b] = dirs.map((d) => got.get(d)!);
    if (b && a![1] !== b[1]) throw new Error(`${kind}: the checkouts answer differently`);
    console.log(`${kind} round ${r + 1}: ${dirs.map((d) => `${got.get(d)![0].toFixed(0)} ms (CPU ${got.get(d)![2].toFixed(0)} ms)`).join('  ')}`);
    if (b) ratios.push(b[0] / a![0]);
    if (b) cpuRatios.push(b[2] / a![2]);
  }
  const median = (xs: number[]) => xs.sort((x, y) => x - y)[xs.length >> 1]!.toFixed(3);
  if (ratios.length) console.log(`${kind}: median B / A ${median(ratios)}, of CPU ${median(cpuRatios)}`);
}
