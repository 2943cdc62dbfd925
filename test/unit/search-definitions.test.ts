import { describe, expect, test } from 'bun:test';
import { indexedParams, paramsOf } from '../../src/fhir/definitions.ts';
import { indexEntries } from '../../src/fhir/indexer.ts';
import { ROWS_STORED_ELSEWHERE } from '../../src/store/stored-elsewhere.ts';

describe('parameters stored in another parameter’s index rows', () => {
  test('R4 patient on Observation is subject restricted to Patient', () => {
    const patient = paramsOf('Observation').find((d) => d.code === 'patient')!;
    expect(patient.storedAs).toEqual({ param: 'subject', target: 'Patient' });
    expect(paramsOf('Observation').find((d) => d.code === 'subject')!.storedAs).toBeUndefined();
    // AllergyIntolerance has no subject: its patient keeps rows of its own.
    expect(paramsOf('AllergyIntolerance').find((d) => d.code === 'patient')!.storedAs).toBeUndefined();
  });

  test('equal expressions without a restriction: the parameter allowing more target types keeps the rows', () => {
    expect(paramsOf('DeviceUseStatement').find((d) => d.code === 'patient')!.storedAs).toEqual({ param: 'subject' });
    // Both allow only Patient: the first listed keeps them.
    expect(paramsOf('EnrollmentRequest').find((d) => d.code === 'subject')!.storedAs).toEqual({ param: 'patient' });
  });

  test('the rows migration 4 deletes are exactly those of the parameters that keep none', () => {
    const derived: Record<string, string[]> = {};
    for (const [type, defs] of indexedParams()) for (const d of defs) if (d.storedAs) (derived[d.code] ??= []).push(type);
    for (const types of Object.values(derived)) types.sort();
    expect(derived).toEqual(Object.fromEntries(Object.entries(ROWS_STORED_ELSEWHERE).map(([p, types]) => [p, [...types].sort()])));
  });

  test('the indexer writes no rows for them', () => {
    const obs = { resourceType: 'Observation', id: 'o', subject: { reference: 'Patient/p' }, code: { coding: [{ system: 's', code: 'c' }] } };
    expect(indexEntries(obs).map((e) => e.param).sort()).toEqual(['code', 'subject']);
    const allergy = { resourceType: 'AllergyIntolerance', id: 'a', patient: { reference: 'Patient/p' } };
    expect(indexEntries(allergy)).toEqual([{ param: 'patient', system: 'Patient', value: 'p' }]);
  });
});
