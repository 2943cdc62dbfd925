/**
 * The parameters a value set carries for its expansions, as HL7's reference terminology servers read them: the
 * `valueset-expansion-parameter` extensions on `compose` (R4 core's URL and HL7 tooling's) set `$expand`'s
 * `displayLanguage`, `activeOnly`, `includeDesignations`, `excludeNested`, `excludeNotForUI` and `designation` where
 * the request gives none, and are echoed as the values the expansion used; a stored expansion's parameters (a value
 * set defined by its expansion, or one an include imports) are repeated in the answer, and its `displayLanguage` is
 * the language of its displays. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

type Json = Record<string, any>;

const CS = 'http://cinder.test/CodeSystem/xp-animals';
const VS = 'http://cinder.test/ValueSet/xp-';
const CORE_PARAMETER = 'http://hl7.org/fhir/StructureDefinition/valueset-expansion-parameter';
const TOOLS_PARAMETER = 'http://hl7.org/fhir/tools/StructureDefinition/valueset-expansion-parameter';
const parameterExtension = (url: string, name: string, value: Json) => ({ url, extension: [{ url: 'name', valueCode: name }, { url: 'value', ...value }] });

const animals = {
  resourceType: 'CodeSystem', id: 'xp-animals', url: CS, version: '1', status: 'active', content: 'complete', language: 'en', hierarchyMeaning: 'is-a',
  property: [
    { code: 'inactive', uri: 'http://hl7.org/fhir/concept-properties#inactive', type: 'boolean' },
    { code: 'notSelectable', uri: 'http://hl7.org/fhir/concept-properties#notSelectable', type: 'boolean' },
  ],
  concept: [
    {
      code: 'mammal', display: 'Mammal', property: [{ code: 'notSelectable', valueBoolean: true }],
      concept: [
        { code: 'dog', display: 'Dog', designation: [{ language: 'de', value: 'Hund' }, { language: 'fr', value: 'Chien' }] },
        { code: 'mammoth', display: 'Mammoth', property: [{ code: 'inactive', valueBoolean: true }] },
      ],
    },
  ],
};
/** Sets every parameter it may for its expansions; the tooling URL for two of them. */
const configured = {
  resourceType: 'ValueSet', id: 'xp-configured', url: `${VS}configured`, status: 'active',
  compose: {
    extension: [
      parameterExtension(CORE_PARAMETER, 'activeOnly', { valueBoolean: true }),
      parameterExtension(CORE_PARAMETER, 'excludeNested', { valueBoolean: false }),
      parameterExtension(TOOLS_PARAMETER, 'excludeNotForUI', { valueString: 'true' }),
      parameterExtension(TOOLS_PARAMETER, 'designation', { valueString: 'urn:ietf:bcp:47|fr' }),
      parameterExtension(CORE_PARAMETER, 'displayLanguage', { valueCode: 'de' }),
    ],
    include: [{ system: CS }],
  },
};
/** Defined by a stored expansion, computed in German with its own parameters. */
const stored = {
  resourceType: 'ValueSet', id: 'xp-stored', url: `${VS}stored`, status: 'active',
  expansion: {
    identifier: 'urn:uuid:7d9c5a3e-1b2f-4c1d-9e8a-0a1b2c3d4e5f', timestamp: '2026-01-01T00:00:00Z',
    parameter: [{ name: 'displayLanguage', valueCode: 'de' }, { name: 'activeOnly', valueBoolean: true }, { name: 'source', valueUri: 'http://cinder.test/source' }],
    contains: [{ system: CS, version: '1', code: 'dog', display: 'Hund', designation: [{ language: 'en', value: 'Dog' }] }],
  },
};
const importsStored = { resourceType: 'ValueSet', id: 'xp-imports', url: `${VS}imports`, status: 'active', compose: { include: [{ valueSet: [`${VS}stored`] }] } };

/** One code system in two versions; value sets that say how its versions meet (tx.fhir.org's `versionsMatch`). */
const SHAPES = 'http://cinder.test/CodeSystem/xp-shapes';
const shapes = (version: string, concept: Json[]) => ({ resourceType: 'CodeSystem', id: `xp-shapes-${version}`, url: SHAPES, version, status: 'active', content: 'complete', concept });
const shapes1 = shapes('1', [{ code: 'circle', display: 'Circle' }, { code: 'square', display: 'Square' }, { code: 'oval', display: 'Oval' }]);
const shapes2 = shapes('2', [{ code: 'circle', display: 'Circle' }, { code: 'square', display: 'Square (2)' }, { code: 'star', display: 'Star' }]);
const versionsMatch = (value: string) => [parameterExtension(CORE_PARAMETER, 'versionsMatch', { valueString: value })];
const merged = {
  resourceType: 'ValueSet', id: 'xp-merged', url: `${VS}merged`, status: 'active',
  compose: { extension: versionsMatch('true'), include: [{ system: SHAPES, version: '1' }, { system: SHAPES, version: '2' }] },
};
const bothVersions = { ...merged, id: 'xp-both', url: `${VS}both`, compose: { include: merged.compose.include } };
const apart = {
  resourceType: 'ValueSet', id: 'xp-apart', url: `${VS}apart`, status: 'active',
  compose: { extension: versionsMatch('false'), include: [{ system: SHAPES, version: '2' }], exclude: [{ system: SHAPES, version: '1' }] },
};
const diffed = { ...apart, id: 'xp-diffed', url: `${VS}diffed`, compose: { include: apart.compose.include, exclude: apart.compose.exclude } };

const parameters = (r: OperationResponse) => ((r.body.expansion as Json).parameter ?? []) as Json[];
const named = (r: OperationResponse, name: string) => parameters(r).filter((p) => p.name === name).map((p) => Object.entries(p).find(([k]) => k.startsWith('value'))?.[1]);
const codes = (contains: Json[] | undefined): string[] => (contains ?? []).flatMap((c) => [c.code, ...codes(c.contains).map((x) => `${c.code}>${x}`)]);

await eachStore((kind, fresh) => {
  describe(`$expand reads the parameters a value set carries for its expansions (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const expand = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$expand', parameter);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [animals, configured, stored, importsStored, shapes1, shapes2, merged, bothVersions, apart, diffed]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    test("a compose's expansion parameters set the request's defaults and are echoed as the values used", async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}configured` }]);
      expect(r.status).toBe(200);
      const expansion = r.body.expansion as Json;
      // activeOnly leaves the mammoth out, excludeNotForUI the abstract mammal; excludeNested false would nest under it.
      expect(codes(expansion.contains)).toEqual(['dog']);
      const dog = (expansion.contains as Json[])[0]!;
      expect(dog.display).toBe('Hund');
      // `designation` lists the French one (and with it the English display the German one replaced).
      expect((dog.designation as Json[]).map((d) => `${d.language}:${d.value}`)).toEqual(['fr:Chien']);
      expect(named(r, 'activeOnly')).toEqual([true]);
      expect(named(r, 'excludeNested')).toEqual([false]);
      expect(named(r, 'excludeNotForUI')).toEqual([true]);
      expect(named(r, 'designation')).toEqual(['urn:ietf:bcp:47|fr']);
      expect(named(r, 'displayLanguage')).toEqual(['de']);
    });

    test("the request's own parameters win over the value set's", async () => {
      const r = await expand([
        { name: 'url', valueUri: `${VS}configured` }, { name: 'activeOnly', valueBoolean: false }, { name: 'excludeNotForUI', valueBoolean: false },
        { name: 'displayLanguage', valueCode: 'en' },
      ]);
      expect(r.status).toBe(200);
      // Nested (excludeNested false stays the value set's) under the mammal, which is listed again.
      expect(codes((r.body.expansion as Json).contains)).toEqual(['mammal', 'mammal>dog', 'mammal>mammoth']);
      expect(named(r, 'activeOnly')).toEqual([false]);
      expect(named(r, 'displayLanguage')).toEqual(['en']);
      const dog = ((r.body.expansion as Json).contains[0].contains as Json[]).find((c) => c.code === 'dog')!;
      expect(dog.display).toBe('Dog');
    });

    test("a stored expansion's parameters are repeated, and its displays are in its displayLanguage", async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}stored` }]);
      expect(r.status).toBe(200);
      expect(named(r, 'source')).toEqual(['http://cinder.test/source']);
      expect(named(r, 'activeOnly')).toEqual([true]);
      expect(named(r, 'displayLanguage')).toEqual(['de']);
      // Asked in English: the English designation is shown, and the stored German display listed as German.
      const en = await expand([{ name: 'url', valueUri: `${VS}stored` }, { name: 'displayLanguage', valueCode: 'en' }, { name: 'includeDesignations', valueBoolean: true }]);
      const dog = ((en.body.expansion as Json).contains as Json[])[0]!;
      expect(dog.display).toBe('Dog');
      expect((dog.designation as Json[]).map((d) => `${d.language}:${d.value}`)).toEqual(['de:Hund']);
      // The request's displayLanguage is echoed; the stored one, another value, is repeated beside it.
      expect(named(en, 'displayLanguage')).toEqual(['en', 'de']);
    });

    test("versionsMatch: true lists a code of several versions once, as its latest version has it, and an exclude of one version removes it from all; false keeps each version's codes apart", async () => {
      const listed = async (id: string) => {
        const r = await expand([{ name: 'url', valueUri: `${VS}${id}` }]);
        expect(r.status).toBe(200);
        const expansion = r.body.expansion as Json;
        return [expansion.total, ((expansion.contains ?? []) as Json[]).map((c) => `${c.code}@${c.version}:${c.display}`)];
      };
      expect(await listed('merged')).toEqual([4, ['circle@2:Circle', 'square@2:Square (2)', 'oval@1:Oval', 'star@2:Star']]);
      // Without it each version's codes are listed, as before.
      expect((await listed('both'))[0]).toBe(6);
      // An exclude of version 1 when no include pins it: a diff by default, its own version's codes only when versions are apart.
      expect(await listed('diffed')).toEqual([1, ['star@2:Star']]);
      // (Only version 2 was read: `used-codesystem` names it, and the codes need no version of their own.)
      expect(await listed('apart')).toEqual([3, ['circle@undefined:Circle', 'square@undefined:Square (2)', 'star@undefined:Star']]);
      // Where codes of several versions met as one concept, the expansion says so (as tx.fhir.org does): not where they stay apart.
      const echoed = async (id: string) => named(await expand([{ name: 'url', valueUri: `${VS}${id}` }]), 'versionsMatch');
      expect([await echoed('merged'), await echoed('diffed'), await echoed('apart'), await echoed('both')]).toEqual([[true], [true], [], []]);
      // $validate-code agrees with each expansion.
      const valid = async (id: string, code: string) => {
        const r = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}${id}` }, { name: 'coding', valueCoding: { system: SHAPES, code } }]);
        return (r.body.parameter as Json[]).find((p) => p.name === 'result')?.valueBoolean;
      };
      expect([await valid('apart', 'circle'), await valid('apart', 'star'), await valid('apart', 'oval')]).toEqual([true, true, false]);
      expect([await valid('diffed', 'circle'), await valid('diffed', 'star')]).toEqual([false, true]);
    });

    test('a value set importing one defined by a stored expansion repeats that expansion\'s parameters', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}imports` }]);
      expect(r.status).toBe(200);
      expect(codes((r.body.expansion as Json).contains)).toEqual(['dog']);
      expect(named(r, 'source')).toEqual(['http://cinder.test/source']);
      expect(named(r, 'used-valueset')).toEqual([`${VS}stored`]);
    });
  });
});

/** tx.fhir.org's `warning-<status>` parameters: the statuses the reference servers warn of in an expansion (HL7's `deprecated` suite). */
const WS = 'http://cinder.test/CodeSystem/xp-warned';
const warnedSystem = (status: string, extra: Json = {}) => ({
  resourceType: 'CodeSystem', id: `xp-warned-${status}`, url: `${WS}-${status}`, version: '0.1', status, content: 'complete', concept: [{ code: 'a', display: 'A' }], ...extra,
});
const STANDARDS = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-standards-status';
const WARNED = [
  warnedSystem('draft'),
  warnedSystem('active', { id: 'xp-warned-experimental', url: `${WS}-experimental`, experimental: true }),
  warnedSystem('active', { id: 'xp-warned-plain', url: `${WS}-plain` }),
  { resourceType: 'ValueSet', id: 'xp-withdrawn', url: `${VS}withdrawn`, version: '2', status: 'active', extension: [{ url: STANDARDS, valueCode: 'withdrawn' }], compose: { include: [{ system: `${WS}-plain` }] } },
  { resourceType: 'ValueSet', id: 'xp-imports-withdrawn', url: `${VS}imports-withdrawn`, version: '3', status: 'active', compose: { include: [{ valueSet: [`${VS}withdrawn`] }] } },
  { resourceType: 'ValueSet', id: 'xp-draft-systems', url: `${VS}draft-systems`, version: '1', status: 'draft', compose: { include: [{ system: `${WS}-draft` }, { system: `${WS}-experimental` }] } },
];

await eachStore((kind, fresh) => {
  describe(`$expand warns of the statuses of what it used, as tx.fhir.org does (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of WARNED) await putResource(t, token, r);
    });
    afterAll(() => t.close());
    const warnings = async (url: string) => {
      const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: url }]);
      expect(r.status).toBe(200);
      return ((r.body.expansion as Json).parameter as Json[]).filter((p) => p.name.startsWith('warning-')).map((p) => `${p.name} ${p.valueUri}`).sort();
    };

    test('a draft or experimental code system, a withdrawn value set (asked for or imported); not a draft value set', async () => {
      expect(await warnings(`${VS}draft-systems`)).toEqual([`warning-draft ${WS}-draft|0.1`, `warning-experimental ${WS}-experimental|0.1`]);
      expect(await warnings(`${VS}withdrawn`)).toEqual([`warning-withdrawn ${VS}withdrawn|2`]);
      expect(await warnings(`${VS}imports-withdrawn`)).toEqual([`warning-withdrawn ${VS}withdrawn|2`]);
    });
  });
});
