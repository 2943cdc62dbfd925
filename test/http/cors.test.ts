/**
 * CORS for browser apps (CINDER_CORS_ORIGINS): preflights without a token, the headers on every answer
 * of the FHIR API and the OAuth endpoints (errors, the hot routes and 304s included), each setting, on
 * both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { loadConfig } from '../../src/config.ts';
import { StoreUnavailableError } from '../../src/store/types.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore, runExports } from '../helpers/export.ts';
import { craftToken, fhirClient, type FhirClient } from '../helpers/fhir.ts';

const APP = 'https://app.example.org';
const OTHER = 'https://evil.example.net';

const preflight = (t: TestApp, path: string, origin = APP, method = 'GET', headers = 'authorization, content-type') =>
  t.request(path, { method: 'OPTIONS', headers: { Origin: origin, 'Access-Control-Request-Method': method, 'Access-Control-Request-Headers': headers } });

const listed = (value: string | null) => (value ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);

/** The response headers a page on another origin must be able to read (the issue's list). */
const EXPOSED = ['location', 'content-location', 'etag', 'last-modified', 'x-progress', 'retry-after', 'allow', 'accept-patch'];

/** Asserts that `res` carries the CORS headers for `origin` (`*` by default) and returns it. */
function expectCors(label: string, res: Response, allow = '*'): Response {
  expect({ label, allow: res.headers.get('access-control-allow-origin') }).toEqual({ label, allow });
  expect({ label, exposed: listed(res.headers.get('access-control-expose-headers')) }).toEqual({ label, exposed: expect.arrayContaining(EXPOSED) });
  return res;
}

/**
 * `store` whose repositories' methods all throw `failure()` while it is set: a database outage (503)
 * or an unexpected error (500) at whatever the request reaches first.
 */
function failing(store: Store): { store: Store; fail(failure: (() => Error) | null): void } {
  let failure: (() => Error) | null = null;
  const repo = (target: object): object => new Proxy(target, {
    get(obj, prop) {
      const value = Reflect.get(obj, prop, obj) as unknown;
      if (typeof value === 'function') {
        return (...args: unknown[]) => {
          if (failure) throw failure();
          return (value as (...a: unknown[]) => unknown).apply(obj, args);
        };
      }
      return value !== null && typeof value === 'object' ? repo(value) : value;
    },
  });
  const wrapped = new Proxy(store, {
    get(obj, prop) {
      const value = Reflect.get(obj, prop, obj) as unknown;
      if (typeof value === 'function') return (value as (...a: unknown[]) => unknown).bind(obj);
      return value !== null && typeof value === 'object' ? repo(value) : value;
    },
  });
  return { store: wrapped, fail: (f) => void (failure = f) };
}

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
        ['/tenants/no-such-tenant/fhir/R4/Patient', 'GET'], [`${fhir}/$export-status/no-such-job`, 'DELETE'],
        // Unknown paths too: an app that calls a wrong address reads the 404 rather than a CORS failure.
        [`${fhir}/NoSuchType/x/y/z`, 'GET'], ['/tenants/t1/fhir', 'GET'], ['/tenants/t1/fhir/R5/Patient', 'GET'],
        ['/oauth2/no-such-endpoint', 'POST'], ['/no-such-path', 'GET'],
      ]) {
        const res = await preflight(t, path!, APP, method);
        expect({ path, status: res.status }).toEqual({ path, status: 204 });
        expect(res.headers.get('access-control-allow-origin')).toBe('*');
        expect(listed(res.headers.get('access-control-allow-methods'))).toEqual(expect.arrayContaining(['get', 'post', 'put', 'patch', 'delete']));
        expect(listed(res.headers.get('access-control-allow-headers'))).toEqual(expect.arrayContaining(
          ['authorization', 'content-type', 'content-encoding', 'prefer', 'if-match', 'if-none-match', 'if-none-exist', 'if-modified-since'],
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
        [`${fhir}/Patient/p1`, { headers: { ...auth, Accept: 'text/turtle' } }, 406],
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
      // A Binary read answers its securityContext in a header of its own, which a page must be able to read as well.
      expect(listed(res.headers.get('access-control-expose-headers'))).toContain('x-security-context');
    });

    test('the CapabilityStatement says CORS is on, and that reads are conditional', async () => {
      const cs = (await (await t.request(`${t.fhir('t1')}/metadata`)).json()) as { rest: { security: { cors: boolean }; resource: { conditionalRead: string }[] }[] };
      expect(cs.rest[0]!.security.cors).toBe(true);
      expect(new Set(cs.rest[0]!.resource.map((r) => r.conditionalRead))).toEqual(new Set(['full-support']));
    });

    test('introspection (for resource servers), the login page and the ops endpoints are not cross-origin endpoints', async () => {
      for (const path of ['/oauth2/introspect', '/oauth2/authorize', '/oauth2/authorize/', '/healthz', '/readyz', '/metrics']) {
        expect({ path, allow: (await preflight(t, path, APP, 'POST')).headers.get('access-control-allow-origin') }).toEqual({ path, allow: null });
        expect({ path, allow: (await t.request(path, { headers: { Origin: APP } })).headers.get('access-control-allow-origin') }).toEqual({ path, allow: null });
      }
    });

    test('unknown paths answer their 404 with the headers, so the app can read it', async () => {
      for (const path of [`${t.fhir('t1')}/NoSuchType/x/y/z`, '/tenants/t1/fhir', '/oauth2/no-such-endpoint', '/no-such-path']) {
        const res = await t.request(path, { headers: { Origin: APP, Authorization: `Bearer ${await t.token()}` } });
        expect({ path, status: res.status }).toEqual({ path, status: 404 });
        expectCors(path, res);
      }
    });

    test('403s, 405, 409, 410, 412 and 415 of the FHIR API carry the headers, through the hot route and through Hono', async () => {
      const fhir = t.fhir('t1');
      const otherTenant = await t.tokenFor('t2', ['system/*.*']);
      const observationsOnly = await craftToken(t, 'system/Observation.read');
      const token = await t.token();
      await api.put200({ resourceType: 'Patient', id: 'gone' });
      await api.del('Patient/gone');
      const before = t.app.hotRoutes!.answered.read;
      const cases: [string, string, RequestInit, number][] = [
        ['another tenant\'s token, hot read', `${fhir}/Patient/p1`, { headers: { Authorization: `Bearer ${otherTenant}` } }, 403],
        ['another tenant\'s token, search', `${fhir}/Patient?_id=p1`, { headers: { Authorization: `Bearer ${otherTenant}` } }, 403],
        ['scopes without Patient, hot read', `${fhir}/Patient/p1`, { headers: { Authorization: `Bearer ${observationsOnly}` } }, 403],
        ['POST to an instance', `${fhir}/Patient/p1`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: '{}' }, 405],
        ['a deleted resource, hot read', `${fhir}/Patient/gone`, { headers: { Authorization: `Bearer ${token}` } }, 410],
        ['PATCH with a stale If-Match', `${fhir}/Patient/p1`, {
          method: 'PATCH', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json-patch+json', 'If-Match': 'W/"99"' },
          body: '[{"op":"add","path":"/active","value":true}]',
        }, 412],
        ['PATCH as XML', `${fhir}/Patient/p1`, { method: 'PATCH', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/xml' }, body: '<x/>' }, 415],
        ['deleting core terminology', `${fhir}/ValueSet/administrative-gender`, { method: 'DELETE', headers: { Authorization: `Bearer ${token}` } }, 409],
      ];
      for (const [label, path, init, status] of cases) {
        const res = await t.request(path, { ...init, headers: { ...(init.headers as Record<string, string>), Origin: APP } });
        expect({ label, status: res.status }).toEqual({ label, status });
        expectCors(label, res);
      }
      expect(t.app.hotRoutes!.answered.read).toBe(before + 3);
    });

    test('bulk export: kick-off, status in progress, manifest, download and cancel carry the headers; Content-Location, X-Progress and Retry-After are readable', async () => {
      const auth = { Authorization: `Bearer ${await t.token()}`, Origin: APP };
      const kickOff = expectCors('kick-off', await t.request(`${t.fhir('t1')}/$export?_type=Patient`, { headers: { ...auth, Prefer: 'respond-async' } }));
      expect(kickOff.status).toBe(202);
      const statusUrl = kickOff.headers.get('content-location')!;
      const running = expectCors('status', await t.request(statusUrl, { headers: auth }));
      expect(running.status).toBe(202);
      expect(running.headers.get('x-progress')).toBeTruthy();
      expect(running.headers.get('retry-after')).toBeTruthy();
      await runExports(t);
      const done = expectCors('manifest', await t.request(statusUrl, { headers: auth }));
      expect(done.status).toBe(200);
      const manifest = (await done.json()) as { output: { url: string }[] };
      const file = expectCors('download', await t.request(manifest.output[0]!.url, { headers: auth }));
      expect(file.status).toBe(200);
      expect(await file.text()).toContain('"resourceType":"Patient"');
      // A download resumed from a page: the preflight allows Range and If-Range, and the page reads where the part lies.
      const resume = await preflight(t, manifest.output[0]!.url, APP, 'GET', 'authorization, range, if-range');
      expect(listed(resume.headers.get('access-control-allow-headers'))).toEqual(expect.arrayContaining(['authorization', 'range', 'if-range']));
      const part = expectCors('range', await t.request(manifest.output[0]!.url, { headers: { ...auth, Range: 'bytes=2-', 'If-Range': file.headers.get('etag')! } }));
      expect([part.status, part.headers.get('content-range'), part.headers.get('accept-ranges')]).toEqual([206, expect.stringMatching(/^bytes 2-\d+\/\d+$/), 'bytes']);
      expect(listed(part.headers.get('access-control-expose-headers'))).toEqual(expect.arrayContaining(['content-range', 'accept-ranges']));
      expectCors('download without a token', await t.request(manifest.output[0]!.url, { headers: { Origin: APP } }));
      const cancelled = expectCors('cancel', await t.request(statusUrl, { method: 'DELETE', headers: auth }));
      expect(cancelled.status).toBe(202);
      expectCors('unknown job', await t.request(`${t.fhir('t1')}/$export-status/no-such-job`, { headers: auth }));
    });

    test('the OAuth endpoints\' errors carry the headers: userinfo without a token, a bad client', async () => {
      const userinfo = expectCors('userinfo', await t.request('/oauth2/userinfo', { headers: { Origin: APP } }));
      expect(userinfo.status).toBe(401);
      expect(userinfo.headers.get('www-authenticate')).toStartWith('Bearer');
      const token = expectCors('token', await t.request('/oauth2/token', {
        method: 'POST', headers: { Origin: APP, 'Content-Type': 'application/x-www-form-urlencoded', Authorization: `Basic ${btoa('nobody:wrong')}` }, body: 'grant_type=client_credentials',
      }));
      expect(((await token.json()) as { error: string }).error).toBe('invalid_client');
      expectCors('revoke', await t.request('/oauth2/revoke', { method: 'POST', headers: { Origin: APP, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'token=x' }));
    });

    test('an OPTIONS that is not a preflight is an ordinary request (the FHIR API wants a token)', async () => {
      const res = await t.request(`${t.fhir('t1')}/Patient`, { method: 'OPTIONS', headers: { Origin: APP } });
      expect(res.status).toBe(401);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
    });
  });

  describe(`CORS on 500 and 503 answers (${kind})`, () => {
    let t: TestApp;
    let db: ReturnType<typeof failing>;
    let token: string;
    beforeAll(async () => {
      db = failing(await fresh());
      t = await createTestApp({ store: db.store });
      token = await t.token();
      await fhirClient(t, token).put200({ resourceType: 'Patient', id: 'p1' });
    });
    afterAll(() => {
      db.fail(null);
      return t.close();
    });

    test('a database outage (503 with Retry-After) and an unexpected error (500) carry the headers on the FHIR API, its hot route and the token endpoint', async () => {
      // A client the token endpoint has not cached yet: it must ask the database.
      const basic = `Basic ${btoa('not-cached-yet:secret')}`;
      const requests: [string, string, RequestInit][] = [
        ['hot read', `${t.fhir('t1')}/Patient/p1`, { headers: { Authorization: `Bearer ${token}` } }],
        ['search', `${t.fhir('t1')}/Patient?_id=p1`, { headers: { Authorization: `Bearer ${token}` } }],
        ['create', `${t.fhir('t1')}/Patient`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' }, body: '{"resourceType":"Patient"}' }],
        ['token', '/oauth2/token', { method: 'POST', headers: { Authorization: basic, 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'grant_type=client_credentials' }],
      ];
      const before = { ...t.app.hotRoutes!.answered };
      for (const [failure, status] of [[() => new StoreUnavailableError('connection refused'), 503], [() => new Error('disk on fire'), 500]] as const) {
        db.fail(failure);
        try {
          for (const [label, path, init] of requests) {
            const res = await t.request(path, { ...init, headers: { ...(init.headers as Record<string, string>), Origin: APP } });
            expect({ label, status: res.status }).toEqual({ label, status });
            expectCors(`${label} ${status}`, res);
            if (status === 503) expect(res.headers.get('retry-after')).toBeTruthy();
          }
        } finally {
          db.fail(null);
        }
      }
      expect(t.app.hotRoutes!.answered).toMatchObject({ read: before.read + 2, token: before.token + 2 });
      expect((await t.request(`${t.fhir('t1')}/Patient/p1`, { headers: { Authorization: `Bearer ${token}` } })).status).toBe(200);
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
      const refused = await t.request(`${t.fhir('t1')}/Patient/x`, { headers: { Origin: OTHER } });
      expect(refused.status).toBe(401);
      expect(refused.headers.get('access-control-allow-origin')).toBeNull();
      expect(refused.headers.get('vary')).toContain('Origin');
    });

    test('a listed origin gets the headers on 401s, 304s and token errors too', async () => {
      await fhirClient(t, token).put200({ resourceType: 'Patient', id: 'p1' });
      const cases: [string, string, RequestInit, number][] = [
        ['401 without a token', `${t.fhir('t1')}/Patient/p1`, {}, 401],
        ['304, hot read', `${t.fhir('t1')}/Patient/p1`, { headers: { Authorization: `Bearer ${token}`, 'If-None-Match': 'W/"1"' } }, 304],
        ['304, vread', `${t.fhir('t1')}/Patient/p1/_history/1`, { headers: { Authorization: `Bearer ${token}`, 'If-None-Match': 'W/"1"' } }, 304],
        ['token error', '/oauth2/token', { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'grant_type=password' }, 400],
      ];
      for (const [label, path, init, status] of cases) {
        const res = await t.request(path, { ...init, headers: { ...(init.headers as Record<string, string>), Origin: APP } });
        expect({ label, status: res.status }).toEqual({ label, status });
        expectCors(label, res, APP);
        expect(res.headers.get('vary')).toContain('Origin');
      }
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
