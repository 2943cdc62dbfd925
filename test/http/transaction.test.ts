import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { countVersions, craftToken, expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
const clock = testClock(Date.parse('2026-06-01T00:00:00Z'));
const base = `${BASE}/tenants/t1/fhir/R4`;

const tx = (entry: Json[], type = 'transaction') => ({ resourceType: 'Bundle', type, entry });
const post = (fullUrl: string | undefined, resource: Json, extra: Json = {}) => ({
  ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'POST', url: resource.resourceType, ...extra },
});
const put = (resource: Json, extra: Json = {}) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}`, ...extra } });
const del = (url: string) => ({ request: { method: 'DELETE', url } });
const get = (url: string) => ({ request: { method: 'GET', url } });

/** Posts a Bundle to the FHIR base. */
async function send(bundle: Json, token?: string): Promise<Response> {
  return (token ? fhirClient(t, token) : api).post(base, bundle);
}

async function sendOk(bundle: Json): Promise<Json> {
  const res = await send(bundle);
  const body = (await res.json()) as Json;
  if (res.status !== 200) throw new Error(`bundle failed: ${res.status} ${JSON.stringify(body)}`);
  return body;
}

async function read(path: string): Promise<Json> {
  const res = await api.get(path);
  expect(res.status).toBe(200);
  return (await res.json()) as Json;
}

/** Asserts that a failing Bundle changed nothing in the tenant. */
async function expectNothingWritten(bundle: Json, status: number): Promise<Json> {
  const before = await countVersions(t);
  const outcome = await expectOutcome(await send(bundle), status);
  expect(await countVersions(t)).toBe(before);
  return outcome;
}

beforeAll(async () => {
  t = await createTestApp({ clock });
  api = fhirClient(t, await craftToken(t, 'system/*.*', { ttl: 365 * 86400 }));
});
afterAll(() => t.close());

describe('transaction: urn:uuid references', () => {
  test('new ids are assigned and references rewritten across entries, including nested ones', async () => {
    const pat = 'urn:uuid:11111111-1111-4111-8111-111111111111';
    const prac = 'urn:uuid:22222222-2222-4222-8222-222222222222';
    const enc = 'urn:uuid:33333333-3333-4333-8333-333333333333';
    const body = await sendOk(tx([
      post(enc, { resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, subject: { reference: pat }, participant: [{ individual: { reference: prac } }] }),
      post(undefined, {
        resourceType: 'Observation', status: 'final', code: { text: 'bp' },
        subject: { reference: pat, display: 'kept' }, encounter: { reference: enc }, performer: [{ reference: prac }, { reference: pat }],
        extension: [{ url: 'http://example.org/ext', valueReference: { reference: prac } }],
        contained: [{ resourceType: 'Provenance', id: 'prov', recorded: '2026-06-01T00:00:00Z', target: [{ reference: pat }, { reference: '#' }], agent: [{ who: { reference: prac } }] }],
      }),
      post(pat, { resourceType: 'Patient', name: [{ family: 'Urn' }] }),
      post(prac, { resourceType: 'Practitioner' }),
    ]));
    expect(body.resourceType).toBe('Bundle');
    expect(body.type).toBe('transaction-response');
    expect(body.entry).toHaveLength(4);
    for (const e of body.entry) {
      expect(e.response.status).toBe('201 Created');
      expect(e.response.location).toMatch(new RegExp(`^${base}/[A-Za-z]+/[^/]+/_history/1$`));
      expect(e.response.etag).toBe('W/"1"');
    }
    const idOf = (i: number) => body.entry[i].resource.id as string;
    const [encId, obsId, patId, pracId] = [0, 1, 2, 3].map(idOf);
    expect(body.entry[2].resource.resourceType).toBe('Patient');
    const obs = await read(`Observation/${obsId}`);
    expect(obs.subject).toEqual({ reference: `Patient/${patId}`, display: 'kept' });
    expect(obs.encounter.reference).toBe(`Encounter/${encId}`);
    expect(obs.performer).toEqual([{ reference: `Practitioner/${pracId}` }, { reference: `Patient/${patId}` }]);
    expect(obs.extension[0].valueReference.reference).toBe(`Practitioner/${pracId}`);
    expect(obs.contained[0].target[0].reference).toBe(`Patient/${patId}`);
    expect(obs.contained[0].agent[0].who.reference).toBe(`Practitioner/${pracId}`);
    const encounter = await read(`Encounter/${encId}`);
    expect(encounter.subject.reference).toBe(`Patient/${patId}`);
    expect(encounter.participant[0].individual.reference).toBe(`Practitioner/${pracId}`);
    // The rewritten references are indexed.
    expect(ids(await api.search(`Observation?subject=Patient/${patId}`))).toEqual([obsId]);
  });

  test('a PUT entry with an absolute fullUrl is referable too', async () => {
    const body = await sendOk(tx([
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'http://other.example/fhir/Patient/tx-put-1' } }),
      { fullUrl: 'http://other.example/fhir/Patient/tx-put-1', ...put({ resourceType: 'Patient', id: 'tx-put-1' }) },
    ]));
    expect(body.entry[1].response.status).toBe('201 Created');
    const obs = await read(`Observation/${body.entry[0].resource.id}`);
    expect(obs.subject.reference).toBe('Patient/tx-put-1');
  });

  test('a urn:uuid reference that matches no entry fails the whole transaction', async () => {
    await expectNothingWritten(tx([
      post('urn:uuid:aaaaaaaa-0000-4000-8000-000000000001', { resourceType: 'Patient' }),
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:aaaaaaaa-0000-4000-8000-00000000ffff' } }),
    ]), 400);
  });

  test('the same fullUrl twice is refused (bdl-7)', async () => {
    const u = 'urn:uuid:aaaaaaaa-0000-4000-8000-000000000002';
    const outcome = await expectNothingWritten(tx([post(u, { resourceType: 'Patient' }), post(u, { resourceType: 'Patient' })]), 422);
    expect(JSON.stringify(outcome)).toContain('bdl-7');
  });
});

describe('transaction: all or nothing', () => {
  test('a stale ifMatch late in the Bundle rolls back the writes before it', async () => {
    await api.put200({ resourceType: 'Patient', id: 'tx-locked' });
    await api.put200({ resourceType: 'Patient', id: 'tx-locked', gender: 'other' });
    await api.put200({ resourceType: 'Patient', id: 'tx-gone' });
    const before = await countVersions(t);
    await expectOutcome(await send(tx([
      post(undefined, { resourceType: 'Patient', name: [{ family: 'Never' }] }),
      put({ resourceType: 'Patient', id: 'tx-fresh' }),
      del('Patient/tx-gone'),
      put({ resourceType: 'Patient', id: 'tx-locked', active: true }, { ifMatch: 'W/"1"' }),
    ])), 412);
    expect(await countVersions(t)).toBe(before);
    expect((await api.get('Patient/tx-fresh')).status).toBe(404);
    expect((await read('Patient/tx-locked')).meta.versionId).toBe('2');
    expect((await api.get('Patient/tx-gone')).status).toBe(200);
  });

  test('an invalid resource in any entry: 400, nothing written', async () => {
    await expectNothingWritten(tx([
      post(undefined, { resourceType: 'Patient' }),
      post(undefined, { resourceType: 'NotAType' }),
    ]), 400);
    await expectNothingWritten(tx([
      post(undefined, { resourceType: 'Patient' }),
      { resource: { resourceType: 'Patient', id: 'a' }, request: { method: 'PUT', url: 'Patient/b' } },
    ]), 400);
    await expectNothingWritten(tx([post(undefined, { resourceType: 'Patient' }), { request: { method: 'PATCH', url: 'Patient/a' } }]), 400);
    await expectNothingWritten(tx([post(undefined, { resourceType: 'Patient' }), { resource: { resourceType: 'Patient' } }]), 400);
    await expectNothingWritten(tx([post(undefined, { resourceType: 'Patient' }), get('Nonsense/1')]), 400);
  });

  test('a forbidden entry: 403, nothing written', async () => {
    const token = await craftToken(t, 'system/Patient.cruds');
    const before = await countVersions(t);
    await expectOutcome(await send(tx([
      post(undefined, { resourceType: 'Patient' }),
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' } }),
    ]), token), 403);
    expect(await countVersions(t)).toBe(before);
  });

  test('a GET of a resource that does not exist fails the transaction before anything is committed', async () => {
    await expectNothingWritten(tx([put({ resourceType: 'Patient', id: 'tx-get-1' }), get('Patient/does-not-exist')]), 404);
    expect((await api.get('Patient/tx-get-1')).status).toBe(404);
  });

  test('a GET search with an invalid parameter fails the transaction before anything is committed', async () => {
    await expectNothingWritten(tx([put({ resourceType: 'Patient', id: 'tx-get-2' }), get('Patient?_count=abc')]), 400);
  });

  test('a Bundle that is not a transaction or batch, or has no valid entry list, is 400', async () => {
    await expectNothingWritten({ resourceType: 'Bundle', type: 'collection', entry: [] }, 400);
    await expectNothingWritten({ resourceType: 'Bundle', type: 'transaction', entry: {} }, 400);
    await expectNothingWritten({ resourceType: 'Patient' }, 400);
    await expectNothingWritten(tx(['not an entry' as unknown as Json]), 400);
  });

  test('an empty transaction answers a response without entries (R4 JSON has no empty arrays)', async () => {
    const body = await sendOk(tx([]));
    expect(body).toMatchObject({ resourceType: 'Bundle', type: 'transaction-response' });
    expect(body.entry).toBeUndefined();
  });
});

describe('transaction: conditional create and conditional references', () => {
  test('ifNoneExist returns the existing resource (200) and references to its fullUrl point at it', async () => {
    const existing = await api.create({ resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: 'tx-ine' }] });
    const u = 'urn:uuid:bbbbbbbb-0000-4000-8000-000000000001';
    const body = await sendOk(tx([
      post(u, { resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: 'tx-ine' }] }, { ifNoneExist: 'identifier=urn:mrn|tx-ine' }),
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: u } }),
    ]));
    expect(body.entry[0].response.status).toBe('200 OK');
    expect(body.entry[0].response.location).toBe(`${base}/Patient/${existing.id}/_history/1`);
    const obs = await read(`Observation/${body.entry[1].resource.id}`);
    expect(obs.subject.reference).toBe(`Patient/${existing.id}`);
    expect(ids(await api.search('Patient?identifier=urn:mrn|tx-ine'))).toEqual([existing.id]);
  });

  test('ifNoneExist without a match creates', async () => {
    const body = await sendOk(tx([
      post(undefined, { resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: 'tx-ine-new' }] }, { ifNoneExist: 'Patient?identifier=urn:mrn|tx-ine-new' }),
    ]));
    expect(body.entry[0].response.status).toBe('201 Created');
  });

  test('conditional references are resolved; no match or several matches fail with 412 and write nothing', async () => {
    const p = await api.create({ resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: 'tx-cond' }] });
    const body = await sendOk(tx([
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient?identifier=urn:mrn|tx-cond' } }),
    ]));
    expect((await read(`Observation/${body.entry[0].resource.id}`)).subject.reference).toBe(`Patient/${p.id}`);

    await expectNothingWritten(tx([
      post(undefined, { resourceType: 'Patient' }),
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient?identifier=urn:mrn|nobody' } }),
    ]), 412);
    await api.create({ resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: 'tx-cond' }] });
    await expectNothingWritten(tx([
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient?identifier=urn:mrn|tx-cond' } }),
    ]), 412);
    await expectNothingWritten(tx([
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient?bogus=1' } }),
    ]), 400);
  });

  test('conditional update and delete entries (Type?query)', async () => {
    await api.put200({ resourceType: 'Patient', id: 'tx-cu', identifier: [{ system: 'urn:mrn', value: 'tx-cu' }] });
    const body = await sendOk(tx([
      { resource: { resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: 'tx-cu' }], active: true }, request: { method: 'PUT', url: 'Patient?identifier=urn:mrn|tx-cu' } },
    ]));
    expect(body.entry[0].response.status).toBe('200 OK');
    expect((await read('Patient/tx-cu')).active).toBe(true);
    const gone = await sendOk(tx([del('Patient?identifier=urn:mrn|tx-cu')]));
    expect(gone.entry[0].response.status).toMatch(/^204/);
    expect((await api.get('Patient/tx-cu')).status).toBe(410);
  });
});

describe('transaction: processing order and duplicate targets', () => {
  test('DELETE, then POST, then PUT, then GET whatever the entry order; responses keep the entry order', async () => {
    await api.put200({ resourceType: 'Patient', id: 'ord-del' });
    await api.put200({ resourceType: 'Patient', id: 'ord-put', active: false });
    clock.advance(1000);
    const body = await sendOk(tx([
      get('Patient/ord-put'),
      get('Patient?_id=ord-del,ord-put'),
      put({ resourceType: 'Patient', id: 'ord-put', active: true }),
      post(undefined, { resourceType: 'Patient', identifier: [{ value: 'ord-new' }] }),
      del('Patient/ord-del'),
    ]));
    const statuses = body.entry.map((e: Json) => e.response.status);
    expect(statuses).toEqual(['200 OK', '200 OK', '200 OK', '201 Created', '204 No Content']);
    // The GETs ran after the PUT and the DELETE.
    expect(body.entry[0].resource).toMatchObject({ id: 'ord-put', active: true, meta: { versionId: '2' } });
    expect(body.entry[1].resource.resourceType).toBe('Bundle');
    expect(body.entry[1].resource.entry.map((e: Json) => e.resource.id)).toEqual(['ord-put']);
    expect((await api.get('Patient/ord-del')).status).toBe(410);
    // One timestamp for the whole transaction.
    const put2 = await read('Patient/ord-put');
    const created = await read(`Patient/${body.entry[3].resource.id}`);
    expect(put2.meta.lastUpdated).toBe(created.meta.lastUpdated);
  });

  test('two entries on one resource are 400 and write nothing', async () => {
    await api.put200({ resourceType: 'Patient', id: 'dup' });
    await expectNothingWritten(tx([put({ resourceType: 'Patient', id: 'dup', active: true }), put({ resourceType: 'Patient', id: 'dup', active: false })]), 400);
    await expectNothingWritten(tx([put({ resourceType: 'Patient', id: 'dup' }), del('Patient/dup')]), 400);
    await expectNothingWritten(tx([del('Patient/dup'), del('Patient/dup')]), 400);
  });

  test('a conditional create does not find a resource deleted in the same transaction: it creates', async () => {
    await api.put200({ resourceType: 'Patient', id: 'dup-ine', identifier: [{ value: 'dup-ine' }] });
    const body = await sendOk(tx([
      del('Patient/dup-ine'),
      post(undefined, { resourceType: 'Patient', identifier: [{ value: 'dup-ine' }] }, { ifNoneExist: 'identifier=dup-ine' }),
    ]));
    expect(body.entry.map((e: Json) => e.response.status)).toEqual(['204 No Content', '201 Created']);
    expect(body.entry[1].resource.id).not.toBe('dup-ine');
  });
});

describe('batch', () => {
  test('each entry succeeds or fails on its own', async () => {
    await api.put200({ resourceType: 'Patient', id: 'b-locked' });
    const before = await countVersions(t);
    const body = await sendOk(tx([
      post(undefined, { resourceType: 'Patient', name: [{ family: 'Batch' }] }),
      post(undefined, { resourceType: 'NotAType' }),
      put({ resourceType: 'Patient', id: 'b-locked', active: true }, { ifMatch: 'W/"7"' }),
      { resource: { resourceType: 'Patient', id: 'x' }, request: { method: 'PUT', url: 'Patient/y' } },
      get('Patient/b-nobody'),
      put({ resourceType: 'Patient', id: 'b-new' }),
      del('Patient/b-locked'),
      post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'urn:uuid:cccccccc-0000-4000-8000-000000000001' } }),
      get('Patient?_id=b-new'),
      { request: { method: 'PATCH', url: 'Patient/b-new' } },
    ], 'batch'));
    expect(body.type).toBe('batch-response');
    const statuses = body.entry.map((e: Json) => e.response.status.slice(0, 3));
    expect(statuses).toEqual(['201', '400', '412', '400', '404', '201', '204', '400', '200', '400']);
    for (const i of [1, 2, 3, 4, 7, 9]) expect(body.entry[i].response.outcome.resourceType).toBe('OperationOutcome');
    expect(body.entry[8].resource.entry.map((e: Json) => e.resource.id)).toEqual(['b-new']);
    expect((await read(`Patient/${body.entry[0].resource.id}`)).name[0].family).toBe('Batch');
    expect((await api.get('Patient/b-locked')).status).toBe(410);
    expect(await countVersions(t)).toBe(before + 3);
  });

  test('a batch may not be empty of structure: entry must be an array', async () => {
    await expectNothingWritten({ resourceType: 'Bundle', type: 'batch', entry: 'x' }, 400);
  });
});
