/**
 * An expansion's work is bounded (src/terminology/compile/enumerate.ts, ENUMERATION_WORK_LIMIT): a
 * ValueSet whose includes repeat the same codes many times, or test each code against many excludes,
 * held the event loop for minutes (3,000 includes importing one 100,000-code ValueSet: over 344 s for
 * `count=10`). An include that can only repeat an earlier one's codes is skipped; past the budget a
 * page that is full is answered without its total (R4: `expansion.total` is optional), one that is not
 * is a 400 `too-costly`, as is a search's `:in` on such a ValueSet. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { ENUMERATION_WORK_LIMIT } from '../../src/terminology/compile/enumerate.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { mapLookups } from '../helpers/text-work.ts';

const CS = 'http://example.org/cs/big';
const CODES = 20_000;
/** Distinct ValueSets each listing the whole code system: together more codes than one expansion may read. */
const COPIES = Math.ceil(ENUMERATION_WORK_LIMIT / CODES) + 1;
const vsUrl = (name: string) => `http://example.org/vs/${name}`;

await eachStore((kind, fresh) => {
  describe(`expansion cost (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const expand = async (query: string) => {
      const res = await api.get(`ValueSet/$expand?${query}`);
      return { res, body: (await res.json()) as Json };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({
        resourceType: 'CodeSystem', id: 'big', url: CS, status: 'active', content: 'complete',
        concept: Array.from({ length: CODES }, (_, i) => ({ code: `c${i}` })),
      });
      for (let i = 0; i < COPIES; i++) {
        await api.put200({ resourceType: 'ValueSet', id: `copy${i}`, url: vsUrl(`copy${i}`), status: 'active', compose: { include: [{ system: CS }] } });
      }
      // The same ValueSet imported COPIES times; COPIES distinct ones each imported once.
      await api.put200({
        resourceType: 'ValueSet', id: 'repeated', url: vsUrl('repeated'), status: 'active',
        compose: { include: Array.from({ length: COPIES }, () => ({ valueSet: [vsUrl('copy0')] })) },
      });
      await api.put200({
        resourceType: 'ValueSet', id: 'distinct', url: vsUrl('distinct'), status: 'active',
        compose: { include: Array.from({ length: COPIES }, (_, i) => ({ valueSet: [vsUrl(`copy${i}`)] })) },
      });
    });
    afterAll(() => t.close());

    test('an include that can only repeat an earlier one is skipped: the whole total, at once', async () => {
      const { res, body } = await expand(`url=${encodeURIComponent(vsUrl('repeated'))}&count=10`);
      expect(res.status).toBe(200);
      expect(body.expansion.total).toBe(CODES);
      expect(body.expansion.contains.map((c: Json) => c.code)).toEqual(Array.from({ length: 10 }, (_, i) => `c${i}`));
    });

    test('an include listing concepts is never skipped: a fragment CodeSystem may not hold them', async () => {
      const fragment = 'http://example.org/cs/fragment';
      await api.put200({ resourceType: 'CodeSystem', id: 'fragment', url: fragment, status: 'active', content: 'fragment', concept: [{ code: 'a' }, { code: 'b' }] });
      const vs = { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: fragment }, { system: fragment, concept: [{ code: 'c' }] }, { system: fragment, filter: [{ property: 'concept', op: 'is-a', value: 'a' }] }] } };
      const res = await api.post('ValueSet/$expand', { resourceType: 'Parameters', parameter: [{ name: 'valueSet', resource: vs }] });
      const body = (await res.json()) as Json;
      expect(body.expansion.contains.map((c: Json) => c.code).sort()).toEqual(['a', 'b', 'c']);
      expect(body.expansion.total).toBe(3);
    });

    test('past the budget a full page comes without its total; a page it cannot fill is a 400 too-costly', async () => {
      const { res, body } = await expand(`url=${encodeURIComponent(vsUrl('distinct'))}&count=10`);
      expect(res.status).toBe(200);
      expect(body.expansion.contains).toHaveLength(10);
      expect(body.expansion).not.toHaveProperty('total');
      const refused = await expectOutcome(await api.get(`ValueSet/$expand?url=${encodeURIComponent(vsUrl('distinct'))}&count=10&offset=${CODES - 5}`), 400, 'too-costly');
      expect(refused.issue[0].diagnostics).toContain(`more than ${ENUMERATION_WORK_LIMIT} codes and exclude tests`);
    });

    test('each code tested against many excludes counts each test', async () => {
      const excludes = Array.from({ length: Math.ceil(ENUMERATION_WORK_LIMIT / CODES) + 1 }, (_, i) => ({ system: CS, concept: [{ code: `none${i}` }] }));
      const vs = { resourceType: 'ValueSet', status: 'active', url: vsUrl('excluding'), compose: { include: [{ system: CS }], exclude: excludes } };
      const params = (count?: number) => ({
        resourceType: 'Parameters',
        parameter: [{ name: 'valueSet', resource: vs }, ...(count === undefined ? [] : [{ name: 'count', valueInteger: count }])],
      });
      const page = (await (await api.post('ValueSet/$expand', params(10))).json()) as Json;
      expect(page.expansion.contains).toHaveLength(10);
      expect(page.expansion).not.toHaveProperty('total');
      await expectOutcome(await api.post('ValueSet/$expand', params()), 400, 'too-costly');
    });

    test("a search's :in on such a ValueSet is a 400 too-costly naming the parameter", async () => {
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { coding: [{ system: CS, code: 'c1' }] } });
      // 500 codes (fewer than the 1,000 `:in` takes), each tested against more excludes than the budget allows.
      const small = 'http://example.org/cs/small';
      await api.put200({ resourceType: 'CodeSystem', id: 'small', url: small, status: 'active', content: 'complete', concept: Array.from({ length: 500 }, (_, i) => ({ code: `s${i}` })) });
      await api.put200({
        resourceType: 'ValueSet', id: 'small-excluding', url: vsUrl('small-excluding'), status: 'active',
        compose: { include: [{ system: small }], exclude: Array.from({ length: Math.ceil(ENUMERATION_WORK_LIMIT / 500) + 1 }, (_, i) => ({ system: small, concept: [{ code: `none${i}` }] })) },
      });
      const outcome = await expectOutcome(await api.get(`Observation?code:in=${encodeURIComponent(vsUrl('small-excluding'))}`), 400, 'too-costly');
      expect(outcome.issue[0].diagnostics).toContain('too costly');
      // Without the excludes, the same codes find it.
      await api.put200({ resourceType: 'ValueSet', id: 'small-all', url: vsUrl('small-all'), status: 'active', compose: { include: [{ system: small }] } });
      await api.put200({ resourceType: 'Observation', id: 'o2', status: 'final', code: { coding: [{ system: small, code: 's7' }] } });
      const found = (await (await api.get(`Observation?code:in=${encodeURIComponent(vsUrl('small-all'))}`)).json()) as Json;
      expect(found.entry.map((e: Json) => e.resource.id)).toEqual(['o2']);
    });
  });
});

/**
 * Nesting (`excludeNested` false) finds each code's nearest ancestor in the expansion once per concept
 * of the code system, not once per code and ancestor: under a chain of 50,000 concepts, 10,000 codes
 * cost 60,000 steps, where walking each code's ancestors cost 5×10⁸ (minutes, outside any budget).
 */
const CHAIN = 'http://example.org/cs/chain';
const LINKS = 50_000;
const LEAVES = 9_999; // with the top of the chain, the most one expansion may hold (maxExpansionSize)

await eachStore((kind, fresh) => {
  describe(`expansion nesting cost (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      const parent = (code: string) => ({ property: [{ code: 'parent', valueCode: code }] });
      await api.put200({
        resourceType: 'CodeSystem', id: 'chain', url: CHAIN, status: 'active', content: 'complete',
        property: [{ code: 'parent', uri: 'http://hl7.org/fhir/concept-properties#parent', type: 'code' }],
        concept: [
          // The top of the chain matches the filter too: every leaf nests under it, 50,000 levels up.
          { code: 'link0', display: 'leaf holder' },
          ...Array.from({ length: LINKS - 1 }, (_, i) => ({ code: `link${i + 1}`, ...parent(`link${i}`) })),
          ...Array.from({ length: LEAVES }, (_, i) => ({ code: `leaf${i}`, ...parent(`link${LINKS - 1}`) })),
        ],
      });
      await api.put200({ resourceType: 'ValueSet', id: 'chain', url: vsUrl('chain'), status: 'active', compose: { include: [{ system: CHAIN }] } });
    }, 120_000);
    afterAll(() => t.close());

    test('codes at the foot of a long chain nest under their nearest ancestor at the cost of one walk up the chain', async () => {
      const { value: res, lookups } = await mapLookups(() => api.get(`ValueSet/$expand?url=${encodeURIComponent(vsUrl('chain'))}&filter=leaf&excludeNested=false`));

      expect(res.status).toBe(200);
      const body = (await res.json()) as Json;
      expect(body.expansion.total).toBe(LEAVES + 1);
      expect(body.expansion.contains.map((c: Json) => c.code)).toEqual(['link0']);
      const below = body.expansion.contains[0].contains.map((c: Json) => c.code);
      expect(below).toEqual(Array.from({ length: LEAVES }, (_, i) => `leaf${i}`));
      // Walking every leaf's ancestors took minutes: up to 9,999 x 50,000 look-ups. One walk is a few look-ups for each
      // code (about 11 here, all the request's); the time is bench/hostile-input.ts's.
      expect(lookups).toBeLessThan(20 * (LINKS + LEAVES));
    }, 60_000);
  });
});
