/**
 * Later pages of a search (pages 2 to 5, `_count=50`) of one or two checkouts in one process, in turn (wall time):
 *
 *   bun bench/paging-pinned-ab.ts <checkout A> [<checkout B>] [--rounds N] [--store sqlite|postgres|both]
 *
 * Each checkout gets its own in-process app on a database of its own (bench/lib/databases.ts). Tenant `t1` holds
 * 10,000 Patients written in id order (`p00000`...), every other one female. Each scenario's second page is
 * linked from a first page read once at set-up; the "changed since" scenarios' first pages are read before 200
 * Patients in the middle (`p05000`-`p05199`, past the fifth page in each order; renamed `Changed`, which moves them
 * to the end of `_sort=family`) are updated, so that a checkout
 * that reads later pages as of the first page (src/fhir/search-pin.ts) reads their 200 versions each page, and
 * both checkouts answer the same ids. Each round times every scenario on A then B (B then A on odd rounds), after
 * one warm-up round (bench/lib/paired.ts).
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';
import { pairedCheckouts } from './lib/paired.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '5' }, store: { type: 'string', default: 'both' } },
});
if (positionals.length < 1 || positionals.length > 2 || !['sqlite', 'postgres', 'both'].includes(values.store)) {
  console.error('usage: bun bench/paging-pinned-ab.ts <checkout A> [<checkout B>] [--rounds N] [--store sqlite|postgres|both]');
  process.exit(2);
}
const rounds = Number(values.rounds);

type Json = Record<string, any>;

interface Scenario {
  name: string;
  query: string;
  /** The first page is read before the 200 updates. */
  changed: boolean;
}

const SCENARIOS: Scenario[] = [
  { name: '`Patient?_count=50` (id order)', query: 'Patient?_count=50', changed: false },
  { name: '`Patient?_sort=-_lastUpdated&_count=50`', query: 'Patient?_sort=-_lastUpdated&_count=50', changed: false },
  { name: '`Patient?gender=female&_count=50`', query: 'Patient?gender=female&_count=50', changed: false },
  { name: '`Patient?gender=female&_sort=-_lastUpdated&_count=50`', query: 'Patient?gender=female&_sort=-_lastUpdated&_count=50', changed: false },
  { name: '`Patient?_count=50`, 200 updated since page 1', query: 'Patient?_count=50', changed: true },
  { name: '`Patient?gender=female&_sort=-_lastUpdated&_count=50`, 200 updated since page 1', query: 'Patient?gender=female&_sort=-_lastUpdated&_count=50', changed: true },
  { name: '`Patient?_sort=family&_count=50`', query: 'Patient?_sort=family&_count=50', changed: false },
  { name: '`Patient?_sort=family&_count=50`, 200 updated since page 1', query: 'Patient?_sort=family&_count=50', changed: true },
];

const PATIENTS = 10_000;
const id = (i: number) => `p${String(i).padStart(5, '0')}`;
const patient = (i: number, family = 'Bench') => ({ resourceType: 'Patient', id: id(i), gender: i % 2 ? 'male' : 'female', name: [{ family }] });

interface Side {
  label: string;
  run(s: Scenario): Promise<string[]>;
  close(): Promise<void>;
}

async function side(dir: string, kind: StoreKind): Promise<Side> {
  const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
  const db = await benchDatabase(dir, kind);
  const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' }, store: db.open() });
  const token: string = await t.token();
  const post = async (entries: Json[]) => {
    const body = { resourceType: 'Bundle', type: 'transaction', entry: entries.map((resource) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } })) };
    const res: Response = await t.request(t.fhir('t1'), fhirInit(token, 'POST', body));
    if (res.status !== 200) throw new Error(`${dir}: load: ${res.status} ${(await res.text()).slice(0, 500)}`);
  };
  for (let i = 0; i < PATIENTS; i += 250) await post(Array.from({ length: 250 }, (_, j) => patient(i + j)));
  const get = async (url: string): Promise<Json> => {
    const res: Response = await t.request(url, fhirInit(token));
    if (res.status !== 200) throw new Error(`${dir}: ${url}: ${res.status} ${(await res.text()).slice(0, 500)}`);
    return (await res.json()) as Json;
  };
  const second = async (query: string): Promise<string> => (await get(`${t.fhir('t1')}/${query}`)).link.find((l: Json) => l.relation === 'next').url;
  const nexts = new Map<Scenario, string>();
  for (const s of SCENARIOS) if (s.changed) nexts.set(s, await second(s.query));
  await Bun.sleep(5);
  for (let i = 5000; i < 5200; i += 100) await post(Array.from({ length: 100 }, (_, j) => patient(i + j, 'Changed')));
  await Bun.sleep(5);
  for (const s of SCENARIOS) if (!s.changed) nexts.set(s, await second(s.query));
  return {
    label: `${dir} (${kind})`,
    async run(s) {
      const seen: string[] = [];
      let next: string | undefined = nexts.get(s)!;
      for (let page = 2; page <= 5 && next; page++) {
        const b = await get(next);
        seen.push(...(b.entry ?? []).map((e: Json) => e.resource.id));
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
