/**
 * Two Cinder app instances (two "processes") on one database: every piece of authorization state that
 * must hold across processes lives in the database. Runs on SQLite (two connections to one file) and
 * on PostgreSQL when reachable (a fresh database for this file).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { createApp } from '../../src/app.ts';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { createKeyRing, MIN_ROTATION_DELAY_MS } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { createUser } from '../../src/auth/users.ts';
import { loadConfig } from '../../src/config.ts';
import { silentLogger } from '../../src/log.ts';
import type { Store } from '../../src/store/types.ts';
import { BASE, fhirInit, testClock, type TestClock } from '../helpers/app.ts';
import { basic, csrfCookie, FORM, hiddenFields, REDIRECT, authorizeQuery } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });

async function instance(store: Store, clock: TestClock) {
  await store.migrate();
  const config = loadConfig({ CINDER_BASE_URL: BASE, CINDER_DATA_DIR: '/tmp/cinder-unused', CINDER_LOGIN_FAILURES_USER: '3' });
  const keys = createKeyRing(store, clock, MAX_TOKEN_TTL);
  await keys.init();
  const app = createApp({ config, store, keys, clock, log: silentLogger });
  const request = (path: string, init: RequestInit = {}) => app.request(BASE + path, init);
  const post = (path: string, body: Record<string, string>, headers: Record<string, string> = {}) =>
    request(path, { method: 'POST', headers: { ...FORM, ...headers }, body: new URLSearchParams(body) });
  return { app, keys, request, post };
}
type Instance = Awaited<ReturnType<typeof instance>>;

describe.each(targets.map((t) => [t.kind, t] as const))('two instances on one %s database', (_kind, target) => {
  const clock = testClock();
  let a: Instance;
  let b: Instance;
  let cc: { id: string; secret: string };
  let app: { id: string; secret: string };
  let jwtClient: string;
  let privateKey: CryptoKey;
  const fhir = (path: string) => `/tenants/t1/fhir/R4${path}`;

  beforeAll(async () => {
    const db = await target.fresh();
    const storeA = db.open();
    a = await instance(storeA, clock);
    b = await instance(db.open(), clock);
    await createTenant(storeA, clock, 't1');
    const c = await createClient(storeA, clock, { tenant: 't1', scopes: ['system/*.read'] });
    cc = { id: c.client.clientId, secret: c.clientSecret! };
    const u = await createClient(storeA, clock, { tenant: 't1', grants: ['authorization_code', 'refresh_token'], scopes: ['user/*.read'], redirectUris: [REDIRECT] });
    app = { id: u.client.clientId, secret: u.clientSecret! };
    const pair = await generateKeyPair('ES384', { extractable: true });
    privateKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES384' };
    jwtClient = (await createClient(storeA, clock, { tenant: 't1', scopes: ['system/*.read'], jwks: { keys: [jwk] } })).client.clientId;
    await createUser(storeA, clock, { tenant: 't1', username: 'erin', password: 'erin password' });
  });
  afterAll(() => target.cleanup());

  async function ccToken(on: Instance): Promise<string> {
    const res = await on.post('/oauth2/token', { grant_type: 'client_credentials' }, { Authorization: basic(cc.id, cc.secret) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { access_token: string }).access_token;
  }

  async function signIn(on: Instance, password = 'erin password'): Promise<Response> {
    const page = await on.request(`/oauth2/authorize?${authorizeQuery({ clientId: app.id, scope: 'openid offline_access user/*.read' })}`);
    return on.request('/oauth2/authorize', {
      method: 'POST', headers: { ...FORM, Cookie: csrfCookie(page) },
      body: new URLSearchParams({ ...hiddenFields(await page.text()), username: 'erin', password }),
    });
  }

  async function code(on: Instance): Promise<string> {
    const res = await signIn(on);
    expect(res.status).toBe(303);
    return new URL(res.headers.get('location')!).searchParams.get('code')!;
  }

  const redeem = (on: Instance, value: string) =>
    on.post('/oauth2/token', { grant_type: 'authorization_code', code: value, redirect_uri: REDIRECT }, { Authorization: basic(app.id, app.secret) });

  test('a token issued by one instance is accepted by the other', async () => {
    expect((await b.request(fhir('/Patient'), fhirInit(await ccToken(a)))).status).toBe(200);
    expect((await a.request(fhir('/Patient'), fhirInit(await ccToken(b)))).status).toBe(200);
  });

  test('a client assertion jti used at one instance is refused at the other', async () => {
    const now = Math.floor(clock.now() / 1000);
    const assertion = await new SignJWT({ iss: jwtClient, sub: jwtClient, aud: `${BASE}/oauth2/token`, exp: now + 120, jti: crypto.randomUUID() })
      .setProtectedHeader({ alg: 'ES384', kid: 'k1' }).sign(privateKey);
    const body = { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: assertion };
    expect((await a.post('/oauth2/token', body)).status).toBe(200);
    const replay = await b.post('/oauth2/token', body);
    expect(replay.status).toBe(400);
    expect(((await replay.json()) as { error: string }).error).toBe('invalid_client');
  });

  test('a refresh token revoked at one instance is refused at the other', async () => {
    const tokens = (await (await redeem(a, await code(a))).json()) as { refresh_token: string; access_token: string };
    const refresh = (on: Instance) => on.post('/oauth2/token', { grant_type: 'refresh_token', refresh_token: tokens.refresh_token }, { Authorization: basic(app.id, app.secret) });
    expect((await refresh(b)).status).toBe(200);
    expect((await a.post('/oauth2/revoke', { token: tokens.refresh_token }, { Authorization: basic(app.id, app.secret) })).status).toBe(200);
    const refused = await refresh(b);
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: string }).error).toBe('invalid_grant');
  });

  test('an access token revoked at one instance: the other introspects it inactive at once and refuses it on FHIR within the poll interval', async () => {
    const token = await ccToken(a);
    expect((await b.request(fhir('/Patient'), fhirInit(token))).status).toBe(200);
    expect((await a.post('/oauth2/revoke', { token }, { Authorization: basic(cc.id, cc.secret) })).status).toBe(200);
    const introspected = await b.post('/oauth2/introspect', { token }, { Authorization: basic(cc.id, cc.secret) });
    expect(await introspected.json()).toEqual({ active: false });
    clock.advance(5_000);
    expect((await b.request(fhir('/Patient'), fhirInit(token))).status).toBe(401);
  });

  test('a code redeemed at one instance: a replay at the other fails and revokes the grant', async () => {
    const value = await code(a);
    const first = (await (await redeem(a, value)).json()) as { refresh_token: string };
    expect((await redeem(b, value)).status).toBe(400);
    const refresh = await a.post('/oauth2/token', { grant_type: 'refresh_token', refresh_token: first.refresh_token }, { Authorization: basic(app.id, app.secret) });
    expect(((await refresh.json()) as { error: string }).error).toBe('invalid_grant');
  });

  test('concurrent redemptions of one code across both instances: exactly one succeeds', async () => {
    const value = await code(a);
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => redeem(i % 2 ? a : b, value)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 400)).toHaveLength(9);
  });

  test('failed sign-ins count across instances', async () => {
    for (const on of [a, b, a]) expect((await signIn(on, 'wrong password')).status).toBe(200);
    expect((await signIn(b)).status).toBe(429);
    clock.advance(15 * 60_000);
  });

  test('a key rotated at one instance signs at the other from its hand-over; both verify both', async () => {
    await a.keys.rotate({ delayMs: MIN_ROTATION_DELAY_MS });
    // A minute before the hand-over the old key still signs (the token outlives the hand-over); from it, the new one.
    clock.advance(MIN_ROTATION_DELAY_MS - 60_000);
    const before = await ccToken(b);
    clock.advance(60_000);
    const after = await ccToken(b);
    const { decodeProtectedHeader } = await import('jose');
    expect(decodeProtectedHeader(after).kid).toBe(a.keys.signingKey('ES256').record.kid);
    expect(decodeProtectedHeader(after).kid).not.toBe(decodeProtectedHeader(before).kid);
    for (const on of [a, b]) for (const t of [before, after]) expect((await on.request(fhir('/Patient'), fhirInit(t))).status).toBe(200);
  });
});
