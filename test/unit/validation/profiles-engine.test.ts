/**
 * The profile engine (src/fhir/validation/profile/) on a synthetic profile of Patient: each rule of
 * R4 profiling.html it checks, with the expressions it reports.
 */
import { describe, expect, test } from 'bun:test';
import { compileProfile, ProfileUnusable } from '../../../src/fhir/validation/profile/compile.ts';
import { checkProfile } from '../../../src/fhir/validation/profile/run.ts';

type Json = Record<string, any>;

const el = (id: string, min: number, max: string, extra: Json = {}): Json => ({ id, path: id.replace(/:[^.]*/g, ''), min, max, ...extra });
const MRN = 'urn:mrn';
const SSN = 'urn:ssn';

const PROFILE: Json = {
  resourceType: 'StructureDefinition', url: 'http://example.org/StructureDefinition/test-patient', version: '1.0', type: 'Patient', derivation: 'constraint', kind: 'resource',
  snapshot: {
    element: [
      el('Patient', 0, '*', { constraint: [
        { key: 'tst-1', severity: 'error', human: 'A name or an identifier', expression: 'name.exists() or identifier.exists()' },
        { key: 'tst-2', severity: 'warning', human: 'A gender should be given', expression: 'gender.exists()' },
        { key: 'dom-2', severity: 'error', human: 'base', expression: 'contained.contained.empty()' },
      ] }),
      el('Patient.identifier', 1, '*', { slicing: { discriminator: [{ type: 'pattern', path: '$this' }], rules: 'closed', ordered: true } }),
      el('Patient.identifier:mrn', 1, '1', { sliceName: 'mrn', patternIdentifier: { system: MRN } }),
      el('Patient.identifier:ssn', 0, '1', { sliceName: 'ssn', patternIdentifier: { system: SSN } }),
      el('Patient.name', 0, '*'),
      el('Patient.name.family', 0, '1', { maxLength: 5 }),
      el('Patient.telecom', 0, '*', { slicing: { discriminator: [{ type: 'exists', path: 'period' }], rules: 'openAtEnd' } }),
      el('Patient.telecom:dated', 0, '*', { sliceName: 'dated' }),
      el('Patient.telecom:dated.period', 1, '1'),
      el('Patient.deceased[x]', 0, '1', { type: [{ code: 'boolean' }] }),
      el('Patient.multipleBirth[x]', 0, '1', { type: [{ code: 'integer' }], minValueInteger: 1, maxValueInteger: 3 }),
      el('Patient.maritalStatus', 0, '1', { patternCodeableConcept: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: 'M' }] } }),
      el('Patient.contact', 0, '0'),
      el('Patient.generalPractitioner', 0, '*', { type: [{ code: 'Reference', targetProfile: ['http://hl7.org/fhir/StructureDefinition/Practitioner'] }] }),
      el('Patient.active', 0, '1', { fixedBoolean: true }),
      el('Patient.link', 0, '*', { slicing: { discriminator: [{ type: 'profile', path: 'other.resolve()' }], rules: 'open' } }),
      el('Patient.link:p', 0, '1', { sliceName: 'p' }),
    ],
  },
};
const profile = compileProfile(PROFILE);
const VALID: Json = { resourceType: 'Patient', identifier: [{ system: MRN, value: '1' }, { system: SSN, value: '2' }], gender: 'female' };
const check = (r: Json) => checkProfile(r, profile, () => undefined).issues.map((i) => `${i.severity} ${i.expression} ${i.text}`);
const at = (r: Json) => checkProfile(r, profile, () => undefined).issues.map((i) => i.expression);

describe('the profile engine', () => {
  test('a resource meeting the profile has no issue; the profile is named by url|version', () => {
    expect(check(VALID)).toEqual([]);
    expect(profile.label).toBe('http://example.org/StructureDefinition/test-patient|1.0');
    expect(profile.unsupported).toEqual(['The slicing of Patient.link by profile at other.resolve() is not evaluated (no slice names a profile Cinder can reach there)']);
  });

  test('cardinality: the element (min 1, max 0) and each slice', () => {
    const { identifier: _i, ...none } = VALID;
    expect(check({ ...none, name: [{ family: 'X' }] })).toEqual([
      'error Patient.identifier Patient.identifier: at least 1 required by the profile http://example.org/StructureDefinition/test-patient|1.0, found 0',
      'error Patient.identifier Patient.identifier:mrn: at least 1 required by the profile http://example.org/StructureDefinition/test-patient|1.0, found 0',
    ]);
    expect(at({ ...VALID, contact: [{ gender: 'male' }] })).toEqual(['Patient.contact']);
    expect(at({ ...VALID, identifier: [{ system: MRN }, { system: MRN }] })).toEqual(['Patient.identifier']);
  });

  test('slicing: closed (a value of no slice), ordered (slices out of order), openAtEnd (slice values after unsliced ones)', () => {
    expect(at({ ...VALID, identifier: [{ system: MRN }, { system: 'urn:other' }] })).toEqual(['Patient.identifier[1]']);
    expect(check({ ...VALID, identifier: [{ system: SSN }, { system: MRN }] })).toEqual([expect.stringContaining('Patient.identifier[1] Patient.identifier (profile http://example.org/StructureDefinition/test-patient|1.0): slice mrn is out of order')]);
    const dated = { system: 'phone', value: '1', period: { start: '2020' } };
    const undated = { system: 'phone', value: '2' };
    expect(check({ ...VALID, telecom: [dated, undated] })).toEqual([]);
    expect(at({ ...VALID, telecom: [undated, dated] })).toEqual(['Patient.telecom[1]']);
  });

  test('types of a choice, Reference targets, fixed and pattern values, maxLength, minValue and maxValue', () => {
    expect(at({ ...VALID, deceasedDateTime: '2020' })).toEqual(['Patient.deceased.ofType(dateTime)']);
    expect(at({ ...VALID, generalPractitioner: [{ reference: 'Practitioner/1' }, { reference: 'Organization/2' }, { reference: 'http://x.org/fhir/Organization/3/_history/1' }, { identifier: { value: 'x' } }] }))
      .toEqual(['Patient.generalPractitioner[1].reference', 'Patient.generalPractitioner[2].reference']);
    expect(at({ ...VALID, active: false })).toEqual(['Patient.active']);
    expect(check({ ...VALID, active: true })).toEqual([]);
    const married = { coding: [{ system: 'urn:other', code: 'x' }, { system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: 'M', display: 'Married' }], text: 'married' };
    expect(check({ ...VALID, maritalStatus: married })).toEqual([]);
    expect(at({ ...VALID, maritalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: 'S' }] } })).toEqual(['Patient.maritalStatus']);
    expect(at({ ...VALID, name: [{ family: 'Short' }, { family: 'Longer' }] })).toEqual(['Patient.name[1].family']);
    expect(at({ ...VALID, multipleBirthInteger: 0 })).toEqual(['Patient.multipleBirth.ofType(integer)']);
    expect(at({ ...VALID, multipleBirthInteger: 4 })).toEqual(['Patient.multipleBirth.ofType(integer)']);
    expect(check({ ...VALID, multipleBirthInteger: 2 })).toEqual([]);
  });

  test('invariants: the profile\'s own, with their severity; those of the base definitions are left to base validation', () => {
    const { gender: _g, ...noGender } = VALID;
    expect(check(noGender)).toEqual([expect.stringMatching(/^warning Patient .*A gender should be given \(tst-2\)$/)]);
  });

  test('a StructureDefinition without a snapshot, or not a constraint, cannot be used', () => {
    const { snapshot: _s, ...differentialOnly } = PROFILE;
    expect(() => compileProfile(differentialOnly)).toThrow(ProfileUnusable);
    expect(() => compileProfile(differentialOnly)).toThrow('has no snapshot');
    expect(() => compileProfile({ ...PROFILE, derivation: 'specialization' })).toThrow(ProfileUnusable);
  });
});
