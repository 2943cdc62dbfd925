/**
 * The FHIRPath engine on large resources, where it takes its shortcuts: `descendants()` and `children()`
 * followed by a member step (which never sees the primitives the step would skip), and `distinct()`,
 * `isDistinct()` and `|` on more than eight items (keyed, strings by their text alone). Each answer is
 * compared with FHIRPath.js (HL7's engine, R4 model), and the budget of a client's expression is charged
 * for every value `descendants()` visits, primitives included.
 */
import { describe, expect, test } from 'bun:test';
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { compileInvariant, compileValues, FhirPathTooCostly } from '../../../src/fhir/validation/fhirpath-engine.ts';
import { elementType } from '../../../src/fhir/validation/model.ts';

type Json = Record<string, unknown>;
const types = { elementType };

/**
 * A CodeSystem of `size` concepts nested four to a parent, with what makes descendants() mixed: displays (some
 * with a `_display` sibling holding an id and an extension, some as an extension alone), codes with `_code`
 * ids, designations (Coding `use`), and properties of five value types. `duplicate` repeats concept 1's code
 * on the last concept.
 */
function codeSystem(size: number, duplicate = false): Json {
  const nodes: Json[] = Array.from({ length: size }, (_, i) => {
    const c: Json = { code: `C${i}` };
    if (i % 3 === 0) c.display = `Concept ${i}`;
    if (i % 7 === 0) c._display = { id: `d${i}`, extension: [{ url: 'http://example.org/note', valueString: `note ${i}` }] };
    if (i % 11 === 0) c._code = { id: `k${i}` };
    if (i % 5 === 0) c.designation = [{ language: 'de', use: { system: 'http://snomed.info/sct', code: '900000000000013009' }, value: `Begriff ${i}` }];
    const values: Json[] = [{ valueCode: `C${i % 13}` }, { valueInteger: i % 4 }, { valueBoolean: i % 2 === 0 }, { valueDecimal: (i % 3) / 2 }, { valueString: `c${i % 6}` }];
    if (i % 2 === 1) c.property = [{ code: 'p', ...values[i % values.length] }];
    return c;
  });
  if (duplicate) nodes[size - 1]!.code = 'C1';
  for (let i = 1; i < size; i++) {
    const parent = nodes[Math.floor((i - 1) / 4)]!;
    ((parent.concept ??= []) as Json[]).push(nodes[i]!);
  }
  return {
    resourceType: 'CodeSystem', url: 'http://example.org/cs', status: 'active', content: 'complete',
    property: [{ code: 'p', type: 'code' }], concept: [nodes[0]],
  };
}

/** A Questionnaire of `size` items nested three to a group, with texts, codes and answer options; `duplicate` repeats a linkId deep down. */
function questionnaire(size: number, duplicate = false): Json {
  const items: Json[] = Array.from({ length: size }, (_, i) => ({
    linkId: `q${i}`,
    text: `Question ${i}`,
    type: 'choice',
    code: [{ system: 'http://loinc.org', code: `${i}-0` }],
    answerOption: [{ valueCoding: { system: 'http://example.org/a', code: 'y' } }, { valueString: `other ${i}` }],
  }));
  if (duplicate) items[size - 1]!.linkId = 'q2';
  for (let i = 1; i < size; i++) {
    const parent = items[Math.floor((i - 1) / 3)]!;
    parent.type = 'group';
    delete parent.answerOption;
    ((parent.item ??= []) as Json[]).push(items[i]!);
  }
  return { resourceType: 'Questionnaire', status: 'active', item: [items[0]] };
}

const cinder = (expression: string, focus: Json) => compileValues(expression, types)(focus, focus.resourceType as string, { resource: focus, rootResource: focus });
const theirs = (expression: string, focus: Json) => fhirpath.evaluate(focus, expression, {}, r4 as never) as unknown[];

describe('descendants() and children() followed by member steps, against FHIRPath.js', () => {
  const cs = codeSystem(1_500);
  const q = questionnaire(600);
  const cases: [string, Json][] = [
    ['descendants().count()', cs],
    ['$this.descendants().concept.code', cs],
    ['concept.code.combine($this.descendants().concept.code)', cs],
    ['descendants().code', cs],
    ['descendants().display.where(hasValue())', cs],
    ['descendants().display.where(hasValue().not()).count()', cs],
    // Primitives with a `_name` sibling are read for their id and extensions.
    ['descendants().id', cs],
    ['descendants().extension.url', cs],
    ['descendants().extension.value', cs],
    ['descendants().designation.use.code', cs],
    ['descendants().property.code.count()', cs],
    ['children().concept.code', cs],
    ['concept.children().concept.children().code', cs],
    ['concept.concept.descendants().code.count()', cs],
    ['descendants().linkId', q],
    ['descendants().answerOption.value.code.count()', q],
    ['descendants().item.linkId', q],
    ['item.descendants().code.code.count()', q],
    ['descendants().linkId.isDistinct()', q],
  ];
  for (const [expression, focus] of cases) {
    test(`${expression} on a ${String(focus.resourceType)}`, () => {
      const ours = cinder(expression, focus);
      expect(ours.length).toBeGreaterThan(0);
      expect(ours).toEqual(theirs(expression, focus));
    });
  }

  test('csd-1 and que-2 hold on large resources with unique codes and linkIds and fail on one repeat deep down', () => {
    const csd1 = compileInvariant('concept.code.combine($this.descendants().concept.code).isDistinct()', types);
    const que2 = compileInvariant('descendants().linkId.isDistinct()', types);
    for (const [fn, make, type] of [[csd1, codeSystem, 'CodeSystem'], [que2, questionnaire, 'Questionnaire']] as const) {
      for (const duplicate of [false, true]) {
        const resource = make(2_000, duplicate);
        const expected = theirs(type === 'CodeSystem' ? 'concept.code.combine($this.descendants().concept.code).isDistinct()' : 'descendants().linkId.isDistinct()', resource);
        expect(expected).toEqual([!duplicate]);
        expect(fn(resource, type, { resource, rootResource: resource })).toBe(!duplicate);
      }
    }
  });
});

describe('distinct(), isDistinct() and union of large collections of mixed types, against FHIRPath.js', () => {
  const cs = codeSystem(1_500);
  const cases = [
    // Codes, integers, booleans, decimals and strings of properties: `C1` the code and `c1` the string differ.
    'descendants().property.value.distinct()',
    'descendants().property.value.isDistinct()',
    'descendants().property.value.where($this is code or $this is string).distinct()',
    'descendants().property.value.ofType(integer).distinct()',
    'descendants().property.value.ofType(boolean).distinct()',
    'descendants().property.value.ofType(decimal).distinct()',
    // A code and a string of the same text are equal; an integer and the string of its digits are not.
    "(descendants().property.value.ofType(code) | ('C1' | 'C2' | 'C99' | '1' | '2'))",
    "(descendants().property.value.ofType(integer) | (1 | 2 | 7 | '1' | '2' | 0.5 | 1.0))",
    'descendants().property.value.ofType(code).union(descendants().property.value.ofType(string))',
    'descendants().designation.use.distinct().count()',
    'descendants().designation.use.isDistinct()',
    '(descendants().designation.use | descendants().designation.language).count()',
    'descendants().code.isDistinct()',
    'descendants().code.combine(descendants().code).isDistinct()',
    'descendants().display.where(hasValue()).combine(descendants().display.select(lower())).distinct().count()',
    'descendants().display.where(hasValue()).combine(descendants().display.select(upper())).isDistinct()',
  ];
  for (const expression of cases) {
    test(expression, () => {
      const ours = cinder(expression, cs);
      expect(ours.length).toBeGreaterThan(0);
      expect(ours).toEqual(theirs(expression, cs));
    });
  }
});

describe('a client expression\'s budget and descendants()', () => {
  test('every value descendants() visits is charged, primitives too, whether a member step follows or not', () => {
    const cs = codeSystem(200);
    const used = (expression: string) => {
      const budget = { left: 1_000_000, limit: 1_000_000 };
      const values = compileValues(expression, types)(cs, 'CodeSystem', { resource: cs, rootResource: cs, budget });
      return { values, used: 1_000_000 - budget.left };
    };
    const all = used('descendants()');
    const codes = used('descendants().code');
    // descendants() is charged each value it visits, then its result as a function's (one more for the call).
    expect(all.used).toBe(2 * all.values.length + 1);
    // The member step is charged its own items, one more for the step.
    expect(codes.used).toBe(all.used + codes.values.length + 1);
    const tight = (expression: string, left: number) => compileValues(expression, types)(cs, 'CodeSystem', { resource: cs, rootResource: cs, budget: { left, limit: left } });
    expect(() => tight('descendants().code', all.used - 1)).toThrow(FhirPathTooCostly);
    expect(() => tight('descendants().code', all.used + codes.values.length)).toThrow(FhirPathTooCostly);
    expect(tight('descendants().code', all.used + codes.values.length + 1)).toEqual(codes.values);
  });
});
