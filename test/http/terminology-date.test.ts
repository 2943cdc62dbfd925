import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import {
  ANIMALS,
  codeVersions,
  errorIssue,
  getOperation,
  outcome,
  type Param,
  postOperation,
  putResource,
  putTerminologyFixtures,
  VS,
} from '../helpers/terminology-http.ts';

// The fixture CodeSystem has version 1.0.0 dated 2020-01-15 (with 'wolf') and version 2.0.0
// dated 2023-06-01 (with 'platypus', without 'wolf'); ValueSet 'versioned' has version 1 dated
// 2020-02-01 (dog) and version 2 dated 2023-07-01 (cat); the other ValueSets used here are
// dated 2020-01-01 (undated ones count from when they were stored, in 2026 by the test clock).
let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await createTestApp();
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

const inValueSet = (vs: string, code: string, query: Record<string, string> = {}) =>
  getOperation(t, token, 'ValueSet/$validate-code', { url: VS + vs, system: ANIMALS, code, ...query });
const valid = async (vs: string, code: string, query: Record<string, string> = {}) => outcome(await inValueSet(vs, code, query)).result;

describe('date: the CodeSystem versions a ValueSet uses', () => {
  test('the latest version dated at or before the date is used', async () => {
    expect(await valid('all-animals', 'wolf')).toBe(false);
    expect(outcome(await inValueSet('all-animals', 'wolf', { date: '2021' }))).toEqual({ result: true, display: 'Wolf' });
    expect(await valid('all-animals', 'wolf', { date: '2023-05-31' })).toBe(true);
    expect(await valid('all-animals', 'wolf', { date: '2023-06-01' })).toBe(false);
    expect(await valid('all-animals', 'wolf', { date: '2030-01-01' })).toBe(false);
    const platypus = outcome(await inValueSet('all-animals', 'platypus', { date: '2021-06-30' }));
    expect(platypus.result).toBe(false);
    expect(platypus.message).toContain("Unknown code 'platypus' in the CodeSystem 'http://cinder.test/CodeSystem/animals' version '1.0.0'");
    expect(await valid('all-animals', 'platypus', { date: '2023-06' })).toBe(true);
  });

  test('a dateTime is an instant in its time zone; a date covers its whole day', async () => {
    expect(await valid('all-animals', 'wolf', { date: '2023-06-01T01:00:00+02:00' })).toBe(true);
    expect(await valid('all-animals', 'wolf', { date: '2023-05-31T23:59:59.999-00:00' })).toBe(true);
    expect(await valid('all-animals', 'wolf', { date: '2023-06-01T00:00:00Z' })).toBe(false);
    expect(await valid('all-animals', 'wolf', { date: '2023-05-31T22:30:00-02:00' })).toBe(false);
  });

  test('before every version there is no CodeSystem to validate against', async () => {
    const query = { system: ANIMALS, code: 'dog', date: '2019-12-31' };
    const r = outcome(await getOperation(t, token, 'ValueSet/all-animals/$validate-code', query));
    expect(r.result).toBe(false);
    expect(r.message).toContain("A definition for CodeSystem 'http://cinder.test/CodeSystem/animals' as of 2019-12-31 could not be found");
  });

  test('an explicit systemVersion or coding.version wins over the date', async () => {
    expect(await valid('all-animals', 'wolf', { date: '2021', systemVersion: '2.0.0' })).toBe(false);
    expect(await valid('all-animals', 'platypus', { date: '2021', systemVersion: '2.0.0' })).toBe(true);
    const coding = await postOperation(t, token, 'ValueSet/$validate-code', [
      { name: 'url', valueUri: `${VS}all-animals` },
      { name: 'coding', valueCoding: { system: ANIMALS, version: '2.0.0', code: 'platypus' } },
      { name: 'date', valueDateTime: '2021-01-01' },
    ]);
    expect(outcome(coding).result).toBe(true);
  });

  test('imported ValueSets see the CodeSystem as of the date too', async () => {
    expect(await valid('land-mammals', 'wolf')).toBe(false);
    expect(await valid('land-mammals', 'wolf', { date: '2022' })).toBe(true);
    expect(await valid('land-mammals', 'platypus', { date: '2022' })).toBe(false);
  });

  test('a ValueSet pinned to a CodeSystem version keeps it whatever the date', async () => {
    expect(await valid('animals-v2', 'platypus', { date: '2021' })).toBe(true);
    expect(await valid('animals-v1', 'wolf', { date: '2030' })).toBe(true);
  });
});

describe('date: the ValueSet version', () => {
  test('the ValueSet version in effect at the date; valueSetVersion wins', async () => {
    expect(await valid('versioned', 'cat')).toBe(true);
    expect(await valid('versioned', 'dog')).toBe(false);
    expect(await valid('versioned', 'dog', { date: '2021-03-04' })).toBe(true);
    expect(await valid('versioned', 'cat', { date: '2021-03-04' })).toBe(false);
    expect(await valid('versioned', 'cat', { date: '2021-03-04', valueSetVersion: '2' })).toBe(true);
    expect(await valid('versioned', 'dog', { date: '2023-07-01' })).toBe(false);
  });

  test('no ValueSet version at that date is the 400 of a ValueSet that cannot be found', async () => {
    const issue = errorIssue(await inValueSet('versioned', 'dog', { date: '2020-01-31' }), 400);
    expect(issue).toEqual({ severity: 'error', code: 'invalid', text: `A definition for the value Set '${VS}versioned' could not be found as of 2020-01-31` });
  });

  test('instance level: the stored ValueSet, with its CodeSystems as of the date', async () => {
    const instance = (date?: string) =>
      getOperation(t, token, 'ValueSet/all-animals/$validate-code', { system: ANIMALS, code: 'wolf', ...(date === undefined ? {} : { date }) });
    expect(outcome(await instance()).result).toBe(false);
    expect(outcome(await instance('2022-12-31')).result).toBe(true);
  });
});

describe('date: $expand, CodeSystem/$validate-code and $lookup', () => {
  test('$expand lists the codes of the versions in effect and echoes the date', async () => {
    const r = await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}all-animals`, date: '2021-01-01' });
    expect(r.status).toBe(200);
    const expansion = r.body.expansion as { contains: { code: string; version: string }[]; parameter: Param[] };
    const codes = expansion.contains.map((c) => c.code);
    expect(codes).toContain('wolf');
    expect(codes).not.toContain('platypus');
    expect(new Set(codeVersions(expansion).map((c) => c.split('@')[1]))).toEqual(new Set(['1.0.0']));
    expect(expansion.parameter).toContainEqual({ name: 'date', valueDateTime: '2021-01-01' });
    expect(errorIssue(await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}versioned`, date: '2019' }), 400).text).toContain('as of 2019');
  });

  test('CodeSystem/$validate-code and $lookup choose the CodeSystem version by date', async () => {
    expect(outcome(await getOperation(t, token, 'CodeSystem/$validate-code', { url: ANIMALS, code: 'wolf', date: '2021' })).result).toBe(true);
    expect(outcome(await getOperation(t, token, 'CodeSystem/$validate-code', { url: ANIMALS, code: 'wolf' })).result).toBe(false);
    const unknown = await getOperation(t, token, 'CodeSystem/$validate-code', { url: ANIMALS, code: 'wolf', date: '2019' });
    expect(outcome(unknown)).toEqual({ result: false, message: `A definition for CodeSystem '${ANIMALS}' as of 2019 could not be found, so the code cannot be validated` });
    const lookup = await getOperation(t, token, 'CodeSystem/$lookup', { system: ANIMALS, code: 'wolf', date: '2022-02-02' });
    expect(lookup.status).toBe(200);
    expect(lookup.body.parameter?.find((p) => p.name === 'version')?.valueString).toBe('1.0.0');
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/$lookup', { system: ANIMALS, code: 'dog', date: '2019' }), 404).text).toBe(
      `CodeSystem '${ANIMALS}' as of 2019 is not known`,
    );
  });

  test("the result no longer says that 'date' is ignored", async () => {
    expect(outcome(await inValueSet('mammals', 'dog', { date: '2024-01-01' }))).toEqual({ result: true, display: 'Dog' });
  });
});

describe('date: malformed values are a 400', () => {
  test.each([
    ['yesterday'],
    ['2021-13'],
    ['2021-02-29'],
    ['2021-04-31'],
    ['2021-01-01T10:00:00'],
    ['2021-01-01T24:00:00Z'],
    ['2021-01-01T10:00Z'],
    ['2021-01-01T10:00:00+15:00'],
    ['0000'],
  ])('%p', async (date) => {
    const issue = errorIssue(await inValueSet('mammals', 'dog', { date }), 400);
    expect(issue.code).toBe('invalid');
    expect(issue.text).toContain(`'${date}' is not a FHIR dateTime`);
  });

  test("an unencoded '+' in the URL gets a hint; the POST form is checked too; a leap day is fine", async () => {
    const res = await t.request(`${t.fhir()}/ValueSet/$validate-code?url=${VS}mammals&system=${ANIMALS}&code=dog&date=2021-01-01T10:00:00+01:00`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toContain("a '+' in a URL query must be written %2B");
    const post = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}mammals` }, { name: 'date', valueDateTime: '2021-02-30' }]);
    expect(errorIssue(post, 400).text).toContain("'2021-02-30' is not a FHIR dateTime");
    expect(await valid('mammals', 'dog', { date: '2020-02-29T23:59:60Z' })).toBe(true);
  });
});

describe('date: meta.lastUpdated dates a version without a date', () => {
  test('versions stored a day apart are told apart by the time they were stored', async () => {
    const clock = testClock(Date.parse('2026-01-15T10:00:00Z'));
    const app = await createTestApp({ clock });
    try {
      const url = 'http://cinder.test/CodeSystem/undated';
      const cs = (id: string, version: string, code: string) => ({ resourceType: 'CodeSystem', id, url, version, status: 'active', content: 'complete', concept: [{ code }] });
      await putResource(app, await app.token(), cs('undated-1', '1', 'old'));
      clock.advance(24 * 3600_000);
      const fresh = await app.token();
      await putResource(app, fresh, cs('undated-2', '2', 'new'));
      const check = async (code: string, date?: string) =>
        outcome(await getOperation(app, fresh, 'CodeSystem/$validate-code', { url, code, ...(date === undefined ? {} : { date }) })).result;
      expect(await check('new')).toBe(true);
      expect(await check('old', '2026-01-15T12:00:00Z')).toBe(true);
      expect(await check('new', '2026-01-15T12:00:00Z')).toBe(false);
      expect(await check('new', '2026-01-16')).toBe(true);
      expect(await check('old', '2026-01-16T09:59:59Z')).toBe(true);
      const vs = { resourceType: 'ValueSet', id: 'undated', url: 'http://cinder.test/ValueSet/undated', status: 'active', compose: { include: [{ system: url }] } };
      await putResource(app, fresh, vs);
      const inVs = (date: string) => getOperation(app, fresh, 'ValueSet/$validate-code', { url: vs.url, system: url, code: 'new', date });
      expect(outcome(await inVs('2026-01-16T10:00:00Z')).result).toBe(true);
      expect(errorIssue(await inVs('2026-01-16T09:59:59Z'), 400).text).toBe(`A definition for the value Set '${vs.url}' could not be found as of 2026-01-16T09:59:59Z`);
    } finally {
      await app.close();
    }
  });
});
