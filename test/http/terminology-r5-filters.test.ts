/**
 * R5's filter operators `child-of` (the direct children of a concept) and `descendent-leaf` (its descendants that
 * have none), which the reference terminology servers evaluate in content written for R5: Cinder evaluates them in a
 * request's inline value set, on `$expand` and `$validate-code` alike, while a stored R4 ValueSet cannot name them
 * (R4's FilterOperator binding is required). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { postOperation, putResource } from '../helpers/terminology-http.ts';

type Json = Record<string, any>;

const CS = 'http://cinder.test/CodeSystem/r5f-tree';
const tree = {
  resourceType: 'CodeSystem', id: 'r5f-tree', url: CS, status: 'active', content: 'complete', hierarchyMeaning: 'is-a',
  concept: [{
    code: 'root', display: 'Root',
    concept: [
      { code: 'a', display: 'A', concept: [{ code: 'a1', display: 'A1' }, { code: 'a2', display: 'A2', concept: [{ code: 'a2x', display: 'A2x' }] }] },
      { code: 'b', display: 'B' },
    ],
  }],
};
const inline = (op: string, value: string) => ({ resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: CS, filter: [{ property: 'concept', op, value }] }] } });

await eachStore((kind, fresh) => {
  describe(`R5 filter operators child-of and descendent-leaf (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      await putResource(t, token, tree);
    });
    afterAll(() => t.close());

    const expanded = async (op: string, value: string) => {
      const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'valueSet', resource: inline(op, value) }]);
      expect(r.status).toBe(200);
      return (((r.body.expansion as Json).contains ?? []) as Json[]).map((c) => c.code).sort();
    };

    test('child-of lists the direct children, descendent-leaf the descendants without children', async () => {
      expect(await expanded('child-of', 'root')).toEqual(['a', 'b']);
      expect(await expanded('child-of', 'a')).toEqual(['a1', 'a2']);
      expect(await expanded('child-of', 'a1')).toEqual([]);
      expect(await expanded('descendent-leaf', 'root')).toEqual(['a1', 'a2x', 'b']);
      expect(await expanded('descendent-leaf', 'a2')).toEqual(['a2x']);
      // A leaf has no descendants; an unknown code none either.
      expect(await expanded('descendent-leaf', 'b')).toEqual([]);
      expect(await expanded('child-of', 'nowhere')).toEqual([]);
    });

    test('$validate-code agrees with the expansion', async () => {
      const valid = async (op: string, value: string, code: string) => {
        const r = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'valueSet', resource: inline(op, value) }, { name: 'coding', valueCoding: { system: CS, code } }]);
        expect(r.status).toBe(200);
        return (r.body.parameter as Json[]).find((p) => p.name === 'result')?.valueBoolean;
      };
      expect([await valid('child-of', 'a', 'a2'), await valid('child-of', 'a', 'a2x'), await valid('child-of', 'a', 'a')]).toEqual([true, false, false]);
      expect([await valid('descendent-leaf', 'a', 'a2x'), await valid('descendent-leaf', 'a', 'a2'), await valid('descendent-leaf', 'a', 'a')]).toEqual([true, false, false]);
    });

    test('a stored R4 ValueSet cannot name them: the write is refused at the operator', async () => {
      const res = await t.request(`${t.fhir('t1')}/ValueSet/r5f-child`, fhirInit(token, 'PUT', { ...inline('child-of', 'a'), id: 'r5f-child', url: 'http://cinder.test/ValueSet/r5f-child' }));
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect(JSON.stringify(await res.json())).toContain('ValueSet.compose.include[0].filter[0].op');
    });
  });
});
