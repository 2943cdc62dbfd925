/**
 * A resource claiming the R4 base definition of another type (`meta.profile` naming
 * `http://hl7.org/fhir/StructureDefinition/Observation` on a Patient, or `$validate?profile=` naming it)
 * cannot conform to it, as HL7's validator says (the profile's type is not the resource's); its own
 * type's base definition, and Resource's (and DomainResource's, but for Bundle, Binary and Parameters),
 * it meets. On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const SD = 'http://hl7.org/fhir/StructureDefinition/';

/** `severity expression: text` of each issue of an OperationOutcome. */
const issues = (outcome: Json) => (outcome.issue as Json[]).map((i) => `${i.severity} ${i.expression?.[0]}: ${i.details.text}`);

await eachStore((kind, fresh) => {
  describe(`base definitions as profiles on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterEach(() => t.close());

    test("a write claiming another type's base definition is refused, naming the claim", async () => {
      for (const [claim, base] of [[`${SD}Observation`, 'Observation'], [`${SD}Extension`, 'Extension'], [`${SD}string|4.0.1`, 'string'], [`${SD}Element`, 'Element']]) {
        const res = await api.post('Patient', { resourceType: 'Patient', meta: { profile: [`${SD}Patient`, claim] } });
        const outcome = await expectOutcome(res, 422);
        expect(issues(outcome)).toEqual([`error Patient.meta.profile[1]: The profile ${claim} is the base definition of ${base}, not of Patient`]);
      }
      // In a collection Bundle's entry too, at the entry.
      const bundle = await api.post('Bundle', {
        resourceType: 'Bundle', type: 'collection',
        entry: [{ fullUrl: 'urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0', resource: { resourceType: 'Patient', meta: { profile: [`${SD}Observation`] } } }],
      });
      expect(issues(await expectOutcome(bundle, 422))).toEqual([`error Bundle.entry[0].resource.meta.profile[0]: The profile ${SD}Observation is the base definition of Observation, not of Patient`]);
      expect(await countVersions(t)).toBe(0);
    });

    test('its own base definition, and Resource and DomainResource, a resource meets', async () => {
      const p = await api.create({ resourceType: 'Patient', meta: { profile: [`${SD}Patient`, `${SD}Patient|4.0.1`, `${SD}DomainResource`, `${SD}Resource`] } });
      expect(p.meta.profile).toHaveLength(4);
      const v = await api.post('Patient/$validate', { resourceType: 'Patient', meta: { profile: [`${SD}DomainResource`] } });
      expect(issues((await v.json()) as Json)).toEqual(['information undefined: No issues found: the resource is valid FHIR R4']);
      // A Binary is a Resource, not a DomainResource.
      expect((await api.create({ resourceType: 'Binary', contentType: 'text/plain', meta: { profile: [`${SD}Resource`] } })).meta.profile).toHaveLength(1);
      const binary = await api.post('Binary', { resourceType: 'Binary', contentType: 'text/plain', meta: { profile: [`${SD}DomainResource`] } });
      expect(issues(await expectOutcome(binary, 422))).toEqual([`error Binary.meta.profile[0]: The profile ${SD}DomainResource is the base definition of DomainResource, not of Binary`]);
    });

    test('$validate reports it, whether claimed or named by profile, not as a profile Cinder does not know', async () => {
      const claimed = await api.post('Patient/$validate', { resourceType: 'Patient', meta: { profile: [`${SD}Observation`] } });
      expect(claimed.status).toBe(200);
      expect(issues((await claimed.json()) as Json)).toEqual([`error Patient.meta.profile[0]: The profile ${SD}Observation is the base definition of Observation, not of Patient`]);
      const named = await api.post(`Patient/$validate?profile=${encodeURIComponent(`${SD}Observation`)}`, { resourceType: 'Patient' });
      expect(issues((await named.json()) as Json)).toEqual([`error profile: The profile ${SD}Observation is the base definition of Observation, not of Patient`]);
    });
  });
});
