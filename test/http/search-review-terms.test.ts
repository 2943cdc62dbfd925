/**
 * Search defects found in the second review of issue #14, on both databases: `:in` and `:not-in` take
 * several ValueSets separated by commas (search.html: a comma ORs the values of any parameter; `:in` of
 * any of them, `:not-in` of none, as `:not` of several codes), within one search's bound on codes.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const CS = 'http://example.org/fhir/CodeSystem/review';
const VS_A = 'http://example.org/fhir/ValueSet/review-a';
const VS_B = 'http://example.org/fhir/ValueSet/review-b';

await eachStore((kind, fresh) => {
  describe(`search review of terminology modifiers, on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({
        resourceType: 'CodeSystem', id: 'review', url: CS, status: 'active', content: 'complete', hierarchyMeaning: 'is-a',
        concept: [{ code: 'A', concept: [{ code: 'A1' }] }, { code: 'B' }, { code: 'C' }],
      });
      await api.put200({ resourceType: 'ValueSet', id: 'review-a', url: VS_A, status: 'active', compose: { include: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', value: 'A' }] }] } });
      await api.put200({ resourceType: 'ValueSet', id: 'review-b', url: VS_B, status: 'active', compose: { include: [{ system: CS, concept: [{ code: 'B' }] }] } });
      const observation = (id: string, code: Json, component?: Json): Json => ({
        resourceType: 'Observation', id, status: 'final', code, ...(component ? { component: [{ code: component, valueString: 'x' }] } : {}),
      });
      await api.put200(observation('t-a1', { coding: [{ system: CS, code: 'A1' }] }));
      await api.put200(observation('t-b', { coding: [{ system: CS, code: 'B' }] }));
      await api.put200(observation('t-c', { coding: [{ system: CS, code: 'C' }] }, { coding: [{ system: CS, code: 'B' }] }));
      await api.put200(observation('t-text', { text: 'no coding' }));
    });
    afterAll(() => t.close());

    const found = async (query: string) => ids(await api.search(query)).sort();

    test(':in with several ValueSets finds the codes of any of them; :not-in those of none', async () => {
      expect(await found(`Observation?code:in=${VS_A},${VS_B}`)).toEqual(['t-a1', 't-b']);
      expect(await found(`Observation?code:in=${VS_B},ValueSet/review-a`)).toEqual(['t-a1', 't-b']);
      expect(await found(`Observation?code:not-in=${VS_A},${VS_B}`)).toEqual(['t-c', 't-text']);
      // As each alone, ANDed: in both is none, in neither as :not-in of both.
      expect(await found(`Observation?code:in=${VS_A}&code:in=${VS_B}`)).toEqual([]);
      expect(await found(`Observation?code:not-in=${VS_A}&code:not-in=${VS_B}`)).toEqual(['t-c', 't-text']);
      // A union parameter (combo-code: code or component-code), and through `_filter`'s and a chain's ways in.
      expect(await found(`Observation?combo-code:in=${VS_A},${VS_B}`)).toEqual(['t-a1', 't-b', 't-c']);
      expect(await found(`Observation?combo-code:not-in=${VS_A},${VS_B}`)).toEqual(['t-text']);
      expect(await found(`Observation?_has:Observation:has-member:code:in=${VS_A},${VS_B}`)).toEqual([]);
      // The self link keeps the value as given.
      const bundle = await api.search(`Observation?code:in=${VS_A},${VS_B}`);
      expect(decodeURIComponent(bundle.link.find((l: Json) => l.relation === 'self').url)).toEndWith(`code:in=${VS_A},${VS_B}`);
    });

    test('an unknown ValueSet among several is the 400 naming it', async () => {
      const outcome = await expectOutcome(await api.get(`Observation?code:in=${VS_A},http://example.org/fhir/ValueSet/nope`), 400);
      expect(outcome.issue[0].expression).toEqual(['code:in']);
      expect(outcome.issue[0].diagnostics).toContain('http://example.org/fhir/ValueSet/nope');
      const not = await expectOutcome(await api.get(`Observation?code:not-in=http://example.org/fhir/ValueSet/nope,${VS_B}`), 400);
      expect(not.issue[0].expression).toEqual(['code:not-in']);
    });

    test('the ValueSets of one :in hold at most 1,000 codes together: past them a 400 too-costly', async () => {
      const many = (n: number, from: number) => Array.from({ length: n }, (_, i) => ({ code: `K${from + i}` }));
      await api.put200({ resourceType: 'CodeSystem', id: 'review-many', url: `${CS}-many`, status: 'active', content: 'complete', concept: many(1200, 0) });
      for (const [id, from] of [['review-m1', 0], ['review-m2', 600]] as const) {
        await api.put200({ resourceType: 'ValueSet', id, url: `${VS_A}-${id}`, status: 'active', compose: { include: [{ system: `${CS}-many`, concept: many(600, from) }] } });
      }
      expect(await found(`Observation?code:in=${VS_A}-review-m1`)).toEqual([]);
      const outcome = await expectOutcome(await api.get(`Observation?code:in=${VS_A}-review-m1,${VS_A}-review-m2`), 400, 'too-costly');
      expect(outcome.issue[0].expression).toEqual(['code:in']);
      expect(outcome.issue[0].diagnostics).toContain('more than 1000 codes');
    });
  });
});
