/**
 * FHIRPath 2.0's sort() (STU) beyond HL7's R4 suite's cases (test/unit/validation/fhirpath-r4-suite.test.ts): keys in
 * turn, a minus for descending on any type, empty keys first, a stable order where keys do not order, the items'
 * types kept; many values for a key, or keys that do not compare, an error.
 */
import { describe, test } from 'bun:test';
import { checkFhirPath } from '../../helpers/fhirpath-cases.ts';

const check = checkFhirPath;

const patient = {
  resourceType: 'Patient',
  name: [
    { use: 'official', family: 'Chalmers', given: ['Peter', 'James'] },
    { use: 'usual', given: ['Jim'] },
    { use: 'maiden', family: 'Windsor', given: ['Peter', 'James'] },
    { use: 'nickname', family: 'Chalmers', given: ['Pete'] },
  ],
};

describe('sort()', () => {
  test('values of each type by their order: numbers, strings, dates, quantities in their units; a minus for descending', () => {
    check([
      ['(2 | 1.5 | 1).sort()', '1, 1.5, 2'],
      ['(2 | 1.5 | 1).sort(-$this)', '2, 1.5, 1'],
      ["('b' | 'a' | 'C').sort()", 'C, a, b'],
      ["('b' | 'a' | 'c').sort(-$this)", 'c, b, a'],
      ['(@2014-01-02 | @2013 | @2014-01-01).sort()', '2013, 2014-01-01, 2014-01-02'],
      ["(1 'm' | 50 'cm' | 2 'mm').sort()", "2 'mm', 50 'cm', 1 'm'"],
      ["('abc' | 'a' | 'ab').sort(length())", 'a, ab, abc'],
      ["('abc' | 'a' | 'ab').sort(-length())", 'abc, ab, a'],
      ['{}.sort()', 'empty'],
      ['5.sort()', '5'],
    ]);
  });

  test('keys in turn, an empty key first (descending too), the order kept where the keys are equal or do not order', () => {
    check([
      ['Patient.name.sort(family).use', 'usual, official, nickname, maiden'],
      ['Patient.name.sort(family, given.first()).use', 'usual, nickname, official, maiden'],
      ['Patient.name.sort(-family, -given.first()).use', 'usual, maiden, official, nickname'],
      ['Patient.name.sort(-family).use', 'usual, maiden, official, nickname'],
      ['(@2014 | @2014-01 | @2013).sort()', '2013, 2014, 2014-01'],
      ['(@2014-01 | @2014 | @2013).sort()', '2013, 2014-01, 2014'],
    ], patient, 'Patient');
  });

  test("the items keep their FHIR types: a sorted name's members, a sorted string's functions", () => {
    check([
      ['Patient.name.sort(family).first().given.first()', 'Jim'],
      ['Patient.name.given.sort().first()', 'James'],
      ['Patient.name.given.sort().last().length()', '5'],
      ['Patient.name.given.sort().distinct().count()', '4'],
    ], patient, 'Patient');
  });

  test('errors: many values for a key, keys that do not compare (a number and a string)', () => {
    check([
      ['Patient.name.sort(given).use', 'error'],
      ["(1 | 'a').sort()", 'error'],
      ["(1 | 2).sort(iif($this = 1, 'a', 2))", 'error'],
    ], patient, 'Patient');
  });
});
