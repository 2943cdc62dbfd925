/**
 * A string's matching form is cut to 256 UTF-16 units (indexer.ts normalizeString); a cut through a surrogate pair (an
 * emoji, a mathematical letter) left half of it, a lone surrogate, which the databases store as U+FFFD. SQLite's join of
 * eight prefixes or more (search-sql.ts rangesJoined) read it from JSON as other bytes, so the name was missed: by a
 * search of nine names, by a conditional create of them (a duplicate), and by a transaction's grouped conditional creates.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

/** A family name whose 256th UTF-16 unit begins an emoji (U+1F600), distinct in its first 255 units. */
const cutName = (head: string) => head + 'a'.repeat(255 - head.length) + '\u{1F600}tail';
const patient = (family: string): Json => ({ resourceType: 'Patient', name: [{ family }] });
const OTHERS = ['b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7', 'b8'];

await eachStore((kind, fresh) => {
  describe(`a name cut through a surrogate pair (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a search of one name and of nine names finds it', async () => {
      const stored = await api.create(patient(cutName('search')));
      const name = encodeURIComponent(cutName('search'));
      expect(ids(await api.search(`Patient?name=${name}`))).toEqual([stored.id]);
      expect(ids(await api.search(`Patient?name=${[name, ...OTHERS].join(',')}`))).toEqual([stored.id]);
      expect(ids(await api.search(`Patient?family=${[name, ...OTHERS].join(',')}`))).toEqual([stored.id]);
    });

    test('a conditional create by nine names finds it (200), not a duplicate', async () => {
      const stored = await api.create(patient(cutName('create')));
      const condition = `name=${[encodeURIComponent(cutName('create')), ...OTHERS].join(',')}`;
      const res = await api.post('Patient', patient(cutName('create')), { 'If-None-Exist': condition });
      expect([res.status, ((await res.json()) as Json).id]).toEqual([200, stored.id]);
      expect(ids(await api.search(`Patient?name=${encodeURIComponent(cutName('create'))}`))).toEqual([stored.id]);
    });

    test('a lone surrogate a client sends is its 4xx naming where, never a 500 (guards)', async () => {
      // Percent-encoded, a lone surrogate is no UTF-8: the search's and the condition's 400 naming the parameter.
      expect((await expectOutcome(await api.get('Patient?name=x%ED%A0%80'), 400)).issue[0].expression).toEqual(['name']);
      const header = await api.post('Patient', patient('Lone'), { 'If-None-Exist': `name=${['x%ED%A0%80', ...OTHERS].join(',')}` });
      expect((await expectOutcome(header, 400)).issue[0].expression).toEqual(['If-None-Exist']);
      // Escaped in JSON (`\ud800`), an entry's condition is no Unicode text: 422 at the element holding it.
      const entry = [{ request: { method: 'POST', url: 'Patient', ifNoneExist: `name=${['x\ud800', ...OTHERS].join(',')}` }, resource: patient('Lone') }];
      const tx = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry });
      expect((await expectOutcome(tx, 422)).issue[0].expression).toEqual(['Bundle.entry[0].request.ifNoneExist']);
      expect(ids(await api.search('Patient?family=Lone'))).toEqual([]);
    });

    test("a transaction's conditional creates of nine such names find each its own", async () => {
      const heads = Array.from({ length: 9 }, (_, i) => `tx${i}-`);
      const stored = await Promise.all(heads.map((h) => api.create(patient(cutName(h)))));
      const entry = heads.map((h) => ({
        request: { method: 'POST', url: 'Patient', ifNoneExist: `name=${encodeURIComponent(cutName(h))}` },
        resource: patient(cutName(h)),
      }));
      const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry });
      expect(res.status).toBe(200);
      const out = (await res.json()) as Json;
      expect(out.entry.map((e: Json) => e.response.status)).toEqual(heads.map(() => '200 OK'));
      expect(out.entry.map((e: Json) => /Patient\/([^/]+)/.exec(e.response.location)![1])).toEqual(stored.map((s) => s.id));
    });
  });
});
