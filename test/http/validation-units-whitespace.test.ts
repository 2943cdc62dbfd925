/**
 * UCUM codes and whitespace in strings, as HL7's validator judges them. A Quantity (or Age, Duration...)
 * or a Coding whose system is UCUM holds a UCUM unit: another code is refused at strict (an unknown code
 * of the code system, an error in the reference), named at its `code`. A string that is whitespace alone,
 * or starts or ends with whitespace, is a warning in `$validate` (R4: strings SHOULD have non-whitespace
 * content), and the write keeps it as sent; a code's own pattern still refuses its padding. On both databases.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { textWork } from '../helpers/text-work.ts';
import { ucumCodeProblem } from '../../src/fhir/ucum-syntax.ts';

const UCUM = 'http://unitsofmeasure.org';
const weight = (code: string, extra: Json = {}): Json => ({ resourceType: 'Observation', status: 'final', code: { text: 'weight' }, valueQuantity: { value: 70, system: UCUM, code, ...extra } });

/** `severity expression` of each issue `$validate` gives (the all-clear information left out). */
async function validated(api: FhirClient, resource: Json): Promise<{ at: string[]; texts: string[] }> {
  const res = await api.post(`${resource.resourceType}/$validate`, resource);
  expect(res.status).toBe(200);
  const issues = (((await res.json()) as Json).issue as Json[]).filter((i) => i.severity !== 'information');
  return { at: issues.map((i) => `${i.severity} ${i.expression[0]}`).sort(), texts: issues.map((i) => i.details.text as string) };
}

await eachStore((kind, fresh) => {
  describe(`UCUM codes and padded strings on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeEach(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterEach(() => t.close());

    test('a Quantity whose UCUM code is no unit is refused at its code, with the reason; nothing is written', async () => {
      for (const [code, why] of [['mgg', "The unit 'mgg' is unknown"], ['mcg', "The unit 'mcg' is unknown"], ['ml/hr', "The unit 'hr' is unknown"], ['kg/m2)', "Expected '/' or '.'"], ['{cells', "Missing '}'"], ['10**3', "The unit '10**3' is unknown"], ['k[in_i]', "The unit 'k[in_i]' is unknown"]]) {
        const outcome = await expectOutcome(await api.post('Observation', weight(code!)), 422);
        expect((outcome.issue as Json[]).map((i) => `${i.code} ${i.expression[0]}`)).toEqual(['code-invalid Observation.value.ofType(Quantity).code']);
        expect((outcome.issue as Json[])[0]!.details.text).toContain(why);
      }
      expect(await countVersions(t)).toBe(0);
    });

    test('a long UCUM code is judged in work linear in its length, and its error quotes it shortened', async () => {
      // A unit of 100,000 digits and a letter: the split of a unit from its exponent took quadratic time (40,000
      // characters, 5.6 s of the thread). The work counted is the code's handling alone (ucumCodeProblem, as the
      // write calls it), ten times the length ten times the work; the time is bench/ucum-long-code.ts's.
      const work = async (n: number) => (await textWork(() => ucumCodeProblem(`${'1'.repeat(n)}a`))).work;
      const [small, large] = [await work(10_000), await work(100_000)];
      expect(large).toBeLessThanOrEqual(10 * small + 100);
      expect(large).toBeLessThanOrEqual(8 * 100_000);
      const outcome = await expectOutcome(await api.post('Observation', weight(`${'1'.repeat(100_000)}a`)), 422);
      const text = (outcome.issue as Json[])[0]!.details.text as string;
      expect(text).toContain("The unit '1111");
      expect(text.length).toBeLessThan(400);
      expect(await countVersions(t)).toBe(0);
    });

    test('UCUM units of every form are accepted: prefixes, exponents, factors, annotations, brackets, division', async () => {
      for (const code of ['kg', 'mg/dL', 'mm[Hg]', '10*3/uL', '10*9/L', '/min', 'kg/m2', 'm.s-2', 'mL/min/{1.73_m2}', '{cells}/uL', '%', 'Cel', '[degF]', '[in_i]', '[lb_av]', 'umol/(24.h)', 'dB[SPL]', '1', 'mm[H2O]', "[arb'U]/mL", 'g%', 'daL']) {
        expect((await api.post('Observation', weight(code))).status).toBe(201);
      }
    });

    test('every Quantity type and a UCUM Coding are checked; another system, or none, is not', async () => {
      const bad = { system: UCUM, code: 'years', value: 5 };
      const refused = async (r: Json) => ((await expectOutcome(await api.post(r.resourceType, r), 422)).issue as Json[]).map((i) => i.expression[0]);
      expect(await refused({ resourceType: 'Condition', subject: { reference: 'Patient/1' }, onsetAge: bad })).toEqual(['Condition.onset.ofType(Age).code']);
      expect(await refused({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, component: [{ code: { text: 'y' }, valueQuantity: bad }] })).toEqual(['Observation.component[0].value.ofType(Quantity).code']);
      expect(await refused({ resourceType: 'Observation', status: 'final', code: { coding: [{ system: UCUM, code: 'mgg' }] } })).toEqual(['Observation.code.coding[0].code']);
      expect((await api.post('Observation', weight('tablet', { system: 'http://example.org/units' }))).status).toBe(201);
      expect((await api.post('Observation', { resourceType: 'Observation', status: 'final', code: { text: 'x' }, valueQuantity: { value: 1, unit: 'tablet' } })).status).toBe(201);
    });

    test('whitespace alone, or around a string, is a warning in $validate; the write keeps the string as sent', async () => {
      const patient = { resourceType: 'Patient', name: [{ family: '   ', given: [' Ada', 'Bo '] }], address: [{ line: ['\u00a0'] }] };
      const { at, texts } = await validated(api, patient);
      expect(at).toEqual(['warning Patient.address[0].line[0]', 'warning Patient.name[0].family', 'warning Patient.name[0].given[0]', 'warning Patient.name[0].given[1]']);
      expect(texts.filter((x) => x.includes('whitespace alone'))).toHaveLength(2);
      const stored = await api.create(patient);
      expect(stored.name).toEqual(patient.name);
      expect(stored.address).toEqual(patient.address);
      // markdown may be indented; whitespace alone is warned about.
      const note = (text: string): Json => ({ resourceType: 'Observation', status: 'final', code: { text: 'x' }, note: [{ text }] });
      expect((await validated(api, note('  indented'))).at).toEqual([]);
      expect((await validated(api, note(' \n '))).at).toEqual(['warning Observation.note[0].text']);
      // A code's pattern refuses padding, an error as before.
      await expectOutcome(await api.post('Patient', { resourceType: 'Patient', gender: 'male ' }), 422);
      expect((await validated(api, { resourceType: 'Patient', name: [{ family: 'Chalmers', given: ['Peter James'] }] })).at).toEqual([]);
    });
  });
});

describe('at CINDER_VALIDATION=structural', () => {
  test('a UCUM code that is no unit is accepted (codes are not checked), and still refused by $validate', async () => {
    const t = await createTestApp({ env: { CINDER_VALIDATION: 'structural' } });
    try {
      const api = fhirClient(t, await t.token());
      expect((await api.post('Observation', weight('mgg'))).status).toBe(201);
      expect((await validated(api, weight('mgg'))).at).toEqual(['error Observation.value.ofType(Quantity).code']);
    } finally {
      t.close();
    }
  });
});
