/**
 * The code systems a false `$validate-code` answer rests on and the server does not have, named as the
 * HL7 reference terminology servers name them (tx ecosystem requirements): `x-caused-by-unknown-system`
 * (`url` or `url|version`) when the value set, or CodeSystem/$validate-code, needs one it does not
 * have; `x-unknown-system` when only the coding's system is unknown. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { getOperation, type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/review-versions';
const MISSING = 'http://cinder.test/CodeSystem/not-here';
const VS = 'http://cinder.test/ValueSet/review-';

const codeSystem = (id: string, version: string, codes: string[]) => ({
  resourceType: 'CodeSystem', id, url: CS, version, status: 'active', content: 'complete', concept: codes.map((code) => ({ code, display: code.toUpperCase() })),
});
const valueSet = (id: string, include: Record<string, unknown>[]) => ({ resourceType: 'ValueSet', id: `review-${id}`, url: VS + id, status: 'active', compose: { include } });

/** The values of the output parameter `name`. */
const values = (r: OperationResponse, name: string): unknown[] => (r.body.parameter ?? []).filter((p) => p.name === name).map((p) => p.valueCanonical);
const result = (r: OperationResponse): unknown => r.body.parameter?.find((p) => p.name === 'result')?.valueBoolean;
const issueTypes = (r: OperationResponse): string[] =>
  ((r.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue?: { details: { coding: { code: string }[] } }[] } | undefined)?.issue ?? []).map((i) => i.details.coding[0]!.code);

await eachStore((kind, fresh) => {
  describe(`$validate-code and unknown code systems (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [
        codeSystem('review-v1', '1.0.0', ['a', 'b']),
        codeSystem('review-v2', '2.0.0', ['a', 'b', 'c']),
        valueSet('missing', [{ system: MISSING }]),
        valueSet('pinned-missing', [{ system: CS, version: '9.9.9' }]),
        valueSet('pinned', [{ system: CS, version: '1.0.0' }]),
        valueSet('any', [{ system: CS }]),
      ]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    const validate = (vs: string, parameter: Param[]) => postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: VS + vs }, ...parameter]);

    test('a value set including a code system the server does not have: caused by it, not "not in the value set"', async () => {
      const r = await validate('missing', [{ name: 'system', valueUri: MISSING }, { name: 'code', valueCode: 'x' }]);
      expect(result(r)).toBe(false);
      expect(values(r, 'x-caused-by-unknown-system')).toEqual([MISSING]);
      expect(values(r, 'x-unknown-system')).toEqual([]);
      expect(issueTypes(r)).not.toContain('not-in-vs');
    });

    test('a version of the code system that the server does not have, in the coding or pinned by the value set', async () => {
      const coded = await validate('any', [{ name: 'coding', valueCoding: { system: CS, version: '3.0.0', code: 'a' } }]);
      expect(result(coded)).toBe(false);
      expect(values(coded, 'x-caused-by-unknown-system')).toEqual([`${CS}|3.0.0`]);
      const pinned = await validate('pinned-missing', [{ name: 'system', valueUri: CS }, { name: 'code', valueCode: 'a' }]);
      expect(result(pinned)).toBe(false);
      expect(values(pinned, 'x-caused-by-unknown-system')).toEqual([`${CS}|9.9.9`]);
      const both = await validate('pinned-missing', [{ name: 'coding', valueCoding: { system: CS, version: '1.0.0', code: 'a' } }]);
      expect(values(both, 'x-caused-by-unknown-system')).toEqual([`${CS}|9.9.9`]);
      const concept = await validate('pinned', [{ name: 'codeableConcept', valueCodeableConcept: { coding: [
        { system: CS, version: '4.0.0', code: 'a' }, { system: MISSING, code: 'x' },
      ] } }]);
      expect(result(concept)).toBe(false);
      expect(values(concept, 'x-caused-by-unknown-system')).toEqual([`${CS}|4.0.0`]);
      expect(values(concept, 'x-unknown-system')).toEqual([MISSING]);
    });

    test('a coding of an unknown system that the value set does not use is x-unknown-system; known systems are neither', async () => {
      const r = await validate('any', [{ name: 'system', valueUri: MISSING }, { name: 'code', valueCode: 'x' }]);
      expect(result(r)).toBe(false);
      expect(values(r, 'x-unknown-system')).toEqual([MISSING]);
      expect(values(r, 'x-caused-by-unknown-system')).toEqual([]);
      expect(issueTypes(r)).toContain('not-in-vs');
      const known = await validate('pinned', [{ name: 'system', valueUri: CS }, { name: 'code', valueCode: 'c' }]);
      expect(result(known)).toBe(false);
      expect(values(known, 'x-caused-by-unknown-system')).toEqual([]);
      expect(values(known, 'x-unknown-system')).toEqual([]);
      const good = await validate('pinned', [{ name: 'system', valueUri: CS }, { name: 'code', valueCode: 'a' }]);
      expect(result(good)).toBe(true);
      expect(values(good, 'x-caused-by-unknown-system')).toEqual([]);
    });

    test('CodeSystem/$validate-code of a code system (or version) the server does not have: false, caused by it', async () => {
      const unknown = await getOperation(t, token, 'CodeSystem/$validate-code', { url: MISSING, code: 'x' });
      expect(unknown.status).toBe(200);
      expect(result(unknown)).toBe(false);
      expect(values(unknown, 'x-caused-by-unknown-system')).toEqual([MISSING]);
      expect(unknown.body.parameter?.find((p) => p.name === 'message')?.valueString).toBe(
        `A definition for CodeSystem '${MISSING}' could not be found, so the code cannot be validated`,
      );
      const version = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'coding', valueCoding: { system: CS, version: '7', code: 'a' } }]);
      expect(version.status).toBe(200);
      expect(result(version)).toBe(false);
      expect(values(version, 'x-caused-by-unknown-system')).toEqual([`${CS}|7`]);
      const known = await getOperation(t, token, 'CodeSystem/$validate-code', { url: CS, code: 'c' });
      expect(result(known)).toBe(true);
      expect(values(known, 'x-caused-by-unknown-system')).toEqual([]);
    });
  });
});
