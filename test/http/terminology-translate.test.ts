/**
 * ConceptMap/$translate (FHIR R4 ConceptMap-translate), GET and POST, type and instance level, on both
 * databases: the tenant's ConceptMaps and the R4 core ones, chosen by url (and version), by system, or
 * by source and target value set; `unmapped` (provided, fixed, other-map with a cycle), `dependsOn`
 * and `product`, `reverse`, equivalences that are no match, a new version seen by this process at once
 * and by another within the change-token interval, access, and input errors.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { craftToken } from '../helpers/fhir.ts';
import { errorIssue, getOperation, type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';
import { storeTargets } from '../helpers/stores.ts';
import { DEFAULT_CHECK_INTERVAL_MS } from '../../src/terminology/create.ts';
import { ConceptMapCatalog } from '../../src/terminology/concept-maps.ts';

const FROM = 'http://cinder.test/CodeSystem/colours-en';
const TO = 'http://cinder.test/CodeSystem/colours-fr';
const OTHER = 'http://cinder.test/CodeSystem/colours-de';
const MAP = 'http://cinder.test/ConceptMap/en-fr';

const codeSystem = (id: string, url: string, concept: [string, string][]) => ({
  resourceType: 'CodeSystem', id, url, status: 'active', content: 'complete', concept: concept.map(([code, display]) => ({ code, display })),
});

const enFr = (version: string, redTo: string) => ({
  resourceType: 'ConceptMap', id: version === '1' ? 'en-fr' : `en-fr-${version}`, url: MAP, version, status: 'active',
  sourceUri: 'http://cinder.test/ValueSet/colours-en', targetUri: 'http://cinder.test/ValueSet/colours-fr',
  group: [{
    source: FROM, target: TO,
    element: [
      { code: 'red', target: [{ code: redTo, equivalence: 'equivalent' }] },
      { code: 'crimson', display: 'Crimson', target: [{ code: 'rouge', display: 'Rouge (foncé)', equivalence: 'wider' }] },
      { code: 'blue', target: [{ code: 'bleu', equivalence: 'equal' }, { code: 'bleu-clair', equivalence: 'narrower', comment: 'light blue only' }] },
      { code: 'ultraviolet', target: [{ equivalence: 'unmatched', comment: 'not a colour in French' }] },
      { code: 'infrared', target: [{ code: 'rouge', equivalence: 'disjoint' }] },
      {
        code: 'green',
        target: [
          { code: 'vert-pomme', equivalence: 'narrower', comment: 'apple green only', dependsOn: [{ property: 'http://cinder.test/fruit', system: 'http://cinder.test/fruits', value: 'apple' }] },
          { code: 'vert', equivalence: 'equivalent', product: [{ property: 'http://cinder.test/shade', system: 'http://cinder.test/shades', value: 'mid', display: 'Mid' }] },
        ],
      },
    ],
    unmapped: { mode: 'fixed', code: 'inconnu', display: 'Inconnu' },
  }],
});

/** Unmapped `provided` and `other-map`, and two maps sending each other their unmapped codes. */
const others = [
  {
    resourceType: 'ConceptMap', id: 'en-de', url: 'http://cinder.test/ConceptMap/en-de', status: 'active',
    group: [{ source: FROM, target: OTHER, element: [{ code: 'red', target: [{ code: 'rot', equivalence: 'equal' }] }], unmapped: { mode: 'provided' } }],
  },
  {
    resourceType: 'ConceptMap', id: 'loop-a', url: 'http://cinder.test/ConceptMap/loop-a', status: 'active',
    group: [{ source: 'http://cinder.test/loop', target: OTHER, element: [{ code: 'a', target: [{ code: 'A', equivalence: 'equal' }] }], unmapped: { mode: 'other-map', url: 'http://cinder.test/ConceptMap/loop-b' } }],
  },
  {
    resourceType: 'ConceptMap', id: 'loop-b', url: 'http://cinder.test/ConceptMap/loop-b', status: 'active',
    group: [{ source: 'http://cinder.test/loop', target: OTHER, element: [{ code: 'b', target: [{ code: 'B', equivalence: 'equal' }] }], unmapped: { mode: 'other-map', url: 'http://cinder.test/ConceptMap/loop-a' } }],
  },
];

type Match = { equivalence?: string; concept?: { system?: string; code?: string; display?: string; version?: string }; source?: string; product?: Param[][] };

/** `result`, `message` and the matches of a 200 $translate answer. */
function translation(r: OperationResponse): { result: unknown; message?: string; matches: Match[] } {
  expect({ status: r.status, type: r.body.resourceType }).toEqual({ status: 200, type: 'Parameters' });
  const params = r.body.parameter ?? [];
  const message = params.find((p) => p.name === 'message')?.valueString as string | undefined;
  const matches = params.filter((p) => p.name === 'match').map((m) => {
    const parts = (m.part ?? []) as Param[];
    const one = (name: string) => parts.find((p) => p.name === name);
    const products = parts.filter((p) => p.name === 'product').map((p) => p.part as Param[]);
    return {
      ...(one('equivalence') ? { equivalence: one('equivalence')!.valueCode as string } : {}),
      ...(one('concept') ? { concept: one('concept')!.valueCoding as Match['concept'] } : {}),
      ...(one('source') ? { source: one('source')!.valueUri as string } : {}),
      ...(products.length ? { product: products } : {}),
    };
  });
  return { result: params.find((p) => p.name === 'result')?.valueBoolean, ...(message !== undefined ? { message } : {}), matches };
}

/** `equivalence system#code` of each match, sorted. */
const brief = (r: OperationResponse) => translation(r).matches.map((m) => `${m.equivalence} ${m.concept ? `${m.concept.system}#${m.concept.code}` : '-'}`).sort();

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`ConceptMap/$translate (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let open: () => ReturnType<typeof target.open>;
    beforeAll(async () => {
      const db = await target.migrated();
      open = () => db.open();
      t = await createTestApp({ store: db.open() });
      token = await t.token();
      await putResource(t, token, codeSystem('colours-en', FROM, [['red', 'Red'], ['blue', 'Blue'], ['green', 'Green'], ['white', 'White']]));
      await putResource(t, token, codeSystem('colours-fr', TO, [['rouge', 'Rouge'], ['bleu', 'Bleu'], ['vert', 'Vert'], ['bleu-clair', 'Bleu clair']]));
      await putResource(t, token, enFr('1', 'rouge'));
      for (const m of others) await putResource(t, token, m);
    });
    afterAll(() => t.close());

    const get = (query: Record<string, string>, path = 'ConceptMap/$translate') => getOperation(t, token, path, query);
    const post = (parameter: Param[], path = 'ConceptMap/$translate') => postOperation(t, token, path, parameter);

    test('a code of a map named by url: its targets, displays from the map or the code system, the map as source', async () => {
      const red = translation(await get({ url: MAP, system: FROM, code: 'red' }));
      expect(red).toEqual({ result: true, matches: [{ equivalence: 'equivalent', concept: { system: TO, code: 'rouge', display: 'Rouge' }, source: `${MAP}|1` }] });
      const crimson = translation(await get({ url: MAP, system: FROM, code: 'crimson' }));
      expect(crimson.matches).toEqual([{ equivalence: 'wider', concept: { system: TO, code: 'rouge', display: 'Rouge (foncé)' }, source: `${MAP}|1` }]);
      expect(brief(await get({ url: MAP, system: FROM, code: 'blue' }))).toEqual([`equal ${TO}#bleu`, `narrower ${TO}#bleu-clair`]);
    });

    test('unmatched and disjoint are matches that are no translation: result false, with a message', async () => {
      const uv = translation(await get({ url: MAP, system: FROM, code: 'ultraviolet' }));
      expect(uv.result).toBe(false);
      expect(uv.matches).toEqual([{ equivalence: 'unmatched', source: `${MAP}|1` }]);
      expect(uv.message).toContain(`'${FROM}#ultraviolet'`);
      const ir = translation(await get({ url: MAP, system: FROM, code: 'infrared' }));
      expect({ result: ir.result, matches: brief(await get({ url: MAP, system: FROM, code: 'infrared' })) }).toEqual({ result: false, matches: [`disjoint ${TO}#rouge`] });
      // A system no group of the map translates: no match at all.
      const none = translation(await get({ url: MAP, system: 'http://cinder.test/none', code: 'red' }));
      expect({ result: none.result, matches: none.matches, message: none.message }).toEqual({
        result: false, matches: [], message: "No translation was found for 'http://cinder.test/none#red'",
      });
    });

    test('unmapped: fixed gives its code, provided the code itself, other-map the other map\'s; a cycle of other-maps ends', async () => {
      expect(translation(await get({ url: MAP, system: FROM, code: 'white' })).matches).toEqual([
        { equivalence: 'relatedto', concept: { system: TO, code: 'inconnu', display: 'Inconnu' }, source: `${MAP}|1` },
      ]);
      expect(brief(await get({ url: 'http://cinder.test/ConceptMap/en-de', system: FROM, code: 'white' }))).toEqual([`equivalent ${OTHER}#white`]);
      const loop = (code: string) => get({ url: 'http://cinder.test/ConceptMap/loop-a', system: 'http://cinder.test/loop', code });
      expect(brief(await loop('b'))).toEqual([`equal ${OTHER}#B`]);
      expect(translation(await loop('b')).matches[0]!.source).toBe('http://cinder.test/ConceptMap/loop-b');
      const neither = translation(await loop('c'));
      expect({ result: neither.result, matches: neither.matches }).toEqual({ result: false, matches: [] });
    });

    test('each map is followed once per code: groups sending their codes to the same map neither walk it again nor repeat its matches', async () => {
      // fan0..fan7, 12 groups each sending the unmapped to the next: 12^7 paths (about 12 s) before.
      for (let i = 0; i < 8; i++) {
        const group = Array.from({ length: 12 }, () => ({ source: 'http://cinder.test/fan', target: OTHER, element: [{ code: 'listed', target: [{ code: 'L', equivalence: 'equal' }] }], unmapped: { mode: 'other-map', url: `http://cinder.test/ConceptMap/fan${i + 1}` } }));
        await putResource(t, token, { resourceType: 'ConceptMap', id: `fan${i}`, url: `http://cinder.test/ConceptMap/fan${i}`, status: 'active', group });
      }
      // The catalog of the new maps is built (each url looked up once) by a first translation; the second's
      // look-ups of fan maps are its walk: a group's once, its map walked once, not 12 + 12^2 + ... + 12^7.
      const code = (map: number) => get({ url: `http://cinder.test/ConceptMap/fan${map}`, system: 'http://cinder.test/fan', code: 'x' });
      expect(translation(await code(7)).result).toBe(false);
      let lookedUp = 0;
      const byUrl = ConceptMapCatalog.prototype.byUrl;
      ConceptMapCatalog.prototype.byUrl = function (this: ConceptMapCatalog, url: string, version?: string) {
        if (url.startsWith('http://cinder.test/ConceptMap/fan')) lookedUp++;
        return byUrl.call(this, url, version);
      };
      try {
        expect(translation(await code(0)).result).toBe(false);
      } finally {
        ConceptMapCatalog.prototype.byUrl = byUrl;
      }
      // fan0 chosen, then each of the 12 groups of fan0..fan6 looks up the map it sends to: 85.
      expect(lookedUp).toBe(1 + 7 * 12);
      // Three groups sending to one map that provides the code: one match, not three.
      const to = { source: 'http://cinder.test/fan', target: OTHER, element: [{ code: 'listed', target: [{ code: 'L', equivalence: 'equal' }] }], unmapped: { mode: 'other-map', url: 'http://cinder.test/ConceptMap/provides' } };
      await putResource(t, token, { resourceType: 'ConceptMap', id: 'three', url: 'http://cinder.test/ConceptMap/three', status: 'active', group: [to, to, to] });
      await putResource(t, token, { resourceType: 'ConceptMap', id: 'provides', url: 'http://cinder.test/ConceptMap/provides', status: 'active', group: [{ source: 'http://cinder.test/fan', target: OTHER, element: [{ code: 'listed', target: [{ code: 'L', equivalence: 'equal' }] }], unmapped: { mode: 'provided' } }] });
      expect(brief(await get({ url: 'http://cinder.test/ConceptMap/three', system: 'http://cinder.test/fan', code: 'x' }))).toEqual([`equivalent ${OTHER}#x`]);
    }, 60_000);

    test('dependsOn holds only with a matching dependency; a product is returned', async () => {
      const green = (dependency?: Param) => post([{ name: 'url', valueUri: MAP }, { name: 'system', valueUri: FROM }, { name: 'code', valueCode: 'green' }, ...(dependency ? [dependency] : [])]);
      expect(brief(await green())).toEqual([`equivalent ${TO}#vert`]);
      const apple = { name: 'dependency', part: [{ name: 'element', valueUri: 'http://cinder.test/fruit' }, { name: 'concept', valueCodeableConcept: { coding: [{ system: 'http://cinder.test/fruits', code: 'apple' }] } }] };
      expect(brief(await green(apple))).toEqual([`equivalent ${TO}#vert`, `narrower ${TO}#vert-pomme`]);
      const pear = { name: 'dependency', part: [{ name: 'element', valueUri: 'http://cinder.test/fruit' }, { name: 'concept', valueCodeableConcept: { coding: [{ system: 'http://cinder.test/fruits', code: 'pear' }] } }] };
      expect(brief(await green(pear))).toEqual([`equivalent ${TO}#vert`]);
      const vert = translation(await green()).matches[0]!;
      expect(vert.product).toEqual([[{ name: 'element', valueUri: 'http://cinder.test/shade' }, { name: 'concept', valueCoding: { system: 'http://cinder.test/shades', code: 'mid', display: 'Mid' } }]]);
    });

    test('without a url: every map from the system, narrowed by targetsystem and the source and target value sets', async () => {
      expect(brief(await get({ system: FROM, code: 'red' }))).toEqual([`equal ${OTHER}#rot`, `equivalent ${TO}#rouge`]);
      expect(brief(await get({ system: FROM, code: 'red', targetsystem: OTHER }))).toEqual([`equal ${OTHER}#rot`]);
      // en-fr names its value sets, en-de names none (it fits any).
      expect(brief(await get({ system: FROM, code: 'red', target: 'http://cinder.test/ValueSet/colours-fr' }))).toEqual([`equal ${OTHER}#rot`, `equivalent ${TO}#rouge`]);
      expect(brief(await get({ system: FROM, code: 'red', source: 'http://cinder.test/ValueSet/elsewhere' }))).toEqual([`equal ${OTHER}#rot`]);
    });

    test('reverse: the source codes mapped to a target code, with the equivalence read backwards', async () => {
      expect(brief(await get({ system: TO, code: 'rouge', reverse: 'true' }))).toEqual([`disjoint ${FROM}#infrared`, `equivalent ${FROM}#red`, `narrower ${FROM}#crimson`]);
      expect(brief(await get({ system: TO, code: 'bleu-clair', reverse: 'true', targetsystem: FROM }))).toEqual([`wider ${FROM}#blue`]);
      expect(brief(await get({ system: TO, code: 'bleu-clair', reverse: 'true', targetsystem: OTHER }))).toEqual([]);
    });

    test('coding and codeableConcept (POST): each coding is translated', async () => {
      expect(brief(await post([{ name: 'url', valueUri: MAP }, { name: 'coding', valueCoding: { system: FROM, code: 'red' } }]))).toEqual([`equivalent ${TO}#rouge`]);
      const cc = { coding: [{ system: 'http://cinder.test/none', code: 'x' }, { system: FROM, code: 'blue' }] };
      const r = translation(await post([{ name: 'url', valueUri: MAP }, { name: 'codeableConcept', valueCodeableConcept: cc }]));
      expect(r.result).toBe(true);
      expect(r.matches.map((m) => m.concept?.code).sort()).toEqual(['bleu', 'bleu-clair']);
    });

    test('an inline conceptMap (POST), and instance level on a stored map', async () => {
      const inline = { resourceType: 'ConceptMap', status: 'draft', group: [{ source: FROM, target: OTHER, element: [{ code: 'blue', target: [{ code: 'blau', equivalence: 'equal' }] }] }] };
      const r = translation(await post([{ name: 'conceptMap', resource: inline }, { name: 'system', valueUri: FROM }, { name: 'code', valueCode: 'blue' }]));
      expect(r.matches).toEqual([{ equivalence: 'equal', concept: { system: OTHER, code: 'blau' } }]);
      expect(brief(await get({ system: FROM, code: 'red' }, 'ConceptMap/en-de/$translate'))).toEqual([`equal ${OTHER}#rot`]);
      expect(brief(await post([{ name: 'system', valueUri: FROM }, { name: 'code', valueCode: 'red' }], 'ConceptMap/en-fr/$translate'))).toEqual([`equivalent ${TO}#rouge`]);
      expect(errorIssue(await get({ system: FROM, code: 'red' }, 'ConceptMap/nope/$translate'), 404).code).toBe('not-found');
    });

    test('versions: conceptMapVersion or url|version picks one, the latest otherwise; a group pinned to a source version', async () => {
      await putResource(t, token, enFr('2', 'rouge-vif'));
      expect(brief(await get({ url: MAP, system: FROM, code: 'red' }))).toEqual([`equivalent ${TO}#rouge-vif`]);
      expect(brief(await get({ url: MAP, conceptMapVersion: '1', system: FROM, code: 'red' }))).toEqual([`equivalent ${TO}#rouge`]);
      expect(brief(await get({ url: `${MAP}|1`, system: FROM, code: 'red' }))).toEqual([`equivalent ${TO}#rouge`]);
      // Without a url, only the latest version of each map is used.
      expect(brief(await get({ system: FROM, code: 'red', targetsystem: TO }))).toEqual([`equivalent ${TO}#rouge-vif`]);
      expect(errorIssue(await get({ url: MAP, conceptMapVersion: '9', system: FROM, code: 'red' }), 400).text).toBe(`ConceptMap '${MAP}|9' could not be found`);

      const pinned = { resourceType: 'ConceptMap', id: 'pinned', url: 'http://cinder.test/ConceptMap/pinned', status: 'active',
        group: [{ source: FROM, sourceVersion: '2.0', target: TO, targetVersion: '5', element: [{ code: 'red', target: [{ code: 'rouge', equivalence: 'equal' }] }] }] };
      await putResource(t, token, pinned);
      const at = (version?: string) => get({ url: pinned.url, system: FROM, code: 'red', ...(version ? { version } : {}) });
      expect(translation(await at()).matches[0]!.concept).toEqual({ system: TO, version: '5', code: 'rouge' });
      expect(brief(await at('2.0'))).toEqual([`equal ${TO}#rouge`]);
      expect(brief(await at('1.0'))).toEqual([]);
    });

    test('the R4 core ConceptMaps: by url and by system', async () => {
      const gender = 'http://hl7.org/fhir/administrative-gender';
      const v2 = 'http://terminology.hl7.org/CodeSystem/v2-0001';
      const byUrl = translation(await get({ url: 'http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2', system: gender, code: 'female' }));
      expect(byUrl.matches).toEqual([{ equivalence: 'equal', concept: { system: v2, code: 'F', display: 'Female' }, source: 'http://hl7.org/fhir/ConceptMap/cm-administrative-gender-v2|4.0.1' }]);
      expect(brief(await get({ system: gender, code: 'male', targetsystem: v2 }))).toEqual([`equal ${v2}#M`]);
    });

    test("a new map or version is seen at once in this process, in another once the change token's interval has passed", async () => {
      const other = await secondServer(t, open);
      const otherGet = async (query: Record<string, string>) => {
        const res = await other(`${t.fhir()}/ConceptMap/$translate?${new URLSearchParams(query)}`, fhirInit(token));
        return { status: res.status, body: (await res.json()) as OperationResponse['body'] };
      };
      const query = { system: FROM, code: 'blue', targetsystem: OTHER };
      expect(brief(await otherGet(query))).toEqual([`equivalent ${OTHER}#blue`]);
      const enDe = { ...others[0]!, group: [{ ...others[0]!.group[0]!, element: [{ code: 'blue', target: [{ code: 'blau', equivalence: 'equal' }] }] }] };
      await putResource(t, token, enDe);
      expect(brief(await get(query))).toEqual([`equal ${OTHER}#blau`]);
      expect(brief(await otherGet(query))).toEqual([`equivalent ${OTHER}#blue`]);
      t.clock.advance(DEFAULT_CHECK_INTERVAL_MS);
      expect(brief(await otherGet(query))).toEqual([`equal ${OTHER}#blau`]);
      await putResource(t, token, others[0]!);
    });

    test('needs read access to every ConceptMap: none, or a scope filter on ConceptMap, is a 403', async () => {
      const none = await t.tokenFor('t1', ['system/CodeSystem.read', 'system/ValueSet.read']);
      expect(errorIssue(await getOperation(t, none, 'ConceptMap/$translate', { system: FROM, code: 'red' }), 403).code).toBe('forbidden');
      const filtered = await craftToken(t, `system/ConceptMap.rs?url=${MAP} system/CodeSystem.rs system/ValueSet.rs`);
      for (const path of ['ConceptMap/$translate', 'ConceptMap/en-fr/$translate']) {
        expect({ path, code: errorIssue(await getOperation(t, filtered, path, { system: FROM, code: 'red' }), 403).code }).toEqual({ path, code: 'forbidden' });
      }
      const maps = await t.tokenFor('t1', ['system/ConceptMap.read']);
      expect(translation(await getOperation(t, maps, 'ConceptMap/$translate', { url: MAP, system: FROM, code: 'red' })).result).toBe(true);
    });

    test('the CapabilityStatement lists it on ConceptMap', async () => {
      const statement = (await (await t.request(`${t.fhir()}/metadata`)).json()) as { rest: { resource: { type: string; operation?: { name: string; definition: string }[] }[] }[] };
      const conceptMap = statement.rest[0]!.resource.find((r) => r.type === 'ConceptMap');
      expect(conceptMap?.operation).toContainEqual({ name: 'translate', definition: 'http://hl7.org/fhir/OperationDefinition/ConceptMap-translate' });
    });

    test('input errors: a 400 naming the input', async () => {
      const cases: [Record<string, string>, string][] = [
        [{ system: FROM }, 'code'],
        [{ code: 'red' }, 'system'],
        [{ url: MAP, conceptMapVersion: '1', code: 'red' }, 'system'],
        [{ conceptMapVersion: '1', system: FROM, code: 'red' }, 'conceptMapVersion'],
        [{ system: FROM, code: 'red', reverse: 'maybe' }, 'reverse'],
      ];
      for (const [query, expression] of cases) {
        const r = await get(query);
        expect({ query, status: r.status, expression: (r.body.issue?.[0] as { expression?: string[] } | undefined)?.expression?.includes(expression) }).toEqual({ query, status: 400, expression: true });
      }
      expect(errorIssue(await post([{ name: 'code', valueCode: 'red' }, { name: 'coding', valueCoding: { system: FROM, code: 'red' } }]), 400).code).toBe('invalid');
      expect(errorIssue(await post([{ name: 'coding', valueCoding: { code: 'red' } }]), 400).text).toContain('no system');
      expect(errorIssue(await post([{ name: 'url', valueUri: MAP }, { name: 'conceptMap', resource: { resourceType: 'ConceptMap', status: 'draft' } }, { name: 'system', valueUri: FROM }, { name: 'code', valueCode: 'red' }]), 400).text)
        .toContain("either 'url' or 'conceptMap'");
      expect(errorIssue(await get({ url: MAP, system: FROM, code: 'red' }, 'ConceptMap/en-fr/$translate'), 400).text).toContain('instance level');
      expect(errorIssue(await get({ url: 'http://cinder.test/ConceptMap/none', system: FROM, code: 'red' }), 400).text).toBe("ConceptMap 'http://cinder.test/ConceptMap/none' could not be found");
      const bad = await post([{ name: 'system', valueUri: FROM }, { name: 'code', valueCode: 'red' }, { name: 'dependency', part: [{ name: 'concept', valueCodeableConcept: { text: 'x' } }] }]);
      expect(errorIssue(bad, 400).text).toContain("no 'element'");
    });
  });
}
