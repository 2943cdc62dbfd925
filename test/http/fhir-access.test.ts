import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, fhirInit, testClock, type TestApp } from '../helpers/app.ts';
import { craftToken, expectOutcome, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let admin: FhirClient;
const clock = testClock(Date.parse('2026-07-01T00:00:00Z'));
const base = `${BASE}/tenants/t1/fhir/R4`;
const obs = (id: string, patient: string) => ({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });

beforeAll(async () => {
  t = await createTestApp({ clock });
  admin = fhirClient(t, await t.token());
  await admin.put200({ resourceType: 'Patient', id: 'pa', name: [{ family: 'Alpha' }] });
  await admin.put200({ resourceType: 'Patient', id: 'pb', name: [{ family: 'Beta' }], link: [{ other: { reference: 'Patient/pa' }, type: 'seealso' }] });
  await admin.put200({ resourceType: 'Patient', id: 'pc', name: [{ family: 'Gamma' }] });
  await admin.put200(obs('oa', 'pa'));
  await admin.put200(obs('ob', 'pb'));
  await admin.put200({ ...obs('oab', 'pb'), performer: [{ reference: 'Patient/pa' }] });
  await admin.put200({ resourceType: 'Practitioner', id: 'doc' });
  await admin.put200({ resourceType: 'Medication', id: 'med', code: { text: 'aspirin' } });
});
afterAll(() => t.close());

describe('bearer token (RFC 6750)', () => {
  test('missing token: 401 with a WWW-Authenticate challenge', async () => {
    const res = await t.request(`${base}/Patient/pa`);
    const body = await expectOutcome(res, 401, 'login');
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="cinder"');
    expect(JSON.stringify(body)).not.toContain('Alpha');
  });

  for (const header of ['Basic dXNlcjpwYXNz', 'Bearer', 'Bearer ', 'Bearer a b', 'Token abc', 'Bearer abc"def']) {
    test(`malformed Authorization '${header}': 401 invalid_request`, async () => {
      const res = await t.request(`${base}/Patient/pa`, { headers: { Authorization: header } });
      await expectOutcome(res, 401, 'login');
      expect(res.headers.get('www-authenticate')).toStartWith('Bearer realm="cinder", error="invalid_request"');
    });
  }

  test('a token that is not ours, or tampered with: 401 invalid_token', async () => {
    const good = await t.token();
    const [h, p] = good.split('.');
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, scope: 'system/*.*', tenant: 't1' })).toString('base64url')}.${good.split('.')[2]!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))}`;
    for (const token of ['abc.def.ghi', 'not-a-jwt', forged, good.slice(0, -4) + 'AAAA']) {
      const res = await t.request(`${base}/Patient/pa`, fhirInit(token));
      await expectOutcome(res, 401, 'login');
      expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
    }
  });

  test('an expired token: 401 invalid_token, also when it was verified (and cached) before', async () => {
    const token = await t.token();
    expect((await t.request(`${base}/Patient/pa`, fhirInit(token))).status).toBe(200);
    const short = await craftToken(t, 'system/*.*', { ttl: 60 });
    clock.advance(3601 * 1000);
    try {
      for (const tk of [token, short]) {
        const res = await t.request(`${base}/Patient/pa`, fhirInit(tk));
        await expectOutcome(res, 401, 'login');
        expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
        expect(res.headers.get('www-authenticate')).toContain('expired');
      }
    } finally {
      clock.advance(-3601 * 1000);
    }
    admin = fhirClient(t, await t.token());
  });

  test('a token of another tenant: 403 that says nothing about the resource', async () => {
    const other = await t.tokenFor('t2', ['system/*.*']);
    const exists = await t.request(`${base}/Patient/pa`, fhirInit(other));
    const missing = await t.request(`${base}/Patient/zz`, fhirInit(other));
    const existsBody = await expectOutcome(exists, 403, 'forbidden');
    const missingBody = await expectOutcome(missing, 403, 'forbidden');
    expect(existsBody).toEqual(missingBody);
    expect(JSON.stringify(existsBody)).not.toMatch(/Alpha|pa\b/);
    expect(exists.headers.get('www-authenticate')).toBe(missing.headers.get('www-authenticate'));
    expect(exists.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
    await expectOutcome(await t.request(`${base}/Patient?_id=pa`, fhirInit(other)), 403);
    await expectOutcome(await t.request(`${base}/Patient`, fhirInit(other, 'POST', { resourceType: 'Patient' })), 403);
    await expectOutcome(await t.request(`${base}/_history`, fhirInit(other)), 403);
    // Its own tenant works, and does not see t1's data.
    const own = fhirClient(t, other, 't2');
    expect(ids(await own.search('Patient'))).toEqual([]);
  });

  test('an unknown tenant: 404, with or without a token', async () => {
    const token = await t.token();
    await expectOutcome(await t.request(`${BASE}/tenants/nope/fhir/R4/Patient/pa`, fhirInit(token)), 404, 'not-found');
    await expectOutcome(await t.request(`${BASE}/tenants/nope/fhir/R4/Patient/pa`), 404, 'not-found');
    await expectOutcome(await t.request(`${BASE}/tenants/NOPE%27--/fhir/R4/metadata`), 404, 'not-found');
  });
});

describe('system and user scopes (SMART v1 and v2)', () => {
  const client = async (scope: string) => fhirClient(t, await t.tokenFor('t1', scope.split(' ')));

  test('system/Patient.rs: Patient read and search only', async () => {
    const c = await client('system/Patient.rs');
    expect((await c.get('Patient/pa')).status).toBe(200);
    expect(ids(await c.search('Patient?_id=pa'))).toEqual(['pa']);
    await expectOutcome(await c.post('Patient', { resourceType: 'Patient' }), 403, 'forbidden');
    await expectOutcome(await c.post('Observation', obs('x', 'pa')), 403, 'forbidden');
    await expectOutcome(await c.get('Observation/oa'), 403, 'forbidden');
    await expectOutcome(await c.get('Observation?_id=oa'), 403, 'forbidden');
    await expectOutcome(await c.get('Observation/oa/_history'), 403, 'forbidden');
    await expectOutcome(await c.get('_history'), 403, 'forbidden');
    await expectOutcome(await c.put('Patient/pa', { resourceType: 'Patient', id: 'pa' }), 403);
    await expectOutcome(await c.del('Patient/pa'), 403);
    await expectOutcome(await c.post(base, { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: 'Observation/oa' } }] }), 403);
  });

  test('system/Patient.read (v1) is the same as system/Patient.rs', async () => {
    const c = await client('system/Patient.read');
    expect((await c.get('Patient/pa')).status).toBe(200);
    expect((await c.get('Patient?_id=pa')).status).toBe(200);
    await expectOutcome(await c.get('Observation/oa'), 403);
    await expectOutcome(await c.post('Patient', { resourceType: 'Patient' }), 403);
  });

  test('system/*.read can read everything and write nothing', async () => {
    const c = await client('system/*.read');
    for (const path of ['Patient/pa', 'Observation/oa', 'Medication/med', 'Observation?_id=oa', '_history', 'Patient/_history', 'Patient/pa/_history/1']) {
      expect((await c.get(path)).status).toBe(200);
    }
    await expectOutcome(await c.post('Observation', obs('x', 'pa')), 403);
    await expectOutcome(await c.put('Observation/oa', obs('oa', 'pa')), 403);
    await expectOutcome(await c.put('Observation/new-one', obs('new-one', 'pa')), 403);
    await expectOutcome(await c.del('Observation/oa'), 403);
    expect((await admin.get('Observation/oa')).status).toBe(200);
    // A conditional create is a create even when its condition matches (it would answer the match, 200).
    await expectOutcome(await c.post('Observation', obs('x', 'pa'), { 'If-None-Exist': '_id=oa' }), 403, 'forbidden');
    const entry = { resource: obs('x', 'pa'), request: { method: 'POST', url: 'Observation', ifNoneExist: '_id=oa' } };
    const tx = await c.post('', { resourceType: 'Bundle', type: 'transaction', entry: [entry] });
    expect((await expectOutcome(tx, 403, 'forbidden')).issue[0].expression).toEqual(['Bundle.entry[0]']);
    const batch = (await (await c.post('', { resourceType: 'Bundle', type: 'batch', entry: [entry] })).json()) as Json;
    expect(batch.entry[0].response.status).toStartWith('403');
  });

  test('v1 write without read; v2 letters one by one', async () => {
    const w = await client('system/Observation.write');
    expect((await w.post('Observation', obs('x', 'pc'))).status).toBe(201);
    await expectOutcome(await w.get('Observation/oa'), 403);
    const c = await client('system/Observation.c');
    expect((await c.post('Observation', obs('x', 'pc'))).status).toBe(201);
    await expectOutcome(await c.put('Observation/oa', obs('oa', 'pa')), 403);
    const u = await client('system/Observation.u');
    expect((await u.put('Observation/oa', obs('oa', 'pa'))).status).toBe(200);
    await expectOutcome(await u.put('Observation/brand-new', obs('brand-new', 'pa')), 403);
    const d = await client('system/Observation.d');
    await expectOutcome(await d.get('Observation/ob'), 403);
    const s = await client('system/Observation.s');
    expect((await s.get('Observation?_id=oa')).status).toBe(200);
    await expectOutcome(await s.get('Observation/oa'), 403);
  });

  test('system/*.cruds and user/*.* allow everything', async () => {
    for (const scope of ['system/*.cruds', 'user/*.*', 'system/Observation.* system/Patient.*']) {
      const c = await client(scope);
      const created = await c.create(obs('ignored', 'pa'));
      expect((await c.get(`Observation/${created.id}`)).status).toBe(200);
      expect((await c.del(`Observation/${created.id}`)).status).toBe(200);
    }
  });
});

describe('patient-context scopes', () => {
  let pa: FhirClient;
  beforeAll(async () => {
    pa = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'pa' }));
  });

  test('search sees only the patient compartment', async () => {
    expect(ids(await pa.search('Observation')).sort()).toEqual(['oa', 'oab']);
    expect(ids(await pa.search('Observation?subject=Patient/pb'))).toEqual(['oab']);
    expect(ids(await pa.search('Patient')).sort()).toEqual(['pa', 'pb']);
    expect((await pa.search('Observation?_summary=count')).total).toBe(2);
    expect((await pa.search('Observation?_total=accurate&_count=1')).total).toBe(2);
  });

  test('reads inside the compartment work; outside are 403', async () => {
    expect((await pa.get('Observation/oa')).status).toBe(200);
    expect((await pa.get('Observation/oab')).status).toBe(200);
    expect((await pa.get('Patient/pa')).status).toBe(200);
    await expectOutcome(await pa.get('Observation/ob'), 403, 'forbidden');
    await expectOutcome(await pa.get('Patient/pc'), 403, 'forbidden');
    await expectOutcome(await pa.get('Observation/ob/_history/1'), 403, 'forbidden');
    await expectOutcome(await pa.get('Observation/ob/_history'), 403, 'forbidden');
    expect((await pa.get('Observation/oa/_history')).status).toBe(200);
    // A 403 challenges the token as RFC 6750 3.1 says: it lacks the privileges.
    const refused = await pa.get('Observation/ob');
    expect(refused.headers.get('www-authenticate')).toStartWith('Bearer realm="cinder", error="insufficient_scope", error_description="');
  });

  test('types outside the Patient compartment are not limited', async () => {
    expect((await pa.get('Practitioner/doc')).status).toBe(200);
    expect(ids(await pa.search('Medication'))).toEqual(['med']);
  });

  test('type and system history are refused', async () => {
    await expectOutcome(await pa.get('Observation/_history'), 403);
    await expectOutcome(await pa.get('_history'), 403);
  });

  test('rs gives no write', async () => {
    await expectOutcome(await pa.post('Observation', obs('x', 'pa')), 403);
  });

  test('with cruds, writes must stay inside the compartment: new content and replaced content alike', async () => {
    const w = fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'pa' }));
    const own = await w.create(obs('x', 'pa'));
    expect((await w.del(`Observation/${own.id}`)).status).toBe(200);
    await expectOutcome(await w.post('Observation', obs('x', 'pb')), 403);
    await expectOutcome(await w.put('Observation/oa', obs('oa', 'pb')), 403);
    // Taking over another patient's resource by rewriting its subject is refused.
    await expectOutcome(await w.put('Observation/ob', obs('ob', 'pa')), 403);
    await expectOutcome(await w.del('Observation/ob'), 403);
    expect(((await (await admin.get('Observation/ob')).json()) as Json).subject.reference).toBe('Patient/pb');
    const tx = await w.post(base, {
      resourceType: 'Bundle', type: 'transaction',
      entry: [{ request: { method: 'DELETE', url: 'Observation/ob' } }],
    });
    await expectOutcome(tx, 403);
    const batch = (await (await w.post(base, {
      resourceType: 'Bundle', type: 'batch',
      entry: [{ resource: obs('ob', 'pa'), request: { method: 'PUT', url: 'Observation/ob' } }, { request: { method: 'DELETE', url: 'Observation/ob' } }],
    })).json()) as Json;
    expect(batch.entry.map((e: Json) => e.response.status)).toEqual(['403 Forbidden', '403 Forbidden']);
    expect((await admin.get('Observation/ob')).status).toBe(200);
    expect((await w.put('Observation/oa', obs('oa', 'pa'))).status).toBe(200);
    expect((await w.del('Observation/oa')).status).toBe(200);
    await admin.put200(obs('oa', 'pa'));
  });

  test('patient scopes without a patient in the token grant nothing', async () => {
    const none = fhirClient(t, await craftToken(t, 'patient/*.rs'));
    await expectOutcome(await none.get('Observation/oa'), 403);
    await expectOutcome(await none.get('Observation'), 403);
  });

  test('a system scope for a type lifts the patient limit for that type only', async () => {
    const mixed = fhirClient(t, await craftToken(t, 'patient/*.rs system/Patient.rs', { patient: 'pa' }));
    expect(ids(await mixed.search('Patient')).sort()).toEqual(['pa', 'pb', 'pc']);
    expect(ids(await mixed.search('Observation')).sort()).toEqual(['oa', 'oab']);
  });
});
