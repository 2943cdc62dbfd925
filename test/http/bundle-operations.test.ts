/**
 * Operations and HEAD in Bundle entries (FHIR R4 Bundle.entry.request: any RESTful interaction,
 * operations included; http-verb HEAD): a batch's `GET ValueSet/$expand?...` or `POST
 * ValueSet/$validate-code` (as HL7's validator sends its batches to a terminology server) answers as
 * the same request to the REST API, with the Bundle's token; a transaction refuses operations, which
 * would run outside it. `GET metadata` (capabilities, an interaction too) answers as the REST API does,
 * in a batch and in a transaction (after its writes). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const GENDER_VS = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const GENDER_CS = 'http://hl7.org/fhir/administrative-gender';

const param = (out: Json, name: string): Json => (out.parameter as Json[]).find((p) => p.name === name) ?? {};

await eachStore((kind, fresh) => {
  describe(`operations and HEAD in Bundles on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const bundle = async (type: 'batch' | 'transaction', entry: Json[], client = api) => client.post('', { resourceType: 'Bundle', type, entry });

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1', gender: 'female' });
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' } });
    });
    afterAll(() => t.close());

    test('a batch of terminology operations, by GET and POST, answers each as the REST API does', async () => {
      const res = await bundle('batch', [
        { request: { method: 'GET', url: `ValueSet/$validate-code?url=${GENDER_VS}&system=${GENDER_CS}&code=male` } },
        {
          request: { method: 'POST', url: 'ValueSet/$validate-code' },
          resource: { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: GENDER_VS }, { name: 'coding', valueCoding: { system: GENDER_CS, code: 'nope' } }] },
        },
        { request: { method: 'POST', url: 'CodeSystem/$lookup' }, resource: { resourceType: 'Parameters', parameter: [{ name: 'system', valueUri: GENDER_CS }, { name: 'code', valueCode: 'other' }] } },
        { request: { method: 'GET', url: `${t.fhir('t1')}/ValueSet/$expand?url=${encodeURIComponent(GENDER_VS)}` } },
        { request: { method: 'GET', url: 'Patient/p1/$everything' } },
      ]);
      expect(res.status).toBe(200);
      const out = (await res.json()) as Json;
      expect(out.type).toBe('batch-response');
      expect(out.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '200 OK', '200 OK', '200 OK', '200 OK']);
      const [valid, invalid, lookup, expand, everything] = out.entry.map((e: Json) => e.resource as Json);
      // The same answers as the REST API's.
      const direct = (await (await api.get(`ValueSet/$validate-code?url=${GENDER_VS}&system=${GENDER_CS}&code=male`)).json()) as Json;
      expect(valid).toEqual(direct);
      expect(param(valid!, 'result').valueBoolean).toBe(true);
      expect(param(invalid!, 'result').valueBoolean).toBe(false);
      expect(param(lookup!, 'display').valueString).toBe('Other');
      expect(expand!.expansion.contains.map((c: Json) => c.code).sort()).toEqual(['female', 'male', 'other', 'unknown']);
      expect(everything!.entry.map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort()).toEqual(['Observation/o1', 'Patient/p1']);
    });

    test('Prefer: return=minimal or OperationOutcome leaves an operation entry its result (it applies to writes)', async () => {
      for (const prefer of ['minimal', 'OperationOutcome']) {
        const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [
          { request: { method: 'POST', url: 'CodeSystem/$lookup' }, resource: { resourceType: 'Parameters', parameter: [{ name: 'system', valueUri: GENDER_CS }, { name: 'code', valueCode: 'other' }] } },
          { request: { method: 'POST', url: `${t.fhir('t1')}/ValueSet/$validate-code` }, resource: { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: GENDER_VS }, { name: 'coding', valueCoding: { system: GENDER_CS, code: 'male' } }] } },
          { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        ] }, { Prefer: `return=${prefer}` });
        const out = ((await res.json()) as Json).entry as Json[];
        expect(out.map((e) => [e.response.status, e.resource?.resourceType ?? null, e.response.outcome?.issue[0].code ?? null])).toEqual([
          ['200 OK', 'Parameters', null], ['200 OK', 'Parameters', null], ['201 Created', null, prefer === 'minimal' ? null : 'informational'],
        ]);
        expect(param(out[0]!.resource, 'display').valueString).toBe('Other');
        expect(param(out[1]!.resource, 'result').valueBoolean).toBe(true);
      }
    });

    test("an operation's error is its entry's, with its OperationOutcome; the token's scopes hold as on the REST API", async () => {
      const res = await bundle('batch', [
        { request: { method: 'GET', url: 'Patient/$no-such-operation' } },
        { request: { method: 'GET', url: 'ValueSet/$expand?url=http://example.org/none' } },
        { request: { method: 'GET', url: 'Patient/p1' } },
      ]);
      const out = (await res.json()) as Json;
      expect(out.entry[0].response.status).toMatch(/^4\d\d /);
      expect(out.entry[0].response.outcome.resourceType).toBe('OperationOutcome');
      expect(out.entry[1].response.status).toMatch(/^4\d\d /);
      expect(out.entry[2].response.status).toBe('200 OK');
      const patientsOnly = fhirClient(t, await craftToken(t, 'system/Patient.rs system/Bundle.cruds'));
      const limited = (await (await bundle('batch', [{ request: { method: 'GET', url: `ValueSet/$expand?url=${GENDER_VS}` } }, { request: { method: 'GET', url: 'Patient/p1' } }], patientsOnly)).json()) as Json;
      expect(limited.entry.map((e: Json) => e.response.status)).toEqual(['403 Forbidden', '200 OK']);
    });

    test('a transaction refuses an operation, naming the entry; nothing is written', async () => {
      const before = await countVersions(t);
      const outcome = await expectOutcome(await bundle('transaction', [
        { request: { method: 'PUT', url: 'Patient/p2' }, resource: { resourceType: 'Patient', id: 'p2' } },
        { request: { method: 'GET', url: `ValueSet/$expand?url=${GENDER_VS}` } },
      ]), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[1].request.url']);
      expect(await countVersions(t)).toBe(before);
    });

    test('an operation by PUT, or a malformed operation URL, is that entry\'s 400', async () => {
      const out = (await (await bundle('batch', [
        { request: { method: 'PUT', url: 'ValueSet/$expand' }, resource: { resourceType: 'Parameters' } },
        { request: { method: 'GET', url: 'Foo/$expand' } },
        { request: { method: 'GET', url: 'Patient/p1' } },
      ])).json()) as Json;
      expect(out.entry.map((e: Json) => e.response.status)).toEqual(['400 Bad Request', '400 Bad Request', '200 OK']);
      expect(out.entry[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.method']);
      expect(out.entry[1].response.outcome.issue[0].expression).toEqual(['Bundle.entry[1].request.url']);
    });

    test('HEAD entries are answered as GET without the resource, in a batch and a transaction', async () => {
      for (const type of ['batch', 'transaction'] as const) {
        const res = await bundle(type, [{ request: { method: 'HEAD', url: 'Patient/p1' } }, { request: { method: 'HEAD', url: 'Patient?gender=female' } }]);
        expect(res.status).toBe(200);
        const out = (await res.json()) as Json;
        expect(out.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '200 OK']);
        expect(out.entry[0].response.etag).toBe('W/"1"');
        expect(out.entry.map((e: Json) => e.resource)).toEqual([undefined, undefined]);
      }
      const missing = (await (await bundle('batch', [{ request: { method: 'HEAD', url: 'Patient/nobody' } }])).json()) as Json;
      expect(missing.entry[0].response.status).toBe('404 Not Found');
    });

    test('GET metadata in a batch answers the CapabilityStatement (or TerminologyCapabilities) as GET metadata does', async () => {
      const res = await bundle('batch', [
        { request: { method: 'GET', url: 'metadata' } },
        { request: { method: 'GET', url: 'metadata?mode=terminology' } },
        { request: { method: 'GET', url: `${t.fhir('t1')}/metadata?_summary=true` } },
        { request: { method: 'HEAD', url: 'metadata' } },
        { request: { method: 'GET', url: 'metadata?mode=everything' } },
        { request: { method: 'GET', url: 'Patient/p1' } },
      ]);
      expect(res.status).toBe(200);
      const out = (await res.json()) as Json;
      expect(out.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '200 OK', '200 OK', '200 OK', '400 Bad Request', '200 OK']);
      const direct = async (path: string) => (await (await api.get(path)).json()) as Json;
      expect(out.entry[0].resource).toEqual(await direct('metadata'));
      expect(out.entry[0].resource.resourceType).toBe('CapabilityStatement');
      expect(out.entry[1].resource).toEqual(await direct('metadata?mode=terminology'));
      expect(out.entry[1].resource.resourceType).toBe('TerminologyCapabilities');
      expect(out.entry[2].resource).toEqual(await direct('metadata?_summary=true'));
      expect(out.entry[3].resource).toBeUndefined();
      expect(out.entry[4].response.outcome.issue[0].expression).toEqual(['Bundle.entry[4].request.url']);
      expect(out.entry[4].response.outcome.issue[0].diagnostics ?? out.entry[4].response.outcome.issue[0].details.text).toContain("mode 'everything'");
    });

    test('GET metadata in a transaction is answered after its writes, which mode=terminology lists; a bad mode fails it whole', async () => {
      const url = 'http://example.org/cs/bundle-metadata';
      const res = await bundle('transaction', [
        { request: { method: 'GET', url: 'metadata?mode=terminology' } },
        { request: { method: 'GET', url: 'metadata' } },
        { request: { method: 'PUT', url: 'CodeSystem/bm' }, resource: { resourceType: 'CodeSystem', id: 'bm', url, status: 'active', content: 'complete', concept: [{ code: 'a' }] } },
      ]);
      expect(res.status).toBe(200);
      const out = (await res.json()) as Json;
      expect(out.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '200 OK', '201 Created']);
      expect(out.entry[0].resource.codeSystem.map((c: Json) => c.uri)).toContain(url);
      expect(out.entry[1].resource).toEqual((await (await api.get('metadata')).json()) as Json);
      const before = await countVersions(t);
      const bad = await expectOutcome(await bundle('transaction', [
        { request: { method: 'PUT', url: 'Patient/p9' }, resource: { resourceType: 'Patient', id: 'p9' } },
        { request: { method: 'GET', url: 'metadata?mode=x' } },
      ]), 400);
      expect(bad.issue[0].expression).toEqual(['Bundle.entry[1].request.url']);
      expect(await countVersions(t)).toBe(before);
    });
  });
});
