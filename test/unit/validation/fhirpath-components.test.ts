/**
 * FHIRPath 2.0's date and time component functions (STU): yearOf() ... millisecondOf(), timezoneOffsetOf(), dateOf(),
 * timeOf(), on literals and FHIR elements (a birthDate, an effectiveDateTime, an instant); and lastIndexOf().
 * The specification's examples, a component the value lacks (nothing), and an item of another type (an error).
 */
import { describe, test } from 'bun:test';
import { checkFhirPath } from '../../helpers/fhirpath-cases.ts';

const check = checkFhirPath;

describe('date and time components', () => {
  test("the specification's examples", () => {
    check([
      ['@2014-01-05T10:30:00.000.yearOf()', '2014'],
      ['@2014-01-05T10:30:00.000.monthOf()', '1'],
      ['@2012.monthOf()', 'empty'],
      ['@2014-01-05T10:30:00.000.dayOf()', '5'],
      ['@2012-01-01T03:30:40.002-07:00.hourOf()', '3'],
      ['@2012-01-01T16:30:40.002-07:00.hourOf()', '16'],
      ['@2012-01-01T12:30:40.002-07:00.minuteOf()', '30'],
      ['@2012-01-01T12:30:40.002-07:00.secondOf()', '40'],
      ['@2012-01-01T12:30:00.002-07:00.millisecondOf()', '2'],
      ['@2012-01-01T12:30:00.000-07:00.timezoneOffsetOf().toString()', '-7.0'],
      ['@2012-01-01T12:30:00.000-07:00.dateOf() = @2012-01-01', 'true'],
      ['@2012-01-01T12:30:00.000-07:00.timeOf() = @T12:30:00.000', 'true'],
    ]);
  });

  test('components a value lacks give nothing; offsets of minutes, Z; a Time from its hour; a fraction of one digit', () => {
    check([
      ['@2014.dayOf()', 'empty'],
      ['@2014-02-03.hourOf()', 'empty'],
      ['@2014-02-03T10:30.secondOf()', 'empty'],
      ['@2014-02-03T10:30:05.millisecondOf()', 'empty'],
      ['@2014-02-03T10:30:05.5.millisecondOf()', '500'],
      ['@2014-02-03T10:30.timezoneOffsetOf()', 'empty'],
      ['@2014-02-03T10:30+05:30.timezoneOffsetOf()', '5.5'],
      ['@2014-02-03T10:30Z.timezoneOffsetOf().toString()', '0.0'],
      ['@2014-02-03T10:30-03:45.timezoneOffsetOf()', '-3.75'],
      ['@2014-02T.dateOf()', '2014-02'],
      ['@2014-02-03T10.timeOf()', '10'],
      ['@2014-02-03T.timeOf()', 'empty'],
      ['@T10:30:15.25.hourOf()', '10'],
      ['@T10:30:15.25.minuteOf()', '30'],
      ['@T10:30:15.25.millisecondOf()', '250'],
      ['@2014-02-03.dateOf() is Date', 'true'],
      ['@2014-02-03T10:00.timeOf() is Time', 'true'],
      ['@2014-02-03T10:00Z.timezoneOffsetOf() is Decimal', 'true'],
      ['@2014-02-03T10:00+05:30.timezoneOffsetOf() is Decimal', 'true'],
    ]);
  });

  test('errors: an item of another kind (a Time has no year, a Date no offset), a string, many items', () => {
    check([
      ['@T10:30.yearOf()', 'error'],
      ['@T10:30.dateOf()', 'error'],
      ['@2014-02-03.timezoneOffsetOf()', 'error'],
      ['@2014-02-03.timeOf()', 'error'],
      ["'2014-02-03'.yearOf()", 'error'],
      ['(@2014 | @2015).yearOf()', 'error'],
      ['{}.yearOf()', 'empty'],
    ]);
  });

  test('FHIR elements: a date, a dateTime, an instant', () => {
    const obs = {
      resourceType: 'Observation', status: 'final', code: { text: 'x' }, effectiveDateTime: '2023-06-21T06:20:00+02:00',
      issued: '2023-06-21T08:00:00.125Z', subject: { reference: 'Patient/p' },
    };
    check([
      ['Observation.effective.hourOf()', '6'],
      ['Observation.effective.timezoneOffsetOf()', '2'],
      ['Observation.issued.millisecondOf()', '125'],
      ['Observation.issued.dateOf() = @2023-06-21', 'true'],
    ], obs, 'Observation');
    const patient = { resourceType: 'Patient', birthDate: '1974-12-25' };
    check([
      ['Patient.birthDate.yearOf()', '1974'],
      ['Patient.birthDate.monthOf() = 12', 'true'],
      ['Patient.birthDate.hourOf()', 'empty'],
    ], patient, 'Patient');
  });
});

describe('lastIndexOf()', () => {
  test('the last position of a substring, -1 without one, the end for an empty one; empty in, empty out', () => {
    check([
      ["'abcabc'.lastIndexOf('bc')", '4'],
      ["'abcabc'.lastIndexOf('x')", '-1'],
      ["'abc'.lastIndexOf('')", '3'],
      ["'abcabc'.indexOf('bc')", '1'],
      ["{}.lastIndexOf('a')", 'empty'],
      ["'abc'.lastIndexOf({})", 'empty'],
      ["('a' | 'b').lastIndexOf('a')", 'error'],
    ]);
  });
});
