/**
 * Medplum's TypeScript client (`MedplumClient` from `@medplum/core`) against Cinder, as app developers
 * use it with a FHIR server that is not Medplum's: its `fetch` is the in-process app, its base URL the
 * server's root and its FHIR path the tenant's FHIR base, its token set with `setAccessToken` or got
 * with `startClientLogin`. Every helper it offers for a plain FHIR R4 server is called and its answer
 * checked against what Cinder holds; what it assumes of Medplum's own server (client_secret_post,
 * `Binary.url`, query parameters on a POST `$export`) is shown too. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { MedplumClient, OperationOutcomeError, createReference, type MedplumClientOptions } from '@medplum/core';
import { BASE, createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore, runExports } from '../helpers/export.ts';
import { countVersions, type Json } from '../helpers/fhir.ts';

/** A MedplumClient over the app, and the requests it sent (`METHOD url`). */
function medplum(t: TestApp, options: MedplumClientOptions = {}) {
  const sent: string[] = [];
  const client = new MedplumClient({
    baseUrl: `${BASE}/`,
    fhirUrlPath: 'tenants/t1/fhir/R4',
    // No cache: every call reaches the server.
    cacheTime: 0,
    fetch: async (url: string, init: RequestInit = {}) => {
      sent.push(`${init.method ?? 'GET'} ${url}`);
      return t.app.request(url, init);
    },
    ...options,
  });
  return { client, sent };
}

/** The OperationOutcome a rejected call carries. */
async function outcomeOf(call: Promise<unknown>): Promise<Json> {
  const err = await call.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(OperationOutcomeError);
  return (err as OperationOutcomeError).outcome as Json;
}

/** `Type/id` of a Bundle's entries. (The resource types of `@medplum/fhirtypes` are not installed: resources are Json here.) */
const ids = (bundle: Json) => ((bundle.entry ?? []) as Json[]).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`);

await eachStore((kind, fresh) => {
  describe(`MedplumClient against Cinder (${kind})`, () => {
    let t: TestApp;
    let m: MedplumClient;

    beforeAll(async () => {
      // The server's clock is the real one: MedplumClient checks a token's `exp` against its own.
      t = await createTestApp({ store: await fresh(), clock: testClock(Date.now()) });
      m = medplum(t).client;
      m.setAccessToken(await t.token());
    });
    afterAll(() => t.close());

    test('startClientLogin with the secret in HTTP Basic; client_secret_post, its default, is refused with a reason', async () => {
      const basic = medplum(t, { authCredentialsMethod: 'header' });
      await basic.client.startClientLogin(t.admin.client.clientId, t.admin.clientSecret!);
      expect(basic.client.getAccessToken()).toBeString();
      expect((await basic.client.search('Patient', { _count: 1 })).resourceType).toBe('Bundle');
      expect(basic.sent[0]).toBe(`POST ${BASE}/oauth2/token`);

      const post = medplum(t);
      const refused = await outcomeOf(post.client.startClientLogin(t.admin.client.clientId, t.admin.clientSecret!));
      expect(refused.issue[0].details.text).toContain('client_secret_post is not supported');
    });

    test('create, read, update (If-Match), unchanged update, JSON Patch, history, vread, delete', async () => {
      const created = await m.createResource<Json>({ resourceType: 'Patient', name: [{ family: 'Lovelace', given: ['Ada'] }] });
      expect(created.meta?.versionId).toBe('1');
      expect(await m.readResource('Patient', created.id)).toEqual(created);
      expect(await m.readReference(createReference(created))).toEqual(created);

      const v2 = await m.updateResource<Json>({ ...created, gender: 'female' }, { headers: { 'If-Match': 'W/"1"' } });
      expect([v2.meta?.versionId, v2.gender]).toEqual(['2', 'female']);
      // A stale If-Match is a 412: nothing written.
      const stale = await outcomeOf(m.updateResource({ ...v2, gender: 'other' }, { headers: { 'If-Match': 'W/"1"' } }));
      expect(stale.issue[0].code).toBe('conflict');
      // meta.versionId in the body is the server's (http.html): without If-Match the update is made.
      const v3 = await m.updateResource({ ...v2, birthDate: '1815-12-10', meta: { versionId: '1' } });
      expect(v3.meta?.versionId).toBe('3');
      // The same content again makes no version.
      expect((await m.updateResource(v3)).meta?.versionId).toBe('3');

      const patched = await m.patchResource('Patient', created.id, [
        { op: 'test', path: '/meta/versionId', value: '3' },
        { op: 'add', path: '/name/0/given/-', value: 'King' },
      ]);
      expect([patched.meta?.versionId, patched.name?.[0]?.given]).toEqual(['4', ['Ada', 'King']]);
      const failed = await outcomeOf(m.patchResource('Patient', created.id, [{ op: 'test', path: '/gender', value: 'male' }]));
      expect(failed.issue[0].code).toBe('processing');

      const history = await m.readHistory('Patient', created.id);
      expect(history.type).toBe('history');
      expect(history.entry?.map((e: Json) => e.resource?.meta?.versionId)).toEqual(['4', '3', '2', '1']);
      expect((await m.readHistory('Patient', created.id, { count: 2 })).link?.find((l: Json) => l.relation === 'next')?.url).toContain('_cursor=');
      expect((await m.readVersion('Patient', created.id, '1')).gender).toBeUndefined();
      expect((await outcomeOf(m.readVersion('Patient', created.id, '9'))).issue[0].code).toBe('not-found');

      const deleted = (await m.deleteResource('Patient', created.id)) as Json;
      expect(deleted.resourceType).toBe('OperationOutcome');
      expect((await outcomeOf(m.readResource('Patient', created.id))).issue[0].code).toBe('deleted');
    });

    test('search, searchOne, searchResources and searchResourcePages, which follows the next links', async () => {
      const made: string[] = [];
      for (let i = 0; i < 7; i++) {
        const p = await m.createResource<Json>({
          resourceType: 'Patient', gender: i % 2 ? 'male' : 'female', birthDate: `19${70 + i}-01-01`,
          name: [{ family: i === 3 ? 'Van der Berg' : `Pager${i}` }], identifier: [{ system: 'urn:pages', value: String(i) }],
        });
        made.push(p.id);
      }
      // Every page, in the order of the sort, each once.
      const paged: string[] = [];
      for await (const page of m.searchResourcePages('Patient', { identifier: 'urn:pages|', _sort: 'gender,-birthdate', _count: 2 })) {
        expect(page.length).toBeLessThanOrEqual(2);
        paged.push(...page.map((p) => p.id));
      }
      const whole = await m.searchResources('Patient', { identifier: 'urn:pages|', _sort: 'gender,-birthdate', _count: 100 });
      expect(paged).toEqual(whole.map((p) => p.id));
      expect([...paged].sort()).toEqual([...made].sort());

      // Encoded as URLSearchParams does: a space as `+`, `:` and `|` and `,` percent-encoded.
      expect((await m.searchOne('Patient', { 'name:exact': 'Van der Berg' }))?.id).toBe(made[3]);
      expect((await m.searchOne('Patient', 'identifier=urn:pages|5'))?.id).toBe(made[5]);
      expect((await m.search('Patient', { identifier: 'urn:pages|0,urn:pages|1', _total: 'accurate' })).total).toBe(2);
      // Repeated keys (an array of pairs) are ANDed; a comma, encoded %2C, is an OR.
      const and = await m.search('Patient', [['identifier', 'urn:pages|'], ['birthdate', 'ge1972-01-01'], ['birthdate', 'le1973-12-31']]);
      expect(ids(and).sort()).toEqual([`Patient/${made[2]}`, `Patient/${made[3]}`].sort());
      const or = await m.search('Patient', { identifier: 'urn:pages|', birthdate: 'le1970-12-31,ge1976-01-01' });
      expect(ids(or).sort()).toEqual([`Patient/${made[0]}`, `Patient/${made[6]}`].sort());

      const count = await m.search('Patient', { identifier: 'urn:pages|', _summary: 'count' });
      expect([count.total, count.entry]).toEqual([7, undefined]);
      // `_offset` with `_count`, as Medplum's own tables page: the matches after the first N, `_total` as asked,
      // the self link with `_offset`, and the next link the cursor that continues.
      const offset = await m.search('Patient', { identifier: 'urn:pages|', _sort: 'gender,-birthdate', _count: 2, _offset: 3, _total: 'accurate' });
      expect([offset.total, ids(offset)]).toEqual([7, whole.slice(3, 5).map((p) => `Patient/${p.id}`)]);
      expect(offset.entry?.map((e: Json) => e.search?.mode)).toEqual(['match', 'match']);
      expect(new URL(offset.link!.find((l: Json) => l.relation === 'self')!.url!).searchParams.get('_offset')).toBe('3');
      const next = await m.search('Patient', new URL(offset.link!.find((l: Json) => l.relation === 'next')!.url!).searchParams.toString());
      expect(ids(next)).toEqual(whole.slice(5, 7).map((p) => `Patient/${p.id}`));
      expect((await m.search('Patient', { identifier: 'urn:pages|', _count: 2, _offset: 7 })).entry).toBeUndefined();
    });

    test('includes, chains, _has, compartments, searches across types and $everything', async () => {
      const p = await m.createResource<Json>({ resourceType: 'Patient', name: [{ family: 'Chained' }], address: [{ city: 'Springfield' }] });
      const o = await m.createResource<Json>({
        resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }], effectiveDateTime: '2024-03-01T08:30:00Z',
        subject: createReference(p), valueQuantity: { value: 80, unit: '/min', system: 'http://unitsofmeasure.org', code: '/min' },
      });
      const included = await m.search('Observation', { _id: o.id, _include: 'Observation:subject' });
      expect(included.entry?.map((e: Json) => `${e.search?.mode}:${e.resource?.resourceType}`)).toEqual(['match:Observation', 'include:Patient']);
      expect(ids(await m.search('Patient', { _id: p.id, _revinclude: 'Observation:subject' }))).toEqual([`Patient/${p.id}`, `Observation/${o.id}`]);
      expect(ids(await m.search('Observation', { 'subject:Patient.address-city': 'Springfield', 'value-quantity': 'gt70' }))).toEqual([`Observation/${o.id}`]);
      expect(ids(await m.search('Patient', { '_has:Observation:subject:code': 'http://loinc.org|8867-4' }))).toEqual([`Patient/${p.id}`]);
      expect(ids(await m.get(m.fhirUrl('Patient', p.id, 'Observation')))).toEqual([`Observation/${o.id}`]);
      expect(ids(await m.readPatientEverything(p.id)).sort()).toEqual([`Observation/${o.id}`, `Patient/${p.id}`].sort());
      // readCanonical across types searches the system level (`GET [base]/?_type=...`).
      const vs = await m.readCanonical(['ValueSet', 'CodeSystem'], 'http://hl7.org/fhir/ValueSet/administrative-gender');
      expect([vs?.resourceType, vs?.id]).toEqual(['ValueSet', 'administrative-gender']);
    });

    test('automatic batching sends concurrent GETs as one batch, each answered as its REST request', async () => {
      const p = await m.createResource<Json>({ resourceType: 'Patient', name: [{ family: 'Batched' }] });
      const o = await m.createResource<Json>({ resourceType: 'Observation', status: 'final', code: { text: 'b' }, subject: createReference(p) });
      const batched = medplum(t, { autoBatchTime: 20 });
      batched.client.setAccessToken(m.getAccessToken()!);
      const b = batched.client;
      const results = await Promise.allSettled([
        b.readResource('Patient', p.id), b.readVersion('Patient', p.id, '1'), b.readHistory('Patient', p.id),
        b.search('Observation', { subject: `Patient/${p.id}` }), b.get(b.fhirUrl('Patient', p.id, 'Observation')),
        b.readCanonical(['ValueSet', 'CodeSystem'], 'http://hl7.org/fhir/ValueSet/administrative-gender'),
        b.valueSetExpand({ url: 'http://hl7.org/fhir/ValueSet/administrative-gender' }), b.readPatientEverything(p.id),
        b.readResource('Patient', 'nobody'),
      ]);
      expect(batched.sent).toEqual([`POST ${m.fhirUrl().toString().replace(/\/$/, '')}`]);
      const [read, vread, history, search, compartment, canonical, expand, everything, missing] = results;
      const value = (r: PromiseSettledResult<unknown>) => (r.status === 'fulfilled' ? (r.value as Json) : { rejected: (r.reason as OperationOutcomeError).outcome });
      expect(value(read).id).toBe(p.id);
      expect(value(vread).meta.versionId).toBe('1');
      expect(value(history).type).toBe('history');
      expect(ids(value(search))).toEqual([`Observation/${o.id}`]);
      expect(ids(value(compartment))).toEqual([`Observation/${o.id}`]);
      expect(value(canonical).id).toBe('administrative-gender');
      expect(value(expand).expansion.contains.map((c: Json) => c.code).sort()).toEqual(['female', 'male', 'other', 'unknown']);
      expect(ids(value(everything)).sort()).toEqual([`Observation/${o.id}`, `Patient/${p.id}`].sort());
      expect(value(missing).rejected.issue[0].code).toBe('not-found');
    });

    test('conditional create (createResourceIfNoneExist) and conditional update (upsertResource)', async () => {
      const mrn = (value: string) => [{ system: 'urn:mrn', value }];
      const first = await m.createResourceIfNoneExist<Json>({ resourceType: 'Patient', identifier: mrn('1') }, 'identifier=urn:mrn|1');
      const again = await m.createResourceIfNoneExist<Json>({ resourceType: 'Patient', identifier: mrn('1'), active: true }, 'identifier=urn:mrn|1');
      expect([again.id, again.meta?.versionId, again.active]).toEqual([first.id, '1', undefined]);

      const updated = await m.upsertResource<Json>({ resourceType: 'Patient', identifier: mrn('1'), active: true }, { identifier: 'urn:mrn|1' });
      expect([updated.id, updated.meta?.versionId, updated.active]).toEqual([first.id, '2', true]);
      const createdByUpsert = await m.upsertResource<Json>({ resourceType: 'Patient', identifier: mrn('2') }, 'identifier=urn:mrn|2');
      expect(createdByUpsert.meta?.versionId).toBe('1');
      expect(createdByUpsert.id).not.toBe(first.id);
      // Several matches are a 412 (http.html), for both.
      expect((await outcomeOf(m.upsertResource<Json>({ resourceType: 'Patient', active: false }, { identifier: 'urn:mrn|' }))).issue[0].code).toBe('conflict');
      expect((await outcomeOf(m.createResourceIfNoneExist<Json>({ resourceType: 'Patient' }, 'identifier=urn:mrn|'))).issue[0].code).toBe('conflict');
      // An id in the body other than the match's is a 400.
      expect((await outcomeOf(m.upsertResource<Json>({ resourceType: 'Patient', id: createdByUpsert.id, identifier: mrn('1') }, { identifier: 'urn:mrn|1' }))).issue[0].code).toBe('invalid');
    });

    test('executeBatch: a transaction with urn:uuid and conditional references, and a batch whose entries fail alone', async () => {
      await m.createResource<Json>({ resourceType: 'Patient', identifier: [{ system: 'urn:tx', value: 'known' }] });
      const patientUrn = 'urn:uuid:5f3c2a44-7a1b-4c1e-9d9a-0b6c2f1e8a01';
      const encounterUrn = 'urn:uuid:5f3c2a44-7a1b-4c1e-9d9a-0b6c2f1e8a02';
      const tx = await m.executeBatch({
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { fullUrl: patientUrn, resource: { resourceType: 'Patient', identifier: [{ system: 'urn:tx', value: 'new' }] }, request: { method: 'PUT', url: 'Patient?identifier=urn:tx|new' } },
          {
            fullUrl: encounterUrn, request: { method: 'POST', url: 'Encounter' },
            resource: { resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: patientUrn } },
          },
          {
            request: { method: 'POST', url: 'Observation' },
            resource: { resourceType: 'Observation', status: 'final', code: { text: 'tx' }, subject: { reference: 'Patient?identifier=urn:tx|known' }, encounter: { reference: encounterUrn } },
          },
          { request: { method: 'GET', url: 'Patient?identifier=urn:tx|new' } },
        ],
      });
      expect(tx.type).toBe('transaction-response');
      expect(tx.entry?.map((e: Json) => e.response?.status)).toEqual(['201 Created', '201 Created', '201 Created', '200 OK']);
      const [patient, encounter, observation, search] = tx.entry!.map((e: Json) => e.resource);
      expect(encounter!.subject.reference).toBe(`Patient/${patient!.id}`);
      const known = await m.searchOne('Patient', { identifier: 'urn:tx|known' });
      expect([observation!.subject.reference, observation!.encounter.reference]).toEqual([`Patient/${known!.id}`, `Encounter/${encounter!.id}`]);
      expect(ids(search)).toEqual([`Patient/${patient!.id}`]);

      // A transaction that fails writes nothing; a batch answers each entry.
      const before = await countVersions(t);
      const failed = await outcomeOf(m.executeBatch({
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient' } },
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', gender: 'nope' } },
        ],
      }));
      expect(failed.issue[0].code).toBe('code-invalid');
      expect(await countVersions(t)).toBe(before);
      const batch = await m.executeBatch({
        resourceType: 'Bundle', type: 'batch',
        entry: [
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', gender: 'nope' } },
          { request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', gender: 'male' } },
          { request: { method: 'GET', url: `Patient/${patient!.id}` } },
        ],
      });
      expect(batch.entry?.map((e: Json) => e.response?.status)).toEqual(['422 Unprocessable Entity', '201 Created', '200 OK']);
      expect(batch.entry?.[0]?.response?.outcome?.issue?.[0]?.code).toBe('code-invalid');
    });

    test('createBinary, download and read as FHIR JSON; createAttachment has no url, Binary having none in R4', async () => {
      const p = await m.createResource<Json>({ resourceType: 'Patient' });
      const bytes = new Uint8Array([0, 1, 2, 250, 255]);
      const binary = await m.createBinary({ data: bytes, contentType: 'application/octet-stream', filename: 'raw.bin', securityContext: createReference(p) });
      expect([binary.contentType, binary.securityContext?.reference]).toEqual(['application/octet-stream', `Patient/${p.id}`]);
      // download asks for any type: the content itself.
      const res = await m.downloadResponse(`Binary/${binary.id}`);
      expect([res.status, res.headers.get('content-type'), res.headers.get('x-security-context')]).toEqual([200, 'application/octet-stream', `Patient/${p.id}`]);
      expect(new Uint8Array(await res.arrayBuffer())).toEqual(bytes);
      // readResource asks for FHIR JSON first: the Binary resource.
      expect((await m.readResource('Binary', binary.id)).data).toBe(Buffer.from(bytes).toString('base64'));
      expect(await (await m.download(`Binary/${(await m.createBinary({ data: 'hello', contentType: 'text/plain' })).id}`)).text()).toBe('hello');
      // Medplum's server adds a `url` to Binary; R4's Binary has none, so the attachment has only its type and title.
      expect(await m.createAttachment({ data: 'note', contentType: 'text/plain', filename: 'note.txt' })).toEqual({ contentType: 'text/plain', title: 'note.txt', url: undefined });
    });

    test('$validate, ValueSet $expand and $validate-code, CodeSystem $lookup, on core and stored terminology', async () => {
      const valid = (await m.validateResource({ resourceType: 'Patient', gender: 'female' })) as Json;
      expect(valid.issue[0].severity).toBe('information');
      const invalid = (await m.validateResource({ resourceType: 'Patient', gender: 'nope' })) as Json;
      expect(invalid.issue[0]).toMatchObject({ severity: 'error', code: 'code-invalid' });

      await m.createResource<Json>({
        resourceType: 'CodeSystem', url: 'http://example.org/cs/colors', status: 'active', content: 'complete',
        concept: [{ code: 'red', display: 'Red' }, { code: 'green', display: 'Green', concept: [{ code: 'lime', display: 'Lime' }] }],
      });
      const vs = await m.createResource<Json>({
        resourceType: 'ValueSet', url: 'http://example.org/vs/greens', status: 'active',
        compose: { include: [{ system: 'http://example.org/cs/colors', filter: [{ property: 'concept', op: 'is-a', value: 'green' }] }] },
      });
      const expanded = await m.valueSetExpand({ url: 'http://example.org/vs/greens', filter: 'li' });
      expect(expanded.expansion?.contains?.map((c: Json) => c.code)).toEqual(['lime']);
      const gender = await m.valueSetExpand({ url: 'http://hl7.org/fhir/ValueSet/administrative-gender', count: 2, offset: 1 });
      expect([gender.expansion?.total, gender.expansion?.offset, gender.expansion?.contains?.length]).toEqual([4, 1, 2]);

      const param = (out: Json, name: string) => (out.parameter as Json[]).find((p) => p.name === name);
      const byGet = (await m.get(`${m.fhirUrl('ValueSet', vs.id!, '$validate-code')}?system=http://example.org/cs/colors&code=lime`)) as Json;
      expect([param(byGet, 'result')?.valueBoolean, param(byGet, 'display')?.valueString]).toEqual([true, 'Lime']);
      const byPost = (await m.post(m.fhirUrl('ValueSet', '$validate-code'), {
        resourceType: 'Parameters',
        parameter: [{ name: 'url', valueUri: 'http://example.org/vs/greens' }, { name: 'coding', valueCoding: { system: 'http://example.org/cs/colors', code: 'red' } }],
      })) as Json;
      expect(param(byPost, 'result')?.valueBoolean).toBe(false);
      const unknown = await outcomeOf(m.post(m.fhirUrl('ValueSet', '$validate-code'), {
        resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: 'http://example.org/vs/none' }, { name: 'code', valueCode: 'a' }, { name: 'system', valueUri: 'http://x' }],
      }));
      expect(unknown.issue[0]).toMatchObject({ severity: 'error', code: 'invalid' });
      const lookup = (await m.get(`${m.fhirUrl('CodeSystem', '$lookup')}?system=http://example.org/cs/colors&code=lime`)) as Json;
      expect(param(lookup, 'display')?.valueString).toBe('Lime');
    });

    /**
     * What `client` answers once its export has run: the jobs are run until it settles, since its kick-off
     * may reach the server after any one run (a fixed 10 ms wait lost that race on a loaded machine, and the
     * client polled a job nothing would run until the test timed out).
     */
    async function exporting(client: Promise<Json>): Promise<Json> {
      let settled = false;
      const done = client.finally(() => (settled = true));
      while (!settled) {
        await runExports(t);
        await Bun.sleep(20);
      }
      return done;
    }

    test('bulk export through its async request machinery: bulkExport, which puts its parameters in the URL of a POST without a body, and a Parameters body', async () => {
      const p = await m.createResource<Json>({ resourceType: 'Patient', name: [{ family: 'Exported' }] });
      // A POST kick-off without a body takes its parameters from its URL, as a GET's. MedplumClient polls
      // at its own period, not Retry-After: 200 ms keeps it under the 300 status requests a minute however
      // long the export takes on a loaded machine (20 ms hit the limit after 6 s).
      const byUrl = await exporting(m.bulkExport('', 'Patient', undefined, { pollStatusOnAccepted: true, pollStatusPeriod: 200 }) as Promise<Json>);
      expect(byUrl.request).toBe(`${m.fhirUrl('$export').toString()}?_type=Patient`);
      expect(byUrl.output.map((o: Json) => o.type)).toEqual(['Patient']);
      const exportedLines = (await (await m.download(byUrl.output[0].url)).text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Json);
      expect(exportedLines.map((r) => r.id)).toContain(p.id);
      const pending = m.startAsyncRequest<Json>(m.fhirUrl('$export').toString(), {
        headers: { 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: '_type', valueString: 'Patient' }] }),
        pollStatusOnAccepted: true, pollStatusPeriod: 200,
      });
      const manifest = await exporting(pending);
      expect(manifest.output.map((o: Json) => o.type)).toEqual(['Patient']);
      const lines = (await (await m.download(manifest.output[0].url)).text()).split('\n').filter(Boolean).map((l) => JSON.parse(l) as Json);
      expect(lines.map((r) => r.id)).toContain(p.id);
    });

    test('graphql: a read, a search with its arguments, a reference resolved and reverse references, as Medplum apps query', async () => {
      const sent = medplum(t);
      sent.client.setAccessToken(await t.token());
      const g = sent.client;
      const p = await g.createResource({ resourceType: 'Patient', name: [{ family: 'Graphson', given: ['Gia'] }] });
      const o = await g.createResource({ resourceType: 'Observation', status: 'final', code: { text: 'pulse' }, subject: createReference(p as never), valueQuantity: { value: 72, unit: '/min' } });
      const query = `query Chart($id: ID!) {
        Patient(id: $id) { id name { family given } ObservationList(_reference: subject) { id valueQuantity { value unit } } }
        ObservationList(subject: "Patient/${p.id}") { id subject { resource { ... on Patient { name { family } } } } }
      }`;
      const answer = (await g.graphql(query, 'Chart', { id: p.id })) as Json;
      expect(answer).toEqual({
        data: {
          Patient: { id: p.id, name: [{ family: 'Graphson', given: ['Gia'] }], ObservationList: [{ id: o.id, valueQuantity: { value: 72, unit: '/min' } }] },
          ObservationList: [{ id: o.id, subject: { resource: { name: [{ family: 'Graphson' }] } } }],
        },
      });
      expect(sent.sent.at(-1)).toBe(`POST ${BASE}/tenants/t1/fhir/R4/$graphql`);
      // A field error comes back in `errors` (Medplum's client resolves with the body), with its path.
      const missing = (await g.graphql('{ Patient(id: "missing") { id } }')) as Json;
      expect(missing).toMatchObject({ data: { Patient: null }, errors: [{ path: ['Patient'], extensions: { status: 404 } }] });
    });
  });
});
