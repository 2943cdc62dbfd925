/**
 * SMART v2 scope filters (`patient/Observation.rs?category=laboratory`): granted as requested when a
 * registered scope implies them, and enforced with the search engine on search, read, history,
 * `_include`, writes and bulk export.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { isImpliedBy, parseResourceScope } from '../../src/auth/scopes.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
let t: TestApp;
let admin: FhirClient;
let lab: FhirClient;

const obs = (id: string, category: string, status = 'final'): Json => ({
  resourceType: 'Observation', id, status, subject: { reference: 'Patient/p1' },
  category: [{ coding: [{ system: CAT, code: category }] }], code: { text: id },
});

beforeAll(async () => {
  t = await createTestApp();
  admin = fhirClient(t, await t.token());
  await admin.put200({ resourceType: 'Patient', id: 'p1' });
  for (const o of [obs('lab1', 'laboratory'), obs('lab2', 'laboratory', 'preliminary'), obs('vs1', 'vital-signs')]) await admin.put200(o);
  const token = await t.tokenFor('t1', ['system/Observation.rs', 'system/Patient.rs'], 'system/Observation.rs?category=laboratory system/Patient.rs');
  lab = fhirClient(t, token);
});
afterAll(() => t.close());

describe('scope filters', () => {
  test('parsing and implication: a filter is a v2 scope on one type with a valid search', () => {
    expect(parseResourceScope('patient/Observation.rs?category=laboratory')).toMatchObject({ type: 'Observation', query: 'category=laboratory' });
    expect(parseResourceScope('patient/Observation.read?category=laboratory')).toBeNull();
    expect(parseResourceScope('patient/*.rs?category=laboratory')).toBeNull();
    expect(parseResourceScope('patient/Observation.rs?nonsense=1')).toBeNull();
    expect(parseResourceScope('patient/Observation.rs?date=yesterday')).toBeNull();
    expect(isImpliedBy('patient/Observation.rs?category=laboratory', ['patient/*.read'])).toBe(true);
    expect(isImpliedBy('patient/Observation.rs', ['patient/Observation.rs?category=laboratory'])).toBe(false);
    expect(isImpliedBy('patient/Observation.rs?status=final', ['patient/Observation.rs?category=laboratory'])).toBe(false);
  });

  test('search returns only what the filter admits, ANDed with the query', async () => {
    const ids = async (q: string) => ((await lab.search(q)).entry ?? []).map((e: Json) => e.resource.id).sort();
    expect(await ids('Observation')).toEqual(['lab1', 'lab2']);
    expect(await ids('Observation?status=final')).toEqual(['lab1']);
    expect(await ids('Observation?category=vital-signs')).toEqual([]);
    expect(await ids('Patient?_id=p1&_revinclude=Observation:patient')).toEqual(['lab1', 'lab2', 'p1']);
  });

  test('read and history of a resource outside the filter are 403; type history is refused', async () => {
    expect((await lab.get('Observation/lab1')).status).toBe(200);
    await expectOutcome(await lab.get('Observation/vs1'), 403);
    await expectOutcome(await lab.get('Observation/vs1/_history'), 403);
    await expectOutcome(await lab.get('Observation/vs1/_history/1'), 403);
    await expectOutcome(await lab.get('Observation/_history'), 403);
  });

  test('a filtered write scope admits only resources meeting it', async () => {
    const token = await t.tokenFor('t1', ['system/Observation.cruds?category=laboratory']);
    const w = fhirClient(t, token);
    expect((await w.put('Observation/lab3', obs('lab3', 'laboratory'))).status).toBe(201);
    await expectOutcome(await w.put('Observation/vs2', obs('vs2', 'vital-signs')), 403);
    await expectOutcome(await w.put('Observation/lab3', obs('lab3', 'vital-signs')), 403);
  });

  test('bulk export of a filtered type is refused', async () => {
    const res = await lab.get('Observation/$export'.replace('Observation/', '') + '?_type=Observation', { Prefer: 'respond-async', Accept: 'application/fhir+json' });
    await expectOutcome(res, 403);
  });
});
