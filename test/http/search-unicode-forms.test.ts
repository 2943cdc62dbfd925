/**
 * Text encoded in either Unicode form is the same text to search: a name stored decomposed (NFD, `Zoe`
 * and a combining acute) and one stored composed (NFC, `Zoé` as one code point) are both found by
 * `:exact` in either form, as they are by the default (accent-insensitive) match and `:contains`; in SQL
 * and in the in-memory matcher, on both databases. Token codes stay as written. A database indexed by
 * model 14, whose `exact` column held the text as written, is reindexed from its resources holding text
 * not composed (raw, or as JSON escapes), and `:exact` waits while it is.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { storedIndex } from '../../src/fhir/indexer.ts';
import { INDEX_MODEL, readsRowsBeingRebuilt, reindex, touchedSince } from '../../src/fhir/reindex.ts';
import type { Condition } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectBothWays, fhirClient, searchIds, type FhirClient, type Json } from '../helpers/fhir.ts';

const NFD = 'Zoe\u0301';
const NFC = 'Zo\u00e9';
const RENEE_NFD = 'Rene\u0301e';

const patient = (id: string, family: string, given: string[] = []): Json => ({ resourceType: 'Patient', id, name: [given.length ? { family, given } : { family }] });

const DATA: Json[] = [
  patient('nfd', NFD, [RENEE_NFD]),
  patient('nfc', NFC, ['Ren\u00e9e']),
  patient('plain', 'Zoe'),
  patient('diaeresis', 'Zo\u00eb'),
  // A code is a code as written: no form of it is another's.
  { resourceType: 'Patient', id: 'coded', identifier: [{ system: 'urn:ids', value: NFD }], name: [{ family: 'Other' }] },
];
const IDS = DATA.map((r) => r.id as string);
const Q = encodeURIComponent;

/** Query, and the ids it finds. */
const CASES: [string, string[]][] = [
  [`family:exact=${Q(NFC)}`, ['nfc', 'nfd']],
  [`family:exact=${Q(NFD)}`, ['nfc', 'nfd']],
  ['family:exact=Zoe', ['plain']],
  [`name:exact=${Q(NFD)}`, ['nfc', 'nfd']],
  [`given:exact=${Q(RENEE_NFD)}`, ['nfc', 'nfd']],
  [`given:exact=${Q('Ren\u00e9e')}`, ['nfc', 'nfd']],
  // Accent-insensitive, as before: every Zoe.
  [`family=${Q(NFC)}`, ['diaeresis', 'nfc', 'nfd', 'plain']],
  [`family=${Q(NFD)}`, ['diaeresis', 'nfc', 'nfd', 'plain']],
  [`family:contains=${Q('oe\u0301')}`, ['diaeresis', 'nfc', 'nfd', 'plain']],
  // Tokens compare as written.
  [`identifier=${Q(`urn:ids|${NFD}`)}`, ['coded']],
  [`identifier=${Q(`urn:ids|${NFC}`)}`, []],
];

await eachStore((kind, fresh) => {
  describe(`text in either Unicode form on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of DATA) await api.put200(r);
    });
    afterAll(() => t.close());

    test('is the same text to :exact, in SQL and in memory; the stored resource keeps its own form', async () => {
      expect(NFC).toBe(NFD.normalize('NFC'));
      expect(NFC).not.toBe(NFD);
      for (const [query, expected] of CASES) await expectBothWays(t, api, 'Patient', query, IDS, expected);
      expect(((await (await api.get('Patient/nfd')).json()) as Json).name[0].family).toBe(NFD);
      // In a chain too.
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/nfd' } });
      expect(await searchIds(api, `Observation?subject:Patient.family:exact=${Q(NFC)}`)).toEqual(['o1']);
    });

    test('a database indexed by model 14 is reindexed from its resources holding text not composed, as itself or escaped', async () => {
      // Written as JSON escapes, as a client may send it: `Zo\u0065\u0301`.
      const escaped = `{"resourceType":"Patient","id":"escaped","name":[{"family":"Zo\\u0065\\u0301"}]}`;
      expect((await api.put('Patient/escaped', escaped)).status).toBe(201);
      const page = await t.store.resources.indexing.page(0, 1000);
      const patients = page.filter((r) => r.type === 'Patient');
      // As model 14 wrote them: `exact` as written.
      await t.store.resources.write('t1', (w) => w.replaceIndex(patients.map((r) => {
        const index = storedIndex(JSON.parse(r.content) as Json);
        return { type: r.type, id: r.id, versionId: r.versionId, index: { ...index, strings: index.strings.map((e) => ({ ...e, exact: writtenExact(JSON.parse(r.content) as Json, e.exact) })) }, compartments: [] };
      }), ['search_string']));
      await t.store.resources.indexing.setState({ model: 14, after: 0 });
      expect(await searchIds(api, `Patient?family:exact=${Q(NFC)}`)).toEqual(['nfc']);

      const run = await reindex(t.store);
      // nfd, escaped, and coded (its identifier is not composed: rebuilt, its string rows the same); not nfc, plain, diaeresis, o1.
      expect(run).toEqual({ ran: true, done: page.length, rebuilt: 3 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(await searchIds(api, `Patient?family:exact=${Q(NFC)}`)).toEqual(['escaped', 'nfc', 'nfd']);
      expect(await searchIds(api, `Patient?family:exact=${Q(NFD)}`)).toEqual(['escaped', 'nfc', 'nfd']);
    });
  });
});

/** The text `exact` (composed) as the resource writes it: model 14 kept each string as written. */
function writtenExact(resource: Json, exact: string): string {
  const all = JSON.stringify(resource);
  for (const form of [exact.normalize('NFD'), exact]) if (all.includes(form)) return form;
  return exact;
}

describe('model 15', () => {
  test('touches resources holding text not composed, raw or escaped; only :exact waits for it', () => {
    const since14 = touchedSince(14);
    expect(since14(JSON.stringify(patient('a', NFD)))).toBe(true);
    expect(since14('{"resourceType":"Patient","name":[{"family":"Zo\\u0065\\u0301"}]}')).toBe(true);
    expect(since14(JSON.stringify(patient('a', NFC)))).toBe(false);
    expect(since14('{"resourceType":"Patient","name":[{"family":"Zo\\u00e9"}]}')).toBe(false);
    expect(since14('{"resourceType":"Patient","name":[{"family":"C:\\\\users"}]}')).toBe(false);
    expect(since14(JSON.stringify(patient('a', 'Zoe')))).toBe(false);
    const query = (...where: Condition[]) => ({ type: 'Patient', where, sort: [], count: 10 });
    const exact: Condition = { kind: 'string', param: 'family', values: [{ value: NFC, match: 'exact' }] };
    const prefix: Condition = { kind: 'string', param: 'family', values: [{ value: 'zoe', match: 'prefix' }] };
    expect(readsRowsBeingRebuilt(14, query(exact))).toBe(true);
    expect(readsRowsBeingRebuilt(14, query({ kind: 'chain', param: 'subject', targetType: 'Patient', where: [exact] }))).toBe(true);
    // (A prefix waits from model 14 too: model 22 changed the normalised strings it reads.)
    expect(readsRowsBeingRebuilt(14, query(prefix))).toBe(true);
    expect(readsRowsBeingRebuilt(21, query(exact))).toBe(false);
    expect(readsRowsBeingRebuilt(14, query({ kind: 'token', param: 'identifier', values: [{ value: NFD }] }))).toBe(false);
  });
});
