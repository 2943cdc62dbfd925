/**
 * `$expand`, `$lookup` and `CodeSystem/$validate-code` answered as HL7's reference terminology servers
 * answer the terminology ecosystem tests (`HL7/fhir-tx-ecosystem-ig`, compared whole by
 * `bench/tx-tests.ts --strict`): the expanded ValueSet keeps its metadata, `offset` only when asked,
 * designations around a translated display, the `designation` input, `Accept-Language`, the code
 * systems, value sets and supplements an expansion used (and the supplements' designations),
 * `excludeNested` false as a hierarchy, a missing code system version or supplement as `not-found`; `$lookup`'s
 * `system`, `code` and `abstract`; `$validate-code`'s echo of the coding. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { errorIssue, getOperation, type OperationResponse, type Param, postOperation, putResource } from '../helpers/terminology-http.ts';

const CS = 'http://cinder.test/CodeSystem/eco-colours';
const VS = 'http://cinder.test/ValueSet/eco-';
const USE = 'http://cinder.test/CodeSystem/eco-uses';
const PREFERRED = { system: 'http://terminology.hl7.org/CodeSystem/hl7TermMaintInfra', code: 'preferredForLanguage', display: 'Preferred For Language' };

/** An extension on a designation: an expansion repeats it whole. */
const NOTE = { url: 'http://cinder.test/StructureDefinition/designation-note', valueString: 'as printed on the chart' };
const codeSystem = {
  resourceType: 'CodeSystem', id: 'eco-colours', url: CS, version: '1.0.0', name: 'EcoColours', status: 'active', content: 'complete', language: 'en',
  concept: [
    {
      code: 'warm', display: 'Warm colours', property: [{ code: 'notSelectable', valueBoolean: true }],
      concept: [
        { code: 'red', display: 'Red', designation: [{ language: 'de', value: 'Rot' }, { language: 'es', value: 'Rojo', extension: [NOTE] }, { language: 'de-CH', value: 'Rot (CH)' }] },
        { code: 'orange', display: 'Orange', designation: [{ language: 'en', use: { system: USE, code: 'short' }, value: 'Org' }] },
      ],
    },
    { code: 'blue', display: 'Blue' },
  ],
  property: [{ code: 'notSelectable', uri: 'http://hl7.org/fhir/concept-properties#notSelectable', type: 'boolean' }],
};
const all = {
  resourceType: 'ValueSet', id: 'eco-all', url: `${VS}all`, version: '2.1.0', name: 'EcoAll', status: 'active', experimental: false, date: '2026-03-01',
  language: 'en', compose: { include: [{ system: CS }] },
};
const imported = {
  resourceType: 'ValueSet', id: 'eco-imports', url: `${VS}imports`, version: '3.0.0', status: 'active',
  contained: [{ resourceType: 'ValueSet', id: 'blue', status: 'active', compose: { include: [{ system: CS, concept: [{ code: 'blue' }] }] } }],
  compose: { include: [{ valueSet: [`${VS}all|2.1.0`, '#blue'] }] },
};
const noneLeft = {
  resourceType: 'ValueSet', id: 'eco-none-left', url: `${VS}none-left`, status: 'active',
  compose: { include: [{ system: CS }], exclude: [{ system: CS }] },
};
const enumerated = {
  resourceType: 'ValueSet', id: 'eco-enumerated', url: `${VS}enumerated`, status: 'active',
  compose: { include: [{ system: CS, concept: [{ code: 'warm' }, { code: 'red', designation: [{ language: 'it', value: 'Rosso' }] }] }] },
};
const SUPPLEMENT = 'http://cinder.test/CodeSystem/eco-colours-nl';
const supplement = {
  resourceType: 'CodeSystem', id: 'eco-colours-nl', url: SUPPLEMENT, version: '0.2.0', status: 'active', content: 'supplement', supplements: CS, language: 'nl',
  concept: [{ code: 'red', display: 'Rood' }, { code: 'blue', designation: [{ language: 'fr', value: 'Bleu' }] }],
};
const supplemented = {
  resourceType: 'ValueSet', id: 'eco-supplemented', url: `${VS}supplemented`, status: 'active',
  extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-supplement', valueCanonical: `${SUPPLEMENT}|0.2.0` }], compose: { include: [{ system: CS }] },
};
const supplementIncluded = {
  resourceType: 'ValueSet', id: 'eco-supplement-included', url: `${VS}supplement-included`, status: 'active', compose: { include: [{ system: SUPPLEMENT }] },
};
const missingSupplement = {
  resourceType: 'ValueSet', id: 'eco-missing-supplement', url: `${VS}missing-supplement`, status: 'active',
  extension: [{ url: 'http://hl7.org/fhir/StructureDefinition/valueset-supplement', valueCanonical: 'http://cinder.test/CodeSystem/eco-nothing' }], compose: { include: [{ system: CS }] },
};
const missingVersion = {
  resourceType: 'ValueSet', id: 'eco-missing-version', url: `${VS}missing-version`, status: 'active', compose: { include: [{ system: CS, version: '9.9.9' }] },
};

type Contains = { system?: string; version?: string; code: string; display?: string; contains?: Contains[]; designation?: { language?: string; use?: unknown; value: string; extension?: unknown[] }[] };
const expansion = (r: OperationResponse) => r.body.expansion as { offset?: number; total?: number; parameter?: Param[]; contains?: Contains[] };
const entry = (r: OperationResponse, code: string) => expansion(r).contains?.find((c) => c.code === code);
const params = (r: OperationResponse, name: string) => (expansion(r).parameter ?? []).filter((p) => p.name === name).map((p) => p.valueUri ?? p.valueCode ?? p.valueString ?? p.valueBoolean);
const value = (r: OperationResponse, name: string) => {
  const p = r.body.parameter?.find((x) => x.name === name);
  return p === undefined ? undefined : Object.entries(p).find(([k]) => k.startsWith('value'))?.[1];
};

await eachStore((kind, fresh) => {
  describe(`terminology answers as the reference servers give them (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const expand = (parameter: Param[]) => postOperation(t, token, 'ValueSet/$expand', parameter);
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const r of [codeSystem, supplement, all, imported, noneLeft, enumerated, supplemented, supplementIncluded, missingSupplement, missingVersion]) await putResource(t, token, r);
    });
    afterAll(() => t.close());

    test('$expand keeps the value set metadata and gives `offset` only when the request pages by it', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}all` }]);
      expect(r.status).toBe(200);
      expect(r.body).toMatchObject({ resourceType: 'ValueSet', id: 'eco-all', url: `${VS}all`, version: '2.1.0', name: 'EcoAll', status: 'active', experimental: false, date: '2026-03-01', language: 'en' });
      expect(expansion(r).total).toBe(4);
      expect(expansion(r)).not.toHaveProperty('offset');
      const counted = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'count', valueInteger: 1 }]);
      expect(expansion(counted)).not.toHaveProperty('offset');
      expect(expansion(counted).contains?.map((c) => c.code)).toEqual(['warm']);
      const paged = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'offset', valueInteger: 2 }, { name: 'count', valueInteger: 1 }]);
      expect(expansion(paged)).toMatchObject({ offset: 2, total: 4 });
      expect(expansion(paged).contains?.map((c) => c.code)).toEqual(['orange']);
    });

    test('with a translated display, the designations hold the code system display and not the one shown', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'displayLanguage', valueCode: 'de' }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(r.status).toBe(200);
      expect(entry(r, 'red')).toMatchObject({ display: 'Rot' });
      expect(entry(r, 'red')?.designation).toEqual([
        { language: 'en', use: PREFERRED, value: 'Red' },
        { language: 'es', value: 'Rojo', extension: [NOTE] },
        { language: 'de-CH', value: 'Rot (CH)' },
      ]);
      // No German display: the code system's own is shown and is not repeated as a designation.
      expect(entry(r, 'orange')).toEqual({ system: CS, code: 'orange', display: 'Orange', designation: [{ language: 'en', use: { system: USE, code: 'short' }, value: 'Org' }] });
      const plain = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(entry(plain, 'red')).toMatchObject({ display: 'Red' });
      expect(entry(plain, 'red')?.designation).toEqual(codeSystem.concept[0]!.concept![0]!.designation);
    });

    test('`designation` lists only the designations of that language (exactly) or use, and is echoed', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'designation', valueString: 'urn:ietf:bcp:47|de' }, { name: 'designation', valueString: `${USE}|short` }]);
      expect(r.status).toBe(200);
      expect(entry(r, 'red')?.designation).toEqual([{ language: 'de', value: 'Rot' }]);
      expect(entry(r, 'orange')?.designation).toEqual([{ language: 'en', use: { system: USE, code: 'short' }, value: 'Org' }]);
      expect(entry(r, 'blue')).not.toHaveProperty('designation');
      expect(params(r, 'designation')).toEqual(['urn:ietf:bcp:47|de', `${USE}|short`]);
      const query = new URLSearchParams([['url', `${VS}all`], ['designation', 'urn:ietf:bcp:47|es'], ['designation', 'urn:ietf:bcp:47|de-CH']]);
      const got = await t.request(`${t.fhir('t1')}/ValueSet/$expand?${query}`, fhirInit(token));
      const g: OperationResponse = { status: got.status, body: (await got.json()) as OperationResponse['body'] };
      expect(g.status).toBe(200);
      expect(entry(g, 'red')?.designation).toEqual([{ language: 'es', value: 'Rojo', extension: [NOTE] }, { language: 'de-CH', value: 'Rot (CH)' }]);
      const tc = await t.request(`${t.fhir('t1')}/metadata?mode=terminology`);
      expect(((await tc.json()) as { expansion: { parameter: Param[] } }).expansion.parameter.map((p) => p.name)).toContain('designation');
    });

    test('Accept-Language stands for displayLanguage and is echoed; the parameter wins over it', async () => {
      const body = (parameter: Param[]) => ({ resourceType: 'Parameters', parameter });
      const res = await t.request(`${t.fhir('t1')}/ValueSet/$expand`, fhirInit(token, 'POST', body([{ name: 'url', valueUri: `${VS}all` }]), { 'Accept-Language': 'es' }));
      const r: OperationResponse = { status: res.status, body: (await res.json()) as OperationResponse['body'] };
      expect(r.status).toBe(200);
      expect(entry(r, 'red')?.display).toBe('Rojo');
      expect(params(r, 'displayLanguage')).toEqual(['es']);
      const both = await t.request(`${t.fhir('t1')}/ValueSet/$expand`, fhirInit(token, 'POST', body([{ name: 'url', valueUri: `${VS}all` }, { name: 'displayLanguage', valueCode: 'de' }]), { 'Accept-Language': 'es' }));
      const b: OperationResponse = { status: both.status, body: (await both.json()) as OperationResponse['body'] };
      expect(entry(b, 'red')?.display).toBe('Rot');
      expect(params(b, 'displayLanguage')).toEqual(['de']);
    });

    test('an Accept-Language list spaced as HTTP allows is echoed as a valid code, and the expansion is valid FHIR', async () => {
      const res = await t.request(`${t.fhir('t1')}/ValueSet/$expand?url=${encodeURIComponent(`${VS}all`)}&includeDesignations=true`, fhirInit(token, 'GET', undefined, { 'Accept-Language': 'fr,  es;q=0.9,\tde;q=0.8' }));
      const r: OperationResponse = { status: res.status, body: (await res.json()) as OperationResponse['body'] };
      expect(r.status).toBe(200);
      expect(entry(r, 'red')?.display).toBe('Rojo');
      expect(params(r, 'displayLanguage')).toEqual(['fr, es;q=0.9, de;q=0.8']);
      const checked = await t.request(`${t.fhir('t1')}/ValueSet/$validate`, fhirInit(token, 'POST', r.body));
      const outcome = (await checked.json()) as { issue: { severity: string; diagnostics?: string }[] };
      expect(outcome.issue.filter((i) => i.severity === 'error')).toEqual([]);
    });

    test('used-codesystem names the code systems drawn on even when no code of them is left; used-valueset the imported value sets', async () => {
      const none = await expand([{ name: 'url', valueUri: `${VS}none-left` }]);
      expect(none.status).toBe(200);
      expect(expansion(none)).toMatchObject({ total: 0 });
      expect(params(none, 'used-codesystem')).toEqual([`${CS}|1.0.0`]);
      const filtered = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'filter', valueString: 'no such colour' }]);
      expect(params(filtered, 'used-codesystem')).toEqual([`${CS}|1.0.0`]);
      const r = await expand([{ name: 'url', valueUri: `${VS}imports` }]);
      expect(r.status).toBe(200);
      // The contained value set is part of this one: not listed.
      expect(params(r, 'used-valueset')).toEqual([`${VS}all|2.1.0`]);
      expect(params(r, 'used-codesystem')).toEqual([`${CS}|1.0.0`]);
    });

    test('excludeNested false nests codes under their nearest ancestor in the expansion, unless paged or enumerated', async () => {
      const shape = (cs: Contains[] | undefined): unknown[] => (cs ?? []).map((c) => (c.contains === undefined ? c.code : { [c.code]: shape(c.contains) }));
      const url = { name: 'url', valueUri: `${VS}all` };
      const tree = await expand([url, { name: 'excludeNested', valueBoolean: false }]);
      expect(tree.status).toBe(200);
      expect(shape(expansion(tree).contains)).toEqual([{ warm: ['red', 'orange'] }, 'blue']);
      expect(expansion(tree).total).toBe(4);
      expect(params(tree, 'excludeNested')).toEqual([false]);
      expect(entry(tree, 'warm')).toMatchObject({ abstract: true, contains: [{ code: 'red', display: 'Red' }, { code: 'orange', display: 'Orange' }] });
      // A filter keeping a child but not its parent leaves the child at the top.
      const filtered = await expand([url, { name: 'excludeNested', valueBoolean: false }, { name: 'filter', valueString: 'e' }]);
      expect(shape(expansion(filtered).contains)).toEqual(['red', 'orange', 'blue']);
      expect(shape(expansion(await expand([url])).contains)).toEqual(['warm', 'red', 'orange', 'blue']);
      expect(shape(expansion(await expand([url, { name: 'excludeNested', valueBoolean: true }])).contains)).toEqual(['warm', 'red', 'orange', 'blue']);
      expect(shape(expansion(await expand([url, { name: 'excludeNested', valueBoolean: false }, { name: 'count', valueInteger: 3 }])).contains)).toEqual(['warm', 'red', 'orange']);
      const listed = await expand([{ name: 'url', valueUri: `${VS}enumerated` }, { name: 'excludeNested', valueBoolean: false }]);
      expect(shape(expansion(listed).contains)).toEqual(['warm', 'red']);
      const tc = await t.request(`${t.fhir('t1')}/metadata?mode=terminology`);
      expect(((await tc.json()) as { expansion: { hierarchical: boolean } }).expansion.hierarchical).toBe(true);
    });

    test("the designations a value set's include gives a concept join the code system's", async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}enumerated` }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(r.status).toBe(200);
      expect(entry(r, 'red')?.designation).toEqual([...codeSystem.concept[0]!.concept![0]!.designation, { language: 'it', value: 'Rosso' }]);
      const italian = await expand([{ name: 'url', valueUri: `${VS}enumerated` }, { name: 'displayLanguage', valueCode: 'it' }]);
      expect(entry(italian, 'red')?.display).toBe('Rosso');
      expect(entry(await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'displayLanguage', valueCode: 'it' }]), 'red')?.display).toBe('Red');
    });

    test("a value set's supplements add designations to its expansion and are named in used-supplement", async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}supplemented` }, { name: 'includeDesignations', valueBoolean: true }]);
      expect(r.status).toBe(200);
      expect(entry(r, 'red')?.designation).toEqual([...codeSystem.concept[0]!.concept![0]!.designation, { language: 'nl', value: 'Rood' }]);
      expect(entry(r, 'blue')?.designation).toEqual([{ language: 'fr', value: 'Bleu' }]);
      expect(params(r, 'used-supplement')).toEqual([`${SUPPLEMENT}|0.2.0`]);
      const dutch = await expand([{ name: 'url', valueUri: `${VS}supplemented` }, { name: 'displayLanguage', valueCode: 'nl' }]);
      expect(entry(dutch, 'red')?.display).toBe('Rood');
      // Without the value set naming it, a supplement is not applied.
      expect(params(await expand([{ name: 'url', valueUri: `${VS}all` }]), 'used-supplement')).toEqual([]);
      const missing = await expand([{ name: 'url', valueUri: `${VS}missing-supplement` }]);
      expect(errorIssue(missing, 400)).toMatchObject({ code: 'not-found', text: `The supplement 'http://cinder.test/CodeSystem/eco-nothing' that '${VS}missing-supplement' names could not be found` });
    });

    test('a supplement included as if it were a code system has no codes: $expand is a 400, $validate-code false', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}supplement-included` }]);
      expect(errorIssue(r, 400)).toMatchObject({
        code: 'invalid',
        text: `ValueSet '${VS}supplement-included' compose.include[0]: CodeSystem '${SUPPLEMENT}' version '0.2.0' is a supplement, so it cannot be expanded; include the code system it supplements ('${CS}')`,
      });
      const v = await postOperation(t, token, 'ValueSet/$validate-code', [{ name: 'url', valueUri: `${VS}supplement-included` }, { name: 'coding', valueCoding: { system: SUPPLEMENT, code: 'red' } }]);
      expect(value(v, 'result')).toBe(false);
      expect(String(value(v, 'message'))).toContain(`CodeSystem ${SUPPLEMENT}|0.2.0 is a supplement, so can't be used as a value in Coding.system`);
      // The code system it supplements still expands, with the supplement's designations where a value set names it.
      expect((await expand([{ name: 'url', valueUri: `${VS}supplemented` }])).status).toBe(200);
    });

    test('excludeNotForUI true leaves out the abstract codes that only group others', async () => {
      const shape = (cs: Contains[] | undefined): unknown[] => (cs ?? []).map((c) => (c.contains === undefined ? c.code : { [c.code]: shape(c.contains) }));
      const r = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'excludeNotForUI', valueBoolean: true }]);
      expect(r.status).toBe(200);
      expect(shape(expansion(r).contains)).toEqual(['red', 'orange', 'blue']);
      expect(expansion(r).total).toBe(3);
      expect(params(r, 'excludeNotForUI')).toEqual([true]);
      const nested = await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'excludeNotForUI', valueBoolean: true }, { name: 'excludeNested', valueBoolean: false }]);
      expect(shape(expansion(nested).contains)).toEqual(['red', 'orange', 'blue']);
      expect(shape(expansion(await expand([{ name: 'url', valueUri: `${VS}all` }, { name: 'excludeNotForUI', valueBoolean: false }])).contains)).toEqual(['warm', 'red', 'orange', 'blue']);
      const tc = await t.request(`${t.fhir('t1')}/metadata?mode=terminology`);
      expect(((await tc.json()) as { expansion: { parameter: Param[] } }).expansion.parameter.map((p) => p.name)).toContain('excludeNotForUI');
    });

    test('a code system version the server does not have is a 400 not-found', async () => {
      const r = await expand([{ name: 'url', valueUri: `${VS}missing-version` }]);
      expect(errorIssue(r, 400)).toEqual({
        severity: 'error', code: 'not-found',
        // HL7's UNKNOWN_CODESYSTEM_VERSION_EXP, naming the versions the server has.
        text: `A definition for CodeSystem '${CS}' version '9.9.9' could not be found, so the value set cannot be expanded. Valid versions: 1.0.0`,
      });
    });

    test('$lookup gives the system, the code as the code system has it, and whether it is abstract', async () => {
      const warm = await postOperation(t, token, 'CodeSystem/$lookup', [{ name: 'system', valueUri: CS }, { name: 'code', valueCode: 'warm' }]);
      expect(warm.status).toBe(200);
      expect([value(warm, 'system'), value(warm, 'code'), value(warm, 'abstract'), value(warm, 'version'), value(warm, 'display')]).toEqual([CS, 'warm', true, '1.0.0', 'Warm colours']);
      const red = await postOperation(t, token, 'CodeSystem/$lookup', [{ name: 'coding', valueCoding: { system: CS, code: 'red' } }]);
      expect([value(red, 'code'), value(red, 'abstract')]).toEqual(['red', false]);
    });

    test('CodeSystem/$validate-code echoes the code with the system and version it was checked against; display findings are at the display', async () => {
      const good = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: CS }, { name: 'code', valueCode: 'red' }]);
      expect(good.status).toBe(200);
      expect([value(good, 'result'), value(good, 'code'), value(good, 'system'), value(good, 'version'), value(good, 'display')]).toEqual([true, 'red', CS, '1.0.0', 'Red']);
      const bad = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'coding', valueCoding: { system: CS, code: 'purple' } }]);
      expect([value(bad, 'result'), value(bad, 'code'), value(bad, 'system'), value(bad, 'version')]).toEqual([false, 'purple', CS, '1.0.0']);
      // A wrong display is located at the display given, not at the code.
      const where = (r: OperationResponse) => ((r.body.parameter?.find((p) => p.name === 'issues')?.resource as { issue: { expression: string[] }[] }).issue).map((i) => i.expression[0]);
      expect(where(await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: CS }, { name: 'code', valueCode: 'red' }, { name: 'display', valueString: 'Blue' }]))).toEqual(['display']);
      expect(where(await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'coding', valueCoding: { system: CS, code: 'red', display: 'Blue' } }]))).toEqual(['Coding.display']);
      expect(where(await postOperation(t, token, 'ValueSet/$validate-code', [
        { name: 'url', valueUri: `${VS}all` }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: CS, code: 'red', display: 'Blue' }] } },
      ]))).toEqual(['CodeableConcept.coding[0].display']);
      // A code that is not a FHIR code (here a leading space, as a GET may carry it) is not echoed: the answer stays valid FHIR.
      const spaced = await getOperation(t, token, 'CodeSystem/$validate-code', { url: CS, code: ' red' });
      expect(value(spaced, 'result')).toBe(false);
      expect([value(spaced, 'code'), value(spaced, 'system')]).toEqual([undefined, undefined]);
      // A CodeableConcept has codes of its own, not one to echo.
      const cc = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'url', valueUri: CS }, { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: CS, code: 'red' }] } }]);
      expect(value(cc, 'result')).toBe(true);
      expect(cc.body.parameter?.map((p) => p.name)).not.toContain('code');
    });
  });
});
