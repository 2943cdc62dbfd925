/**
 * FHIRPath N1's conversion functions (§ 5.5: to<Type>() and convertsTo<Type>() against its conversion table),
 * aggregate() with `$total` (§ 5.11), literals past the 32-bit Integer, and the STU string functions trim(),
 * split() and join() (FHIRPath 2.0 § 5.6): the specifications' examples and HL7's N1 test suite's cases on them
 * (test/fixtures/fhirpath/n1-conversion-cases.json).
 */
import { describe, expect, test } from 'bun:test';
import { parseExact } from '../../../src/fhir/exact-json.ts';
import { compileValues } from '../../../src/fhir/validation/fhirpath-engine.ts';
import { elementType, FHIRPATH_TYPES } from '../../../src/fhir/validation/model.ts';
import suite from '../../fixtures/fhirpath/n1-conversion-cases.json' with { type: 'json' };

type Json = Record<string, unknown>;
const types = { elementType };

/** `expression` on `focus`: 'error', 'empty', or its items joined by ', ' (strings quoted). */
function run(expression: string, focus: Json = {}, type?: string): string {
  let out: unknown[];
  try {
    out = compileValues(expression, types)(focus, type, { resource: focus, rootResource: focus });
  } catch {
    return 'error';
  }
  if (out.length === 0) return 'empty';
  return out.map((x) => (typeof x === 'string' ? `'${x}'` : String(x))).join(', ');
}

const check = (cases: [string, string][], focus?: Json, type?: string) => {
  for (const [expression, expected] of cases) expect(`${expression} -> ${run(expression, focus, type)}`).toBe(`${expression} -> ${expected}`);
};

describe("HL7's N1 test suite: its cases on the conversion functions and aggregate()", () => {
  /** None: a Decimal keeps its written precision (`1.0.toString()` is '1.0'; it was '1' until the fifty-fifth session). */
  const DIVERGENT = new Set<string>();
  const outcome = (expression: string): string[] => {
    const r = run(expression);
    if (r === 'empty') return [];
    if (r === 'error') return ['error'];
    return r.split(', ').map((x) => x.replace(/^'|'$/g, ''));
  };

  test(`${suite.cases.length} cases: all of them`, () => {
    const failed: string[] = [];
    for (const c of suite.cases as { name: string; expression: string; invalid?: string; outputs: string[] }[]) {
      const expected = c.invalid !== undefined ? ['error'] : c.outputs.map((o) => o.slice(o.indexOf(':') + 1));
      if (JSON.stringify(outcome(c.expression)) !== JSON.stringify(expected)) failed.push(c.name);
    }
    expect(failed.sort()).toEqual([...DIVERGENT].sort());
  });
});

describe("conversions against N1's table (§ 5.5)", () => {
  test('toInteger(): an Integer, a Boolean, a String of an integer in 32 bits; a Decimal, whole or not, converts to nothing', () => {
    check([
      ['12.toInteger()', '12'], ['12.0.toInteger()', 'empty'], ['1.5.toInteger()', 'empty'], ['true.toInteger()', '1'], ['false.toInteger()', '0'],
      ["'+12'.toInteger()", '12'], ["'-0'.toInteger()", '0'], ["'1.0'.toInteger()", 'empty'], ["' 1'.toInteger()", 'empty'], ['@2014.toInteger()', 'empty'],
      ['12.convertsToInteger()', 'true'], ['12.0.convertsToInteger()', 'false'], ["'2147483648'.convertsToInteger()", 'false'], ['{}.convertsToInteger()', 'empty'],
      ['(1 | 2).toInteger()', 'error'], ['(1 | 2).convertsToInteger()', 'error'],
    ]);
    // A FHIR decimal is a Decimal whatever its JSON; an integer or positiveInt an Integer.
    const obs = { resourceType: 'Observation', valueQuantity: { value: 12 }, valueInteger: 3 };
    check([['Observation.value.ofType(Quantity).value.toInteger()', 'empty'], ['Observation.value.ofType(Quantity).value.convertsToInteger()', 'false']], obs, 'Observation');
    check([['Questionnaire.item.maxLength.toInteger()', '4']], { resourceType: 'Questionnaire', item: [{ linkId: 'a', type: 'string', maxLength: 4 }] }, 'Questionnaire');
  });

  test('toDecimal(), toBoolean() and their convertsTo: the values of the table, a string case-insensitively', () => {
    check([
      ['1.toDecimal() is Decimal', 'true'], ['true.toDecimal()', '1'], ["'-1.5'.toDecimal()", '-1.5'], ["'1.'.toDecimal()", 'empty'], ["'1e3'.convertsToDecimal()", 'false'],
      ['@2014.convertsToDecimal()', 'false'], [`'${'1'.repeat(400)}'.toDecimal()`, 'empty'], [`'${'1'.repeat(400)}'.convertsToDecimal()`, 'false'],
      ["'T'.toBoolean()", 'true'], ["'No'.toBoolean()", 'false'], ["'0.0'.toBoolean()", 'false'], ["'1.0'.toBoolean()", 'true'], ["'2'.toBoolean()", 'empty'],
      ["'yes please'.convertsToBoolean()", 'false'], ['0.0.toBoolean()', 'false'], ['0.5.toBoolean()', 'empty'], ['1.toBoolean() is Boolean', 'true'],
      ['@2014.convertsToBoolean()', 'false'], ['{}.toBoolean()', 'empty'],
    ]);
  });

  test('toDate(), toDateTime(), toTime(): the type itself, a DateTime to its date, a Date to a DateTime, a String in the format', () => {
    check([
      ["'2015-02-04'.toDate() = @2015-02-04", 'true'], ["'2015-02'.toDate() is Date", 'true'], ["'2015-02-04T10:00'.toDate()", 'empty'],
      ["'2015-02-30x'.convertsToDate()", 'false'], ["'2015-13'.convertsToDate()", 'false'], ['@2015-02-04T10:00:00Z.toDate() = @2015-02-04', 'true'],
      ['@2015-02-04.toDateTime() is DateTime', 'true'], ['@2015-02-04.toDateTime() = @2015-02-04T', 'true'], ["'2015-02-04T10:00:00.5+02:00'.toDateTime() is DateTime", 'true'],
      ["'2015-02-04 10:00'.convertsToDateTime()", 'false'], ['@T10:00.toDateTime()', 'empty'], ['@T10:00.toDate()', 'empty'],
      ["'10:00:00.250'.toTime() = @T10:00:00.250", 'true'], ["'24:00'.convertsToTime()", 'false'], ['@2015-02-04T10:00.toTime()', 'empty'], ['@T10.convertsToTime()', 'true'],
      ['1.convertsToDate()', 'false'], ['true.convertsToTime()', 'false'],
    ]);
    check([['Patient.birthDate.toDateTime() is DateTime', 'true'], ['Patient.birthDate.toDate() is Date', 'true']], { resourceType: 'Patient', birthDate: '1974-12-25' }, 'Patient');
  });

  test('toString() writes a number without exponent; convertsToString(): every primitive and a Quantity, an element that is neither not', () => {
    check([
      ['0.0000001.toString()', "'0.0000001'"], ['(-0.00000012).toString()', "'-0.00000012'"], ['1000000000000000000000.0.toString()', "'1000000000000000000000.0'"],
      ["(0.0000001 'mg').toString()", "'0.0000001 'mg''"], ['(0.1 + 0.2).toString()', "'0.3'"],
    ]);
    check([['@2014.convertsToString()', 'true'], ['@T10:00.convertsToString()', 'true'], ["(1 'mg').convertsToString()", 'true'], ['{}.convertsToString()', 'empty']]);
    check([['Patient.name.convertsToString()', 'false'], ['Patient.name.toString()', 'empty']], { resourceType: 'Patient', name: [{ family: 'a' }] }, 'Patient');
  });

  test("toString() keeps a Decimal's written precision (N1: '1.0', not '1'): a literal, a string converted, a FHIR decimal as its JSON wrote it", () => {
    check([
      ['1.0.toString()', "'1.0'"], ['(-1.50).toString()', "'-1.50'"], ['1.5.toString()', "'1.5'"], ['1.toString()', "'1'"], ["(1.0 'mg').toString()", "'1.0 'mg''"],
      ["'1.10'.toDecimal().toString()", "'1.10'"], ["'+2.0'.toDecimal().toString()", "'2.0'"], ['(1.0 + 1).toString()', "'2'"],
      // The value is unchanged: equal to its shorter forms, a Decimal still.
      ['1.0 = 1', 'true'], ['1.50 = 1.5', 'true'], ['1.0 is Decimal', 'true'], ['1.0.toInteger()', 'empty'], ['(1.0 | 1).count()', '1'],
    ]);
    const obs = parseExact('{"resourceType":"Observation","status":"final","code":{"text":"x"},"valueQuantity":{"value":1.50,"unit":"mg"},'
      + '"component":[{"code":{"text":"a"},"valueQuantity":{"value":2.0}},{"code":{"text":"b"},"valueQuantity":{"value":1E-7}}]}') as Json;
    check([
      ['Observation.value.value.toString()', "'1.50'"], ['Observation.value.toString()', "'1.50 'mg''"], ['Observation.component.value.value.first().toString()', "'2.0'"],
      // An exponent is no text N1's toString() writes.
      ['Observation.component.value.value.last().toString()', "'0.0000001'"], ['Observation.value.value = 1.5', 'true'], ['(Observation.value.value * 2).toString()', "'3'"],
    ], obs, 'Observation');
  });
});

describe('toChars() and type() (N1 § 5.6, § 10 Reflection)', () => {
  test("toChars(): the string's characters (a surrogate pair is one), nothing for nothing, an error for many", () => {
    check([["'t2'.toChars()", "'t', '2'"], ["''.toChars()", 'empty'], ['{}.toChars()', 'empty'], ["'a😀b'.toChars().count()", '3'], ["('a' | 'b').toChars()", 'error'], ['1.toChars()', 'error']]);
  });

  test('type(): a SimpleTypeInfo of each System primitive (base System.Any), HL7\'s testType cases', () => {
    check([
      ["1.type().namespace = 'System'", 'true'], ["1.type().name = 'Integer'", 'true'], ["'1'.type().namespace = 'System'", 'true'], ["'1'.type().name = 'String'", 'true'],
      ["true.type().namespace = 'System'", 'true'], ["true.type().name = 'Boolean'", 'true'], ['1.5.type().name', "'Decimal'"], ['@2020-01.type().name', "'Date'"],
      ["(1 'mg').type().name", "'Quantity'"], ["('John' | 'Mary').type().name", "'String', 'String'"], ["'x'.type().baseType", "'System.Any'"],
      ["'x'.type() is System.SimpleTypeInfo", 'true'], ['{}.type()', 'empty'],
    ]);
  });

  test('type() of FHIR values: a FHIR primitive a SimpleTypeInfo, a data type or resource a ClassInfo, with namespace FHIR and its base', () => {
    const patient = { resourceType: 'Patient', active: true, gender: 'male', maritalStatus: { text: 'Married' }, contact: [{ gender: 'female' }] };
    check([
      ["Patient.active.type().namespace = 'FHIR'", 'true'], ["Patient.active.type().name = 'boolean'", 'true'], ["Patient.type().namespace = 'FHIR'", 'true'],
      ["Patient.type().name = 'Patient'", 'true'], ['Patient.type().baseType', "'FHIR.DomainResource'"], ['Patient.active.type().baseType', "'FHIR.Element'"],
      ['Patient.gender.type().name', "'code'"], ['Patient.gender.type().baseType', "'FHIR.string'"], ['Patient.maritalStatus.type().name', "'CodeableConcept'"],
      ['Patient.maritalStatus.type() is System.ClassInfo', 'true'], ['Patient.active.type() is System.SimpleTypeInfo', 'true'],
      ['Patient.contact.type().name', "'BackboneElement'"], ["Patient.children().where(type().name = 'code').count()", '1'],
    ], patient, 'Patient');
  });
});

describe("type()'s ClassInfo lists the type's own elements (N1 § 10 Reflection: ClassInfoElement name, type, isOneBased)", () => {
  /** `expression` on `focus` with the production model (its types' elements), as run() gives it. */
  const reflect = (expression: string, focus: Json, type: string) => {
    const out = compileValues(expression, FHIRPATH_TYPES)(focus, type, { resource: focus, rootResource: focus });
    return out.length === 0 ? 'empty' : out.map((x) => (typeof x === 'string' ? `'${x}'` : String(x))).join(', ');
  };
  const patient = { resourceType: 'Patient', active: true, maritalStatus: { text: 'Married' }, contact: [{ gender: 'female' }], deceasedBoolean: false };

  test("the specification's example: CodeableConcept's coding (a List<FHIR.Coding>) and text (FHIR.string), not Element's id and extension", () => {
    for (const [expression, expected] of [
      ['Patient.maritalStatus.type().element.name', "'coding', 'text'"],
      ['Patient.maritalStatus.type().element.type', "'List<FHIR.Coding>', 'FHIR.string'"],
      ['Patient.maritalStatus.type().element.isOneBased', 'false, false'],
      ["Patient.maritalStatus.type().element.where(name = 'coding').type", "'List<FHIR.Coding>'"],
      // A resource: its own elements after DomainResource's; a choice element once, with its types.
      ['Patient.type().element.first().name', "'identifier'"],
      ["Patient.type().element.where(name = 'deceased').type", "'Choice<FHIR.boolean, FHIR.dateTime>'"],
      ["Patient.type().element.where(name = 'contact').type", "'List<FHIR.BackboneElement>'"],
      ["Patient.type().element.where(name = 'text').exists()", 'false'],
      // A backbone element: the elements its definition adds to BackboneElement's.
      ['Patient.contact.type().element.name.first()', "'relationship'"],
      ["Patient.contact.type().element.where(name = 'modifierExtension').exists()", 'false'],
      // A primitive is a SimpleTypeInfo, which has no elements.
      ['Patient.active.type().element', 'empty'],
      ["Patient.children().type().where(name = 'CodeableConcept').element.count()", '2'],
    ] as [string, string][]) {
      expect(`${expression} -> ${reflect(expression, patient, 'Patient')}`).toBe(`${expression} -> ${expected}`);
    }
  });

  test("a data type lists its own elements (Quantity's five); a resource based on Resource (Bundle) those after Resource's", () => {
    const obs = { resourceType: 'Observation', status: 'final', code: { text: 'age' }, valueQuantity: { value: 4, unit: 'a' } };
    expect(reflect('Observation.value.type().element.name', obs, 'Observation')).toBe("'value', 'comparator', 'unit', 'system', 'code'");
    const bundle = { resourceType: 'Bundle', type: 'collection' };
    expect(reflect('Bundle.type().element.first().name', bundle, 'Bundle')).toBe("'identifier'");
    expect(reflect('Bundle.type().baseType', bundle, 'Bundle')).toBe("'FHIR.Resource'");
  });
});

describe('Integer literals past 32 bits are Decimals (N1: an Integer is -2^31 to 2^31-1)', () => {
  test('their values and type, and arithmetic with them unbounded, as a Decimal is', () => {
    check([
      ['2147483648', '2147483648'], ['2147483648 is Decimal', 'true'], ['2147483648 is Integer', 'false'], ['2147483647 is Integer', 'true'],
      ['-2147483649', '-2147483649'], ['-2147483648 is Integer', 'true'], ['2147483648 + 1', '2147483649'], ['2147483648 * 2', '4294967296'],
      ['2147483648.toInteger()', 'empty'], ['2147483648.floor()', 'empty'], ['2147483648.round()', '2147483648'], ['99999999999 > 2147483647', 'true'],
      ["2147483648 'mg' > 1 'mg'", 'true'],
    ]);
  });
});

describe('aggregate(aggregator [, init]) (N1 § 5.11)', () => {
  test("the specification's sum, min and average; $index; an empty input gives init", () => {
    check([
      ['(1 | 2 | 3).aggregate($this + $total, 0)', '6'], ['(1 | 2 | 3).aggregate($this + $total, 0) is Integer', 'true'],
      ['(1.5 | 2).aggregate($this + $total, 0)', '3.5'], ['(3 | 1 | 2).aggregate(iif($total.empty(), $this, iif($this < $total, $this, $total)))', '1'],
      ['(1 | 2 | 3 | 6).aggregate($total + $this, 0) / (1 | 2 | 3 | 6).count()', '3'], ['(5 | 6 | 7).aggregate($total + $index, 0)', '3'],
      ["('a' | 'b' | 'c').aggregate($total & $this, '')", "'abc'"], ['{}.aggregate($this + $total, 7)', '7'], ['{}.aggregate($this + $total)', 'empty'],
      ['(1 | 2).aggregate($total | $this)', '1, 2'], ['(1 | 2 | 3).aggregate($total.count() + 1, {})', '2'], ['(1 | 2).aggregate($total + $this, (1 | 2))', 'error'],
    ]);
  });

  test('init is evaluated on the outer $this; $total of a nested aggregate() is its own; Integer overflow gives nothing', () => {
    check([
      ['Patient.name.given.aggregate($total + $this.length(), 0)', '10'],
      ["Patient.name.aggregate($total + given.aggregate($total + 1, 0), 0)", '3'],
      ['Patient.name.family.aggregate($total + $this.length(), %resource.name.count())', '10'],
      ['(2147483647 | 1).aggregate($this + $total, 0)', 'empty'],
    ], { resourceType: 'Patient', name: [{ family: 'Chalmers', given: ['Peter', 'Jim'] }, { given: ['Al'] }] }, 'Patient');
  });

  test('$total outside aggregate() is no FHIRPath', () => {
    check([['$total', 'error'], ['(1 | 2).select($total)', 'error']]);
  });
});

describe('trim(), split(), join() (FHIRPath 2.0 § 5.6, STU)', () => {
  test("the specification's examples", () => {
    check([
      ["' 123456 '.trim()", "'123456'"], ["'  '.trim()", "''"], ["('A,B,C').split(',')", "'A', 'B', 'C'"], ["('ABC').split(',')", "'ABC'"],
      ["'A,,C'.split(',')", "'A', '', 'C'"], ["('A' | 'B' | 'C').join()", "'ABC'"], ["('A' | 'B' | 'C').join(',')", "'A,B,C'"],
    ]);
  });

  test('whitespace is FHIRPath\'s (tab, space, line feed, carriage return); empty in, empty out; a non-string is an error', () => {
    check([
      ["'\\t a \\r\\n'.trim()", "'a'"], ["'\\u00a0a\\u00a0'.trim().length()", '3'], ['{}.trim()', 'empty'], ['1.trim()', 'error'], ["('a' | 'b').trim()", 'error'],
      ["''.split(',')", "''"], ["'a1b1'.split('1')", "'a', 'b', ''"], ["'ab'.split('')", "'a', 'b'"], ["'a\\uD83D\\uDD25'.split('').count()", '2'],
      ["{}.split(',')", 'empty'], ["'aaa'.split('aa')", "'', 'a'"], ["'a'.split({})", 'empty'], ["'a'.split(1)", 'error'], ["'a,b'.split(',').join('+')", "'a+b'"],
      ['{}.join()', 'empty'], ["('a' | 'b').join({})", 'empty'], ['(1 | 2).join()', 'error'], ["('a').join(', ')", "'a'"],
    ]);
    check([["Patient.name.given.join(' ')", "'Peter Jim'"], ['Patient.gender.join()', "'male'"]], { resourceType: 'Patient', gender: 'male', name: [{ given: ['Peter', 'Jim'] }] }, 'Patient');
  });
});
