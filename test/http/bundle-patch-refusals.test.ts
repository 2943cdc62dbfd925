/**
 * A transaction's PATCH entry whose result is not valid (R4's base definitions, or a profile it claims) is a
 * 422 that names its entry, as every other refusal of a transaction does: the issue is located in the patched
 * resource (`Patient.gender`), which is in no entry, and its text starts with `Bundle.entry[n]: `, so that a
 * client sending several patches of one type learns which one failed. Nothing is written. A batch's PATCH entry is
 * refused in its own entry, its issues named alike whether the base definitions or a profile refuse it. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BP = 'http://hl7.org/fhir/StructureDefinition/bp';
const bloodPressure = (id: string): Json => {
  const comp = (code: string, value: number) => ({ code: { coding: [{ system: 'http://loinc.org', code }] }, valueQuantity: { value, unit: 'mmHg', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' } });
  return {
    resourceType: 'Observation', id, meta: { profile: [BP] }, status: 'final',
    category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
    code: { coding: [{ system: 'http://loinc.org', code: '85354-9' }] },
    subject: { reference: 'Patient/a' }, effectiveDateTime: '2024-01-01',
    component: [comp('8480-6', 120), comp('8462-4', 80)],
  };
};
const fhirPathPatch = (part: Json[]) => ({ resourceType: 'Parameters', parameter: [{ name: 'operation', part }] });
const setGender = (gender: string) => fhirPathPatch([{ name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'gender' }, { name: 'value', valueCode: gender }]);
const removeComponent = { resourceType: 'Binary', contentType: 'application/json-patch+json', data: btoa(JSON.stringify([{ op: 'remove', path: '/component/0' }])) };

await eachStore((kind, fresh) => {
  describe(`a transaction's or batch's PATCH entry with an invalid result (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_VALIDATION: 'strict' } });
      api = fhirClient(t, await t.token());
      for (const id of ['a', 'b', 'c']) await api.put200({ resourceType: 'Patient', id });
      await api.put200(bloodPressure('bp1'));
    });
    afterAll(() => t.close());

    const transaction = (entry: Json[]) => api.post('', { resourceType: 'Bundle', type: 'transaction', entry });
    const versions = async () => Promise.all(['Patient/a', 'Patient/b', 'Patient/c', 'Observation/bp1'].map(async (r) => (await api.get(r)).headers.get('etag')));

    test('base validation: 422 located in the patched resource, naming the entry', async () => {
      const res = await transaction([
        { resource: setGender('male'), request: { method: 'PATCH', url: 'Patient/a' } },
        { resource: setGender('female'), request: { method: 'PATCH', url: 'Patient/b' } },
        { resource: setGender('bogus'), request: { method: 'PATCH', url: 'Patient/c' } },
      ]);
      const outcome = await expectOutcome(res, 422);
      expect(outcome.issue.map((i: Json) => ({ expression: i.expression, text: i.details.text.slice(0, 18), diagnostics: i.diagnostics.slice(0, 18) })))
        .toEqual([{ expression: ['Patient.gender'], text: 'Bundle.entry[2]: "', diagnostics: 'Bundle.entry[2]: "' }]);
      expect(await versions()).toEqual(['W/"1"', 'W/"1"', 'W/"1"', 'W/"1"']);
    });

    test('profile validation: 422 located in the patched resource, naming the entry', async () => {
      const res = await transaction([
        { resource: setGender('male'), request: { method: 'PATCH', url: 'Patient/a' } },
        { resource: removeComponent, request: { method: 'PATCH', url: 'Observation/bp1' } },
      ]);
      const outcome = await expectOutcome(res, 422);
      expect(outcome.issue.length).toBeGreaterThan(0);
      for (const issue of outcome.issue) {
        expect(issue.expression[0]).toStartWith('Observation.component');
        expect(issue.details.text).toStartWith('Bundle.entry[1]: ');
      }
      expect(await versions()).toEqual(['W/"1"', 'W/"1"', 'W/"1"', 'W/"1"']);
    });

    test('batch: a PATCH entry refused by the base definitions or by a profile names its entry alike, and the other entries are written', async () => {
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [
        { resource: setGender('bogus'), request: { method: 'PATCH', url: 'Patient/c' } },
        { resource: removeComponent, request: { method: 'PATCH', url: 'Observation/bp1' } },
        { resource: setGender('female'), request: { method: 'PATCH', url: 'Patient/b' } },
      ] });
      expect(res.status).toBe(200);
      const entries = ((await res.json()) as Json).entry as Json[];
      expect(entries.map((e) => e.response.status)).toEqual(['422 Unprocessable Entity', '422 Unprocessable Entity', '200 OK']);
      for (const [n, prefix] of [[0, 'Patient.gender'], [1, 'Observation.component']] as const) {
        const issues = entries[n]!.response.outcome.issue as Json[];
        expect(issues.length).toBeGreaterThan(0);
        for (const issue of issues) {
          expect(issue.expression[0]).toStartWith(prefix);
          expect(issue.details.text).toStartWith(`Bundle.entry[${n}]: `);
          expect(issue.diagnostics).toStartWith(`Bundle.entry[${n}]: `);
        }
      }
      expect(await versions()).toEqual(['W/"1"', 'W/"2"', 'W/"1"', 'W/"1"']);
    });
  });
});
