/**
 * String search folds case fully (search.html 3.1.1.5.12, case-insensitive; as HAPI FHIR upper-cases):
 * `Straße` and `strasse` are one string both ways, ligatures and a dotless `ı` fold to their letters, a
 * final `ς` to `σ`, on both databases, in SQL and in the in-memory matcher (a read under a SMART scope
 * filter); accents still fold as before; `:exact` compares the text as written. And a database indexed
 * by model 9, which only lower-cased strings, reindexed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, readableUnder, type FhirClient, type Json } from '../helpers/fhir.ts';

const patient = (id: string, family: string): Json => ({ resourceType: 'Patient', id, name: [{ family }] });

const DATA: Json[] = [
  patient('sz', 'Straße'),
  patient('ss', 'Strasse'),
  patient('upper', 'STRASSE'),
  patient('lig', 'ﬁnch'),
  patient('turk', 'Işık'),
  patient('greek', 'Οδος'),
  patient('accent', 'Müller'),
  patient('other', 'Strand'),
  { resourceType: 'Observation', id: 'o1', status: 'final', subject: { reference: 'Patient/sz' }, code: { coding: [{ system: 'http://loinc.org', code: 'x-1', display: 'Fußpuls' }] } },
];

/** `family` values and the Patients each finds. */
const FAMILY_CASES: [string, string[]][] = [
  ['strasse', ['ss', 'sz', 'upper']],
  ['STRASSE', ['ss', 'sz', 'upper']],
  ['straße', ['ss', 'sz', 'upper']],
  ['STRAẞE', ['ss', 'sz', 'upper']],
  ['stras', ['ss', 'sz', 'upper']],
  ['stra', ['other', 'ss', 'sz', 'upper']],
  ['straß', ['ss', 'sz', 'upper']],
  ['finch', ['lig']],
  ['ﬁ', ['lig']],
  ['isik', ['turk']],
  ['IŞIK', ['turk']],
  ['οδοσ', ['greek']],
  ['ΟΔΟΣ', ['greek']],
  ['muller', ['accent']],
  ['MÜLLER', ['accent']],
  ['family:contains=asse', ['ss', 'sz', 'upper']],
  ['family:contains=ß', ['ss', 'sz', 'upper']],
  ['family:contains=fin', ['lig']],
  ['family:exact=Straße', ['sz']],
  ['family:exact=Strasse', ['ss']],
  ['family:exact=STRASSE', ['upper']],
  ['family:exact=straße', []],
];

const query = (value: string) => (value.startsWith('family:') ? value.replace(/=(.*)$/, (_, v: string) => `=${encodeURIComponent(v)}`) : `family=${encodeURIComponent(value)}`);

await eachStore((kind, fresh) => {
  describe(`string folding on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (q: string) => ((await api.search(q)).entry ?? []).map((e: Json) => e.resource.id as string).sort();
    /** The Patients `value` finds, by search (SQL) and by reads under a scope filter (in memory). */
    const both = async (value: string) => {
      const found = await ids(`Patient?${query(value)}`);
      const readable = await readableUnder(t, 'Patient', query(value), DATA.filter((x) => x.resourceType === 'Patient').map((r) => r.id));
      return { found, readable };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('ß and ss, ligatures, ı, a final sigma fold both ways, prefix and :contains, in SQL and in memory; :exact does not fold', async () => {
      for (const [value, expected] of FAMILY_CASES) {
        expect({ value, ...(await both(value)) }).toEqual({ value, found: expected, readable: expected });
      }
    });

    test('_filter, a chain and token :text fold the same way', async () => {
      expect(await ids(`Patient?_filter=${encodeURIComponent('family eq strasse')}`)).toEqual(['ss', 'sz', 'upper']);
      expect(await ids(`Patient?_filter=${encodeURIComponent('family co "ß"')}`)).toEqual(['ss', 'sz', 'upper']);
      expect(await ids('Observation?subject:Patient.family=strasse')).toEqual(['o1']);
      expect(await ids('Observation?code:text=fusspuls')).toEqual(['o1']);
      expect(await ids(`Observation?code:text=${encodeURIComponent('FUSS')}`)).toEqual(['o1']);
    });

    test('a database indexed by model 9 is reindexed from its resources holding a character the folding changes', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 9 wrote them: normalised strings only lower-cased (accents removed).
      const model9 = (s: string) => s.normalize('NFD').replace(/[\u0300-\u036f]/g, '').toLowerCase();
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const resource = JSON.parse(r.content) as Json;
        const index = storedIndex(resource);
        index.strings = index.strings.map((e) => (e.param === 'phonetic' ? e : { ...e, value: model9(e.exact) }));
        index.tokens = index.tokens.map((e) => (e.display ? { ...e, display: model9(resource.code.coding[0].display) } : e));
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_index', 'search_string']));
      await t.store.resources.indexing.setState({ model: 9, after: 0 });
      expect(await ids('Patient?family=strasse')).toEqual(['ss', 'upper']);
      expect(await ids('Observation?code:text=fusspuls')).toEqual([]);

      const run = await reindex(t.store);
      // Only those holding ß, ﬁ, ı or a sigma: sz, lig, turk, greek and o1.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 5 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [value, expected] of FAMILY_CASES) {
        expect({ value, found: await ids(`Patient?${query(value)}`) }).toEqual({ value, found: expected });
      }
      expect(await ids('Observation?code:text=fusspuls')).toEqual(['o1']);
    });
  });
});
