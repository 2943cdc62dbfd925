import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { craftToken } from '../helpers/fhir.ts';
import {
  ANIMALS,
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
  t = await createTestApp();
  token = await t.token();
  await putTerminologyFixtures(t, token);
});
afterAll(() => t.close());

const param = (r: { body: { parameter?: Param[] } }, name: string) => r.body.parameter?.find((p) => p.name === name);

describe('CodeSystem/{id}/$validate-code', () => {
  test('validates against the stored CodeSystem of that id, whatever version is latest (GET and POST)', async () => {
    // animals-1 is version 1.0.0, which has 'wolf'; the latest (2.0.0) does not.
    expect(outcome(await getOperation(t, token, 'CodeSystem/animals-1/$validate-code', { code: 'wolf' }))).toEqual({ result: true, display: 'Wolf' });
    expect(outcome(await getOperation(t, token, 'CodeSystem/animals-2/$validate-code', { code: 'wolf' }))).toEqual({
      result: false,
      message: `Unknown code 'wolf' in the CodeSystem '${ANIMALS}' version '2.0.0'`,
    });
    const post = await postOperation(t, token, 'CodeSystem/animals-1/$validate-code', [
      { name: 'coding', valueCoding: { system: ANIMALS, code: 'wolf', display: 'Wolf' } },
      { name: 'abstract', valueBoolean: false },
    ]);
    expect(outcome(post)).toEqual({ result: true, display: 'Wolf' });
    const cc = await postOperation(t, token, 'CodeSystem/animals-2/$validate-code', [
      { name: 'codeableConcept', valueCodeableConcept: { coding: [{ system: 'http://other', code: 'x' }, { system: ANIMALS, code: 'platypus' }] } },
    ]);
    expect(outcome(cc)).toMatchObject({ result: true, display: 'Platypus' });
  });

  test('url and version, when given too, must be the stored CodeSystem\'s', async () => {
    expect(outcome(await getOperation(t, token, 'CodeSystem/animals-1/$validate-code', { url: ANIMALS, version: '1.0.0', code: 'dog' })).result).toBe(true);
    expect(outcome(await getOperation(t, token, 'CodeSystem/animals-1/$validate-code', { url: `${ANIMALS}|1.0.0`, code: 'dog' })).result).toBe(true);
    const otherUrl = await getOperation(t, token, 'CodeSystem/animals-1/$validate-code', { url: 'http://cinder.test/CodeSystem/colors', code: 'red' });
    expect(errorIssue(otherUrl, 400).text).toBe(`'url' is 'http://cinder.test/CodeSystem/colors', but CodeSystem/animals-1 is the CodeSystem '${ANIMALS}'`);
    const otherVersion = await getOperation(t, token, 'CodeSystem/animals-1/$validate-code', { version: '2.0.0', code: 'dog' });
    expect(errorIssue(otherVersion, 400).text).toBe("'version' is '2.0.0', but CodeSystem/animals-1 is version '1.0.0'");
    const inline = await postOperation(t, token, 'CodeSystem/animals-1/$validate-code', [
      { name: 'codeSystem', resource: { resourceType: 'CodeSystem', url: 'http://x', concept: [{ code: 'a' }] } },
      { name: 'code', valueCode: 'a' },
    ]);
    expect(errorIssue(inline, 400).text).toContain("an inline 'codeSystem' cannot be given with a CodeSystem id");
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/animals-1/$validate-code', {}), 400).code).toBe('invalid');
  });

  test('an unknown or deleted id is a 404 OperationOutcome', async () => {
    const unknown = await getOperation(t, token, 'CodeSystem/no-such-id/$validate-code', { code: 'dog' });
    expect(errorIssue(unknown, 404)).toEqual({ severity: 'error', code: 'not-found', text: 'CodeSystem/no-such-id is not known' });
    const posted = await postOperation(t, token, 'CodeSystem/no-such-id/$validate-code', [{ name: 'code', valueCode: 'dog' }]);
    expect(errorIssue(posted, 404).code).toBe('not-found');
    await putResource(t, token, { resourceType: 'CodeSystem', id: 'short-lived', url: 'http://cinder.test/CodeSystem/short-lived', status: 'active', content: 'complete', concept: [{ code: 'a' }] });
    expect(outcome(await getOperation(t, token, 'CodeSystem/short-lived/$validate-code', { code: 'a' })).result).toBe(true);
    expect((await t.request(`${t.fhir()}/CodeSystem/short-lived`, fhirInit(token, 'DELETE'))).status).toBeLessThan(300);
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/short-lived/$validate-code', { code: 'a' }), 404).code).toBe('not-found');
  });

  test('a stored CodeSystem without a url is a 400, not a 500', async () => {
    await putResource(t, token, { resourceType: 'CodeSystem', id: 'no-url', status: 'draft', content: 'complete', concept: [{ code: 'a' }] });
    const r = await getOperation(t, token, 'CodeSystem/no-url/$validate-code', { code: 'a' });
    expect(errorIssue(r, 400).text).toBe('CodeSystem/no-url has no url, so its codes cannot be referenced');
  });
});

describe('CodeSystem/{id}/$lookup', () => {
  test('looks the code up in the stored CodeSystem of that id (GET and POST)', async () => {
    const get = await getOperation(t, token, 'CodeSystem/animals-1/$lookup', { code: 'wolf' });
    expect(get.status).toBe(200);
    expect(param(get, 'version')?.valueString).toBe('1.0.0');
    expect(param(get, 'display')?.valueString).toBe('Wolf');
    const post = await postOperation(t, token, 'CodeSystem/animals-1/$lookup', [{ name: 'coding', valueCoding: { system: ANIMALS, code: 'dog' } }, { name: 'property', valueCode: 'legs' }]);
    expect(post.status).toBe(200);
    expect(param(post, 'display')?.valueString).toBe('Dog');
    expect(post.body.parameter?.filter((p) => p.name === 'property')).toEqual([{ name: 'property', part: [{ name: 'code', valueCode: 'legs' }, { name: 'value', valueInteger: 4 }] }]);
    expect(param(await getOperation(t, token, 'CodeSystem/animals-1/$lookup', { system: ANIMALS, version: '1.0.0', code: 'cat' }), 'display')?.valueString).toBe('Cat');
  });

  test('unknown id 404; unknown code 404; another system or version 400', async () => {
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/nope/$lookup', { code: 'dog' }), 404).text).toBe('CodeSystem/nope is not known');
    expect(errorIssue(await postOperation(t, token, 'CodeSystem/nope/$lookup', [{ name: 'code', valueCode: 'dog' }]), 404).code).toBe('not-found');
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/animals-2/$lookup', { code: 'wolf' }), 404).text).toBe(
      `Unknown code 'wolf' in the CodeSystem '${ANIMALS}' version '2.0.0'`,
    );
    const otherSystem = await postOperation(t, token, 'CodeSystem/animals-1/$lookup', [{ name: 'coding', valueCoding: { system: 'http://other', code: 'dog' } }]);
    expect(errorIssue(otherSystem, 400).text).toBe(`'coding.system' is 'http://other', but CodeSystem/animals-1 is the CodeSystem '${ANIMALS}'`);
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/animals-1/$lookup', { code: 'dog', version: '9' }), 400).text).toBe(
      "'version' is '9', but CodeSystem/animals-1 is version '1.0.0'",
    );
    expect(errorIssue(await getOperation(t, token, 'CodeSystem/animals-1/$lookup', {}), 400).code).toBe('invalid');
  });

  test('needs read access to CodeSystem', async () => {
    const limited = await t.tokenFor('t1', ['system/ValueSet.read']);
    expect(errorIssue(await getOperation(t, limited, 'CodeSystem/animals-1/$lookup', { code: 'dog' }), 403).code).toBe('forbidden');
    expect(errorIssue(await getOperation(t, limited, 'CodeSystem/animals-1/$validate-code', { code: 'dog' }), 403).code).toBe('forbidden');
  });
});

describe('terminology operations under a SMART v2 scope filter on their type', () => {
  test('are refused (403): they read the terminology whole, and a ValueSet or CodeSystem outside the filter is not readable', async () => {
    const valueSets = await craftToken(t, `system/ValueSet.rs?url=${VS}versioned system/CodeSystem.rs`);
    expect((await t.request(`${t.fhir()}/ValueSet/mammals`, fhirInit(valueSets))).status).toBe(403);
    for (const [path, query] of [['ValueSet/mammals/$expand', {}], ['ValueSet/$expand', { url: `${VS}mammals` }], ['ValueSet/versioned-1/$expand', {}],
      ['ValueSet/$validate-code', { url: `${VS}mammals`, system: ANIMALS, code: 'dog' }], ['ValueSet/mammals/$validate-code', { system: ANIMALS, code: 'dog' }]] as const) {
      expect({ path, code: errorIssue(await getOperation(t, valueSets, path, query), 403).code }).toEqual({ path, code: 'forbidden' });
    }
    const codeSystems = await craftToken(t, 'system/CodeSystem.rs?url=http://example.org/none system/ValueSet.rs');
    expect((await t.request(`${t.fhir()}/CodeSystem/animals-1`, fhirInit(codeSystems))).status).toBe(403);
    for (const [path, query] of [['CodeSystem/animals-1/$lookup', { code: 'dog' }], ['CodeSystem/$lookup', { system: ANIMALS, code: 'dog' }],
      ['CodeSystem/animals-1/$validate-code', { code: 'dog' }], ['CodeSystem/$validate-code', { url: ANIMALS, code: 'dog' }]] as const) {
      expect({ path, code: errorIssue(await getOperation(t, codeSystems, path, query), 403).code }).toEqual({ path, code: 'forbidden' });
    }
    // Unfiltered read of ValueSet: answered over R4 core's code systems, but the tenant's CodeSystem outside the
    // CodeSystem filter is not read (src/terminology/code-system-reach.ts).
    expect(errorIssue(await getOperation(t, codeSystems, 'ValueSet/$validate-code', { url: `${VS}mammals`, system: ANIMALS, code: 'dog' }), 403).code).toBe('forbidden');
    const gender = 'http://hl7.org/fhir/ValueSet/administrative-gender';
    expect(outcome(await getOperation(t, codeSystems, 'ValueSet/$validate-code', { url: gender, system: 'http://hl7.org/fhir/administrative-gender', code: 'male' })).result).toBe(true);
    expect((await getOperation(t, valueSets, 'CodeSystem/animals-1/$lookup', { code: 'dog' })).status).toBe(200);
  });
});

describe('ValueSet/{id} with url or valueSetVersion given too', () => {
  test('they must be the stored ValueSet\'s; an inline valueSet is refused', async () => {
    const base = { system: ANIMALS, code: 'dog' };
    expect(outcome(await getOperation(t, token, 'ValueSet/versioned-1/$validate-code', { ...base, url: `${VS}versioned`, valueSetVersion: '1' })).result).toBe(true);
    const url = await getOperation(t, token, 'ValueSet/versioned-1/$validate-code', { ...base, url: `${VS}mammals` });
    expect(errorIssue(url, 400).text).toBe(`'url' is '${VS}mammals', but ValueSet/versioned-1 has the url '${VS}versioned'`);
    const version = await getOperation(t, token, 'ValueSet/versioned-1/$expand', { valueSetVersion: '2' });
    expect(errorIssue(version, 400).text).toBe("'valueSetVersion' is '2', but ValueSet/versioned-1 is version '1'");
    const inline = await postOperation(t, token, 'ValueSet/versioned-1/$validate-code', [
      { name: 'valueSet', resource: { resourceType: 'ValueSet', compose: { include: [{ system: ANIMALS }] } } },
      { name: 'code', valueCode: 'dog' },
      { name: 'system', valueUri: ANIMALS },
    ]);
    expect(errorIssue(inline, 400).text).toContain("an inline 'valueSet' cannot be given with a ValueSet id");
  });

  test('at type level, a url|version and a valueSetVersion that disagree are a 400 (not the one or the other)', async () => {
    const base = { system: ANIMALS, code: 'dog' };
    expect(outcome(await getOperation(t, token, 'ValueSet/$validate-code', { ...base, url: `${VS}versioned|1`, valueSetVersion: '1' })).result).toBe(true);
    for (const path of ['ValueSet/$validate-code', 'ValueSet/$expand']) {
      const r = await getOperation(t, token, path, { ...base, url: `${VS}versioned|1`, valueSetVersion: '2' });
      expect(errorIssue(r, 400).text).toBe("'valueSetVersion' is '2', but 'url' names version '1'");
      expect((r.body.issue as unknown as { expression: string[] }[])[0]!.expression).toEqual(['valueSetVersion']);
    }
  });
});

describe('CapabilityStatement', () => {
  test('lists $validate-code, $lookup, $subsumes and $find-matches on CodeSystem (their OperationDefinitions cover type and instance level)', async () => {
    const res = await t.request(`${t.fhir()}/metadata`);
    const cs = (await res.json()) as { rest: { resource: { type: string; operation?: { name: string; definition: string }[] }[] }[] };
    const ops = cs.rest[0]?.resource.find((r) => r.type === 'CodeSystem')?.operation;
    expect(ops).toEqual([
      { name: 'validate-code', definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-validate-code' },
      { name: 'lookup', definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-lookup' },
      { name: 'subsumes', definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-subsumes' },
      { name: 'find-matches', definition: 'http://hl7.org/fhir/OperationDefinition/CodeSystem-find-matches' },
      { name: 'validate', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate' },
      ...['meta', 'meta-add', 'meta-delete', 'graphql'].map((name) => ({ name, definition: `http://hl7.org/fhir/OperationDefinition/Resource-${name}` })),
      { name: 'diff', definition: 'urn:cinder:OperationDefinition:diff' },
    ]);
  });
});
