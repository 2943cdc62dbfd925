/**
 * Type-level `Patient/$everything` over a large compartment (one Patient holding more records than a page sizes,
 * read type by type by the search engine) in one or two checkouts, in one process, in turn (wall time):
 *
 *   bun bench/everything-owners-ab.ts <checkout A> [<checkout B>] [--rounds N] [--store sqlite|postgres|both] [--kib K]
 *
 * Each checkout gets its own in-process app on a database of its own (bench/lib/databases.ts). Tenant `t1`: Patients
 * `aa` and `zz`, 1,100 Observations of `zz` of which every tenth names `aa` as its performer (in both compartments,
 * the match of `aa` alone at the type level); tenant `t2`: the same, each Observation with a note of K KiB (default
 * 64). Each round walks every page of `_type=Observation` at `_count=100` and at `_count=1000` on A then B (B then A on
 * odd rounds), after one warm-up round, and checks that both answer the same entries. Prints the median ms of each and
 * the median of the rounds' ratios B / A.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';
import { pairedCheckouts } from './lib/paired.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '5' }, store: { type: 'string', default: 'both' }, kib: { type: 'string', default: '64' } },
});
if (positionals.length < 1 || positionals.length > 2 || !['sqlite', 'postgres', 'both'].includes(values.store)) {
  console.error('usage: bun bench/everything-owners-ab.ts <checkout A> [<checkout B>] [--rounds N] [--store sqlite|postgres|both] [--kib K]');
  process.exit(2);
}
const rounds = Number(values.rounds);
const NOTE = 'x'.repeat(Number(values.kib) * 1024);
const ROWS = 1100;

type Json = Record<string, any>;
interface Scenario { name: string; tenant: string; count: number }
const SCENARIOS: Scenario[] = [
  { name: `${ROWS} small records, \`_count=100\``, tenant: 't1', count: 100 },
  { name: `${ROWS} small records, \`_count=1000\``, tenant: 't1', count: 1000 },
  { name: `${ROWS} records of ${values.kib} KiB, \`_count=100\``, tenant: 't2', count: 100 },
  { name: `${ROWS} records of ${values.kib} KiB, \`_count=1000\``, tenant: 't2', count: 1000 },
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
  const tokens: Record<string, string> = { t1: await t.token(), t2: await t.tokenFor('t2', ['system/*.*']) };
  const post = async (tenant: string, entries: Json[]) => {
    const body = { resourceType: 'Bundle', type: 'transaction', entry: entries.map((resource) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } })) };
    const res: Response = await t.request(t.fhir(tenant), fhirInit(tokens[tenant]!, 'POST', body));
    if (res.status !== 200) throw new Error(`${dir}: load: ${res.status} ${(await res.text()).slice(0, 500)}`);
  };
  for (const tenant of ['t1', 't2']) {
    await post(tenant, [{ resourceType: 'Patient', id: 'aa' }, { resourceType: 'Patient', id: 'zz' }]);
    for (let i = 0; i < ROWS; i += 100) {
      await post(tenant, Array.from({ length: 100 }, (_, j) => ({
        resourceType: 'Observation', id: `o${String(i + j).padStart(5, '0')}`, status: 'final', code: { text: 'weight' },
        subject: { reference: 'Patient/zz' }, ...((i + j) % 10 === 0 && { performer: [{ reference: 'Patient/aa' }] }),
        ...(tenant === 't2' && { note: [{ text: NOTE }] }),
      })));
    }
  }
  return {
    label: `${dir} (${kind})`,
    async run(s) {
      const seen: string[] = [];
      let next: string | undefined = `${t.fhir(s.tenant)}/Patient/$everything?_type=Observation&_count=${s.count}`;
      while (next) {
        const res: Response = await t.request(next, fhirInit(tokens[s.tenant]!));
        if (res.status !== 200) throw new Error(`${dir}: ${next}: ${res.status} ${(await res.text()).slice(0, 500)}`);
        const b = (await res.json()) as Json;
        seen.push(...(b.entry ?? []).map((e: Json) => `${e.search.mode}:${e.resource.resourceType}/${e.resource.id}`));
        next = b.link.find((l: Json) => l.relation === 'next')?.url;
      }
      return seen;
    },
    async close() {
      await t.close();
      await db.drop();
    },
  };
}

await pairedCheckouts(storeKinds(values.store), positionals.map((dir) => resolve(dir)), side, SCENARIOS, rounds);
process.exit(0);
