import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createApp } from '../../src/app.ts';
import type { HotRoute } from '../../src/http/hot-routes.ts';
import { silentLogger } from '../../src/log.ts';
import { BASE, createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';

/**
 * The hot routes (src/http/hot-routes.ts) answer a FHIR read, `POST ValueSet/$validate-code` and
 * `POST /oauth2/token` without Hono's router. Every request here goes to two apps on the same
 * database: the normal one and one with the hot routes off. Their answers must be the same, and the
 * normal app's dispatcher must have counted the request (or not, for the variants it leaves to Hono).
 */
let t: TestApp;
let viaHono: ReturnType<typeof createApp>;
let token: string;
let patientId: string;
let deletedId: string;

const SYSTEM = 'http://cinder.test/CodeSystem/hot';
const VALUE_SET = 'http://cinder.test/ValueSet/hot';

beforeAll(async () => {
  t = await createTestApp();
  viaHono = createApp({ config: t.config, store: t.store, keys: t.keys, clock: t.clock, log: silentLogger, hotRoutes: false });
  token = await t.token();
  const fhir = t.fhir();
  const created = await t.request(`${fhir}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient', gender: 'female' }));
  patientId = ((await created.json()) as { id: string }).id;
  const gone = await t.request(`${fhir}/Patient`, fhirInit(token, 'POST', { resourceType: 'Patient', gender: 'male' }));
  deletedId = ((await gone.json()) as { id: string }).id;
  expect((await t.request(`${fhir}/Patient/${deletedId}`, fhirInit(token, 'DELETE'))).status).toBe(200);
  const concept = [{ code: 'root', display: 'Root', concept: [{ code: 'child', display: 'Child' }] }, { code: 'other', display: 'Other' }];
  await t.request(`${fhir}/CodeSystem/hot`, fhirInit(token, 'PUT', { resourceType: 'CodeSystem', id: 'hot', url: SYSTEM, status: 'active', content: 'complete', concept }));
  await t.request(`${fhir}/ValueSet/hot`, fhirInit(token, 'PUT', {
    resourceType: 'ValueSet', id: 'hot', url: VALUE_SET, status: 'active',
    compose: { include: [{ system: SYSTEM, filter: [{ property: 'concept', op: 'is-a', value: 'root' }] }] },
  }));
});
afterAll(() => t.close());

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

async function answer(app: { request: (url: string, init?: RequestInit) => Response | Promise<Response> }, path: string, init: () => RequestInit): Promise<Answer> {
  const res = await app.request(BASE + path, init());
  const headers = Object.fromEntries([...res.headers].filter(([k]) => k !== 'x-request-id' && k !== 'date'));
  expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  return { status: res.status, headers, body: await res.text() };
}

/**
 * The normal app must have answered through the hot dispatcher (`via` one of its routes) or left the
 * request to Hono (`via` 'hono'): otherwise the comparison below would be Hono against Hono.
 */
async function dispatched<T>(via: HotRoute | 'hono', send: () => Promise<T>): Promise<T> {
  const expected = { ...t.app.hotRoutes!.answered };
  const result = await send();
  if (via !== 'hono') expected[via]++;
  expect(t.app.hotRoutes!.answered).toEqual(expected);
  return result;
}

/** Sends the request to both apps and expects the same status, headers and body. */
async function same(path: string, init: () => RequestInit, via: HotRoute | 'hono'): Promise<Answer> {
  const hot = await dispatched(via, () => answer(t.app, path, init));
  const cold = await answer(viaHono, path, init);
  expect(hot).toEqual(cold);
  return hot;
}

const fhirPath = (rest: string, tenant = 't1') => `/tenants/${tenant}/fhir/R4${rest}`;

describe('FHIR read', () => {
  test('a stored resource: body, ETag, Last-Modified and media type', async () => {
    const a = await same(fhirPath(`/Patient/${patientId}`), () => fhirInit(token), 'read');
    expect(a.status).toBe(200);
    expect(a.headers.etag).toBe('W/"1"');
    expect(a.headers['content-type']).toBe('application/fhir+json; charset=utf-8');
    expect(JSON.parse(a.body)).toMatchObject({ resourceType: 'Patient', id: patientId, gender: 'female' });
  });

  test.each([
    ['unknown id', () => fhirPath('/Patient/nope'), () => fhirInit(token), 404],
    ['deleted', () => fhirPath(`/Patient/${deletedId}`), () => fhirInit(token), 410],
    ['unknown type', () => fhirPath('/Nonsense/1'), () => fhirInit(token), 404],
    ['invalid id', () => fhirPath('/Patient/a!b'), () => fhirInit(token), 400],
    ['no token', () => fhirPath(`/Patient/${patientId}`), () => ({}), 401],
    ['malformed token', () => fhirPath(`/Patient/${patientId}`), () => fhirInit('not.a.jwt'), 401],
    ['unknown tenant', () => fhirPath(`/Patient/${patientId}`, 'nobody'), () => fhirInit(token), 404],
    ['HTML asked for', () => fhirPath(`/Patient/${patientId}`), () => fhirInit(token, 'GET', undefined, { Accept: 'text/html' }), 406],
  ] as const)('%s', async (_, path, init, status) => {
    const a = await same(path(), init, 'read');
    expect(a.status).toBe(status);
    expect(JSON.parse(a.body).resourceType).toBe('OperationOutcome');
  });

  test('a token of another tenant is refused; one without read scope for the type too', async () => {
    const other = await t.tokenFor('t2', ['system/*.read']);
    expect((await same(fhirPath(`/Patient/${patientId}`), () => fhirInit(other), 'read')).status).toBe(403);
    const observationsOnly = await t.tokenFor('t1', ['system/Observation.read']);
    expect((await same(fhirPath(`/Patient/${patientId}`), () => fhirInit(observationsOnly), 'read')).status).toBe(403);
  });

  test('core CodeSystems and ValueSets: read, shadowed by a stored one, deleted shadow, unknown id', async () => {
    const fhir = t.fhir();
    await t.request(`${fhir}/ValueSet/jurisdiction`, fhirInit(token, 'PUT', { resourceType: 'ValueSet', id: 'jurisdiction', url: 'http://hl7.org/fhir/ValueSet/jurisdiction', status: 'draft' }));
    await t.request(`${fhir}/ValueSet/observation-status`, fhirInit(token, 'PUT', { resourceType: 'ValueSet', id: 'observation-status', status: 'draft' }));
    await t.request(`${fhir}/ValueSet/observation-status`, fhirInit(token, 'DELETE'));
    const core = await same(fhirPath('/ValueSet/administrative-gender'), () => fhirInit(token), 'read');
    expect(core.status).toBe(200);
    expect(core.headers.etag).toBe('W/"1"');
    expect(JSON.parse(core.body).meta.lastUpdated).toBe('2019-10-30T00:00:00.000Z');
    expect((await same(fhirPath('/CodeSystem/v2-0203'), () => fhirInit(token), 'read')).status).toBe(200);
    expect(JSON.parse((await same(fhirPath('/ValueSet/jurisdiction'), () => fhirInit(token), 'read')).body).status).toBe('draft');
    expect((await same(fhirPath('/ValueSet/observation-status'), () => fhirInit(token), 'read')).status).toBe(410);
    expect((await same(fhirPath('/ValueSet/no-such-value-set'), () => fhirInit(token), 'read')).status).toBe(404);
  });

  test('variants the hot path leaves to the router answer the same', async () => {
    expect((await same(fhirPath(`/Patient/${patientId}?_format=json`), () => fhirInit(token), 'hono')).status).toBe(200);
    expect((await same(fhirPath(`/Patient/${patientId}/`), () => fhirInit(token), 'hono')).status).toBe(200);
  });
});

describe('ValueSet/$validate-code', () => {
  const params = (...parameter: object[]) => ({ resourceType: 'Parameters', parameter });
  const path = fhirPath('/ValueSet/$validate-code');

  test('member and non-member', async () => {
    const yes = await same(path, () => fhirInit(token, 'POST', params({ name: 'url', valueUri: VALUE_SET }, { name: 'system', valueUri: SYSTEM }, { name: 'code', valueCode: 'child' })), 'validate');
    expect(JSON.parse(yes.body).parameter).toContainEqual({ name: 'result', valueBoolean: true });
    const no = await same(path, () => fhirInit(token, 'POST', params({ name: 'url', valueUri: VALUE_SET }, { name: 'system', valueUri: SYSTEM }, { name: 'code', valueCode: 'other' })), 'validate');
    expect(JSON.parse(no.body).parameter).toContainEqual({ name: 'result', valueBoolean: false });
  });

  test.each([
    ['unknown ValueSet', () => fhirInit(token, 'POST', params({ name: 'url', valueUri: 'http://nowhere/vs' }, { name: 'system', valueUri: SYSTEM }, { name: 'code', valueCode: 'x' })), 400],
    ['code without system', () => fhirInit(token, 'POST', params({ name: 'url', valueUri: VALUE_SET }, { name: 'code', valueCode: 'x' })), 400],
    ['not a Parameters body', () => fhirInit(token, 'POST', { resourceType: 'Patient' }), 400],
    ['malformed JSON', () => fhirInit(token, 'POST', '{"resourceType":'), 400],
    ['wrong media type', () => fhirInit(token, 'POST', 'url=x', { 'Content-Type': 'application/x-www-form-urlencoded' }), 415],
    ['no token', () => ({ method: 'POST', body: '{}', headers: { 'Content-Type': 'application/fhir+json' } }), 401],
  ] as const)('%s', async (_, init, status) => {
    const a = await same(path, init, 'validate');
    expect(a.status).toBe(status);
    expect(JSON.parse(a.body).resourceType).toBe('OperationOutcome');
  });

  test('a token without ValueSet read access is refused', async () => {
    const patientsOnly = await t.tokenFor('t1', ['system/Patient.read']);
    const a = await same(path, () => fhirInit(patientsOnly, 'POST', params({ name: 'url', valueUri: VALUE_SET }, { name: 'system', valueUri: SYSTEM }, { name: 'code', valueCode: 'child' })), 'validate');
    expect(a.status).toBe(403);
  });
});

describe('POST /oauth2/token', () => {
  const basic = () => 'Basic ' + btoa(`${t.admin.client.clientId}:${t.admin.clientSecret}`);
  // The Authorization header is built at request time: t exists only once beforeAll has run.
  const form = (body: string, authorization?: string, type = 'application/x-www-form-urlencoded') =>
    () => ({ method: 'POST', headers: { Authorization: authorization ?? basic(), 'Content-Type': type }, body });

  test('client_credentials: same headers, same fields, a token each that the FHIR API accepts', async () => {
    const hot = await dispatched('token', () => answer(t.app, '/oauth2/token', form('grant_type=client_credentials')));
    const cold = await answer(viaHono, '/oauth2/token', form('grant_type=client_credentials'));
    expect(hot.status).toBe(200);
    expect(hot.headers).toEqual(cold.headers);
    expect(hot.headers).toMatchObject({ 'cache-control': 'no-store', pragma: 'no-cache', 'access-control-allow-origin': '*' });
    const [h, c] = [JSON.parse(hot.body), JSON.parse(cold.body)];
    expect(Object.keys(h).sort()).toEqual(Object.keys(c).sort());
    expect({ ...h, access_token: undefined }).toEqual({ ...c, access_token: undefined });
    for (const access of [h.access_token, c.access_token]) {
      expect((await t.request(fhirPath(`/Patient/${patientId}`), fhirInit(access))).status).toBe(200);
    }
    const [hp, cp] = [h.access_token, c.access_token].map((jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString()));
    expect(Object.keys(hp).sort()).toEqual(Object.keys(cp).sort());
    expect(hp.jti).not.toBe(cp.jti);
  });

  test.each([
    ['wrong secret', form('grant_type=client_credentials', 'Basic ' + btoa('nobody:wrong')), 400],
    ['unsupported grant', form('grant_type=password'), 400],
    ['no grant type', form('scope=system/*.read'), 400],
    ['repeated parameter', form('grant_type=client_credentials&grant_type=client_credentials'), 400],
    ['JSON body', form('{"grant_type":"client_credentials"}', undefined, 'application/json'), 400],
  ] as const)('%s', async (_, init, status) => {
    const a = await same('/oauth2/token', init, 'token');
    expect(a.status).toBe(status);
    expect(a.headers['access-control-allow-origin']).toBe('*');
    expect(JSON.parse(a.body).error).toBeString();
  });

  test('parameters in the query string are refused by both', async () => {
    expect((await same('/oauth2/token?grant_type=client_credentials', form('grant_type=client_credentials'), 'hono')).status).toBe(400);
  });
});

test('both paths count their requests under the same route labels', async () => {
  // Two fresh apps (their own metrics) get the same requests, answered and refused.
  const deps = { config: t.config, store: t.store, keys: t.keys, clock: t.clock, log: silentLogger };
  const [hotApp, coldApp] = [createApp(deps), createApp({ ...deps, hotRoutes: false })];
  const labels = async (app: ReturnType<typeof createApp>) => {
    const basic = 'Basic ' + btoa(`${t.admin.client.clientId}:${t.admin.clientSecret}`);
    const tokenInit = (body: string) => ({ method: 'POST', headers: { Authorization: basic, 'Content-Type': 'application/x-www-form-urlencoded' }, body });
    const validate = (code: string) => fhirInit(token, 'POST', { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: VALUE_SET }, { name: 'system', valueUri: SYSTEM }, { name: 'code', valueCode: code }] });
    for (const [path, init] of [
      [fhirPath(`/Patient/${patientId}`), fhirInit(token)],
      [fhirPath('/Patient/nope'), fhirInit(token)],
      [fhirPath(`/Patient/${patientId}`), {}],
      [fhirPath(`/Patient/${patientId}`, 'nobody'), fhirInit(token)],
      [fhirPath('/ValueSet/$validate-code'), validate('child')],
      [fhirPath('/ValueSet/$validate-code'), { method: 'POST', body: '{}' }],
      ['/oauth2/token', tokenInit('grant_type=client_credentials')],
      ['/oauth2/token', tokenInit('grant_type=password')],
    ] as const) await (await app.request(BASE + path, init)).arrayBuffer();
    const text = await (await app.request(BASE + '/metrics')).text();
    return new Set(text.split('\n').filter((l) => l.startsWith('cinder_http_requests_total{')));
  };
  const [hot, cold] = [await labels(hotApp), await labels(coldApp)];
  expect(hotApp.hotRoutes!.answered).toEqual({ read: 4, validate: 2, token: 2 });
  expect(coldApp.hotRoutes).toBeUndefined();
  for (const route of ['/tenants/:tenant/fhir/R4/:type/:id', '/tenants/:tenant/fhir/R4/ValueSet/$validate-code', '/oauth2/token', '/tenants/:tenant/fhir/R4/*']) {
    expect([...hot].some((l) => l.includes(`route="${route}"`))).toBe(true);
  }
  expect(hot).toEqual(cold);
});
