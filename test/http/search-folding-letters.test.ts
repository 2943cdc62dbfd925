/**
 * String search is accent-insensitive for the Latin letters whose mark Unicode does not decompose (a
 * stroke or bar: `ø`, `ł`, `đ`, `ħ`) and for the letters written as ligatures or runes (`æ`, `œ`, `ĳ`,
 * `ð`, `þ`), as Lucene's ASCII folding and ICU's Latin-ASCII transliteration fold them: `soren` finds
 * Søren, `lukasz` Łukasz, `aesa` Æsa, `gudrun` Guðrún, `thor` Þór, on both databases, by prefix, by
 * `:contains`, in a chain, in token `:text`, in `phonetic` (Soundex) and in the in-memory matcher (a read
 * under a SMART scope filter), while `:exact` compares the text as written; a differential against an
 * oracle written here. A database indexed by model 21, which kept those
 * letters, is reindexed from the resources holding one (as itself or as a JSON escape).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, readableUnder, type FhirClient, type Json } from '../helpers/fhir.ts';

const patient = (id: string, family: string, given?: string): Json => ({ resourceType: 'Patient', id, name: [{ family, ...(given ? { given: [given] } : {}) }] });

const DATA: Json[] = [
  patient('soren', 'Søren'),
  patient('oster', 'ØSTER'),
  patient('lukasz', 'Łukasz'),
  patient('djokic', 'Đoković'),
  patient('hajek', 'Ħajek'),
  patient('aesa', 'Æsa'),
  patient('oedipe', 'Œdipe'),
  patient('ijssel', 'ĳssel'),
  patient('gudrun', 'Guðrún'),
  patient('thor', 'Þór'),
  // `ǿ` decomposes to `ø` and an acute: both go.
  patient('acute', 'Sǿren'),
  patient('plain', 'Soren'),
  patient('other', 'Orsted', 'Ann'),
  { resourceType: 'Observation', id: 'o1', status: 'final', subject: { reference: 'Patient/soren' }, code: { coding: [{ system: 'urn:lab', code: 'x-1', display: 'Œdème' }] } },
];

/** `family` values and the Patients each finds. */
const CASES: [string, string[]][] = [
  ['soren', ['acute', 'plain', 'soren']],
  ['SØREN', ['acute', 'plain', 'soren']],
  ['sǿren', ['acute', 'plain', 'soren']],
  ['oster', ['oster']],
  ['øst', ['oster']],
  ['ø', ['oedipe', 'oster', 'other']],
  ['lukasz', ['lukasz']],
  ['ŁUKASZ', ['lukasz']],
  ['dokovic', ['djokic']],
  ['hajek', ['hajek']],
  ['aesa', ['aesa']],
  ['ÆSA', ['aesa']],
  ['oedipe', ['oedipe']],
  ['ijssel', ['ijssel']],
  ['gudrun', ['gudrun']],
  ['thor', ['thor']],
  ['family:contains=ster', ['oster']],
  ['family:contains=ukas', ['lukasz']],
  ['family:contains=dip', ['oedipe']],
  ['family:exact=Søren', ['soren']],
  ['family:exact=Soren', ['plain']],
  ['family:exact=søren', []],
];

/**
 * The differential's oracle, written apart from the indexer: marks NFD separates removed, lower case, `ß`
 * as `ss`, and the letters Lucene's ASCIIFoldingFilter folds for these: `ø` `o`, `ł` `l`, `đ` and `ð` `d`,
 * `ħ` `h`, `æ` `ae`, `œ` `oe`, `ĳ` `ij`, `þ` `th`.
 */
const ORACLE_LETTERS: [RegExp, string][] = [[/ø/g, 'o'], [/ł/g, 'l'], [/[đð]/g, 'd'], [/ħ/g, 'h'], [/æ/g, 'ae'], [/œ/g, 'oe'], [/ĳ/g, 'ij'], [/þ/g, 'th'], [/ß/g, 'ss']];
const oracleFold = (s: string) => ORACLE_LETTERS.reduce((t, [re, to]) => t.replace(re, to), s.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase());

const query = (value: string) => (value.startsWith('family:') ? value.replace(/=(.*)$/, (_, v: string) => `=${encodeURIComponent(v)}`) : `family=${encodeURIComponent(value)}`);

await eachStore((kind, fresh) => {
  describe(`string folding of letters without a decomposition on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (q: string) => ((await api.search(q)).entry ?? []).map((e: Json) => e.resource.id as string).sort();
    const patients = DATA.filter((x) => x.resourceType === 'Patient').map((r) => r.id as string);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('stroked letters, ligatures, eth and thorn fold to their letters, prefix and :contains, in SQL and in memory; :exact does not fold', async () => {
      for (const [value, expected] of CASES) {
        const found = await ids(`Patient?${query(value)}`);
        const readable = await readableUnder(t, 'Patient', query(value), patients);
        expect({ value, found, readable }).toEqual({ value, found: expected, readable: expected });
      }
    });

    test('differential: every prefix of every family, as written and folded, finds what the oracle finds, in SQL and in memory', async () => {
      const families = DATA.filter((x) => x.resourceType === 'Patient').map((r) => [r.id as string, r.name[0].family as string] as const);
      const values = new Set(families.flatMap(([, f]) => [1, 2, 3, 4].flatMap((n) => [f.slice(0, n), oracleFold(f).slice(0, n), f.toUpperCase().slice(0, n)])));
      for (const value of values) {
        const expected = families.filter(([, f]) => oracleFold(f).startsWith(oracleFold(value))).map(([id]) => id).sort();
        const found = await ids(`Patient?${query(value)}`);
        const readable = await readableUnder(t, 'Patient', query(value), patients);
        expect({ value, found, readable }).toEqual({ value, found: expected, readable: expected });
      }
    });

    test('phonetic (Soundex) reads those letters as the letters they fold to', async () => {
      // Łukasz is L220 as Lukasz is; Æsa A200 as Aesa; Þór T600 as Thor; Đoković D212 as Dokovic.
      expect(await ids('Patient?phonetic=lukasz')).toEqual(['lukasz']);
      expect(await ids('Patient?phonetic=aesa')).toEqual(['aesa']);
      expect(await ids('Patient?phonetic=thor')).toEqual(['thor']);
      expect(await ids('Patient?phonetic=dokovic')).toEqual(['djokic']);
      expect(await readableUnder(t, 'Patient', 'phonetic=lukasz', patients)).toEqual(['lukasz']);
    });

    test('name, a chain, _filter and token :text fold the same way', async () => {
      expect(await ids('Patient?name=soren')).toEqual(['acute', 'plain', 'soren']);
      expect(await ids('Observation?subject:Patient.family=soren')).toEqual(['o1']);
      expect(await ids(`Patient?_filter=${encodeURIComponent('family eq lukasz')}`)).toEqual(['lukasz']);
      expect(await ids('Observation?code:text=oedeme')).toEqual(['o1']);
    });

    test('a database indexed by model 21 is reindexed from its resources holding such a letter', async () => {
      // One written with JSON escapes, as a client may send it: `\u00f8` for `ø`.
      const escaped = await api.put('Patient/escaped', '{"resourceType":"Patient","id":"escaped","name":[{"family":"Bj\\u00f8rn"}]}');
      expect(escaped.status).toBe(201);
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 21 wrote them: those letters kept (accents removed, case folded).
      const model21 = (s: string) => s.normalize('NFD').replace(/[\u0300-\u036f]/g, '').toUpperCase().toLowerCase();
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const resource = JSON.parse(r.content) as Json;
        const index = storedIndex(resource);
        // (Model 21's Soundex dropped such a letter: Łukasz was U220.)
        index.strings = index.strings.map((e) => (e.param !== 'phonetic' ? { ...e, value: model21(e.exact) } : r.id === 'lukasz' ? { ...e, value: 'u220' } : e));
        index.tokens = index.tokens.map((e) => (e.display ? { ...e, display: model21(resource.code.coding[0].display) } : e));
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_index', 'search_string']));
      await t.store.resources.indexing.setState({ model: 21, after: 0 });
      expect(await ids('Patient?family=soren')).toEqual(['plain']);
      expect(await ids('Patient?family=bjorn')).toEqual([]);
      expect(await ids('Patient?phonetic=lukasz')).toEqual([]);

      const run = await reindex(t.store);
      // Those holding such a letter: the eleven Patients but plain and other, the escaped one, and o1.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 13 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [value, expected] of CASES) {
        expect({ value, found: await ids(`Patient?${query(value)}`) }).toEqual({ value, found: expected });
      }
      expect(await ids('Patient?family=bjorn')).toEqual(['escaped']);
      expect(await ids('Patient?phonetic=lukasz')).toEqual(['lukasz']);
      expect(await ids('Observation?code:text=oedeme')).toEqual(['o1']);
    });
  });
});
