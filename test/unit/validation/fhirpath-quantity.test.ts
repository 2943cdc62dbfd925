/**
 * FHIRPath quantity semantics the validator's invariants (core and tenant profiles) rely on: calendar durations
 * (`1 year`, `4 days`) against each other and against UCUM's definite durations ('a', 'd', 's'), as FHIRPath N1
 * (the release R4 uses) defines them, and `distinct()` / `isDistinct()` agreeing with `=` on quantities in large
 * collections too. Differential against FHIRPath.js (HL7's engine) where it follows N1; where it follows the later
 * releases instead, the case is listed with both answers.
 */
import { describe, expect, test } from 'bun:test';
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { compileInvariant, compileValues } from '../../../src/fhir/validation/fhirpath-engine.ts';
import { elementType, FHIRPATH_TYPES } from '../../../src/fhir/validation/model.ts';

type Json = Record<string, unknown>;
const types = { elementType };

/** `expression` on `focus` as 'true', 'false' or 'empty' (Cinder). */
function cinder(expression: string, focus: Json = {}, type?: string): string {
  const out = compileValues(expression, types)(focus, type, { resource: focus, rootResource: focus });
  return out.length === 0 ? 'empty' : out.length === 1 && typeof out[0] === 'boolean' ? String(out[0]) : JSON.stringify(out);
}

/** The same through FHIRPath.js (R4 model). */
function reference(expression: string, focus: Json = {}): string {
  const out = fhirpath.evaluate(focus, expression, undefined, r4) as unknown[];
  return out.length === 0 ? 'empty' : out.length === 1 && typeof out[0] === 'boolean' ? String(out[0]) : JSON.stringify(out);
}

/** N1's answers where FHIRPath.js gives the same. */
const AGREED: [string, string][] = [
  // Calendar durations among themselves, by N1's conversion factors (toQuantity(): a year 12 months or 365 days, a month 30 days).
  ['1 year > 6 months', 'true'],
  // A week to a minute order against UCUM times (one length each), as FHIRPath.js and the later releases order them.
  ["1 day > 1 'h'", 'true'],
  ["1 week > 1 'd'", 'true'],
  ["2 'd' < 3 days", 'true'],
  ["36 'h' >= 2 days", 'false'],
  ['1 year < 6 months', 'false'],
  ['1 year = 12 months', 'true'],
  ['1 year ~ 12 months', 'true'],
  ['2 years >= 24 months', 'true'],
  ['1 year = 365 days', 'true'],
  ['1 month = 30 days', 'true'],
  ['1 month > 25 days', 'true'],
  ['1 week = 7 days', 'true'],
  ['1 week < 8 days', 'true'],
  ['1 day = 24 hours', 'true'],
  ['1 hour = 3600 seconds', 'true'],
  ['1 minute > 59999 milliseconds', 'true'],
  ['1 year ~ 52 weeks', 'true'],
  ['1.0 year ~ 12.4 months', 'true'],
  ['1 year ~ 18 months', 'false'],
  // Equivalent to their definite durations (`1 year ~ 1 'a'`).
  ["1 year ~ 1 'a'", 'true'],
  ["1 month ~ 1 'mo'", 'true'],
  ["1 day ~ 1 'd'", 'true'],
  ["1 year ~ 12 'mo'", 'true'],
  ["1 year ~ 1 'g'", 'false'],
  // Of two dimensions: nothing (N1's Quantity Equality: "invalid units" give empty), as FHIRPath.js answers too.
  ["1 year = 1 'g'", 'empty'],
  // Not equal, and not comparable, above seconds (`1 year = 1 'a'`, `1 year > 1 'a'`): for a year and a month FHIRPath.js agrees.
  ["1 year > 1 'a'", 'empty'],
  ["1 year < 13 'mo'", 'empty'],
  ["1 'a' > 1 month", 'empty'],
  // Seconds and milliseconds are their UCUM units (`1 second = 1 's'`).
  ["1 second = 1 's'", 'true'],
  ["10 seconds > 1 's'", 'true'],
  ["1 second = 1000 'ms'", 'true'],
  ["1 second > 999 'ms'", 'true'],
  ["1 millisecond = 1 'ms'", 'true'],
  ["60 seconds = 1 'min'", 'true'],
  // Definite durations stay UCUM's.
  ["1 'a' = 12 'mo'", 'true'],
  ["1 'd' = 24 'h'", 'true'],
  ["1 'a' > 1 'mo'", 'true'],
];

/**
 * Where FHIRPath.js follows the later releases (3.0: `1 year = 1 'a'` is empty; a week, day, hour and minute are
 * equal to 'wk', 'd', 'h' and 'min'). Cinder follows N1 for equality: a calendar duration above seconds is unequal to a
 * definite one (its example: `1 year = 1 'a'` false), its table relating week to minute by `~` only; and `'year'` is
 * the unit representation of `year`. Ordering agrees with FHIRPath.js (below): a week to a minute order against UCUM
 * times, a year and a month do not.
 */
const DIVERGENT: [expression: string, n1: string, fhirpathJs: string][] = [
  ["1 year = 1 'a'", 'false', 'empty'],
  ["1 year != 1 'a'", 'true', 'empty'],
  ["1 month = 1 'mo'", 'false', 'empty'],
  ["1 day = 1 'd'", 'false', 'true'],
  ["1 day != 1 'd'", 'true', 'false'],
  ["1 week = 1 'wk'", 'false', 'true'],
  ["1 hour = 1 'h'", 'false', 'true'],
  ["1 minute = 60 's'", 'false', 'true'],
  ["1 day = 24 'h'", 'false', 'true'],
  ["1 'year' = 1 year", 'true', 'empty'],
  // Two dimensions: N1 gives nothing ("invalid units" give empty; 'g' and 'mL' cannot be compared); FHIRPath.js false.
  ["1 'g' = 1 'mL'", 'empty', 'false'],
  ["1 'g' != 1 'mL'", 'empty', 'true'],
];

describe('calendar durations (FHIRPath N1: Time-valued Quantities, Equality, Equivalence, Comparison)', () => {
  test('against each other and UCUM definite durations: as N1 says, and as FHIRPath.js answers', () => {
    for (const [expression, expected] of AGREED) {
      expect(`${expression}: ${cinder(expression)}`).toBe(`${expression}: ${expected}`);
      expect(`${expression}: ${reference(expression)}`).toBe(`${expression}: ${expected}`);
    }
  });

  test('where FHIRPath.js follows a later release, Cinder follows N1', () => {
    for (const [expression, n1, fhirpathJs] of DIVERGENT) {
      expect(`${expression}: ${cinder(expression)}`).toBe(`${expression}: ${n1}`);
      expect(`${expression}: ${reference(expression)}`).toBe(`${expression}: ${fhirpathJs}`);
    }
  });

  test('a FHIR Duration in UCUM against a calendar literal in an invariant: seconds and days order against it; a day is no definite duration for =', () => {
    const duration = (value: number, code: string) => ({ value, system: 'http://unitsofmeasure.org', code, unit: code });
    const holds = (expression: string, focus: Json) => compileInvariant(expression, types, false, true)(focus, 'Duration', { resource: focus, rootResource: focus });
    expect(holds('$this < 90 seconds', duration(1, 'min'))).toBe(true);
    expect(holds('$this < 90 seconds', duration(2, 'min'))).toBe(false);
    expect(holds('$this ~ 2 days', duration(48, 'h'))).toBe(true);
    expect(holds('$this ~ 2 days', duration(49, 'h'))).toBe(false);
    // Ordered (a day has one length); not equal (N1), and a year against UCUM not ordered: nothing, which fails an invariant.
    expect(holds('$this < 3 days', duration(2, 'd'))).toBe(true);
    expect(holds('$this < 3 days', duration(72, 'h'))).toBe(false);
    expect(cinder('$this = 2 days', duration(2, 'd'), 'Duration')).toBe('false');
    expect(holds('$this < 1 year', duration(2, 'd'))).toBeUndefined();
    expect(cinder('$this < 1 year', duration(2, 'd'), 'Duration')).toBe('empty');
  });

  test('toString() gives the unit representation', () => {
    expect(cinder('(2 years).toString()')).toBe('["2 \'year\'"]');
    expect(cinder("(1 'a').toString()")).toBe('["1 \'a\'"]');
  });
});

describe('distinct() and isDistinct() on quantities agree with `=`, large collections too', () => {
  const grams = (n: number) => Array.from({ length: n }, (_, i) => `${i + 2} 'g'`).join(' | ');
  // `|` keeps one of 1 g and 1000 mg; combine() keeps both, for distinct() to find.
  for (const extra of [4, 8, 20]) {
    test(`${extra + 2} items`, () => {
      const cases: [string, string][] = [
        [`(1 'g').combine(1000 'mg').combine(${grams(extra)}).distinct().count()`, `[${extra + 1}]`],
        [`(1 'g').combine(1000 'mg').combine(${grams(extra)}).isDistinct()`, 'false'],
        [`(1 'g').combine(1001 'mg').combine(${grams(extra)}).isDistinct()`, 'true'],
        [`(1 'g' | 1000 'mg' | ${grams(extra)}).count()`, `[${extra + 1}]`],
        [`(1 second).combine(1000 'ms').combine(1 's').combine(${grams(extra)}).distinct().count()`, `[${extra + 1}]`],
        [`(1 year).combine(12 months).combine(${grams(extra)}).isDistinct()`, 'false'],
        [`(1 year).combine(1 'a').combine(${grams(extra)}).isDistinct()`, 'true'],
      ];
      for (const [expression, expected] of cases) {
        expect(`${expression}: ${cinder(expression)}`).toBe(`${expression}: ${expected}`);
        expect(`${expression}: ${reference(expression)}`).toBe(`${expression}: ${expected}`);
      }
      // 1 Cel = 33.8 [degF] (by their offsets); FHIRPath.js, keying more than a few quantities by their own units, keeps both.
      expect(cinder(`(1 'Cel').combine(33.8 '[degF]').combine(${grams(extra)}).isDistinct()`)).toBe('false');
      // A year is 12 months and also 365 days (12 months are 360): each is kept unless `=` finds it equal to one kept before.
      expect(cinder(`(1 year).combine(12 months).combine(365 days).combine(${grams(extra)}).distinct().count()`)).toBe(`[${extra + 1}]`);
      expect(cinder(`(1 year).combine(360 days).combine(12 months).combine(${grams(extra)}).distinct().count()`)).toBe(`[${extra + 2}]`);
    });
  }

  test('FHIR Quantities of an Observation: UCUM codes converted, uncoded texts by value, comparators apart', () => {
    const ucum = (value: number, code: string) => ({ value, system: 'http://unitsofmeasure.org', code, unit: code });
    const observation = (values: Json[]) => ({
      resourceType: 'Observation', status: 'final', code: { text: 'panel' },
      component: values.map((valueQuantity, i) => ({ code: { text: `c${i}` }, valueQuantity })),
    });
    const fillers = Array.from({ length: 10 }, (_, i) => ucum(i + 10, 'kg'));
    const expression = 'component.value.ofType(Quantity).isDistinct()';
    const count = 'component.value.ofType(Quantity).distinct().count()';
    const cases: [Json[], string, string][] = [
      [[ucum(1, 'g'), ucum(1000, 'mg'), ...fillers], 'false', '[11]'],
      [[ucum(1, 'g'), ucum(999, 'mg'), ...fillers], 'true', '[12]'],
      [[{ value: 2, unit: 'tablet' }, { value: 2, unit: 'tablet', id: 't' }, ...fillers], 'false', '[11]'],
      [[{ value: 2, unit: 'tablet' }, { value: 2, unit: 'capsule' }, ...fillers], 'true', '[12]'],
      [[{ ...ucum(1, 'g'), comparator: '<' }, ucum(1000, 'mg'), ...fillers], 'true', '[12]'],
      [[{ ...ucum(1, 'g'), comparator: '<' }, { ...ucum(1, 'g'), comparator: '<' }, ...fillers], 'false', '[11]'],
    ];
    for (const [values, distinct, n] of cases) {
      const obs = observation(values);
      expect(`${JSON.stringify(values.slice(0, 2))}: ${cinder(expression, obs, 'Observation')} ${cinder(count, obs, 'Observation')}`)
        .toBe(`${JSON.stringify(values.slice(0, 2))}: ${distinct} ${n}`);
    }
  });

  test('a literal and an uncoded FHIR Quantity of the same JSON are equal by `=`, and one value to distinct(), few or many', () => {
    const uncoded = (n: number) => ({
      resourceType: 'Observation', status: 'final', code: { text: 'panel' },
      component: [{ value: 1, unit: 'mg' }, ...Array.from({ length: n }, (_, i) => ({ value: i + 10, unit: 'mg' }))].map((valueQuantity, i) => ({ code: { text: `c${i}` }, valueQuantity })),
    });
    expect(cinder("component.value.ofType(Quantity).first() = 1 'mg'", uncoded(0), 'Observation')).toBe('true');
    for (const n of [2, 12]) {
      expect(cinder("(1 'mg').combine(component.value.ofType(Quantity)).distinct().count()", uncoded(n), 'Observation')).toBe(`[${n + 1}]`);
      expect(cinder("(1 'mg').combine(component.value.ofType(Quantity)).isDistinct()", uncoded(n), 'Observation')).toBe('false');
    }
  });

  test('the keyed path still serves other items: strings, numbers and mixed collections', () => {
    const many = Array.from({ length: 30 }, (_, i) => `'s${i % 10}'`).join(' | ');
    expect(cinder(`(${many}).count()`)).toBe('[10]');
    const mixed = `(1 'g').combine(1000 'mg').combine(${Array.from({ length: 12 }, (_, i) => String(i % 6)).join(' | ')}).combine('a' | 'a')`;
    expect(cinder(`${mixed}.distinct().count()`)).toBe('[8]');
  });
});

describe('temperatures (UCUM Cel, [degF], [degRe], K) compare exactly: N1 Quantity Equality converts, and a conversion is exact', () => {
  const exact = (expression: string) => compileValues(expression, FHIRPATH_TYPES)({}, undefined, { resource: {}, rootResource: {} });
  test('order and equality past 15 digits of kelvin; equal amounts written in each unit stay equal', () => {
    for (const [expression, expected] of [
      // The 15th digit of kelvin: a 15-digit kelvin value made these equal.
      ["37.0000000000001 'Cel' > 310.15 'K'", true], ["310.15 'K' < 37.0000000000001 'Cel'", true], ["37.77777777777777 'Cel' < 100 '[degF]'", true],
      // 100 [degF] is 37.777... Cel: no decimal of 16 digits is it.
      ["100 '[degF]' = 37.77777777777778 'Cel'", false], ["0.1 '[degF]' = -17.7222222222222 'Cel'", false], ["310.9277777777778 'K' = 100 '[degF]'", false],
      ["37 'Cel' = 98.6 '[degF]'", true], ["-40 'Cel' = -40 '[degF]'", true], ["20.05 'Cel' = 293.2 'K'", true], ["5 '[degRe]' = 6.25 'Cel'", true],
      ["37 'Cel' = 310150 'mK'", true], ["1000000.01 'Cel' = 1000273.16 'K'", true], ["212 '[degF]' > 99.99999999999999 'Cel'", true],
      // ~ at the less precise value's places, the other converted exactly into its unit.
      ["36.6 'Cel' ~ 97.88 '[degF]'", true], ["37.5 'Cel' ~ 99.5 '[degF]'", true], ["37.5 'Cel' ~ 99.4 '[degF]'", false], ["32.27 '[degF]' ~ 0.2 'Cel'", true],
      ["(37 'Cel' | 98.6 '[degF]' | 310.15 'K').distinct().count() = 1", true],
      // Past eight items distinct() and isDistinct() file quantities by keys: a temperature's is its exact kelvin (0.01 K twice here;
      // their 15-digit kelvins were 0.00999999999999091 and 0.0100000000000162, and the two were kept).
      ["(-273.14 'Cel' | 1 'K' | 2 'K' | 3 'K' | 4 'K' | 5 'K' | 6 'K' | 7 'K' | 8 'K').combine(-459.652 '[degF]').distinct().count() = 9", true],
      ["(-273.14 'Cel' | 1 'K' | 2 'K' | 3 'K' | 4 'K' | 5 'K' | 6 'K' | 7 'K' | 8 'K').combine(-459.652 '[degF]').isDistinct()", false],
      // toQuantity() converts exactly too (98.59999999992152 before: the slope of [degF] came from two 15-digit kelvins).
      ["37 'Cel'.toQuantity('[degF]').value = 98.6", true], ["36.6 'Cel'.toQuantity('[degF]').value = 97.88", true],
      ["0.1 '[degF]'.toQuantity('K').value = 255.42777777777778", true], ["1 'Cel'.toQuantity('mK').value = 274150", true],
    ] as [string, boolean][]) {
      expect(`${expression} -> ${JSON.stringify(exact(expression))}`).toBe(`${expression} -> ${JSON.stringify([expected])}`);
    }
  });
});

