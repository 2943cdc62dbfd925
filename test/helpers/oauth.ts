import { expect } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import type { NewClientOptions } from '../../src/auth/admin.ts';
import { s256 } from '../../src/auth/pkce.ts';
import { randomToken } from '../../src/auth/secrets.ts';
import { signAccessToken } from '../../src/auth/tokens.ts';
import { createUser, type NewUserOptions } from '../../src/auth/users.ts';
import type { Clock } from '../../src/clock.ts';
import type { Store, User } from '../../src/store/types.ts';
import { BASE, createTestApp, type TestApp } from './app.ts';
import type { StoreTarget } from './stores.ts';

export const FORM = { 'Content-Type': 'application/x-www-form-urlencoded' };
export const REDIRECT = 'https://app.example/callback';

/** `Authorization: Basic` with form-url-encoded parts (RFC 6749 2.3.1). */
export function basic(id: string, secret: string): string {
  return 'Basic ' + btoa(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`);
}

/** POSTs a form to an OAuth endpoint (the token endpoint by default). */
export function post(t: TestApp, body: Record<string, string> | string, headers: Record<string, string> = {}, path = '/oauth2/token') {
  return t.request(path, { method: 'POST', headers: { ...FORM, ...headers }, body: typeof body === 'string' ? body : new URLSearchParams(body) });
}

/** A fresh PKCE verifier and its S256 challenge. */
export function pkce() {
  const verifier = randomToken(32);
  return { verifier, challenge: s256(verifier) };
}

/** A user-facing client (authorization_code + refresh_token unless told otherwise) in tenant t1. */
export async function userClient(t: TestApp, o: Partial<NewClientOptions> = {}) {
  const { client, clientSecret } = await createClient(t.store, t.clock, {
    tenant: 't1', name: 'Test App', grants: ['authorization_code', 'refresh_token'], scopes: ['user/*.read', 'patient/*.read'],
    redirectUris: [REDIRECT], ...o,
  });
  return { id: client.clientId, secret: clientSecret, client };
}

export const PASSWORD = 'correct horse battery';

/**
 * The argon2id parameters of a test user's password: the least argon2 allows. Each sign-in verifies the
 * password at the parameters its hash names, and at the production ones (src/auth/users.ts, 19 MiB and two
 * passes) a verification took 40 to 130 ms of a test, hundreds of times in a file of failed sign-ins. The
 * production parameters are asserted in test/unit/cli-auth.test.ts (`cinder user create`).
 */
const TEST_HASH = { algorithm: 'argon2id', memoryCost: 8, timeCost: 1 } as const;

/** A user made as `cinder user create` makes one (createUser), its password then hashed at TEST_HASH. */
export async function makeUser(store: Store, clock: Clock, o: NewUserOptions): Promise<User> {
  const user = { ...(await createUser(store, clock, o)), passwordHash: await Bun.password.hash(o.password, TEST_HASH) };
  await store.users.update(user);
  return user;
}

/** A user in tenant t1 with every attribute set (makeUser). */
export function testUser(t: TestApp, o: Partial<NewUserOptions> = {}) {
  return makeUser(t.store, t.clock, {
    tenant: 't1', username: 'alice', password: PASSWORD, name: 'Alice Example', email: 'alice@example.org', emailVerified: true,
    phone: '+1 555 0100', phoneVerified: false, address: '1 Main St', fhirUser: 'Patient/p1', ...o,
  });
}

function unescape(s: string): string {
  return s.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

/** The hidden fields of the login form. */
export function hiddenFields(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) out[unescape(m[1]!)] = unescape(m[2]!);
  return out;
}

/** The query of a 303 back to the app's REDIRECT (asserting it is one). */
export function redirectParams(res: Response): URLSearchParams {
  expect(res.status).toBe(303);
  const location = new URL(res.headers.get('location')!);
  expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
  return location.searchParams;
}

/** The CSRF cookie pair (`name=value`) a login page set. */
export function csrfCookie(res: Response): string {
  return (res.headers.get('set-cookie') ?? '').split(';')[0]!;
}

export interface AuthorizeParams {
  clientId: string;
  scope?: string;
  challenge?: string | null;
  state?: string;
  nonce?: string;
  redirectUri?: string;
  /** SMART `aud`: the FHIR base of tenant t1 unless given; null leaves it out. */
  aud?: string | null;
  extra?: Record<string, string>;
}

export function authorizeQuery(p: AuthorizeParams): URLSearchParams {
  const q = new URLSearchParams({ response_type: 'code', client_id: p.clientId, redirect_uri: p.redirectUri ?? REDIRECT, scope: p.scope ?? 'openid profile user/*.read' });
  if (p.challenge !== null && p.challenge !== undefined) {
    q.set('code_challenge', p.challenge);
    q.set('code_challenge_method', 'S256');
  }
  if (p.state) q.set('state', p.state);
  if (p.nonce) q.set('nonce', p.nonce);
  if (p.aud !== null) q.set('aud', p.aud ?? `${BASE}/tenants/t1/fhir/R4`);
  for (const [k, v] of Object.entries(p.extra ?? {})) q.set(k, v);
  return q;
}

/** Opens the login page and submits credentials; returns the POST response. */
export async function signIn(t: TestApp, p: AuthorizeParams, username = 'alice', password = PASSWORD, headers: Record<string, string> = {}) {
  const page = await t.request(`/oauth2/authorize?${authorizeQuery(p)}`, { headers });
  if (page.status !== 200) throw new Error(`login page: ${page.status} ${await page.text()}`);
  const fields = hiddenFields(await page.text());
  return t.request('/oauth2/authorize', {
    method: 'POST',
    headers: { ...FORM, Cookie: csrfCookie(page), ...headers },
    body: new URLSearchParams({ ...fields, username, password, action: 'login' }),
  });
}

/** Signs in and returns the authorization code from the redirect. */
export async function getCode(t: TestApp, p: AuthorizeParams): Promise<string> {
  const res = await signIn(t, p);
  const location = res.headers.get('location');
  if (res.status !== 303 || !location) throw new Error(`sign-in did not redirect: ${res.status} ${await res.text()}`);
  const code = new URL(location).searchParams.get('code');
  if (!code) throw new Error(`no code in ${location}`);
  return code;
}

/** Redeems a code at the token endpoint. */
export function redeem(t: TestApp, code: string, c: { id: string; secret: string | null }, extra: Record<string, string> = {}) {
  const body = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: c.id, ...extra };
  return post(t, body, c.secret ? { Authorization: basic(c.id, c.secret) } : {});
}

/** The access token `username` gets by signing in to client `c` (the code flow, `scope` asked) and redeeming the code. */
export async function signedInToken(t: TestApp, c: { id: string; secret: string | null }, scope: string, username: string): Promise<string> {
  const res = await signIn(t, { clientId: c.id, scope }, username, PASSWORD);
  const code = new URL(res.headers.get('location')!).searchParams.get('code')!;
  const token = await redeem(t, code, c);
  expect(token.status).toBe(200);
  return ((await token.json()) as { access_token: string }).access_token;
}

/** An access token of client `clientId`'s own authority (no user) in tenant t1, as client_credentials would give it. */
export async function clientOwnToken(t: TestApp, clientId: string, scope: string): Promise<string> {
  return (await signAccessToken(t.keys, t.clock, t.config.baseUrl, { sub: clientId, aud: t.fhir('t1'), client_id: clientId, scope, tenant: 't1' }, 300)).token;
}

/**
 * A test app on a migrated database of `target` whose sign-ins fail at most 3 times per client address, behind a
 * trusted proxy (the address from X-Forwarded-For), with a user-facing client and the test user: the per-IP limits' tests.
 */
export async function ipLimitedApp(target: StoreTarget): Promise<{ t: TestApp; client: Awaited<ReturnType<typeof userClient>> }> {
  const store = (await target.migrated()).open();
  await store.migrate();
  const t = await createTestApp({ store, env: { CINDER_LOGIN_FAILURES_IP: '3', CINDER_TRUST_PROXY: 'on' } });
  const client = await userClient(t);
  await testUser(t);
  return { t, client };
}
