/**
 * Full-text search (`_text`, `_content`) folds case and accents as string search does (index model 23):
 * full case folding (`ß` as `ss`, `ﬁ` as `fi`, a final `ς` as `σ`) and the Latin letters whose mark does not
 * decompose and the ligatures (`ø` as `o`, `ł` as `l`, `æ` as `ae`), in the stored words and in the query's, on
 * both databases and in the in-memory matcher (a read under a SMART scope filter): `_content=soren` finds a
 * narrative reading "Søren". A database indexed by model 22, whose words were only lower-cased, is reindexed
 * from the resources holding such a character (as itself, a JSON escape or a narrative's character
 * reference), their words alone, by `reindex` (as `cinder serve` runs it) and by `cinder reindex`; a search
 * reading the words waits meanwhile (503, Retry-After), other searches answer.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, readsRowsBeingRebuilt, reindex, tablesSince, touchedSince, type Rebuilding } from '../../src/fhir/reindex.ts';
import { narrativeText, textWords } from '../../src/fhir/text-index.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { fhirClient, readableUnder, type FhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const XHTML = 'http://www.w3.org/1999/xhtml';
/** A Patient whose family name is one word and whose narrative says `narrative` (XHTML text). */
const patient = (id: string, family: string, narrative: string): Json => ({
  resourceType: 'Patient', id, text: { status: 'generated', div: `<div xmlns="${XHTML}">${narrative}</div>` }, name: [{ family }],
});

const DATA: Json[] = [
  patient('soren', 'Søren', 'Søren'),
  patient('strasse', 'Straße', 'Straße'),
  patient('odos', 'ΟΔΟΣ', 'ΟΔΟΣ'),
  patient('lukasz', 'Łukasz', 'ŁUKASZ'),
  patient('aesa', 'Æsa', 'æsa'),
  patient('fine', 'ﬁne', 'ﬁne'),
  // Only the narrative's character reference names the letter (`&#248;` is `ø`).
  patient('ref', 'Bjorn', 'Bj&#248;rn'),
  patient('plain', 'Soren', 'Soren'),
];
/** Written with JSON escapes (`\u00f8` for `ø`), as a client may send it. */
const ESCAPED = `{"resourceType":"Patient","id":"escaped","text":{"status":"generated","div":"<div xmlns=\\"${XHTML}\\">Bj\\u00f8rk</div>"},"name":[{"family":"Bj\\u00f8rk"}]}`;
const IDS = [...DATA.map((r) => r.id as string), 'escaped'].sort();

/** `_text` and `_content` values and the Patients each finds. */
const CASES: [string, string[]][] = [
  ['_content=soren', ['plain', 'soren']],
  ['_text=SØREN', ['plain', 'soren']],
  ['_content=sør*', ['plain', 'soren']],
  ['_text=strasse', ['strasse']],
  ['_content=STRASSE', ['strasse']],
  ['_text=straße', ['strasse']],
  // A medial sigma finds the final one: string search folds both to `σ`.
  ['_text=οδοσ', ['odos']],
  ['_content=ΟΔΟΣ', ['odos']],
  ['_content=lukasz', ['lukasz']],
  ['_text=aesa', ['aesa']],
  ['_text=ÆSA', ['aesa']],
  ['_content=fine', ['fine']],
  ['_text=bjorn', ['ref']],
  ['_content=bjørk', ['escaped']],
  ['_content=bjor*', ['escaped', 'ref']],
];

/** The words as model 22 wrote them: marks removed, lower case, nothing else folded. */
const model22Words = (s: string) => s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean).join(' ');

/** Rewrites every resource's words as model 22 wrote them, and records model 22 (their other rows as they are). */
async function asModel22(store: Store): Promise<number> {
  const page = await store.resources.indexing.page(0, 1000);
  await store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
    const resource = JSON.parse(r.content) as Json;
    const narrative = model22Words(narrativeText(resource.text.div));
    const index = storedIndex(resource);
    index.text = { narrative, content: `${narrative} ${model22Words(resource.name[0].family)}` };
    return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
  })));
  await store.resources.indexing.setState({ model: 22, after: 0 });
  return page.length;
}

const encode = (q: string) => q.replace(/=(.*)$/, (_, v: string) => `=${encodeURIComponent(v)}`);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`full-text folding on ${target.kind}`, () => {
    const fresh = async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      return store;
    };
    const load = async (api: FhirClient) => {
      for (const r of DATA) await api.put200(r);
      expect((await api.put('Patient/escaped', ESCAPED)).status).toBe(201);
    };
    const idsOf = async (api: FhirClient, q: string) => ((await api.search(`Patient?${encode(q)}`)).entry ?? []).map((e: Json) => e.resource.id as string).sort();

    test('stored words and query words fold as string search folds them, in SQL and in memory', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const api = fhirClient(t, await t.token());
        await load(api);
        for (const [q, expected] of CASES) {
          const found = await idsOf(api, q);
          const readable = await readableUnder(t, 'Patient', encode(q), IDS);
          expect({ q, found, readable }).toEqual({ q, found: expected, readable: expected });
        }
        // Differential: each family's word, as written, upper-cased and as string search folds it, by prefix: the
        // narratives a `_text` prefix finds are the Patients a `family` search finds.
        const families = [...DATA.map((r) => r.name[0].family as string), 'Bjørk'];
        for (const value of new Set(families.flatMap((f) => [f, f.toUpperCase(), f.toLowerCase(), f.slice(0, 2)]))) {
          const byFamily = await idsOf(api, `family=${value}`);
          const byText = await idsOf(api, `_text=${value}*`);
          expect({ value, byText }).toEqual({ value, byText: byFamily });
        }
      } finally {
        await t.close();
      }
    }, 60_000);

    test('a database indexed by model 22 waits on full-text searches, then is reindexed from the resources holding such a character, their words alone', async () => {
      let rebuilding: Rebuilding | undefined;
      const t = await createTestApp({ store: await fresh(), rebuilding: () => rebuilding });
      try {
        const api = fhirClient(t, await t.token());
        await load(api);
        const rows = await asModel22(t.store);
        // The string rows of `soren` taken away: a reindex of the words alone does not write them again.
        const soren = (await t.store.resources.indexing.page(0, 1000)).find((r) => r.id === 'soren')!;
        await t.store.resources.write('t1', (w) => w.replaceIndex([{ type: 'Patient', id: 'soren', versionId: soren.versionId, index: { tokens: [], strings: [], ranges: [], composites: [] }, compartments: [] }], ['search_string']));
        expect(await idsOf(api, '_content=soren')).toEqual(['plain']);
        expect(await idsOf(api, '_text=strasse')).toEqual([]);
        expect(await idsOf(api, 'family=soren')).toEqual(['plain']);

        // While it runs: a search reading the words waits; other searches, reads and writes answer.
        rebuilding = { from: 22, examined: 3 };
        for (const q of ['Patient?_content=soren', 'Patient?_text=bjorn&_summary=count', `Patient?family=soren&_content=${encodeURIComponent('(soren OR bjorn)')}`]) {
          const res = await api.get(q);
          expect({ q, status: res.status, retryAfter: res.headers.get('retry-after') }).toEqual({ q, status: 503, retryAfter: '30' });
          const outcome = (await res.json()) as Json;
          expect(outcome.resourceType).toBe('OperationOutcome');
          expect(outcome.issue[0].code).toBe('transient');
        }
        expect(await idsOf(api, 'family=bjorn')).toEqual(['ref']);
        expect((await api.get('Patient/soren')).status).toBe(200);
        rebuilding = undefined;

        const run = await reindex(t.store);
        // Every one but `plain`, whose text is ASCII.
        expect(run).toEqual({ ran: true, done: rows, rebuilt: rows - 1 });
        expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
        for (const [q, expected] of CASES) expect({ q, found: await idsOf(api, q) }).toEqual({ q, found: expected });
        // Its string rows were not written again (only the words were).
        expect(await idsOf(api, 'family=soren')).toEqual(['plain']);
      } finally {
        await t.close();
      }
    }, 60_000);

    test('cinder reindex --if-needed rebuilds the words of a model 22 database', async () => {
      const db = target.kind === 'sqlite' ? undefined : await target.migrated();
      const cli = createCliEnv(db ? { CINDER_DATABASE_URL: db.url, CINDER_BASE_URL: 'http://cinder.test' } : {});
      const open = () => (db ? db.open() : cli.store());
      try {
        expect((await cli.run(['tenant', 'create', 't1'])).code).toBe(0);
        const file = `${cli.dir}/p.ndjson`;
        await Bun.write(file, [...DATA.map((r) => JSON.stringify(r)), ESCAPED].join('\n') + '\n');
        expect((await cli.run(['import', '--tenant', 't1', file])).code).toBe(0);
        const store = open();
        const rows = await asModel22(store);
        await store.close();

        const run = await cli.run(['reindex', '--if-needed', '--json']);
        expect(run.code).toBe(0);
        expect(JSON.parse(run.stdout)).toMatchObject({ reindexed: rows - 1, examined: rows, ran: true });
        const t: TestApp = await createTestApp({ store: open() });
        try {
          const api = fhirClient(t, await t.token());
          expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
          for (const [q, expected] of CASES) expect({ q, found: await idsOf(api, q) }).toEqual({ q, found: expected });
        } finally {
          await t.close();
        }
      } finally {
        cli.close();
      }
    }, 60_000);
  });
}

describe('model 23', () => {
  test('touches every resource holding a character whose words it changed, raw, escaped or as a character reference, and no other', () => {
    // Model 22's words: marks removed, lower case.
    const since22 = touchedSince(22);
    const changed: string[] = [];
    for (let cp = 0x80; cp <= 0x10ffff; cp++) {
      if (cp >= 0xd800 && cp <= 0xdfff) continue;
      const c = String.fromCodePoint(cp);
      // At a word's end too: a capital sigma lower-cases to `ς` there.
      if (textWords(`x${c}y x${c}`).join(' ') === model22Words(`x${c}y x${c}`)) continue;
      changed.push(c);
      const hex = cp.toString(16).padStart(4, '0');
      expect({
        c,
        raw: since22(`{"resourceType":"Patient","name":[{"family":"x${c}y"}]}`),
        escaped: since22(`{"resourceType":"Patient","name":[{"family":"x\\u${hex}y"}]}`),
        decimal: since22(`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\\"${XHTML}\\">x&#${cp};y</div>"}}`),
        hex: since22(`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\\"${XHTML}\\">x&#x${hex};y</div>"}}`),
        ampersandEscaped: since22(`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\\"${XHTML}\\">x\\u0026#${cp};y</div>"}}`),
      }).toEqual({ c, raw: true, escaped: true, decimal: true, hex: true, ampersandEscaped: true });
    }
    // Model 10's 38 characters of full case folding, model 22's 36 letters and a capital sigma (`ς` at a word's end).
    expect(changed.length).toBe(75);
    expect(changed).toContain('Σ');
    expect(since22(`{"resourceType":"Patient","text":{"status":"generated","div":"<div xmlns=\\"${XHTML}\\">Müller &amp; José &#233; &#x4e2d;</div>"},"name":[{"family":"Müller"}]}`)).toBe(false);
    // Model 23 writes the words alone again (later models' tables aside); full-text conditions wait, others do not.
    expect(tablesSince(22)!.filter((t) => !tablesSince(23)!.includes(t))).toEqual(['search_text']);
    const query = (c: Json) => ({ type: 'Patient', where: [c], sort: [], count: 10 }) as never;
    expect(readsRowsBeingRebuilt(22, query({ kind: 'text', field: 'content', values: [[{ word: 'soren', prefix: false }]] }))).toBe(true);
    expect(readsRowsBeingRebuilt(22, query({ kind: 'string', param: 'family', values: [{ value: 'soren', match: 'prefix' }] }))).toBe(false);
  });
});
