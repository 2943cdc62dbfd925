/**
 * Request size limits by kind of body: a single resource (create, update, operation Parameters,
 * `_search` forms), a Bundle posted to the base, and OAuth forms. Over its limit a body gets 413 with an
 * OperationOutcome (the token endpoint: 400 invalid_request, as the contract says), and the rest of it
 * is not read, whatever Content-Length says or omits.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bodyLimits, loadConfig } from '../../src/config.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { basic, post } from '../helpers/oauth.ts';
import { startCinder } from '../helpers/server.ts';

const LIMITS = { CINDER_MAX_RESOURCE_BYTES: '4096', CINDER_MAX_BUNDLE_BYTES: '65536', CINDER_MAX_FORM_BYTES: '2048' };

let t: TestApp;
let token: string;
beforeAll(async () => {
  t = await createTestApp({ env: LIMITS });
  token = await t.token();
});
afterAll(() => t.close());

/** A Patient whose JSON text is about `bytes` long. */
const patientOf = (bytes: number) => ({ resourceType: 'Patient', name: [{ family: 'x'.repeat(bytes) }] });

const bundleOf = (n: number, each: number) => ({
  resourceType: 'Bundle', type: 'transaction',
  entry: Array.from({ length: n }, () => ({ resource: patientOf(each), request: { method: 'POST', url: 'Patient' } })),
});

async function expectTooLarge(res: Response, limit: number) {
  expect(res.status).toBe(413);
  const body = (await res.json()) as { resourceType: string; issue: { code: string; details: { text: string } }[] };
  expect(body.resourceType).toBe('OperationOutcome');
  expect(body.issue[0]!.code).toBe('too-costly');
  expect(body.issue[0]!.details.text).toContain(`limit of ${limit} bytes`);
}

/** A body that streams `total` bytes of `{...` in 1 KiB chunks without a Content-Length; counts what was pulled. */
function endless(total: number) {
  const chunk = new TextEncoder().encode('{"resourceType":"Patient","x":"' + 'a'.repeat(990));
  const seen = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (seen.pulled >= total) return controller.close();
      seen.pulled += chunk.byteLength;
      controller.enqueue(chunk);
    },
    cancel() {
      seen.cancelled = true;
    },
  });
  return { stream, seen };
}

describe('a single resource', () => {
  test('create and update over the resource limit: 413; under it: stored', async () => {
    await expectTooLarge(await t.request(`${t.fhir()}/Patient`, fhirInit(token, 'POST', patientOf(5000))), 4096);
    await expectTooLarge(await t.request(`${t.fhir()}/Patient/big`, fhirInit(token, 'PUT', { ...patientOf(5000), id: 'big' })), 4096);
    expect((await t.request(`${t.fhir()}/Patient/big`, fhirInit(token))).status).toBe(404);
    expect((await t.request(`${t.fhir()}/Patient`, fhirInit(token, 'POST', patientOf(3000)))).status).toBe(201);
  });

  test('a chunked body without Content-Length is cut off at the limit and not read to its end', async () => {
    const { stream, seen } = endless(10 * 1024 * 1024);
    const res = await t.request(`${t.fhir()}/Patient`, {
      method: 'POST', body: stream, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json' },
    });
    await expectTooLarge(res, 4096);
    expect(seen.pulled).toBeLessThan(64 * 1024);
    expect(seen.cancelled).toBe(true);
  });

  test('a Content-Length over the limit is refused before the body is read', async () => {
    const { stream, seen } = endless(1024 * 1024);
    const res = await t.request(`${t.fhir()}/Patient`, {
      method: 'POST', body: stream,
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', 'Content-Length': String(1024 * 1024) },
    });
    await expectTooLarge(res, 4096);
    expect(seen.pulled).toBeLessThan(64 * 1024);
  });

  test('operation Parameters ($validate-code, export kick-off) and _search forms have the resource limit', async () => {
    const params = { resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' }, { name: 'display', valueString: 'x'.repeat(5000) }] };
    await expectTooLarge(await t.request(`${t.fhir()}/ValueSet/$validate-code`, fhirInit(token, 'POST', params)), 4096);
    await expectTooLarge(await t.request(`${t.fhir()}/CodeSystem/$lookup`, fhirInit(token, 'POST', params)), 4096);
    await expectTooLarge(await t.request(`${t.fhir()}/$export`, fhirInit(token, 'POST', params, { Prefer: 'respond-async' })), 4096);
    const form = new URLSearchParams({ name: 'x'.repeat(5000) });
    await expectTooLarge(await t.request(`${t.fhir()}/Patient/_search`, {
      method: 'POST', body: form, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/x-www-form-urlencoded' },
    }), 4096);
  });
});

describe('Bundles', () => {
  test('a transaction larger than one resource may be but within the Bundle limit is processed', async () => {
    const bundle = bundleOf(10, 2000);
    expect(JSON.stringify(bundle).length).toBeGreaterThan(4096);
    const res = await t.request(t.fhir(), fhirInit(token, 'POST', bundle));
    expect(res.status).toBe(200);
  });

  test('a Bundle over the Bundle limit: 413, nothing stored', async () => {
    const before = ((await (await t.request(`${t.fhir()}/Patient?_summary=count`, fhirInit(token))).json()) as { total: number }).total;
    await expectTooLarge(await t.request(t.fhir(), fhirInit(token, 'POST', bundleOf(40, 2000))), 65536);
    const after = ((await (await t.request(`${t.fhir()}/Patient?_summary=count`, fhirInit(token))).json()) as { total: number }).total;
    expect(after).toBe(before);
  });
});

describe('OAuth forms', () => {
  test('a token request over the form limit: 400 invalid_request JSON', async () => {
    const res = await post(t, { grant_type: 'client_credentials', scope: 'x'.repeat(3000) }, { Authorization: basic(t.admin.client.clientId, t.admin.clientSecret!) });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toBe('application/json;charset=UTF-8');
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
  });

  test('revocation and introspection forms too', async () => {
    for (const path of ['/oauth2/revoke', '/oauth2/introspect']) {
      const res = await post(t, { token: 'x'.repeat(3000) }, { Authorization: basic(t.admin.client.clientId, t.admin.clientSecret!) }, path);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
    }
  });
});

describe('settings', () => {
  test('defaults: 16 MiB per resource, 64 MiB per Bundle and per Binary content, 16 KiB per form, 64 MiB for any body', () => {
    const config = loadConfig({});
    expect(bodyLimits(config)).toEqual({ resource: 16 * 1024 * 1024, bundle: 64 * 1024 * 1024, binary: 64 * 1024 * 1024, form: 16 * 1024 });
    expect(config.maxBodyBytes).toBe(64 * 1024 * 1024);
  });

  test('CINDER_MAX_BODY_BYTES caps every kind', () => {
    expect(bodyLimits(loadConfig({ CINDER_MAX_BODY_BYTES: '8192' }))).toEqual({ resource: 8192, bundle: 8192, binary: 8192, form: 8192 });
  });

  test('a bad value stops start-up with the variable named', () => {
    expect(() => loadConfig({ CINDER_MAX_RESOURCE_BYTES: '12' })).toThrow(/CINDER_MAX_RESOURCE_BYTES/);
  });
});

describe('a listening server', () => {
  test('a 64 MB chunked upload is answered 413 after about the limit, not read to its end', async () => {
    const store = createSqliteStore(join(mkdtempSync(join(tmpdir(), 'cinder-limits-')), 'cinder.db'));
    const cinder = await startCinder({ store, env: LIMITS });
    try {
      const { createTenant, createClient } = await import('../../src/auth/admin.ts');
      await createTenant(store, cinder.clock, 't1');
      const c = await createClient(store, cinder.clock, { tenant: 't1', scopes: ['system/*.*'] });
      const tokenRes = await fetch(`${cinder.url}/oauth2/token`, {
        method: 'POST', body: new URLSearchParams({ grant_type: 'client_credentials' }),
        headers: { Authorization: basic(c.client.clientId, c.clientSecret!), 'Content-Type': 'application/x-www-form-urlencoded' },
      });
      const access = ((await tokenRes.json()) as { access_token: string }).access_token;
      const { stream, seen } = endless(64 * 1024 * 1024);
      const res = await fetch(`${cinder.url}/tenants/t1/fhir/R4/Patient`, {
        method: 'POST', body: stream, duplex: 'half',
        headers: { Authorization: `Bearer ${access}`, 'Content-Type': 'application/fhir+json' },
      } as RequestInit);
      await expectTooLarge(res, 4096);
      expect(seen.pulled).toBeLessThan(16 * 1024 * 1024);
    } finally {
      await cinder.stop?.();
      await store.close();
    }
  }, 30_000);
});
