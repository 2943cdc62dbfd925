/**
 * FHIRPath 2.0's precision functions (STU): lowBoundary(), highBoundary(), precision() and comparable(), beyond HL7's
 * R4 suite's cases (test/unit/validation/fhirpath-r4-suite.test.ts): month lengths and leap years, offsets, fractions
 * of a second, FHIR elements (a birthDate, a Period, an Observation's Quantity), precisions a type is not written to,
 * and the errors N1's rules give (many items, an item of another type, a precision that is no Integer).
 */
import { describe, test } from 'bun:test';
import { checkFhirPath } from '../../helpers/fhirpath-cases.ts';

const check = checkFhirPath;

describe('lowBoundary() and highBoundary() on Decimals and Integers: the range a value stands for, written to a precision', () => {
  test('the places asked for, trailing zeroes kept (toString()); exact past what a double holds; the value of zero', () => {
    check([
      ['1.587.lowBoundary().toString()', '1.58650000'],
      ['1.587.highBoundary(3).toString()', '1.588'],
      ['1.587.lowBoundary(28).toString()', `1.5865${'0'.repeat(24)}`],
      ['1.587.lowBoundary(29)', 'empty'],
      ['0.lowBoundary().toString()', '-0.50000000'],
      ['0.highBoundary(1).toString()', '0.5'],
      ['123456789012345678.9.highBoundary(2).toString()', '123456789012345678.95'],
      ['2.50.lowBoundary(3).toString()', '2.495'],
      ['(1.587.lowBoundary(2) < 1.587) and (1.587 < 1.587.highBoundary(2))', 'true'],
      ['(-0.0).toString()', '0.0'],
      ['(-(0.0034.highBoundary(1))).toString()', '0.0'],
    ]);
  });

  test('a FHIR decimal element and a Quantity: the value as its element holds it, the unit and system kept', () => {
    const obs = {
      resourceType: 'Observation', status: 'final', code: { text: 'weight' },
      valueQuantity: { value: 72.5, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
    };
    check([
      ['Observation.value.lowBoundary(3).toString()', "72.450 'kg'"],
      ['Observation.value.lowBoundary(3)', "72.45 'kg'"],
      ['Observation.value.highBoundary(2).toString()', "72.55 'kg'"],
      ["Observation.value.highBoundary(2).system = 'http://unitsofmeasure.org'", 'true'],
      ['Observation.value.value.lowBoundary(2).toString()', '72.45'],
    ], obs, 'Observation');
  });

  test('errors: many items, an item of another type, a precision that is no Integer; empty in, empty out', () => {
    check([
      ['(1.5 | 2.5).lowBoundary()', 'error'],
      ["'1.5'.lowBoundary()", 'error'],
      ['true.highBoundary()', 'error'],
      ['1.5.lowBoundary(1.0)', 'error'],
      ["1.5.lowBoundary('2')", 'error'],
      ['{}.lowBoundary()', 'empty'],
      ['1.5.lowBoundary({})', 'empty'],
    ]);
  });
});

describe('lowBoundary() and highBoundary() on Dates, DateTimes and Times', () => {
  test("the components a value lacks at their least and greatest: a month's last day, leap years, 23:59:59.999", () => {
    check([
      ['@2014.lowBoundary()', '2014-01-01'],
      ['@2014.highBoundary()', '2014-12-31'],
      ['@2016-02.highBoundary()', '2016-02-29'],
      ['@2015-02.highBoundary()', '2015-02-28'],
      ['@2000-02.highBoundary(8)', '2000-02-29'],
      ['@1900-02.highBoundary(8)', '1900-02-28'],
      ['@2014-04.highBoundary(8)', '2014-04-30'],
      ['@2014-05-06.lowBoundary(4)', '2014'],
      ['@T10.highBoundary()', '10:59:59.999'],
      ['@T10:30:15.5.lowBoundary()', '10:30:15.500'],
      ['@T10:30:15.5.highBoundary()', '10:30:15.599'],
      ['@T10:30.highBoundary(6)', '10:30:59'],
    ]);
  });

  test('a DateTime: its offset kept; without one the earliest (+14:00) and the latest (-12:00), the range holding it anywhere', () => {
    check([
      ['@2014-01-01T08.highBoundary(17)', '2014-01-01T08:59:59.999-12:00'],
      ['@2014-01-01T08Z.highBoundary()', '2014-01-01T08:59:59.999Z'],
      ['@2014-01-01T08:05:30.25+05:30.lowBoundary()', '2014-01-01T08:05:30.250+05:30'],
      ['@2014-01-01T08:05+08:00.highBoundary(12)', '2014-01-01T08:05+08:00'],
      ['@2014T.lowBoundary()', '2014-01-01T00:00:00.000+14:00'],
      ['@2014-03T.highBoundary(10)', '2014-03-31T23-12:00'],
      ['@2014-01-01T08:05+08:00.lowBoundary(6)', '2014-01'],
    ]);
  });

  test('a precision the type is not written to gives nothing: a Date has no time, a Time no date, 5 digits no component', () => {
    check([
      ['@2014.lowBoundary(17)', 'empty'],
      ['@2014.lowBoundary(5)', 'empty'],
      ['@T10:30.lowBoundary(17)', 'empty'],
      ['@T10:30.lowBoundary(8)', 'empty'],
      ['@2014-01-01T08.lowBoundary(9)', 'empty'],
      ['@2014-01-01T08.lowBoundary(-1)', 'empty'],
    ]);
  });

  test("FHIR elements: a birthDate is a date, a Period's start and end dateTimes, compared by their ranges", () => {
    const patient = { resourceType: 'Patient', birthDate: '1974-12', identifier: [{ period: { start: '2001-05-06', end: '2001-05-06T10:00:00Z' } }] };
    check([
      ['Patient.birthDate.lowBoundary()', '1974-12-01'],
      ['Patient.birthDate.highBoundary()', '1974-12-31'],
      ['Patient.birthDate.precision()', '6'],
      ['Patient.identifier.period.start.lowBoundary()', '2001-05-06T00:00:00.000+14:00'],
      ['Patient.identifier.period.start.highBoundary()', '2001-05-06T23:59:59.999-12:00'],
      // per-1 as FHIRPath 2.0 writes it: a date start and a dateTime end of the same day are in order.
      ['Patient.identifier.period.all(start.lowBoundary() <= end.highBoundary())', 'true'],
    ], patient, 'Patient');
  });
});

describe('precision() and comparable()', () => {
  test('precision(): a Decimal its places as written, an Integer 0, a date or time its digits', () => {
    check([
      ['1.58700.precision()', '5'],
      ['1.precision()', '0'],
      ['(-2.5).precision()', '1'],
      ['@2014-01.precision()', '6'],
      ['@2014-01-05T10:30.precision()', '12'],
      ['@2014-01-05T10:30:00+02:00.precision()', '14'],
      ['@T10.precision()', '2'],
      ["'abc'.precision()", 'error'],
      ["1 'mg'.precision()", 'error'],
      ['(1.5 | 2.25).precision()', 'error'],
      ['{}.precision()', 'empty'],
    ]);
  });

  test('comparable(): UCUM units of one dimension, calendar durations with each other and with UCUM times, one unit of another system', () => {
    const obs = {
      resourceType: 'Observation', status: 'final', code: { text: 'x' },
      component: [
        { code: { text: 'a' }, valueQuantity: { value: 2, system: 'http://example.org/units', code: 'tab' } },
        { code: { text: 'b' }, valueQuantity: { value: 3, system: 'http://example.org/units', code: 'tab' } },
        { code: { text: 'c' }, valueQuantity: { value: 3, system: 'http://unitsofmeasure.org', code: 'mg' } },
      ],
    };
    check([
      ["1 'kg'.comparable(5 '[lb_av]')", 'true'],
      ["1 'kg'.comparable(1 'm')", 'false'],
      ["1 'mg/dL'.comparable(1 'g/L')", 'true'],
      ["1 'Cel'.comparable(1 '[degF]')", 'true'],
      ['1 year.comparable(3 months)', 'true'],
      ["1 week.comparable(1 'h')", 'true'],
      ["1 day.comparable(1 'g')", 'false'],
      ['component[0].value.comparable(component[1].value)', 'true'],
      ['component[0].value.comparable(component[2].value)', 'false'],
      ["component[2].value.comparable(1 'g')", 'true'],
      ["1 'mg'.comparable('1 mg')", 'error'],
      ["1 'mg'.comparable({})", 'empty'],
    ], obs, 'Observation');
  });
});
