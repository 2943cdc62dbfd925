/**
 * The systems and URIs a write carries, as HL7's validator judges them: a Coding's or an Identifier's
 * `system` is an absolute URI (not a local name such as `MRN`), and a uri, url or canonical does not
 * name an OID or UUID as `oid:`/`uuid:` nor hold a `urn:oid:` that is no OID; an extension's url is
 * absolute, but for the parts of a complex extension; a language code is a BCP 47 tag. On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/** `expression code` of each issue of a refused write (422). */
async function refusedAt(res: Response): Promise<string[]> {
  const outcome = await expectOutcome(res, 422);
  return (outcome.issue as Json[]).map((i) => `${i.expression[0]} ${i.code}`).sort();
}

await eachStore((kind, fresh) => {
  describe(`systems and URIs on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterEach(() => t.close());

    test("a Coding's system that is a local name is refused, wherever the Coding is", async () => {
      const res = await api.post('Patient', {
        resourceType: 'Patient',
        meta: { tag: [{ system: 'mytags', code: 'a' }] },
        maritalStatus: { coding: [{ system: 'marital', code: 'M' }] },
      });
      expect(await refusedAt(res)).toEqual(['Patient.maritalStatus.coding[0].system value', 'Patient.meta.tag[0].system value']);
      expect(await countVersions(t)).toBe(0);
      const obs = await api.post('Observation', { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'LOINC', code: '8867-4' }] } });
      expect(await refusedAt(obs)).toEqual(['Observation.code.coding[0].system value']);
    });

    test("an Identifier's system that is a local name is refused; absolute systems of every scheme are kept", async () => {
      const res = await api.post('Patient', { resourceType: 'Patient', identifier: [{ system: 'MRN', value: '12345' }] });
      const outcome = await expectOutcome(res, 422);
      expect(outcome.issue[0].expression).toEqual(['Patient.identifier[0].system']);
      expect(outcome.issue[0].details.text).toContain('"MRN" is not an absolute URI');
      const good = await api.create({
        resourceType: 'Patient',
        identifier: [
          { system: 'http://hospital.example.org/mrn', value: '1' },
          { system: 'urn:oid:2.16.840.1.113883.4.1', value: '2' },
          { system: 'urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0', value: '3' },
          { system: 'urn:ietf:rfc:3986', value: 'urn:uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e1' },
        ],
        maritalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: 'M' }] },
      });
      expect(good.identifier).toHaveLength(4);
    });

    test('a uri naming an OID or UUID as oid: or uuid:, or a urn:oid: that is no OID, is refused', async () => {
      const res = await api.post('Patient', {
        resourceType: 'Patient',
        identifier: [{ system: 'oid:2.16.840.1.113883.4.1', value: '1' }, { system: 'uuid:0c3151bd-1cbf-4d64-b04d-cd9187a4c6e0', value: '2' }, { system: 'urn:oid:2.16.840.1.abc', value: '3' }],
        meta: { profile: ['urn:oid:1.2.x'] },
      });
      expect(await refusedAt(res)).toEqual([
        'Patient.identifier[0].system value', 'Patient.identifier[1].system value', 'Patient.identifier[2].system value', 'Patient.meta.profile[0] value',
      ]);
      // A canonical's version, and R4's `system|version` in an expansion's uri parameter, follow the OID.
      const vs = await api.create({
        resourceType: 'ValueSet', status: 'active', url: 'urn:oid:2.16.840.1.113883.3.1|1.0',
        expansion: { timestamp: '2024-01-01T00:00:00Z', parameter: [{ name: 'version', valueUri: 'urn:oid:1.2.36.1.2001.1001.101.104.16592|4.0.1' }] },
      });
      expect(vs.url).toBe('urn:oid:2.16.840.1.113883.3.1|1.0');
    });

    test("an extension's url that is relative is refused, but for the parts of a complex extension", async () => {
      const res = await api.post('Patient', {
        resourceType: 'Patient',
        extension: [{ url: 'race', valueString: 'x' }, { url: 'http://example.org/fhir/StructureDefinition/complex', extension: [{ url: 'part', valueString: 'y' }] }],
        birthDate: '1970', _birthDate: { extension: [{ url: 'time', valueDateTime: '1970-01-01T10:00:00Z' }] },
      });
      expect(await refusedAt(res)).toEqual(['Patient.birthDate.extension[0].url value', 'Patient.extension[0].url value']);
      const kept = await api.create({ resourceType: 'Patient', extension: [{ url: 'http://example.org/fhir/StructureDefinition/complex', extension: [{ url: 'part', valueString: 'y' }] }] });
      expect(kept.extension[0].extension[0].url).toBe('part');
    });

    test('a language code is a BCP 47 tag, as all-languages, the maxValueSet of its preferred binding, holds it', async () => {
      const res = await api.post('Patient', { resourceType: 'Patient', language: 'en_US', photo: [{ url: 'http://example.org/p.png', language: 'english!' }] });
      const outcome = await expectOutcome(res, 422);
      expect((outcome.issue as Json[]).map((i) => `${i.expression[0]} ${i.code}`).sort()).toEqual(['Patient.language code-invalid', 'Patient.photo[0].language code-invalid']);
      expect(outcome.issue[0].details.text).toContain('is not a valid language code, so it is not in http://hl7.org/fhir/ValueSet/all-languages');
      for (const language of ['en', 'en-US', 'zh-Hant-TW', 'de-CH-1901', 'x-klingon', 'i-klingon']) {
        expect((await api.create({ resourceType: 'Patient', language })).language).toBe(language);
      }
      // A CodeableConcept of a language (Patient.communication) may still be text alone.
      expect((await api.create({ resourceType: 'Patient', communication: [{ language: { text: 'Plattdeutsch' } }] })).communication).toHaveLength(1);
    });

    test('$validate reports the same problems, and a transaction with one writes nothing', async () => {
      const v = await api.post('Patient/$validate', { resourceType: 'Patient', identifier: [{ system: 'MRN', value: '1' }] });
      expect(v.status).toBe(200);
      const issues = ((await v.json()) as Json).issue as Json[];
      expect(issues.map((i) => `${i.severity} ${i.expression[0]}`)).toEqual(['error Patient.identifier[0].system']);
      const tx = await api.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { resource: { resourceType: 'Patient', identifier: [{ system: 'http://example.org/mrn', value: '1' }] }, request: { method: 'POST', url: 'Patient' } },
          { resource: { resourceType: 'Patient', identifier: [{ system: 'ssn', value: '2' }] }, request: { method: 'POST', url: 'Patient' } },
        ],
      });
      expect(await refusedAt(tx)).toEqual(['Bundle.entry[1].resource.identifier[0].system value']);
      expect(await countVersions(t)).toBe(0);
    });
  });
});
