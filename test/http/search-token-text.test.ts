/**
 * Token `:text` (search.html: "the search parameter is tested against the text/display associated with
 * the code", CodeableConcept.text, Coding.display or Identifier.type.text): a coded value found by any of
 * its texts, whatever the order its Codings or CodeableConcepts come in and however many rows the
 * resource has, and never by a value that lies across two of them. The same on both databases, in SQL
 * and in the in-memory matcher (a read under a SMART scope filter); a database indexed by model 10,
 * which kept one text of a repeated value and joined a CodeableConcept's text and display by a space,
 * reindexed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { DISPLAY_SEPARATOR, normalizeString, storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, reindex, touchedSince } from '../../src/fhir/reindex.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectBothWays, fhirClient, searchIds, type FhirClient, type Json } from '../helpers/fhir.ts';

const LOINC = 'http://loinc.org';
// One code twice, each with its own display (a glucose: a vital sign's code would be held to its profile, which allows it once).
const glucose = { coding: [{ system: LOINC, code: '2339-0', display: 'Glucose concentration' }, { system: LOINC, code: '2339-0', display: 'Sugar' }] };
const manyIds = Array.from({ length: 20 }, (_, i) => ({ system: 'http://x.org/id', value: `v${i}` }));

const DATA: Json[] = [
  { resourceType: 'Observation', id: 'repeat', status: 'final', code: glucose },
  // More than 16 token rows: the indexer's deduplication by key, not by pairs.
  { resourceType: 'Observation', id: 'many', status: 'final', identifier: manyIds, code: glucose },
  {
    resourceType: 'Observation', id: 'cats', status: 'final', code: { text: 'x' },
    category: [{ coding: [{ system: 'http://s', code: 'c' }], text: 'Vitals' }, { coding: [{ system: 'http://s', code: 'c' }], text: 'Screening' }],
  },
  // A Coding without a display, then one with: the second's display counts.
  {
    resourceType: 'Observation', id: 'late', status: 'final', code: { text: 'y' },
    category: [{ coding: [{ system: 'http://s', code: 'd' }] }, { coding: [{ system: 'http://s', code: 'd', display: 'Laboratory' }] }],
  },
  { resourceType: 'Condition', id: 'joined', subject: { reference: 'Patient/x' }, code: { coding: [{ system: 'http://s', code: '1', display: 'Mellitus' }], text: 'Diabetes' } },
  {
    resourceType: 'Patient', id: 'ids',
    identifier: [{ system: 'urn:mrn', value: '7', type: { text: 'Medical record' } }, { system: 'urn:mrn', value: '7', type: { text: 'Hospital number' } }],
  },
  // No text at all: not rebuilt from model 10.
  { resourceType: 'Observation', id: 'plain', status: 'final', code: { coding: [{ system: 'http://s', code: 'z' }] } },
];

/** Query, and the ids it finds among DATA of its type. */
const CASES: [string, string, string[]][] = [
  ['Observation', 'code:text=sugar', ['many', 'repeat']],
  ['Observation', 'code:text=glucose', ['many', 'repeat']],
  ['Observation', 'code:text=concentration', ['many', 'repeat']],
  ['Observation', 'category:text=screening', ['cats']],
  ['Observation', 'category:text=vitals', ['cats']],
  ['Observation', 'category:text=laboratory', ['late']],
  ['Condition', 'code:text=diabetes', ['joined']],
  ['Condition', 'code:text=mellitus', ['joined']],
  // Across the CodeableConcept's text and the Coding's display: in neither of them.
  ['Condition', `code:text=${encodeURIComponent('diabetes mellitus')}`, []],
  ['Condition', `code:text=${encodeURIComponent('s mel')}`, []],
  ['Observation', `code:text=${encodeURIComponent('concentration sugar')}`, []],
  ['Patient', 'identifier:text=hospital', ['ids']],
  ['Patient', 'identifier:text=medical', ['ids']],
  ['Patient', `identifier:text=${encodeURIComponent('record hospital')}`, []],
];

await eachStore((kind, fresh) => {
  describe(`token :text on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = (q: string) => searchIds(api, q);
    const ofType = (type: string) => DATA.filter((r) => r.resourceType === type).map((r) => r.id as string);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('every text of a coded value is found, none across two, in SQL and in memory', async () => {
      for (const [type, query, expected] of CASES) {
        await expectBothWays(t, api, type, query, ofType(type), expected);
      }
    });

    test('a repeated code is one row: a count of the code counts each resource once', async () => {
      expect(((await api.search(`Observation?code=${encodeURIComponent(`${LOINC}|2339-0`)}&_summary=count`)) as Json).total).toBe(2);
      expect(((await api.search('Observation?code=2339-0&_summary=count')) as Json).total).toBe(2);
    });

    test('a database indexed by model 10 is reindexed from its resources holding a display or a text', async () => {
      const page = await t.store.resources.indexing.page(0, 1000);
      // As model 10 wrote them: a row per Coding, its CodeableConcept's text and display joined by a
      // space, SQLite keeping the first row of a value.
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const index = storedIndex(JSON.parse(r.content) as Json);
        index.tokens = index.tokens.map((e) => (e.display ? { ...e, display: e.display.split(DISPLAY_SEPARATOR).slice(0, 1).join(' ') } : e));
        return { type: r.type, id: r.id, versionId: r.versionId, index, compartments: [] };
      }), ['search_index']));
      await t.store.resources.indexing.setState({ model: 10, after: 0 });
      expect(await ids('Observation?code:text=sugar')).toEqual([]);

      const run = await reindex(t.store);
      // Every resource but `plain` holds a display or a string text.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: page.length - 1 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      for (const [type, query, expected] of CASES) expect({ query, found: await ids(`${type}?${query}`) }).toEqual({ query, found: expected });
    });
  });
});

describe('model 11', () => {
  test('touches the resources holding a display or a string text, and no other', () => {
    const since10 = touchedSince(10);
    expect(since10('{"resourceType":"Observation","code":{"coding":[{"system":"http://loinc.org","code":"1","display":"x"}]}}')).toBe(true);
    expect(since10('{"resourceType":"Observation","code":{"coding":[{"system":"http://s","code":"c"}],"text":"Vitals"}}')).toBe(true);
    expect(since10('{"resourceType":"Patient","identifier":[{"type" : {"text" : "MRN"},"value":"1"}]}')).toBe(true);
    expect(since10('{"resourceType":"Observation","code":{"coding":[{"system":"http://loinc.org","code":"1"}]},"text":{"status":"generated","div":"<div>x</div>"}}')).toBe(false);
    expect(since10('{"resourceType":"Patient","identifier":[{"system":"urn:mrn","value":"1"}],"name":[{"family":"Text"}]}')).toBe(false);
  });

  test('a row display keeps its texts apart with a character no search value holds', () => {
    expect(normalizeString(DISPLAY_SEPARATOR)).toBe(DISPLAY_SEPARATOR);
    expect(/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/.test(DISPLAY_SEPARATOR)).toBe(true);
  });
});
