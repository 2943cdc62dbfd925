/**
 * A tenant's profile invariants doing FHIRPath N1 arithmetic: an age from `today()` (the app's clock, not the
 * system's), a date moved by calendar months, and quantities converted and multiplied through UCUM. Validation
 * only: the store plays no part (SQLite).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE_URL = 'http://example.org/fhir/StructureDefinition/';
const DAY = 86_400_000;

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

const patient = (birthDate: string): Json => ({ resourceType: 'Patient', meta: { profile: [BASE_URL + 'adult'] }, birthDate });
const ucum = (value: number, code: string) => ({ value, unit: code, system: 'http://unitsofmeasure.org', code });
const observation = (profileName: string, extra: Json): Json => ({
  resourceType: 'Observation', status: 'final', meta: { profile: [BASE_URL + profileName] }, code: { text: 'dose' }, ...extra,
});
const errors = (outcome: Json) => (outcome.issue as Json[]).filter((i) => i.severity === 'error').map((i) => String((i.details as Json).text));

describe("a tenant's profile invariants on date and quantity arithmetic", () => {
  let t: TestApp;
  let api: FhirClient;
  const clock = testClock(Date.parse('2026-01-15T10:00:00Z'));
  beforeAll(async () => {
    t = await createTestApp({ clock });
    api = fhirClient(t, await t.token());
    for (const sd of [
      profile('adult', 'Patient', 'birthDate <= today() - 18 years'),
      profile('small-dose', 'Observation', "value.ofType(Quantity).toQuantity('g') < 500 'g'"),
      profile('double-dose', 'Observation', "value.ofType(Quantity) * 2 <= 1 'kg'"),
      profile('within-a-month', 'Observation', 'effective.ofType(Period).end <= effective.ofType(Period).start + 1 month'),
    ]) expect((await api.put(`StructureDefinition/${sd.id}`, sd)).status).toBeLessThan(300);
  });
  afterAll(() => t.close());

  test("an age from today(): the app's clock decides, and moving it a day makes the patient of age", async () => {
    const before = await countVersions(t);
    expect((await api.post('Patient', patient('2008-01-15'))).status).toBe(201);
    expect(errors(await expectOutcome(await api.post('Patient', patient('2008-01-16')), 422)))
      .toEqual([expect.stringMatching(/adult holds \(adult-1\)$/)]);
    // (Under the system's clock, months later, both would be of age.) A day on, with a token of that day:
    clock.advance(DAY);
    const later = fhirClient(t, await t.token());
    expect((await later.post('Patient', patient('2008-01-16'))).status).toBe(201);
    expect(errors(await expectOutcome(await later.post('Patient', patient('2008-01-17')), 422)))
      .toEqual([expect.stringMatching(/adult holds \(adult-1\)$/)]);
    expect(await countVersions(t)).toBe(before + 2);
  });

  test('quantities converted and multiplied through UCUM', async () => {
    api = fhirClient(t, await t.token());
    expect((await api.post('Observation', observation('small-dose', { valueQuantity: ucum(400, 'mg') }))).status).toBe(201);
    expect(errors(await expectOutcome(await api.post('Observation', observation('small-dose', { valueQuantity: ucum(0.6, 'kg') })), 422)))
      .toEqual([expect.stringMatching(/small-dose holds \(small-dose-1\)$/)]);
    expect((await api.post('Observation', observation('double-dose', { valueQuantity: ucum(500, 'g') }))).status).toBe(201);
    await expectOutcome(await api.post('Observation', observation('double-dose', { valueQuantity: ucum(501, 'g') })), 422);
  });

  test('a period of at most a calendar month: the end of January clamped to the end of February', async () => {
    api = fhirClient(t, await t.token());
    const period = (start: string, end: string) => observation('within-a-month', { effectivePeriod: { start, end } });
    expect((await api.post('Observation', period('2019-01-31', '2019-02-28'))).status).toBe(201);
    await expectOutcome(await api.post('Observation', period('2019-01-31', '2019-03-01')), 422);
  });
});

describe("a tenant's profile invariants on large numbers, N1's conversions, aggregate() and the string functions", () => {
  let t: TestApp;
  let api: FhirClient;
  const component = (text: string, value: number) => ({ code: { text }, valueQuantity: ucum(value, 'mg') });
  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
    for (const sd of [
      // A whole number past 32 bits is a Decimal (N1), not an expression the profile cannot use.
      profile('below-ten-billion', 'Observation', 'value.ofType(Quantity).value < 10000000000'),
      profile('components-total', 'Observation', 'component.value.ofType(Quantity).value.aggregate($total + $this, 0) <= 100'),
      profile('whole-count-text', 'Observation', 'value.ofType(string).convertsToInteger()'),
      profile('short-given', 'Patient', "name.all(given.join(' ').length() <= 12)"),
      profile('two-part-mrn', 'Patient', "identifier.all(value.split('-').count() = 2 and value.split('-').all(trim().length() > 0))"),
      // An aggregate() in another's aggregator sums Integers to an Integer (its `$total` was untyped: a Decimal).
      profile('given-total', 'Patient', 'name.aggregate($total + $this.given.aggregate($total + 1, 0), 0) is Integer and name.aggregate($total + $this.given.aggregate($total + 1, 0), 0) <= 3'),
      profile('parts-within-total', 'Observation', 'component[0].value.ofType(Quantity).value + component[1].value.ofType(Quantity).value <= value.ofType(Quantity).value'),
      profile('not-inactive', 'Patient', 'active.allFalse().not()'),
    ]) expect((await api.put(`StructureDefinition/${sd.id}`, sd)).status).toBeLessThan(300);
  });
  afterAll(() => t.close());

  const refusedBy = async (res: Response, name: string) => {
    expect(errors(await expectOutcome(res, 422))).toEqual([expect.stringMatching(new RegExp(`${name} holds \\(${name}-1\\)$`))]);
  };
  const patientOf = (name: string, extra: Json) => ({ resourceType: 'Patient', meta: { profile: [BASE_URL + name] }, ...extra });

  test('a literal past 32 bits compares as a Decimal', async () => {
    const before = await countVersions(t);
    expect((await api.post('Observation', observation('below-ten-billion', { valueQuantity: ucum(5_000_000_000, 'mg') }))).status).toBe(201);
    await refusedBy(await api.post('Observation', observation('below-ten-billion', { valueQuantity: ucum(20_000_000_000, 'mg') })), 'below-ten-billion');
    expect(await countVersions(t)).toBe(before + 1);
  });

  test('aggregate() sums the components', async () => {
    expect((await api.post('Observation', observation('components-total', { component: [component('a', 60), component('b', 40)] }))).status).toBe(201);
    await refusedBy(await api.post('Observation', observation('components-total', { component: [component('a', 60), component('b', 41)] })), 'components-total');
  });

  test('Decimal arithmetic is decimal: 0.1 + 0.2 is within 0.3 (in binary it was 0.30000000000000004, refused)', async () => {
    const parts = (a: number, b: number, total: number) => observation('parts-within-total', { valueQuantity: ucum(total, 'mg'), component: [component('a', a), component('b', b)] });
    expect((await api.post('Observation', parts(0.1, 0.2, 0.3))).status).toBe(201);
    expect((await api.post('Observation', parts(1.1, 2.2, 3.3))).status).toBe(201);
    await refusedBy(await api.post('Observation', parts(0.1, 0.21, 0.3)), 'parts-within-total');
    // Values of 16 digits keep them (rounded to 15 significant digits, the sums were above the totals, refused).
    expect((await api.post('Observation', parts(0.1234567890123456, 0, 0.1234567890123456))).status).toBe(201);
    expect((await api.post('Observation', parts(123456789012345.6, 0.1, 123456789012345.7))).status).toBe(201);
    await refusedBy(await api.post('Observation', parts(123456789012345.6, 0.2, 123456789012345.7)), 'parts-within-total');
  });

  test("aggregate() in another's aggregator: an Integer sum is an Integer", async () => {
    expect((await api.post('Patient', patientOf('given-total', { name: [{ given: ['Ann', 'Mary'] }, { given: ['Jo'] }] }))).status).toBe(201);
    await refusedBy(await api.post('Patient', patientOf('given-total', { name: [{ given: ['Ann', 'Mary'] }, { given: ['Jo', 'Al'] }] })), 'given-total');
  });

  test('convertsToInteger() on a string', async () => {
    expect((await api.post('Observation', observation('whole-count-text', { valueString: '+12' }))).status).toBe(201);
    await refusedBy(await api.post('Observation', observation('whole-count-text', { valueString: '12.5' })), 'whole-count-text');
  });

  test('join(), split() and trim()', async () => {
    expect((await api.post('Patient', patientOf('short-given', { name: [{ given: ['Ann', 'Mary'] }] }))).status).toBe(201);
    await refusedBy(await api.post('Patient', patientOf('short-given', { name: [{ given: ['Ann', 'Mary', 'Louise'] }] })), 'short-given');
    expect((await api.post('Patient', patientOf('two-part-mrn', { identifier: [{ system: 'urn:mrn', value: 'ab-12' }] }))).status).toBe(201);
    await refusedBy(await api.post('Patient', patientOf('two-part-mrn', { identifier: [{ system: 'urn:mrn', value: 'ab-12-3' }] })), 'two-part-mrn');
    await refusedBy(await api.post('Patient', patientOf('two-part-mrn', { identifier: [{ system: 'urn:mrn', value: 'ab- ' }] })), 'two-part-mrn');
  });

  test('join() and allFalse() over elements with extensions and no value: no text, no Boolean, not an error (was a 422)', async () => {
    const absent = { extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/data-absent-reason', valueCode: 'unknown' }] };
    expect((await api.post('Patient', patientOf('short-given', { name: [{ given: ['Ann', null, 'Mary'], _given: [null, absent, null] }] }))).status).toBe(201);
    await refusedBy(await api.post('Patient', patientOf('short-given', { name: [{ given: ['Ann', null, 'Mary Louise'], _given: [null, absent, null] }] })), 'short-given');
    expect((await api.post('Patient', patientOf('not-inactive', { _active: absent }))).status).toBe(201);
    await refusedBy(await api.post('Patient', patientOf('not-inactive', { active: false })), 'not-inactive');
  });
});

describe("a tenant's profile invariant that cannot be evaluated fails, naming itself (HL7's validator reports it so)", () => {
  let t: TestApp;
  let api: FhirClient;
  const patientOf = (name: string, extra: Json) => ({ resourceType: 'Patient', meta: { profile: [BASE_URL + name] }, ...extra });
  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
    for (const sd of [
      // length() of many given names is N1's error (a singleton expected), not a pass.
      profile('short-givens', 'Patient', 'name.given.length() <= 5'),
      // substring(), skip() and take() take an Integer (N1): a Decimal, even a whole one, is an error.
      profile('initial-by-decimal', 'Patient', "name.family.substring(0, 1.0) = 'S'"),
      profile('skip-by-decimal', 'Patient', 'name.skip(1.0).empty()'),
      profile('take-by-decimal', 'Patient', 'name.take(1.5).exists()'),
      profile('initial-by-text', 'Patient', "name.family.substring('0') = 'S'"),
    ]) expect((await api.put(`StructureDefinition/${sd.id}`, sd)).status).toBeLessThan(300);
    const warning = profile('warn-givens', 'Patient', 'name.given.length() <= 5');
    ((warning.snapshot as Json).element as Json[])[0]!.constraint = [{ key: 'warn-givens-1', severity: 'warning', human: 'warn-givens holds', expression: 'name.given.length() <= 5' }];
    expect((await api.put('StructureDefinition/warn-givens', warning)).status).toBeLessThan(300);
  });
  afterAll(() => t.close());

  const refusedAsUnevaluable = async (res: Response, name: string, why: RegExp) => {
    const outcome = await expectOutcome(res, 422);
    const issues = (outcome.issue as Json[]).filter((i) => i.severity === 'error');
    expect(issues.length).toBe(1);
    expect(issues[0]!.code).toBe('invariant');
    expect(issues[0]!.expression).toEqual(['Patient']);
    const text = String((issues[0]!.details as Json).text);
    expect(text).toMatch(new RegExp(`^Patient \\(profile .*${name}.*\\): ${name} holds \\(the invariant cannot be evaluated here: .+\\) \\(${name}-1\\)$`));
    expect(text).toMatch(why);
  };

  test('an evaluation error is a 422 naming the element and the constraint; nothing is written', async () => {
    const before = await countVersions(t);
    expect((await api.post('Patient', patientOf('short-givens', { name: [{ given: ['Ann'] }] }))).status).toBe(201);
    await refusedAsUnevaluable(await api.post('Patient', patientOf('short-givens', { name: [{ given: ['Ann', 'Mary'] }] })), 'short-givens', /single value/);
    expect(await countVersions(t)).toBe(before + 1);
  });

  test('a warning invariant that cannot be evaluated is a warning, the write kept', async () => {
    const res = await api.post('Patient', patientOf('warn-givens', { name: [{ given: ['Ann', 'Mary'] }] }));
    expect(res.status).toBe(201);
    const validated = await api.post('Patient/$validate', { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: patientOf('warn-givens', { name: [{ given: ['Ann', 'Mary'] }] }) }] });
    const outcome = (await validated.json()) as Json;
    expect((outcome.issue as Json[]).filter((i) => i.severity === 'warning' && /warn-givens-1\)$/.test(String((i.details as Json).text))).map((i) => String((i.details as Json).text)))
      .toEqual([expect.stringMatching(/cannot be evaluated here: a single value was expected\) \(warn-givens-1\)$/)]);
  });

  test('substring(), skip() and take() with a Decimal or a String argument: an error, not a truncation', async () => {
    const smith = { name: [{ family: 'Smith' }, { family: 'Jones' }] };
    await refusedAsUnevaluable(await api.post('Patient', patientOf('initial-by-decimal', { name: [{ family: 'Smith' }] })), 'initial-by-decimal', /substring\(\) takes an Integer/);
    await refusedAsUnevaluable(await api.post('Patient', patientOf('skip-by-decimal', smith)), 'skip-by-decimal', /skip\(\) takes an Integer/);
    await refusedAsUnevaluable(await api.post('Patient', patientOf('take-by-decimal', smith)), 'take-by-decimal', /take\(\) takes an Integer/);
    await refusedAsUnevaluable(await api.post('Patient', patientOf('initial-by-text', { name: [{ family: 'Smith' }] })), 'initial-by-text', /substring\(\) takes an Integer/);
  });
});
