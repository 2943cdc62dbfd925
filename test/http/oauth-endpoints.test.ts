import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { MIN_ROTATION_DELAY_MS } from '../../src/auth/keys.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { basic, getCode, post, redeem, testUser, userClient } from '../helpers/oauth.ts';

let t: TestApp;
let c: Awaited<ReturnType<typeof userClient>>;
let rs: { id: string; secret: string };
let tokens: { access_token: string; refresh_token: string };

beforeEach(async () => {
  t = await createTestApp();
  c = await userClient(t);
  await testUser(t);
  const r = await createClient(t.store, t.clock, { tenant: 't1', name: 'resource server', scopes: ['introspect'] });
  rs = { id: r.client.clientId, secret: r.clientSecret! };
  const code = await getCode(t, { clientId: c.id, scope: 'openid profile email phone address fhirUser offline_access user/*.read' });
  tokens = (await (await redeem(t, code, c)).json()) as typeof tokens;
});
afterEach(() => t.close());

const introspect = (token: string, who = rs, extra: Record<string, string> = {}) =>
  post(t, { token, ...extra }, { Authorization: basic(who.id, who.secret) }, '/oauth2/introspect');
const revoke = (token: string, extra: Record<string, string> = {}) =>
  post(t, { token, ...extra }, { Authorization: basic(c.id, c.secret!) }, '/oauth2/revoke');

describe('introspection (RFC 7662)', () => {
  test('an active access token', async () => {
    const res = await introspect(tokens.access_token);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ active: true, client_id: c.id, token_type: 'Bearer', tenant: 't1', iss: 'http://cinder.test' });
    // Alice (testUser) is a Patient: her `user/*.read` is granted as `patient/*.read`.
    expect(body.scope).toContain('patient/*.read');
    expect(typeof body.exp).toBe('number');
  });

  test('an active refresh token, to its own client', async () => {
    const body = (await (await introspect(tokens.refresh_token, { id: c.id, secret: c.secret! })).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ active: true, token_type: 'refresh_token', client_id: c.id });
  });

  test('garbage, expired, and other tenants\' tokens are inactive', async () => {
    expect(await (await introspect('garbage')).json()).toEqual({ active: false });
    const other = await t.tokenFor('t2', ['system/*.read']);
    expect(await (await introspect(other)).json()).toEqual({ active: false });
    t.clock.advance(3601_000);
    expect(await (await introspect(tokens.access_token)).json()).toEqual({ active: false });
  });

  test('needs client authentication: none -> invalid_client; token missing -> invalid_request', async () => {
    const res = await post(t, { token: tokens.access_token }, {}, '/oauth2/introspect');
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_client');
    const pub = await userClient(t, { secret: false, grants: ['authorization_code'] });
    const pubRes = await post(t, { token: tokens.access_token, client_id: pub.id }, {}, '/oauth2/introspect');
    expect(((await pubRes.json()) as { error: string }).error).toBe('invalid_client');
    const missing = await post(t, {}, { Authorization: basic(rs.id, rs.secret) }, '/oauth2/introspect');
    expect(((await missing.json()) as { error: string }).error).toBe('invalid_request');
  });
});

describe('revocation (RFC 7009)', () => {
  test('revoking an access token: introspection inactive, FHIR API 401, refresh token still works', async () => {
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(tokens.access_token))).status).toBe(200);
    // A read takes the direct route, which admits a token verified before without waiting.
    expect((await t.request(`${t.fhir('t1')}/Patient/nobody`, fhirInit(tokens.access_token))).status).toBe(404);
    const res = await revoke(tokens.access_token, { token_type_hint: 'access_token' });
    expect(res.status).toBe(200);
    expect(await (await introspect(tokens.access_token)).json()).toEqual({ active: false });
    for (const path of ['Patient', 'Patient/nobody']) {
      const fhir = await t.request(`${t.fhir('t1')}/${path}`, fhirInit(tokens.access_token));
      expect(fhir.status).toBe(401);
      expect(fhir.headers.get('www-authenticate')).toContain('invalid_token');
    }
    expect((await post(t, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token }, { Authorization: basic(c.id, c.secret!) })).status).toBe(200);
  });

  test('revoking a refresh token revokes its grant: access tokens issued from it too', async () => {
    expect((await revoke(tokens.refresh_token)).status).toBe(200);
    expect(await (await introspect(tokens.refresh_token, { id: c.id, secret: c.secret! })).json()).toEqual({ active: false });
    expect(await (await introspect(tokens.access_token)).json()).toEqual({ active: false });
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(tokens.access_token))).status).toBe(401);
  });

  test("unknown tokens and other clients' tokens answer 200 and change nothing", async () => {
    expect((await revoke('garbage')).status).toBe(200);
    const other = await userClient(t);
    const res = await post(t, { token: tokens.refresh_token }, { Authorization: basic(other.id, other.secret!) }, '/oauth2/revoke');
    expect(res.status).toBe(200);
    expect(((await (await introspect(tokens.refresh_token, { id: c.id, secret: c.secret! })).json()) as { active: boolean }).active).toBe(true);
  });

  test('a client_credentials token can be revoked by its client', async () => {
    const token = await t.token();
    const res = await post(t, { token }, { Authorization: basic(t.admin.client.clientId, t.admin.clientSecret!) }, '/oauth2/revoke');
    expect(res.status).toBe(200);
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(token))).status).toBe(401);
  });

  test('token missing -> invalid_request; bad client -> invalid_client', async () => {
    expect(((await (await revoke('', {})).json()) as { error: string }).error).toBe('invalid_request');
    const bad = await post(t, { token: 'x' }, { Authorization: basic(c.id, 'wrong') }, '/oauth2/revoke');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: string }).error).toBe('invalid_client');
  });
});

describe('userinfo (OIDC Core 5.3)', () => {
  test("the user's claims per scope", async () => {
    const res = await t.request('/oauth2/userinfo', { headers: { Authorization: `Bearer ${tokens.access_token}` } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    const user = (await t.store.users.byUsername('t1', 'alice'))!;
    expect(body).toEqual({
      sub: user.id, name: 'Alice Example', email: 'alice@example.org', email_verified: true, phone_number: '+1 555 0100',
      phone_number_verified: false, address: { formatted: '1 Main St' }, fhirUser: `${t.fhir('t1')}/Patient/p1`,
    });
  });

  test('no token -> 401 with a Bearer challenge; a token without openid -> 403 insufficient_scope', async () => {
    const none = await t.request('/oauth2/userinfo');
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="cinder"');
    // The same RFC 6750 answers as the FHIR API (src/auth/bearer.ts): a malformed header, a bad token.
    const malformed = await t.request('/oauth2/userinfo', { headers: { Authorization: 'Basic abc' } });
    expect(malformed.status).toBe(401);
    expect(((await malformed.json()) as { error: string }).error).toBe('invalid_request');
    expect(malformed.headers.get('www-authenticate')).toStartWith('Bearer realm="cinder", error="invalid_request"');
    const bad = await t.request('/oauth2/userinfo', { headers: { Authorization: 'Bearer not.a.jwt' } });
    expect(bad.status).toBe(401);
    expect(bad.headers.get('www-authenticate')).toStartWith('Bearer realm="cinder", error="invalid_token"');
    const cc = await t.token();
    const res = await t.request('/oauth2/userinfo', { headers: { Authorization: `Bearer ${cc}` } });
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).toContain('insufficient_scope');
  });
});

describe('discovery', () => {
  const required = ['issuer', 'authorization_endpoint', 'token_endpoint', 'jwks_uri', 'grant_types_supported', 'response_types_supported', 'scopes_supported',
    'code_challenge_methods_supported', 'token_endpoint_auth_methods_supported', 'token_endpoint_auth_signing_alg_values_supported', 'capabilities',
    'revocation_endpoint', 'introspection_endpoint'];

  test('smart-configuration at the root and under the FHIR base, public', async () => {
    for (const path of ['/.well-known/smart-configuration', '/tenants/t1/fhir/R4/.well-known/smart-configuration']) {
      const res = await t.request(path);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toStartWith('application/json');
      const body = (await res.json()) as Record<string, unknown>;
      for (const k of required) expect(body).toHaveProperty(k);
      expect(body.issuer).toBe('http://cinder.test');
      expect(body.token_endpoint).toBe('http://cinder.test/oauth2/token');
      expect(body.code_challenge_methods_supported).toEqual(['S256']);
      expect(body.token_endpoint_auth_methods_supported).toEqual(expect.arrayContaining(['client_secret_basic', 'private_key_jwt']));
      expect(body.token_endpoint_auth_signing_alg_values_supported).toEqual(expect.arrayContaining(['RS384', 'ES384']));
      // What Cinder does, and nothing more: a standalone launch with patient context (the patient picker), and
      // the EHR launch with patient and encounter context and the EHR's need_patient_banner (POST /oauth2/launch);
      // no standalone encounter, no smart_style_url.
      expect([...(body.capabilities as string[])].sort()).toEqual([
        'authorize-post', 'client-confidential-asymmetric', 'client-confidential-symmetric', 'client-public', 'context-banner', 'context-ehr-encounter',
        'context-ehr-patient', 'context-standalone-patient', 'launch-ehr', 'launch-standalone', 'permission-offline', 'permission-patient',
        'permission-user', 'permission-v1', 'permission-v2', 'sso-openid-connect',
      ]);
    }
    expect((await t.request('/tenants/nope/fhir/R4/.well-known/smart-configuration')).status).toBe(404);
  });

  test('openid-configuration', async () => {
    const body = (await (await t.request('/.well-known/openid-configuration')).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ issuer: 'http://cinder.test', userinfo_endpoint: 'http://cinder.test/oauth2/userinfo', id_token_signing_alg_values_supported: ['RS256'] });
  });

  test('the CapabilityStatement carries the oauth-uris security extension', async () => {
    const cs = (await (await t.request(`${t.fhir('t1')}/metadata`)).json()) as { rest: { security: { extension: { url: string; extension: { url: string; valueUri: string }[] }[] } }[] };
    const ext = cs.rest[0]!.security.extension.find((e) => e.url === 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris')!;
    const uris = Object.fromEntries(ext.extension.map((e) => [e.url, e.valueUri]));
    expect(uris).toEqual({
      token: 'http://cinder.test/oauth2/token', authorize: 'http://cinder.test/oauth2/authorize',
      revoke: 'http://cinder.test/oauth2/revoke', introspect: 'http://cinder.test/oauth2/introspect',
    });
  });
});

describe('CORS', () => {
  test('browser apps may call token, revocation, userinfo, JWKS and discovery cross-origin; not introspection or the login page', async () => {
    const origin = { Origin: 'https://app.example' };
    for (const path of ['/oauth2/token', '/oauth2/revoke', '/oauth2/userinfo', '/oauth2/jwks', '/.well-known/smart-configuration']) {
      const pre = await t.request(path, { method: 'OPTIONS', headers: { ...origin, 'Access-Control-Request-Method': 'POST' } });
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    }
    expect((await t.request('/oauth2/introspect', { method: 'OPTIONS', headers: origin })).headers.get('access-control-allow-origin')).toBeNull();
    expect((await t.request('/oauth2/authorize', { headers: origin })).headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('keys', () => {
  test('rotation: new tokens signed with the new key, old tokens still verify, both published', async () => {
    const { newKids: [newEs] } = await t.keys.rotate({ delayMs: MIN_ROTATION_DELAY_MS });
    // A minute before the hand-over the old key still signs; from it, the new one.
    t.clock.advance(MIN_ROTATION_DELAY_MS - 60_000);
    const before = await t.token();
    t.clock.advance(60_000);
    const after = await t.token();
    const { decodeProtectedHeader } = await import('jose');
    expect(decodeProtectedHeader(after).kid).toBe(newEs!);
    expect(decodeProtectedHeader(before).kid).not.toBe(newEs!);
    const kids = ((await (await t.request('/oauth2/jwks')).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
    expect(kids).toContain(decodeProtectedHeader(before).kid!);
    expect(kids).toContain(newEs!);
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(before))).status).toBe(200);
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(after))).status).toBe(200);
  });
});

describe('rate limits', () => {
  test('token endpoint per client: 429 with Retry-After; off switch', async () => {
    const limited = await createTestApp({ env: { CINDER_TOKEN_RATE_LIMIT_CLIENT: '3' } });
    try {
      for (let i = 0; i < 3; i++) await limited.token();
      const res = await post(limited, { grant_type: 'client_credentials' }, { Authorization: basic(limited.admin.client.clientId, limited.admin.clientSecret!) });
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(((await res.json()) as { error: string }).error).toBe('temporarily_unavailable');
      limited.clock.advance(60_000);
      await limited.token();
    } finally {
      await limited.close();
    }
    const off = await createTestApp({ env: { CINDER_TOKEN_RATE_LIMIT_CLIENT: '3', CINDER_RATE_LIMITS: 'off' } });
    try {
      for (let i = 0; i < 6; i++) await off.token();
    } finally {
      await off.close();
    }
  });

  test('token endpoint per IP, before client authentication', async () => {
    const limited = await createTestApp({ env: { CINDER_TOKEN_RATE_LIMIT_IP: '2', CINDER_TRUST_PROXY: 'on' } });
    try {
      const ip = { 'X-Forwarded-For': '198.51.100.1, 203.0.113.5' };
      for (let i = 0; i < 2; i++) expect((await post(limited, { grant_type: 'client_credentials' }, ip)).status).toBe(400);
      expect((await post(limited, { grant_type: 'client_credentials' }, ip)).status).toBe(429);
      expect((await post(limited, { grant_type: 'client_credentials' }, { 'X-Forwarded-For': '203.0.113.6' })).status).toBe(400);
    } finally {
      await limited.close();
    }
  });
});
