/**
 * CORS for browser apps (CINDER_CORS_ORIGINS): preflights without a token, the headers on every answer
 * of the FHIR API and the OAuth endpoints (errors, the hot routes and 304s included), each setting, on
 * both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { loadConfig } from '../../src/config.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient } from '../helpers/fhir.ts';

const APP = 'https://app.example.org';
const OTHER = 'https://evil.example.net';

const preflight = (t: TestApp, path: string, origin = APP, method = 'GET', headers = 'authorization, content-type') =>
  t.request(path, { method: 'OPTIONS', headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers } });

const listed = (value: string | null) => (value ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);

await eachStore((kind, fresh) => {
  describe(`CORS, any origin (the default) (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1' });
    });
    afterAll(() => t.close());

    test('preflights of FHIR and OAuth paths are 204 without a token, naming the methods and headers apps send', async () => {
      const fhir = t.fhir('t1');
      for (const [path, method] of [
        [`${fhir}/Patient`, 'POST'], [`${fhir}/Patient/p1`, 'PATCH'], [`${fhir}/Patient/p1`, 'DELETE'], [`${fhir}/`, 'POST'],
        [`${fhir}/$export`, 'GET'], [`${fhir}/metadata`, 'GET'], [`${fhir}/.well-known/smart-configuration`, 'GET'],
        [`${fhir}/ValueSet/$validate-code`, 'POST'], ['/oauth2/token', 'POST'], ['/oauth2/revoke', 'POST'], ['/oauth2/userinfo', 'GET'],
        ['/oauth2/jwks', 'GET'], ['/.well-known/smart-configuration', 'GET'], ['/.well-known/openid-configuration', 'GET'],
        ['/tenants/no-such-tenant/fhir/R4/Patient', 'GET'],
      ]) {
        const res = await preflight(t, path!, APP, method);
        expect({ path, status: res.status }).toEqual({ path, status: 204 });
        expect(res.headers.get('access-control-allow-origin')).toBe('*');
        expect(listed(res.headers.get('access-control-allow-methods'))).toEqual(expect.arrayContaining(['get', 'post', 'put', 'patch', 'delete']));
        expect(listed(res.headers.get('access-control-allow-headers'))).toEqual(expect.arrayContaining(
          ['authorization', 'content-type', 'prefer', 'if-match', 'if-none-match', 'if-none-exist', 'if-modified-since'],
        ));
        expect(Number(res.headers.get('access-control-max-age'))).toBeGreaterThan(0);
        expect(res.headers.get('access-control-allow-credentials')).toBeNull();
      }
    });

    test('answers carry Allow-Origin and expose the headers apps read, on success and on every kind of error', async () => {
      const fhir = t.fhir('t1');
      const token = await t.token();
      const auth = { Authorization: `Bearer ${token}`, Origin: APP };
      const cases: [string, RequestInit, number][] = [
        [`${fhir}/Patient/p1`, { headers: auth }, 200], // the hot route
        [`${fhir}/Patient/p1?_format=json`, { headers: auth }, 200], // the same read through Hono
        [`${fhir}/Patient/p1`, { headers: { ...auth, 'If-None-Match': 'W/"1"' } }, 304],
        [`${fhir}/Patient?_id=p1`, { headers: auth }, 200],
        [`${fhir}/Patient`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/fhir+json' }, body: '{"resourceType":"Patient"}' }, 201],
        [`${fhir}/Patient/p1`, { headers: { Origin: APP } }, 401], // no token: the app must still read the 401
        [`${fhir}/Patient/p1`, { headers: { Origin: APP, Authorization: 'Bearer not-a-token' } }, 401],
        [`${fhir}/Patient/nobody`, { headers: auth }, 404],
        [`${fhir}/Patient/p1`, { headers: { ...auth, Accept: 'application/xml' } }, 406],
        [`${fhir}/Patient`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/fhir+json' }, body: '{"resourceType":"Patient","bogus":1}' }, 422],
        ['/tenants/no-such-tenant/fhir/R4/Patient', { headers: auth }, 404],
        [`${fhir}/metadata`, { headers: { Origin: APP } }, 200],
        ['/.well-known/smart-configuration', { headers: { Origin: APP } }, 200],
        ['/oauth2/jwks', { headers: { Origin: APP } }, 200],
        ['/oauth2/token', { method: 'POST', headers: { Origin: APP, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'grant_type=password' }, 400],
      ];
      for (const [path, init, status] of cases) {
        const res = await t.request(path, init);
        expect({ path, status: res.status }).toEqual({ path, status });
        expect({ path, allow: res.headers.get('access-control-allow-origin') }).toEqual({ path, allow: '*' });
        expect(listed(res.headers.get('access-control-expose-headers'))).toEqual(expect.arrayContaining(
          ['location', 'content-location', 'etag', 'last-modified', 'x-progress', 'retry-after'],
        ));
      }
    });

    test('the hot routes (read, $validate-code, token) answer with the same headers, as the dispatcher itself', async () => {
      const token = await t.token();
      const before = { ...t.app.hotRoutes!.answered };
      const basic = `Basic ${btoa(`${t.admin.client.clientId}:${t.admin.clientSecret}`)}`;
      const cases: [string, RequestInit, number][] = [
        [`${t.fhir('t1')}/Patient/p1`, { headers: { Authorization: `Bearer ${token}`, Origin: APP } }, 200],
        [`${t.fhir('t1')}/ValueSet/$validate-code`, {
          method: 'POST', headers: { Authorization: `Bearer ${token}`, Origin: APP, 'Content-Type': 'application/fhir+json' },
          body: JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' }, { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' }, { name: 'code', valueCode: 'male' }] }),
        }, 200],
        ['/oauth2/token', { method: 'POST', headers: { Authorization: basic, Origin: APP, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'grant_type=client_credentials' }, 200],
      ];
      for (const [path, init, status] of cases) {
        const res = await t.request(path, init);
        expect({ path, status: res.status }).toEqual({ path, status });
        expect({ path, allow: res.headers.get('access-control-allow-origin') }).toEqual({ path, allow: '*' });
        expect(listed(res.headers.get('access-control-expose-headers'))).toContain('x-request-id');
        expect(res.headers.get('x-request-id')).toBeTruthy();
      }
      expect(t.app.hotRoutes!.answered).toEqual({ read: before.read + 1, validate: before.validate + 1, token: before.token + 1 });
    });

    test('the created resource\'s Location and ETag are the exposed ones', async () => {
      const res = await api.post('Patient', { resourceType: 'Patient' }, { Origin: APP });
      expect(res.status).toBe(201);
      expect(res.headers.get('location')).toContain('/Patient/');
      expect(listed(res.headers.get('access-control-expose-headers'))).toEqual(expect.arrayContaining(['location', 'etag']));
    });

    test('the CapabilityStatement says CORS is on, and that reads are conditional', async () => {
      const cs = (await (await t.request(`${t.fhir('t1')}/metadata`)).json()) as { rest: { security: { cors: boolean }; resource: { conditionalRead: string }[] }[] };
      expect(cs.rest[0]!.security.cors).toBe(true);
      expect(new Set(cs.rest[0]!.resource.map((r) => r.conditionalRead))).toEqual(new Set(['full-support']));
    });

    test('introspection (for resource servers) and the login page are not cross-origin endpoints', async () => {
      for (const path of ['/oauth2/introspect', '/oauth2/authorize']) {
        expect((await preflight(t, path, APP, 'POST')).headers.get('access-control-allow-origin')).toBeNull();
        expect((await t.request(path, { headers: { Origin: APP } })).headers.get('access-control-allow-origin')).toBeNull();
      }
      expect((await t.request('/healthz', { headers: { Origin: APP } })).headers.get('access-control-allow-origin')).toBeNull();
    });

    test('an OPTIONS that is not a preflight is an ordinary request (the FHIR API wants a token)', async () => {
      const res = await t.request(`${t.fhir('t1')}/Patient`, { method: 'OPTIONS', headers: { Origin: APP } });
      expect(res.status).toBe(401);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
    });
  });

  describe(`CORS, a list of origins (${kind})`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_CORS_ORIGINS: `${APP}, http://localhost:3000` } });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('a listed origin is echoed, with Vary: Origin; its preflights are answered', async () => {
      for (const origin of [APP, 'http://localhost:3000']) {
        const pre = await preflight(t, `${t.fhir('t1')}/Patient`, origin, 'POST');
        expect(pre.status).toBe(204);
        expect(pre.headers.get('access-control-allow-origin')).toBe(origin);
        expect(pre.headers.get('vary')).toContain('Origin');
        // The first is answered by the hot dispatcher (a 404 of the read route), the second by Hono.
        for (const path of [`${t.fhir('t1')}/Patient/x`, `${t.fhir('t1')}/Patient?_count=1`]) {
          const res = await t.request(path, { headers: { Origin: origin, Authorization: `Bearer ${token}` } });
          expect(res.headers.get('access-control-allow-origin')).toBe(origin);
          expect(res.headers.get('vary')).toContain('Origin');
        }
      }
    });

    test('another origin gets no Allow headers (the browser refuses), and the answer still varies by Origin', async () => {
      const pre = await preflight(t, `${t.fhir('t1')}/Patient`, OTHER, 'POST');
      expect(pre.status).toBe(204);
      expect(pre.headers.get('access-control-allow-origin')).toBeNull();
      expect(pre.headers.get('access-control-allow-methods')).toBeNull();
      const res = await t.request(`${t.fhir('t1')}/Patient?_count=1`, { headers: { Origin: OTHER, Authorization: `Bearer ${token}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
      expect(res.headers.get('vary')).toContain('Origin');
      const before = t.app.hotRoutes!.answered.read;
      const hot = await t.request(`${t.fhir('t1')}/Patient/x`, { headers: { Origin: OTHER, Authorization: `Bearer ${token}` } });
      expect(t.app.hotRoutes!.answered.read).toBe(before + 1);
      expect(hot.status).toBe(404);
      expect(hot.headers.get('access-control-allow-origin')).toBeNull();
      expect(hot.headers.get('vary')).toContain('Origin');
      const direct = await t.request(`${t.fhir('t1')}/metadata`);
      expect(direct.headers.get('access-control-allow-origin')).toBeNull();
      expect(direct.headers.get('vary')).toContain('Origin');
    });
  });

  describe(`CORS off (${kind})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_CORS_ORIGINS: 'none' } });
    });
    afterAll(() => t.close());

    test('none: no CORS headers anywhere; a preflight is an ordinary (unauthenticated) OPTIONS', async () => {
      const pre = await preflight(t, `${t.fhir('t1')}/Patient`);
      expect(pre.status).toBe(401);
      expect(pre.headers.get('access-control-allow-origin')).toBeNull();
      for (const path of ['/oauth2/jwks', '/.well-known/smart-configuration', `${t.fhir('t1')}/metadata`]) {
        expect((await t.request(path, { headers: { Origin: APP } })).headers.get('access-control-allow-origin')).toBeNull();
      }
      const cs = (await (await t.request(`${t.fhir('t1')}/metadata`)).json()) as { rest: { security: { cors: boolean } }[] };
      expect(cs.rest[0]!.security.cors).toBe(false);
    });
  });
});

test('CINDER_CORS_ORIGINS takes *, none or a list of origins; anything else stops with the variable named', () => {
  expect(loadConfig({}).corsOrigins).toBe('*');
  for (const ok of ['*', 'none', APP, `${APP},http://localhost:3000`, ` ${APP} , https://b.example:8443 `]) {
    expect(loadConfig({ CINDER_CORS_ORIGINS: ok }).corsOrigins).toBe(ok.trim());
  }
  for (const bad of ['app.example.org', `${APP}/`, `${APP}/path`, 'ftp://x.example', `${APP},*`, 'http://localhost:80']) {
    expect(() => loadConfig({ CINDER_CORS_ORIGINS: bad })).toThrow(/CINDER_CORS_ORIGINS \(--cors-origins\)/);
  }
});
