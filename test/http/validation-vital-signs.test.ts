/**
 * R4 (observation-vitalsigns.html): an Observation of a vital sign SHALL conform to its vital signs
 * profile. As HL7's validator does (its test cases obs-temp-bad and obs-vs-1), an Observation whose code
 * holds one of the LOINC or SNOMED CT codes of a vital sign is checked against that profile whether or not
 * it claims it: on writes (POST, PUT, a transaction's entries) and in `$validate`, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { operatorAccess } from '../../src/fhir/access.ts';
import { updateResource } from '../../src/fhir/crud.ts';

const LOINC = 'http://loinc.org';
const SCT = 'http://snomed.info/sct';
const UCUM = 'http://unitsofmeasure.org';
const BODYTEMP = 'http://hl7.org/fhir/StructureDefinition/bodytemp';
const VITAL_SIGNS = [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }];

/** A body temperature as R4's bodytemp profile wants it, claiming no profile. */
function temperature(extra: Json = {}): Json {
  return {
    resourceType: 'Observation', status: 'final', category: VITAL_SIGNS,
    code: { coding: [{ system: LOINC, code: '8310-5' }] },
    subject: { reference: 'Patient/p1' }, effectiveDateTime: '2024-03-01T08:30:00Z',
    valueQuantity: { value: 37.2, unit: 'Cel', system: UCUM, code: 'Cel' },
    ...extra,
  };
}

const errorsAt = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error').map((i) => i.expression[0]).sort();

await eachStore((kind, fresh) => {
  describe(`vital signs held to their profile unclaimed (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a body temperature without the category, subject and time bodytemp asks for is refused; with them it is written', async () => {
      const { category: _c, subject: _s, effectiveDateTime: _e, ...bare } = temperature();
      const refused = await expectOutcome(await api.post('Observation', bare), 422);
      expect(errorsAt(refused)).toEqual(['Observation.category', 'Observation.category', 'Observation.effective', 'Observation.subject']);
      for (const i of refused.issue as Json[]) expect(i.details.text).toContain(BODYTEMP);
      expect(errorsAt(await expectOutcome(await api.put('Observation/t1', { ...bare, id: 't1' }), 422))).toEqual(errorsAt(refused));
      expect(await countVersions(t)).toBe(0);
      // A unit of no temperature: bodytemp binds the unit to ucum-bodytemp (required).
      const kelvin = await expectOutcome(await api.post('Observation', temperature({ valueQuantity: { value: 37.2, unit: 'cm', system: UCUM, code: 'cm' } })), 422);
      expect(errorsAt(kelvin)).toEqual(['Observation.value.ofType(Quantity).code']);
      expect((await api.post('Observation', temperature())).status).toBe(201);
      expect((await api.put('Observation/t1', { ...temperature(), id: 't1' })).status).toBe(201);
    });

    test("$validate tells which profile R4 requires and why, and gives the profile's errors", async () => {
      const { subject: _s, ...bare } = temperature();
      const body = (await (await api.post('Observation/$validate', bare)).json()) as Json;
      const why = (body.issue as Json[]).find((i) => i.severity === 'information' && i.details.text.includes(BODYTEMP));
      expect(why).toMatchObject({ expression: ['Observation'] });
      expect(why!.details.text).toContain('LOINC code 8310-5');
      expect(errorsAt(body)).toEqual(['Observation.subject']);
      // Claimed as well: checked once.
      const claimed = (await (await api.post('Observation/$validate', { ...bare, meta: { profile: [BODYTEMP] } })).json()) as Json;
      expect(errorsAt(claimed)).toEqual(['Observation.subject']);
    });

    test("a SNOMED CT code of a vital sign asks for the profile too, and so for the profile's LOINC code (HL7's obs-temp-bad)", async () => {
      const sct = temperature({ code: { coding: [{ system: SCT, code: '276885007' }] } });
      const refused = await expectOutcome(await api.post('Observation', sct), 422);
      expect(errorsAt(refused)).toEqual(['Observation.code.coding']);
      expect(refused.issue[0].details.text).toContain(BODYTEMP);
      expect((await api.post('Observation', temperature({ code: { coding: [{ system: SCT, code: '276885007' }, { system: LOINC, code: '8310-5' }] } }))).status).toBe(201);
      // A code of no vital sign, or a vital sign's code in another system, asks for nothing beyond R4's Observation.
      const { category: _c, subject: _s, effectiveDateTime: _e, ...bare } = temperature();
      expect((await api.post('Observation', { ...bare, code: { coding: [{ system: LOINC, code: '2339-0' }] } })).status).toBe(201);
      expect((await api.post('Observation', { ...bare, code: { coding: [{ system: 'http://example.org/codes', code: '8310-5' }] } })).status).toBe(201);
    });

    test('a vital sign inside a resource: a contained one is checked with its container, a transaction entry writes nothing', async () => {
      const { subject: _s, ...noSubject } = temperature();
      const report = {
        resourceType: 'DiagnosticReport', status: 'final', code: { text: 'observations' },
        contained: [{ ...noSubject, id: 'temp' }], result: [{ reference: '#temp' }],
      };
      expect(errorsAt(await expectOutcome(await api.post('DiagnosticReport', report), 422))).toEqual(['DiagnosticReport.contained[0].subject']);
      const before = await countVersions(t);
      const transaction = {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { resource: { resourceType: 'Patient', name: [{ family: 'Chalmers' }] }, request: { method: 'POST', url: 'Patient' } },
          { resource: noSubject, request: { method: 'POST', url: 'Observation' } },
        ],
      };
      const outcome = await expectOutcome(await api.post('', transaction), 422);
      expect(errorsAt(outcome)).toEqual(['Bundle.entry[1].resource.subject']);
      expect(await countVersions(t)).toBe(before);
      // $validate of the transaction finds what its write refuses (it found nothing: a transaction's entries were not checked against their profiles).
      const validated = (await (await api.post('Bundle/$validate', transaction)).json()) as Json;
      expect(errorsAt(validated)).toEqual(['Bundle.entry[1].resource.subject']);
      // A subject named by an entry's urn:uuid is of that entry's type: a Group is no Patient, in $validate as in the write, and in a stored collection.
      const group = 'urn:uuid:6f1c2a3b-0000-4000-8000-00000000000a';
      const ofGroup = {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { fullUrl: group, resource: { resourceType: 'Group', type: 'person', actual: true }, request: { method: 'POST', url: 'Group' } },
          { resource: temperature({ subject: { reference: group } }), request: { method: 'POST', url: 'Observation' } },
        ],
      };
      expect(errorsAt((await (await api.post('Bundle/$validate', ofGroup)).json()) as Json)).toEqual(['Bundle.entry[1].resource.subject.reference']);
      expect((await api.post('', ofGroup)).status).toBe(422);
      const collection = { resourceType: 'Bundle', type: 'collection', entry: [{ fullUrl: group, resource: { resourceType: 'Group', type: 'person', actual: true } }, { fullUrl: 'urn:uuid:6f1c2a3b-0000-4000-8000-00000000000b', resource: temperature({ subject: { reference: group } }) }] };
      expect(errorsAt(await expectOutcome(await api.post('Bundle', collection), 422))).toEqual(['Bundle.entry[1].resource.subject.reference']);
      expect(await countVersions(t)).toBe(before);
    });

    test('a vital sign stored before it was held to its profile stays readable; an update must carry the fixes, even one marking it entered-in-error; DELETE removes it (README, validate)', async () => {
      const { category: _c, ...legacy } = temperature();
      await updateResource({ store: t.store, clock: t.clock, validation: 'off' }, { tenant: 't1', access: operatorAccess }, 'Observation', 'old1', { ...legacy, id: 'old1' });
      expect((await api.get('Observation/old1')).status).toBe(200);
      const refused = await expectOutcome(await api.put('Observation/old1', { ...legacy, id: 'old1', status: 'entered-in-error' }), 422);
      expect(errorsAt(refused)).toEqual(['Observation.category', 'Observation.category']);
      expect((await api.put('Observation/old1', { ...temperature(), id: 'old1', status: 'entered-in-error' })).status).toBe(200);
      await updateResource({ store: t.store, clock: t.clock, validation: 'off' }, { tenant: 't1', access: operatorAccess }, 'Observation', 'old2', { ...legacy, id: 'old2' });
      expect([200, 204]).toContain((await api.del('Observation/old2')).status);
    });

    test("a component's value need not be a vital sign's unit (R4's binding, taken as extensible as HL7's validator takes it): a warning in $validate", async () => {
      // An oxygen saturation by pulse oximetry (oxygensat's own code beside it) with the inhaled oxygen flow (L/min) as a component (HL7's obs-fio2).
      const saturation = temperature({
        code: { coding: [{ system: LOINC, code: '2708-6' }, { system: LOINC, code: '59408-5' }] },
        valueQuantity: { value: 95, unit: '%', system: UCUM, code: '%' },
        component: [{ code: { coding: [{ system: LOINC, code: '3151-8' }] }, valueQuantity: { value: 6, unit: 'L/min', system: UCUM, code: 'L/min' } }],
      });
      expect((await api.post('Observation', saturation)).status).toBe(201);
      const body = (await (await api.post('Observation/$validate', saturation)).json()) as Json;
      expect(errorsAt(body)).toEqual([]);
      const warning = (body.issue as Json[]).find((i) => i.expression?.[0] === 'Observation.component[0].value.ofType(Quantity)');
      expect(warning).toMatchObject({ severity: 'warning' });
      expect(warning!.details.text).toContain('http://hl7.org/fhir/ValueSet/ucum-vitals-common');
    });
  });
});
