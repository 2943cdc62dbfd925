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

  test('the rows migration 4 deleted are of parameters that keep none', () => {
    // Since every parameter is indexed, more keep none (Appointment's patient is its actor's rows); the
    // reindex that the index model change runs writes every resource's rows afresh.
    const derived: Record<string, string[]> = {};
    for (const [type, defs] of indexedParams()) for (const d of defs) if (d.storedAs) (derived[d.code] ??= []).push(type);
    for (const [param, types] of Object.entries(ROWS_STORED_ELSEWHERE)) expect(derived[param]).toEqual(expect.arrayContaining([...types]));
  });

  test('the indexer writes no rows for them', () => {
    const obs = { resourceType: 'Observation', id: 'o', subject: { reference: 'Patient/p' }, code: { coding: [{ system: 's', code: 'c' }] } };
    expect(indexEntries(obs).tokens.map((e) => e.param).sort()).toEqual(['code', 'subject']);
    const allergy = { resourceType: 'AllergyIntolerance', id: 'a', patient: { reference: 'Patient/p' } };
    expect(indexEntries(allergy).tokens).toEqual([{ param: 'patient', system: 'Patient', value: 'p' }]);
  });
});
