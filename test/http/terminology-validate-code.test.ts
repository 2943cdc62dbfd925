import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import {
  ANIMALS,
  errorIssue,
  getOperation,
  outcome,
  type Param,
  postOperation,
  putTerminologyFixtures,
  VS,
} from '../helpers/terminology-http.ts';

let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await createTestApp();
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

const validate = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$validate-code', parameter);
const code = (vs: string, c: string, system = ANIMALS, extra: Param[] = []) =>
  validate([{ name: 'url', valueUri: VS + vs }, { name: 'code', valueCode: c }, { name: 'system', valueUri: system }, ...extra]);

interface Case {
  readonly vs: string;
  readonly code: string;
  readonly result: boolean;
  readonly system?: string;
  readonly extra?: Param[];
  readonly display?: string;
  /** A text the message holds; '' for an answer without a message. */
  readonly message?: string;
  /** A text one of the issues holds. */
  readonly issue?: string;
}

/** [rule, cases]: every compose rule of the issue through HTTP. */
const RULES: [string, Case[]][] = [
  ['whole-system include with the CodeSystem display', [
    { vs: 'all-animals', code: 'dog', result: true, display: 'Dog' },
    { vs: 'all-animals', code: 'unicorn', result: false, message: "Unknown code 'unicorn' in the CodeSystem 'http://cinder.test/CodeSystem/animals' version '2.0.0'" },
  ]],
  ['is-a / descendent-of / is-not-a / generalizes over nested concepts and parent/child properties', [
    { vs: 'mammals', code: 'mammal', result: true },
    { vs: 'mammals', code: 'platypus', result: true },
    { vs: 'mammals', code: 'eagle', result: false, message: "The provided code 'http://cinder.test/CodeSystem/animals#eagle' was not found in the value set 'http://cinder.test/ValueSet/mammals'" },
    { vs: 'mammals-strict', code: 'mammal', result: false },
    { vs: 'mammals-strict', code: 'cat', result: true },
    { vs: 'not-mammals', code: 'cat', result: false },
    { vs: 'not-mammals', code: 'spider', result: true },
    { vs: 'invertebrates', code: 'ant', result: true },
    { vs: 'dog-ancestors', code: 'animal', result: true },
    { vs: 'dog-ancestors', code: 'bird', result: false },
  ]],
  ['in / not-in / regex / = / exists on code and properties; criteria intersect', [
    { vs: 'pets', code: 'cat', result: true },
    { vs: 'pets', code: 'penguin', result: false },
    { vs: 'not-pets', code: 'penguin', result: true },
    { vs: 'not-pets', code: 'dog', result: false },
    { vs: 'regex-a-to-d', code: 'bird', result: true },
    { vs: 'regex-a-to-d', code: 'eagle', result: false },
    { vs: 'sea-animals', code: 'penguin', result: true },
    { vs: 'eight-legs', code: 'spider', result: true },
    { vs: 'eight-legs', code: 'ant', result: false },
    { vs: 'legless', code: 'vertebrate', result: true },
    { vs: 'legless', code: 'whale', result: false },
    { vs: 'sea-mammals', code: 'whale', result: true },
    { vs: 'sea-mammals', code: 'octopus', result: false },
    { vs: 'children-of-insect', code: 'ant', result: true },
  ]],
  ['concept lists, exclude and include.valueSet intersection', [
    { vs: 'listed', code: 'cat', result: true, display: 'Cat' },
    { vs: 'listed', code: 'whale', result: false },
    { vs: 'mammals-but-whale', code: 'whale', result: false, message: 'was not found in the value set' },
    { vs: 'mammals-but-whale', code: 'cat', result: true },
    { vs: 'animals-but-land', code: 'cat', result: false },
    { vs: 'animals-but-land', code: 'octopus', result: true },
    { vs: 'land-mammals', code: 'cat', result: true },
    { vs: 'land-mammals', code: 'whale', result: false },
    { vs: 'land-mammals', code: 'ant', result: false },
    { vs: 'four-legged-land-mammals', code: 'dog', result: true },
    { vs: 'two-sources', code: 'dog', result: true },
    { vs: 'two-sources', code: 'CAT', system: 'http://cinder.test/CodeSystem/animals-ci', result: true, display: 'Cat' },
  ]],
  ['missing imports and expansion-only value sets', [
    { vs: 'missing-import', code: 'dog', result: false, message: "A definition for the value Set 'http://cinder.test/ValueSet/does-not-exist' could not be found" },
    { vs: 'expansion-only', code: 'cat', result: true, display: 'Cat' },
    { vs: 'expansion-only', code: 'x1', system: 'http://cinder.test/CodeSystem/elsewhere', result: true, display: 'Elsewhere X1' },
    { vs: 'expansion-only', code: 'whale', result: false },
  ]],
  ['caseSensitive', [
    { vs: 'twin', code: 'whale', system: 'http://cinder.test/CodeSystem/animals-ci', result: true, display: 'Whale' },
    { vs: 'all-animals', code: 'Whale', result: false, message: "Unknown code 'Whale'" },
  ]],
  ['content fragment / example / not-present and unknown systems', [
    { vs: 'colors', code: 'red', system: 'http://cinder.test/CodeSystem/colors', result: true, display: 'Red' },
    // Valid with a warning in `issues` alone: the reference servers' message repeats errors and status or display comments only.
    { vs: 'colors', code: 'purple', system: 'http://cinder.test/CodeSystem/colors', result: true, issue: "labeled as a fragment, so the code may be valid in some other fragment", message: '' },
    { vs: 'fruit', code: 'kiwi', system: 'http://cinder.test/CodeSystem/fruit', result: true, issue: "content is 'example'", message: '' },
    { vs: 'external-listed', code: 'e1', system: 'http://cinder.test/CodeSystem/external', result: true, display: 'External one', issue: "content 'not-present'", message: '' },
    { vs: 'external-all', code: 'e1', system: 'http://cinder.test/CodeSystem/external', result: false, message: 'cannot be validated' },
    { vs: 'unknown-system', code: 'x', system: 'http://cinder.test/CodeSystem/nowhere', result: false, message: "A definition for CodeSystem 'http://cinder.test/CodeSystem/nowhere' could not be found, so the code cannot be validated" },
  ]],
  ['versions: latest, systemVersion, pinned include versions', [
    { vs: 'all-animals', code: 'wolf', result: false },
    { vs: 'all-animals', code: 'wolf', result: true, extra: [{ name: 'systemVersion', valueString: '1.0.0' }] },
    { vs: 'all-animals', code: 'eagle', result: true, display: 'Eagle' },
    { vs: 'animals-v1', code: 'eagle', result: true, display: 'Eagle (old name)' },
    { vs: 'animals-v1', code: 'platypus', result: false },
    { vs: 'animals-v2', code: 'dog', result: false, extra: [{ name: 'systemVersion', valueString: '1.0.0' }], message: "The code system 'http://cinder.test/CodeSystem/animals' version '2.0.0' in the ValueSet include is different to the one in the value ('1.0.0')" },
    { vs: 'versioned', code: 'cat', result: true },
    { vs: 'versioned', code: 'dog', result: true, extra: [{ name: 'valueSetVersion', valueString: '1' }] },
  ]],
  ['inactive codes and compose.inactive', [
    { vs: 'all-animals', code: 'dodo', result: true, message: "The concept 'dodo' has a status of retired and inactive and its use should be reviewed" },
    { vs: 'all-animals', code: 'mammoth', result: true, message: "The concept 'mammoth' has a status of inactive and its use should be reviewed" },
    { vs: 'active-only', code: 'mammoth', result: false, message: "The concept 'mammoth' is valid but is not active" },
    { vs: 'active-only', code: 'dodo', result: false },
  ]],
  ['abstract / notSelectable', [
    { vs: 'all-animals', code: 'vertebrate', result: true },
    { vs: 'all-animals', code: 'vertebrate', result: false, extra: [{ name: 'abstract', valueBoolean: false }], message: 'is abstract' },
    { vs: 'all-animals', code: 'vertebrate', result: true, extra: [{ name: 'abstract', valueBoolean: true }] },
    { vs: 'all-animals', code: 'mammal', result: true, extra: [{ name: 'abstract', valueBoolean: false }] },
  ]],
  ['display against display and designations, exactly', [
    { vs: 'all-animals', code: 'dog', result: true, extra: [{ name: 'display', valueString: 'Dog' }], display: 'Dog' },
    { vs: 'all-animals', code: 'dog', result: true, extra: [{ name: 'display', valueString: 'Domestic dog' }], display: 'Dog' },
    { vs: 'all-animals', code: 'dog', result: false, extra: [{ name: 'display', valueString: 'Domestic  dog' }], display: 'Dog', message: "Wrong Display Name 'Domestic  dog' for http://cinder.test/CodeSystem/animals#dog. Valid display is one of 3 choices: 'Dog' (en), 'Domestic dog' (en) or 'Hund' (de) (for the language(s) '--')" },
    { vs: 'all-animals', code: 'dog', result: false, extra: [{ name: 'display', valueString: 'DOG' }], display: 'Dog' },
    { vs: 'listed', code: 'dog', result: true, extra: [{ name: 'display', valueString: 'Doggy' }], display: 'Dog' },
  ]],
];

describe('ValueSet/$validate-code over HTTP', () => {
  for (const [rule, cases] of RULES) {
    test(rule, async () => {
      for (const c of cases) {
        const r = await code(c.vs, c.code, c.system, c.extra);
        const got = outcome(r);
        const label = `${c.vs} ${c.code}`;
        expect({ label, result: got.result }).toEqual({ label, result: c.result });
        if (c.display !== undefined) expect(got.display).toBe(c.display);
        if (c.message === '') expect(got.message).toBeUndefined();
        else if (c.message !== undefined) expect(got.message ?? '').toContain(c.message);
        if (c.issue !== undefined) expect(JSON.stringify(r.body.parameter?.find((p) => p.name === 'issues'))).toContain(c.issue);
        if (!c.result) expect(got.message ?? '').not.toBe('');
      }
    });
  }

  test('codeableConcept: true when one coding is valid, false when another is an unknown code of a complete system', async () => {
    const cc = (coding: { system: string; code: string }[]) =>
      validate([{ name: 'url', valueUri: `${VS}mammals` }, { name: 'codeableConcept', valueCodeableConcept: { coding } }]);
    const unknown = outcome(await cc([{ system: ANIMALS, code: 'griffin' }, { system: ANIMALS, code: 'whale' }]));
    expect(unknown).toMatchObject({ result: false, display: 'Whale' });
    expect(unknown.message).toContain("Unknown code 'griffin' in the CodeSystem 'http://cinder.test/CodeSystem/animals' version '2.0.0'");
    const ok = outcome(await cc([{ system: ANIMALS, code: 'octopus' }, { system: ANIMALS, code: 'whale' }]));
    expect(ok).toMatchObject({ result: true, display: 'Whale' });
    const none = outcome(await cc([{ system: ANIMALS, code: 'spider' }, { system: 'http://cinder.test/CodeSystem/colors', code: 'red' }]));
    expect(none.result).toBe(false);
    // The message is the concept's (HL7's TX_GENERAL_CC_ERROR_MESSAGE); each coding's is an issue for information.
    expect(none.message).toBe("No valid coding was found for the value set 'http://cinder.test/ValueSet/mammals'");
  });

  test('coding input and the instance-level form', async () => {
    const coding = outcome(await validate([{ name: 'url', valueUri: `${VS}pets` }, { name: 'coding', valueCoding: { system: ANIMALS, code: 'eagle', display: 'Eagle' } }]));
    expect(coding).toEqual({ result: true, display: 'Eagle' });
    const instance = await postOperation(t, token, 'ValueSet/sea-animals/$validate-code', [{ name: 'code', valueCode: 'whale' }, { name: 'system', valueUri: ANIMALS }]);
    expect(outcome(instance).result).toBe(true);
    const unknown = await postOperation(t, token, 'ValueSet/no-such-id/$validate-code', [{ name: 'code', valueCode: 'whale' }, { name: 'system', valueUri: ANIMALS }]);
    expect(errorIssue(unknown, 404).code).toBe('not-found');
  });

  test('an inline valueSet', async () => {
    const inline = { resourceType: 'ValueSet', compose: { include: [{ system: ANIMALS, filter: [{ property: 'habitat', op: '=', value: 'air' }] }] } };
    const r = outcome(await validate([{ name: 'valueSet', resource: inline }, { name: 'code', valueCode: 'eagle' }, { name: 'system', valueUri: ANIMALS }]));
    expect(r).toEqual({ result: true, display: 'Eagle' });
  });

  test('GET form with query parameters', async () => {
    const r = await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}mammals`, code: 'dog', system: ANIMALS, display: 'Hund' });
    expect(outcome(r)).toEqual({ result: true, display: 'Dog' });
    const instance = await getOperation(t, token, 'ValueSet/mammals/$validate-code', { code: 'vertebrate', system: ANIMALS });
    expect(outcome(instance).result).toBe(false);
  });

  test('FHIR R4 core value sets are preloaded', async () => {
    const r = outcome(await validate([
      { name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' },
      { name: 'code', valueCode: 'unknown' },
      { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' },
    ]));
    expect(r).toEqual({ result: true, display: 'Unknown' });
    const v3 = outcome(await validate([
      { name: 'url', valueUri: 'http://terminology.hl7.org/ValueSet/v3-ActEncounterCode' },
      { name: 'coding', valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'EMER' } },
    ]));
    expect(v3).toEqual({ result: true, display: 'emergency' });
  });
});

describe('ValueSet/$validate-code errors (400 OperationOutcome)', () => {
  test('a ValueSet that cannot be found by URL: severity error, code invalid, naming it', async () => {
    const r = await code('nope', 'dog');
    expect(errorIssue(r, 400)).toEqual({ severity: 'error', code: 'invalid', text: "A definition for the value Set 'http://cinder.test/ValueSet/nope' could not be found" });
  });

  test('circular imports, unknown filter operators and filters without value', async () => {
    expect(errorIssue(await code('circular-a', 'dog'), 400).text).toContain('circular ValueSet import: http://cinder.test/ValueSet/circular-a -> http://cinder.test/ValueSet/circular-b -> http://cinder.test/ValueSet/circular-a');
    expect(errorIssue(await code('self-import', 'dog'), 400).text).toContain('circular');
    expect(errorIssue(await code('bad-operator', 'dog'), 400).text).toContain("unknown filter operator 'sounds-like'");
    // HL7's wording, the filter's place in the value set in `expression` (terminology-expand-errors.test.ts).
    expect(errorIssue(await code('no-filter-value', 'dog'), 400).text).toBe('The system http://cinder.test/CodeSystem/animals filter with property = concept, op = is-a has no value');
    expect(errorIssue(await code('bad-property', 'dog'), 400).text).toContain("has no property 'colour'");
  });

  test('input rules 1 and 2', async () => {
    const url = { name: 'url', valueUri: `${VS}mammals` };
    const cases: [Param[], string][] = [
      [[url], "one of 'code' (with its system), 'coding' or 'codeableConcept' is required"],
      [[url, { name: 'code', valueCode: 'dog' }], "the parameter 'system' is required with 'code'"],
      [[url, { name: 'system', valueUri: ANIMALS }], "the parameter 'code' is required with 'system'"],
      [[url, { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog' } }, { name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }], 'give only one'],
      [[url, { name: 'codeableConcept', valueCodeableConcept: { coding: [] } }], 'at least one coding'],
      [[{ name: 'code', valueCode: 'dog' }, { name: 'system', valueUri: ANIMALS }], "the parameter 'url' (or an inline 'valueSet') is required"],
      [[url, { name: 'code', valueInteger: 3 }, { name: 'system', valueUri: ANIMALS }], "the parameter 'code' must be given as one of valueCode, valueString"],
    ];
    for (const [parameter, text] of cases) {
      const issue = errorIssue(await validate(parameter), 400);
      expect(issue.code).toBe('invalid');
      expect(issue.text).toContain(text);
    }
    const get = await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}mammals`, code: 'dog' });
    expect(errorIssue(get, 400).text).toContain("'system' is required");
    // A coding that cannot be checked is answered, not refused (as the reference servers do).
    const noCode = await validate([url, { name: 'coding', valueCoding: { system: ANIMALS } }]);
    expect(noCode.status).toBe(200);
    expect(outcome(noCode)).toMatchObject({ result: false });
    expect(outcome(noCode).message).toContain('The coding has no code');
  });

  test('bodies that are not Parameters, or not JSON', async () => {
    const notParams = await t.request(`${t.fhir()}/ValueSet/$validate-code`, fhirInit(token, 'POST', { resourceType: 'Patient' }));
    expect(notParams.status).toBe(400);
    expect(JSON.stringify(await notParams.json())).toContain('Parameters');
    const broken = await t.request(`${t.fhir()}/ValueSet/$validate-code`, fhirInit(token, 'POST', '{"resourceType":'));
    expect(broken.status).toBe(400);
  });

  test('bearer auth applies; a token without ValueSet read is refused', async () => {
    const anonymous = await t.request(`${t.fhir()}/ValueSet/$validate-code?url=${VS}mammals&code=dog&system=${ANIMALS}`);
    expect(anonymous.status).toBe(401);
    const patientOnly = await t.tokenFor('t1', ['system/Patient.read']);
    const r = await getOperation(t, patientOnly, 'ValueSet/$validate-code', { url: `${VS}mammals`, code: 'dog', system: ANIMALS });
    expect(errorIssue(r, 403).code).toBe('forbidden');
  });
});
