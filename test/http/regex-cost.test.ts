/**
 * Regular expressions a client writes, held to src/regex-guard.ts on both databases: a ValueSet's
 * `regex` filter and FHIRPath `matches()` in a FHIRPath Patch whose pattern backtracks without end
 * (`(a+)+$` on `aaa…a!`) are answered by its linear-time automaton (src/linear-regex.ts), rightly; one
 * without such a form (a lookahead) is a 400 `too-costly` after one slow run, not a run per concept or
 * element (each about 0.4 s, answered "no match" when the engine gives up), and `$validate-code` against
 * it answers result false, saying the pattern could not be run; benign patterns answer as before.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { engineRuns as countedRuns } from '../helpers/regex-runs.ts';

/** Strings that `(a+)+$`-style patterns take exponential time to reject. */
const evil = (i: number) => `${'a'.repeat(30)}!${i}`;

/** Runs of the backtracking engine on the patterns here, all of which nest `(a+)+`. */
const engineRuns = <T>(fn: () => T | Promise<T>) => countedRuns('(a+)+', fn);

await eachStore((kind, fresh) => {
  describe(`client-written regular expressions on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({
        resourceType: 'CodeSystem', id: 're', url: 'http://example.org/re', status: 'active', content: 'complete',
        concept: [...Array.from({ length: 20 }, (_, i) => ({ code: evil(i) })), { code: 'abc-1' }, { code: 'abc-2' }, { code: 'xyz' }],
      });
      await api.put200({ resourceType: 'Patient', id: 're', name: Array.from({ length: 20 }, (_, i) => ({ family: evil(i) })) });
      await api.put200({ resourceType: 'Patient', id: 'mid', name: Array.from({ length: 20 }, (_, i) => ({ family: `${'a'.repeat(24)}!${i}` })) });
    });
    afterAll(() => t.close());

    const expand = (pattern: string) => api.post('ValueSet/$expand', {
      resourceType: 'Parameters',
      parameter: [{ name: 'valueSet', resource: { resourceType: 'ValueSet', url: `http://example.org/vs-${kind}`, status: 'active', compose: { include: [{ system: 'http://example.org/re', filter: [{ property: 'code', op: 'regex', value: pattern }] }] } } }],
    });

    test('a ValueSet regex filter that backtracks without end is answered in linear time, rightly; a benign one expands', async () => {
      const ok = (await (await expand('abc-[0-9]')).json()) as Json;
      expect(ok.expansion.contains.map((c: Json) => c.code).sort()).toEqual(['abc-1', 'abc-2']);
      // Nested quantifiers: a backtracking engine takes exponential time on each of the 20 `aaa…a!i` codes.
      const { value: nested, runs } = await engineRuns(async () => (await (await expand(`(a+)+!1[0-9]`)).json()) as Json);
      expect(nested.expansion.contains.map((c: Json) => c.code).sort()).toEqual(Array.from({ length: 10 }, (_, i) => evil(10 + i)).sort());
      const nothing = await engineRuns(async () => (await (await expand(`(a+)+${kind === 'sqlite' ? '' : '$'}`)).json()) as Json);
      expect(nothing.value.expansion.total).toBe(0);
      // The automaton answers every code: the backtracking engine (about 0.4 s a code) runs on none of them.
      expect([runs, nothing.runs]).toEqual([0, 0]);
    });

    test('a regex filter that backtracks without end and has no linear form (a lookahead) is a 400 too-costly naming the filter, at once', async () => {
      const { value: res, runs } = await engineRuns(() => expand(`(a+)+(?=b)${kind}`));
      const outcome = await expectOutcome(res, 400, 'too-costly');
      expect(outcome.issue[0].expression[0]).toMatch(/filter\[0\]$/);
      expect(outcome.issue[0].details.text).toContain('too costly');
      // Slow runs adding up to 100 ms (one, at 40-250 ms a run), not one per concept (20 of them, about 0.4 s each).
      expect(runs).toBeGreaterThan(0);
      expect(runs).toBeLessThan(5);
    });

    test('$validate-code against a regex filter that backtracks without end answers result false, the membership unknown, at once; a benign one answers true', async () => {
      const validate = (pattern: string, code: string) => api.post('ValueSet/$validate-code', {
        resourceType: 'Parameters',
        parameter: [
          { name: 'valueSet', resource: { resourceType: 'ValueSet', url: `http://example.org/vc-${kind}`, status: 'active', compose: { include: [{ system: 'http://example.org/re', filter: [{ property: 'code', op: 'regex', value: pattern }] }] } } },
          { name: 'system', valueUri: 'http://example.org/re' },
          { name: 'code', valueCode: code },
        ],
      });
      const benign = (await (await validate('abc-[0-9]', 'abc-2')).json()) as Json;
      expect(benign.parameter.find((p: Json) => p.name === 'result').valueBoolean).toBe(true);
      const nested = (await (await validate('(a+)+!1', evil(1))).json()) as Json;
      expect(nested.parameter.find((p: Json) => p.name === 'result').valueBoolean).toBe(true);
      // The engine gives up on each run after 40-250 ms, depending on the pattern and the machine: the
      // pattern is refused once its slow runs add up to 100 ms, and from then on without running.
      const refused: boolean[] = [];
      let runs = 0;
      for (let i = 0; i < 20; i++) {
        const { value: res, runs: more } = await engineRuns(() => validate(`(a+)+(?=b)b${kind}`, evil(i)));
        runs += more;
        expect(res.status).toBe(200);
        const out = (await res.json()) as Json;
        const param = (name: string) => out.parameter.find((p: Json) => p.name === name);
        expect(param('result').valueBoolean).toBe(false);
        // The warning is in `issues` (`message` repeats only errors and comments on status and display, as tx.fhir.org's).
        const costly = ((param('issues')?.resource.issue ?? []) as Json[]).find((i) => i.code === 'too-costly');
        const could = costly !== undefined;
        if (could) {
          expect(costly).toMatchObject({ severity: 'warning', code: 'too-costly', expression: ['code'] });
          expect(costly!.details.text).toContain(`The regex '(a+)+(?=b)b${kind}'`);
          expect(costly!.details.text).toContain('could not be run');
        }
        refused.push(could);
      }
      const first = refused.indexOf(true);
      expect(first).toBeGreaterThanOrEqual(0);
      expect(first).toBeLessThan(5);
      expect(refused.slice(first).every(Boolean)).toBe(true);
      // One run a request up to the one that proves the pattern too costly, none after it.
      expect(runs).toBe(first + 1);
    });

    test('FHIRPath Patch matches() that backtracks without end is refused, nothing written; a benign one patches', async () => {
      const del = (pattern: string) => api.call('PATCH', 'Patient/re', {
        resourceType: 'Parameters',
        parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'delete' }, { name: 'path', valueString: `Patient.name.where(family.matches('${pattern}'))` }] }],
      }, { 'Content-Type': 'application/fhir+json' });
      const refusedRuns = await engineRuns(() => del(`^(a+)+(?=z)${kind}$`));
      await expectOutcome(refusedRuns.value, 400);
      // Slow runs adding up to 100 ms (one, at 40-250 ms a run), not one per name (20 of them, about 0.4 s each).
      expect(refusedRuns.runs).toBeGreaterThan(0);
      expect(refusedRuns.runs).toBeLessThan(5);
      expect(((await (await api.get('Patient/re')).json()) as Json).meta.versionId).toBe('1');
      const res = await del('!1[3]$');
      expect(res.status).toBe(200);
      expect(((await res.json()) as Json).name.map((n: Json) => n.family)).not.toContain(evil(13));
      // Nested quantifiers with a linear form are answered, rightly, in linear time.
      const { value: nested, runs: nestedRuns } = await engineRuns(() => del('^(a+)+!1[4]$'));
      expect(nestedRuns).toBe(0);
      expect(nested.status).toBe(200);
      const families = ((await nested.json()) as Json).name.map((n: Json) => n.family);
      expect(families).not.toContain(evil(14));
      expect(families).toContain(evil(15));
    });

    test('a pattern whose runs each stay under the bound (tens of ms on 24 characters) is refused once they add up, whatever the machine', async () => {
      const res = await api.call('PATCH', 'Patient/mid', {
        resourceType: 'Parameters',
        parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'delete' }, { name: 'path', valueString: `Patient.name.where(family.matches('^(a+)+(?=z)${kind === 'sqlite' ? 1 : 2}$'))` }] }],
      }, { 'Content-Type': 'application/fhir+json' });
      expect(JSON.stringify(await expectOutcome(res, 400))).toContain('too costly');
      expect(((await (await api.get('Patient/mid')).json()) as Json).meta.versionId).toBe('1');
    });
  });
});
