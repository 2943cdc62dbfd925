import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { join } from 'node:path';
import { BENCH_SYSTEM, BENCH_VALUE_SET, generatedCodeSystem, generatedIsAValueSet } from '../../bench/lib/terminology.ts';
import { createApp } from '../../src/app.ts';
import { createKeyRing } from '../../src/auth/keys.ts';
import { silentLogger } from '../../src/log.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { DEFAULT_CHECK_INTERVAL_MS } from '../../src/terminology/create.ts';
import { createTestApp, fhirInit, type TestApp, testClock } from '../helpers/app.ts';
import { ANIMALS, errorIssue, getOperation, outcome, type OperationResponse, postOperation, putResource, putTerminologyFixtures, VS } from '../helpers/terminology-http.ts';

const clock = testClock();
let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await createTestApp({ clock });
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

const isMammal = async (code: string, app = t) =>
  outcome(await getOperation(app, token, 'ValueSet/$validate-code', { url: `${VS}mammals`, system: ANIMALS, code })).result;

async function animals(): Promise<{ resourceType: string; id: string; concept: unknown[] }> {
  const res = await t.request(`${t.fhir()}/CodeSystem/animals-2`, fhirInit(token));
  return (await res.json()) as { resourceType: string; id: string; concept: unknown[] };
}

describe('cached compiled ValueSets are invalidated by changes', () => {
  test('a CodeSystem, ValueSet or imported ValueSet written through the API is seen by the next call', async () => {
    expect(await isMammal('tiger')).toBe(false);
    const cs = await animals();
    await putResource(t, token, { ...cs, concept: [...cs.concept, { code: 'tiger', display: 'Tiger', property: [{ code: 'parent', valueCode: 'mammal' }] }] });
    expect(await isMammal('tiger')).toBe(true);

    const landMammal = () => getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}land-mammals`, system: ANIMALS, code: 'whale' });
    expect(outcome(await landMammal()).result).toBe(false);
    const seaAsLand = { resourceType: 'ValueSet', id: 'land-animals', url: `${VS}land-animals`, status: 'active', compose: { include: [{ system: ANIMALS, filter: [{ property: 'habitat', op: '=', value: 'sea' }] }] } };
    await putResource(t, token, seaAsLand);
    expect(outcome(await landMammal()).result).toBe(true);

    const del = await t.request(`${t.fhir()}/ValueSet/mammals`, fhirInit(token, 'DELETE'));
    expect(del.status).toBe(200);
    const gone = await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}mammals`, system: ANIMALS, code: 'dog' });
    expect(errorIssue(gone, 400).text).toBe(`A definition for the value Set '${VS}mammals' could not be found`);
    await putTerminologyFixtures(t, token);
    expect(await isMammal('dog')).toBe(true);
  });

  test("another process's change is seen once the change-token interval has passed", async () => {
    const store2 = createSqliteStore(join(t.dir, 'cinder.db'));
    const keys2 = createKeyRing(store2, clock, t.config.accessTokenTtl);
    await keys2.init();
    const other = createApp({ config: t.config, store: store2, keys: keys2, clock, log: silentLogger });
    const otherApp = { ...t, request: (path: string, init: RequestInit = {}) => other.request(path, init) };
    try {
      expect(await isMammal('lion', otherApp)).toBe(false);
      const cs = await animals();
      await putResource(t, token, { ...cs, concept: [...cs.concept, { code: 'lion', display: 'Lion', property: [{ code: 'parent', valueCode: 'mammal' }] }] });
      expect(await isMammal('lion')).toBe(true); // the writing process: at once
      expect(await isMammal('lion', otherApp)).toBe(false); // the other: within the interval
      clock.advance(DEFAULT_CHECK_INTERVAL_MS);
      expect(await isMammal('lion', otherApp)).toBe(true);
    } finally {
      await store2.close();
    }
  });
});

describe('answers kept per coding', () => {
  const dog = async (query: Record<string, string> = {}) =>
    outcome(await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}mammals`, system: ANIMALS, code: 'dog', ...query }));
  /** The expressions of the issues of an answer. */
  const expressions = (r: OperationResponse) =>
    ((r.body.parameter?.find((p) => p.name === 'issues') as { resource?: { issue: { expression?: string[] }[] } } | undefined)?.resource?.issue ?? []).flatMap((i) => i.expression ?? []);

  test('every input that changes the answer gets its own, asked in turn and again', async () => {
    for (let round = 0; round < 2; round++) {
      expect(await dog()).toMatchObject({ result: true, display: 'Dog' });
      expect(await dog({ display: 'Hund' })).toMatchObject({ result: true });
      expect(await dog({ display: 'Cat' })).toMatchObject({ result: false });
      expect(await dog({ displayLanguage: 'de' })).toMatchObject({ result: true, display: 'Hund' });
      expect(await dog({ display: 'Hund', displayLanguage: 'en' })).toMatchObject({ result: false });
      expect(await dog({ systemVersion: '9.9.9' })).toMatchObject({ result: false });
      expect(await dog({ systemVersion: '2.0.0' })).toMatchObject({ result: true, display: 'Dog' });
      const animal = (abstract?: string) => getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}all-animals`, system: ANIMALS, code: 'animal', ...(abstract === undefined ? {} : { abstract }) });
      expect(outcome(await animal('false')).result).toBe(false);
      expect(outcome(await animal('true')).result).toBe(true);
      // The same wrong display given as `code` and as `coding`: each answer names its own input.
      const asCode = await getOperation(t, token, 'ValueSet/$validate-code', { url: `${VS}mammals`, system: ANIMALS, code: 'dog', display: 'Cat' });
      const asCoding = await postOperation(t, token, 'ValueSet/$validate-code', [
        { name: 'url', valueUri: `${VS}mammals` }, { name: 'coding', valueCoding: { system: ANIMALS, code: 'dog', display: 'Cat' } },
      ]);
      expect(expressions(asCode)).toEqual(['display']);
      expect(expressions(asCoding)).toEqual(['Coding.display']);
    }
  });

  test("a change to the code system is seen in the next answer about a coding already asked about", async () => {
    expect(await dog()).toMatchObject({ result: true, display: 'Dog' });
    const cs = await animals();
    const renamed = JSON.parse(JSON.stringify(cs).replace('"display":"Dog"', '"display":"Domestic dog (Canis familiaris)"'));
    await putResource(t, token, renamed);
    expect(await dog()).toMatchObject({ result: true, display: 'Domestic dog (Canis familiaris)' });
    await putResource(t, token, cs);
    expect(await dog()).toMatchObject({ result: true, display: 'Dog' });
  });
});

describe('a large CodeSystem', () => {
  test('100,000 concepts load through PUT and validate against an is-a ValueSet', async () => {
    // Loaded at all within the test's timeout (about 0.1 s on an idle machine): a load costing more than linear time
    // in its concepts would take minutes for 100,000.
    await putResource(t, token, generatedCodeSystem(100_000));
    await putResource(t, token, generatedIsAValueSet('C1'));
    const check = async (code: string) =>
      outcome(await getOperation(t, token, 'ValueSet/$validate-code', { url: BENCH_VALUE_SET, system: BENCH_SYSTEM, code }));
    expect(await check('C12345')).toEqual({ result: true, display: 'Generated concept 12345' }); // C12345 -> C1234 -> C123 -> C12 -> C1
    expect((await check('C99999')).result).toBe(false); // under C9
    expect((await check('C100000')).message).toContain("Unknown code 'C100000'");
    const lookup = await getOperation(t, token, 'CodeSystem/$lookup', { system: BENCH_SYSTEM, code: 'C1', property: 'child' });
    expect(lookup.body.parameter?.filter((p) => p.name === 'property').length).toBe(10);
  });
});
