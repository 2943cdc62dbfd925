import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

/**
 * What a Coding and an Attachment say about themselves, at any binding strength, and the URIs R4 defines
 * as absolute (HL7's validator test cases `contract-binding-test`, `mr-covid-bnd1`,
 * `attachment-with-wrong-size` and `vs-canonical-bad`).
 */
const issues = (outcome: Json) => ((outcome.issue ?? []) as Json[]).filter((i) => i.severity === 'error').map((i) => `${i.code} ${i.expression?.[0]}`);

const contract = (legalState: Json) => ({ resourceType: 'Contract', status: 'executed', legalState: { coding: [legalState] } });
const media = (content: Json) => ({ resourceType: 'Media', status: 'completed', content });
// "help i'm a bug": 14 bytes.
const DATA = 'aGVscCBpJ20gYSBidWc=';

describe('codings of R4 code systems, attachment sizes, absolute URIs', () => {
  let t: TestApp;
  let api: FhirClient;
  beforeAll(async () => {
    t = await createTestApp();
    api = fhirClient(t, await t.token());
  });
  afterAll(() => t.close());

  test('a Coding of one of R4 own code systems must hold one of its codes, whatever the binding (extensible here)', async () => {
    const bad = await expectOutcome(await api.post('Contract', contract({ system: 'http://hl7.org/fhir/contract-legalstate', code: 'invalid-code-test' })), 422);
    expect(issues(bad)).toEqual(['code-invalid Contract.legalState.coding[0].code']);
    expect(JSON.stringify(bad)).toContain('Unknown code \\"invalid-code-test\\" in the code system http://hl7.org/fhir/contract-legalstate');
    expect((await api.post('Contract', contract({ system: 'http://hl7.org/fhir/contract-legalstate', code: 'executed' }))).status).toBe(201);
    // Codes are compared exactly: R4's own code systems are case-sensitive.
    expect(issues(await expectOutcome(await api.post('Contract', contract({ system: 'http://hl7.org/fhir/contract-legalstate', code: 'Executed' })), 422))).toHaveLength(1);
  });

  test('an unbound Coding (an extension value, a tag) is judged too, and so is every coding of a CodeableConcept', async () => {
    const patient = {
      resourceType: 'Patient',
      meta: { tag: [{ system: 'http://hl7.org/fhir/resource-types', code: 'Patient' }, { system: 'http://hl7.org/fhir/resource-types', code: 'Banana' }] },
      extension: [{ url: 'http://example.org/x', valueCoding: { system: 'http://hl7.org/fhir/administrative-gender', code: 'femme' } }],
      maritalStatus: { coding: [{ system: 'http://hl7.org/fhir/contract-legalstate', code: 'nope' }, { system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: 'M' }] },
    };
    const res = await api.post('Patient/$validate', patient);
    expect(res.status).toBe(200);
    expect(issues((await res.json()) as Json).sort()).toEqual([
      'code-invalid Patient.extension[0].value.ofType(Coding).code',
      'code-invalid Patient.maritalStatus.coding[0].code',
      'code-invalid Patient.meta.tag[1].code',
    ]);
  });

  test('other systems, other versions of the system and codings without a code are not judged', async () => {
    const patient = {
      resourceType: 'Patient',
      meta: { tag: [
        // terminology.hl7.org's systems grow after R4: a code they gained since is valid.
        { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'SOMETHING-NEWER' },
        { system: 'http://hl7.org/fhir/resource-types', version: '5.0.0', code: 'ActorDefinition' },
        { system: 'http://hl7.org/fhir/resource-types', version: '4.0.1', code: 'Patient' },
        { system: 'http://hl7.org/fhir/resource-types', display: 'a display alone' },
        { system: 'http://example.org/codes', code: 'anything' },
      ] },
    };
    expect((await api.post('Patient', patient)).status).toBe(201);
    const pinned = { resourceType: 'Patient', meta: { tag: [{ system: 'http://hl7.org/fhir/resource-types', version: '4.0.1', code: 'Banana' }] } };
    expect(issues(await expectOutcome(await api.post('Patient', pinned), 422))).toEqual(['code-invalid Patient.meta.tag[0].code']);
  });

  test('a ValueSet of the specification is no Coding system', async () => {
    const obs = {
      resourceType: 'Observation', status: 'final',
      code: { coding: [{ system: 'http://hl7.org/fhir/ValueSet/observation-codes', code: '1234-5' }] },
    };
    expect(issues(await expectOutcome(await api.post('Observation', obs), 422))).toEqual(['code-invalid Observation.code.coding[0].system']);
  });

  test("an Attachment's size is the number of bytes of its data", async () => {
    expect(issues(await expectOutcome(await api.post('Media', media({ contentType: 'text/plain', data: DATA, size: 100 })), 422))).toEqual(['value Media.content.size']);
    expect((await api.post('Media', media({ contentType: 'text/plain', data: DATA, size: 14 }))).status).toBe(201);
    // Whitespace between the groups is no data; a size without data, or data without a size, says nothing to compare.
    expect((await api.post('Media', media({ contentType: 'text/plain', data: 'aGVs cCBp\nJ20g YSBidWc=', size: 14 }))).status).toBe(201);
    expect((await api.post('Media', media({ contentType: 'text/plain', url: 'http://example.org/a.txt', size: 100 }))).status).toBe(201);
    expect((await api.post('Media', media({ contentType: 'text/plain', data: 'AAAA' }))).status).toBe(201);
    expect(issues(await expectOutcome(await api.post('Media', media({ contentType: 'text/plain', data: '', size: 1 })), 422))).toContain('value Media.content.data');
  });

  test('what R4 defines as an absolute URI has a scheme: a canonical URL, an include system, a ConceptMap group source', async () => {
    const vs = (url: string, system: string, extra: Json = {}) => ({ resourceType: 'ValueSet', status: 'active', url, compose: { include: [{ system }] }, ...extra });
    expect(issues(await expectOutcome(await api.post('ValueSet', vs('ValueSet/vs1', 'http://loinc.org')), 422))).toEqual(['value ValueSet.url']);
    expect(issues(await expectOutcome(await api.post('ValueSet', vs('http://example.org/vs1', 'loinc')), 422))).toEqual(['value ValueSet.compose.include[0].system']);
    expect((await api.post('ValueSet', vs('urn:uuid:6a2ee390-978e-42c6-8f88-c17dff3bd8a3', 'urn:oid:2.16.840.1.113883.6.1'))).status).toBe(201);
    // A contained code system by its id, as R4's own example-hierarchical ValueSet has it.
    const contained = { contained: [{ resourceType: 'CodeSystem', id: 'cs', url: 'http://example.org/cs', status: 'active', content: 'complete' }] };
    expect((await api.post('ValueSet', vs('http://example.org/vs2', '#cs', contained))).status).toBe(201);
    const map = { resourceType: 'ConceptMap', status: 'active', url: 'http://example.org/cm', group: [{ source: 'local-codes', element: [{ code: 'a', target: [{ code: 'b', equivalence: 'equal' }] }] }] };
    expect(issues(await expectOutcome(await api.post('ConceptMap', map), 422))).toEqual(['value ConceptMap.group[0].source']);
    // Elements R4 does not define so are left alone: a Device's network address.
    expect((await api.post('Device', { resourceType: 'Device', url: 'device-17.local' })).status).toBe(201);
  });

  test('structural validation leaves codes and sizes alone; $validate is strict', async () => {
    const structural = await createTestApp({ env: { CINDER_VALIDATION: 'structural' } });
    try {
      const s = fhirClient(structural, await structural.token());
      expect((await s.post('Contract', contract({ system: 'http://hl7.org/fhir/contract-legalstate', code: 'invalid-code-test' }))).status).toBe(201);
      expect((await s.post('Media', media({ contentType: 'text/plain', data: DATA, size: 100 }))).status).toBe(201);
      expect((await s.post('ValueSet', { resourceType: 'ValueSet', status: 'active', url: 'vs-relative' })).status).toBe(201);
      const checked = (await (await s.post('Media/$validate', media({ contentType: 'text/plain', data: DATA, size: 100 }))).json()) as Json;
      expect(issues(checked)).toEqual(['value Media.content.size']);
    } finally {
      await structural.close();
    }
  });
});
