/**
 * FHIRPath N1 arithmetic on dates and quantities (§ 6.6 Math, Date/Time Arithmetic), toQuantity() and
 * convertsToQuantity() (§ 5.5.7), now()/today()/timeOfDay() (§ 5.10.1), and Quantity Equality across dimensions:
 * the specification's own examples, and HL7's N1 test suite's cases on them (test/fixtures/fhirpath/n1-quantity-cases.json).
 */
import { describe, expect, test } from 'bun:test';
import { compileInvariant, compileTopicCriteria, compileValues, FhirPathTooCostly, UnsupportedFhirPath } from '../../../src/fhir/validation/fhirpath-engine.ts';
import { elementType } from '../../../src/fhir/validation/model.ts';
import suite from '../../fixtures/fhirpath/n1-quantity-cases.json' with { type: 'json' };

type Json = Record<string, unknown>;
const types = { elementType };
const NOW = Date.UTC(2026, 11, 1, 6, 30, 15, 250);
const clock = { now: () => NOW };

/** `expression` on `focus`: 'error', 'empty', or its items (a quantity as `value 'unit'`, a date or time as its text). */
function run(expression: string, focus: Json = {}, type?: string): string {
  let out: unknown[];
  try {
    out = compileValues(expression, types)(focus, type, { resource: focus, rootResource: focus, clock });
  } catch {
    return 'error';
  }
  if (out.length === 0) return 'empty';
  return out.map((x) => (x !== null && typeof x === 'object' ? `${(x as Json).value} '${(x as Json).unit ?? (x as Json).code}'` : String(x))).join(', ');
}

const check = (cases: [string, string][]) => {
  for (const [expression, expected] of cases) expect(`${expression} -> ${run(expression)}`).toBe(`${expression} -> ${expected}`);
};

describe('date/time arithmetic (N1 § 6.6)', () => {
  test("the specification's examples: calendar years and months, end-of-month clamping, partial precisions", () => {
    check([
      ['@2014 + 24 months', '2016'],
      ['@2019-03-01 + 24 months', '2021-03-01'],
      ['@2014 + 23 months', '2015'],
      ['@2016 + 365 days', '2017'],
      ['@2014 - 24 months', '2012'],
      ['@2019-03-01 - 24 months', '2017-03-01'],
      ['@2019-01-31 + 1 month', '2019-02-28'],
      ['@2020-01-31 + 1 month', '2020-02-29'],
      ['@2020-02-29 + 1 year', '2021-02-28'],
      ['@2019-12-31 + 2 months', '2020-02-29'],
      ['@1973-12-25 + 7 days', '1974-01-01'],
      ['@1973-12-25 + 7.9 days', '1974-01-01'],
      ['@1973-12-25 + 1 week', '1974-01-01'],
      ['@2014 + 11 months', '2014'],
      ['@2014 - 1 month', '2014'],
      ['@2026-02 + 5 weeks', '2026-03'],
      ['@2026-02 + 4 weeks', '2026-02'],
    ]);
  });

  test('DateTime and Time: hours to milliseconds, their UCUM units, offsets kept, midnight wraps a Time', () => {
    check([
      ["@2014-01-01T10:00 - 30 'min'", '2014-01-01T09:30'],
      ['@2026-01-01T13:00:00 + 30 minutes', '2026-01-01T13:30:00'],
      ['@2026-01-01T23:00:00Z + 2 hours', '2026-01-02T01:00:00Z'],
      ["@2026-01-01T23:00:00+05:00 + 1 'h'", '2026-01-02T00:00:00+05:00'],
      ['@1973-12-25T00:00:00.000+10:00 + 42.53 seconds', '1973-12-25T00:00:42.530+10:00'],
      ["@2014-01-01T10:00:00Z + 1500 'ms'", '2014-01-01T10:00:01.500Z'],
      ["@2014-01-01T10:00:00 + 1 'd'", '2014-01-02T10:00:00'],
      ["@2014-01-01T10:00:00 + 2 'wk'", '2014-01-15T10:00:00'],
      ['@2014-01-01T + 25 hours', '2014-01-02'],
      ['@2014-01-01T10 + 90 minutes', '2014-01-01T11'],
      ['@T23:30:00 + 1 hour', '00:30:00'],
      ['@T01:00:00 + 48 hours', '01:00:00'],
      ['@T00:30:00 - 1 hour', '23:30:00'],
      ["@T10:00 + 15 'min'", '10:15'],
      ['@0050-12-31 + 1 day', '0051-01-01'],
      ['@2014-01-01T10:00:00 + 2 weeks', '2014-01-15T10:00:00'],
      ['@T10:00:00 + 1500 milliseconds', '10:00:01.500'],
      ['@T10:00:00.250 - 1 millisecond', '10:00:00.249'],
      ['@2014-01-01 - 1.5 days', '2013-12-31'],
      ['@2014-01-01T10:00 + 90.5 seconds', '2014-01-01T10:01'],
    ]);
  });

  test("errors: 'a' and 'mo' (no calendar length), units a Date or a Time does not take, years past 9999, a quantity of no time", () => {
    check([
      ["@2014-01-01 + 1 'a'", 'error'],
      ["@2014-01-01T10:00 + 1 'mo'", 'error'],
      ['@2014-01-01 + 25 hours', 'error'],
      ['@T10:00 + 1 day', 'error'],
      ["@2014-01-01 + 1 'g'", 'error'],
      ['@9999-12-31 + 1 day', 'error'],
      ['@2014 + 100000000000000000000 years', 'error'],
      ['@2014-01-01 + 100000000000000000000 days', 'error'],
      // A Time wraps at midnight, but not by an amount whose milliseconds no number holds exactly (it gave 17:36).
      ["@T10:00 + 100000000000000000000 'h'", 'error'],
      ['@T10:00:00 - 10000000000000000 seconds', 'error'],
      ['@T10:00 + 1000000 hours', '02:00'],
      ['@2014-01-01 + {}', 'empty'],
    ]);
  });

  test('a FHIR date and dateTime element: a birthDate takes years, an effectiveDateTime of a day hours', () => {
    const patient = { resourceType: 'Patient', birthDate: '2000-02-29' };
    expect(run('birthDate + 18 years', patient, 'Patient')).toBe('2018-02-28');
    expect(run('birthDate + 1 hour', patient, 'Patient')).toBe('error');
    const obs = { resourceType: 'Observation', status: 'final', code: { text: 'x' }, effectiveDateTime: '2014-01-01' };
    expect(run('effective + 25 hours', obs, 'Observation')).toBe('2014-01-02');
    expect(run("(effective as dateTime) + 1 'd' > @2014-01-01", obs, 'Observation')).toBe('true');
  });
});

describe('now(), today(), timeOfDay() (N1 § 5.10.1)', () => {
  test("read the evaluation's clock: `today() - 18 years`, `now() + 2 hours`", () => {
    check([
      ['today()', '2026-12-01'],
      ['now()', '2026-12-01T06:30:15.250Z'],
      ['timeOfDay()', '06:30:15.250'],
      ['today() - 18 years', '2008-12-01'],
      ['now() + 2 hours', '2026-12-01T08:30:15.250Z'],
      ['now() = now()', 'true'],
    ]);
  });

  test("a SubscriptionTopic's fhirPathCriteria still may not ask the time (not the write's): UnsupportedFhirPath, a 422 there", () => {
    for (const expression of ['%current.meta.lastUpdated < now()', 'today() > @2020-01-01', 'timeOfDay() > @T10:00']) {
      expect(() => compileTopicCriteria(expression, types)).toThrow(UnsupportedFhirPath);
    }
  });

  test('an invariant on an age: the birthDate against today() less 18 years', () => {
    const adult = compileInvariant('birthDate <= today() - 18 years', types, false, true);
    const ctx = (p: Json) => ({ resource: p, rootResource: p, clock });
    const p1 = { resourceType: 'Patient', birthDate: '2008-12-01' };
    const p2 = { resourceType: 'Patient', birthDate: '2008-12-02' };
    expect(adult(p1, 'Patient', ctx(p1))).toBe(true);
    expect(adult(p2, 'Patient', ctx(p2))).toBe(false);
  });
});

describe('quantity arithmetic (N1 § 6.6)', () => {
  test("the specification's examples, and units of one dimension in the finer unit", () => {
    check([
      ["12 'cm' * 3 'cm'", "36 'cm2'"],
      ["2 'cm' * 3 'cm'", "6 'cm2'"],
      ["3 'cm' * 12 'cm2'", "36 'cm3'"],
      ["12 'cm2' / 3 'cm'", "4 'cm'"],
      ["3 'm' + 3 'cm'", "303 'cm'"],
      ["3 'm' - 3 'cm'", "297 'cm'"],
      ["4 'g' / 2 'm'", "2 'g/m'"],
      ["1 'm' / 1 'm'", "1 '1'"],
      ["2 'cm' * 3", "6 'cm'"],
      ["6 / 2 'cm'", "3 '1/cm'"],
      ["1 'kg' + 500 'g'", "1500 'g'"],
      ["2 'mg/dL' * 10 'dL'", "20 'mg'"],
      ['1 year + 6 months', "18 'month'"],
      ['2 days * 3', "6 'day'"],
      ["1 second + 1 'ms'", "1001 'ms'"],
      ['12 / 0', 'empty'],
      ["12 'cm' / 0 'cm'", 'empty'],
      ["12 'cm' / 0", 'empty'],
      [`1${'0'.repeat(200)} 'm' * 1${'0'.repeat(200)} 'm'`, 'empty'],
      ["1 'g' + 1 'mL'", 'empty'],
      ["1 day + 1 'h'", 'empty'],
      ["1 'Cel' + 1 '[degF]'", 'empty'],
      // A special unit (an offset or a logarithm) is no multiple: it neither multiplies nor divides, alone, prefixed or in an expression.
      ["1 'Cel' / 2 '[degF]'", 'empty'],
      ["2 'Cel' * 3", 'empty'],
      ["3 * 2 '[degF]'", 'empty'],
      ["6 'Cel' / 2", 'empty'],
      ["2 'mCel' * 1 'm'", 'empty'],
      ["1 'Cel/h' * 2 'h'", 'empty'],
      ["7 '[pH]' * 2", 'empty'],
      ["1 'B[10.nV]' * 2 'm'", 'empty'],
      ["2 'K' * 3", "6 'K'"],
      ["2 'K' / 1 's'", "2 'K/s'"],
      ["2.0 'cm' * 2.0 'm' = 0.040 'm2'", 'true'],
    ]);
  });

  test('a FHIR Quantity in UCUM multiplies; one of another system is no operand (an error)', () => {
    const obs = {
      resourceType: 'Observation', status: 'final', code: { text: 'x' },
      component: [
        { code: { text: 'a' }, valueQuantity: { value: 2, system: 'http://unitsofmeasure.org', code: 'kg' } },
        { code: { text: 'b' }, valueQuantity: { value: 3, system: 'http://example.org/units', code: 'tab' } },
      ],
    };
    expect(run("component[0].value * 2 'm'", obs, 'Observation')).toBe("4 'kg.m'");
    expect(run('component[1].value + component[1].value', obs, 'Observation')).toBe("6 'tab'");
  });

  test("quantities of one non-UCUM unit add and scale (N1: 'tab' + 'tab'); other units, or a comparator, give nothing, not an error", () => {
    const obs = {
      resourceType: 'Observation', status: 'final', code: { text: 'x' },
      component: [
        { code: { text: 'a' }, valueQuantity: { value: 3, unit: 'tablet', system: 'http://snomed.info/sct', code: '385055001' } },
        { code: { text: 'b' }, valueQuantity: { value: 2, unit: 'tablets', system: 'http://snomed.info/sct', code: '385055001' } },
        { code: { text: 'c' }, valueQuantity: { value: 2, system: 'http://snomed.info/sct', code: '428673006' } },
        { code: { text: 'd' }, valueQuantity: { value: 2, comparator: '<', system: 'http://unitsofmeasure.org', code: 'mg' } },
      ],
    };
    const values = (expression: string) => compileValues(expression, types)(obs, 'Observation', { resource: obs, rootResource: obs, clock });
    expect(values('component[0].value + component[1].value')).toEqual([{ value: 5, unit: 'tablet', system: 'http://snomed.info/sct', code: '385055001' }]);
    expect(values('component[0].value - component[1].value')).toEqual([{ value: 1, unit: 'tablet', system: 'http://snomed.info/sct', code: '385055001' }]);
    expect(values('component[0].value * 2')).toEqual([{ value: 6, unit: 'tablet', system: 'http://snomed.info/sct', code: '385055001' }]);
    expect(values('component[0].value / 2')).toEqual([{ value: 1.5, unit: 'tablet', system: 'http://snomed.info/sct', code: '385055001' }]);
    expect(run('(component[0].value + component[1].value) > component[0].value', obs, 'Observation')).toBe('true');
    expect(run('component[0].value + component[2].value', obs, 'Observation')).toBe('empty');
    expect(run('component[0].value * component[1].value', obs, 'Observation')).toBe('empty');
    expect(run("component[0].value + 1 'mg'", obs, 'Observation')).toBe('empty');
    expect(run("component[3].value + 1 'mg'", obs, 'Observation')).toBe('empty');
    expect(run("'tab' + 1 'mg'", obs, 'Observation')).toBe('error');
  });

  test("unary minus on a quantity: a literal, a FHIR Quantity keeping its system and code, a calendar duration", () => {
    check([
      ["-(5 'mg')", "-5 'mg'"],
      ["-(5.5 'mg') + 6 'mg'", "0.5 'mg'"],
      ['-(2 days)', "-2 'day'"],
      ["@2026-01-10 + -(2 days)", '2026-01-08'],
      ["-(5 'mg') < 0 'mg'", 'true'],
    ]);
    const obs = { resourceType: 'Observation', status: 'final', code: { text: 'x' }, valueQuantity: { value: 3, system: 'http://snomed.info/sct', code: '385055001' } };
    expect(compileValues('-value', types)(obs, 'Observation', { resource: obs, rootResource: obs })).toEqual([{ value: -3, system: 'http://snomed.info/sct', code: '385055001' }]);
    expect(run("-('a')")).toBe('error');
  });

  test('a product whose unit grows without end: its text charged to the budget and bounded (an overflow), not a heap exhausted', () => {
    const budget = () => ({ left: 10_000, limit: 10_000 });
    const growing = (expression: string) => compileValues(expression, types)({}, undefined, { resource: {}, rootResource: {}, budget: budget() });
    // An annotation is no atom the units' terms combine: its products were written out in full, doubling with each turn.
    expect(growing("(1 '{a}').repeat($this * $this).count()")).toEqual([9]);
    expect(growing("(1 '[in_i]/{b}').repeat($this * $this).all(toString().length() < 4200)")).toEqual([true]);
    // A unit read from a resource's text, of a megabyte: no unit a product takes (its terms were read, 0.5 s each time).
    const big = { resourceType: 'Basic', code: { text: `1 '${'g.'.repeat(500_000)}g'` } };
    expect(compileValues("code.text.toQuantity() * 1 'g'", types)(big, 'Basic', { resource: big, rootResource: big })).toEqual([]);
    // Its text is charged: 8,000 characters of units are 80 values, past a budget of 60.
    const small = { left: 60, limit: 60 };
    expect(() => compileValues("(1 '{a}').repeat($this * $this).count()", types)({}, undefined, { resource: {}, rootResource: {}, budget: small })).toThrow(FhirPathTooCostly);
    // An exponent past what a number holds exactly is an overflow: nothing, so repeat() ends.
    expect(compileValues("(1 'g').repeat($this * $this).count()", types)({}, undefined, { resource: {}, rootResource: {}, budget: budget() })).toEqual([52]);
  });
});

describe('quantity arithmetic is decimal, as Decimal arithmetic is (no rounding to 15 digits)', () => {
  test('sums, differences, products and quotients keep every digit a double gives back; conversions by factors in decimal', () => {
    check([
      // 15 digits cut the 16th: 0.123456789012346 and 0.999999999999999 before.
      ["(0.1234567890123456 'g' + 0 'g').value = 0.1234567890123456", 'true'], ["(1 'g' / 3 * 3).value", '1'], ["(0.1234567890123456 'g' * 1).value", '0.1234567890123456'],
      ["(1.1 'cm' * 3).value", '3.3'], ["0.1 'mg' + 0.2 'mg'", "0.3 'mg'"], ["(0.3 'mg' / 0.1).value", '3'], ["3 'm' + 3 'cm'", "303 'cm'"],
      ["(0.1234567890123456 'kg').toQuantity('g').value", '123.4567890123456'], ["(5 '[lb_av]').toQuantity('kg')", "2.26796185 'kg'"],
      ['(1 year / 3 * 3).value', '1'],
    ]);
    // A FHIR Quantity of another system scales in decimal too.
    const obs = { resourceType: 'Observation', valueQuantity: { value: 0.1, system: 'http://snomed.info/sct', code: '732936001' } };
    expect(run('(Observation.value * 3).value', obs, 'Observation')).toBe('0.3');
    expect(run('(Observation.value + Observation.value + Observation.value).value', obs, 'Observation')).toBe('0.3');
  });
});

describe('toQuantity() and convertsToQuantity() (N1 § 5.5.7)', () => {
  test('from strings, numbers and Booleans; the unit argument converts through UCUM or the calendar factors', () => {
    check([
      ["'5.5 \\'mg\\''.toQuantity()", "5.5 'mg'"],
      ["'4 days'.toQuantity()", "4 'day'"],
      ["'10 \\'mg[Hg]\\''.toQuantity()", "10 'mg[Hg]'"],
      ["'-2.5'.toQuantity()", "-2.5 '1'"],
      ['5.toQuantity()', "5 '1'"],
      ['true.toQuantity()', "1 '1'"],
      ['false.toQuantity()', "0 '1'"],
      ["'1 wk'.toQuantity()", 'empty'],
      ["'abc'.toQuantity()", 'empty'],
      ['@2014.toQuantity()', 'empty'],
      ["1 'kg'.toQuantity('g')", "1000 'g'"],
      ["'1 \\'kg\\''.toQuantity('[lb_av]') > 2.2 '[lb_av]'", 'true'],
      ["4 days.toQuantity('hours')", "96 'hour'"],
      ["1 second.toQuantity('ms')", "1000 'ms'"],
      ["1 'g'.toQuantity('mL')", 'empty'],
      ["'5 \\'mg\\''.convertsToQuantity()", 'true'],
      ["'5 \\'mg\\''.convertsToQuantity('g')", 'true'],
      ["'5 \\'mg\\''.convertsToQuantity('mL')", 'false'],
      ["'five'.convertsToQuantity()", 'false'],
      ['{}.convertsToQuantity()', 'empty'],
      ["(1 | 2).toQuantity()", 'error'],
    ]);
  });
});

describe('Quantity Equality across dimensions (N1 § 6.1.1)', () => {
  test("units of two dimensions give nothing; a calendar duration above seconds is unequal to a UCUM time", () => {
    check([
      ["1 'g' = 1 'mL'", 'empty'],
      ["1 'g' != 1 'mL'", 'empty'],
      ["1 'g' = 1 'foo'", 'empty'],
      ["1 'g' ~ 1 'mL'", 'false'],
      ["1 year = 1 'a'", 'false'],
      ["1 day = 1 'd'", 'false'],
      ["1 year = 1 'g'", 'empty'],
      ["1 second = 1 's'", 'true'],
      ["1 'g' = 1000 'mg'", 'true'],
    ]);
  });
});

describe('math functions (N1 § 5.7: abs, ceiling, exp, floor, ln, log, power, round, sqrt, truncate)', () => {
  test("the specification's examples and HL7's cases on them", () => {
    check([
      ['(-5).abs()', '5'], ['(-5.5).abs()', '5.5'], ["(-5.5 'mg').abs()", "5.5 'mg'"], ['(-2 days).abs()', "2 'day'"],
      ['1.ceiling()', '1'], ['1.1.ceiling()', '2'], ['(-1.1).ceiling()', '-1'],
      ['0.exp()', '1'], ['(-0.0).exp()', '1'],
      ['2.1.floor()', '2'], ['(-2.1).floor()', '-3'],
      ['1.ln()', '0'], ['1.0.ln()', '0'],
      ['16.log(2)', '4'], ['100.0.log(10.0)', '2'],
      ['2.power(3)', '8'], ['2.5.power(2)', '6.25'], ['(-1).power(0.5)', 'empty'], ['2.power(-1)', '0.5'],
      ['1.round()', '1'], ['3.14159.round(3)', '3.142'], ['0.00000015.round(7)', '2e-7'], ['(-0.00000015).round(8)', '-1.5e-7'],
      ['0.00000015.round(7).toString()', '0.0000002'], ['123456789012345678901234.5.round(1) > 1', 'true'], ['2.5.round()', '3'], ['1.005.round(2)', '1.01'], ['(-2.5).round()', '-3'],
      ['81.sqrt()', '9'], ['(-1).sqrt()', 'empty'],
      ['101.truncate()', '101'], ['1.00000001.truncate()', '1'], ['(-1.56).truncate()', '-1'],
    ]);
  });

  test('types: ceiling, floor and truncate give an Integer; an Integer to a non-negative Integer power an Integer; the rest a Decimal', () => {
    check([
      ['1.1.ceiling() is Integer', 'true'], ['2.9.floor() is Integer', 'true'], ['2.9.truncate() is Integer', 'true'],
      ['2.power(3) is Integer', 'true'], ['2.power(0.5) is Decimal', 'true'], ['4.sqrt() is Decimal', 'true'],
      ['(-5).abs() is Integer', 'true'], ['1.round() is Decimal', 'true'],
    ]);
  });

  test('empty in, empty out; an overflow or a result no number holds gives nothing; a wrong operand or argument is an error', () => {
    check([
      ['{}.abs()', 'empty'], ['{}.sqrt()', 'empty'], ['2.log({})', 'empty'], ['2.power({})', 'empty'],
      ['0.ln()', 'empty'], ['(-1).ln()', 'empty'], ['1.log(1)', 'empty'], ['1000.exp()', 'empty'], ['10.power(400)', 'empty'],
      ['0.power(-1)', 'empty'], ["'a'.abs()", 'error'], ['(1 | 2).abs()', 'error'], ['1.5.round(-1)', 'error'], ['1.5.round(0.5)', 'error'],
      ["2.power('a')", 'error'], ['2.power()', 'error'], ["(1 'mg').sqrt()", 'error'],
    ]);
  });
});

describe('Decimal arithmetic is decimal (N1 § 2.1: a Decimal, not a binary fraction)', () => {
  test('sums and differences to the operands\' places, products to their sum, quotients to 15 digits where binary noise is all that differs; div and mod on the decimals as written', () => {
    check([
      ['0.1 + 0.2 = 0.3', 'true'], ['0.1 + 0.2', '0.3'], ['(0.1 + 0.2) > 0.3', 'false'], ['0.3 - 0.1 = 0.2', 'true'], ['1.1 * 3 = 3.3', 'true'],
      ['3.3 / 3 = 1.1', 'true'], ['1 / 3', '0.3333333333333333'], ['1 / 3 * 3', '1'], ['0.3 / 0.1', '3'], ['1.2345678901234567 + 0 = 1.2345678901234567', 'true'],
      ['100000000000000.1 + 0.01', '100000000000000.11'], ['123456789012345678 + 0.1', '123456789012345680'], ['1.1 * 1.1', '1.21'],
      ['2.5 mod 0.3', '0.1'], ['0.000000000001 * 0.000000000001', '1e-24'], ['0.000000000000001 * 0.000000000000001', '1e-30'], ['-0.5 + 0.5', '0'], ['-0.0 * 1', '0'], ['0.3 mod 0.1', '0'], ['0.3 div 0.1', '3'], ['5.5 mod 2', '1.5'],
      ['-5.5 mod 2', '-1.5'], ['5.5 div 2', '2'], ['1.0 / 0', 'empty'], ['7 mod 0.0', 'empty'], ['(0.1 | 0.2 | 0.4).aggregate($this + $total, 0.0) = 0.7', 'true'],
      ['2147483647.0 + 1', '2147483648'], ['0.000001 * 0.000001', '1e-12'],
    ]);
  });
});

describe("Decimal equality and equivalence (N1 § 6.1: = exact, trailing zeroes aside; ~ at the less precise operand's precision)", () => {
  test("HL7's case: 1.2 / 1.8 equals only itself; rounded, or compared by ~, it is 0.67 (guards behaviour that held)", () => {
    check([
      ['1.2 / 1.8 = 0.66666667', 'false'], ['1.2 / 1.8 ~ 0.66666667', 'true'], ['(1.2 / 1.8).round(2) = 0.67', 'true'], ['1.2 / 1.8 ~ 0.67', 'true'],
      ['1.2 / 1.8 ~ 0.66', 'false'], ['1.0 = 1.00', 'true'], ['1.5 = 1.50', 'true'], ['0.67 = 0.670', 'true'], ['0.67 = 0.671', 'false'],
    ]);
  });
});

describe('~ and comparisons on decimals a double writes with an exponent (1e-7)', () => {
  test('~ rounds to the places the less precise operand is written with, 7 for 0.0000001 (it counted none: 0.0000001 ~ 0.0000002 was true)', () => {
    check([
      ['0.0000001 ~ 0.0000002', 'false'], ['0.0000001 ~ 0.00000012', 'true'], ['0.0000001 !~ 0.0000002', 'true'], ['0.00000015 ~ 0.0000002', 'true'],
      ['0.000000123 ~ 0.000000124', 'false'], ['1.005 ~ 1.01', 'true'], ['1.2 ~ 1.24', 'true'], ['1.2 ~ 1.25', 'false'],
      ["0.0000001 'mg' ~ 0.0000002 'mg'", 'false'], ["0.0000001 'g' ~ 0.0001 'mg'", 'true'], ["0.0000001 'g' ~ 0.0002 'mg'", 'false'],
      ['0.0000001 < 0.0000002', 'true'], ['0.0000002 <= 0.0000001', 'false'], ['0.0000001 = 0.00000010', 'true'], ["0.0000001 'g' < 0.0002 'mg'", 'true'],
    ]);
    // A FHIR decimal written with an exponent in its JSON reads as the same number.
    const obs = { resourceType: 'Observation', valueQuantity: { value: 1e-7, unit: 'g', system: 'http://unitsofmeasure.org', code: 'g' } };
    expect(run('Observation.value.value ~ 0.0000002', obs, 'Observation')).toBe('false');
    expect(run('Observation.value.value ~ 0.0000001', obs, 'Observation')).toBe('true');
    expect(run("Observation.value ~ 0.0002 'mg'", obs, 'Observation')).toBe('false');
    expect(run('Observation.value.value < 0.0000002', obs, 'Observation')).toBe('true');
  });
});

describe('substring(), skip() and take() take an Integer (N1 signatures): anything else is an error', () => {
  test('a Decimal (a whole one too), a String, or a decimal element: an error; an Integer or nothing: the result', () => {
    check([
      ["'abcdef'.substring(1.5)", 'error'], ["'abcdef'.substring(1.0)", 'error'], ["'abcdef'.substring(1, 2.0)", 'error'], ["'abc'.substring('x')", 'error'],
      ['(1 | 2 | 3).skip(1.0)', 'error'], ['(1 | 2 | 3).take(1.5)', 'error'], ["(1 | 2 | 3).take('2')", 'error'], ['(1 | 2 | 3).skip(2.5.floor())', '3'],
      ["'abcdef'.substring(1, 2)", 'bc'], ["'abcdef'.substring(2)", 'cdef'], ["'abc'.substring({})", 'empty'], ["'abc'.substring(1, {})", 'empty'],
      ["'abc'.substring(3)", 'empty'], ['(1 | 2 | 3).take(2)', '1, 2'], ['(1 | 2 | 3).skip({})', '1, 2, 3'], ["'abcdef'.substring('ab'.length())", 'cdef'],
    ]);
  });
});

describe('Integer is 32-bit (N1: -2^31 to 2^31-1; an overflow gives nothing, § 6.6)', () => {
  test('literals: the range is an Integer, past it a Decimal (as HL7\'s validator reads a literal that is no 32-bit integer)', () => {
    check([
      ['2147483647', '2147483647'], ['-2147483648', '-2147483648'], ['-2147483648 is Integer', 'true'],
      ['2147483648', '2147483648'], ['-2147483649', '-2147483649'], ['2147483648 is Decimal', 'true'], ['2147483648.0', '2147483648'], ['2147483648.0 is Decimal', 'true'],
    ]);
  });

  test('arithmetic on Integers past the range gives nothing; Decimals keep their values', () => {
    check([
      ['2147483647 + 1', 'empty'], ['-2147483648 - 1', 'empty'], ['65536 * 65536', 'empty'], ['46340 * 46340', '2147395600'],
      ['-2147483648 div -1', 'empty'], ['-(-2147483648)', 'empty'], ['(-2147483648).abs()', 'empty'], ['-2147483648 mod -1', '0'],
      ['(2147483647 + 1).empty()', 'true'], ['2147483646 + 1', '2147483647'], ['-2147483647 - 1', '-2147483648'],
      ['2147483647.0 + 1', '2147483648'], ['2147483647 + 1.0', '2147483648'], ['2147483647 / 1', '2147483647'],
      ['2.power(31)', 'empty'], ['2.power(30)', '1073741824'], ['(-2).power(31)', '-2147483648'], ['2.power(-1)', '0.5'],
      ['3000000000.5.floor()', 'empty'], ['(-2147483648.5).ceiling()', '-2147483648'], ['2147483647.9.truncate()', '2147483647'],
    ]);
  });

  test('toInteger(): a string or Integer past the range converts to nothing, a Decimal never converts (N1 § 5.5.3)', () => {
    check([
      ["'2147483647'.toInteger()", '2147483647'], ["'-2147483648'.toInteger()", '-2147483648'],
      ["'2147483648'.toInteger()", 'empty'], ["'-2147483649'.toInteger()", 'empty'], ["'99999999999999999999'.toInteger()", 'empty'],
      ['2147483648.0.toInteger()', 'empty'], ['12.0.toInteger()', 'empty'], ['12.toInteger()', '12'],
    ]);
  });

  test('FHIR integer elements are Integers: their sums past the range give nothing', () => {
    const q = { resourceType: 'Questionnaire', status: 'draft', item: [{ linkId: 'a', type: 'string', maxLength: 2147483647 }] };
    expect(run('Questionnaire.item.maxLength + 1', q, 'Questionnaire')).toBe('empty');
    expect(run('Questionnaire.item.maxLength - 1', q, 'Questionnaire')).toBe('2147483646');
    expect(run('Questionnaire.item.maxLength * 2.0', q, 'Questionnaire')).toBe('4294967294');
  });
});

describe("HL7's N1 test suite: its cases on quantities and the current time (differential)", () => {
  /**
   * Where the suite and N1's text disagree Cinder follows the text: `7 days = 1 'wk'` (a calendar week is unequal to a
   * definite one, N1's Quantity Equality) and `'1 day'.toQuantity() = 1 '{day}'` (an annotation is UCUM's unit 1,
   * of another dimension than a day: empty).
   */
  const DIVERGENT = new Set(['testQuantity6', 'testStringQuantityDayLiteralToQuantity']);
  const outputOf = (expression: string): string[] => {
    const r = run(expression, suite.focus, 'Patient');
    if (r === 'empty') return [];
    if (r === 'error') return ['error'];
    return r.split(', ');
  };
  const expectedOf = (outputs: string[]) => outputs.map((o) => o.slice(o.indexOf(':') + 1));

  test(`${suite.cases.length} cases: all but the ${DIVERGENT.size} where N1's text decides otherwise`, () => {
    const failed: string[] = [];
    for (const c of suite.cases) {
      if (JSON.stringify(outputOf(c.expression)) !== JSON.stringify(expectedOf(c.outputs))) failed.push(c.name);
    }
    expect(failed.sort()).toEqual([...DIVERGENT].sort());
  });
});
