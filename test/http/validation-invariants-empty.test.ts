/**
 * An R4 invariant holds when its expression is true: one that evaluates to nothing fails, as HL7's
 * validator takes it (its test case encounter-period: `per-1` on a date start and a dateTime end of the
 * same day, which FHIRPath cannot order). The R4 expressions that give nothing where their element is
 * absent and ask nothing of it (ref-1, bdl-8, ras-2, the canonical resources' name pattern) are evaluated
 * as HL7's validator rewrites them, so such resources stay valid. On writes and in `$validate`, on both
 * databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const encounter = (period: Json): Json => ({
  resourceType: 'Encounter', status: 'finished',
  class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
  subject: { reference: 'Patient/p1' }, period,
});

const issuesOf = (outcome: Json, severity: string) => (outcome.issue as Json[]).filter((i) => i.severity === severity).map((i) => `${i.expression?.[0]}: ${i.details.text}`);

await eachStore((kind, fresh) => {
  describe(`invariants that evaluate to nothing (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('per-1 with a date start and a dateTime end of the same day cannot be ordered: refused, as HL7 refuses it', async () => {
      const sameDay = encounter({ start: '2023-06-21', end: '2023-06-21T06:20:00Z' });
      const outcome = await expectOutcome(await api.post('Encounter', sameDay), 422);
      expect(issuesOf(outcome, 'error')).toEqual([expect.stringMatching(/^Encounter\.period: .*\(per-1\)$/)]);
      await expectOutcome(await api.put('Encounter/e1', { ...sameDay, id: 'e1' }), 422);
      const validated = (await (await api.post('Encounter/$validate', sameDay)).json()) as Json;
      expect(issuesOf(validated, 'error')).toEqual(issuesOf(outcome, 'error'));
      // A year against a day of it: no order either.
      await expectOutcome(await api.post('Encounter', encounter({ start: '2020', end: '2020-12-31' })), 422);
      expect(await countVersions(t)).toBe(0);
      // Orderable at the precision both have: a day before, or a year before; and a start alone.
      for (const period of [{ start: '2023-06-20', end: '2023-06-21T06:20:00Z' }, { start: '2019', end: '2020-12-31' }, { start: '2023-06-21' }, { start: '2023-06-21T05:00:00Z', end: '2023-06-21T06:20:00Z' }]) {
        expect((await api.post('Encounter', encounter(period))).status).toBe(201);
      }
      // Ordered the wrong way round, as before.
      await expectOutcome(await api.post('Encounter', encounter({ start: '2023-06-22', end: '2023-06-21T06:20:00Z' })), 422);
    });

    test("what the R4 expressions leave empty where their element is absent still holds (ref-1, bdl-8, ras-2), and unitless quantities compare (rng-2)", async () => {
      // A reference by display or identifier alone (ref-1), a collection entry without a fullUrl (bdl-8), a prediction without a probability (ras-2).
      const observation = {
        resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] },
        subject: { display: 'Peter Chalmers' }, performer: [{ identifier: { system: 'http://example.org/staff', value: 'n1' } }],
      };
      expect((await api.post('Observation', observation)).status).toBe(201);
      expect((await api.post('Bundle', { resourceType: 'Bundle', type: 'collection', entry: [{ resource: observation }] })).status).toBe(201);
      const risk = { resourceType: 'RiskAssessment', status: 'final', subject: { reference: 'Patient/p1' }, prediction: [{ outcome: { text: 'stroke' }, qualitativeRisk: { text: 'moderate' } }] };
      expect((await api.post('RiskAssessment', risk)).status).toBe(201);
      // Two quantities without units compare as numbers (rng-2), as HL7's validator compares them; in the wrong order they are refused.
      expect((await api.post('Observation', { ...observation, valueRange: { low: { value: 1 }, high: { value: 5 } } })).status).toBe(201);
      expect(issuesOf(await expectOutcome(await api.post('Observation', { ...observation, valueRange: { low: { value: 5 }, high: { value: 1 } } }), 422), 'error').join()).toContain('rng-2');
      // One side coded, both with the same unit text (a dose of 1 mg in UCUM to 5 "mg"): ordered by value, as HL7's validator orders them.
      const mg = { unit: 'mg', system: 'http://unitsofmeasure.org', code: 'mg' };
      expect((await api.post('Observation', { ...observation, valueRange: { low: { value: 1, ...mg }, high: { value: 5, unit: 'mg' } } })).status).toBe(201);
      const inverted = (await (await api.post('Observation/$validate', { ...observation, valueRange: { low: { value: 5, unit: 'mg' }, high: { value: 1, ...mg } } })).json()) as Json;
      expect(issuesOf(inverted, 'error')).toEqual([expect.stringMatching(/^Observation\.value\.ofType\(Range\): .*\(rng-2\)$/)]);
      // What they do ask is still refused: a local reference to nothing, a versioned fullUrl, a probability above 100.
      expect(issuesOf(await expectOutcome(await api.post('Observation', { ...observation, subject: { reference: '#nothing' } }), 422), 'error').join()).toContain('ref-1');
      const versioned = { resourceType: 'Bundle', type: 'collection', entry: [{ fullUrl: 'http://example.org/fhir/Observation/o1/_history/1', resource: { ...observation, id: 'o1' } }] };
      expect(issuesOf(await expectOutcome(await api.post('Bundle', versioned), 422), 'error').join()).toContain('bdl-8');
      const over = { ...risk, prediction: [{ outcome: { text: 'stroke' }, probabilityDecimal: 120 }] };
      expect(issuesOf(await expectOutcome(await api.post('RiskAssessment', over), 422), 'error').join()).toContain('ras-2');
    });

    test('rng-2 between quantities of differing unit texts: a side without a code whose text is a UCUM unit is that unit; others are refused, saying why', async () => {
      const observation = { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] }, subject: { reference: 'Patient/p1' } };
      const ranged = (low: Json, high: Json) => ({ ...observation, valueRange: { low, high } });
      const ucum = (value: number, code: string, unit: string) => ({ value, unit, system: 'http://unitsofmeasure.org', code });
      // The same unit: 70 "mg/dL" (uncoded) to 110 mg/dL written out.
      expect((await api.post('Observation', ranged({ value: 70, unit: 'mg/dL' }, ucum(110, 'mg/dL', 'milligram per deciliter')))).status).toBe(201);
      // A unit converted: 500 mg to 2 "g", on a PUT too.
      expect((await api.put('Observation/r1', { ...ranged(ucum(500, 'mg', 'milligram'), { value: 2, unit: 'g' }), id: 'r1' })).status).toBe(201);
      // Compound UCUM units in their canonical units: 80 mg/dL (0.8 g/L) to 1 g/L is stored; 120 mg/dL to 1 g/L is refused by rng-2.
      expect((await api.post('Observation', ranged(ucum(80, 'mg/dL', 'mg/dL'), ucum(1, 'g/L', 'g/L')))).status).toBe(201);
      const glucose = await expectOutcome(await api.post('Observation', ranged(ucum(120, 'mg/dL', 'mg/dL'), ucum(1, 'g/L', 'g/L'))), 422);
      expect(issuesOf(glucose, 'error')).toEqual([expect.stringMatching(/^Observation\.value\.ofType\(Range\): If present, low SHALL have a lower value than high \(rng-2\)$/)]);
      // Ordered the wrong way round: rng-2 fails, its text as ever.
      const inverted = await expectOutcome(await api.post('Observation', ranged(ucum(5000, 'mg', 'milligram'), { value: 2, unit: 'g' })), 422);
      expect(issuesOf(inverted, 'error')).toEqual([expect.stringMatching(/^Observation\.value\.ofType\(Range\): If present, low SHALL have a lower value than high \(rng-2\)$/)]);
      // Units that name nothing comparable: refused, and the text says the values cannot be compared, in $validate as on the write.
      const tablets = ranged({ value: 1, unit: 'tablet' }, { value: 2, unit: 'tablets' });
      const refused = issuesOf(await expectOutcome(await api.post('Observation', tablets), 422), 'error');
      expect(refused).toEqual([expect.stringMatching(/^Observation\.value\.ofType\(Range\): If present, low SHALL have a lower value than high \(its expression gives no result here, which fails: values FHIRPath cannot compare, .*\) \(rng-2\)$/)]);
      expect(issuesOf((await (await api.post('Observation/$validate', tablets)).json()) as Json, 'error')).toEqual(refused);
    });

    test("a canonical resource's name is warned about when it is no identifier (anchored, as HL7 anchors it), not when it is absent", async () => {
      const library = (name?: string): Json => ({ resourceType: 'Library', status: 'draft', type: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/library-type', code: 'logic-library' }] }, ...(name !== undefined && { name }) });
      const warnings = async (r: Json) => issuesOf((await (await api.post('Library/$validate', r)).json()) as Json, 'warning').filter((w) => w.includes('lib-0'));
      expect(await warnings(library())).toEqual([]);
      expect(await warnings(library('OpioidRecommendations'))).toEqual([]);
      // An identifier at its start only: the pattern holds for the whole name.
      expect(await warnings(library('Opioid-Recommendations'))).toHaveLength(1);
      // A warning: the write is kept.
      expect((await api.post('Library', library('Opioid-Recommendations'))).status).toBe(201);
    });
  });
});
