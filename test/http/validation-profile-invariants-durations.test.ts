/**
 * A tenant's profile invariant comparing a stored UCUM duration with a FHIRPath calendar duration (`90 seconds`,
 * `3 days`): seconds are UCUM's `s` (N1); a day is only equivalent to UCUM's `d` (N1: `=` false, `~` converts), and
 * ordered against UCUM times as FHIRPath.js and the later releases order it (N1 leaves it without an order, and a
 * profile's `value < 3 days` on a Duration, always in UCUM, would give nothing and fail every write). And an
 * invariant asking that a panel's many quantities be distinct finds 1 g and 1000 mg the same amount. Validation
 * only: the store plays no part (SQLite).
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
const observation = (profileName: string, extra: Json): Json => ({
  resourceType: 'Observation', status: 'final', meta: { profile: [BASE_URL + profileName] }, code: { text: 'wait' }, ...extra,
});
const errors = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error').map((i) => String((i.details as Json).text));

describe("a tenant's profile invariants on durations and on distinct quantities", () => {
  let t: TestApp;
  let api: FhirClient;
  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
    for (const sd of [
      profile('quick', 'value.ofType(Quantity) < 90 seconds'),
      profile('under-three-days', 'value.ofType(Quantity) < 3 days'),
      profile('about-two-days', 'value.ofType(Quantity) ~ 2 days'),
      profile('distinct-amounts', 'component.value.ofType(Quantity).isDistinct()'),
    ]) expect((await api.put(`StructureDefinition/${sd.id}`, sd)).status).toBeLessThan(300);
  });
  afterAll(() => t.close());

  test('seconds order against UCUM minutes; a day orders against UCUM days and is equivalent to them', async () => {
    const before = await countVersions(t);
    expect((await api.post('Observation', observation('quick', { valueQuantity: ucum(1, 'min') }))).status).toBe(201);
    expect(errors(await expectOutcome(await api.post('Observation', observation('quick', { valueQuantity: ucum(2, 'min') })), 422)))
      .toEqual([expect.stringMatching(/quick holds \(quick-1\)$/)]);
    // 2 d against `3 days`: under; 72 h is not.
    expect((await api.post('Observation', observation('under-three-days', { valueQuantity: ucum(2, 'd') }))).status).toBe(201);
    expect(errors(await expectOutcome(await api.post('Observation', observation('under-three-days', { valueQuantity: ucum(72, 'h') })), 422)))
      .toEqual([expect.stringMatching(/under-three-days holds \(under-three-days-1\)$/)]);
    expect((await api.post('Observation', observation('about-two-days', { valueQuantity: ucum(48, 'h') }))).status).toBe(201);
    await expectOutcome(await api.post('Observation', observation('about-two-days', { valueQuantity: ucum(49, 'h') })), 422);
    expect(await countVersions(t)).toBe(before + 3);
  });

  test('a panel of ten amounts holding 1 g and 1000 mg is not distinct', async () => {
    const panel = (second: Json) => observation('distinct-amounts', {
      component: [ucum(1, 'g'), second, ...Array.from({ length: 8 }, (_, i) => ucum(i + 2, 'g'))].map((valueQuantity, i) => ({ code: { text: `c${i}` }, valueQuantity })),
    });
    await expectOutcome(await api.post('Observation', panel(ucum(1000, 'mg'))), 422);
    expect((await api.post('Observation', panel(ucum(1001, 'mg')))).status).toBe(201);
  });
});
