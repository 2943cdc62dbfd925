import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
const clock = testClock();
const base = `${BASE}/tenants/t1/fhir/R4`;

beforeAll(async () => {
  t = await createTestApp({ clock });
  api = fhirClient(t, await t.token());
});
afterAll(() => t.close());

describe('create (POST)', () => {
  test('assigns a server id, ignores the body id and stamps meta', async () => {
    const res = await api.post('Patient', { resourceType: 'Patient', id: 'client-chosen', name: [{ family: 'Chalmers' }] });
    expect(res.status).toBe(201);
    const body = (await res.json()) as Json;
    expect(body.resourceType).toBe('Patient');
    expect(body.id).not.toBe('client-chosen');
    expect(body.id).toMatch(/^[A-Za-z0-9\-.]{1,64}$/);
    expect(body.meta.versionId).toBe('1');
    expect(body.meta.lastUpdated).toBe(new Date(clock.now()).toISOString());
    expect(body.name).toEqual([{ family: 'Chalmers' }]);
    expect(res.headers.get('location')).toBe(`${base}/Patient/${body.id}/_history/1`);
    expect(res.headers.get('etag')).toBe('W/"1"');
    expect(res.headers.get('last-modified')).toBe(new Date(clock.now()).toUTCString());
    expect(res.headers.get('content-type')).toStartWith('application/fhir+json');
    expect((await api.get('Patient/client-chosen')).status).toBe(404);
  });

  test('keeps client meta (profile, tags) but replaces versionId and lastUpdated', async () => {
    const created = await api.create({
      resourceType: 'Patient',
      meta: { versionId: '99', lastUpdated: '2001-01-01T00:00:00Z', profile: ['http://example.org/p'], tag: [{ code: 'x' }] },
    });
    expect(created.meta).toEqual({
      versionId: '1', lastUpdated: new Date(clock.now()).toISOString(), profile: ['http://example.org/p'], tag: [{ code: 'x' }],
    });
  });

  test('accepts application/json and a charset parameter', async () => {
    const res = await api.post('Patient', { resourceType: 'Patient' }, { 'Content-Type': 'application/json; charset=utf-8' });
    expect(res.status).toBe(201);
  });
});

describe('read and vread', () => {
  test('read returns the current version with ETag and Last-Modified', async () => {
    const created = await api.create({ resourceType: 'Observation', status: 'final', code: { text: 'x' } });
    const res = await api.get(`Observation/${created.id}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe('W/"1"');
    expect(res.headers.get('last-modified')).toBe(new Date(created.meta.lastUpdated).toUTCString());
    expect(await res.json()).toEqual(created);
  });

  test('vread returns each version; an unknown version is 404', async () => {
    const v1 = await api.create({ resourceType: 'Patient', active: true });
    clock.advance(1000);
    const v2 = await api.put200({ ...v1, active: false });
    const r1 = await api.get(`Patient/${v1.id}/_history/1`);
    expect(r1.status).toBe(200);
    expect(r1.headers.get('etag')).toBe('W/"1"');
    expect(await r1.json()).toEqual(v1);
    const r2 = await api.get(`Patient/${v1.id}/_history/2`);
    expect(await r2.json()).toEqual(v2);
    await expectOutcome(await api.get(`Patient/${v1.id}/_history/3`), 404, 'not-found');
    await expectOutcome(await api.get(`Patient/${v1.id}/_history/abc`), 404, 'not-found');
  });

  test('a version id is a FHIR id compared as written: 01, +1, 1.0, 1e0 name no version (404), in a vread and a Bundle GET', async () => {
    const p = await api.create({ resourceType: 'Patient', active: true });
    await api.put200({ ...p, active: false });
    const forms = ['01', '001', '+1', '1.0', '1e0', '0', '02'];
    for (const v of forms) await expectOutcome(await api.get(`Patient/${p.id}/_history/${encodeURIComponent(v)}`), 404, 'not-found');
    expect((await api.get(`Patient/${p.id}/_history/1`)).status).toBe(200);
    const entries = ['1', ...forms].map((v) => ({ request: { method: 'GET', url: `Patient/${p.id}/_history/${encodeURIComponent(v)}` } }));
    const batch = (await (await api.post('', { resourceType: 'Bundle', type: 'batch', entry: entries })).json()) as Json;
    expect(batch.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['200', ...forms.map(() => '404')]);
    const tx = await api.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: `Patient/${p.id}/_history/01` } }] });
    await expectOutcome(tx, 404, 'not-found');
  });

  test('read of an unknown id is 404', async () => {
    await expectOutcome(await api.get('Patient/does-not-exist'), 404, 'not-found');
  });
});

describe('update (PUT)', () => {
  test('create-on-update with a client id answers 201 with Location', async () => {
    const res = await api.put('Patient/pat-put-1', { resourceType: 'Patient', id: 'pat-put-1', gender: 'female' });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${base}/Patient/pat-put-1/_history/1`);
    const body = (await res.json()) as Json;
    expect(body).toMatchObject({ id: 'pat-put-1', meta: { versionId: '1' }, gender: 'female' });
  });

  test('update answers 200, bumps the version and moves lastUpdated', async () => {
    await api.put200({ resourceType: 'Patient', id: 'pat-put-2', gender: 'male' });
    clock.advance(5000);
    const res = await api.put('Patient/pat-put-2', { resourceType: 'Patient', id: 'pat-put-2', gender: 'other' });
    expect(res.status).toBe(200);
    expect(res.headers.get('location')).toBeNull();
    expect(res.headers.get('etag')).toBe('W/"2"');
    const body = (await res.json()) as Json;
    expect(body.meta.versionId).toBe('2');
    expect(body.meta.lastUpdated).toBe(new Date(clock.now()).toISOString());
    expect(body.gender).toBe('other');
    expect(((await (await api.get('Patient/pat-put-2')).json()) as Json).gender).toBe('other');
  });

  test('two writes in the same millisecond still get increasing lastUpdated', async () => {
    const a = await api.put200({ resourceType: 'Patient', id: 'same-ms' });
    const b = await api.put200({ resourceType: 'Patient', id: 'same-ms', active: true });
    expect(Date.parse(b.meta.lastUpdated)).toBeGreaterThan(Date.parse(a.meta.lastUpdated));
  });
});

describe('delete', () => {
  test('delete, then read is 410, history shows the deletion, delete again is idempotent', async () => {
    const p = await api.create({ resourceType: 'Patient' });
    clock.advance(1000);
    const del = await api.del(`Patient/${p.id}`);
    expect(del.status).toBe(200);
    expect(del.headers.get('etag')).toBe('W/"2"');
    expect(((await del.json()) as Json).resourceType).toBe('OperationOutcome');

    const gone = await api.get(`Patient/${p.id}`);
    await expectOutcome(gone, 410, 'deleted');

    const hist = (await (await api.get(`Patient/${p.id}/_history`)).json()) as Json;
    expect(hist.type).toBe('history');
    expect(hist.entry).toHaveLength(2);
    expect(hist.entry[0].request).toEqual({ method: 'DELETE', url: `Patient/${p.id}` });
    expect(hist.entry[0].resource).toBeUndefined();
    expect(hist.entry[0].response.etag).toBe('W/"2"');
    expect(hist.entry[1].resource.id).toBe(p.id);

    const again = await api.del(`Patient/${p.id}`);
    expect(again.status).toBe(200);
    const versions = (await (await api.get(`Patient/${p.id}/_history`)).json()) as Json;
    expect(versions.entry).toHaveLength(2);

    await expectOutcome(await api.get(`Patient/${p.id}/_history/2`), 410, 'deleted');
    expect((await api.get(`Patient/${p.id}/_history/1`)).status).toBe(200);
  });

  test('deleting an id that never existed is a 200 no-op', async () => {
    const res = await api.del('Patient/never-was');
    expect(res.status).toBe(200);
    expect((await api.get('Patient/never-was')).status).toBe(404);
  });

  test('a deleted resource can be re-created by PUT (201, next version)', async () => {
    await api.put200({ resourceType: 'Patient', id: 'phoenix' });
    await api.del('Patient/phoenix');
    const res = await api.put('Patient/phoenix', { resourceType: 'Patient', id: 'phoenix', active: true });
    expect(res.status).toBe(201);
    expect(((await res.json()) as Json).meta.versionId).toBe('3');
  });
});

describe('If-Match', () => {
  test('matching version updates, a stale one is 412 and changes nothing, a malformed one is 400', async () => {
    await api.put200({ resourceType: 'Patient', id: 'locked', active: true });
    const ok = await api.put('Patient/locked', { resourceType: 'Patient', id: 'locked', active: false }, { 'If-Match': 'W/"1"' });
    expect(ok.status).toBe(200);
    const stale = await api.put('Patient/locked', { resourceType: 'Patient', id: 'locked', gender: 'male' }, { 'If-Match': 'W/"1"' });
    await expectOutcome(stale, 412);
    const strong = await api.put('Patient/locked', { resourceType: 'Patient', id: 'locked', active: true }, { 'If-Match': '"2"' });
    expect(strong.status).toBe(200);
    const bad = await api.put('Patient/locked', { resourceType: 'Patient', id: 'locked' }, { 'If-Match': 'version-3' });
    await expectOutcome(bad, 400);
    const current = (await (await api.get('Patient/locked')).json()) as Json;
    expect(current.meta.versionId).toBe('3');
    expect(current.gender).toBeUndefined();
  });

  test('an ETag is compared as written: W/"01" names no version, so it never matches (412), and If-None-Match W/"01" does not hold back a write', async () => {
    await api.put200({ resourceType: 'Patient', id: 'zeros', active: true });
    for (const tag of ['W/"01"', '"01"', 'W/"+1"', 'W/"1.0"', 'W/"1e0"']) {
      await expectOutcome(await api.put('Patient/zeros', { resourceType: 'Patient', id: 'zeros', active: false }, { 'If-Match': tag }), 412);
      await expectOutcome(await api.del('Patient/zeros', { 'If-Match': tag }), 412);
    }
    expect((await api.get('Patient/zeros', { 'If-None-Match': 'W/"01"' })).status).toBe(200);
    expect((await api.put('Patient/zeros', { resourceType: 'Patient', id: 'zeros', gender: 'male' }, { 'If-None-Match': 'W/"01"' })).status).toBe(200);
    const current = (await (await api.get('Patient/zeros')).json()) as Json;
    expect([current.meta.versionId, current.active]).toEqual(['2', undefined]);
  });

  test('If-Match on a resource that does not exist is 412 for update and delete', async () => {
    await expectOutcome(await api.put('Patient/nobody', { resourceType: 'Patient', id: 'nobody' }, { 'If-Match': 'W/"1"' }), 412);
    expect((await api.get('Patient/nobody')).status).toBe(404);
    await expectOutcome(await api.del('Patient/nobody', { 'If-Match': 'W/"1"' }), 412);
  });

  test('delete with If-Match: stale is 412, current deletes, malformed is 400', async () => {
    await api.put200({ resourceType: 'Patient', id: 'del-locked' });
    await api.put200({ resourceType: 'Patient', id: 'del-locked', active: true });
    await expectOutcome(await api.del('Patient/del-locked', { 'If-Match': 'W/"1"' }), 412);
    await expectOutcome(await api.del('Patient/del-locked', { 'If-Match': 'W/2' }), 400);
    expect((await api.get('Patient/del-locked')).status).toBe(200);
    expect((await api.del('Patient/del-locked', { 'If-Match': 'W/"2"' })).status).toBe(200);
    expect((await api.get('Patient/del-locked')).status).toBe(410);
  });
});

describe('Prefer: return', () => {
  test('minimal: no body, headers kept', async () => {
    const res = await api.post('Patient', { resourceType: 'Patient' }, { Prefer: 'return=minimal' });
    expect(res.status).toBe(201);
    expect(await res.text()).toBe('');
    expect(res.headers.get('location')).toMatch(/\/Patient\/[^/]+\/_history\/1$/);
    expect(res.headers.get('etag')).toBe('W/"1"');
    expect(res.headers.get('last-modified')).not.toBeNull();
    const upd = await api.put('Patient/minimal', { resourceType: 'Patient', id: 'minimal' }, { Prefer: 'return=minimal' });
    expect(upd.status).toBe(201);
    expect(await upd.text()).toBe('');
  });

  test('representation: the stored resource', async () => {
    const res = await api.post('Patient', { resourceType: 'Patient', active: true }, { Prefer: 'return=representation' });
    expect(res.status).toBe(201);
    expect(await res.json()).toMatchObject({ resourceType: 'Patient', active: true, meta: { versionId: '1' } });
  });

  test('OperationOutcome: an informational outcome instead of the resource', async () => {
    const res = await api.put('Patient/oo', { resourceType: 'Patient', id: 'oo' }, { Prefer: 'return=OperationOutcome' });
    expect(res.status).toBe(201);
    const body = (await res.json()) as Json;
    expect(body.resourceType).toBe('OperationOutcome');
    expect(body.issue[0].severity).toBe('information');
    expect(res.headers.get('etag')).toBe('W/"1"');
  });
});

describe('conditional create (If-None-Exist)', () => {
  test('creates when nothing matches, returns the match (200, no write) when one does, 412 when several do', async () => {
    const body = { resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: 'ine-1' }] };
    const first = await api.post('Patient', body, { 'If-None-Exist': 'identifier=urn:mrn|ine-1' });
    expect(first.status).toBe(201);
    const created = (await first.json()) as Json;
    const second = await api.post('Patient', body, { 'If-None-Exist': 'identifier=urn:mrn|ine-1' });
    expect(second.status).toBe(200);
    expect(second.headers.get('etag')).toBe('W/"1"');
    expect(((await second.json()) as Json).id).toBe(created.id);
    const all = await api.search('Patient?identifier=urn:mrn|ine-1');
    expect(all.entry).toHaveLength(1);

    await api.create(body);
    await expectOutcome(await api.post('Patient', body, { 'If-None-Exist': 'identifier=urn:mrn|ine-1' }), 412);
    expect((await api.search('Patient?identifier=urn:mrn|ine-1')).entry).toHaveLength(2);
  });

  test('accepts a full Type?query form and rejects unknown parameters in the condition', async () => {
    const body = { resourceType: 'Patient', identifier: [{ value: 'ine-2' }] };
    expect((await api.post('Patient', body, { 'If-None-Exist': 'Patient?identifier=ine-2' })).status).toBe(201);
    expect((await api.post('Patient', body, { 'If-None-Exist': 'Patient?identifier=ine-2' })).status).toBe(200);
    await expectOutcome(await api.post('Patient', body, { 'If-None-Exist': 'nonsense=1' }), 400);
    await expectOutcome(await api.post('Patient', body, { 'If-None-Exist': '' }), 400);
  });

  test('every search parameter is a criterion (_tag, _profile, _has too); result parameters alone are not', async () => {
    const body = { resourceType: 'Patient', meta: { tag: [{ system: 'urn:t', code: 'ine-3' }] } };
    expect((await api.post('Patient', body, { 'If-None-Exist': '_tag=urn:t|ine-3' })).status).toBe(201);
    expect((await api.post('Patient', body, { 'If-None-Exist': '_tag=urn:t|ine-3' })).status).toBe(200);
    expect((await api.search('Patient?_tag=urn:t|ine-3')).entry).toHaveLength(1);
    await expectOutcome(await api.post('Patient', body, { 'If-None-Exist': '_count=1&_sort=_id' }), 400);
    await expectOutcome(await api.del('Patient?_summary=count'), 400);
  });
});

describe('conditional update (PUT [type]?query)', () => {
  test('no match creates, one match updates, several are 412', async () => {
    const body = { resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value: 'cu-1' }], active: true };
    const first = await api.put('Patient?identifier=urn:mrn|cu-1', body);
    expect(first.status).toBe(201);
    const created = (await first.json()) as Json;
    expect(first.headers.get('location')).toBe(`${base}/Patient/${created.id}/_history/1`);
    const second = await api.put('Patient?identifier=urn:mrn|cu-1', { ...body, active: false });
    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ id: created.id, active: false, meta: { versionId: '2' } });
    const sameId = await api.put('Patient?identifier=urn:mrn|cu-1', { ...body, id: created.id });
    expect(sameId.status).toBe(200);
    await expectOutcome(await api.put('Patient?identifier=urn:mrn|cu-1', { ...body, id: 'someone-else' }), 400);
    await expectOutcome(await api.put('Patient?identifier=urn:mrn|cu-1', body, { 'If-Match': 'W/"1"' }), 412);
    await api.create(body);
    await expectOutcome(await api.put('Patient?identifier=urn:mrn|cu-1', body), 412);
  });

  test('no match with a body id creates that id', async () => {
    const res = await api.put('Patient?identifier=urn:mrn|cu-2', { resourceType: 'Patient', id: 'cu-2', identifier: [{ system: 'urn:mrn', value: 'cu-2' }] });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`${base}/Patient/cu-2/_history/1`);
  });
});

describe('conditional delete (DELETE [type]?query)', () => {
  test('one match is deleted, no match is a no-op, several are 412', async () => {
    const p = await api.create({ resourceType: 'Patient', identifier: [{ value: 'cd-1' }] });
    const res = await api.del('Patient?identifier=cd-1');
    expect(res.status).toBe(200);
    expect(res.headers.get('etag')).toBe('W/"2"');
    expect((await api.get(`Patient/${p.id}`)).status).toBe(410);
    const none = await api.del('Patient?identifier=cd-1');
    expect(none.status).toBe(200);
    expect(none.headers.get('etag')).toBeNull();
    await api.create({ resourceType: 'Patient', identifier: [{ value: 'cd-2' }] });
    await api.create({ resourceType: 'Patient', identifier: [{ value: 'cd-2' }] });
    await expectOutcome(await api.del('Patient?identifier=cd-2'), 412);
    expect((await api.search('Patient?identifier=cd-2')).entry).toHaveLength(2);
  });
});
