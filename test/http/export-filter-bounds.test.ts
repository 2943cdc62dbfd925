/**
 * `_typeFilter` is bounded: its type's scan probes every row it reads against each query of the type, and
 * the job keeps every value. At most 32 queries of one type, 1,000 values of one type (searched
 * together, one search's bound) and 10,000 in all; beyond, a 400 `too-costly` whatever the handling. On
 * both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, observation, patient, put, refs } from '../helpers/export.ts';

const TYPES = ['Patient', 'Observation', 'Condition', 'Encounter', 'Procedure', 'Immunization', 'AllergyIntolerance', 'MedicationRequest', 'DiagnosticReport', 'Organization', 'Practitioner'];
const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(',');

await eachStore((kind, fresh) => {
  describe(`_typeFilter bounds (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      await put(t, patient('p1'));
      for (let i = 0; i < 40; i++) await put(t, observation(`o${i}`, 'p1', `c${i}`));
    });
    afterEach(() => t.close());

    const kick = (types: string[], typeFilters: string[], headers: Record<string, string> = {}) =>
      t.request(t.fhir() + '/$export', fhirInit(token, 'POST', {
        resourceType: 'Parameters',
        parameter: [{ name: '_type', valueString: types.join(',') }, ...typeFilters.map((f) => ({ name: '_typeFilter', valueString: f }))],
      }, headers));

    async function tooCostly(res: Response): Promise<string> {
      expect(res.status).toBe(400);
      const body = (await res.json()) as { issue: { code: string; expression: string[]; details: { text: string } }[] };
      expect(body.issue[0]!.code).toBe('too-costly');
      expect(body.issue[0]!.expression).toEqual(['_typeFilter']);
      return body.issue[0]!.details.text;
    }

    test('32 queries of a type are searched, ORed; a 33rd is a 400 too-costly, lenient or not', async () => {
      const queries = Array.from({ length: 33 }, (_, i) => `Observation?code=c${i}`);
      const res = await kick(['Observation'], queries.slice(0, 32));
      expect(res.status).toBe(202);
      const files = await download(t, token, (await finish(t, token, res.headers.get('content-location')!)).output);
      expect(refs(files)).toEqual(Array.from({ length: 32 }, (_, i) => `Observation/o${i}`).sort());
      for (const headers of [{}, { Prefer: 'handling=lenient' }] as Record<string, string>[]) {
        expect(await tooCostly(await kick(['Observation'], queries, headers))).toContain('more than 32 queries of Observation');
      }
    });

    test("a type's queries hold at most 1,000 values together, and a kick-off's 10,000", async () => {
      const res = await kick(['Observation'], [`Observation?_id=${ids('x', 499)},o3`, `Observation?code=${ids('y', 499)},c5`]);
      expect(res.status).toBe(202);
      const files = await download(t, token, (await finish(t, token, res.headers.get('content-location')!)).output);
      expect(refs(files)).toEqual(['Observation/o3', 'Observation/o5']);
      const over = await kick(['Observation'], [`Observation?_id=${ids('x', 500)}`, `Observation?code=${ids('y', 501)}`]);
      expect(await tooCostly(over)).toContain('queries of Observation hold more than 1000 values together');
      expect((await kick(TYPES.slice(0, 10), TYPES.slice(0, 10).map((type) => `${type}?_id=${ids('x', 1000)}`))).status).toBe(202);
      expect(await tooCostly(await kick(TYPES, TYPES.map((type) => `${type}?_id=${ids('x', 1000)}`)))).toContain('more than 10000 values');
    });
  });
});
