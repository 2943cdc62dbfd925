/**
 * $validate-code answers as the reference terminology servers do (issue #16): an `issues`
 * OperationOutcome with HL7's tx-issue-type codes and the input element, the display of a known code
 * on a false result, wildcard versions, contained ValueSets, version mismatches.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { ANIMALS, type OperationResponse, outcome, type Param, postOperation, putTerminologyFixtures, VS } from '../helpers/terminology-http.ts';

let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await createTestApp();
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

type Json = Record<string, any>;
const TX = 'http://hl7.org/fhir/tools/CodeSystem/tx-issue-type';
const validate = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$validate-code', parameter);
/** `severity code tx-type expression` of each issue of the `issues` output. */
function kinds(body: Json): string[] {
  const issues = (body.parameter as Json[]).find((p) => p.name === 'issues')?.resource?.issue ?? [];
  return (issues as Json[]).map((i) => {
    expect(i.details.coding[0].system).toBe(TX);
    expect(i.details.text.length).toBeGreaterThan(10);
    return `${i.severity} ${i.code} ${i.details.coding[0].code} ${i.expression?.[0] ?? '-'}`;
  });
}
/** The text of the first issue of the `issues` output. */
const issueText = (body: Json): unknown => ((body.parameter as Json[]).find((p) => p.name === 'issues')?.resource?.issue ?? [])[0]?.details?.text;
const inline = (compose: Json, contained?: Json[]): Param => ({
  name: 'valueSet', resource: { resourceType: 'ValueSet', status: 'active', ...(contained ? { contained } : {}), compose },
});
const coding = (code: string, version?: string): Param => ({ name: 'coding', valueCoding: { system: ANIMALS, code, ...(version ? { version } : {}) } });

describe('issues', () => {
  test('a code outside the value set, an unknown code, a wrong display: each with its kind and input element', async () => {
    const notIn = await validate([{ name: 'url', valueUri: `${VS}mammals` }, { name: 'code', valueCode: 'ant' }, { name: 'system', valueUri: ANIMALS }]);
    expect(outcome(notIn)).toMatchObject({ result: false, display: 'Ant' });
    expect(kinds(notIn.body)).toEqual(['error code-invalid not-in-vs code']);
    const unknown = await validate([{ name: 'url', valueUri: `${VS}mammals` }, coding('unicorn')]);
    expect(kinds(unknown.body)).toEqual(['error code-invalid not-in-vs Coding.code', 'error code-invalid invalid-code Coding.code']);
    const display = await validate([{ name: 'url', valueUri: `${VS}mammals` }, { name: 'coding', valueCoding: { system: ANIMALS, code: 'cat', display: 'Kitty' } }]);
    expect(outcome(display)).toMatchObject({ result: false, display: 'Cat' });
    // A finding about the display is located at the display, as the reference servers locate it.
    expect(kinds(display.body)).toEqual(['error invalid invalid-display Coding.display']);
  });

  test('a valid code has no issues and no message', async () => {
    const ok = await validate([{ name: 'url', valueUri: `${VS}mammals` }, coding('cat')]);
    expect(outcome(ok)).toEqual({ result: true, display: 'Cat' });
    expect(kinds(ok.body)).toEqual([]);
  });

  test('a CodeableConcept: the codings outside the value set are information, the concept as a whole the error', async () => {
    const cc = await validate([{ name: 'url', valueUri: `${VS}mammals` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: ANIMALS, code: 'ant' }] } }]);
    expect(outcome(cc).result).toBe(false);
    expect(kinds(cc.body)).toEqual(['error code-invalid not-in-vs -', 'information code-invalid this-code-not-in-vs CodeableConcept.coding[0].code']);
  });
});

describe('versions', () => {
  test('an include pinned with a wildcard (1.x) takes the latest matching version', async () => {
    expect(outcome(await validate([inline({ include: [{ system: ANIMALS, version: '1.x' }] }), coding('wolf')])).result).toBe(true);
    expect(outcome(await validate([inline({ include: [{ system: ANIMALS, version: '1.x' }] }), coding('platypus')])).result).toBe(false);
    expect(outcome(await validate([inline({ include: [{ system: ANIMALS, version: '2.x' }] }), coding('platypus')])).result).toBe(true);
    expect(outcome(await validate([inline({ include: [{ system: ANIMALS, version: '1.x' }] }), coding('wolf', '1.0.0')])).result).toBe(true);
  });

  test("a coding of another version than the value set's: false, the mismatch, and the display of the value set's version", async () => {
    const r = await validate([inline({ include: [{ system: ANIMALS, version: '1.0.0' }] }), coding('ant', '2.0.0')]);
    expect(outcome(r).result).toBe(false);
    // Located where the reference servers locate them: the mismatch at the coding's version, an unknown version at its system.
    expect(kinds(r.body)).toEqual(['error invalid vs-invalid Coding.version']);
    const unknownVersion = await validate([inline({ include: [{ system: ANIMALS }] }), coding('ant', '9.9')]);
    expect(outcome(unknownVersion)).toMatchObject({ result: false, display: 'Ant' });
    expect(kinds(unknownVersion.body)).toContain('error not-found not-found Coding.system');
    // The code input: its systemVersion is read as the coding's version and located as the reference servers do, at `version`.
    const asCode = await validate([inline({ include: [{ system: ANIMALS, version: '1.0.0' }] }), { name: 'code', valueCode: 'ant' }, { name: 'system', valueUri: ANIMALS }, { name: 'systemVersion', valueString: '2.0.0' }]);
    expect(kinds(asCode.body)).toEqual(['error invalid vs-invalid version']);
  });
});

describe('a value set that includes two versions of one code system', () => {
  test('a code counts in the latest version that has it, and a display of either version is valid', async () => {
    const both = inline({ include: [{ system: ANIMALS, version: '1.0.0' }, { system: ANIMALS, version: '2.0.0' }] });
    expect(outcome(await validate([both, coding('eagle')]))).toMatchObject({ result: true, display: 'Eagle' });
    // A display only the older version has names that version: the answer's display is that version's.
    expect(outcome(await validate([both, { name: 'coding', valueCoding: { system: ANIMALS, code: 'eagle', display: 'Eagle (old name)' } }])))
      .toEqual({ result: true, display: 'Eagle (old name)' });
    expect(outcome(await validate([both, { name: 'coding', valueCoding: { system: ANIMALS, code: 'eagle', display: 'Eagle' } }])))
      .toEqual({ result: true, display: 'Eagle' });
    // A wrong display names the latest version's display alone as the valid one, as the reference servers answer (HL7's `validate-all-bad2`).
    const wrong = outcome(await validate([both, { name: 'coding', valueCoding: { system: ANIMALS, code: 'eagle', display: 'Hawk' } }]));
    expect(wrong.result).toBe(false);
    expect(wrong.message).toContain("Valid display is 'Eagle'");
    expect(wrong.message).not.toContain('Eagle (old name)');
    expect(outcome(await validate([both, coding('wolf')])).result).toBe(true);
    expect(outcome(await validate([both, coding('platypus')])).result).toBe(true);
    // A coding of version 1.0.0 is judged by that version's include alone: no mismatch with 2.0.0.
    const v1 = await validate([both, coding('platypus', '1.0.0')]);
    expect(outcome(v1).result).toBe(false);
    expect(kinds(v1.body).some((k) => k.includes('vs-invalid'))).toBe(false);
  });
});

describe('contained ValueSets', () => {
  test('an include of #id imports the ValueSet contained in the one validated against', async () => {
    const contained = [{ resourceType: 'ValueSet', id: 'new', status: 'active', compose: { include: [{ system: ANIMALS, version: '2.0.0', concept: [{ code: 'platypus' }] }] } }];
    expect(outcome(await validate([inline({ include: [{ valueSet: ['#new'] }] }, contained), coding('platypus')])).result).toBe(true);
    const other = await validate([inline({ include: [{ valueSet: ['#new'] }] }, contained), coding('ant')]);
    expect(outcome(other).result).toBe(false);
    const missing = await validate([inline({ include: [{ valueSet: ['#gone'] }] }, contained), coding('platypus')]);
    // About no element of the request (terminology-message-ids.test.ts): no expression.
    expect(kinds(missing.body)).toEqual(['error not-found not-found -']);
  });
});

describe('languages, status and systems', () => {
  const put = async (r: Json) => {
    const res = await t.request(`${t.fhir()}/${r.resourceType}/${r.id}`, { method: 'PUT', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: JSON.stringify(r) });
    expect(res.status).toBeLessThan(300);
  };
  const post = async (parameter: Param[], headers: Record<string, string> = {}) => {
    const res = await t.request(`${t.fhir()}/ValueSet/$validate-code`, {
      method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', ...headers }, body: JSON.stringify({ resourceType: 'Parameters', parameter }),
    });
    return { status: res.status, body: (await res.json()) as OperationResponse['body'] };
  };

  test('Accept-Language stands for displayLanguage, on the hot route as on the others', async () => {
    const hund = (extra: Param[] = []) => [{ name: 'url', valueUri: `${VS}mammals` }, { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog', display: 'Dog' } }, ...extra];
    expect(outcome(await post(hund())).result).toBe(true);
    const german = await post(hund(), { 'Accept-Language': 'de-CH, de;q=0.9' });
    expect(outcome(german)).toMatchObject({ result: false, display: 'Hund' });
    // The parameter wins over the header; a malformed header is ignored.
    expect(outcome(await post(hund([{ name: 'displayLanguage', valueCode: 'en' }]), { 'Accept-Language': 'de' })).result).toBe(true);
    expect(outcome(await post(hund(), { 'Accept-Language': '???' })).result).toBe(true);
  });

  test("a value set's language is the language of its displays", async () => {
    await put({ resourceType: 'ValueSet', id: 'mammals-de', url: `${VS}mammals-de`, status: 'active', language: 'de', compose: { include: [{ valueSet: [`${VS}mammals`] }] } });
    const dog = (display: string) => validate([{ name: 'url', valueUri: `${VS}mammals-de` }, { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog', display } }]);
    expect(outcome(await dog('Hund')).result).toBe(true);
    expect(outcome(await dog('Dog')).result).toBe(false);
  });

  test('draft, experimental and deprecated code systems and value sets are noted for information', async () => {
    await put({
      resourceType: 'CodeSystem', id: 'drafty', url: 'http://cinder.test/CodeSystem/drafty', version: '0.1', status: 'draft', content: 'complete', concept: [{ code: 'a', display: 'A' }],
    });
    await put({
      resourceType: 'ValueSet', id: 'old', url: `${VS}old`, status: 'active', experimental: true,
      extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status', valueCode: 'deprecated' }],
      compose: { include: [{ system: 'http://cinder.test/CodeSystem/drafty' }] },
    });
    const r = await validate([{ name: 'url', valueUri: `${VS}old` }, { name: 'coding', valueCoding: { system: 'http://cinder.test/CodeSystem/drafty', code: 'a' } }]);
    expect(outcome(r).result).toBe(true);
    expect(kinds(r.body)).toEqual(['information business-rule status-check -', 'information business-rule status-check -']);
    const texts = ((r.body.parameter as Json[]).find((p) => p.name === 'issues')!.resource.issue as Json[]).map((i) => i.details.text);
    expect(texts).toEqual(['Reference to draft CodeSystem http://cinder.test/CodeSystem/drafty|0.1', `Reference to deprecated ValueSet ${VS}old`]);
  });

  test('a system that is a ValueSet URL, or not absolute, is named as such', async () => {
    const asVs = await validate([{ name: 'url', valueUri: `${VS}mammals` }, { name: 'coding', valueCoding: { system: `${VS}mammals`, code: 'dog' } }]);
    expect(kinds(asVs.body)).toEqual(['error code-invalid not-in-vs Coding.code', 'error invalid invalid-data Coding.system']);
    const local = await validate([{ name: 'url', valueUri: `${VS}mammals` }, { name: 'coding', valueCoding: { system: 'animals', code: 'dog' } }]);
    expect(kinds(local.body)).toEqual(['error code-invalid not-in-vs Coding.code', 'error invalid invalid-data Coding.system', 'error not-found not-found Coding.system']);
  });

  test('a value set naming a supplement that does not exist, or a code system that is not one, cannot be used (400)', async () => {
    await put({ resourceType: 'CodeSystem', id: 'animals-extra', url: 'http://cinder.test/CodeSystem/animals-extra', status: 'active', content: 'supplement', supplements: ANIMALS, concept: [{ code: 'dog', designation: [{ language: 'nl', value: 'hond' }] }] });
    const named = (supplement: string): Param => ({
      name: 'valueSet',
      resource: { resourceType: 'ValueSet', status: 'active', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-supplement', valueCanonical: supplement }], compose: { include: [{ system: ANIMALS }] } },
    });
    expect(outcome(await validate([named('http://cinder.test/CodeSystem/animals-extra'), coding('dog')])).result).toBe(true);
    // The designations a named supplement adds are the concept's own: a valid display, and the display in that language.
    const hond = { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog', display: 'hond' } };
    expect(outcome(await validate([named('http://cinder.test/CodeSystem/animals-extra'), hond])).result).toBe(true);
    expect(outcome(await validate([named('http://cinder.test/CodeSystem/animals-extra'), coding('dog'), { name: 'displayLanguage', valueCode: 'nl' }])).display).toBe('hond');
    expect(outcome(await validate([inline({ include: [{ system: ANIMALS }] }), hond])).result).toBe(false);
    const missing = await validate([named('http://cinder.test/CodeSystem/nothing'), coding('dog')]);
    expect(missing.status).toBe(400);
    expect(JSON.stringify(missing.body)).toContain("supplement 'http://cinder.test/CodeSystem/nothing'");
    expect((await validate([named(ANIMALS), coding('dog')])).status).toBe(400);
    const expand = await postOperation(t, token, 'ValueSet/$expand', [named('http://cinder.test/CodeSystem/nothing')]);
    expect(expand.status).toBe(400);
  });

  test("a concept marked valueset-deprecated in the value set is valid, with a warning", async () => {
    const vs = inline({ include: [{ system: ANIMALS, concept: [{ code: 'dog', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-deprecated', valueBoolean: true }] }, { code: 'cat' }] }] });
    const dog = await validate([vs, coding('dog')]);
    expect(outcome(dog).result).toBe(true);
    expect(kinds(dog.body)).toEqual(['warning business-rule code-comment Coding.code']);
    expect(kinds((await validate([vs, coding('cat')])).body)).toEqual([]);
  });

  test('valueset-deprecated written as the code true, and a deprecated standards-status, warn too', async () => {
    const vs = inline({
      include: [{
        system: ANIMALS,
        concept: [
          { code: 'dog', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-deprecated', valueCode: 'true' }] },
          { code: 'cat', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status', valueCode: 'deprecated' }] },
        ],
      }],
    });
    expect(kinds((await validate([vs, coding('dog')])).body)).toEqual(['warning business-rule code-comment Coding.code']);
    expect(kinds((await validate([vs, coding('cat')])).body)).toEqual(['warning business-rule code-comment Coding.code']);
  });

  test('a deprecated concept is active, valid with a warning; a withdrawn designation is a display with a warning (in issues alone, in HL7\'s words)', async () => {
    const LIFE = 'http://cinder.test/CodeSystem/lifecycle';
    const status = (value: string) => ({ property: [{ code: 'status', valueCode: value }] });
    await put({
      resourceType: 'CodeSystem', id: 'lifecycle', url: LIFE, status: 'active', content: 'complete',
      property: [{ code: 'status', uri: 'http://hl7.org/fhir/concept-properties#status', type: 'code' }],
      concept: [
        { code: 'old', display: 'Old', ...status('deprecated') },
        { code: 'gone', display: 'Gone', ...status('retired') },
        { code: 'marked', display: 'Marked', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status', valueCode: 'deprecated' }] },
        {
          code: 'renamed', display: 'New name', designation: [
            { language: 'en', value: 'Old name', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status', valueCode: 'withdrawn' }] },
            { language: 'en', value: 'Older name', extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status', valueCode: 'deprecated' }] },
            { language: 'en', value: 'Renamed' },
          ],
        },
      ],
    });
    const cs = (parameter: Param[]) => postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: LIFE }, ...parameter]);
    for (const code of ['old', 'marked']) {
      const r = await cs([{ name: 'code', valueCode: code }]);
      expect(outcome(r).result).toBe(true);
      expect(kinds(r.body)).toEqual(['warning business-rule code-comment code']);
    }
    // An inactive one too is a comment on the code (HL7's INACTIVE_CONCEPT_FOUND), not a note on a resource's status.
    expect(kinds((await cs([{ name: 'code', valueCode: 'gone' }])).body)).toEqual(['warning business-rule code-comment code']);
    const renamed = await cs([{ name: 'code', valueCode: 'renamed' }, { name: 'display', valueString: 'Old name' }]);
    expect(outcome(renamed)).toEqual({ result: true, display: 'New name' });
    expect(kinds(renamed.body)).toEqual(['warning invalid display-comment display']);
    expect(issueText(renamed.body))
      .toBe("'Old name' is no longer considered a correct display for code 'renamed' (status = withdrawn). The correct display is one of \"New name\", \"Renamed\".");
    const older = await cs([{ name: 'code', valueCode: 'renamed' }, { name: 'display', valueString: 'Older name' }]);
    expect(outcome(older)).toEqual({ result: true, display: 'New name' });
    expect(issueText(older.body)).toContain("for code 'renamed' (status = deprecated).");
    const active = await postOperation(t, token, 'ValueSet/$expand', [
      { name: 'valueSet', resource: { resourceType: 'ValueSet', compose: { include: [{ system: LIFE }] } } }, { name: 'activeOnly', valueBoolean: true },
    ]);
    expect((active.body.expansion as Json).contains.map((c: Json) => c.code)).toEqual(['old', 'marked', 'renamed']);
  });

  test('a notSelectable filter matches only the concepts that state the property', async () => {
    await put({
      resourceType: 'CodeSystem', id: 'sel', url: 'http://cinder.test/CodeSystem/sel', status: 'active', content: 'complete',
      property: [{ code: 'notSelectable', uri: 'http://hl7.org/fhir/concept-properties#notSelectable', type: 'boolean' }],
      concept: [{ code: 'yes', property: [{ code: 'notSelectable', valueBoolean: false }] }, { code: 'no', property: [{ code: 'notSelectable', valueBoolean: true }] }, { code: 'unsaid' }],
    });
    const vs = inline({ include: [{ system: 'http://cinder.test/CodeSystem/sel', filter: [{ property: 'notSelectable', op: '=', value: 'false' }] }] });
    const check = async (code: string) => outcome(await validate([vs, { name: 'coding', valueCoding: { system: 'http://cinder.test/CodeSystem/sel', code } }])).result;
    expect([await check('yes'), await check('no'), await check('unsaid')]).toEqual([true, false, false]);
  });
});
