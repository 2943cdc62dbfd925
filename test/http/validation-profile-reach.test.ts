/**
 * A tenant's profile (and extension definition) that the request may not read is not quoted in validation
 * messages (readsProfiles, `withheld` in src/fhir/validation/profile/profile-check.ts): a write claiming it is
 * still refused, with one error at the claim that says nothing of its rules; `$validate` answers the same; a token
 * that reads StructureDefinitions is told every problem; R4 core's profiles are told to anyone. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const PROFILE = 'http://example.org/fhir/StructureDefinition/secret-patient';
const EXTENSION = 'http://example.org/fhir/StructureDefinition/secret-extension';
const el = (id: string, min: number, max: string, extra: Json = {}) => ({ id, path: id.replace(/:[^.]*/g, ''), short: id, definition: id, min, max, base: { path: id.replace(/:[^.]*/g, ''), min: 0, max: '*' }, ...extra });
const profile = {
  resourceType: 'StructureDefinition', id: 'secret-patient', url: PROFILE, name: 'SecretPatient', status: 'active', kind: 'resource', abstract: false,
  type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
  snapshot: { element: [
    el('Patient', 0, '*', { constraint: [{ key: 'sec-1', severity: 'error', human: 'SECRET-HUMAN rule', expression: "gender = 'female'" }] }),
    el('Patient.name', 2, '*'),
    el('Patient.gender', 1, '1', { fixedCode: 'female' }),
    el('Patient.maritalStatus', 1, '1'),
  ] },
};
const extension = {
  resourceType: 'StructureDefinition', id: 'secret-extension', url: EXTENSION, name: 'SecretExtension', status: 'active', kind: 'complex-type', abstract: false,
  context: [{ type: 'element', expression: 'Patient' }], type: 'Extension', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension', derivation: 'constraint', fhirVersion: '4.0.1',
  snapshot: { element: [
    el('Extension', 0, '*'),
    el('Extension.url', 1, '1', { fixedUri: EXTENSION, type: [{ code: 'uri' }] }),
    el('Extension.value[x]', 1, '1', { type: [{ code: 'string' }], patternString: 'SECRET-PATTERN' }),
  ] },
};
/** A profile whose differential cannot give a snapshot (a max above the base's): unusable, for a reason naming its element. */
const BROKEN = 'http://example.org/fhir/StructureDefinition/broken-patient';
const broken = {
  resourceType: 'StructureDefinition', id: 'broken-patient', url: BROKEN, name: 'BrokenPatient', status: 'active', kind: 'resource', abstract: false,
  type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
  differential: { element: [{ id: 'Patient.birthDate', path: 'Patient.birthDate', max: '2' }] },
};
const breaking = { resourceType: 'Patient', meta: { profile: [PROFILE] }, gender: 'male', name: [{ family: 'Doe' }] };
const badExtension = { resourceType: 'Patient', extension: [{ url: EXTENSION, valueString: 'abc' }] };
const SECRETS = ['SECRET-HUMAN', 'sec-1', 'female', 'at least 2', 'maritalStatus', 'SECRET-PATTERN', 'pattern'];
const withheldText = (what: string) => `The resource does not conform to ${what}; the access token may not read StructureDefinitions, so the problems (how many, and where) are not listed`;

await eachStore((kind, fresh) => {
  describe(`profiles the token may not read (${kind})`, () => {
    let t: TestApp;
    let blind: FhirClient;
    let reader: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      const admin = fhirClient(t, await craftToken(t, 'system/*.*'));
      await admin.put200(profile);
      await admin.put200(extension);
      await admin.put200(broken);
      blind = fhirClient(t, await craftToken(t, 'system/Patient.cruds system/StructureDefinition.r'));
      reader = fhirClient(t, await craftToken(t, 'system/Patient.cruds system/StructureDefinition.rs'));
    });
    afterAll(() => t.close());

    const noSecrets = (outcome: Json) => {
      const text = JSON.stringify(outcome);
      for (const secret of SECRETS) expect({ secret, told: text.includes(secret) }).toEqual({ secret, told: false });
    };

    test('a write claiming the profile is refused with one error at the claim that quotes none of its rules', async () => {
      for (const res of [await blind.post('Patient', breaking), await blind.put('Patient/p1', { ...breaking, id: 'p1' })]) {
        const outcome = await expectOutcome(res, 422);
        expect(outcome.issue.map((i: Json) => [i.severity, i.code, i.expression, i.diagnostics])).toEqual([
          ['error', 'structure', ['Patient.meta.profile[0]'], withheldText(`the profile ${PROFILE}`)],
        ]);
        noSecrets(outcome);
      }
      const transaction = await blind.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [{ fullUrl: 'urn:uuid:6f1c2a4e-1b7d-4d55-9a35-0d7e3c2b9a11', resource: breaking, request: { method: 'POST', url: 'Patient' } }],
      });
      const outcome = await expectOutcome(transaction, 422);
      expect(outcome.issue.map((i: Json) => i.expression)).toEqual([['Bundle.entry[0].resource.meta.profile[0]']]);
      noSecrets(outcome);
      const batch = await blind.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ resource: breaking, request: { method: 'POST', url: 'Patient' } }] });
      expect(batch.status).toBe(200);
      noSecrets((await batch.json()) as Json);
      // A valid one is accepted: the profile is still applied.
      const valid = { ...breaking, gender: 'female', name: [{ family: 'A' }, { family: 'B' }], maritalStatus: { text: 'x' } };
      expect((await blind.post('Patient', valid)).status).toBe(201);
    });

    test('an extension the tenant defines is judged by its definition, told only as one error at the extension', async () => {
      const outcome = (await (await blind.post('Patient/$validate', badExtension)).json()) as Json;
      expect(outcome.issue.map((i: Json) => [i.severity, i.expression, i.diagnostics])).toEqual([['error', ['Patient.extension[0]'], withheldText(`the definition of the extension ${EXTENSION}`)]]);
      noSecrets(outcome);
      // On a write claiming the profile (extensions are checked on writes that claim one).
      const written = await expectOutcome(await blind.post('Patient', { ...breaking, extension: badExtension.extension }), 422);
      expect(written.issue.map((i: Json) => i.expression[0]).sort()).toEqual(['Patient.extension[0]', 'Patient.meta.profile[0]']);
      noSecrets(written);
    });

    test('$validate tells as much, for a profile it names, one claimed and one a contained resource claims', async () => {
      const named = (await (await blind.post(`Patient/$validate?profile=${encodeURIComponent(PROFILE)}`, { ...breaking, meta: undefined })).json()) as Json;
      expect(named.issue.map((i: Json) => [i.severity, i.expression, i.diagnostics])).toEqual([['error', ['profile'], withheldText(`the profile ${PROFILE}`)]]);
      const claimed = (await (await blind.post('Patient/$validate', breaking)).json()) as Json;
      expect(claimed.issue.filter((i: Json) => i.severity === 'error').map((i: Json) => i.expression)).toEqual([['Patient.meta.profile[0]']]);
      const contained = (await (await blind.post('Patient/$validate', { resourceType: 'Patient', contained: [{ ...breaking, id: 'c' }] })).json()) as Json;
      expect(contained.issue.filter((i: Json) => i.severity === 'error' && i.expression[0] !== 'Patient.contained[0]').map((i: Json) => i.expression)).toEqual([['Patient.contained[0].meta.profile[0]']]);
      for (const o of [named, claimed, contained]) noSecrets(o);
    });

    test("why a tenant's profile is unusable is told only to a token that reads StructureDefinitions", async () => {
      const claim = { resourceType: 'Patient', meta: { profile: [BROKEN] } };
      const hidden = await expectOutcome(await blind.post('Patient', claim), 422);
      expect(hidden.issue.map((i: Json) => [i.code, i.expression, i.diagnostics])).toEqual([
        ['not-supported', ['Patient.meta.profile[0]'], `The profile ${BROKEN} cannot be used; the access token may not read StructureDefinitions, so why is not told`],
      ]);
      expect(JSON.stringify(await expectOutcome(await reader.post('Patient', claim), 422))).toContain('birthDate');
    });

    test('a token that reads StructureDefinitions is told every problem; R4 core profiles are told to anyone', async () => {
      const outcome = await expectOutcome(await reader.post('Patient', breaking), 422);
      expect(outcome.issue.map((i: Json) => i.expression[0]).sort()).toEqual(['Patient', 'Patient.gender', 'Patient.maritalStatus', 'Patient.name']);
      expect(JSON.stringify(outcome)).toContain('SECRET-HUMAN rule');
      expect(JSON.stringify(await (await reader.post('Patient/$validate', badExtension)).json())).toContain('SECRET-PATTERN');
      const bp = { resourceType: 'Observation', meta: { profile: ['http://hl7.org/fhir/StructureDefinition/bp'] }, status: 'final', code: { text: 'x' } };
      const core = (await (await fhirClient(t, await craftToken(t, 'system/Observation.cruds')).post('Observation', bp)).json()) as Json;
      expect(core.issue.length).toBeGreaterThan(1);
      expect(core.issue.some((i: Json) => String(i.diagnostics).includes('http://hl7.org/fhir/StructureDefinition/bp'))).toBe(true);
    });
  });
});
