/**
 * Value sets that import one another in a chain: a code drawn down the chain records the value sets it came
 * through (their supplements apply to it) without copying that record at each level, so an expansion's cost is
 * its work budget's (ENUMERATION_WORK_LIMIT) and not the chain's depth times it: a chain of 1,000 value sets over
 * 2,000 codes held one `$expand` 26-32 s, a search's `:in` 11 s, against 3 s and 1.2 s without the record; one of
 * 2,000 value sets 42-68 s, six to eight times a chain a tenth as deep over ten times the codes, which is the same
 * work. The supplement named at the chain's end, or by an import an include intersects, still applies to the codes
 * drawn through it. On both databases. The record's cost is counted in test/unit/terminology/import-chain.test.ts and
 * timed, against a chain a tenth as deep over ten times the codes, by bench/terminology-chain.ts: no time is measured here.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { outcome, postOperation } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/chain-codes';
const SUPPLEMENT = `${CS}-fr`;
const NEEDS = 'http://hl7.org/fhir/StructureDefinition/valueset-supplement';
const DEPTH = 2_000;
const CODES = 1_000;
const link = (i: number) => `http://cinder.test/ValueSet/chain-${i}`;

/** `chain-0` imports `chain-1`, ..., `chain-{DEPTH-1}` includes the code system and names its supplement (`-fr`). */
function chainEntry(i: number): Json {
  const last = i === DEPTH - 1;
  const resource = {
    resourceType: 'ValueSet', id: `chain-${i}`, url: link(i), status: 'active',
    ...(last ? { extension: [{ url: NEEDS, valueCanonical: SUPPLEMENT }] } : {}),
    compose: { include: [last ? { system: CS } : { valueSet: [link(i + 1)] }] },
  };
  return { resource, request: { method: 'PUT', url: `ValueSet/chain-${i}` } };
}

await eachStore((kind, fresh) => {
  describe(`a chain of imported value sets (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      api = fhirClient(t, token);
      await api.put200({
        resourceType: 'CodeSystem', id: 'chain-codes', url: CS, status: 'active', content: 'complete', language: 'en',
        concept: Array.from({ length: CODES }, (_, i) => ({ code: `c${i}`, display: `Code ${i}` })),
      });
      await api.put200({
        resourceType: 'CodeSystem', id: 'chain-codes-fr', url: SUPPLEMENT, status: 'active', content: 'supplement', supplements: CS, language: 'fr',
        concept: [{ code: 'c0', display: 'Code zéro' }],
      });
      const entries = Array.from({ length: DEPTH }, (_, i) => chainEntry(i));
      for (let from = 0; from < entries.length; from += 500) {
        const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: entries.slice(from, from + 500) });
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).entry.every((e: Json) => e.response.status.startsWith('20'))).toBe(true);
      }
      // Takes the codes of `chain-{DEPTH-1}` that are also in `named` (which names the supplement): drawn through both.
      await api.put200({ resourceType: 'ValueSet', id: 'named', url: 'http://cinder.test/ValueSet/named', status: 'active', extension: [{ url: NEEDS, valueCanonical: SUPPLEMENT }], compose: { include: [{ system: CS, concept: [{ code: 'c0' }] }] } });
      await api.put200({
        resourceType: 'ValueSet', id: 'intersected', url: 'http://cinder.test/ValueSet/intersected', status: 'active',
        compose: { include: [{ valueSet: ['http://cinder.test/ValueSet/plain', 'http://cinder.test/ValueSet/named'] }] },
      });
      await api.put200({ resourceType: 'ValueSet', id: 'plain', url: 'http://cinder.test/ValueSet/plain', status: 'active', compose: { include: [{ system: CS }] } });
    }, 600_000);
    afterAll(() => t.close());

    test('an expansion down the chain lists its codes, with the supplement named at its end', async () => {
      const expand = async (url: string) => {
        const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: url }, { name: 'count', valueInteger: 10 }, { name: 'displayLanguage', valueCode: 'fr' }]);
        expect(r.status).toBe(200);
        return { contains: (r.body.expansion as { contains: { code: string; display: string }[] }).contains };
      };
      const deep = await expand(link(0));
      expect(deep.contains.map((c) => c.code)).toEqual(Array.from({ length: 10 }, (_, i) => `c${i}`));
      // The supplement named at the chain's end applies to the codes drawn down it.
      expect(deep.contains[0]!.display).toBe('Code zéro');
      expect(deep.contains[1]!.display).toBe('Code 1');
    }, 300_000);

    test('$validate-code down the chain, and through an intersected import, applies the supplement named there', async () => {
      const validate = (url: string, display: string) =>
        postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: url }, { name: 'coding', valueCoding: { system: CS, code: 'c0', display } }]);
      expect(outcome(await validate(link(0), 'Code zéro'))).toMatchObject({ result: true });
      expect(outcome(await validate('http://cinder.test/ValueSet/intersected', 'Code zéro'))).toMatchObject({ result: true });
      const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: 'http://cinder.test/ValueSet/intersected' }, { name: 'displayLanguage', valueCode: 'fr' }]);
      expect((r.body.expansion as { contains: { code: string; display: string }[] }).contains).toEqual([expect.objectContaining({ code: 'c0', display: 'Code zéro' })]);
    }, 120_000);
  });
});
