import { describe, expect, test } from 'bun:test';
import { FhirError } from '../../../src/errors.ts';
import { valueSetValidateCodeParams } from '../../../src/terminology/input/operations.ts';
import { validateValueSetCode, valueSetValidateCodeInput } from '../../../src/terminology/ops/validate-value-set-code.ts';
import type { ValidationResult } from '../../../src/terminology/ops/validation-result.ts';
import { TerminologyService } from '../../../src/terminology/service.ts';
import { MemoryTerminologySource } from '../../helpers/memory-terminology.ts';
import { fixtureService, rejected } from '../../helpers/terminology-service.ts';

const ANIMALS = 'http://cinder.test/CodeSystem/animals';
const VS = 'http://cinder.test/ValueSet/';
const { context, source } = await fixtureService();
const EMPTY = new MemoryTerminologySource();

/** The fixtures' terminology with empty caches: the first answer must load all it needs. */
const cold = () => new TerminologyService({ core: EMPTY, sourceFor: () => source }).context('t');

/** How often validate() saw the warm path answer at once (see below). */
let answeredAtOnce = 0;

/**
 * Validates twice with the one function: first with empty caches (the cold path, which loads what it
 * needs), then again with everything loaded (the warm path). Both must give the same answer, and for a
 * code or coding checked against a ValueSet named by URL the warm answer must be a plain value, not a
 * promise: the steady state awaits nothing. Every test below checks both paths.
 */
async function validate(parameter: Record<string, unknown>[], id?: string): Promise<ValidationResult> {
  const raw = valueSetValidateCodeParams.fromBody({ resourceType: 'Parameters', parameter });
  const input = valueSetValidateCodeInput(raw, id);
  const terminology = await cold();
  const result = await validateValueSetCode(input, { terminology });
  const warm = validateValueSetCode(input, { terminology });
  if (input.target.kind === 'url' && input.subject.kind !== 'codeableConcept') {
    expect(warm).not.toBeInstanceOf(Promise);
    answeredAtOnce++;
  }
  expect(await warm).toEqual(result);
  return result;
}

const code = (vs: string, c: string, system = ANIMALS, extra: Record<string, unknown>[] = []) =>
  validate([{ name: 'url', valueUri: VS + vs }, { name: 'code', valueCode: c }, { name: 'system', valueUri: system }, ...extra]);


describe('ValueSet $validate-code: compose semantics', () => {
  test('whole-system include, with the CodeSystem display', async () => {
    // The coding is echoed with the version of the code system it was found in.
    expect(await code('all-animals', 'dog')).toEqual({ result: true, display: 'Dog', coding: { code: 'dog', system: ANIMALS, version: '2.0.0' }, issues: [] });
    const unknown = await code('all-animals', 'unicorn');
    expect(unknown.result).toBe(false);
    expect(unknown.issues.map((i) => i.text).join()).toContain("Unknown code 'unicorn' in the CodeSystem 'http://cinder.test/CodeSystem/animals' version '2.0.0'");
  });

  test('is-a, descendent-of, is-not-a, generalizes', async () => {
    expect((await code('mammals', 'mammal')).result).toBe(true);
    expect((await code('mammals', 'platypus')).result).toBe(true); // parent property
    expect((await code('mammals-strict', 'mammal')).result).toBe(false);
    expect((await code('mammals-strict', 'whale')).result).toBe(true);
    expect((await code('not-mammals', 'dog')).result).toBe(false);
    expect((await code('not-mammals', 'octopus')).result).toBe(true);
    expect((await code('dog-ancestors', 'vertebrate')).result).toBe(true);
    expect((await code('dog-ancestors', 'cat')).result).toBe(false);
  });

  test('in, not-in, regex, =, exists and intersecting criteria', async () => {
    expect((await code('pets', 'eagle')).result).toBe(true);
    expect((await code('pets', 'whale')).result).toBe(false);
    expect((await code('not-pets', 'dog')).result).toBe(false);
    expect((await code('not-pets', 'whale')).result).toBe(true);
    expect((await code('regex-a-to-d', 'cat')).result).toBe(true);
    expect((await code('regex-a-to-d', 'whale')).result).toBe(false);
    expect((await code('sea-animals', 'octopus')).result).toBe(true);
    expect((await code('legless', 'mammal')).result).toBe(true);
    expect((await code('legless', 'dog')).result).toBe(false);
    expect((await code('sea-mammals', 'whale')).result).toBe(true);
    expect((await code('sea-mammals', 'penguin')).result).toBe(false);
    expect((await code('sea-mammals', 'dog')).result).toBe(false);
    expect((await code('children-of-insect', 'ant')).result).toBe(true);
  });

  test('concept lists accept ValueSet displays as well', async () => {
    expect(await code('listed', 'dog')).toEqual({ result: true, display: 'Dog', coding: { code: 'dog', system: ANIMALS, version: '2.0.0' }, issues: [] });
    expect((await code('listed', 'cat', ANIMALS, [{ name: 'display', valueString: 'Doggy' }])).result).toBe(false);
    expect((await code('listed', 'dog', ANIMALS, [{ name: 'display', valueString: 'Doggy' }])).result).toBe(true);
    expect((await code('listed', 'whale')).result).toBe(false);
  });

  test('exclude removes codes, also by excluded ValueSet', async () => {
    expect((await code('mammals-but-whale', 'dog')).result).toBe(true);
    const whale = await code('mammals-but-whale', 'whale');
    expect(whale.result).toBe(false);
    // Not in the value set, as of any code outside it (no note of the exclude, as the reference servers answer).
    expect(whale.issues.map((i) => i.type)).toEqual(['not-in-vs']);
    expect((await code('animals-but-land', 'dog')).result).toBe(false);
    expect((await code('animals-but-land', 'whale')).result).toBe(true);
  });

  test('include.valueSet intersects the imports, and the system selection', async () => {
    expect((await code('land-mammals', 'dog')).result).toBe(true);
    expect((await code('land-mammals', 'whale')).result).toBe(false); // mammal, not land
    expect((await code('land-mammals', 'spider')).result).toBe(false); // land, not mammal
    expect((await code('four-legged-land-mammals', 'cat')).result).toBe(true);
    expect((await code('four-legged-land-mammals', 'spider')).result).toBe(false);
  });

  test('a missing import gives false with a message; a circular import is a 400', async () => {
    const missing = await code('missing-import', 'dog');
    expect(missing.result).toBe(false);
    expect(missing.issues.map((i) => i.text).join()).toContain("A definition for the value Set 'http://cinder.test/ValueSet/does-not-exist' could not be found");
    const cycle = await rejected(code('circular-a', 'dog'));
    expect(cycle.category).toBe('invalid');
    expect(cycle.message).toContain('circular ValueSet import');
    expect((await rejected(code('self-import', 'dog'))).message).toContain('circular');
  });

  test('an unknown filter operator, a missing value or an unknown property is a 400', async () => {
    for (const vs of ['bad-operator', 'no-filter-value', 'bad-property']) {
      const error = await rejected(code(vs, 'dog'));
      expect(error.category).toBe('invalid');
    }
    expect((await rejected(code('bad-operator', 'dog'))).message).toContain("unknown filter operator 'sounds-like'");
    expect((await rejected(code('no-filter-value', 'dog'))).message).toContain('has no value');
  });

  test('expansion-only value sets use the expansion (nested contains too)', async () => {
    expect(await code('expansion-only', 'cat')).toEqual({ result: true, display: 'Cat', coding: { code: 'cat', system: ANIMALS, version: '2.0.0' }, issues: [] });
    expect((await code('expansion-only', 'whale')).result).toBe(false);
    const elsewhere = await code('expansion-only', 'x1', 'http://cinder.test/CodeSystem/elsewhere');
    // A code system the server does not have: no version to echo.
    const other = 'http://cinder.test/CodeSystem/elsewhere';
    expect(elsewhere).toEqual({ result: true, display: 'Elsewhere X1', coding: { code: 'x1', system: other, version: undefined }, issues: [] });
  });
});

describe('ValueSet $validate-code: concept status, display, case, versions, content', () => {
  test('inactive codes are valid with a warning unless compose.inactive is false', async () => {
    const dodo = await code('all-animals', 'dodo');
    expect(dodo.result).toBe(true);
    expect(dodo.issues.map((i) => i.text).join()).toContain("The concept 'dodo' has a status of retired and inactive and its use should be reviewed");
    expect((await code('all-animals', 'mammoth')).issues.map((i) => i.text).join()).toContain('inactive');
    const excluded = await code('active-only', 'mammoth');
    expect(excluded.result).toBe(false);
    expect(excluded.issues.map((i) => i.text).join()).toContain("The concept 'mammoth' is valid but is not active");
    expect((await code('active-only', 'dog')).result).toBe(true);
  });

  test('abstract (notSelectable) codes are invalid only when abstract=false', async () => {
    expect((await code('all-animals', 'animal')).result).toBe(true);
    expect((await code('all-animals', 'animal', ANIMALS, [{ name: 'abstract', valueBoolean: true }])).result).toBe(true);
    const no = await code('all-animals', 'animal', ANIMALS, [{ name: 'abstract', valueBoolean: false }]);
    expect(no.result).toBe(false);
    expect(no.issues.map((i) => i.text).join()).toContain('abstract');
    expect((await code('all-animals', 'dog', ANIMALS, [{ name: 'abstract', valueBoolean: false }])).result).toBe(true);
  });

  test('display must equal the display or a designation exactly', async () => {
    const d = (text: string) => code('all-animals', 'dog', ANIMALS, [{ name: 'display', valueString: text }]);
    expect((await d('Dog')).result).toBe(true);
    expect((await d('Domestic dog')).result).toBe(true);
    expect((await d('Hund')).result).toBe(true);
    const wrong = await d('Dog ');
    expect(wrong).toMatchObject({ result: false, display: 'Dog' });
    expect(wrong.issues.map((i) => i.text).join()).toContain("Wrong Display Name 'Dog ' for http://cinder.test/CodeSystem/animals#dog");
    expect((await d('dog')).result).toBe(false);
  });

  test('case-insensitive code systems accept other cases; case-sensitive ones do not', async () => {
    const twin = await code('twin', 'dog', 'http://cinder.test/CodeSystem/animals-ci');
    expect(twin.result).toBe(true);
    expect(twin.display).toBe('Dog');
    expect(twin.issues.map((i) => i.text).join()).toContain("The code 'dog' differs from the correct code 'Dog' by case");
    expect((await code('all-animals', 'DOG')).result).toBe(false);
  });

  test('versions: latest by default, systemVersion / coding.version / pinned include versions', async () => {
    expect((await code('all-animals', 'platypus')).result).toBe(true); // only in 2.0.0
    expect((await code('all-animals', 'wolf')).result).toBe(false); // only in 1.0.0
    const v1 = [{ name: 'systemVersion', valueString: '1.0.0' }];
    expect((await code('all-animals', 'wolf', ANIMALS, v1)).result).toBe(true);
    expect((await code('all-animals', 'platypus', ANIMALS, v1)).result).toBe(false);
    expect((await code('animals-v1', 'wolf')).result).toBe(true);
    expect(await code('animals-v1', 'eagle')).toMatchObject({ result: true, display: 'Eagle (old name)' });
    const clash = await code('animals-v2', 'dog', ANIMALS, v1);
    expect(clash.result).toBe(false);
    expect(clash.issues.map((i) => i.text).join()).toContain("version '2.0.0' in the ValueSet include is different to the one in the value ('1.0.0')");
    const coding = await validate([
      { name: 'url', valueUri: `${VS}all-animals` },
      { name: 'coding', valueCoding: { system: ANIMALS, version: '1.0.0', code: 'wolf' } },
    ]);
    expect(coding.result).toBe(true);
    const unknownVersion = await code('all-animals', 'dog', ANIMALS, [{ name: 'systemVersion', valueString: '9' }]);
    expect(unknownVersion.result).toBe(false);
    expect(unknownVersion.issues.map((i) => i.text).join()).toContain("version '9' could not be found");
  });

  test('valueSetVersion and url|version pick the ValueSet version; latest otherwise', async () => {
    const v = (url: string, c: string, extra: Record<string, unknown>[] = []) =>
      validate([{ name: 'url', valueUri: url }, { name: 'code', valueCode: c }, { name: 'system', valueUri: ANIMALS }, ...extra]);
    expect((await v(`${VS}versioned`, 'cat')).result).toBe(true);
    expect((await v(`${VS}versioned`, 'dog')).result).toBe(false);
    expect((await v(`${VS}versioned|1`, 'dog')).result).toBe(true);
    expect((await v(`${VS}versioned`, 'dog', [{ name: 'valueSetVersion', valueString: '1' }])).result).toBe(true);
    const missing = await rejected(v(`${VS}versioned|7`, 'dog'));
    expect(missing.message).toBe(`A definition for the value Set '${VS}versioned|7' could not be found`);
  });

  test('fragment and example code systems: unknown codes are true with a warning', async () => {
    expect((await code('colors', 'red', 'http://cinder.test/CodeSystem/colors')).result).toBe(true);
    const blue = await code('colors', 'blue', 'http://cinder.test/CodeSystem/colors');
    expect(blue.result).toBe(true);
    expect(blue.issues.map((i) => i.text).join()).toContain('labeled as a fragment');
    expect((await code('colors-listed', 'blue', 'http://cinder.test/CodeSystem/colors')).result).toBe(true);
    expect((await code('colors-listed', 'green', 'http://cinder.test/CodeSystem/colors')).result).toBe(false);
    expect((await code('fruit', 'pear', 'http://cinder.test/CodeSystem/fruit')).result).toBe(true);
  });

  test('not-present and unknown code systems', async () => {
    const listed = await code('external-listed', 'e1', 'http://cinder.test/CodeSystem/external');
    expect(listed).toMatchObject({ result: true, display: 'External one' });
    expect(listed.issues.map((i) => i.text).join()).toContain("content 'not-present'");
    const all = await code('external-all', 'e1', 'http://cinder.test/CodeSystem/external');
    expect(all.result).toBe(false);
    expect(all.issues.map((i) => i.text).join()).toContain('cannot be validated');
    const nowhere = await code('unknown-system', 'x', 'http://cinder.test/CodeSystem/nowhere');
    expect(nowhere.result).toBe(false);
    expect(nowhere.issues.map((i) => i.text).join()).toContain("A definition for CodeSystem 'http://cinder.test/CodeSystem/nowhere' could not be found, so the code cannot be validated");
  });
});

describe('ValueSet $validate-code: inputs', () => {
  test('codeableConcept: false when a coding is an unknown code of a complete CodeSystem, even if another is valid (as the reference servers answer)', async () => {
    const r = await validate([
      { name: 'url', valueUri: `${VS}mammals` },
      {
        name: 'codeableConcept',
        valueCodeableConcept: { coding: [{ system: ANIMALS, code: 'unicorn' }, { system: ANIMALS, code: 'octopus' }, { system: ANIMALS, code: 'cat' }] },
      },
    ]);
    expect(r.result).toBe(false);
    expect(r.display).toBe('Cat');
    const kinds = r.issues.map((i) => `${i.severity} ${i.type} ${i.expression}`);
    expect(kinds).toContain('error invalid-code CodeableConcept.coding[0].code');
    expect(kinds).toContain('information this-code-not-in-vs CodeableConcept.coding[1].code');
    expect(r.issues.map((i) => i.text)).toContain("Unknown code 'unicorn' in the CodeSystem 'http://cinder.test/CodeSystem/animals' version '2.0.0'");
    const valid = await validate([
      { name: 'url', valueUri: `${VS}mammals` },
      { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: ANIMALS, code: 'octopus' }, { system: ANIMALS, code: 'cat' }] } },
    ]);
    expect(valid).toMatchObject({ result: true, display: 'Cat' });
    expect(valid.issues.map((i) => `${i.severity} ${i.type}`)).toEqual(['information this-code-not-in-vs']);
    const none = await validate([
      { name: 'url', valueUri: `${VS}mammals` },
      { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: ANIMALS, code: 'octopus' }] } },
    ]);
    expect(none.result).toBe(false);
    expect(none.issues.map((i) => i.text).join()).toContain("#octopus'");
  });

  test('coding input, display from the coding', async () => {
    const r = await validate([
      { name: 'url', valueUri: `${VS}mammals` },
      { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog', display: 'Wrong' } },
    ]);
    expect(r.result).toBe(false);
    expect(r.issues.map((i) => i.text).join()).toContain("Wrong Display Name 'Wrong'");
  });

  test('inline valueSet and instance id', async () => {
    const inline = await validate([
      { name: 'valueSet', resource: { resourceType: 'ValueSet', compose: { include: [{ system: ANIMALS, filter: [{ property: 'concept', op: 'is-a', value: 'bird' }] }] } } },
      { name: 'code', valueCode: 'eagle' },
      { name: 'system', valueUri: ANIMALS },
    ]);
    expect(inline.result).toBe(true);
    const byId = await validate([{ name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }], 'mammals');
    expect(byId.result).toBe(true);
    const noId = await rejected(validate([{ name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }], 'nope'));
    expect(noId.category).toBe('not-found');
  });

  test('a ValueSet not found by URL is a 400 naming it', async () => {
    const e = await rejected(code('no-such-set', 'dog'));
    expect(e.category).toBe('invalid');
    expect(e.message).toBe(`A definition for the value Set '${VS}no-such-set' could not be found`);
  });

  test('a coding without a system is not valid (result false, with why), not a bad request', async () => {
    const r = await validate([{ name: 'url', valueUri: `${VS}mammals` }, { name: 'coding', valueCoding: { code: 'dog' } }]);
    expect(r.result).toBe(false);
    // As the reference servers answer: not in the value set (at the code), and a warning about the coding.
    expect(r.issues.map((i) => `${i.severity} ${i.code} ${i.type} ${i.expression}`)).toEqual(['error code-invalid not-in-vs Coding.code', 'warning invalid invalid-data Coding']);
  });

  test('input rules: exactly one of code+system / coding / codeableConcept; code needs system; url needed', async () => {
    const url = { name: 'url', valueUri: `${VS}mammals` };
    const cases: [Record<string, unknown>[], string][] = [
      [[url], "one of 'code' (with its system), 'coding' or 'codeableConcept' is required"],
      [[url, { name: 'code', valueCode: 'dog' }], "the parameter 'system' is required with 'code'"],
      [[url, { name: 'system', valueUri: ANIMALS }], "the parameter 'code' is required with 'system'"],
      [[url, { name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }, { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog' } }], 'give only one'],
      [[url, { name: 'codeableConcept', valueCodeableConcept: { text: 'dog' } }], 'at least one coding'],
      [[{ name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }], "the parameter 'url'"],
      [[url, { name: 'url', valueUri: 'x' }, { name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }], 'only once'],
      [[url, { name: 'code', valueBoolean: true }, { name: 'system', valueUri: ANIMALS }], "'code' must be given as"],
      [[url, { name: 'abstract', valueString: 'no' }, { name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }], "'abstract' must be given as"],
    ];
    for (const [parameter, message] of cases) {
      const e = await rejected(validate(parameter));
      expect(e.category).toBe('invalid');
      expect(e.message).toContain(message);
    }
    const notParameters = await rejected(() => valueSetValidateCodeParams.fromBody({ resourceType: 'Patient' }));
    expect(notParameters.message).toContain('Parameters');
  });

  test('GET form: primitive inputs from the query', async () => {
    const raw = valueSetValidateCodeParams.fromQuery(new URLSearchParams({ url: `${VS}all-animals`, code: 'animal', system: ANIMALS, abstract: 'false' }));
    const r = await validateValueSetCode(valueSetValidateCodeInput(raw), { terminology: await context() });
    expect(r.result).toBe(false);
    const bad = await rejected(() => valueSetValidateCodeParams.fromQuery(new URLSearchParams({ abstract: 'maybe' })));
    expect(bad.message).toContain('abstract');
    const complex = await rejected(() => valueSetValidateCodeParams.fromQuery(new URLSearchParams({ coding: 'x' })));
    expect(complex.message).toContain('cannot be given in the URL');
  });
});

describe('ValueSet $validate-code: one function, at once in the steady state', () => {
  test('answers a code by ValueSet URL later while loading, then at once', async () => {
    const fresh = await fixtureService();
    const input = valueSetValidateCodeInput(valueSetValidateCodeParams.fromBody({
      resourceType: 'Parameters',
      parameter: [{ name: 'url', valueUri: `${VS}land-mammals` }, { name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }],
    }));
    const terminology = await fresh.context();
    const first = validateValueSetCode(input, { terminology });
    expect(first).toBeInstanceOf(Promise); // nothing loaded yet
    const result = await first;
    expect(result.result).toBe(true);
    const warm = validateValueSetCode(input, { terminology: await fresh.context() });
    expect(warm).not.toBeInstanceOf(Promise);
    expect(warm).toEqual(result);
  });

  test('a CodeableConcept and an instance-level call are answered as promises; an unknown ValueSet, once known to be unknown, is refused at once', async () => {
    const loaded = await code('all-animals', 'dog');
    expect(loaded.result).toBe(true);
    const terminology = await context();
    const input = (parameter: Record<string, unknown>[], id?: string) =>
      valueSetValidateCodeInput(valueSetValidateCodeParams.fromBody({ resourceType: 'Parameters', parameter }), id);
    const concept = input([{ name: 'url', valueUri: `${VS}all-animals` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: ANIMALS, code: 'dog' }] } }]);
    await validateValueSetCode(concept, { terminology });
    expect(validateValueSetCode(concept, { terminology })).toBeInstanceOf(Promise);
    const instance = input([{ name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }], 'all-animals');
    await validateValueSetCode(instance, { terminology });
    expect(validateValueSetCode(instance, { terminology })).toBeInstanceOf(Promise);
    const unknown = input([{ name: 'url', valueUri: `${VS}no-such-value-set` }, { name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }]);
    expect((await rejected(async () => validateValueSetCode(unknown, { terminology }))).message).toContain('no-such-value-set');
    expect(() => validateValueSetCode(unknown, { terminology })).toThrow('no-such-value-set');
  });

  test('the tests above checked both paths', () => {
    expect(answeredAtOnce).toBeGreaterThan(40);
  });
});
