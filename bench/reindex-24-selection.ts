/**
 * The reindex to index model 24: which resources its selection rebuilds, what selecting costs, and what rebuilding
 * the ones it need not costs, in one run on SQLite. A: the text test of the fifty-seventh session (`"url":` and
 * `"version":` anywhere, or a string of 600 characters before a literal `|`); B: src/fhir/reindex.ts touchedSince(23).
 *
 *   bun bench/reindex-24-selection.ts [--n 5000] [--rounds 5]
 *
 * Bodies: n Observations with a narrative, an extension's url and a Coding's version (selected by A, not B); n
 * Patients with a narrative (neither); n/10 Questionnaires with a url and version (both). Prints the resources each
 * selects, the mean ms of selecting over all of them (each side's rounds after one warm-up), and the mean ms of
 * rebuilding (parse, index, replace the model's tables in transactions of 1,000) the ones A selects and B does not.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createTenant } from '../src/auth/admin.ts';
import { compartmentsOf, storedIndex } from '../src/fhir/indexer.ts';
import { tablesSince, touchedSince } from '../src/fhir/reindex.ts';
import { stampHead, stampTail, type Resource } from '../src/fhir/resource.ts';
import { createSqliteStore } from '../src/store/sqlite/index.ts';

const { values } = parseArgs({ options: { n: { type: 'string', default: '5000' }, rounds: { type: 'string', default: '5' } } });
const N = Number(values.n);
const ROUNDS = Number(values.rounds);
const A = (content: string) => (content.includes('"url":') && content.includes('"version":')) || /"[^"|]{600,}\|[^"]*"/.test(content);
const B = touchedSince(23);

const div = (i: number) => `<div xmlns="http://www.w3.org/1999/xhtml"><p>Record ${i}: ${'measured on the ward. '.repeat(40)}</p></div>`;
const bodies: Record<string, Record<string, unknown>[]> = {
  coded: Array.from({ length: N }, (_, i) => ({
    resourceType: 'Observation', id: `o${i}`, text: { status: 'generated', div: div(i) }, status: 'final',
    extension: [{ url: 'http://example.org/fhir/StructureDefinition/note', valueString: 'n' }],
    code: { coding: [{ system: 'http://loinc.org', version: '2.74', code: '718-7' }] }, subject: { reference: `Patient/p${i}` },
  })),
  plain: Array.from({ length: N }, (_, i) => ({ resourceType: 'Patient', id: `p${i}`, text: { status: 'generated', div: div(i) }, name: [{ family: `F${i}` }], gender: 'female' })),
  canonical: Array.from({ length: N / 10 }, (_, i) => ({ resourceType: 'Questionnaire', id: `q${i}`, url: `http://forms.example/Questionnaire/q${i}`, version: '1', status: 'active' })),
};
const texts = Object.fromEntries(Object.entries(bodies).map(([k, rs]) => [k, rs.map((r) => stampHead(r.resourceType as string, r.id as string, 1, 0) + stampTail(r as unknown as Resource))]));
const all = Object.values(texts).flat();

const select = (test: (c: string) => boolean, contents: string[]) => {
  for (const c of contents) test(c);
  let ms = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const start = performance.now();
    for (const c of contents) test(c);
    ms += performance.now() - start;
  }
  return +(ms / ROUNDS).toFixed(1);
};

const dir = mkdtempSync(join(tmpdir(), 'reindex-24-'));
const store = createSqliteStore(join(dir, 'cinder.db'));
try {
  await store.migrate();
  await createTenant(store, { now: () => 0 }, 't1');
  const rowsOf = (c: string) => {
    const r = JSON.parse(c) as Record<string, unknown>;
    return { r, index: storedIndex(r), compartments: compartmentsOf(r) };
  };
  await store.resources.write('t1', async (w) => {
    for (const c of all) {
      const { r, index, compartments } = rowsOf(c);
      await w.put({ type: r.resourceType as string, id: r.id as string, versionId: 1, lastUpdated: 0, deleted: false, content: c, method: 'PUT', index, compartments });
    }
  });
  const extra = all.filter((c) => A(c) && !B(c));
  let rebuild = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const start = performance.now();
    for (let i = 0; i < extra.length; i += 1000) {
      const items = extra.slice(i, i + 1000).map((c) => {
        const { r: res, index, compartments } = rowsOf(c);
        return { type: res.resourceType as string, id: res.id as string, versionId: 1, index, compartments };
      });
      await store.resources.write('t1', (w) => w.replaceIndex(items, tablesSince(23)));
    }
    rebuild += performance.now() - start;
  }
  console.log(JSON.stringify({
    resources: all.length,
    selected: { A: all.filter(A).length, B: all.filter(B).length, missedByA: all.filter((c) => B(c) && !A(c)).length },
    selectMs: { A: select(A, all), B: select(B, all) },
    selectPlainMs: { A: select(A, texts.plain!), B: select(B, texts.plain!) },
    rebuildSelectedByAAloneMs: +(rebuild / ROUNDS).toFixed(1),
  }));
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
