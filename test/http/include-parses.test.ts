/**
 * `_include` and `_revinclude` parse a stored text only to read the references an `_include` follows from it: not an
 * included or revincluded resource when nothing iterates, nor a match of a type no `_include` starts from. On both
 * databases, through app.request(): the parses of large texts while a search is answered are counted (a work count,
 * not a timing; the response is read as text and parsed after the count), and the entries are asserted as before.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** A stored text at least this long is one of the large records (two notes of 768 K characters). */
const LARGE = 1 << 20;
const note = [{ text: 'n'.repeat(768 * 1024) }, { text: 'm'.repeat(768 * 1024) }];
const code = { text: 'weight' };

await eachStore((kind, fresh) => {
  describe(`includes parse only what they follow (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const parse = JSON.parse;
    afterEach(() => {
      JSON.parse = parse;
    });
    /** The entries of `query` (`mode:Type/id`, sorted) and the large texts parsed while it was answered. */
    const searched = async (query: string) => {
      let parsed = 0;
      JSON.parse = ((text: string, reviver?: (this: unknown, key: string, value: unknown) => unknown) => {
        if (typeof text === 'string' && text.length >= LARGE) parsed++;
        return parse(text, reviver);
      }) as typeof JSON.parse;
      const res = await api.get(query);
      const text = await res.text();
      JSON.parse = parse;
      expect({ query, status: res.status }).toEqual({ query, status: 200 });
      const entries = ((JSON.parse(text) as Json).entry ?? []).map((e: Json) => `${e.search.mode}:${e.resource.resourceType}/${e.resource.id}`).sort();
      return { entries, parsed };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const r of [
        { resourceType: 'Patient', id: 'p1', generalPractitioner: [{ reference: 'Practitioner/dr1' }] },
        { resourceType: 'Practitioner', id: 'dr1' },
        { resourceType: 'Observation', id: 'o1', status: 'final', code, subject: { reference: 'Patient/p1' }, note },
        { resourceType: 'Observation', id: 'o2', status: 'final', code, subject: { reference: 'Patient/p1' }, note },
        { resourceType: 'Observation', id: 'o3', status: 'final', code, subject: { reference: 'Patient/p1' } },
        { resourceType: 'Condition', id: 'c1', subject: { reference: 'Patient/p1' }, note },
      ]) await api.put200(r);
    }, 60_000);
    afterAll(() => t.close());

    test('the revincluded are not parsed when nothing iterates', async () => {
      expect(await searched('Patient?_id=p1&_revinclude=Observation:subject')).toEqual({
        entries: ['include:Observation/o1', 'include:Observation/o2', 'include:Observation/o3', 'match:Patient/p1'],
        parsed: 0,
      });
    });

    test('a match of a type no _include starts from is not parsed; one it starts from is, once', async () => {
      expect(await searched('?_type=Condition,Observation&_id=c1,o3&_include=Observation:subject')).toEqual({
        entries: ['include:Patient/p1', 'match:Condition/c1', 'match:Observation/o3'],
        parsed: 0,
      });
      expect(await searched('?_type=Condition,Observation&_id=c1,o1&_include=Observation:subject')).toEqual({
        entries: ['include:Patient/p1', 'match:Condition/c1', 'match:Observation/o1'],
        parsed: 1,
      });
    });

    test('an iterated _include reads on from the included, and parses none it does not start from', async () => {
      expect(await searched('Patient?_id=p1&_revinclude=Observation:subject&_include:iterate=Patient:general-practitioner')).toEqual({
        entries: ['include:Observation/o1', 'include:Observation/o2', 'include:Observation/o3', 'include:Practitioner/dr1', 'match:Patient/p1'],
        parsed: 0,
      });
      expect(await searched('Observation?_id=o3&_include=Observation:subject&_include:iterate=Patient:general-practitioner')).toEqual({
        entries: ['include:Patient/p1', 'include:Practitioner/dr1', 'match:Observation/o3'],
        parsed: 0,
      });
    });
  });
});
