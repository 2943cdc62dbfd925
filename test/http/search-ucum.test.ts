/**
 * Quantity search in UCUM units (src/fhir/ucum.ts, search.html 3.1.1.4.6) on both databases: a search
 * value with a UCUM unit finds the quantities stored in any commensurable unit (mg and g, [lb_av] and
 * kg, kPa and mm[Hg], [degF] and Cel), in plain and composite parameters, in a scope filter (the
 * in-memory matcher) and after the reindex that gives stored quantities their canonical rows. A search
 * without a unit, or with a unit that is not UCUM, compares the stored number and code as written. A
 * generated set of masses is compared with the LHC UCUM library's conversion of each stored amount into
 * the search's unit.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import ucum from '@lhncbc/ucum-lhc';
import { reindex, INDEX_MODEL } from '../../src/fhir/reindex.ts';
import { canonicalParam, storedIndex } from '../../src/fhir/indexer.ts';
import type { TestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const UCUM = 'http://unitsofmeasure.org';
const LOINC = 'http://loinc.org';
const lhc = ucum.UcumLhcUtils.getInstance();

/** What R4's vital signs profiles ask of a vital sign (a weight, a temperature, a blood pressure), which it is held to unclaimed. */
const VITAL: Json = {
  category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
  subject: { reference: 'Patient/p2' }, effectiveDateTime: '2024-03-01',
};
const VITAL_CODES = new Set(['29463-7', '8310-5']);

const observation = (id: string, value: Json, code = '2345-7'): Json => ({
  resourceType: 'Observation', id, status: 'final', ...(VITAL_CODES.has(code) && VITAL), code: { coding: [{ system: LOINC, code }] }, valueQuantity: value,
});
const q = (value: number, code: string, system = UCUM): Json => ({ value, unit: code, system, code });

/** Blood pressure: systolic and diastolic components in mm[Hg]. */
const pressure = (id: string, systolic: number, diastolic: number): Json => ({
  resourceType: 'Observation', id, status: 'final', ...VITAL, code: { coding: [{ system: LOINC, code: '85354-9' }] },
  component: [
    { code: { coding: [{ system: LOINC, code: '8480-6' }] }, valueQuantity: q(systolic, 'mm[Hg]') },
    { code: { coding: [{ system: LOINC, code: '8462-4' }] }, valueQuantity: q(diastolic, 'mm[Hg]') },
  ],
});

const FIXED: Json[] = [
  observation('mg-5.4', q(5.4, 'mg')),
  observation('ug-5400', q(5400, 'ug')),
  observation('g-0.0054', q(0.0054, 'g')),
  observation('g-5.4', q(5.4, 'g')),
  // The same number and unit text, but no UCUM system: compared as written, as before.
  observation('unit-only-5.4', { value: 5.4, unit: 'mg' }),
  observation('other-system-5.4', q(5.4, 'mg', 'http://example.org/units')),
  { ...observation('kg-70', q(70, 'kg', UCUM), '29463-7'), subject: { reference: 'Patient/p1' } },
  observation('kg-60', q(60, 'kg', UCUM), '29463-7'),
  observation('lb-160', q(160, '[lb_av]', UCUM), '29463-7'),
  observation('cel-37', q(37, 'Cel'), '8310-5'),
  observation('cel-37.5', q(37.5, 'Cel'), '8310-5'),
  observation('degf-100.4', q(100.4, '[degF]'), '8310-5'),
  // A high power field, a number (UCUM: 1) that src/fhir/ucum.ts reduces since index model 20.
  observation('hpf-5', q(5, '[HPF]')),
  // Units of atoms src/fhir/ucum.ts reads since index model 20: 2 [psi] is 13.79 kPa, 760 Torr 101.3 kPa; an
  // arbitrary unit per volume.
  observation('psi-2', q(2, '[psi]')),
  observation('torr-760', q(760, 'Torr')),
  observation('cfu-3', q(3, '[CFU]/mL')),
  // A special unit UCUM converts by a function (a logarithm) that src/fhir/ucum.ts leaves out: found by its code only.
  observation('ph-7.4', q(7.4, '[pH]')),
  // Since index model 21: a leading '/' divides the first component alone (2 /L/h is 2 /(L.h)), and an annotated
  // number is the number (5 /100{WBCs}, nucleated red cells per hundred leukocytes, is 5 %).
  observation('per-l-h-2', q(2, '/L/h')),
  observation('nrbc-5', q(5, '/100{WBCs}')),
  pressure('bp-120', 120, 80),
  pressure('bp-150', 150, 95),
];

/** Masses in six units, seeded. */
const MASS_UNITS = ['mg', 'g', 'ug', 'kg', '[lb_av]', '[oz_av]'];
function seeded(seed: number) {
  let s = seed;
  return () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
}
const random = seeded(7);
const MASSES = Array.from({ length: 40 }, (_, i) => {
  const unit = MASS_UNITS[i % MASS_UNITS.length]!;
  // Between about 10 mg and 10 kg, in the unit's own scale, with two decimals.
  const grams = 10 ** (random() * 6 - 2);
  const value = Number((lhc.convertUnitTo('g', grams, unit).toVal as number).toPrecision(3));
  return { id: `mass-${i}`, value, unit };
});

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`UCUM quantity search on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const ids = async (query: string, client = api) =>
      ((await client.search(`Observation?${query}&_count=1000`)).entry ?? []).map((e: Json) => e.resource.id as string).sort();

    beforeAll(async () => {
      ({ t, api } = await appOnFresh(target));
      await api.put200({ resourceType: 'Patient', id: 'p1', name: [{ family: 'Weight' }] });
      for (const o of FIXED) await api.put200(o);
      for (const m of MASSES) await api.put200(observation(m.id, q(m.value, m.unit), '99999-9'));
    }, 60_000);

    test('a UCUM unit finds the same amount in every commensurable unit, and only those', async () => {
      expect(await ids(`value-quantity=5.4|${UCUM}|mg`)).toEqual(['g-0.0054', 'mg-5.4', 'ug-5400']);
      expect(await ids(`value-quantity=0.0054|${UCUM}|g`)).toEqual(['g-0.0054', 'mg-5.4', 'ug-5400']);
      expect(await ids(`value-quantity=5400|${UCUM}|ug&code=${LOINC}|2345-7`)).toEqual(['g-0.0054', 'mg-5.4', 'ug-5400']);
      // Escaped in the URL as a client sends it.
      expect(await ids(`value-quantity=${encodeURIComponent(`gt150|${UCUM}|[lb_av]`)}`)).toEqual(['kg-70', 'lb-160']);
      expect(await ids(`value-quantity=lt68000|${UCUM}|g&code=${LOINC}|29463-7`)).toEqual(['kg-60']);
    });

    test('temperatures compare through kelvin, pressures through pascal', async () => {
      // 37 Cel is 98.6 [degF]; 37.5 Cel 99.5; 100.4 [degF] is 38 Cel.
      expect(await ids(`value-quantity=gt99|${UCUM}|[degF]`)).toEqual(['cel-37.5', 'degf-100.4']);
      expect(await ids(`value-quantity=ge38|${UCUM}|Cel`)).toEqual(['degf-100.4']);
      expect(await ids(`value-quantity=98.6|${UCUM}|[degF]`)).toEqual(['cel-37']);
      // 120 mm[Hg] is 15.999 kPa, 150 mm[Hg] 19.998 kPa.
      expect(await ids(`component-value-quantity=gt16|${UCUM}|kPa`)).toEqual(['bp-150']);
      expect(await ids(`component-value-quantity=gt10|${UCUM}|kPa`)).toEqual(['bp-120', 'bp-150']);
    });

    test('composites: the component code with a value in another unit', async () => {
      expect(await ids(`component-code-value-quantity=${LOINC}|8480-6$gt16|${UCUM}|kPa`)).toEqual(['bp-150']);
      expect(await ids(`component-code-value-quantity=${LOINC}|8462-4$gt16|${UCUM}|kPa`)).toEqual([]);
      expect(await ids(`component-code-value-quantity=${LOINC}|8462-4$gt12|${UCUM}|kPa`)).toEqual(['bp-150']);
      // code-value-quantity is code and value-quantity ANDed; one alternative in UCUM, one as written.
      expect(await ids(`code-value-quantity=${LOINC}|2345-7$5.4|${UCUM}|mg`)).toEqual(['g-0.0054', 'mg-5.4', 'ug-5400']);
      expect(await ids(`code-value-quantity=${LOINC}|29463-7$gt150|${UCUM}|[lb_av],${LOINC}|2345-7$5.4`))
        .toEqual(['g-5.4', 'kg-70', 'lb-160', 'mg-5.4', 'other-system-5.4', 'unit-only-5.4']);
    });

    test('without a unit, or with a unit that is not UCUM, the number and code as written', async () => {
      expect(await ids('value-quantity=5.4')).toEqual(['g-5.4', 'mg-5.4', 'other-system-5.4', 'unit-only-5.4']);
      expect(await ids('value-quantity=0.0054')).toEqual(['g-0.0054']);
      expect(await ids('value-quantity=5.4||mg')).toEqual(['mg-5.4', 'other-system-5.4', 'unit-only-5.4']);
      expect(await ids('value-quantity=5.4|http://example.org/units|mg')).toEqual(['other-system-5.4']);
      expect(await ids(`value-quantity=5|${UCUM}|[HPF]`)).toEqual(['hpf-5']);
      // 5.0 mg is [4.95, 5.05) mg, which holds none of the amounts.
      expect(await ids(`value-quantity=5.0|${UCUM}|mg`)).toEqual([]);
      // A unit and a unitless test ORed: each on its own rows.
      expect(await ids(`value-quantity=0.0054,5400|${UCUM}|ug`)).toEqual(['g-0.0054', 'mg-5.4', 'ug-5400']);
      expect(await ids(`value-quantity=5|${UCUM}|[HPF],gt150|${UCUM}|[lb_av]`)).toEqual(['hpf-5', 'kg-70', 'lb-160']);
    });

    test(':missing and _sort read the values as written', async () => {
      const sorted = ((await api.search(`Observation?code=${LOINC}|29463-7&_sort=value-quantity`)).entry ?? []).map((e: Json) => e.resource.id);
      // As written: 60, 70 and 160, whatever their units.
      expect(sorted).toEqual(['kg-60', 'kg-70', 'lb-160']);
      expect(await ids(`value-quantity:missing=true&code=${LOINC}|85354-9`)).toEqual(['bp-120', 'bp-150']);
    });

    test('generated masses: each search finds what the LHC library converts into its unit', async () => {
      const mistakes: string[] = [];
      let compared = 0;
      for (let i = 0; i < 40; i++) {
        const unit = MASS_UNITS[(i * 5) % MASS_UNITS.length]!;
        const prefix = ['eq', 'ne', 'gt', 'lt', 'ge', 'le'][i % 6]!;
        const pick = MASSES[(i * 7) % MASSES.length]!;
        const theirs = (m: { value: number; unit: string }) => lhc.convertUnitTo(m.unit, m.value, unit).toVal as number;
        // Search at one of the stored amounts (eq, ne) or just above it, at 3 significant digits; its
        // precision as search.html gives it (the decimals written, less the exponent).
        const value = Number((theirs(pick) * (prefix === 'eq' || prefix === 'ne' ? 1 : 1.013)).toPrecision(3));
        const [, fraction = '', exponent = '0'] = /^\d+(?:\.(\d+))?(?:e([+-]?\d+))?$/.exec(String(value))!;
        const half = 0.5 * 10 ** -(fraction.length - Number(exponent));
        const expected: string[] = [];
        let clear = true;
        for (const m of MASSES) {
          const x = theirs(m);
          const near = (b: number) => Math.abs(x - b) <= 1e-9 * Math.max(Math.abs(x), Math.abs(b));
          if (near(value) && prefix !== 'eq' && prefix !== 'ne') clear = false;
          if (near(value - half) || near(value + half)) clear = false;
          const inRange = x >= value - half && x < value + half;
          const hit = { eq: inRange, ne: !inRange, gt: x > value, lt: x < value, ge: x >= value, le: x <= value }[prefix]!;
          if (hit) expected.push(m.id);
        }
        // A stored amount on a boundary would be decided by rounding, not by the rule: such a case is skipped.
        if (!clear) continue;
        const query = `code=${LOINC}|99999-9&value-quantity=${encodeURIComponent(`${prefix}${value}|${UCUM}|${unit}`)}`;
        const got = await ids(query);
        compared++;
        if (JSON.stringify(got) !== JSON.stringify(expected.sort())) mistakes.push(`${query}: ${got.join(',')} against ${expected.join(',')}`);
      }
      expect(mistakes).toEqual([]);
      expect(compared).toBeGreaterThan(30);
    }, 60_000);

    test('a scope filter with a UCUM unit admits the amounts in other units (the in-memory matcher)', async () => {
      const heavy = fhirClient(t, await t.tokenFor('t1', [`system/Observation.rs?value-quantity=gt150|${UCUM}|[lb_av]`]));
      expect((await heavy.get('Observation/kg-70')).status).toBe(200);
      expect((await heavy.get('Observation/kg-60')).status).toBe(403);
      expect(await ids(`code=${LOINC}|29463-7`, heavy)).toEqual(['kg-70', 'lb-160']);
    });

    test('_filter with a UCUM unit', async () => {
      const filter = encodeURIComponent(`value-quantity gt 68|${UCUM}|kg or value-quantity eq 5.4|${UCUM}|mg`);
      expect(await ids(`_filter=${filter}`)).toEqual(['g-0.0054', 'kg-70', 'lb-160', 'mg-5.4', 'ug-5400']);
    });

    test("units of every atom of UCUM's essence compare in their canonical units; a special unit other than a temperature by its code alone", async () => {
      expect(await ids(`value-quantity=gt13|${UCUM}|kPa`)).toEqual(['psi-2', 'torr-760']);
      expect(await ids(`value-quantity=lt20|${UCUM}|kPa`)).toEqual(['psi-2']);
      expect(await ids(`value-quantity=${encodeURIComponent(`ge0.99|${UCUM}|atm`)}`)).toEqual(['torr-760']);
      expect(await ids(`value-quantity=${encodeURIComponent(`3000|${UCUM}|[CFU]/L`)}`)).toEqual(['cfu-3']);
      expect(await ids(`value-quantity=${encodeURIComponent(`3000|${UCUM}|[PFU]/L`)}`)).toEqual([]);
      expect(await ids(`value-quantity=${encodeURIComponent(`7.4|${UCUM}|[pH]`)}`)).toEqual(['ph-7.4']);
      expect(await ids(`value-quantity=${encodeURIComponent(`gt7|${UCUM}|[pH]`)}`)).toEqual(['ph-7.4']);
      // A sort on a quantity orders them by their canonical values: 2 [psi] before 760 Torr.
      const sorted = ((await api.search(`Observation?value-quantity=${encodeURIComponent(`gt1|${UCUM}|kPa`)}&_sort=value-quantity`)).entry ?? []).map((e: Json) => e.resource.id);
      expect(sorted).toEqual(['psi-2', 'torr-760']);
    });

    test("a leading '/' divides the first component alone; an annotated number is the number", async () => {
      expect(await ids(`value-quantity=${encodeURIComponent(`2|${UCUM}|/(L.h)`)}`)).toEqual(['per-l-h-2']);
      expect(await ids(`value-quantity=${encodeURIComponent(`0.002|${UCUM}|/(mL.h)`)}`)).toEqual(['per-l-h-2']);
      expect(await ids(`value-quantity=${encodeURIComponent(`5|${UCUM}|%`)}`)).toEqual(['nrbc-5']);
      expect(await ids(`value-quantity=${encodeURIComponent(`50|${UCUM}|/10*3{WBCs}`)}`)).toEqual(['nrbc-5']);
    });

    /** The database as index model `model` left it: no canonical rows of the quantities in `units`, and the model recorded. */
    async function asModel(model: number, units: string[]): Promise<void> {
      const newer = new Set(units);
      const page = await t.store.resources.indexing.page(0, 1000);
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const resource = JSON.parse(r.content) as Json;
        const index = storedIndex(resource);
        if (newer.has(resource.valueQuantity?.code)) index.ranges = index.ranges.filter((e) => !e.param.endsWith(canonicalParam('')));
        return { type: r.type, id: r.id, index, compartments: [] };
      }), ['search_range', 'search_composite']));
      await t.store.resources.indexing.setState({ model, after: 0 });
    }

    test('a database of index model 20 gets the canonical rows of units with a leading slash or an annotated number by the reindex at start', async () => {
      // Without the rows model 21 writes for them (model 20 wrote none for /100{WBCs}, and other ones for /L/h).
      await asModel(20, ['/L/h', '/100{WBCs}']);
      expect(await ids(`value-quantity=${encodeURIComponent(`5|${UCUM}|%`)}`)).toEqual([]);
      const run = await reindex(t.store);
      // Only the two Observations whose units model 21 reads otherwise.
      expect(run).toMatchObject({ ran: true, rebuilt: 2 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(await ids(`value-quantity=${encodeURIComponent(`5|${UCUM}|%`)}`)).toEqual(['nrbc-5']);
      expect(await ids(`value-quantity=${encodeURIComponent(`2|${UCUM}|/(L.h)`)}`)).toEqual(['per-l-h-2']);
      expect(await ids(`value-quantity=gt13|${UCUM}|kPa`)).toEqual(['psi-2', 'torr-760']);
    });

    test('a database of index model 19 gets the canonical rows of the units of the atoms added by the reindex at start', async () => {
      // As model 19 wrote them: no canonical rows of a unit of an atom outside its table.
      await asModel(19, ['[psi]', 'Torr', '[CFU]/mL', '[HPF]']);
      expect(await ids(`value-quantity=gt13|${UCUM}|kPa`)).toEqual([]);
      const run = await reindex(t.store);
      // Only the Observations whose UCUM unit has an atom model 20 added (psi-2, torr-760, cfu-3 and hpf-5), or that
      // model 21 reads otherwise (per-l-h-2, nrbc-5).
      expect(run).toMatchObject({ ran: true, rebuilt: 6 });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(await ids(`value-quantity=gt13|${UCUM}|kPa`)).toEqual(['psi-2', 'torr-760']);
      expect(await ids(`value-quantity=${encodeURIComponent(`3000|${UCUM}|[CFU]/L`)}`)).toEqual(['cfu-3']);
      expect(await ids(`code=${LOINC}|29463-7`)).toEqual(['kg-60', 'kg-70', 'lb-160']);
    });

    test('a database of index model 4 gets the canonical rows by the reindex at start, its other rows kept', async () => {
      // As model 4 wrote them: no canonical rows (its range and composite rows replaced, the rest kept).
      const page = await t.store.resources.indexing.page(0, 1000);
      await t.store.resources.write('t1', (w) => w.replaceIndex(page.map((r) => {
        const index = storedIndex(JSON.parse(r.content));
        index.ranges = index.ranges.filter((e) => !e.param.endsWith(canonicalParam('')));
        index.composites = index.composites.filter((e) => !e.param.endsWith(canonicalParam('')));
        return { type: r.type, id: r.id, index, compartments: [] };
      }), ['search_range', 'search_composite']));
      await t.store.resources.indexing.setState({ model: 4, after: 0 });
      expect(await ids(`value-quantity=0.0054|${UCUM}|g`)).toEqual([]);
      const run = await reindex(t.store);
      // Every Observation: each holds a number value (model 16's sort rows), not only those naming UCUM.
      expect(run).toMatchObject({ ran: true, rebuilt: FIXED.length + MASSES.length });
      expect(await t.store.resources.indexing.state()).toEqual({ model: INDEX_MODEL, after: 0 });
      expect(await ids(`value-quantity=0.0054|${UCUM}|g`)).toEqual(['g-0.0054', 'mg-5.4', 'ug-5400']);
      // Only the range and composite rows were rebuilt: the tokens, words and compartments are as they were.
      expect(await ids(`code=${LOINC}|29463-7`)).toEqual(['kg-60', 'kg-70', 'lb-160']);
      expect((await ids('_content=final')).length).toBe(FIXED.length + MASSES.length);
      const compartment = ((await api.search('Patient/p1/Observation')).entry ?? []).map((e: Json) => e.resource.id);
      expect(compartment).toEqual(['kg-70']);
    });
  });
}

describe('the CapabilityStatement', () => {
  test('says that quantity parameters compare UCUM units', async () => {
    const { createTestApp } = await import('../helpers/app.ts');
    const t = await createTestApp();
    try {
      const cs = (await (await t.request(`${t.fhir()}/metadata`)).json()) as Json;
      const obs = cs.rest[0].resource.find((r: Json) => r.type === 'Observation');
      const param = obs.searchParam.find((p: Json) => p.name === 'value-quantity');
      expect(param.documentation).toContain('commensurable UCUM unit');
      expect(obs.searchParam.find((p: Json) => p.name === 'date').documentation).not.toContain('UCUM');
    } finally {
      await t.close();
    }
  });
});
