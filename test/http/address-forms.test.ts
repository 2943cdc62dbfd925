/**
 * Addresses in their rarer forms, through `app.request()`, on both databases where a store is involved:
 * IPv4-compatible IPv6 addresses (::a.b.c.d, deprecated) reach an IPv4 host's address and are refused like
 * the other forms as JWK Set URL and Subscription endpoint hosts; the per-IP limits count an IPv4 client seen
 * through an IPv6 form that carries its address (IPv4-compatible, IPv4-translated, NAT64) as that address,
 * not as one /64 with every other IPv4 client.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { BASE, createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { type Json } from '../helpers/fhir.ts';
import { basic, ipLimitedApp, PASSWORD, post, signIn, userClient } from '../helpers/oauth.ts';
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

// Behind a NAT64 or SIIT translator, or a dual-stack socket that reports IPv4 clients in an IPv6 form, each
// IPv4 client's address is in the last 32 bits: counted by the /64, every IPv4 client shared one budget, and
// one of them could lock every other out of signing in.
for (const target of targets) {
  describe(`per-IP sign-in failure limits tell IPv4 clients in IPv6 forms apart, on ${target.kind}`, () => {
    let t: TestApp;
    let client: Awaited<ReturnType<typeof userClient>>;
    const from = (ip: string) => ({ 'X-Forwarded-For': ip });

    beforeAll(async () => {
      ({ t, client } = await ipLimitedApp(target));
    }, 120_000);
    afterAll(() => t.close());

    for (const [form, of] of [
      ['NAT64', (v4: string) => `64:ff9b::${v4}`],
      ['IPv4-compatible', (v4: string) => `::${v4}`],
      ['IPv4-translated', (v4: string) => `::ffff:0:${v4}`],
    ] as const) {
      test(`${form}: one IPv4 client's failures do not refuse another, and count with its plain IPv4 address`, async () => {
        const [a, b] = form === 'NAT64' ? ['198.51.100.31', '198.51.100.32'] : form === 'IPv4-compatible' ? ['198.51.100.41', '198.51.100.42'] : ['198.51.100.51', '198.51.100.52'];
        for (const u of ['x1', 'x2', 'x3']) expect((await signIn(t, { clientId: client.id }, `${u}-${form}`, 'nope-nope', from(of(a)))).status).toBe(200);
        expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from(of(b)))).status).toBe(303);
        expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from(a))).status).toBe(429);
      });
    }

    // 6to4 (2002::/16) gives one IPv4 host 2^16 /64s; a Teredo address (2001::/32) holds its client's public IPv4
    // address, inverted, in its last 32 bits: each is counted as that IPv4 address, not by the /64.
    const hex = (v4: string) => v4.split('.').map(Number).reduce((groups, n, i) => (i % 2 ? [...groups.slice(0, -1), groups.at(-1)! * 256 + n] : [...groups, n]), [] as number[]);
    for (const [form, of] of [
      ['6to4', (v4: string, i: number) => `2002:${hex(v4).map((x) => x.toString(16)).join(':')}:${i + 1}::1`],
      ['Teredo', (v4: string, i: number) => `2001:0:4136:e378:8000:${(0xffff - 4000 - i).toString(16)}:${hex(v4).map((x) => (x ^ 0xffff).toString(16)).join(':')}`],
    ] as const) {
      test(`${form}: one IPv4 host's failures from all its addresses count together, with its plain IPv4 address, and not another's`, async () => {
        const [a, b] = form === '6to4' ? ['198.51.100.61', '198.51.100.62'] : ['198.51.100.71', '198.51.100.72'];
        for (const [i, u] of ['x1', 'x2', 'x3'].entries()) expect((await signIn(t, { clientId: client.id }, `${u}-${form}`, 'nope-nope', from(of(a, i)))).status).toBe(200);
        expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from(of(a, 7)))).status).toBe(429);
        expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from(a))).status).toBe(429);
        expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from(of(b, 0)))).status).toBe(303);
      });
    }
  });
}

describe('the token endpoint limit tells IPv4 clients behind a NAT64 translator apart', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { CINDER_TOKEN_RATE_LIMIT_IP: '2', CINDER_TRUST_PROXY: 'on' } });
  });
  afterAll(() => t.close());

  test('token requests', async () => {
    const ask = (ip: string) => post(t, { grant_type: 'client_credentials' }, { Authorization: basic(t.admin.client.clientId, t.admin.clientSecret!), 'X-Forwarded-For': ip });
    expect((await ask('64:ff9b::203.0.113.1')).status).toBe(200);
    expect((await ask('64:ff9b::203.0.113.1')).status).toBe(200);
    expect((await ask('203.0.113.1')).status).toBe(429);
    expect((await ask('64:ff9b::203.0.113.2')).status).toBe(200);
    // ::1 is no IPv4 client's: its own key, not that of ::a.b.c.d's /64.
    expect((await ask('::1')).status).toBe(200);
  });
});
