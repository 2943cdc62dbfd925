/**
 * Issue #14's search mix (bench/lib/mix.ts) in one or two checkouts, in one process, in turn (wall time, one request at
 * a time, no sockets), on a database bench/search.ts (or bench/lib/dataset.ts) loaded already:
 *
 *   bun bench/mix-ab.ts <checkout A> [<checkout B>] [--sqlite FILE] [--postgres URL] [--rounds N] [--variants V] [--only LIST]
 *
 * Each checkout opens its own store on the same database (its `src/store/open.ts`) under its own in-process app
 * (its `test/helpers/app.ts`), with a client of the tenant `bench` allowed `system/*.read`. Each round runs V variants
 * of every scenario (default 100; the patient-scoped ones over the first 1,000 patients by id) on A then B (B then A
 * on odd rounds), after one warm-up round, and checks that both answer the same entries (full URLs in order, and
 * `total`). Prints the median ms per V requests of each and the median of the rounds' ratios B / A, per database.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { BENCH_TENANT } from './lib/dataset.ts';
import { MIX_SCENARIOS, type MixSample, type MixScenario } from './lib/mix.ts';
import { pairedScenarios, type PairedSide } from './lib/paired.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    sqlite: { type: 'string' }, postgres: { type: 'string' },
    rounds: { type: 'string', default: '5' }, variants: { type: 'string', default: '100' }, only: { type: 'string' },
  },
});
if (positionals.length < 1 || positionals.length > 2 || (!values.sqlite && !values.postgres)) {
  console.error('usage: bun bench/mix-ab.ts <checkout A> [<checkout B>] [--sqlite FILE] [--postgres URL] [--rounds N] [--variants V] [--only LIST]');
  process.exit(2);
}
const variants = Number(values.variants);
const only = values.only?.split(',').map(Number);
const scenarios = MIX_SCENARIOS.filter((_, n) => !only || only.includes(n + 1));

interface Bundle { total?: number; entry?: { fullUrl: string; search?: { mode?: string } }[] }

async function side(dir: string, url: string): Promise<PairedSide<MixScenario> & { close(): Promise<void> }> {
  const { createTestApp } = await import(`${dir}/test/helpers/app.ts`);
  const { openStore } = await import(`${dir}/src/store/open.ts`);
  const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' }, store: openStore(url) });
  const headers = { Authorization: `Bearer ${await t.tokenFor(BENCH_TENANT, ['system/*.read'])}` };
  const fhir: string = t.fhir(BENCH_TENANT);
  const get = async (query: string): Promise<Bundle> => {
    const res: Response = await t.request(`${fhir}/${query}`, { headers });
    if (res.status !== 200) throw new Error(`${dir}: ${query}: ${res.status} ${(await res.text()).slice(0, 500)}`);
    return (await res.json()) as Bundle;
  };
  const sample: MixSample = { patients: ((await get('Patient?_count=1000&_elements=id&_sort=_id')).entry ?? []).map((e) => e.fullUrl.split('/').pop()!) };
  if (!sample.patients.length) throw new Error(`${url}: the tenant ${BENCH_TENANT} has no patients`);
  return {
    label: `${dir}`,
    async run(s) {
      const answers: string[] = [];
      for (let i = 0; i < variants; i++) {
        const b = await get(s.query(i, sample));
        answers.push(`${b.total ?? ''}:${(b.entry ?? []).map((e) => e.fullUrl).join(',')}`);
      }
      return answers;
    },
    close: () => t.close(),
  };
}

const dirs = positionals.map((p) => resolve(p));
const databases: [string, string][] = [];
if (values.sqlite) databases.push(['SQLite', `sqlite:${resolve(values.sqlite)}`]);
if (values.postgres) databases.push(['PostgreSQL', values.postgres]);
for (const [kind, url] of databases) {
  const sides: (PairedSide<MixScenario> & { close(): Promise<void> })[] = [];
  try {
    for (const dir of dirs) sides.push(await side(dir, url));
    await pairedScenarios(`${kind}, ${variants} variants a scenario`, sides, scenarios, Number(values.rounds));
  } finally {
    for (const s of sides) await s.close();
  }
}
process.exit(0);
