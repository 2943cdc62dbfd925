/**
 * Token searches against sets of codes (`:in`, `:not-in`, `:below`, `:above`), on both databases, as R4
 * search.html's token rules read them: a Coding without a system matches no code of a system, but for a
 * `code` element (Patient.gender), whose system is its required binding's; and a code subsumes itself, so
 * `:below` and `:above` of a code find it even where its code system does not define it.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const CS = 'http://example.org/fhir/CodeSystem/code-sets';
const OTHER = 'http://example.org/fhir/CodeSystem/other';
const VS = 'http://example.org/fhir/ValueSet/code-sets';
const GENDER = 'http://hl7.org/fhir/administrative-gender';
const MALE = 'http://example.org/fhir/ValueSet/male';

await eachStore((kind, fresh) => {
  describe(`token searches against sets of codes, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({
        resourceType: 'CodeSystem', id: 'code-sets', url: CS, status: 'active', content: 'complete', hierarchyMeaning: 'is-a',
        concept: [{ code: 'A', concept: [{ code: 'A1' }] }, { code: 'B' }],
      });
      await api.put200({ resourceType: 'ValueSet', id: 'code-sets', url: VS, status: 'active', compose: { include: [{ system: CS, concept: [{ code: 'B' }] }] } });
      await api.put200({ resourceType: 'ValueSet', id: 'male', url: MALE, status: 'active', compose: { include: [{ system: GENDER, concept: [{ code: 'male' }] }] } });
      const observation = (id: string, coding: Json): Json => ({ resourceType: 'Observation', id, status: 'final', code: { coding: [coding] } });
      await api.put200(observation('o-b', { system: CS, code: 'B' }));
      await api.put200(observation('o-b-bare', { code: 'B' }));
      await api.put200(observation('o-b-other', { system: OTHER, code: 'B' }));
      await api.put200(observation('o-a1', { system: CS, code: 'A1' }));
      await api.put200(observation('o-zz', { system: CS, code: 'ZZ' }));
      await api.put200(observation('o-zz-bare', { code: 'ZZ' }));
      await api.put200(observation('o-zz-other', { system: OTHER, code: 'ZZ' }));
      await api.put200({ resourceType: 'Patient', id: 'pm', gender: 'male' });
      await api.put200({ resourceType: 'Patient', id: 'pf', gender: 'female' });
    });
    afterAll(() => t.close());

    const found = async (query: string) => ids(await api.search(query)).sort();

    test('a Coding without a system is not in a ValueSet of a system, and so not out of it', async () => {
      expect(await found(`Observation?code:in=${VS}`)).toEqual(['o-b']);
      expect(await found(`Observation?code:not-in=${VS}`)).toEqual(['o-a1', 'o-b-bare', 'o-b-other', 'o-zz', 'o-zz-bare', 'o-zz-other']);
      // As `code=system|B` reads it.
      expect(await found(`Observation?code=${CS}|B`)).toEqual(['o-b']);
    });

    test('a code element is in a ValueSet of its binding\'s system (Patient.gender)', async () => {
      expect(await found(`Patient?gender:in=${MALE}`)).toEqual(['pm']);
      expect(await found(`Patient?gender:not-in=${MALE}`)).toEqual(['pf']);
      expect(await found(`Patient?gender:in=http://hl7.org/fhir/ValueSet/administrative-gender`)).toEqual(['pf', 'pm']);
    });

    test(':below and :above of a code the code system does not define find that code, of that system alone', async () => {
      expect(await found(`Observation?code:below=${CS}|ZZ`)).toEqual(['o-zz']);
      expect(await found(`Observation?code:above=${CS}|ZZ`)).toEqual(['o-zz']);
      expect(await found(`Observation?code:below=${CS}|ZZ,${CS}|B`)).toEqual(['o-b', 'o-zz']);
      // A code it defines: itself and those below it, as before.
      expect(await found(`Observation?code:below=${CS}|A`)).toEqual(['o-a1']);
      expect(await found(`Observation?code:above=${CS}|A1`)).toEqual(['o-a1']);
    });
  });
});
