/**
 * The concept extensions an expansion repeats on its `contains`, as HL7's reference terminology servers
 * repeat them (the ecosystem tests' `extensions` and `deprecated` suites): from the value set's
 * `compose.include.concept`, its presence deprecated (`valueset-deprecated`, a deprecated
 * standards-status), a definition for this value set (`valueset-concept-definition`) and its rendering;
 * from the code system and its supplements, the rendering (`rendering-style`, `rendering-xhtml`). Not the
 * others (an order, a label, an item weight, a status the code system gives the concept). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/ext-colours';
const SUPPLEMENT = 'http://cinder.test/CodeSystem/ext-colours-style';
const VS = 'http://cinder.test/ValueSet/ext-';
const SD = 'http://hl7.org/fhir/StructureDefinition/';
const style = (value: string) => ({ url: `${SD}rendering-style`, valueString: value });

const colours = {
  resourceType: 'CodeSystem', id: 'ext-colours', url: CS, version: '1', status: 'active', content: 'complete',
  concept: [
    { code: 'red', display: 'Red', extension: [style('color: red'), { url: `${SD}codesystem-label`, valueString: 'a.' }] },
    { code: 'green', display: 'Green', extension: [{ url: `${SD}structuredefinition-standards-status`, valueCode: 'deprecated' }] },
    { code: 'blue', display: 'Blue' },
  ],
};
const supplement = {
  resourceType: 'CodeSystem', id: 'ext-colours-style', url: SUPPLEMENT, version: '1', status: 'active', content: 'supplement', supplements: CS,
  concept: [{ code: 'blue', extension: [style('color: blue'), { url: `${SD}itemWeight`, valueDecimal: 3 }] }, { code: 'red', extension: [style('color: crimson')] }],
};
const listed = {
  resourceType: 'ValueSet', id: 'ext-listed', url: `${VS}listed`, status: 'active',
  compose: {
    include: [{
      system: CS,
      concept: [
        { code: 'red', extension: [{ url: `${SD}valueset-deprecated`, valueBoolean: true }, { url: `${SD}valueset-conceptOrder`, valueInteger: 2 }] },
        { code: 'green', extension: [{ url: `${SD}valueset-concept-definition`, valueString: 'The colour of grass' }, { url: `${SD}itemWeight`, valueDecimal: 1 }] },
        { code: 'blue', extension: [{ url: `${SD}structuredefinition-standards-status`, valueCode: 'deprecated' }] },
      ],
    }],
  },
};
const supplemented = {
  resourceType: 'ValueSet', id: 'ext-supplemented', url: `${VS}supplemented`, status: 'active',
  extension: [{ url: `${SD}valueset-supplement`, valueCanonical: SUPPLEMENT }], compose: { include: [{ system: CS }] },
};

type Contains = { code: string; extension?: Record<string, unknown>[] };
const extensions = (r: OperationResponse) => {
  expect(r.status).toBe(200);
  return Object.fromEntries(((r.body.expansion as { contains?: Contains[] }).contains ?? []).map((c) => [c.code, c.extension]));
};

await eachStore((kind, fresh) => {
  describe(`concept extensions in an expansion (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const expand = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$expand', parameter);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [colours, supplement, listed, supplemented]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    test("the code system's rendering is repeated; its other extensions are not", async () => {
      const inline = { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: CS }] } };
      expect(extensions(await expand([{ name: 'valueSet', resource: inline }]))).toEqual({ red: [style('color: red')], green: undefined, blue: undefined });
    });

    test("what the value set says of a concept it lists is repeated, before the code system's rendering", async () => {
      expect(extensions(await expand([{ name: 'url', valueUri: `${VS}listed` }]))).toEqual({
        red: [{ url: `${SD}valueset-deprecated`, valueBoolean: true }, style('color: red')],
        green: [{ url: `${SD}valueset-concept-definition`, valueString: 'The colour of grass' }],
        blue: [{ url: `${SD}structuredefinition-standards-status`, valueCode: 'deprecated' }],
      });
    });

    test("a supplement's rendering is repeated where the code system gives none", async () => {
      expect(extensions(await expand([{ name: 'url', valueUri: `${VS}supplemented` }]))).toEqual({ red: [style('color: red')], green: undefined, blue: [style('color: blue')] });
    });
  });
});
