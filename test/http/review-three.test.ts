/**
 * Findings of the adversarial review of the third batch of the day, through `app.request()`, on both
 * databases where a store is involved: IPv4-compatible IPv6 addresses (::a.b.c.d, deprecated) reach an
 * IPv4 host's address and are refused like the other forms as JWK Set URL and Subscription endpoint hosts.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { BASE, createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { type Json } from '../helpers/fhir.ts';
import { post } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

describe('JWK Set URLs on an IPv4-compatible form of a private address are never fetched', () => {
  let t: TestApp;
  const seen: string[] = [];
  const resolved: Record<string, string[]> = { 'compat.example': ['::7f00:1'], 'meta.example': ['::a9fe:a9fe'] };
  let key: CryptoKey;

  beforeAll(async () => {
    const pair = await generateKeyPair('ES256', { extractable: true });
    key = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256' };
    const fetchFn = (async (input: string | URL | Request) => {
      seen.push(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
      return Response.json({ keys: [jwk] });
    }) as typeof fetch;
    t = await createTestApp({ fetch: fetchFn, resolveHost: async (host) => resolved[host] ?? [] });
  });
  afterAll(() => t.close());

  for (const url of ['http://[::127.0.0.1]/jwks', 'http://[::169.254.169.254]/jwks', 'http://[::10.0.0.7]/jwks', 'https://compat.example/jwks', 'https://meta.example/jwks']) {
    test(`${url}: invalid_client, and no request is sent`, async () => {
      seen.length = 0;
      const id = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwksUrl: url })).client.clientId;
      const now = Math.floor(t.clock.now() / 1000);
      const jwt = await new SignJWT({ iss: id, sub: id, aud: `${BASE}/oauth2/token`, exp: now + 240, iat: now, jti: crypto.randomUUID() })
        .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'JWT' })
        .sign(key);
      const res = await post(t, { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: jwt });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error?: string }).error).toBe('invalid_client');
      expect(seen).toEqual([]);
    });
  }
});

for (const target of targets) {
  describe(`Subscription endpoints on an IPv4-compatible form of a private address, on ${target.kind}`, () => {
    let t: TestApp;
    let token: string;
    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store, resolveHost: async (host) => (host === 'compat.example' ? ['::7f00:1'] : ['198.51.100.1']) });
      token = await t.token();
    }, 120_000);
    afterAll(() => t.close());

    test('are refused at activation (422 naming the endpoint)', async () => {
      const subscription = (endpoint: string) => ({
        resourceType: 'Subscription', status: 'requested', reason: 'review', criteria: 'Observation?code=http://loinc.org|1234-5',
        channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json' },
      });
      for (const endpoint of ['http://[::127.0.0.1]/x', 'http://[::169.254.169.254]/latest', 'http://[::192.168.1.1]/', 'http://compat.example/hook']) {
        const res = await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription(endpoint)));
        const outcome = (await res.json()) as Json;
        expect([endpoint, res.status, outcome.issue?.[0]?.expression]).toEqual([endpoint, 422, ['Subscription.channel.endpoint']]);
      }
      expect((await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription('https://hook.example/x')))).status).toBe(201);
    });
  });
}
