/**
 * `compose.include.valueSet` imports that are themselves imported: a contained ValueSet importing
 * another of its container's (`#id` within `#id`), cycles among them, and value sets that import one
 * another along many paths, whose membership must cost their number, not the number of paths
 * (2^levels). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { errorIssue, outcome, postOperation, putResource } from '../helpers/terminology-http.ts';
import { CompiledValueSet } from '../../src/terminology/compile/compiled-value-set.ts';

const CS = 'http://cinder.test/CodeSystem/imports-review';
const LEVEL = 'http://cinder.test/ValueSet/imports-level-';
/** Levels of value sets, each with two includes importing the next: 2^26 paths to the last. */
const LEVELS = 26;

/** Contained ValueSets `l0`..`l{levels}`, each but the last importing the next twice (two includes), the last listing `a`. */
function containedLevels(levels: number): Record<string, unknown>[] {
  return Array.from({ length: levels + 1 }, (_, i) => ({
    resourceType: 'ValueSet', id: `l${i}`, status: 'active',
    compose: i === levels ? { include: [{ system: CS, concept: [{ code: 'a' }] }] } : { include: [{ valueSet: [`#l${i + 1}`] }, { valueSet: [`#l${i + 1}`] }] },
  }));
}
const inline = (contained: Record<string, unknown>[], first: string) => ({
  resourceType: 'ValueSet', status: 'active', contained, compose: { include: [{ valueSet: [first] }] },
});
/**
 * `request()`'s answer and its work: the membership checks of compiled ValueSets it made (`checks`) and
 * how many ValueSets they were (`valueSets`), counted on CompiledValueSet's prototype while it runs.
 */
async function checked<T>(request: () => Promise<T>): Promise<{ res: T; checks: number; valueSets: number }> {
  const checkLoaded = CompiledValueSet.prototype.checkLoaded;
  const seen = new Set<CompiledValueSet>();
  let checks = 0;
  CompiledValueSet.prototype.checkLoaded = function (this: CompiledValueSet, ...args: Parameters<typeof checkLoaded>) {
    checks++;
    seen.add(this);
    return checkLoaded.apply(this, args);
  };
  try {
    const res = await request();
    return { res, checks, valueSets: seen.size };
  } finally {
    CompiledValueSet.prototype.checkLoaded = checkLoaded;
  }
}
const codes = (body: Record<string, unknown>): string[] => ((body.expansion as { contains?: { code: string }[] }).contains ?? []).map((c) => c.code);

await eachStore((kind, fresh) => {
  describe(`imports of imports (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      await putResource(t, token, {
        resourceType: 'CodeSystem', id: 'imports-review', url: CS, status: 'active', content: 'complete', concept: [{ code: 'a', display: 'A' }, { code: 'b', display: 'B' }],
      });
      for (let i = LEVELS; i >= 0; i--) {
        const compose = i === LEVELS ? { include: [{ system: CS, concept: [{ code: 'a' }] }] } : { include: [{ valueSet: [`${LEVEL}${i + 1}`] }, { valueSet: [`${LEVEL}${i + 1}`] }] };
        await putResource(t, token, { resourceType: 'ValueSet', id: `imports-level-${i}`, url: `${LEVEL}${i}`, status: 'active', compose });
      }
    });
    afterAll(() => t.close());

    test('an exclude naming a ValueSet the server does not have: $expand and :in refuse, $validate-code cannot say', async () => {
      const missing = 'http://cinder.test/ValueSet/imports-not-here';
      await putResource(t, token, {
        resourceType: 'ValueSet', id: 'imports-exclude-missing', url: `${LEVEL}exclude-missing`, status: 'active',
        compose: { include: [{ system: CS }], exclude: [{ valueSet: [missing] }] },
      });
      const expanded = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${LEVEL}exclude-missing` }]);
      expect(errorIssue(expanded, 400).text).toBe(
        `ValueSet '${LEVEL}exclude-missing' compose.exclude[0]: the imported ValueSet '${missing}' could not be found, so the expansion would hold codes it excludes`,
      );
      const search = await t.request(`${t.fhir()}/Observation?code:in=${encodeURIComponent(`${LEVEL}exclude-missing`)}`, { headers: { Authorization: `Bearer ${token}` } });
      expect(search.status).toBe(400);
      const r = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${LEVEL}exclude-missing` }, { name: 'system', valueUri: CS }, { name: 'code', valueCode: 'a' }]);
      expect(outcome(r)).toMatchObject({
        result: false, message: `The ValueSet '${missing}' named by ValueSet '${LEVEL}exclude-missing' compose.exclude[0] could not be found, so whether it excludes the code 'a' is unknown`,
      });
    });

    test('a contained ValueSet imports another contained ValueSet of the same container', async () => {
      const vs = inline([
        { resourceType: 'ValueSet', id: 'x', status: 'active', compose: { include: [{ valueSet: ['#y'] }] } },
        { resourceType: 'ValueSet', id: 'y', status: 'active', compose: { include: [{ system: CS, concept: [{ code: 'b' }] }] } },
      ], '#x');
      const expanded = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'valueSet', resource: vs }]);
      expect(expanded.status).toBe(200);
      expect(codes(expanded.body)).toEqual(['b']);
      const valid = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'valueSet', resource: vs }, { name: 'system', valueUri: CS }, { name: 'code', valueCode: 'b' }]);
      expect(outcome(valid)).toEqual({ result: true, display: 'B' });
      expect(outcome(await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'valueSet', resource: vs }, { name: 'system', valueUri: CS }, { name: 'code', valueCode: 'a' }])).result).toBe(false);
    });

    test('a cycle among contained ValueSets is a 400 naming it', async () => {
      const vs = inline([
        { resourceType: 'ValueSet', id: 'x', status: 'active', compose: { include: [{ valueSet: ['#y'] }] } },
        { resourceType: 'ValueSet', id: 'y', status: 'active', compose: { include: [{ valueSet: ['#x'] }] } },
      ], '#x');
      const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'valueSet', resource: vs }]);
      expect(errorIssue(r, 400).text).toBe('circular ValueSet import: #x -> #y -> #x');
    });

    test('contained ValueSets importing one another along 2^26 paths: each compiled and tested once', async () => {
      const vs = inline(containedLevels(LEVELS), '#l0');
      for (const [code, result] of [['a', true], ['b', false]] as const) {
        const work = await checked(() => postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'valueSet', resource: vs }, { name: 'system', valueUri: CS }, { name: 'code', valueCode: code }]));
        expect(outcome(work.res).result).toBe(result);
        // The container and its LEVELS + 1 contained ValueSets, each compiled once and tested once, or twice when the
        // first test waits on loading the CodeSystem (2^LEVELS compilations and tests before).
        expect(work.valueSets).toBe(LEVELS + 2);
        expect(work.checks).toBeLessThanOrEqual(2 * (LEVELS + 2));
      }
      // $expand tests no membership (its work is not counted here); it compiles the same way.
      const expanded = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'valueSet', resource: vs }]);
      expect(codes(expanded.body)).toEqual(['a']);
    });

    test('stored ValueSets importing one another along 2^26 paths: a code outside them is answered at once', async () => {
      for (const [code, result] of [['a', true], ['b', false]] as const) {
        const work = await checked(() => postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${LEVEL}0` }, { name: 'system', valueUri: CS }, { name: 'code', valueCode: code }]));
        expect(outcome(work.res).result).toBe(result);
        // Each of the LEVELS + 1 stored ValueSets tested once (2^LEVELS times before).
        expect(work).toMatchObject({ valueSets: LEVELS + 1, checks: LEVELS + 1 });
      }
    });
  });
});
