/**
 * `_revinclude` of canonical resources (Questionnaires revincluding the QuestionnaireResponses that name their `url`
 * or `url|version`) of two checkouts in one process, in turn (wall time, as the database's work counts too):
 *
 *   bun bench/canonical-revinclude-ab.ts <checkout A> <checkout B> [--urls N] [--rounds N] [--store sqlite|postgres|both] [--answers-differ]
 *
 * Each checkout (a git worktree with its dependencies) gets its own in-process app (its `test/helpers/app.ts`) on a
 * database of its own (bench/lib/databases.ts), holding the same resources written by id through the store's bulk
 * insert and analysed: `urls` canonical urls with three Questionnaire versions each (0, 1, 2) and as many
 * QuestionnaireResponses, half naming `url|version`, half the url alone. Each round asks every scenario on A then B
 * (B then A on odd rounds), after one warm-up round, and checks that both answer the same entries. Prints the median
 * ms and the median of the rounds' ratios B / A. `--answers-differ` skips that check, for a checkout before a change of
 * what is revincluded (the commit before 6d77b0cb took every version of a url).
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { benchDatabase, storeKinds, type StoreKind } from './lib/databases.ts';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { rounds: { type: 'string', default: '21' }, urls: { type: 'string', default: '100' }, store: { type: 'string', default: 'both' }, 'answers-differ': { type: 'boolean', default: false } },
});
if (positionals.length !== 2 || !['sqlite', 'postgres', 'both'].includes(values.store)) {
  console.error('usage: bun bench/canonical-revinclude-ab.ts <checkout A> <checkout B> [--urls N] [--rounds N] [--store sqlite|postgres|both] [--answers-differ]');
  process.exit(2);
}
const rounds = Number(values.rounds);
const urls = Number(values.urls);

type Json = Record<string, any>;

const SCENARIOS = [10, 100, 300].map((n) => ({
  name: `\`Questionnaire?_count=${n}&_revinclude=QuestionnaireResponse:questionnaire\``,
  query: `Questionnaire?_count=${n}&_sort=_id&_revinclude=QuestionnaireResponse:questionnaire`,
}));

/** The resources: three versions of each url, and one response to each Questionnaire (`url|version` or `url`). */
function resources(): Json[] {
  const out: Json[] = [];
  for (let u = 0; u < urls; u++) {
    const url = `http://example.org/Questionnaire/q${u}`;
    for (let v = 0; v < 3; v++) {
      const id = `q${u}-${v}`;
      out.push({ resourceType: 'Questionnaire', id, url, version: String(v), status: 'active' });
      out.push({ resourceType: 'QuestionnaireResponse', id: `r${u}-${v}`, status: 'completed', questionnaire: (u + v) % 2 ? `${url}|${v}` : url });
    }
  }
  return out;
}

interface Side {
  ask(query: string): Promise<{ ms: number; seen: string[] }>;
  close(): Promise<void>;
}

async function side(dir: string, kind: StoreKind): Promise<Side> {
  const { createTestApp, fhirInit } = await import(`${dir}/test/helpers/app.ts`);
  const { firstVersions } = await import(`${dir}/test/helpers/versions.ts`);
  const db = await benchDatabase(dir, kind);
  const t = await createTestApp({ env: { CINDER_RATE_LIMITS: 'off' }, store: db.open() });
  const token = await t.token();
  await t.store.resources.write('t1', (w: any) => w.insertNew(firstVersions(resources())));
  await t.store.resources.indexing.analyze();
  return {
    async ask(query) {
      const start = performance.now();
      const res: Response = await t.request(`${t.fhir()}/${query}`, fhirInit(token));
      const b = (await res.json()) as Json;
      const ms = performance.now() - start;
      if (res.status !== 200) throw new Error(`${dir}: ${query}: ${res.status} ${JSON.stringify(b).slice(0, 500)}`);
      return { ms, seen: (b.entry ?? []).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort() };
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
    const times = sides.map(() => SCENARIOS.map(() => [] as number[]));
    for (let round = 0; round <= rounds; round++) {
      for (const [k, s] of SCENARIOS.entries()) {
        const answers: { ms: number; seen: string[] }[] = [];
        for (const i of round % 2 ? [1, 0] : [0, 1]) {
          answers[i] = await sides[i]!.ask(s.query);
          if (round > 0) times[i]![k]!.push(answers[i]!.ms);
        }
        if (!values['answers-differ'] && JSON.stringify(answers[0]!.seen) !== JSON.stringify(answers[1]!.seen)) throw new Error(`${s.name}: the checkouts answer differently`);
      }
    }
    console.log(`\n### ${kind}, ${urls * 3} Questionnaires and as many responses, ${rounds} rounds (median ms; B / A: median of the rounds' ratios)\n`);
    console.log('| search | A | B | B / A |');
    console.log('|---|---:|---:|---:|');
    for (const [k, s] of SCENARIOS.entries()) {
      const [a, b] = [times[0]![k]!, times[1]![k]!];
      console.log(`| ${s.name} | ${median(a).toFixed(1)} | ${median(b).toFixed(1)} | ${median(b.map((v, r) => v / a[r]!)).toFixed(3)} |`);
    }
  } finally {
    for (const s of sides) await s.close();
  }
}
process.exit(0);
