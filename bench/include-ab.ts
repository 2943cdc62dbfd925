/**
 * `_include` from a page of matches (`Observation?_include=Observation:subject`) in one or two checkouts, in one
 * process, in turn (wall time):
 *
 *   bun bench/include-ab.ts <checkout A> [<checkout B>] [--rounds N] [--store sqlite|postgres|both] [--kib K]
 *
 * Each checkout gets its own in-process app on a database of its own (bench/lib/databases.ts). Tenant `t1`: 100
 * Patients and 300 Observations, each naming one Patient as its subject (three Observations a Patient); tenant `t2`:
 * the same, each Observation with a note of K KiB (default 32); tenant `t3`: the same, each with about K KiB of
 * components (structured, as a Bundle-size resource is). Each round reads the first page at `_count=50` and
 * `_count=300`, and the 100 Patients with their Observations revincluded (`_revinclude=Observation:subject`), on A
 * then B (B then A on odd rounds), after one warm-up round, and checks that both answer the same entries. Prints the median ms of each and the median of the rounds' ratios B / A.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';
import { pairedCheckouts } from './lib/paired.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '5' }, store: { type: 'string', default: 'both' }, kib: { type: 'string', default: '32' } },
});
if (positionals.length < 1 || positionals.length > 2 || !['sqlite', 'postgres', 'both'].includes(values.store)) {
  console.error('usage: bun bench/include-ab.ts <checkout A> [<checkout B>] [--rounds N] [--store sqlite|postgres|both] [--kib K]');
  process.exit(2);
}
const rounds = Number(values.rounds);
const NOTE = 'x'.repeat(Number(values.kib) * 1024);
/** Components of about K KiB in all (a structured record, as a Bundle-size resource is, parses slower than one string). */
const COMPONENTS = Array.from({ length: Math.ceil((Number(values.kib) * 1024) / 190) }, (_, k) => ({
  code: { coding: [{ system: 'http://loinc.org', code: `${k}-1`, display: `Component ${k}` }] },
  valueQuantity: { value: k * 1.5, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' },
}));
const ROWS = 300;
const PATIENTS = 100;

type Json = Record<string, any>;
interface Scenario { name: string; tenant: string; query: string }
const include = '_include=Observation:subject';
const SCENARIOS: Scenario[] = [
  { name: `50 small matches, \`${include}\``, tenant: 't1', query: `Observation?${include}&_count=50` },
  { name: `300 small matches, \`${include}\``, tenant: 't1', query: `Observation?${include}&_count=300` },
  { name: `50 matches of ${values.kib} KiB, \`${include}\``, tenant: 't2', query: `Observation?${include}&_count=50` },
  { name: `300 matches of ${values.kib} KiB, \`${include}\``, tenant: 't2', query: `Observation?${include}&_count=300` },
  { name: `50 matches of ${values.kib} KiB structured, \`${include}\``, tenant: 't3', query: `Observation?${include}&_count=50` },
  { name: `300 matches of ${values.kib} KiB structured, \`${include}\``, tenant: 't3', query: `Observation?${include}&_count=300` },
  { name: `100 Patients, 300 revincluded of ${values.kib} KiB`, tenant: 't2', query: 'Patient?_revinclude=Observation:subject&_count=100' },
  { name: `100 Patients, 300 revincluded of ${values.kib} KiB structured`, tenant: 't3', query: 'Patient?_revinclude=Observation:subject&_count=100' },
];

interface Side {
  label: string;
  run(s: Scenario): Promise<string[]>;
  close(): Promise<void>;
}

async function side(dir: string, kind: StoreKind): Promise<Side> {
  const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
  const db = await benchDatabase(dir, kind);
  const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' }, store: db.open() });
  const tokens: Record<string, string> = { t1: await t.token(), t2: await t.tokenFor('t2', ['system/*.*']), t3: await t.tokenFor('t3', ['system/*.*']) };
  const post = async (tenant: string, entries: Json[]) => {
    const body = { resourceType: 'Bundle', type: 'transaction', entry: entries.map((resource) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } })) };
    const res: Response = await t.request(t.fhir(tenant), fhirInit(tokens[tenant]!, 'POST', body));
    if (res.status !== 200) throw new Error(`${dir}: load: ${res.status} ${(await res.text()).slice(0, 500)}`);
  };
  for (const tenant of ['t1', 't2', 't3']) {
    await post(tenant, Array.from({ length: PATIENTS }, (_, i) => ({ resourceType: 'Patient', id: `p${String(i).padStart(3, '0')}` })));
    for (let i = 0; i < ROWS; i += 50) {
      await post(tenant, Array.from({ length: 50 }, (_, j) => ({
        resourceType: 'Observation', id: `o${String(i + j).padStart(5, '0')}`, status: 'final', code: { text: 'weight' },
        subject: { reference: `Patient/p${String((i + j) % PATIENTS).padStart(3, '0')}` },
        ...(tenant === 't2' && { note: [{ text: NOTE }] }),
        ...(tenant === 't3' && { component: COMPONENTS }),
      })));
    }
  }
  return {
    label: `${dir} (${kind})`,
    async run(s) {
      const res: Response = await t.request(`${t.fhir(s.tenant)}/${s.query}`, fhirInit(tokens[s.tenant]!));
      if (res.status !== 200) throw new Error(`${dir}: ${s.query}: ${res.status} ${(await res.text()).slice(0, 500)}`);
      // The entries by the stored texts' openings, not by parsing the whole Bundle: the client's parse is no part of the search.
      const text = await res.text();
      const entries = [...text.matchAll(/\{"resourceType":"(\w+)","id":"([^"]+)"/g)].slice(1).map((m) => `${m[1]}/${m[2]}`);
      if (!entries.some((e) => e.startsWith('Patient/')) || !entries.some((e) => e.startsWith('Observation/'))) throw new Error(`${dir}: ${s.query}: no Patient or no Observation`);
      return entries;
    },
    async close() {
      await t.close();
      await db.drop();
    },
  };
}

await pairedCheckouts(storeKinds(values.store), positionals.map((dir) => resolve(dir)), side, SCENARIOS, rounds);
process.exit(0);
