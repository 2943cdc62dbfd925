/**
 * A profile's minValue[x] and maxValue[x] (R4 ElementDefinition) on dateTimes and instants compare the moments they
 * denote, time zones included, as FHIRPath orders them; a value whose precision straddles a bound is not refused.
 * minValueQuantity and maxValueQuantity compare a Quantity in the bound's unit, or in another UCUM unit of the same
 * dimension converted. As HL7's validator, a UCUM unit that cannot be converted to the bound's fails it (an error naming
 * the Quantity), and a Quantity that cannot be compared otherwise (no value, another system) is a warning. On writes,
 * on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const URL = 'http://example.org/fhir/StructureDefinition/observed-in-2019';

/** A profile on Observation: effective[x] a dateTime before 2020 (UTC), issued at or after 2019-01-01T00:00:00Z. */
const PROFILE = {
  resourceType: 'StructureDefinition', url: URL, name: 'ObservedIn2019', status: 'active', kind: 'resource', abstract: false,
  type: 'Observation', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation', derivation: 'constraint', fhirVersion: '4.0.1',
  differential: {
    element: [
      { id: 'Observation.effective[x]', path: 'Observation.effective[x]', type: [{ code: 'dateTime' }], maxValueDateTime: '2019-12-31T23:59:59Z' },
      { id: 'Observation.issued', path: 'Observation.issued', minValueInstant: '2019-01-01T00:00:00Z' },
    ],
  },
};

const VITALS_URL = 'http://example.org/fhir/StructureDefinition/plausible-weight';
const UCUM = 'http://unitsofmeasure.org';
/** A profile on Observation: valueQuantity between 0.5 kg and 700 kg. */
const VITALS = {
  resourceType: 'StructureDefinition', url: VITALS_URL, name: 'PlausibleWeight', status: 'active', kind: 'resource', abstract: false,
  type: 'Observation', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Observation', derivation: 'constraint', fhirVersion: '4.0.1',
  differential: {
    element: [{
      id: 'Observation.value[x]', path: 'Observation.value[x]', type: [{ code: 'Quantity' }],
      minValueQuantity: { value: 0.5, unit: 'kg', system: UCUM, code: 'kg' }, maxValueQuantity: { value: 700, unit: 'kg', system: UCUM, code: 'kg' },
    }],
  },
};
const weight = (value: number, code: string): Json => ({
  resourceType: 'Observation', meta: { profile: [VITALS_URL] }, status: 'final', code: { text: 'weight' }, valueQuantity: { value, unit: code, system: UCUM, code },
});

const observation = (extra: Json): Json => ({ resourceType: 'Observation', meta: { profile: [URL] }, status: 'final', code: { text: 'weight' }, ...extra });

await eachStore((kind, fresh) => {
  describe(`profile bounds on dates, times and quantities (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      expect((await api.post('StructureDefinition', PROFILE)).status).toBe(201);
      expect((await api.post('StructureDefinition', VITALS)).status).toBe(201);
    });
    afterAll(() => t.close());

    test('a dateTime after maxValueDateTime once its zone is read is refused, though its text sorts before it', async () => {
      const before = await countVersions(t);
      // 2019-12-31T23:00:00-05:00 is 2020-01-01T04:00:00Z.
      const outcome = await expectOutcome(await api.post('Observation', observation({ effectiveDateTime: '2019-12-31T23:00:00-05:00' })), 422);
      expect(outcome.issue.map((i: Json) => [i.expression[0], i.details.text])).toEqual([
        ['Observation.effective.ofType(dateTime)', `Observation.effective[x] (profile ${URL}): above the maximum 2019-12-31T23:59:59Z`],
      ]);
      const early = await expectOutcome(await api.post('Observation', observation({ effectiveDateTime: '2019-06-01', issued: '2019-01-01T08:00:00+09:00' })), 422);
      expect(early.issue.map((i: Json) => [i.expression[0], i.details.text])).toEqual([['Observation.issued', `Observation.issued (profile ${URL}): below the minimum 2019-01-01T00:00:00Z`]]);
      expect(await countVersions(t)).toBe(before);
    });

    test('a dateTime before maxValueDateTime once its zone is read is stored, though its text sorts after it', async () => {
      // 2020-01-01T05:00:00+10:00 is 2019-12-31T19:00:00Z; 2018-12-31T20:00:00-05:00 is 2019-01-01T01:00:00Z.
      const res = await api.post('Observation', observation({ effectiveDateTime: '2020-01-01T05:00:00+10:00', issued: '2018-12-31T20:00:00-05:00' }));
      expect(res.status).toBe(201);
    });

    test('dates at their own precision: within, straddling and past the bound', async () => {
      expect((await api.post('Observation', observation({ effectiveDateTime: '2019-12-31' }))).status).toBe(201);
      expect((await api.post('Observation', observation({ effectiveDateTime: '2019' }))).status).toBe(201);
      await expectOutcome(await api.post('Observation', observation({ effectiveDateTime: '2020' })), 422);
      await expectOutcome(await api.post('Observation', observation({ effectiveDateTime: '2020-01' })), 422);
    });

    test('a Quantity outside minValueQuantity or maxValueQuantity is refused, in the bound\'s unit or converted from another', async () => {
      const before = await countVersions(t);
      const heavy = await expectOutcome(await api.post('Observation', weight(701, 'kg')), 422);
      expect(heavy.issue.map((i: Json) => [i.expression[0], i.details.text])).toEqual([
        ['Observation.value.ofType(Quantity)', `Observation.value[x] (profile ${VITALS_URL}): above the maximum 700 kg`],
      ]);
      const light = await expectOutcome(await api.post('Observation', weight(400, 'g')), 422);
      expect(light.issue.map((i: Json) => [i.expression[0], i.details.text])).toEqual([
        ['Observation.value.ofType(Quantity)', `Observation.value[x] (profile ${VITALS_URL}): below the minimum 0.5 kg`],
      ]);
      expect(await countVersions(t)).toBe(before);
      expect((await api.post('Observation', weight(700, 'kg'))).status).toBe(201);
      expect((await api.post('Observation', weight(500, 'g'))).status).toBe(201);
      expect((await api.post('Observation', weight(1600, '[lb_av]'))).status).toBe(422);
      expect((await api.post('Observation', weight(150, '[lb_av]'))).status).toBe(201);
    });

    test('a Quantity whose UCUM unit cannot be converted to the bound\'s is refused, naming it; one that cannot be compared is stored with a warning', async () => {
      const before = await countVersions(t);
      const litres = await expectOutcome(await api.post('Observation', weight(2, 'L')), 422);
      expect(litres.issue.map((i: Json) => [i.severity, i.code, i.expression[0], i.details.text])).toEqual([
        ['error', 'value', 'Observation.value.ofType(Quantity)', `Observation.value[x] (profile ${VITALS_URL}): its unit L cannot be converted to the bound's unit kg, so the minimum 0.5 kg cannot be met`],
        ['error', 'value', 'Observation.value.ofType(Quantity)', `Observation.value[x] (profile ${VITALS_URL}): its unit L cannot be converted to the bound's unit kg, so the maximum 700 kg cannot be met`],
      ]);
      // Not a UCUM unit at all: no more convertible.
      await expectOutcome(await api.post('Observation', weight(2, 'stone')), 422);
      expect(await countVersions(t)).toBe(before);
      // Another system's unit: not compared, and said so.
      const other = { ...weight(90, 'kg'), valueQuantity: { value: 90, unit: 'kilo', system: 'http://example.org/units', code: 'kilo' } };
      const checked = await api.post('Observation/$validate', other);
      expect(checked.status).toBe(200);
      const warned = ((await checked.json()) as Json).issue.filter((i: Json) => i.severity !== 'information');
      expect(warned.map((i: Json) => [i.severity, i.code, i.expression[0]])).toEqual([
        ['warning', 'value', 'Observation.value.ofType(Quantity)'],
        ['warning', 'value', 'Observation.value.ofType(Quantity)'],
      ]);
      expect(warned[0].details.text).toBe(`Observation.value[x] (profile ${VITALS_URL}): its unit kilo (http://example.org/units) is not comparable with the bound's kg (${UCUM}), so the minimum 0.5 kg was not checked`);
      expect((await api.post('Observation', other)).status).toBe(201);
    });
  });
});
