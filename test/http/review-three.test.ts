/**
 * Findings of the adversarial review of the third batch of the day, through `app.request()`, on both
 * databases where a store is involved: IPv4-compatible IPv6 addresses (::a.b.c.d, deprecated) reach an
 * IPv4 host's address and are refused like the other forms as JWK Set URL and Subscription endpoint
 * hosts; the per-IP limits count an IPv4 client seen through an IPv6 form that carries its address
 * (IPv4-compatible, IPv4-translated, NAT64) as that address, not as one /64 with every other IPv4 client; a
 * Subscription paused for its topic is set back once its topic is as it was however many others are in `error`.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { BASE, createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { type Json } from '../helpers/fhir.ts';
import { basic, PASSWORD, post, signIn, testUser, userClient } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';
import { fhirClient } from '../helpers/fhir.ts';

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
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store, env: { CINDER_LOGIN_FAILURES_IP: '3', CINDER_TRUST_PROXY: 'on' } });
      client = await userClient(t);
      await testUser(t);
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

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';

// Subscriptions in `error` pile up (a rest-hook whose deliveries fail is set so, and stays): the set's load read the
// first 1,000 of them in id order alone, so one paused for its topic past them was never set back.
for (const target of targets) {
  describe(`a Subscription paused for its topic behind 1,000 others in error, on ${target.kind}`, () => {
    let t: TestApp;
    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    }, 120_000);
    afterAll(() => t.close());

    test('is set back to active once its topic is as it was', async () => {
      const admin = fhirClient(t, await t.token());
      const writer = createBatchWriter({ store: t.store, clock: t.clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
      for (let i = 0; i < 1_001; i++) {
        await writer.addPrepared([writer.prepare({
          resourceType: 'Subscription', id: `a-${String(i).padStart(4, '0')}`, status: 'error', reason: 'failed', criteria: 'Observation?code=x', error: '5 deliveries failed in a row',
          channel: { type: 'rest-hook', endpoint: 'https://hook.example/x', payload: 'application/fhir+json' },
        })]);
      }
      await writer.drain();
      const url = 'http://example.org/topics/widened-many';
      const trigger = (resource: string) => ({ url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: resource }] });
      const topic = {
        resourceType: 'Basic', id: 'widened-many', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, trigger('Observation')],
      };
      await admin.put200(topic);
      const sub = await admin.put200({
        resourceType: 'Subscription', id: 'z-paused', status: 'requested', reason: 'ward', criteria: url,
        channel: {
          type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] },
          _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/subscription-channel-type', code: 'websocket' } }] },
        },
      });
      expect(sub.status).toBe('active');
      // Taken over by an app's own token, as if it had activated it: the app searches Observations and no Encounters.
      const app = (await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Ward app', grants: ['client_credentials'], scopes: ['user/Observation.rs', 'user/Subscription.cruds'],
      })).client.clientId;
      await t.store.resources.write('t1', (w) => w.ownSubscription('z-paused', JSON.stringify({ scopes: ['user/Observation.rs', 'user/Subscription.cruds'], clientId: app }), 'websocket'));
      let n = 0;
      const observation = async () => {
        t.clock.advance(1);
        await admin.put200({ resourceType: 'Observation', id: `o-${n++}`, status: 'final', code: { text: 'x' } });
      };
      const shown = async () => {
        const s = (await (await admin.get('Subscription/z-paused')).json()) as Json;
        return [s.status, typeof s.error === 'string' ? s.error.slice(0, 40) : s.error];
      };
      await admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter')] });
      await observation();
      expect(await shown()).toEqual(['error', 'paused: its topic now selects Encounter ']);
      await admin.put200(topic);
      await observation();
      expect(await shown()).toEqual(['active', undefined]);
    }, 120_000);
  });
}
