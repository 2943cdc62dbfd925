/**
 * A Bundle entry's fullUrl "SHALL NOT disagree with the id in the resource" (FHIR R4 Bundle.entry.fullUrl):
 * a fullUrl that is a RESTful URL, absolute or relative, names the resource's type and id, in every kind
 * of Bundle; outside a transaction or batch it is absolute (R4: "The Absolute URL for the resource"). A `urn:uuid:`, a URL of another shape, or an entry whose resource has no id (a create's
 * temporary fullUrl) has nothing to disagree with; a versioned fullUrl is bdl-8's.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { bundlePoster, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BASE = 'http://example.org/fhir';
const collection = (...entry: Json[]) => ({ resourceType: 'Bundle', type: 'collection', entry });
const patient = (id?: string) => ({ resourceType: 'Patient', ...(id === undefined ? {} : { id }), active: true });
/** The issues of an OperationOutcome as `expression: text`. */
const issues = (outcome: Json) => (outcome.issue as Json[]).map((i) => `${i.expression?.join(',')}: ${i.details?.text}`);

let t: TestApp;
let api: FhirClient;
beforeAll(async () => {
  t = await createTestApp();
  api = fhirClient(t, await t.token());
});
afterAll(() => t.close());

describe('a Bundle stored as a resource (here a collection)', () => {
  test("a RESTful fullUrl naming another id or type is refused at the entry's fullUrl; others are stored", async () => {
    const outcome = await expectOutcome(await api.post('Bundle', collection({ fullUrl: `${BASE}/Patient/2`, resource: patient('1') })), 422);
    expect(issues(outcome)).toEqual([
      `Bundle.entry[0].fullUrl: The fullUrl "${BASE}/Patient/2" is the RESTful URL of Patient/2, but the entry's resource is Patient/1: a fullUrl may not disagree with the resource's type and id`,
    ]);
    const others = collection(
      { fullUrl: `${BASE}/Observation/1`, resource: patient('1') },
      { fullUrl: 'Patient/3', resource: patient('4') },
      { fullUrl: `${BASE}/Patient/5`, resource: patient('5') },
    );
    const refused = await expectOutcome(await api.post('Bundle', others), 422);
    // Patient/3 disagrees with Patient/4, and is relative besides (outside a transaction or batch a fullUrl is absolute).
    expect((refused.issue as Json[]).map((i) => i.expression[0])).toEqual(['Bundle.entry[0].fullUrl', 'Bundle.entry[1].fullUrl', 'Bundle.entry[1].fullUrl']);
    const relative = await expectOutcome(await api.post('Bundle', collection({ fullUrl: 'Patient/2', resource: patient('2') })), 422);
    expect(issues(relative)).toEqual([
      'Bundle.entry[0].fullUrl: The fullUrl "Patient/2" is not an absolute URL: an entry\'s fullUrl is the resource\'s absolute URL, or a urn:uuid: or urn:oid:, outside a transaction or batch',
    ]);
    // One that agrees, is no RESTful URL, or has no id to disagree with is stored.
    const res = await api.post('Bundle', collection(
      { fullUrl: `${BASE}/Patient/1`, resource: patient('1') },
      { fullUrl: 'urn:uuid:0c3c9e3e-6e5b-4d0a-8f2a-1c2d3e4f5a6b', resource: patient('3') },
      { fullUrl: 'http://example.org/patients/77', resource: patient('4') },
      { fullUrl: `${BASE}/Patient/6`, resource: patient() },
    ));
    expect({ status: res.status, body: await res.text() }).toMatchObject({ status: 201 });
  });

  test('a versioned fullUrl is refused by bdl-8, and only for its version when its type and id agree', async () => {
    const agrees = await expectOutcome(await api.post('Bundle', collection({ fullUrl: `${BASE}/Patient/1/_history/2`, resource: patient('1') })), 422);
    expect(issues(agrees)).toEqual(['Bundle.entry[0]: fullUrl cannot be a version specific reference (bdl-8)']);
    const disagrees = await expectOutcome(await api.post('Bundle', collection({ fullUrl: `${BASE}/Patient/9/_history/2`, resource: patient('1') })), 422);
    expect((disagrees.issue as Json[]).map((i) => i.expression[0]).sort()).toEqual(['Bundle.entry[0]', 'Bundle.entry[0].fullUrl']);
  });
});

describe('transactions and batches', () => {
  const poster = bundlePoster(() => t, () => api);
  const put = (fullUrl: string, id: string) => ({ fullUrl, resource: patient(id), request: { method: 'PUT', url: `Patient/${id}` } });

  test('an entry whose fullUrl disagrees fails a transaction, naming it, and a batch refuses it alone; others are written', async () => {
    const outcome = await poster.nothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: [put(`${BASE}/Patient/tx-a`, 'tx-a'), put(`${BASE}/Patient/tx-c`, 'tx-b')] }, 422);
    expect((outcome.issue as Json[]).map((i) => i.expression[0])).toEqual(['Bundle.entry[1].fullUrl']);
    const out = await poster.ok({ resourceType: 'Bundle', type: 'batch', entry: [put(`${BASE}/Patient/b-a`, 'b-a'), put(`${BASE}/Patient/b-c`, 'b-b')] });
    expect(out.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '422 Unprocessable Entity']);
    expect((await api.get('Patient/b-b')).status).toBe(404);
    // urn:uuid fullUrls, and creates with a RESTful temporary fullUrl but no id, are written.
    const written = await poster.ok({
      resourceType: 'Bundle', type: 'transaction',
      entry: [
        { fullUrl: 'urn:uuid:5e1f0c3a-0000-4000-8000-0000000000aa', resource: patient(), request: { method: 'POST', url: 'Patient' } },
        { fullUrl: `${BASE}/Patient/temporary`, resource: patient(), request: { method: 'POST', url: 'Patient' } },
        put(`${BASE}/Patient/tx-ok`, 'tx-ok'),
      ],
    });
    expect(written.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '201 Created', '201 Created']);
  });
});
