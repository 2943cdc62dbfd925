/**
 * Type-level `Patient/$everything` of one or two checkouts in one process, in turn (wall time, as the
 * database's work counts too):
 *
 *   bun bench/everything-ab.ts <checkout A> [<checkout B>] [--rounds N] [--store sqlite|postgres|both] [--only <part of a name>]
 *
 * Each checkout (a directory such as a git worktree with its dependencies) gets its own in-process app
 * (its `test/helpers/app.ts`) on a database of its own (bench/lib/databases.ts: a SQLite file, or a PostgreSQL
 * database on the test server, dropped at the end). Tenant `t1` holds 1,500 Patients and
 * nothing else; tenant `t2` 300 generated patients (bench/lib, `perPatientScale` 0.2: about 22
 * resources each over 8 types, 6,734 in all), written by id so both checkouts hold the same. Each
 * round times every scenario (and one patient's `Patient/{id}/$everything`) on A then B (B then A on odd rounds), after one warm-up round, and checks
 * that both answer the same entries (and `total`, for the counts of `_count=0`). Prints the median ms of each and the ratio B / A per round's pair.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';
import { generatePatients } from './lib/generator.ts';
import { pairedScenarios } from './lib/paired.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '5' }, store: { type: 'string', default: 'both' }, only: { type: 'string' } },
});
if (positionals.length < 1 || positionals.length > 2 || !['sqlite', 'postgres', 'both'].includes(values.store)) {
  console.error('usage: bun bench/everything-ab.ts <checkout A> [<checkout B>] [--rounds N] [--store sqlite|postgres|both] [--only <part of a scenario\'s name>]');
  process.exit(2);
}
const rounds = Number(values.rounds);

type Json = Record<string, any>;

interface Scenario {
  name: string;
  tenant: string;
  query: string;
  /** Every page (following `next`), or the first alone. */
  allPages: boolean;
  /** The instance level, of the tenant's first Patient. */
  instance?: true;
}

const SCENARIOS: Scenario[] = [
  { name: '1,500 empty patients, `_count=1000`, every page', tenant: 't1', query: '_count=1000', allPages: true },
  { name: '1,500 empty patients, default count, first page', tenant: 't1', query: '', allPages: false },
  { name: '300 patients × 22, `_count=1000`, every page', tenant: 't2', query: '_count=1000', allPages: true },
  { name: '300 patients × 22, default count, first page', tenant: 't2', query: '', allPages: false },
  { name: '300 patients × 22, default count, every page', tenant: 't2', query: '', allPages: true },
  { name: '300 patients × 22, `_type=Condition&_count=1000`, every page', tenant: 't2', query: '_type=Condition&_count=1000', allPages: true },
  { name: 'one patient of 22, `Patient/{id}/$everything`', tenant: 't2', query: '', allPages: true, instance: true },
  { name: '1,500 empty patients, count (`_count=0`)', tenant: 't1', query: '_count=0', allPages: false },
  { name: '300 patients × 22, count (`_count=0`)', tenant: 't2', query: '_count=0', allPages: false },
  { name: '300 patients × 22, `_type=Condition&_count=0`', tenant: 't2', query: '_type=Condition&_count=0', allPages: false },
  { name: 'one patient of 22, count (`Patient/{id}/$everything?_count=0`)', tenant: 't2', query: '_count=0', allPages: false, instance: true },
];

interface Side {
  label: string;
  /** Walks a scenario; returns its entries (`mode:Type/id`) for the comparison. */
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
  for (let i = 0; i < 1500; i += 250) {
    await post('t1', Array.from({ length: 250 }, (_, j) => ({ resourceType: 'Patient', id: `e${String(i + j).padStart(5, '0')}`, gender: 'other' })));
  }
  let batch: Json[] = [];
  for (const r of generatePatients({ patients: 300, seed: 1, perPatientScale: 0.2 })) {
    // Each patient's record starts with its Patient: a batch ends before one, so references resolve.
    if (r.resourceType === 'Patient' && batch.length >= 200) (await post('t2', batch), (batch = []));
    batch.push(r as Json);
  }
  if (batch.length) await post('t2', batch);
  const first = (await (await t.request(`${t.fhir('t2')}/Patient?_count=1`, fhirInit(tokens.t2!))).json()) as Json;
  const patient: string = first.entry[0].resource.id;
  return {
    label: `${dir} (${kind})`,
    async run(s) {
      const seen: string[] = [];
      let next: string | undefined = `${t.fhir(s.tenant)}/Patient/${s.instance ? `${patient}/` : ''}$everything${s.query ? `?${s.query}` : ''}`;
      while (next) {
        const res: Response = await t.request(next, fhirInit(tokens[s.tenant]!));
        if (res.status !== 200) throw new Error(`${dir}: ${next}: ${res.status} ${(await res.text()).slice(0, 500)}`);
        const b = (await res.json()) as Json;
        seen.push(...(b.entry ?? []).map((e: Json) => `${e.search.mode}:${e.resource.resourceType}/${e.resource.id}`));
        if (b.total !== undefined) seen.push(`total:${b.total}`);
        next = s.allPages ? b.link.find((l: Json) => l.relation === 'next')?.url : undefined;
      }
      return seen;
    },
    async close() {
      await t.close();
      await db.drop();
    },
  };
}

for (const kind of storeKinds(values.store)) {
  const sides: Side[] = [];
  for (const dir of positionals) sides.push(await side(resolve(dir), kind));
  try {
    await pairedScenarios(kind, sides, SCENARIOS.filter((s) => values.only === undefined || s.name.includes(values.only)), rounds);
  } finally {
    for (const s of sides) await s.close();
  }
}
process.exit(0);
