/**
 * A supplement an imported value set names applies where that value set is pulled in: to the codes the
 * importer draws through it, not to the codes the importer takes from the code system itself (the
 * reference servers expand the imported value set with its own supplements). One the importer names
 * applies to all of its codes. `$expand` and `ValueSet/$validate-code` alike, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { type OperationResponse, outcome, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/scope-notes';
const SUPPLEMENT = 'http://cinder.test/CodeSystem/scope-notes-fr';
const VS = 'http://cinder.test/ValueSet/scope-';
const NEEDS = 'http://hl7.org/fhir/StructureDefinition/valueset-supplement';

const notes = {
  resourceType: 'CodeSystem', id: 'scope-notes', url: CS, version: '1', status: 'active', content: 'complete', language: 'en',
  concept: [{ code: 'do', display: 'Do' }, { code: 're', display: 'Re' }],
};
const french = {
  resourceType: 'CodeSystem', id: 'scope-notes-fr', url: SUPPLEMENT, version: '1', status: 'active', content: 'supplement', supplements: CS, language: 'fr',
  concept: [{ code: 'do', display: 'Ut' }, { code: 're', display: 'Ré' }],
};
/** Names the supplement; lists `do`. */
const inner = {
  resourceType: 'ValueSet', id: 'scope-inner', url: `${VS}inner`, status: 'active',
  extension: [{ url: NEEDS, valueCanonical: SUPPLEMENT }], compose: { include: [{ system: CS, concept: [{ code: 'do' }] }] },
};
/** Takes `re` from the code system itself and `do` through `inner`; names no supplement. */
const outer = {
  resourceType: 'ValueSet', id: 'scope-outer', url: `${VS}outer`, status: 'active',
  compose: { include: [{ system: CS, concept: [{ code: 're' }] }, { valueSet: [`${VS}inner`] }] },
};
/** The same, naming the supplement itself: it applies to both. */
const outerOwn = { ...outer, id: 'scope-outer-own', url: `${VS}outer-own`, extension: [{ url: NEEDS, valueCanonical: SUPPLEMENT }] };
/** Imports `outer`: `do` comes through `outer` and then `inner`, `re` through `outer` alone. */
const outermost = { resourceType: 'ValueSet', id: 'scope-outermost', url: `${VS}outermost`, status: 'active', compose: { include: [{ valueSet: [`${VS}outer`] }] } };

type Contains = { code: string; display?: string };
const displays = (r: OperationResponse) => Object.fromEntries(((r.body.expansion as { contains?: Contains[] }).contains ?? []).map((c) => [c.code, c.display]));
const used = (r: OperationResponse) => ((r.body.expansion as { parameter?: Param[] }).parameter ?? []).filter((p) => p.name === 'used-supplement').map((p) => p.valueUri);

await eachStore((kind, fresh) => {
  describe(`the scope of an imported value set's supplements (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const expand = (id: string) => postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}${id}` }, { name: 'displayLanguage', valueCode: 'fr' }]);
    const validate = (id: string, code: string, display: string) =>
      postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}${id}` }, { name: 'coding', valueCoding: { system: CS, code, display } }]);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [notes, french, inner, outer, outerOwn, outermost]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    test("$expand applies an import's supplement to the codes drawn through it only", async () => {
      const r = await expand('outer');
      expect(r.status).toBe(200);
      expect(displays(r)).toEqual({ re: 'Re', do: 'Ut' });
      expect(used(r)).toEqual([`${SUPPLEMENT}|1`]);
      expect(displays(await expand('outer-own'))).toEqual({ re: 'Ré', do: 'Ut' });
      // Two levels down: `do` is still drawn through `inner`.
      expect(displays(await expand('outermost'))).toEqual({ re: 'Re', do: 'Ut' });
    });

    test("$validate-code accepts the supplement's display only for a code drawn through the value set naming it", async () => {
      expect(outcome(await validate('outer', 'do', 'Ut'))).toMatchObject({ result: true });
      expect(outcome(await validate('outer', 're', 'Ré'))).toMatchObject({ result: false });
      expect(outcome(await validate('outer-own', 're', 'Ré'))).toMatchObject({ result: true });
      expect(outcome(await validate('outermost', 'do', 'Ut'))).toMatchObject({ result: true });
      expect(outcome(await validate('outermost', 're', 'Ré'))).toMatchObject({ result: false });
    });
  });
});
