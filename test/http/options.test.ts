/**
 * `OPTIONS` that is no CORS preflight below a tenant's FHIR base (RFC 9110 9.3.7; R4 defines no OPTIONS interaction):
 * 204 with `Allow` naming the methods the path's routes take, HEAD with GET and OPTIONS itself; a path no route takes
 * (an unknown type or operation) stays 404, and the FHIR API still wants a token.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { expectOutcome } from '../helpers/fhir.ts';

describe('OPTIONS below the FHIR base', () => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  const options = (path: string, auth = true) => t.request(`${t.fhir()}/${path}`, auth ? fhirInit(token, 'OPTIONS') : { method: 'OPTIONS' });

  test('204 with Allow listing the methods of the path\'s routes', async () => {
    const cases: [string, string][] = [
      ['', 'GET, HEAD, POST, OPTIONS'],
      ['metadata', 'GET, HEAD, OPTIONS'],
      ['_history', 'GET, HEAD, OPTIONS'],
      ['Patient', 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS'],
      ['Patient/', 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS'],
      ['Patient/p1', 'GET, HEAD, PUT, PATCH, DELETE, OPTIONS'],
      ['Patient/_search', 'POST, OPTIONS'],
      ['Patient/p1/_history', 'GET, HEAD, OPTIONS'],
      ['Patient/p1/_history/1', 'GET, HEAD, OPTIONS'],
      ['Patient/p1/Observation', 'GET, HEAD, OPTIONS'],
      ['Patient/$everything', 'GET, HEAD, POST, OPTIONS'],
      ['Patient/p1/$everything', 'GET, HEAD, POST, OPTIONS'],
      ['Patient/$match', 'POST, OPTIONS'],
      ['$export', 'GET, POST, OPTIONS'],
      ['$graphql', 'GET, HEAD, POST, OPTIONS'],
      ['ValueSet/$expand', 'GET, HEAD, POST, OPTIONS'],
    ];
    for (const [path, allow] of cases) {
      const res = await options(path);
      expect([path, res.status, res.headers.get('allow'), await res.text()]).toEqual([path, 204, allow, '']);
    }
  });

  test('a method Allow leaves out is refused there (405), one it lists is not', async () => {
    for (const [path, method] of [['Patient/p1', 'POST'], ['Patient/p1/_history', 'DELETE'], ['Patient/$match', 'PUT'], ['', 'PATCH']] as const) {
      const allow = (await options(path)).headers.get('allow')!;
      expect(allow.split(', ')).not.toContain(method);
      expect([path, method, (await t.request(`${t.fhir()}/${path}`, fhirInit(token, method, {}))).status]).toEqual([path, method, 405]);
    }
    expect((await t.request(`${t.fhir()}/Patient/p1`, fhirInit(token, 'GET'))).status).toBe(404);
  });

  test('an unknown type or operation is 404; without a token 401', async () => {
    for (const path of ['Nonsense', 'Nonsense/1', 'Parameters/1', 'Patient/$bogus', 'Patient/p1/$bogus', 'Observation/o1/$everything']) {
      await expectOutcome(await options(path), 404);
    }
    await expectOutcome(await options('Patient', false), 401);
  });
});
