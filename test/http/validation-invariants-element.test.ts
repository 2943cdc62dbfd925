/**
 * An R4 invariant that sits on an element runs on that element's values: on each of a choice element's typed names
 * (`probabilityRange` of `probability[x]`), never on another element whose name merely begins with its name
 * (ElementDefinition's eld-3 sits on `max`, not on `maxValue[x]` nor `maxLength`). On writes and in `$validate`,
 * on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const URL = 'http://example.org/fhir/StructureDefinition/recent-patient';

/** A profile on Patient whose differential bounds birthDate (maxValueDate) and multipleBirthInteger. */
function profile(birthDate: Json, extra: Json[] = []): Json {
  return {
    resourceType: 'StructureDefinition', url: URL, name: 'RecentPatient', status: 'active', kind: 'resource', abstract: false,
    type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
    differential: { element: [{ id: 'Patient.birthDate', path: 'Patient.birthDate', ...birthDate }, ...extra] },
  };
}

const keyed = (outcome: Json, key: string) => (outcome.issue as Json[]).filter((i) => String(i.details?.text).endsWith(`(${key})`)).map((i) => `${i.severity} ${i.expression?.[0]}`);

await eachStore((kind, fresh) => {
  describe(`R4 invariants on elements (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test("eld-3 (max is a number or '*') does not judge maxValue[x] or maxLength: a profile bounding a date is stored", async () => {
      const bounded = profile({ minValueDate: '1900-01-01', maxValueDate: '2030-01-01' }, [
        { id: 'Patient.multipleBirth[x]', path: 'Patient.multipleBirth[x]', type: [{ code: 'integer' }], maxValueInteger: -1 },
        { id: 'Patient.name.family', path: 'Patient.name.family', maxLength: 40 },
      ]);
      const validated = (await (await api.post('StructureDefinition/$validate', bounded)).json()) as Json;
      expect(keyed(validated, 'eld-3')).toEqual([]);
      const res = await api.post('StructureDefinition', bounded);
      expect(res.status).toBe(201);
    });

    test('eld-3 still refuses a max that is no number, at the element', async () => {
      const before = await countVersions(t);
      const outcome = await expectOutcome(await api.post('StructureDefinition', profile({ max: 'many', maxValueDate: '2030-01-01' })), 422);
      expect(keyed(outcome, 'eld-3')).toEqual(['error StructureDefinition.differential.element[0].max']);
      expect(await countVersions(t)).toBe(before);
    });

    test("an invariant on a choice element runs on its typed name (ras-1 on a RiskAssessment's probabilityRange)", async () => {
      const risk = {
        resourceType: 'RiskAssessment', status: 'final', subject: { reference: 'Patient/p1' },
        prediction: [{ probabilityRange: { low: { value: 1, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' } } }],
      };
      const outcome = await expectOutcome(await api.post('RiskAssessment', risk), 422);
      expect(keyed(outcome, 'ras-1')).toEqual(['error RiskAssessment.prediction[0].probability']);
    });
  });
});
