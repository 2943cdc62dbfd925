/**
 * A ValueSet operation reads the tenant's own CodeSystems only for a token that reads CodeSystems
 * (src/terminology/code-system-reach.ts): a token with ValueSet read and no (or only filtered) CodeSystem read
 * listed a tenant CodeSystem's codes and displays by expanding an inline ValueSet of it, or one it stored itself,
 * and asked `$validate-code` whether a code is in it. R4 core's code systems stay open to it. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken } from '../helpers/fhir.ts';
import { errorIssue, getOperation, outcome, postOperation, putResource } from '../helpers/terminology-http.ts';

const SECRET = 'http://cinder.test/CodeSystem/secret-diagnoses';
const codeSystem = {
  resourceType: 'CodeSystem', id: 'secret', url: SECRET, status: 'active', content: 'complete',
  concept: [{ code: 'x1', display: 'Confidential condition one' }, { code: 'x2', display: 'Confidential condition two' }],
};
const inline = (system: string) => ({ name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system }] } } });
const stored = { resourceType: 'ValueSet', id: 'of-secret', url: 'http://cinder.test/ValueSet/of-secret', status: 'active', compose: { include: [{ system: SECRET }] } };
const GENDER = 'http://hl7.org/fhir/administrative-gender';
/** A map to the tenant's code system that gives no display of its own: `$translate` adds the code system's. */
const conceptMap = {
  resourceType: 'ConceptMap', id: 'to-secret', url: 'http://cinder.test/ConceptMap/to-secret', status: 'active',
  group: [{ source: GENDER, target: SECRET, element: [{ code: 'male', target: [{ code: 'x1', equivalence: 'equivalent' }] }] }],
};
const translated = async (t: TestApp, token: string) => {
  const r = await postOperation(t, token, 'ConceptMap/$translate', [{ name: 'url', valueUri: conceptMap.url }, { name: 'system', valueUri: GENDER }, { name: 'code', valueCode: 'male' }]);
  expect(r.status).toBe(200);
  const match = r.body.parameter!.find((p) => p.name === 'match') as unknown as { part: { name: string; valueCoding?: Record<string, unknown> }[] };
  return match.part.find((p) => p.name === 'concept')!.valueCoding;
};

await eachStore((kind, fresh) => {
  describe(`ValueSet operations and the tenant's CodeSystems (${kind})`, () => {
    let t: TestApp;
    let admin: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = await craftToken(t, 'system/*.*');
      await putResource(t, admin, codeSystem);
      await putResource(t, admin, stored);
      await putResource(t, admin, conceptMap);
    });
    afterAll(() => t.close());

    test('without CodeSystem read, an expansion or a $validate-code that needs a tenant CodeSystem is a 403 naming it', async () => {
      for (const scope of ['system/ValueSet.rs', 'system/ValueSet.rs system/CodeSystem.rs?url=http://cinder.test/other', 'user/ValueSet.rs system/CodeSystem.s']) {
        const token = await craftToken(t, scope);
        const answers = [
          await postOperation(t, token, 'ValueSet/$expand', [inline(SECRET)]),
          await postOperation(t, token, 'ValueSet/of-secret/$expand', []),
          await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: stored.url }]),
          await postOperation(t, token, 'ValueSet/$validate-code', [inline(SECRET), { name: 'system', valueUri: SECRET }, { name: 'code', valueCode: 'x1' }]),
          await postOperation(t, token, 'ValueSet/of-secret/$validate-code', [{ name: 'system', valueUri: SECRET }, { name: 'code', valueCode: 'x2' }]),
          // A core ValueSet asked about a code of the tenant's system: its not-in message would read the CodeSystem.
          await postOperation(t, token, 'ValueSet/$validate-code', [inline(GENDER), { name: 'system', valueUri: SECRET }, { name: 'code', valueCode: 'x1' }]),
        ];
        for (const [i, r] of answers.entries()) {
          expect({ scope, i, status: r.status, text: errorIssue(r, 403).text }).toEqual({
            scope, i, status: 403, text: `The access token's scopes do not allow read of CodeSystem, and this operation needs the tenant's CodeSystem ${SECRET}`,
          });
          expect(JSON.stringify(r.body)).not.toContain('Confidential');
        }
        // R4 core's code systems are no tenant's record: answered.
        const core = await postOperation(t, token, 'ValueSet/$expand', [inline(GENDER)]);
        expect(core.status).toBe(200);
        expect((core.body.expansion as { total: number }).total).toBe(4);
        expect(outcome(await postOperation(t, token, 'ValueSet/$validate-code', [inline(GENDER), { name: 'system', valueUri: GENDER }, { name: 'code', valueCode: 'male' }])).result).toBe(true);
      }
    });

    // Answers about a stored ValueSet's codes are kept in memory (validate-value-set-code.ts): one given to a token that
    // reads CodeSystems was given again, display and all, to one that does not.
    test('a $validate-code answered to a token that reads CodeSystems is refused to one that does not, asked the same after it', async () => {
      const reader = await craftToken(t, 'system/ValueSet.rs system/CodeSystem.rs');
      const blind = await craftToken(t, 'system/ValueSet.rs');
      const ask = (token: string) => postOperation(t, token, 'ValueSet/of-secret/$validate-code', [{ name: 'system', valueUri: SECRET }, { name: 'code', valueCode: 'x1' }]);
      const askGet = (token: string) => getOperation(t, token, 'ValueSet/$validate-code', { url: stored.url, system: SECRET, code: 'x2', display: 'Confidential condition two' });
      expect(outcome(await ask(reader))).toEqual({ result: true, display: 'Confidential condition one' });
      expect(outcome(await askGet(reader)).result).toBe(true);
      for (const r of [await ask(blind), await askGet(blind)]) {
        expect(errorIssue(r, 403).text).toBe(`The access token's scopes do not allow read of CodeSystem, and this operation needs the tenant's CodeSystem ${SECRET}`);
        expect(JSON.stringify(r.body)).not.toContain('Confidential');
      }
      // R4 core's code systems are answered to it, from memory or not.
      const gender = (token: string) => postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' }, { name: 'system', valueUri: GENDER }, { name: 'code', valueCode: 'male' }]);
      expect(outcome(await gender(reader))).toEqual({ result: true, display: 'Male' });
      expect(outcome(await gender(blind))).toEqual({ result: true, display: 'Male' });
      expect(outcome(await gender(blind))).toEqual({ result: true, display: 'Male' });
    });

    test("$translate leaves out a concept's display from the tenant's CodeSystem for a token that does not read CodeSystems", async () => {
      expect(await translated(t, await craftToken(t, 'system/ConceptMap.rs'))).toEqual({ system: SECRET, code: 'x1' });
      expect(await translated(t, await craftToken(t, 'system/ConceptMap.rs system/CodeSystem.rs'))).toEqual({ system: SECRET, code: 'x1', display: 'Confidential condition one' });
    });

    test('with CodeSystem read, the same operations are answered', async () => {
      const token = await craftToken(t, 'system/ValueSet.rs system/CodeSystem.rs');
      const expanded = await postOperation(t, token, 'ValueSet/$expand', [inline(SECRET)]);
      expect(expanded.status).toBe(200);
      expect((expanded.body.expansion as { contains: { code: string }[] }).contains.map((c) => c.code)).toEqual(['x1', 'x2']);
      expect((await postOperation(t, token, 'ValueSet/of-secret/$expand', [])).status).toBe(200);
      expect(outcome(await postOperation(t, token, 'ValueSet/of-secret/$validate-code', [{ name: 'system', valueUri: SECRET }, { name: 'code', valueCode: 'x2' }])).result).toBe(true);
    });
  });
});
