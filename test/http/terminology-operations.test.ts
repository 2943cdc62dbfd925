import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import {
  ANIMALS,
  codeVersions,
  errorIssue,
  getOperation,
  outcome,
  type Param,
  postOperation,
  putResource,
  putTerminologyFixtures,
  VS,
} from '../helpers/terminology-http.ts';

let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await createTestApp({ env: { CINDER_MAX_EXPANSION_SIZE: '10' } });
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

type Contains = { system: string; version?: string; code: string; display?: string; abstract?: boolean; inactive?: boolean };
type Expansion = { total: number; offset: number; identifier: string; timestamp: string; contains: Contains[]; parameter: Param[] };

async function expand(query: Record<string, string>, path = 'ValueSet/$expand'): Promise<Expansion> {
  const r = await getOperation(t, token, path, query);
  expect(r.status).toBe(200);
  expect(r.body.resourceType).toBe('ValueSet');
  return r.body.expansion as Expansion;
}

const partsOf = (r: { body: { parameter?: Param[] } }, name: string) => (r.body.parameter ?? []).filter((p) => p.name === name);

describe('CodeSystem/$validate-code', () => {
  test('code in a CodeSystem, with display, version and abstract', async () => {
    const v = (parameter: Param[]) => postOperation(t, token, 'CodeSystem/$validate-code', parameter);
    expect(outcome(await v([{ name: 'url', valueUri: ANIMALS }, { name: 'code', valueCode: 'octopus' }]))).toEqual({ result: true, display: 'Octopus' });
    const wolf = outcome(await v([{ name: 'url', valueUri: ANIMALS }, { name: 'code', valueCode: 'wolf' }]));
    expect(wolf).toEqual({ result: false, message: "Unknown code 'wolf' in the CodeSystem 'http://cinder.test/CodeSystem/animals' version '2.0.0'" });
    expect(outcome(await v([{ name: 'url', valueUri: ANIMALS }, { name: 'version', valueString: '1.0.0' }, { name: 'code', valueCode: 'wolf' }])).result).toBe(true);
    const display = outcome(await v([{ name: 'coding', valueCoding: { system: ANIMALS, code: 'cat', display: 'Kat' } }]));
    expect(display.result).toBe(false);
    expect(display.message).toContain("Wrong Display Name 'Kat'");
    const abstract = outcome(await v([{ name: 'url', valueUri: ANIMALS }, { name: 'code', valueCode: 'animal' }, { name: 'abstract', valueBoolean: false }]));
    expect(abstract.result).toBe(false);
  });

  test('GET form; an unknown CodeSystem answers false; a missing code is a 400', async () => {
    expect(outcome(await getOperation(t, token, 'CodeSystem/$validate-code', { url: 'http://cinder.test/CodeSystem/animals-ci', code: 'cAt' })).result).toBe(true);
    const unknown = await getOperation(t, token, 'CodeSystem/$validate-code', { url: 'http://cinder.test/CodeSystem/none', code: 'x' });
    expect(outcome(unknown)).toEqual({
      result: false, message: "A definition for CodeSystem 'http://cinder.test/CodeSystem/none' could not be found, so the code cannot be validated",
    });
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/$validate-code', { url: ANIMALS }), 400).code).toBe('invalid');
  });
});

describe('CodeSystem/$lookup', () => {
  test('display, designations, properties with parent and child', async () => {
    const r = await getOperation(t, token, 'CodeSystem/$lookup', { system: ANIMALS, code: 'mammal' });
    expect(r.status).toBe(200);
    expect(partsOf(r, 'name')[0]?.valueString).toBe('Animals');
    expect(partsOf(r, 'version')[0]?.valueString).toBe('2.0.0');
    expect(partsOf(r, 'display')[0]?.valueString).toBe('Mammal');
    const props = partsOf(r, 'property').map((p) => {
      const [code, value] = p.part as Param[];
      return `${code?.valueCode}=${String(value?.valueCode ?? value?.valueBoolean)}`;
    });
    expect(props).toEqual(['inactive=false', 'parent=vertebrate', 'child=dog', 'child=cat', 'child=whale', 'child=mammoth', 'child=platypus']);
    const dog = await postOperation(t, token, 'CodeSystem/$lookup', [{ name: 'coding', valueCoding: { system: ANIMALS, code: 'dog' } }, { name: 'property', valueCode: 'legs' }]);
    // The display leads, as a designation in the CodeSystem's language.
    expect(partsOf(dog, 'designation')[0]?.part).toEqual([
      { name: 'language', valueCode: 'en' },
      { name: 'use', valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/hl7TermMaintInfra', code: 'preferredForLanguage', display: 'Preferred For Language' } },
      { name: 'value', valueString: 'Dog' },
    ]);
    expect(partsOf(dog, 'designation')[1]?.part).toEqual([
      { name: 'language', valueCode: 'en' },
      { name: 'use', valueCoding: { system: 'http://snomed.info/sct', code: '900000000000013009', display: 'Synonym' } },
      { name: 'value', valueString: 'Domestic dog' },
    ]);
    expect(partsOf(dog, 'property')).toEqual([{ name: 'property', part: [{ name: 'code', valueCode: 'legs' }, { name: 'value', valueInteger: 4 }] }]);
  });

  test('core code systems; unknown code 404; code without system 400', async () => {
    const r = await getOperation(t, token, 'CodeSystem/$lookup', { system: 'http://hl7.org/fhir/administrative-gender', code: 'other' });
    expect(partsOf(r, 'display')[0]?.valueString).toBe('Other');
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/$lookup', { system: ANIMALS, code: 'yeti' }), 404).text).toContain("Unknown code 'yeti'");
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/$lookup', { system: 'urn:none', code: 'yeti' }), 404).code).toBe('not-found');
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/$lookup', { code: 'dog' }), 400).code).toBe('invalid');
  });
});

describe('supplements in CodeSystem operations', () => {
  test('a supplement is not a code system to validate or look codes up in', async () => {
    const SUPPLEMENT = 'http://cinder.test/CodeSystem/animals-nl';
    await putResource(t, token, { resourceType: 'CodeSystem', id: 'animals-nl', url: SUPPLEMENT, version: '1', status: 'active', content: 'supplement', supplements: ANIMALS, concept: [{ code: 'dog', designation: [{ language: 'nl', value: 'hond' }] }] });
    const r = await postOperation(t, token, 'CodeSystem/$validate-code', [{ name: 'coding', valueCoding: { system: SUPPLEMENT, code: 'dog' } }]);
    expect(outcome(r)).toEqual({ result: false, message: `CodeSystem ${SUPPLEMENT}|1 is a supplement, so can't be used as a value in Coding.system` });
    const issue = ((r.body.parameter ?? []).find((p) => p.name === 'issues')?.resource as { issue: { severity: string; code: string; expression: string[] }[] }).issue[0];
    expect(issue).toMatchObject({ severity: 'error', code: 'invalid', expression: ['Coding.system'] });
    // No version of it is echoed, and it is named as the unknown code system the answer rests on, as the reference servers answer.
    const named = (name: string) => (r.body.parameter ?? []).filter((p) => p.name === name).map((p) => Object.entries(p).find(([k]) => k.startsWith('value'))?.[1]);
    expect([named('system'), named('version'), named('x-caused-by-unknown-system')]).toEqual([[SUPPLEMENT], [], [SUPPLEMENT]]);
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/$lookup', { system: SUPPLEMENT, code: 'dog' }), 400).text).toContain('is a supplement');
    // Not applied unasked: the base code system's lookup has no Dutch designation.
    const base = await getOperation(t, token, 'CodeSystem/$lookup', { system: ANIMALS, code: 'dog' });
    expect(JSON.stringify(partsOf(base, 'designation'))).not.toContain('hond');
  });
});

describe('ValueSet/$expand', () => {
  test('type and instance level, with total and flags', async () => {
    const e = await expand({ url: `${VS}dog-ancestors` });
    expect(e.total).toBe(4);
    expect(e.identifier).toStartWith('urn:uuid:');
    expect(e.timestamp).toBe('2026-01-15T10:00:00.000Z');
    expect(e.contains.map((c) => c.code)).toEqual(['animal', 'vertebrate', 'mammal', 'dog']);
    // One version of the code system: it is named by used-codesystem, not repeated on each code.
    expect(e.contains[0]).toEqual({ system: ANIMALS, code: 'animal', display: 'Animal', abstract: true });
    expect(e.parameter).toContainEqual({ name: 'used-codesystem', valueUri: `${ANIMALS}|2.0.0` });
    const instance = await expand({}, 'ValueSet/land-mammals/$expand');
    expect(instance.contains.map((c) => c.code)).toEqual(['dog', 'cat', 'mammoth', 'platypus']);
    expect(instance.contains[2]?.inactive).toBe(true);
    const inline = await postOperation(t, token, 'ValueSet/$expand', [
      { name: 'valueSet', resource: { resourceType: 'ValueSet', compose: { include: [{ system: ANIMALS, filter: [{ property: 'legs', op: '=', value: '6' }] }] } } },
    ]);
    expect((inline.body.expansion as Expansion).contains.map((c) => c.code)).toEqual(['ant']);
  });

  test('filter, activeOnly, count and offset', async () => {
    expect((await expand({ url: `${VS}all-animals`, filter: 'IN' })).contains.map((c) => c.code)).toEqual(['penguin', 'invertebrate', 'insect']);
    expect((await expand({ url: `${VS}mammals`, activeOnly: 'true' })).contains.map((c) => c.code)).not.toContain('mammoth');
    const page = await expand({ url: `${VS}all-animals`, count: '3', offset: '2' });
    expect(page.contains.map((c) => c.code)).toEqual(['mammal', 'dog', 'cat']);
    expect(page).toMatchObject({ total: 17, offset: 2 });
  });

  test('system-version is a default, force-system-version overrides, check-system-version refuses another pinned version', async () => {
    const codes = async (parameter: Param[]) => {
      const r = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'count', valueInteger: 10 }, ...parameter]);
      expect(r.status).toBe(200);
      const e = r.body.expansion as Expansion;
      return { codes: codeVersions(e), total: e.total, parameter: e.parameter };
    };
    // all-animals pins no version: 2.0.0 (17 codes, with platypus) unless told otherwise; 1.0.0 has wolf instead.
    const byDefault = await codes([{ name: 'url', valueUri: `${VS}all-animals` }, { name: 'system-version', valueUri: `${ANIMALS}|1.0.0` }]);
    expect(byDefault.codes).toContain('wolf@1.0.0');
    expect(byDefault.parameter).toContainEqual({ name: 'system-version', valueUri: `${ANIMALS}|1.0.0` });
    expect(byDefault.parameter).toContainEqual({ name: 'used-codesystem', valueUri: `${ANIMALS}|1.0.0` });
    // A default does not change a pinned version; force does, with a wildcard too.
    expect((await codes([{ name: 'url', valueUri: `${VS}animals-v2` }, { name: 'system-version', valueUri: `${ANIMALS}|1.0.0` }])).codes).not.toContain('wolf@1.0.0');
    const forced = await codes([{ name: 'url', valueUri: `${VS}animals-v2` }, { name: 'force-system-version', valueUri: `${ANIMALS}|1.x` }]);
    expect(forced.codes).toContain('wolf@1.0.0');
    expect(forced.codes.every((c) => c.endsWith('@1.0.0'))).toBe(true);
    // check-system-version: a default where nothing is pinned, an error where another version is.
    expect((await codes([{ name: 'url', valueUri: `${VS}all-animals` }, { name: 'check-system-version', valueUri: `${ANIMALS}|1.0.0` }])).codes).toContain('wolf@1.0.0');
    expect((await codes([{ name: 'url', valueUri: `${VS}animals-v1` }, { name: 'check-system-version', valueUri: `${ANIMALS}|1.0.x` }])).codes).toContain('wolf@1.0.0');
    const refused = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}animals-v2` }, { name: 'check-system-version', valueUri: `${ANIMALS}|1.0.x` }]);
    // HL7's VALUESET_VERSION_CHECK, naming the version the pin resolves to, an `exception` as the reference servers give it.
    expect(errorIssue(refused, 400)).toMatchObject({ code: 'exception', text: `The version '2.0.0' is not allowed for system '${ANIMALS}': required to be '1.0.x' by a version-check parameter` });
    // A pattern pinned is judged by the version it resolves to: 1.x is 1.0.0 here, which 1.0.x allows.
    const pattern = { resourceType: 'ValueSet', status: 'active', compose: { include: [{ system: ANIMALS, version: '1.x' }] } };
    expect((await codes([{ name: 'valueSet', resource: pattern }, { name: 'check-system-version', valueUri: `${ANIMALS}|1.0.x` }])).codes).toContain('wolf@1.0.0');
    const patternRefused = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'valueSet', resource: pattern }, { name: 'check-system-version', valueUri: `${ANIMALS}|1.1.x` }]);
    expect(errorIssue(patternRefused, 400).text).toBe(`The version '1.0.0' is not allowed for system '${ANIMALS}': required to be '1.1.x' by a version-check parameter`);
    const unversioned = await postOperation(t, token, 'ValueSet/$expand', [{ name: 'url', valueUri: `${VS}all-animals` }, { name: 'system-version', valueUri: ANIMALS }]);
    expect(errorIssue(unversioned, 400).code).toBe('invalid');
  });

  test('an exclude pinned to a version no include pins removes that version\'s codes from the others', async () => {
    const diff = await postOperation(t, token, 'ValueSet/$expand', [
      { name: 'valueSet', resource: { resourceType: 'ValueSet', compose: { include: [{ system: ANIMALS, version: '2.0.0' }], exclude: [{ system: ANIMALS, version: '1.0.0' }] } } },
    ]);
    expect((diff.body.expansion as Expansion).contains.map((c) => `${c.code}@${c.version}`)).toEqual(['platypus@2.0.0']);
    // Both versions included: the exclude removes only its own version's code.
    const both = await postOperation(t, token, 'ValueSet/$expand', [
      {
        name: 'valueSet',
        resource: {
          resourceType: 'ValueSet',
          compose: { include: [{ system: ANIMALS, version: '1.0.0', concept: [{ code: 'dog' }] }, { system: ANIMALS, version: '2.0.0', concept: [{ code: 'dog' }] }], exclude: [{ system: ANIMALS, version: '1.0.0', concept: [{ code: 'dog' }] }] },
        },
      },
    ]);
    expect((both.body.expansion as Expansion).contains.map((c) => `${c.code}@${c.version}`)).toEqual(['dog@2.0.0']);
  });

  test('includeDesignations lists each code\'s designations; excludeNested is echoed', async () => {
    const r = await postOperation(t, token, 'ValueSet/$expand', [
      { name: 'url', valueUri: `${VS}listed` }, { name: 'includeDesignations', valueBoolean: true }, { name: 'excludeNested', valueBoolean: true },
    ]);
    const e = r.body.expansion as Expansion;
    const contains = e.contains as (Contains & { designation?: { language?: string; value: string }[] })[];
    expect(contains.find((c) => c.code === 'dog')?.designation?.map((d) => `${d.language}:${d.value}`)).toContain('en:Domestic dog');
    expect(contains.find((c) => c.code === 'animal')?.designation).toBeUndefined();
    expect(e.parameter).toContainEqual({ name: 'includeDesignations', valueBoolean: true });
    expect(e.parameter).toContainEqual({ name: 'excludeNested', valueBoolean: true });
    const plain = (await expand({ url: `${VS}listed` })).contains as (Contains & { designation?: unknown })[];
    expect(plain.find((c) => c.code === 'dog')?.designation).toBeUndefined();
  });

  test('an expansion over the configured limit is a 4xx too-costly; bad paging is a 400', async () => {
    const big = await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}all-animals` });
    const issue = errorIssue(big, 400);
    expect(issue.code).toBe('too-costly');
    expect(issue.text).toContain('more than 10 codes');
    expect(errorIssue(await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}all-animals`, count: '11' }), 400).code).toBe('too-costly');
    expect(errorIssue(await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}all-animals`, count: 'ten' }), 400).code).toBe('invalid');
    expect(errorIssue(await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}gone` }), 400).text).toBe(`A definition for the value Set '${VS}gone' could not be found`);
    expect(errorIssue(await getOperation(t, token, 'ValueSet/nope/$expand', {}), 404).code).toBe('not-found');
    expect(errorIssue(await getOperation(t, token, 'ValueSet/$expand', { url: `${VS}external-all` }), 400).text).toContain('cannot be expanded');
  });
});

describe('CapabilityStatement', () => {
  /** The operations every type lists after its own ($meta and friends, $graphql: R4 Resource operations). */
  const META = [...['meta', 'meta-add', 'meta-delete', 'graphql'].map((name) => `http://hl7.org/fhir/OperationDefinition/Resource-${name}`), 'urn:cinder:OperationDefinition:diff'];

  test('lists the terminology operations on ValueSet and CodeSystem', async () => {
    const res = await t.request(`${t.fhir()}/metadata`);
    const cs = (await res.json()) as { rest: { resource: { type: string; operation?: { name: string; definition: string }[] }[] }[] };
    const ops = (type: string) => cs.rest[0]?.resource.find((r) => r.type === type)?.operation?.map((o) => o.definition);
    expect(ops('ValueSet')).toEqual([
      'http://hl7.org/fhir/OperationDefinition/ValueSet-validate-code',
      'http://hl7.org/fhir/OperationDefinition/ValueSet-expand',
      'http://hl7.org/fhir/OperationDefinition/Resource-validate',
      ...META,
    ]);
    expect(ops('CodeSystem')).toEqual([
      'http://hl7.org/fhir/OperationDefinition/CodeSystem-validate-code',
      'http://hl7.org/fhir/OperationDefinition/CodeSystem-lookup',
      'http://hl7.org/fhir/OperationDefinition/CodeSystem-subsumes',
      'http://hl7.org/fhir/OperationDefinition/CodeSystem-find-matches',
      'http://hl7.org/fhir/OperationDefinition/Resource-validate',
      ...META,
    ]);
  });
});
