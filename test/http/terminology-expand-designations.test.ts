/**
 * What `$expand` says of a code beside its code, as HL7's reference terminology servers say it: the
 * supplements of the code system version it draws on (a supplement of another version is not applied,
 * and one that supplements nothing the expansion uses is a 400 `not-found`), those an imported value
 * set names, the designations a value set's include gives a code its code system does not hold, only
 * the designation a translated display came from left out; and `Vary: Accept-Language` on answers that
 * read that header (`$expand`, `ValueSet/$validate-code`). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { errorIssue, type OperationResponse, outcome, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/dsg-fruit';
const VS = 'http://cinder.test/ValueSet/dsg-';
const SUPPLEMENT = 'http://cinder.test/CodeSystem/dsg-fruit-fr';
const NEEDS = 'http://hl7.org/fhir/StructureDefinition/valueset-supplement';
const PREFERRED = { system: 'http://terminology.hl7.org/CodeSystem/hl7TermMaintInfra', code: 'preferredForLanguage', display: 'Preferred For Language' };

const fruitV1 = {
  resourceType: 'CodeSystem', id: 'dsg-fruit-1', url: CS, version: '1', status: 'active', content: 'complete', language: 'en',
  concept: [
    // "Kiwi" is the German display, and also the Dutch one and an English synonym: only the German one is shown.
    { code: 'kiwi', display: 'Kiwifruit', designation: [{ language: 'de', value: 'Kiwi' }, { language: 'nl', value: 'Kiwi' }, { language: 'en', use: { system: 'http://snomed.info/sct', code: '900000000000013009' }, value: 'Kiwi' }] },
    { code: 'pear', display: 'Pear' },
  ],
};
const fruitV2 = { ...fruitV1, id: 'dsg-fruit-2', version: '2' };
/** A supplement of version 2 only. */
const supplementV2 = {
  resourceType: 'CodeSystem', id: 'dsg-fruit-fr', url: SUPPLEMENT, version: '1', status: 'active', content: 'supplement', supplements: `${CS}|2`, language: 'fr',
  concept: [{ code: 'pear', display: 'Poire' }],
};
const needsSupplement = (id: string, version: string) => ({
  resourceType: 'ValueSet', id: `dsg-${id}`, url: `${VS}${id}`, status: 'active',
  extension: [{ url: NEEDS, valueCanonical: `${SUPPLEMENT}|1` }], compose: { include: [{ system: CS, version }] },
});
const onV1 = needsSupplement('on-v1', '1');
const onV2 = needsSupplement('on-v2', '2');
/** Imports the value set that names the supplement; names none itself. */
const importer = {
  resourceType: 'ValueSet', id: 'dsg-importer', url: `${VS}importer`, status: 'active', compose: { include: [{ valueSet: [`${VS}on-v2`] }] },
};
/** Imports a value set that needs a supplement the server does not have. */
const needsMissing = {
  resourceType: 'ValueSet', id: 'dsg-needs-missing', url: `${VS}needs-missing`, status: 'active',
  extension: [{ url: NEEDS, valueCanonical: 'http://cinder.test/CodeSystem/dsg-nothing' }], compose: { include: [{ system: CS, version: '2' }] },
};
const importsMissing = {
  resourceType: 'ValueSet', id: 'dsg-imports-missing', url: `${VS}imports-missing`, status: 'active', compose: { include: [{ valueSet: [`${VS}needs-missing`] }] },
};
/** Lists codes of a code system the server does not have, and of a fragment that lacks one, with designations. */
const FRAGMENT = 'http://cinder.test/CodeSystem/dsg-fragment';
const fragment = {
  resourceType: 'CodeSystem', id: 'dsg-fragment', url: FRAGMENT, version: '1', status: 'active', content: 'fragment', language: 'en',
  concept: [{ code: 'known', display: 'Known' }],
};
const listed = {
  resourceType: 'ValueSet', id: 'dsg-listed', url: `${VS}listed`, status: 'active',
  compose: {
    include: [
      { system: 'http://cinder.test/CodeSystem/dsg-nowhere', concept: [{ code: 'x1', display: 'Ex one', designation: [{ language: 'de', value: 'Ix eins' }] }] },
      { system: FRAGMENT, concept: [{ code: 'absent', display: 'Absent', designation: [{ language: 'de', value: 'Abwesend' }] }] },
    ],
  },
};
const all = { resourceType: 'ValueSet', id: 'dsg-all', url: `${VS}all`, status: 'active', compose: { include: [{ system: CS, version: '1' }] } };
/** Names the supplement of the fruit code system but includes only another code system. */
const elsewhere = {
  resourceType: 'ValueSet', id: 'dsg-elsewhere', url: `${VS}elsewhere`, status: 'active',
  extension: [{ url: NEEDS, valueCanonical: `${SUPPLEMENT}|1` }], compose: { include: [{ system: FRAGMENT }] },
};
/** Names it and includes the code system without pinning a version: the version it supplements may be the one used. */
const unpinned = { ...needsSupplement('unpinned', '2'), compose: { include: [{ system: CS }] } };
/** Imports a value set that names the supplement and includes its code system: the import uses it. */
const importsElsewhere = {
  resourceType: 'ValueSet', id: 'dsg-imports-user', url: `${VS}imports-user`, status: 'active', compose: { include: [{ valueSet: [`${VS}on-v2`] }, { system: FRAGMENT }] },
};

/** Defined by its expansion (no compose) of version 2's codes, naming the supplement; and a value set importing it. */
const expanded = {
  resourceType: 'ValueSet', id: 'dsg-expanded', url: `${VS}expanded`, status: 'active', extension: [{ url: NEEDS, valueCanonical: `${SUPPLEMENT}|1` }],
  expansion: { identifier: 'urn:uuid:6f1c1e64-54a4-4a57-9e0b-5d2b8f3f1a01', timestamp: '2026-11-30T00:00:00Z', contains: [{ system: CS, version: '2', code: 'pear', display: 'Pear' }] },
};
const importsExpanded = { resourceType: 'ValueSet', id: 'dsg-imports-expanded', url: `${VS}imports-expanded`, status: 'active', compose: { include: [{ valueSet: [`${VS}expanded`] }] } };

type Contains = { code: string; display?: string; designation?: { language?: string; use?: unknown; value: string }[] };
const entry = (r: OperationResponse, code: string) => (r.body.expansion as { contains?: Contains[] }).contains?.find((c) => c.code === code);
const used = (r: OperationResponse) => ((r.body.expansion as { parameter?: Param[] }).parameter ?? []).filter((p) => p.name === 'used-supplement').map((p) => p.valueUri);

await eachStore((kind, fresh) => {
  describe(`$expand: supplements, designations and Accept-Language (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const expand = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$expand', parameter);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [fruitV1, fruitV2, supplementV2, onV1, onV2, importer, needsMissing, importsMissing, fragment, listed, all, elsewhere, unpinned, importsElsewhere, expanded, importsExpanded]) {
        await putResource(t, token, r);
      }
    });
    afterAll(() => t.close());

    test('a supplement of version 2 is applied to version 2, and a value set needing it on version 1 is a 400 not-found', async () => {
      const v2 = await expand([{ name: 'url', valueUri: `${VS}on-v2` }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(v2.status).toBe(200);
      expect(entry(v2, 'pear')?.designation).toEqual([{ language: 'fr', value: 'Poire' }]);
      expect(used(v2)).toEqual([`${SUPPLEMENT}|1`]);
      const v1 = await expand([{ name: 'url', valueUri: `${VS}on-v1` }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(errorIssue(v1, 400)).toEqual({
        severity: 'error', code: 'not-found',
        text: `The expansion of '${VS}on-v1' uses no code system version that the supplement '${SUPPLEMENT}|1' (of '${CS}|2') it names supplements`,
      });
      expect((v1.body.issue?.[0] as { expression?: string[] }).expression).toEqual(['url']);
      // $validate-code takes the supplement's display on version 2; a value set needing it on version 1 cannot be
      // used there either (a 400 not-found, as the reference servers answer), whatever the coding.
      const check = (id: string, version: string) => postOperation(t, token, 'ValueSet/$validate-code', [
        { name: 'url', valueUri: `${VS}${id}` }, { name: 'coding', valueCoding: { system: CS, version, code: 'pear', display: 'Poire' } },
      ]);
      expect(outcome(await check('on-v2', '2'))).toEqual({ result: true, display: 'Pear' });
      expect(errorIssue(await check('on-v1', '1'), 400)).toEqual({
        severity: 'error', code: 'not-found',
        text: `'${VS}on-v1' includes no code system that the supplement '${SUPPLEMENT}|1' (of '${CS}|2') it names supplements`,
      });
      expect(errorIssue(await check('on-v1', '2'), 400).code).toBe('not-found');
    });

    test('force-system-version and system-version decide whether a supplement is used, on $validate-code as on $expand', async () => {
      const versions = (name: string, version: string): Param => ({ name, valueCanonical: `${CS}|${version}` });
      const both = async (id: string, rule: Param) => {
        const expanded = await expand([{ name: 'url', valueUri: `${VS}${id}` }, { name: 'displayLanguage', valueCode: 'fr' }, rule]);
        const checked = await postOperation(t, token, 'ValueSet/$validate-code', [
          { name: 'url', valueUri: `${VS}${id}` }, { name: 'coding', valueCoding: { system: CS, code: 'pear', display: 'Poire' } }, rule,
        ]);
        return { expanded, checked };
      };
      // Pins version 1, whose supplement it does not name; forced to version 2, it uses the supplement's. Was a 400 on $validate-code alone.
      const forced = await both('on-v1', versions('force-system-version', '2'));
      expect(forced.expanded.status).toBe(200);
      expect(entry(forced.expanded, 'pear')?.display).toBe('Poire');
      expect(outcome(forced.checked)).toEqual({ result: true, display: 'Pear' });
      // Pins version 2, forced to version 1: the supplement is used by neither.
      const away = await both('on-v2', versions('force-system-version', '1'));
      expect(errorIssue(away.expanded, 400).code).toBe('not-found');
      expect(errorIssue(away.checked, 400).code).toBe('not-found');
      // system-version: the version of an include that pins none; one that pins its own keeps it.
      const unpinnedOn1 = await both('unpinned', versions('system-version', '1'));
      expect(errorIssue(unpinnedOn1.expanded, 400).code).toBe('not-found');
      expect(errorIssue(unpinnedOn1.checked, 400).code).toBe('not-found');
      const pinnedKept = await both('on-v2', versions('system-version', '1'));
      expect(entry(pinnedKept.expanded, 'pear')?.display).toBe('Poire');
      expect(outcome(pinnedKept.checked)).toMatchObject({ result: true });
    });

    test('$validate-code refuses a value set naming a supplement of a code system none of its includes draws on', async () => {
      const check = (id: string, coding: Record<string, string>) => postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}${id}` }, { name: 'coding', valueCoding: coding }]);
      const refused = await check('elsewhere', { system: FRAGMENT, code: 'known' });
      expect(errorIssue(refused, 400)).toEqual({
        severity: 'error', code: 'not-found',
        text: `'${VS}elsewhere' includes no code system that the supplement '${SUPPLEMENT}|1' (of '${CS}|2') it names supplements`,
      });
      expect((refused.body.issue?.[0] as { details?: { coding?: { code: string }[] } }).details?.coding?.[0]?.code).toBe('not-found');
      // An include that pins no version may use the one supplemented; a supplement an import names is used by that import.
      expect(outcome(await check('unpinned', { system: CS, code: 'pear' }))).toMatchObject({ result: true });
      expect(outcome(await check('imports-user', { system: FRAGMENT, code: 'known' }))).toMatchObject({ result: true });
    });

    test("a value set defined by its expansion uses the code systems its codes name: its supplement is not refused as unused", async () => {
      for (const id of ['expanded', 'imports-expanded']) {
        const checked = await postOperation(t, token, 'ValueSet/$validate-code', [
          { name: 'url', valueUri: `${VS}${id}` }, { name: 'coding', valueCoding: { system: CS, version: '2', code: 'pear', display: 'Poire' } },
        ]);
        // Was a 400 (the supplement's code system drawn on by no include) while $expand answered.
        expect(outcome(checked)).toEqual({ result: true, display: 'Pear' });
        const r = await expand([{ name: 'url', valueUri: `${VS}${id}` }]);
        expect(r.status).toBe(200);
        expect(used(r)).toEqual([`${SUPPLEMENT}|1`]);
      }
    });

    test("a value set defined by its expansion shows its supplement's display and designations, itself or imported", async () => {
      for (const id of ['expanded', 'imports-expanded']) {
        // Was "Pear": the expansion's entries were not supplemented. Its display is in its code system version's language.
        const fr = await expand([{ name: 'url', valueUri: `${VS}${id}` }, { name: 'displayLanguage', valueCode: 'fr' }, { name: 'includeDesignations', valueBoolean: true }]);
        expect(fr.status).toBe(200);
        expect(entry(fr, 'pear')).toMatchObject({ display: 'Poire', designation: [{ language: 'en', use: PREFERRED, value: 'Pear' }] });
        const plain = await expand([{ name: 'url', valueUri: `${VS}${id}` }, { name: 'includeDesignations', valueBoolean: true }]);
        expect(entry(plain, 'pear')).toMatchObject({ display: 'Pear', designation: [{ language: 'fr', value: 'Poire' }] });
      }
    });

    test("the supplements an imported value set names are applied to its codes and named in used-supplement", async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}importer` }, { name: 'displayLanguage', valueCode: 'fr' }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(r.status).toBe(200);
      expect(entry(r, 'pear')).toMatchObject({ display: 'Poire', designation: [{ language: 'en', use: PREFERRED, value: 'Pear' }] });
      expect(used(r)).toEqual([`${SUPPLEMENT}|1`]);
      const missing = await expand([{ name: 'url', valueUri: `${VS}imports-missing` }]);
      expect(errorIssue(missing, 400)).toEqual({
        severity: 'error', code: 'not-found', text: `The supplement 'http://cinder.test/CodeSystem/dsg-nothing' that '${VS}needs-missing' names could not be found`,
      });
    });

    test('the designations an include gives a code its code system lacks (unknown, or a fragment) are listed and count for displayLanguage', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}listed` }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(r.status).toBe(200);
      expect(entry(r, 'x1')).toMatchObject({ display: 'Ex one', designation: [{ language: 'de', value: 'Ix eins' }] });
      expect(entry(r, 'absent')).toMatchObject({ display: 'Absent', designation: [{ language: 'de', value: 'Abwesend' }] });
      const german = await expand([{ name: 'url', valueUri: `${VS}listed` }, { name: 'displayLanguage', valueCode: 'de' }]);
      expect(entry(german, 'x1')?.display).toBe('Ix eins');
      expect(entry(german, 'absent')?.display).toBe('Abwesend');
    });

    test('with a translated display, only the designation it came from is left out, not others of the same text', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'displayLanguage', valueCode: 'de' }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(r.status).toBe(200);
      expect(entry(r, 'kiwi')).toMatchObject({ display: 'Kiwi' });
      expect(entry(r, 'kiwi')?.designation).toEqual([
        { language: 'en', use: PREFERRED, value: 'Kiwifruit' },
        { language: 'nl', value: 'Kiwi' },
        { language: 'en', use: { system: 'http://snomed.info/sct', code: '900000000000013009' }, value: 'Kiwi' },
      ]);
    });

    test('an answer read in Accept-Language varies by it; one given displayLanguage does not', async () => {
      const url = `${t.fhir('t1')}/ValueSet/$expand?url=${encodeURIComponent(`${VS}all`)}`;
      const byHeader = await t.request(url, fhirInit(token, 'GET', undefined, { 'Accept-Language': 'de' }));
      expect(byHeader.status).toBe(200);
      expect(byHeader.headers.get('vary') ?? '').toContain('Accept-Language');
      const withoutHeader = await t.request(url, fhirInit(token));
      expect(withoutHeader.headers.get('vary') ?? '').toContain('Accept-Language');
      const byParameter = await t.request(`${url}&displayLanguage=de`, fhirInit(token, 'GET', undefined, { 'Accept-Language': 'nl' }));
      expect(byParameter.status).toBe(200);
      expect(byParameter.headers.get('vary') ?? '').not.toContain('Accept-Language');
      const validate = `${t.fhir('t1')}/ValueSet/$validate-code?url=${encodeURIComponent(`${VS}all`)}&system=${encodeURIComponent(CS)}&code=kiwi`;
      const checked = await t.request(validate, fhirInit(token, 'GET', undefined, { 'Accept-Language': 'de' }));
      expect(checked.status).toBe(200);
      expect(checked.headers.get('vary') ?? '').toContain('Accept-Language');
      const checkedByParameter = await t.request(`${validate}&displayLanguage=de`, fhirInit(token));
      expect(checkedByParameter.headers.get('vary') ?? '').not.toContain('Accept-Language');
    });
  });
});
