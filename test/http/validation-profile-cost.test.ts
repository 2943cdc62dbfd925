/**
 * A tenant's profile is a program Cinder runs on every write claiming it: its invariants are the
 * tenant's FHIRPath, held to the regex guard (src/regex-guard.ts) and to a budget of values visited
 * (run.ts PROFILE_VISITS), on writes, in transactions and in `$validate`, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { engineRuns } from '../helpers/regex-runs.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE_URL = 'http://example.org/fhir/StructureDefinition/costly-';

/** A tenant's profile on Patient whose root carries one invariant, `expression`. */
function profile(name: string, expression: string): Json {
  const el = { id: 'Patient', path: 'Patient', short: 'Patient', definition: 'Patient', min: 0, max: '*', base: { path: 'Patient', min: 0, max: '*' }, constraint: [{ key: `${name}-1`, severity: 'error', human: name, expression }] };
  return {
    resourceType: 'StructureDefinition', url: BASE_URL + name, name, status: 'active', kind: 'resource', abstract: false,
    type: 'Patient', baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Patient', derivation: 'constraint', fhirVersion: '4.0.1',
    snapshot: { element: [el] },
  };
}

/** A Patient claiming the profile `name`, with `names` names each of family `family` and 20 given names. */
function patient(name: string, names: number, family: string): Json {
  return { resourceType: 'Patient', meta: { profile: [BASE_URL + name] }, name: Array.from({ length: names }, () => ({ family, given: Array.from({ length: 20 }, (_, i) => `g${i}`) })) };
}

/** A tenant's profile slicing Patient.identifier by system among `n` slices (`urn:s<i>`), closed. */
function slicedProfile(name: string, n: number): Json {
  const el = (id: string, extra: Json = {}) => {
    const path = id.replace(/:[^.]*/g, '');
    return { id, path, short: id, definition: id, min: 0, max: '*', base: { path, min: 0, max: '*' }, ...extra };
  };
  const elements = [el('Patient'), el('Patient.identifier', { slicing: { discriminator: [{ type: 'value', path: 'system' }], rules: 'closed' } })];
  for (let i = 0; i < n; i++) elements.push(el(`Patient.identifier:s${i}`, { sliceName: `s${i}` }), el(`Patient.identifier:s${i}.system`, { fixedUri: `urn:s${i}` }));
  return { ...profile(name, 'true'), snapshot: { element: elements } };
}

const identified = (name: string, n: number) => ({ resourceType: 'Patient', meta: { profile: [BASE_URL + name] }, identifier: Array.from({ length: n }, (_, i) => ({ system: `urn:none${i}`, value: 'v' })) });

const codes = (outcome: Json) => (outcome.issue as Json[]).map((i) => i.code);

await eachStore((kind, fresh) => {
  describe(`profile invariants' cost (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      expect((await api.put('StructureDefinition/nested', { ...profile('nested', "name.select(family.matches('^(a+)+$')).all($this)"), id: 'nested' })).status).toBeLessThan(300);
      expect((await api.put('StructureDefinition/square', { ...profile('square', "name.given.select(%resource.name.given).count() > 0"), id: 'square' })).status).toBeLessThan(300);
      expect((await api.put('StructureDefinition/replace', { ...profile('replace', "name.select(family.replaceMatches('(a|aa)+$', 'b')).all($this = 'b')"), id: 'replace' })).status).toBeLessThan(300);
    });
    afterAll(() => t.close());

    test("matches() with a pattern that backtracks without end is answered by the regex guard's automaton, rightly and at once", async () => {
      // Before: JavaScriptCore backtracked ~0.5 s a name (20 names: ~10 s holding the event loop), and gave up answering "no match".
      const { value: bad, runs } = await engineRuns('(a+)+', () => api.post('Patient', patient('nested', 20, `${'a'.repeat(32)}!`)));
      expect(codes(await expectOutcome(bad, 422))).toEqual(['invariant']);
      // The automaton answers every name: the backtracking engine runs on none of them.
      expect(runs).toBe(0);
      expect((await api.post('Patient', patient('nested', 20, 'a'.repeat(32)))).status).toBe(201);
    });

    test('an invariant visiting more values than the budget refuses the write 422 too-costly, and $validate says so', async () => {
      // 20 names of 20 given names: the square visits 400 x 400 values; 60 names, 1,200 x 1,200, past the budget.
      expect((await api.post('Patient', patient('square', 20, 'x'))).status).toBe(201);
      const outcome = await expectOutcome(await api.post('Patient', patient('square', 60, 'x')), 422);
      expect(codes(outcome)).toEqual(['too-costly']);
      expect(outcome.issue[0].expression).toEqual(['Patient']);
      expect(outcome.issue[0].details.text).toContain('square-1');
      const validated = (await (await api.post('Patient/$validate', patient('square', 60, 'x'))).json()) as Json;
      expect(codes(validated)).toEqual(['too-costly']);
    });

    test('a transaction shares one budget among its entries', async () => {
      // Each entry alone is within the budget; together they are not.
      const entry = { resource: patient('square', 30, 'x'), request: { method: 'POST', url: 'Patient' } };
      expect((await api.post('Patient', entry.resource)).status).toBe(201);
      const res = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: Array.from({ length: 8 }, () => entry) });
      expect(codes(await expectOutcome(res, 422))).toEqual(['too-costly']);
    });

    test('an invariant too long or nested too deep to parse is not evaluated (a warning in $validate), not a 500 on every write claiming it', async () => {
      const cases = { long: '('.repeat(10_000) + 'true' + ')'.repeat(10_000), deep: '('.repeat(100) + 'true' + ')'.repeat(100), chain: Array.from({ length: 20_000 }, () => 'true').join(' and ') };
      for (const [name, expression] of Object.entries(cases)) {
        expect((await api.put(`StructureDefinition/${name}`, { ...profile(name, expression), id: name })).status).toBeLessThan(300);
        expect((await api.post('Patient', patient(name, 1, 'x'))).status).toBe(201);
        const validated = (await (await api.post('Patient/$validate', patient(name, 1, 'x'))).json()) as Json;
        expect(codes(validated)).toEqual(['not-supported']);
        expect(validated.issue[0].details.text).toMatch(name === 'deep' ? /nested more than 64 deep/ : /more than 4096 tokens/);
      }
    });

    test('a FHIRPath Patch path nested too deep is a 400 naming the path, not a 500', async () => {
      const p = await api.create({ resourceType: 'Patient', gender: 'male' });
      const path = `Patient.name.where(${'('.repeat(10_000)}true${')'.repeat(10_000)})`;
      const res = await api.call('PATCH', `Patient/${p.id}`, {
        resourceType: 'Parameters',
        parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'delete' }, { name: 'path', valueString: path }] }],
      }, { 'Content-Type': 'application/fhir+json' });
      expect(JSON.stringify(await expectOutcome(res, 400))).toContain('more than 4096 tokens');
    });

    test('slicing as many values among as many slices as the budget allows is a 422 too-costly, and a closed slicing names at most 20 slices', async () => {
      // Before: 3,000 identifiers against 30,000 closed slices took 29-44 s and 6-8 GB a write (each
      // unmatched value's error listed every slice's name), then a 500.
      expect((await api.put('StructureDefinition/wide', { ...slicedProfile('wide', 2_000), id: 'wide' })).status).toBeLessThan(300);
      const res = await api.post('Patient', identified('wide', 1_000));
      const text = await res.text();
      expect(res.status).toBe(422);
      const outcome = JSON.parse(text) as Json;
      // The work counted: 1,000 values x 2,000 slices are 2,000,000 tests, past the write's budget of 1,000,000
      // values, so that none is made (each unmatched value's error was checked against every slice before).
      expect(codes(outcome)).toEqual(['too-costly']);
      expect(outcome.issue[0].details.text).toContain('1000 values sliced among 2000 slices is too costly to check (2000000 tests');
      expect(outcome.issue[0].expression).toEqual(['Patient.identifier']);
      expect(text.length).toBeLessThan(2_000);
      // Within the budget: each unmatched value is an error naming the first 20 slices.
      expect((await api.put('StructureDefinition/narrow', { ...slicedProfile('narrow', 30), id: 'narrow' })).status).toBeLessThan(300);
      const narrow = await expectOutcome(await api.post('Patient', identified('narrow', 5)), 422);
      expect(codes(narrow)).toEqual(Array(5).fill('structure'));
      expect(narrow.issue[0].details.text).toContain('s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16, s17, s18, s19 and 10 more) and the slicing is closed');
    }, 60_000);

    test('a profile whose snapshot holds more than 10,000 elements is not compiled: a write claiming it is a 422 naming it', async () => {
      expect((await api.put('StructureDefinition/huge', { ...slicedProfile('huge', 5_000), id: 'huge' })).status).toBeLessThan(300);
      const outcome = await expectOutcome(await api.post('Patient', identified('huge', 1)), 422);
      expect(outcome.issue[0].code).toBe('not-supported');
      expect(outcome.issue[0].diagnostics).toContain(`The profile ${BASE_URL}huge has 10002 elements in its snapshot, more than the 10000 Cinder compiles`);
      // One of 10,000 elements, the most, is compiled and used.
      expect((await api.put('StructureDefinition/fits', { ...slicedProfile('fits', 4_999), id: 'fits' })).status).toBeLessThan(300);
      expect((await api.post('Patient', { ...identified('fits', 1), identifier: [{ system: 'urn:s7', value: 'v' }] })).status).toBe(201);
      expect((await api.post('Patient', identified('fits', 1))).status).toBe(422);
    });

    test('replaceMatches() with a pattern that backtracks is refused too-costly once the guard has seen it slow', async () => {
      // Before: every name ran ~0.1 s of backtracking (60 names, ~8 s), and the answer rested on runs the engine gave up.
      const { value: res, runs } = await engineRuns('(a|aa)+', () => api.post('Patient', patient('replace', 60, `${'a'.repeat(32)}!`)));
      const outcome = await expectOutcome(res, 422);
      expect(codes(outcome)).toEqual(['too-costly']);
      // Slow runs adding up to 100 ms (a few at most; none once a store before this one proved it), not one per name (60 of them).
      expect(runs).toBeLessThan(5);
    });
  });
});
