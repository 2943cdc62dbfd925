/**
 * A tenant's profile invariants on what FHIRPath N1 defines and the engine once answered otherwise: type()'s ClassInfo
 * lists the type's elements (§ 10 Reflection); temperatures in Cel, [degF] and K compare exactly, not through a kelvin
 * value of 15 digits; a type name that names no type makes the invariant one Cinder cannot check (said by $validate),
 * not one that fails every write. Validation only: the store plays no part (SQLite).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE_URL = 'http://example.org/fhir/StructureDefinition/';

/** A tenant's profile on Observation whose root carries one invariant. */
function profile(name: string, expression: string): Json {
  const constraint = [{ key: `${name}-1`, severity: 'error', human: `${name} holds`, expression }];
  const root = { id: 'Observation', path: 'Observation', short: 'o', definition: 'o', min: 0, max: '*', base: { path: 'Observation', min: 0, max: '*' }, constraint };
  return {
    resourceType: 'StructureDefinition', id: name, url: BASE_URL + name, name, status: 'active', kind: 'resource', abstract: false,
    type: 'Observation', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation', derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: { element: [root] },
  };
}

const ucum = (value: number, code: string) => ({ value, unit: code, system: 'http://unitsofmeasure.org', code });
const observation = (profileName: string, extra: Json = {}): Json => ({
  resourceType: 'Observation', status: 'final', meta: { profile: [BASE_URL + profileName] }, code: { coding: [{ system: 'http://example.org/codes', code: 'temp' }] }, ...extra,
});
const issues = (outcome: Json, severity: string) => (outcome.issue as Json[]).filter((i) => i.severity === severity).map((i) => String((i.details as Json).text));

describe("a tenant's profile invariants on reflection, temperatures and type names", () => {
  let t: TestApp;
  let api: FhirClient;
  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
    for (const sd of [
      profile('coded-concept', "code.type().element.where(name = 'coding').type = 'List<FHIR.Coding>' and code.type().element.name.count() = 2"),
      profile('choice-value', "Observation.type().element.where(name = 'value').type.startsWith('Choice<FHIR.Quantity, FHIR.CodeableConcept')"),
      profile('below-100-f', "value.ofType(Quantity) < 100 '[degF]'"),
      profile('above-body-k', "value.ofType(Quantity) > 310.15 'K'"),
      profile('exactly-100-f', "value.ofType(Quantity) = 100 '[degF]'"),
      profile('typo', 'value.ofType(Quantty).exists()'),
    ]) expect((await api.put(`StructureDefinition/${sd.id}`, sd)).status).toBeLessThan(300);
  });
  afterAll(() => t.close());

  test("type() gives a ClassInfo with its elements: CodeableConcept's coding (a list) and text; Observation's value a choice", async () => {
    expect((await api.post('Observation', observation('coded-concept'))).status).toBe(201);
    expect((await api.post('Observation', observation('choice-value'))).status).toBe(201);
  });

  test('temperatures compare exactly: 37.77777777777777 Cel is below 100 [degF], 37.0000000000001 Cel above 310.15 K, 37.77777777777778 Cel not 100 [degF]', async () => {
    const before = await countVersions(t);
    expect((await api.post('Observation', observation('below-100-f', { valueQuantity: ucum(37.77777777777777, 'Cel') }))).status).toBe(201);
    expect(issues(await expectOutcome(await api.post('Observation', observation('below-100-f', { valueQuantity: ucum(37.77777777777778, 'Cel') })), 422), 'error'))
      .toEqual([expect.stringMatching(/below-100-f holds \(below-100-f-1\)$/)]);
    expect((await api.post('Observation', observation('above-body-k', { valueQuantity: ucum(37.0000000000001, 'Cel') }))).status).toBe(201);
    await expectOutcome(await api.post('Observation', observation('above-body-k', { valueQuantity: ucum(37, 'Cel') })), 422);
    expect((await api.post('Observation', observation('exactly-100-f', { valueQuantity: ucum(310.9277777777778, 'K') }))).status).toBe(422);
    await expectOutcome(await api.post('Observation', observation('exactly-100-f', { valueQuantity: ucum(37.77777777777778, 'Cel') })), 422);
    expect((await api.post('Observation', observation('exactly-100-f', { valueQuantity: ucum(212, '[degF]') }))).status).toBe(422);
    expect((await api.post('Observation', observation('exactly-100-f', { valueQuantity: ucum(100, '[degF]') }))).status).toBe(201);
    expect(await countVersions(t)).toBe(before + 3);
  });

  test('an invariant naming no type (ofType(Quantty)) is not checked and $validate says why; it no longer refuses every write', async () => {
    expect((await api.post('Observation', observation('typo', { valueQuantity: ucum(1, 'mg') }))).status).toBe(201);
    const res = await api.post('Observation/$validate', observation('typo', { valueQuantity: ucum(1, 'mg') }));
    expect(res.status).toBe(200);
    const warnings = issues(await res.json(), 'warning');
    expect(warnings).toEqual(expect.arrayContaining([expect.stringMatching(/typo-1 .*is not checked: unsupported FHIRPath \(unknown type Quantty/)]));
  });
});
