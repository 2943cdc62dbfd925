/**
 * A tenant's profile's invariants hold when their expression is true: one that evaluates to nothing
 * fails, as R4's own invariants do and as HL7's validator reads every constraint (its
 * `evaluateToBoolean`). The published expressions HL7's validator rewrites because they give nothing where
 * their text asks nothing (vs-1's `($this as dateTime)` on a Period) are evaluated rewritten. On POST,
 * PUT and `$validate`, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE_URL = 'http://example.org/fhir/StructureDefinition/';

/** A tenant's profile on `type` whose element `path` carries one invariant. */
function profile(name: string, type: string, path: string, expression: string, severity = 'error'): Json {
  const el = (p: string, extra: Json = {}) => ({ id: p, path: p, short: p, definition: p, min: 0, max: '*', base: { path: p, min: 0, max: '*' }, ...extra });
  const elements = [el(type)];
  const constraint = [{ key: `${name}-1`, severity, human: `${name} holds`, expression }];
  if (path === type) elements[0] = el(type, { constraint });
  else elements.push(el(path, { max: '1', base: { path, min: 0, max: '1' }, constraint }));
  return {
    resourceType: 'StructureDefinition', id: name, url: BASE_URL + name, name, status: 'active', kind: 'resource', abstract: false,
    type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: { element: elements },
  };
}

const patient = (profileName: string, birthDate?: string): Json => ({
  resourceType: 'Patient', meta: { profile: [BASE_URL + profileName] }, ...(birthDate !== undefined && { birthDate }),
});

const glucose = (profileName: string | undefined, effective: Json): Json => ({
  resourceType: 'Observation', status: 'final', ...(profileName !== undefined && { meta: { profile: [BASE_URL + profileName] } }),
  code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] }, subject: { reference: 'Patient/p1' },
  valueQuantity: { value: 95, unit: 'mg/dL', system: 'http://unitsofmeasure.org', code: 'mg/dL' }, ...effective,
});

const issuesOf = (outcome: Json, severity: string) => (outcome.issue as Json[]).filter((i) => i.severity === severity).map((i) => `${i.expression?.[0]}: ${i.details.text}`);

await eachStore((kind, fresh) => {
  describe(`a tenant's profile invariants that evaluate to nothing (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      for (const sd of [
        // A date of a year against a day cannot be ordered: nothing.
        profile('born-since-1900', 'Patient', 'Patient.birthDate', '$this >= @1900-01-01'),
        profile('born-since-1900-w', 'Patient', 'Patient.birthDate', '$this >= @1900-01-01', 'warning'),
        // On the root: a Patient without a birthDate gives nothing.
        profile('adult', 'Patient', 'Patient', 'birthDate <= @2008-01-01'),
        // vs-1's published expression, as US Core's us-core-1 copies it onto a lab Observation.
        profile('day-precise', 'Observation', 'Observation.effective[x]', '($this as dateTime).toString().length() >= 8'),
      ]) expect((await api.put(`StructureDefinition/${sd.id}`, sd)).status).toBeLessThan(300);
    });
    afterAll(() => t.close());

    test('an invariant giving nothing is refused on POST and PUT, with the same error in $validate; true holds, false fails', async () => {
      const before = await countVersions(t);
      const yearOnly = patient('born-since-1900', '1900');
      const outcome = await expectOutcome(await api.post('Patient', yearOnly), 422);
      // The text says why: the expression gave nothing.
      expect(issuesOf(outcome, 'error')).toEqual([expect.stringMatching(/^Patient\.birthDate: .*born-since-1900 holds \(its expression gives no result here, which fails: .*\) \(born-since-1900-1\)$/)]);
      await expectOutcome(await api.put('Patient/y1', { ...yearOnly, id: 'y1' }), 422);
      const validated = (await (await api.post('Patient/$validate', yearOnly)).json()) as Json;
      expect(issuesOf(validated, 'error')).toEqual(issuesOf(outcome, 'error'));
      // A root invariant on an absent element: nothing, so refused.
      expect(issuesOf(await expectOutcome(await api.post('Patient', patient('adult')), 422), 'error')).toEqual([expect.stringMatching(/^Patient: .*\(adult-1\)$/)]);
      // False fails as before.
      await expectOutcome(await api.post('Patient', patient('born-since-1900', '1899-12-31')), 422);
      expect(await countVersions(t)).toBe(before);
      // True holds; an element absent leaves an invariant on it unevaluated.
      expect((await api.post('Patient', patient('born-since-1900', '1950-05-01'))).status).toBe(201);
      expect((await api.put('Patient/y2', { ...patient('born-since-1900', '1901'), id: 'y2' })).status).toBe(201);
      expect((await api.post('Patient', patient('born-since-1900'))).status).toBe(201);
      expect((await api.post('Patient', patient('adult', '1980-02-03'))).status).toBe(201);
    });

    test('a warning invariant giving nothing warns and keeps the write', async () => {
      const res = await api.post('Patient', patient('born-since-1900-w', '1900'));
      expect(res.status).toBe(201);
      const validated = (await (await api.post('Patient/$validate', patient('born-since-1900-w', '1900'))).json()) as Json;
      expect(issuesOf(validated, 'error')).toEqual([]);
      expect(issuesOf(validated, 'warning')).toEqual([expect.stringMatching(/^Patient\.birthDate: .*\(born-since-1900-w-1\)$/)]);
    });

    test("vs-1's published expression is evaluated as HL7's validator rewrites it: a Period passes, a dateTime must be precise to the day", async () => {
      expect((await api.post('Observation', glucose('day-precise', { effectivePeriod: { start: '2024-01-02T08:00:00Z', end: '2024-01-02T09:00:00Z' } }))).status).toBe(201);
      expect((await api.post('Observation', glucose('day-precise', { effectiveDateTime: '2024-01-02' }))).status).toBe(201);
      const outcome = await expectOutcome(await api.post('Observation', glucose('day-precise', { effectiveDateTime: '2024-01' })), 422);
      expect(issuesOf(outcome, 'error')).toEqual([expect.stringMatching(/^Observation\.effective\.ofType\(dateTime\): .*\(day-precise-1\)$/)]);
      // R4's vitalsigns, held to a heart rate unclaimed, has the same vs-1: a heart rate over a Period is kept.
      const heartRate = {
        resourceType: 'Observation', status: 'final',
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
        code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] }, subject: { reference: 'Patient/p1' },
        effectivePeriod: { start: '2024-01-02T08:00:00Z', end: '2024-01-02T08:05:00Z' },
        valueQuantity: { value: 72, unit: 'beats/minute', system: 'http://unitsofmeasure.org', code: '/min' },
      };
      expect((await api.post('Observation', heartRate)).status).toBe(201);
      const { effectivePeriod: _p, ...noPeriod } = heartRate;
      expect(issuesOf(await expectOutcome(await api.post('Observation', { ...noPeriod, effectiveDateTime: '2024' }), 422), 'error').join()).toContain('vs-1');
    });

    test("R4's substanceExposureRisk extension: its inv-1, which named AllergyIntolerance's elements from the extension, asks only that the resource have no code", async () => {
      const allergy = (extra: Json) => ({
        resourceType: 'AllergyIntolerance', patient: { reference: 'Patient/p1' },
        clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/allergyintolerance-clinical', code: 'active' }] },
        extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/allergyintolerance-substanceExposureRisk', extension: [{ url: 'substance', valueCodeableConcept: { text: 'peanut' } }] }],
        ...extra,
      });
      const inv1 = async (r: Json) => issuesOf((await (await api.post('AllergyIntolerance/$validate', r)).json()) as Json, 'error').filter((i) => i.endsWith('(inv-1)'));
      expect(await inv1(allergy({}))).toEqual([]);
      expect(await inv1(allergy({ code: { text: 'peanut' } }))).toEqual([expect.stringMatching(/^AllergyIntolerance\.extension\[0\]: /)]);
    });
  });
});
