/**
 * CodeSystem/$subsumes (FHIR R4 CodeSystem-subsumes), GET and POST, type and instance level: how code A
 * relates to code B in the code system's is-a hierarchy (the fixture animals: animal > vertebrate >
 * mammal > dog), as ConceptSubsumptionOutcome names it, and its input errors.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { ANIMALS, errorIssue, getOperation, type Param, postOperation, putTerminologyFixtures } from '../helpers/terminology-http.ts';

let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await createTestApp();
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

const outcomeOf = (r: { status: number; body: { parameter?: { name: string; valueCode?: string }[] } }) => {
  expect(r.status).toBe(200);
  return r.body.parameter?.find((p) => p.name === 'outcome')?.valueCode;
};
const get = (query: Record<string, string>, path = 'CodeSystem/$subsumes') => getOperation(t, token, path, query);
const post = (parameter: Param[], path = 'CodeSystem/$subsumes') => postOperation(t, token, path, parameter);

describe('CodeSystem/$subsumes', () => {
  test('the four outcomes, from codes and a system', async () => {
    expect(outcomeOf(await get({ system: ANIMALS, codeA: 'dog', codeB: 'dog' }))).toBe('equivalent');
    expect(outcomeOf(await get({ system: ANIMALS, codeA: 'mammal', codeB: 'dog' }))).toBe('subsumes');
    expect(outcomeOf(await get({ system: ANIMALS, codeA: 'animal', codeB: 'dog' }))).toBe('subsumes');
    expect(outcomeOf(await get({ system: ANIMALS, codeA: 'dog', codeB: 'vertebrate' }))).toBe('subsumed-by');
    expect(outcomeOf(await get({ system: ANIMALS, codeA: 'dog', codeB: 'cat' }))).toBe('not-subsumed');
    // A hierarchy given by `parent` and `child` properties (insect: parent invertebrate, child ant).
    expect(outcomeOf(await get({ system: ANIMALS, codeA: 'invertebrate', codeB: 'ant' }))).toBe('subsumes');
    expect(outcomeOf(await get({ system: ANIMALS, codeA: 'ant', codeB: 'animal' }))).toBe('subsumed-by');
    expect(outcomeOf(await get({ system: ANIMALS, codeA: 'insect', codeB: 'spider' }))).toBe('not-subsumed');
  });

  test('a version picks the hierarchy: wolf is a mammal in 1.0.0 and unknown in 2.0.0', async () => {
    expect(outcomeOf(await get({ system: ANIMALS, version: '1.0.0', codeA: 'mammal', codeB: 'wolf' }))).toBe('subsumes');
    const r = await get({ system: ANIMALS, version: '2.0.0', codeA: 'mammal', codeB: 'wolf' });
    expect(errorIssue(r, 404).text).toContain("codeB: Unknown code 'wolf'");
  });

  test('codings, POST; a case-insensitive code system matches codes in any case', async () => {
    const coding = (code: string, system = ANIMALS) => ({ system, code });
    expect(outcomeOf(await post([{ name: 'codingA', valueCoding: coding('bird') }, { name: 'codingB', valueCoding: coding('penguin') }]))).toBe('subsumes');
    const ci = 'http://cinder.test/CodeSystem/animals-ci';
    expect(outcomeOf(await post([{ name: 'codingA', valueCoding: coding('whale', ci) }, { name: 'codingB', valueCoding: coding('WHALE', ci) }]))).toBe('equivalent');
    expect(outcomeOf(await post([{ name: 'codingA', valueCoding: coding('mammal', ci) }, { name: 'codingB', valueCoding: coding('Whale', ci) }]))).toBe('subsumes');
  });

  test('instance level: the stored CodeSystem, and a system named too must be it', async () => {
    expect(outcomeOf(await get({ codeA: 'wolf', codeB: 'animal' }, 'CodeSystem/animals-1/$subsumes'))).toBe('subsumed-by');
    expect(errorIssue(await get({ codeA: 'wolf', codeB: 'animal', system: 'http://other' }, 'CodeSystem/animals-1/$subsumes'), 400).text).toContain("'system' is 'http://other'");
    expect((await get({ codeA: 'a', codeB: 'b' }, 'CodeSystem/nope/$subsumes')).status).toBe(404);
  });

  test('input errors: a 400 naming the input; an unknown code system or code a 404', async () => {
    const noSystem = await get({ codeA: 'dog', codeB: 'cat' });
    expect(errorIssue(noSystem, 400).text).toContain("'system' (or the codings' system) is required");
    expect((noSystem.body.issue?.[0] as { expression?: string[] } | undefined)?.expression).toEqual(['system']);
    const noB = await get({ system: ANIMALS, codeA: 'dog' });
    expect(errorIssue(noB, 400).text).toContain("'codeB' or 'codingB' is required");
    expect((noB.body.issue?.[0] as { expression?: string[] } | undefined)?.expression).toEqual(['codeB', 'codingB']);
    const mixed = await post([
      { name: 'codingA', valueCoding: { system: ANIMALS, code: 'dog' } },
      { name: 'codingB', valueCoding: { system: 'http://cinder.test/CodeSystem/animals-ci', code: 'Dog' } },
    ]);
    expect(errorIssue(mixed, 400).text).toContain('subsumption is tested within one code system');
    expect(errorIssue(await get({ system: 'http://unknown.example', codeA: 'a', codeB: 'b' }), 404).text).toContain("'http://unknown.example' is not known");
    expect(errorIssue(await get({ system: ANIMALS, codeA: 'unicorn', codeB: 'dog' }), 404).text).toContain("codeA: Unknown code 'unicorn'");
  });

  test('listed in the CapabilityStatement under CodeSystem', async () => {
    const cap = (await (await t.request(`${t.fhir('t1')}/metadata`)).json()) as { rest: { resource: { type: string; operation?: { name: string; definition: string }[] }[] }[] };
    const cs = cap.rest[0]!.resource.find((r) => r.type === 'CodeSystem')!;
    expect(cs.operation).toContainEqual({ name: 'subsumes', definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-subsumes' });
  });
});
