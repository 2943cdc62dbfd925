import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { ANIMALS, errorIssue, getOperation, outcome, type Param, postOperation, putResource, putTerminologyFixtures, VS } from '../helpers/terminology-http.ts';

// In the fixture CodeSystem (version 2.0.0, language 'en') 'dog' has designations en "Domestic dog"
// (a synonym) and de "Hund"; 'cat' has de "Mieze" (a synonym), de "Katze" (no use) and de-CH
// "Chatz" (designation-usage#display). Version 1.0.0 declares no language.
let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await createTestApp();
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

async function lookupDisplay(code: string, displayLanguage?: string, version?: string): Promise<unknown> {
  const query: Record<string, string> = { system: ANIMALS, code };
  if (displayLanguage !== undefined) query.displayLanguage = displayLanguage;
  if (version !== undefined) query.version = version;
  const r = await getOperation(t, token, 'CodeSystem/$lookup', query);
  expect(r.status).toBe(200);
  return r.body.parameter?.find((p) => p.name === 'display')?.valueString;
}

describe('displayLanguage in $lookup', () => {
  test('a designation in that language is the display; otherwise the default display', async () => {
    expect(await lookupDisplay('dog', 'de')).toBe('Hund');
    expect(await lookupDisplay('dog', 'DE')).toBe('Hund');
    expect(await lookupDisplay('dog', 'fr')).toBe('Dog');
    expect(await lookupDisplay('dog')).toBe('Dog');
    expect(await lookupDisplay('whale', 'de')).toBe('Whale');
  });

  test('a list with `*` takes any language; `*;q=0` refuses the languages it does not name', async () => {
    expect(await lookupDisplay('dog', 'fr, *')).toBe('Dog');
    expect(await lookupDisplay('dog', 'fr,de,*')).toBe('Hund');
    expect(await lookupDisplay('dog', 'de, *; q=0')).toBe('Hund');
    expect(await lookupDisplay('whale', 'de, *; q=0')).toBeUndefined();
    expect(await lookupDisplay('whale', 'de;q=0.8')).toBe('Whale');
    const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}mammals` }, { name: 'displayLanguage', valueCode: 'de,*;q=0' }]);
    expect(r.status).toBe(200);
    const contains = (r.body.expansion as { contains: { code: string; display?: string }[] }).contains;
    expect(contains.find((c) => c.code === 'dog')?.display).toBe('Hund');
    expect(contains.find((c) => c.code === 'whale')).toEqual(expect.not.objectContaining({ display: expect.anything() }));
  });

  test('an exact language tag beats the primary language; a display designation beats a synonym', async () => {
    expect(await lookupDisplay('cat', 'de')).toBe('Katze');
    expect(await lookupDisplay('cat', 'de-CH')).toBe('Chatz');
    expect(await lookupDisplay('cat', 'de-AT')).toBe('Katze');
    expect(await lookupDisplay('dog', 'de-CH')).toBe('Hund');
  });

  test("the CodeSystem's own language keeps its display ahead of a synonym in that language", async () => {
    expect(await lookupDisplay('dog', 'en')).toBe('Dog');
    // Version 1.0.0 does not say which language its displays are in: the English synonym is all we know.
    expect(await lookupDisplay('dog', 'en', '1.0.0')).toBe('Domestic dog');
  });

  test('POST form; designations are all still listed', async () => {
    const r = await postOperation(t, token, 'CodeSystem/$lookup', [
      { name: 'coding', valueCoding: { system: ANIMALS, code: 'cat' } },
      { name: 'displayLanguage', valueCode: 'de-CH' },
    ]);
    expect(r.body.parameter?.find((p) => p.name === 'display')?.valueString).toBe('Chatz');
    expect(r.body.parameter?.filter((p) => p.name === 'designation')).toHaveLength(4);
  });
});

describe('displayLanguage in $validate-code and $expand', () => {
  test('ValueSet/$validate-code returns the display in that language', async () => {
    const check = (displayLanguage: string, code = 'dog') =>
      getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}mammals`, system: ANIMALS, code, displayLanguage });
    expect(outcome(await check('de'))).toEqual({ result: true, display: 'Hund' });
    expect(outcome(await check('fr'))).toEqual({ result: true, display: 'Dog' });
    expect(outcome(await check('de-CH', 'cat'))).toEqual({ result: true, display: 'Chatz' });
  });

  test('a given display must be one in the language asked for, when the code has displays in it (as the reference servers answer)', async () => {
    const check = (display: string, displayLanguage: string) =>
      postOperation(t, token, 'ValueSet/$validate-code', [
        { name: 'url', valueUri: `${VS}mammals` },
        { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog', display } },
        { name: 'displayLanguage', valueCode: displayLanguage },
      ]);
    expect(outcome(await check('Hund', 'de'))).toEqual({ result: true, display: 'Hund' });
    const wrong = outcome(await check('Dog', 'de'));
    expect(wrong).toMatchObject({ result: false, display: 'Hund' });
    expect(wrong.message).toContain("Valid display is 'Hund' (de) (for the language(s) 'de')");
    // No French display: the default language's display is accepted, with a note.
    const none = outcome(await check('Dog', 'fr'));
    expect(none).toMatchObject({ result: true, display: 'Dog' });
    expect(none.message).toContain('which is a valid display for the default language');
    // A list of languages, as Accept-Language writes it.
    expect(outcome(await check('Hund', 'fr, de;q=0.5'))).toMatchObject({ result: true, display: 'Hund' });
  });

  test('CodeSystem/$validate-code, also at instance level', async () => {
    expect(outcome(await getOperation(t, token, 'CodeSystem/$validate-code', { url: ANIMALS, code: 'cat', displayLanguage: 'de' }))).toEqual({
      result: true,
      display: 'Katze',
    });
    expect(outcome(await getOperation(t, token, 'CodeSystem/animals-1/$validate-code', { code: 'dog', displayLanguage: 'de' })).display).toBe('Hund');
  });

  test('$expand shows displays in that language and echoes the parameter', async () => {
    const r = await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}pets`, displayLanguage: 'de' });
    expect(r.status).toBe(200);
    const expansion = r.body.expansion as { contains: { code: string; display?: string }[]; parameter: unknown[] };
    expect(expansion.contains.map((c) => [c.code, c.display])).toEqual([
      ['dog', 'Hund'],
      ['cat', 'Katze'],
      ['eagle', 'Eagle'],
    ]);
    expect(expansion.parameter).toContainEqual({ name: 'displayLanguage', valueCode: 'de' });
    const filtered = await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}pets`, displayLanguage: 'de', filter: 'hun' });
    expect((filtered.body.expansion as { contains: { code: string }[] }).contains.map((c) => c.code)).toEqual(['dog']);
  });

  test("a value set's own displayLanguage (a compose expansion parameter, as in HL7's terminology tests) applies when the request names none", async () => {
    await putResource(t, token, {
      resourceType: 'ValueSet', id: 'pets-de', url: `${VS}pets-de`, status: 'active',
      compose: {
        extension: [{
          url: 'http://hl7.org/fhir/StructureDefinition/valueset-expansion-parameter',
          extension: [{ url: 'name', valueCode: 'displayLanguage' }, { url: 'value', valueCode: 'de' }],
        }],
        include: [{ system: ANIMALS, concept: [{ code: 'dog' }, { code: 'cat' }] }],
      },
    });
    const check = (display: string, extra: Param[] = []) =>
      postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}pets-de` }, { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog', display } }, ...extra]);
    expect(outcome(await check('Hund'))).toEqual({ result: true, display: 'Hund' });
    const wrong = outcome(await check('Dog'));
    expect(wrong).toMatchObject({ result: false, display: 'Hund' });
    expect(wrong.message).toContain("Valid display is 'Hund' (de) (for the language(s) 'de')");
    // The request's own displayLanguage comes first.
    expect(outcome(await check('Dog', [{ name: 'displayLanguage', valueCode: 'en' }]))).toEqual({ result: true, display: 'Dog' });

    const r = await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}pets-de` });
    const expansion = r.body.expansion as { contains: { code: string; display?: string }[]; parameter: unknown[] };
    expect(expansion.contains.map((c) => [c.code, c.display])).toEqual([['dog', 'Hund'], ['cat', 'Katze']]);
    expect(expansion.parameter).toContainEqual({ name: 'displayLanguage', valueCode: 'de' });
    const en = await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}pets-de`, displayLanguage: 'en' });
    expect((en.body.expansion as { contains: { display?: string }[] }).contains.map((c) => c.display)).toEqual(['Dog', 'Cat']);
  });

  test('a displayLanguage that is not a language tag is a 400', async () => {
    const r = await getOperation(t, token, 'CodeSystem/$lookup', { system: ANIMALS, code: 'dog', displayLanguage: 'de_DE!' });
    expect(errorIssue(r, 400).text).toContain('must be a language tag');
  });
});
