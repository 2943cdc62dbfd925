/**
 * FHIRPath 2.0's defineVariable() (STU): `%name` set for the rest of its invocation chain (the arguments and indexes
 * of the functions after it), to its expression on each input item or to the input itself; a name the environment or
 * the chain defines already, one that is no string literal, or a variable read outside its chain, a compile-time error.
 */
import { describe, expect, test } from 'bun:test';
import { compileInvariant, compileValues, FhirPathSyntaxError, UnsupportedFhirPath } from '../../../src/fhir/validation/fhirpath-engine.ts';
import { FHIRPATH_TYPES } from '../../../src/fhir/validation/model.ts';

type Json = Record<string, unknown>;

const patient = {
  resourceType: 'Patient', id: 'p1', active: true,
  name: [{ use: 'official', family: 'Chalmers', given: ['Peter', 'James'] }, { use: 'usual', given: ['Jim'] }],
};

/** `expression` on the Patient: its items as JSON, or the error's class. */
function run(expression: string, focus: Json = patient): string {
  try {
    return JSON.stringify(compileValues(expression, FHIRPATH_TYPES)(focus, 'Patient', { resource: focus, rootResource: focus }));
  } catch (err) {
    return err instanceof FhirPathSyntaxError ? 'syntax error' : err instanceof UnsupportedFhirPath ? 'unsupported' : 'error';
  }
}

const check = (cases: [string, string][]) => {
  for (const [expression, expected] of cases) expect(`${expression} -> ${run(expression)}`).toBe(`${expression} -> ${expected}`);
};

describe('defineVariable()', () => {
  test('a value, an expression on the input, the input itself; read by the functions after it, nested chains too', () => {
    check([
      ["defineVariable('v1', 'value1').select(%v1)", '["value1"]'],
      ["defineVariable('n1', name.first()).select(id & '-' & %n1.given.join('|'))", '["p1-Peter|James"]'],
      ["name.defineVariable('all').select(%all.count())", '[2,2]'],
      ["defineVariable('g', name.given).select(%g.count())", '[3]'],
      ["name.select(defineVariable('n').given.select(%n.use & ':' & $this))", '["official:Peter","official:James","usual:Jim"]'],
      ["name.given.defineVariable('g').where($this = %g.last())", '["Jim"]'],
      ["defineVariable('v1', 'a').select(%v1).defineVariable('v2', 'b').select($this & %v1 & %v2) | defineVariable('v3', 'c').select(%v3)", '["aab","c"]'],
      ["defineVariable('i', 1).name[%i].use", '["usual"]'],
      ["defineVariable('x', {}).select(%x.exists())", '[false]'],
      ["defineVariable('v', 'x').active", '[true]'],
    ]);
  });

  test("compile-time errors: a name the environment or the chain defines, a name that is no literal, a variable outside its chain", () => {
    check([
      ["defineVariable('v1', 'a').defineVariable('v1', 'b').select(%v1)", 'syntax error'],
      ["defineVariable('resource', 'x')", 'syntax error'],
      ["defineVariable('vs-foo', 'x')", 'syntax error'],
      ["defineVariable('ucum')", 'syntax error'],
      ["defineVariable('a' + 'b', 1)", 'syntax error'],
      ["defineVariable()", 'syntax error'],
      ["defineVariable('n1', name.first()).active | %n1", 'unsupported'],
      ["defineVariable('n1', 1).exists() and %n1 = 1", 'unsupported'],
    ]);
  });

  test("a tenant's invariant: each name's given names against the family held in a variable", () => {
    const invariant = compileInvariant("name.all(defineVariable('fam', family).given.all(%fam.empty() or $this != %fam))", FHIRPATH_TYPES, true);
    const ctx = (r: Json) => ({ resource: r, rootResource: r });
    const same = { resourceType: 'Patient', name: [{ family: 'Jones', given: ['Jones'] }] };
    expect(invariant(patient, 'Patient', ctx(patient))).toBe(true);
    expect(invariant(same, 'Patient', ctx(same))).toBe(false);
  });
});
