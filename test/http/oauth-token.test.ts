import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { basic, post, userClient } from '../helpers/oauth.ts';

let t: TestApp;
let id: string;
let secret: string;
beforeEach(async () => {
  t = await createTestApp();
  const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read', 'system/Patient.rs', 'custom'] });
  id = c.client.clientId;
  secret = c.clientSecret!;
});
afterEach(() => t.close());

async function expectError(res: Response, error: string, status = 400) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/json;charset=UTF-8');
  expect(res.headers.get('cache-control')).toBe('no-store');
  expect(res.headers.get('pragma')).toBe('no-cache');
  const body = (await res.json()) as { error: string };
  expect(body.error).toBe(error);
  return body;
}

describe('client_credentials', () => {
  test('issues an ES256 at+jwt with every scope of the client when none is asked', async () => {
    const res = await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(id, secret) });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json;charset=UTF-8');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('pragma')).toBe('no-cache');
    const body = (await res.json()) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'scope', 'token_type']);
    expect(body.token_type).toBe('Bearer');
    expect(body.expires_in).toBe(300);
    expect(body.scope).toBe('system/*.read system/Patient.rs custom');
    const header = decodeProtectedHeader(body.access_token as string);
    expect(header).toMatchObject({ alg: 'ES256', typ: 'at+jwt' });
    const claims = decodeJwt(body.access_token as string);
    expect(claims).toMatchObject({ iss: 'http://cinder.test', sub: id, client_id: id, tenant: 't1', aud: t.fhir('t1') });
    expect(claims.exp! - claims.iat!).toBe(300);
    expect(typeof claims.jti).toBe('string');
  });

  test('requested scopes not enabled for the client are ignored', async () => {
    const res = await post(t, { grant_type: 'client_credentials', scope: 'custom system/*.write other' }, { Authorization: basic(id, secret) });
    expect(((await res.json()) as { scope: string }).scope).toBe('custom');
  });

  test('nothing valid requested -> invalid_request (the contract names no invalid_scope)', async () => {
    await expectError(await post(t, { grant_type: 'client_credentials', scope: 'system/*.write' }, { Authorization: basic(id, secret) }), 'invalid_request');
  });

  test('patient/ scopes and launch/patient are never granted: a backend service has no patient in context', async () => {
    const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Patient.rs', 'patient/*.read', 'launch/patient', 'user/Observation.rs'] });
    const auth = { Authorization: basic(c.client.clientId, c.clientSecret!) };
    const all = (await (await post(t, { grant_type: 'client_credentials' }, auth)).json()) as { scope: string; access_token: string };
    expect(all.scope).toBe('system/Patient.rs user/Observation.rs');
    expect(decodeJwt(all.access_token).scope).toBe('system/Patient.rs user/Observation.rs');
    const asked = await post(t, { grant_type: 'client_credentials', scope: 'patient/Observation.rs system/Patient.rs launch/patient' }, auth);
    expect(((await asked.json()) as { scope: string }).scope).toBe('system/Patient.rs');
    await expectError(await post(t, { grant_type: 'client_credentials', scope: 'patient/*.read launch/patient' }, auth), 'invalid_request');
    const only = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['patient/*.read'] });
    await expectError(await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(only.client.clientId, only.clientSecret!) }), 'invalid_request');
  });

  test('the token works on the FHIR API of its tenant only', async () => {
    const res = await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(id, secret) });
    const { access_token } = (await res.json()) as { access_token: string };
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(access_token))).status).toBe(200);
    await createTenant(t.store, t.clock, 't2');
    expect((await t.request(`${t.fhir('t2')}/Patient`, fhirInit(access_token))).status).toBe(403);
  });

  test('per-client lifetime overrides the backend default', async () => {
    const c = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['custom'], accessTokenTtl: 120 });
    const res = await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(c.client.clientId, c.clientSecret!) });
    expect(((await res.json()) as { expires_in: number }).expires_in).toBe(120);
  });

  test('a client without the grant -> unauthorized_client', async () => {
    const c = await userClient(t);
    await expectError(await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(c.id, c.secret!) }), 'unauthorized_client');
  });

  test('a public client -> unauthorized_client', async () => {
    const pub = await userClient(t, { secret: false, grants: ['authorization_code'] });
    await expectError(await post(t, { grant_type: 'client_credentials', client_id: pub.id }), 'unauthorized_client');
  });
});

describe('client authentication', () => {
  test('wrong secret -> 400 invalid_client (the contract), still with a Basic challenge', async () => {
    const res = await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(id, 'wrong') });
    await expectError(res, 'invalid_client', 400);
    expect(res.headers.get('www-authenticate')).toStartWith('Basic realm="cinder"');
  });

  test('unknown client in Basic -> 400 invalid_client', async () => {
    await expectError(await post(t, { grant_type: 'client_credentials' }, { Authorization: basic('nobody', secret) }), 'invalid_client', 400);
  });

  test('malformed Basic credentials -> 400 invalid_client', async () => {
    await expectError(await post(t, { grant_type: 'client_credentials' }, { Authorization: 'Basic !!!' }), 'invalid_client', 400);
    await expectError(await post(t, { grant_type: 'client_credentials' }, { Authorization: 'Basic ' + btoa('no-colon') }), 'invalid_client', 400);
  });

  test('Basic credentials are form-url-decoded (RFC 6749 appendix B)', async () => {
    const encoded = 'Basic ' + btoa(`${encodeURIComponent(id)}:${encodeURIComponent(secret).replace(/-/g, '%2D')}`);
    expect((await post(t, { grant_type: 'client_credentials' }, { Authorization: encoded })).status).toBe(200);
  });

  test('no authentication at all -> 400 invalid_client', async () => {
    const res = await post(t, { grant_type: 'client_credentials' });
    await expectError(res, 'invalid_client');
    expect(res.headers.get('www-authenticate')).toBeNull();
  });

  test('a confidential client naming itself without its secret -> invalid_client', async () => {
    await expectError(await post(t, { grant_type: 'client_credentials', client_id: id }), 'invalid_client');
  });

  test('client_secret in the body is not a supported method -> invalid_client', async () => {
    await expectError(await post(t, { grant_type: 'client_credentials', client_id: id, client_secret: secret }), 'invalid_client');
  });

  test('two authentication methods in one request -> invalid_request', async () => {
    const body = { grant_type: 'client_credentials', client_secret: secret };
    await expectError(await post(t, body, { Authorization: basic(id, secret) }), 'invalid_request');
  });

  test('body client_id differing from Basic -> invalid_request', async () => {
    await expectError(await post(t, { grant_type: 'client_credentials', client_id: 'other' }, { Authorization: basic(id, secret) }), 'invalid_request');
  });

  test('another Authorization scheme -> invalid_client', async () => {
    await expectError(await post(t, { grant_type: 'client_credentials' }, { Authorization: 'Bearer abc' }), 'invalid_client');
  });
});

describe('request checks', () => {
  const auth = () => ({ Authorization: basic(id, secret) });

  test('grant_type missing -> invalid_request', async () => {
    await expectError(await post(t, { scope: 'custom' }, auth()), 'invalid_request');
  });

  test('unknown grant_type -> unsupported_grant_type', async () => {
    for (const g of ['password', 'implicit', 'urn:ietf:params:oauth:grant-type:jwt-bearer']) {
      await expectError(await post(t, { grant_type: g }, auth()), 'unsupported_grant_type');
    }
  });

  test('a repeated parameter -> invalid_request', async () => {
    await expectError(await post(t, 'grant_type=client_credentials&scope=custom&scope=custom', auth()), 'invalid_request');
  });

  test('a body that is not a form -> invalid_request', async () => {
    const res = await t.request('/oauth2/token', { method: 'POST', headers: { 'Content-Type': 'application/json', ...auth() }, body: '{"grant_type":"client_credentials"}' });
    await expectError(res, 'invalid_request');
  });

  test('parameters in the query string -> invalid_request', async () => {
    const res = await t.request('/oauth2/token?grant_type=client_credentials', { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded', ...auth() }, body: '' });
    await expectError(res, 'invalid_request');
  });

  test('GET -> 405 with Allow: POST', async () => {
    const res = await t.request('/oauth2/token');
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
  });

  test('an oversized body -> invalid_request', async () => {
    await expectError(await post(t, 'grant_type=client_credentials&x=' + 'a'.repeat(70_000), auth()), 'invalid_request');
  });
});
