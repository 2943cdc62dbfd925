/**
 * A tenant's profile invariants using FHIRPath 2.0's functions (STU): an effective day and the instant issued compared
 * by lowBoundary() and highBoundary(), an identifier matched whole by matchesFull(),
 * a variable from defineVariable(), a date's components; a product of a temperature (nothing), and an encode() of a
 * format FHIRPath does not define (an invariant that cannot be evaluated, reported naming why). Validation only: the
 * store plays no part (SQLite).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE_URL = 'http://example.org/fhir/StructureDefinition/';

/** A tenant's profile on `type` whose root carries one invariant. */
function profile(name: string, type: string, expression: string): Json {
  const constraint = [{ key: `${name}-1`, severity: 'error', human: `${name} holds`, expression }];
  const root = { id: type, path: type, short: 'r', definition: 'r', min: 0, max: '*', base: { path: type, min: 0, max: '*' }, constraint };
  return {
    resourceType: 'StructureDefinition', id: name, url: BASE_URL + name, name, status: 'active', kind: 'resource', abstract: false,
    type, baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`, derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: { element: [root] },
  };
}

const observation = (profileName: string, extra: Json): Json => ({
  resourceType: 'Observation', status: 'final', meta: { profile: [BASE_URL + profileName] }, code: { text: 'reading' }, ...extra,
});
const patient = (profileName: string, extra: Json): Json => ({ resourceType: 'Patient', meta: { profile: [BASE_URL + profileName] }, ...extra });
const errors = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error').map((i) => String((i.details as Json).text));

describe("a tenant's profile invariants on FHIRPath 2.0's functions", () => {
  let t: TestApp;
  let api: FhirClient;
  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
    for (const sd of [
      profile('bounded', 'Observation', 'issued.exists() implies effective.ofType(dateTime).lowBoundary() <= issued.highBoundary()'),
      profile('mrn', 'Patient', "identifier.all(value.matchesFull('[0-9]{6}'))"),
      profile('own-given', 'Patient', "name.all(defineVariable('fam', family).given.all(%fam.empty() or $this != %fam))"),
      profile('this-century', 'Patient', 'birthDate.yearOf() >= 2000'),
      profile('doubled', 'Observation', '(value.ofType(Quantity) * 2).exists()'),
      profile('rot13', 'Patient', "name.given.all(encode('rot13').exists())"),
      profile('bounded-dose', 'Observation', "value.ofType(Quantity).highBoundary(1) = 150.5 'mg'"),
    ]) expect((await api.put(`StructureDefinition/${sd.id}`, sd)).status).toBeLessThan(300);
  });
  afterAll(() => t.close());

  test('an effective day and the instant issued are ordered by their boundaries: the day may begin, at +14:00, before the instant', async () => {
    const before = await countVersions(t);
    const reading = (effectiveDateTime: string, issued: string) => observation('bounded', { effectiveDateTime, issued });
    // 2023-06-21 begins at 2023-06-20T10:00Z at the earliest: before noon of the 20th (UTC), so it may precede it.
    expect((await api.post('Observation', reading('2023-06-21', '2023-06-20T12:00:00Z'))).status).toBe(201);
    expect(errors(await expectOutcome(await api.post('Observation', reading('2023-06-22', '2023-06-20T12:00:00Z')), 422)))
      .toEqual([expect.stringMatching(/bounded holds \(bounded-1\)$/)]);
    expect(await countVersions(t)).toBe(before + 1);
  });

  test('matchesFull() matches the whole identifier, defineVariable() holds a family for its given names, yearOf() reads a birthDate', async () => {
    expect((await api.post('Patient', patient('mrn', { identifier: [{ value: '123456' }] }))).status).toBe(201);
    expect(errors(await expectOutcome(await api.post('Patient', patient('mrn', { identifier: [{ value: 'MRN 123456' }] })), 422)))
      .toEqual([expect.stringMatching(/mrn holds \(mrn-1\)$/)]);
    expect((await api.post('Patient', patient('own-given', { name: [{ family: 'Jones', given: ['Ann'] }, { given: ['Bo'] }] }))).status).toBe(201);
    await expectOutcome(await api.post('Patient', patient('own-given', { name: [{ family: 'Jones', given: ['Jones'] }] })), 422);
    expect((await api.post('Patient', patient('this-century', { birthDate: '2004-05' }))).status).toBe(201);
    await expectOutcome(await api.post('Patient', patient('this-century', { birthDate: '1999-12-31' })), 422);
  });

  test('a temperature times a number is no quantity (the invariant fails); a mass doubles', async () => {
    const ucum = (value: number, code: string) => ({ value, unit: code, system: 'http://unitsofmeasure.org', code });
    expect((await api.post('Observation', observation('doubled', { valueQuantity: ucum(2, 'kg') }))).status).toBe(201);
    expect(errors(await expectOutcome(await api.post('Observation', observation('doubled', { valueQuantity: ucum(37, 'Cel') })), 422)))
      .toEqual([expect.stringMatching(/doubled holds \(doubled-1\)$/)]);
  });

  test("a Quantity's boundary from its value as its JSON writes it, in exponent notation too (1.5E2 is 150, to its last place)", async () => {
    const body = (value: string) => JSON.stringify(observation('bounded-dose', { valueQuantity: { value: 0, unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' } }))
      .replace('"value":0', `"value":${value}`);
    expect((await api.post('Observation', body('1.5E2'))).status).toBe(201);
    expect((await api.post('Observation', body('150'))).status).toBe(201);
    await expectOutcome(await api.post('Observation', body('150.0')), 422);
  });

  test('encode() of a format FHIRPath does not define: the invariant cannot be evaluated, and the error says why', async () => {
    const outcome = await expectOutcome(await api.post('Patient', patient('rot13', { name: [{ given: ['Ann'] }] })), 422);
    expect(errors(outcome)).toEqual([expect.stringMatching(/cannot be evaluated here: encode\(\) takes 'hex', 'base64' or 'urlbase64', not 'rot13'.*\(rot13-1\)$/)]);
  });
});
