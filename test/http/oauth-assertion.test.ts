import { afterEach, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { basic, post } from '../helpers/oauth.ts';

const TOKEN_URL = 'http://cinder.test/oauth2/token';
const JWKS_URL = 'https://backend.example/jwks.json';
type Pair = { alg: string; kid: string; privateKey: CryptoKey; jwk: JWK };

async function pair(alg: string, kid = `${alg}-key`): Promise<Pair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg } };
}

let keys: Record<string, Pair>;
beforeAll(async () => {
  keys = {};
  for (const alg of ['RS384', 'ES384', 'PS384', 'RS256', 'ES256']) keys[alg] = await pair(alg);
});

/** A fake JWK Set host: counts downloads, answers with the configured set and Cache-Control. */
function jwksHost() {
  const host = { set: { keys: [] as JWK[] }, cacheControl: 'max-age=300', downloads: 0, status: 200 };
  const fetchFn = (async (input: string | URL | Request) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (url !== JWKS_URL) return new Response('not found', { status: 404 });
    host.downloads++;
    return new Response(JSON.stringify(host.set), { status: host.status, headers: { 'Content-Type': 'application/json', 'Cache-Control': host.cacheControl } });
  }) as typeof fetch;
  return { host, fetchFn };
}

let t: TestApp;
let host: ReturnType<typeof jwksHost>['host'];
let inlineId: string;
let urlId: string;

beforeEach(async () => {
  const h = jwksHost();
  host = h.host;
  // The fake host is no address: the address check (oauth-hardening.test.ts) is lifted here.
  t = await createTestApp({ fetch: h.fetchFn, env: { CINDER_JWKS_ALLOW_PRIVATE: 'true' } });
  const scopes = ['system/*.read'];
  inlineId = (await createClient(t.store, t.clock, { tenant: 't1', scopes, jwks: { keys: Object.values(keys).map((k) => k.jwk) } })).client.clientId;
  urlId = (await createClient(t.store, t.clock, { tenant: 't1', scopes, jwksUrl: JWKS_URL })).client.clientId;
  host.set = { keys: [keys.ES384!.jwk] };
});
afterEach(() => t.close());

interface AssertionOptions {
  key?: Pair;
  claims?: Record<string, unknown>;
  header?: Record<string, unknown>;
  omit?: string[];
}

async function assertion(clientId: string, o: AssertionOptions = {}): Promise<string> {
  const key = o.key ?? keys.RS384!;
  const now = Math.floor(t.clock.now() / 1000);
  const claims: Record<string, unknown> = { iss: clientId, sub: clientId, aud: TOKEN_URL, exp: now + 240, iat: now, jti: crypto.randomUUID(), ...o.claims };
  for (const k of o.omit ?? []) delete claims[k];
  return new SignJWT(claims).setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...o.header }).sign(key.privateKey);
}

function tokenWith(jwt: string, extra: Record<string, string> = {}, headers: Record<string, string> = {}) {
  return post(t, { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: jwt, scope: 'system/*.read', ...extra }, headers);
}

async function expectClientError(res: Response, error = 'invalid_client') {
  expect(res.status).toBe(400);
  expect(res.headers.get('www-authenticate')).toBeNull();
  expect(((await res.json()) as { error: string }).error).toBe(error);
}

describe('private_key_jwt with an inline JWK Set', () => {
  for (const alg of ['RS384', 'ES384', 'PS384', 'RS256', 'ES256']) {
    test(`${alg} assertion -> token`, async () => {
      const res = await tokenWith(await assertion(inlineId, { key: keys[alg] }));
      expect(res.status).toBe(200);
      expect(((await res.json()) as { scope: string }).scope).toBe('system/*.read');
    });
  }

  test('a header without kid that several registered keys fit: the key that verifies it is found (a rotation holding old and new)', async () => {
    const older = await pair('RS384', 'old');
    const newer = await pair('RS384', 'new');
    const kidless = (p: Pair) => { const { kid: _, ...jwk } = p.jwk; return jwk; };
    const id = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwks: { keys: [kidless(older), kidless(newer)] } })).client.clientId;
    const signed = (key: Pair) => {
      const now = Math.floor(t.clock.now() / 1000);
      return new SignJWT({ iss: id, sub: id, aud: TOKEN_URL, exp: now + 240, iat: now, jti: crypto.randomUUID() }).setProtectedHeader({ alg: 'RS384', typ: 'JWT' }).sign(key.privateKey);
    };
    for (const key of [newer, older]) expect((await tokenWith(await signed(key))).status).toBe(200);
    // A key of neither is still refused.
    await expectClientError(await tokenWith(await signed(await pair('RS384', 'stranger'))));
  });

  test('aud may be the issuer instead of the token URL', async () => {
    expect((await tokenWith(await assertion(inlineId, { claims: { aud: 'http://cinder.test' } }))).status).toBe(200);
  });

  test('the same jti twice -> invalid_client', async () => {
    const jti = crypto.randomUUID();
    expect((await tokenWith(await assertion(inlineId, { claims: { jti } }))).status).toBe(200);
    await expectClientError(await tokenWith(await assertion(inlineId, { claims: { jti } })));
  });

  test('a used jti is accepted again once it has expired', async () => {
    const jti = crypto.randomUUID();
    expect((await tokenWith(await assertion(inlineId, { claims: { jti } }))).status).toBe(200);
    t.clock.advance(400_000);
    expect((await tokenWith(await assertion(inlineId, { claims: { jti } }))).status).toBe(200);
  });

  const rejected: [string, AssertionOptions][] = [
    ['exp missing', { omit: ['exp'] }],
    ['exp more than five minutes ahead', { claims: { exp: Math.floor(Date.parse('2026-01-15T10:00:00Z') / 1000) + 400 } }],
    ['expired (beyond 60 s skew)', { claims: { exp: Math.floor(Date.parse('2026-01-15T10:00:00Z') / 1000) - 61 } }],
    ['nbf in the future', { claims: { nbf: Math.floor(Date.parse('2026-01-15T10:00:00Z') / 1000) + 120 } }],
    ['iat in the future', { claims: { iat: Math.floor(Date.parse('2026-01-15T10:00:00Z') / 1000) + 120 } }],
    ['iat an hour ago, exp a minute ahead', { claims: { iat: Math.floor(Date.parse('2026-01-15T10:00:00Z') / 1000) - 3600, exp: Math.floor(Date.parse('2026-01-15T10:00:00Z') / 1000) + 60 } }],
    ['iat beyond five minutes and the skew ago', { claims: { iat: Math.floor(Date.parse('2026-01-15T10:00:00Z') / 1000) - 361 } }],
    ['jti missing', { omit: ['jti'] }],
    ['sub differs from iss', { claims: { sub: 'someone-else' } }],
    ['wrong aud', { claims: { aud: 'https://elsewhere.example/token' } }],
    ['unknown kid', { header: { kid: 'nope' } }],
  ];
  for (const [name, opts] of rejected) {
    test(`${name} -> invalid_client`, async () => {
      await expectClientError(await tokenWith(await assertion(inlineId, opts)));
    });
  }

  // RFC 7523 3: an iat "unreasonably far in the past" may be refused; a client assertion lives five minutes at most.
  test('an iat up to five minutes (and a minute of skew) ago is accepted; an hour old is invalid_client saying so', async () => {
    const nowS = Math.floor(t.clock.now() / 1000);
    expect((await tokenWith(await assertion(inlineId, { claims: { iat: nowS - 360, exp: nowS + 30 } }))).status).toBe(200);
    const old = await tokenWith(await assertion(inlineId, { claims: { iat: nowS - 3600, exp: nowS + 60 } }));
    expect(old.status).toBe(400);
    expect(await old.json()).toEqual({
      error: 'invalid_client',
      error_description: 'iat is more than five minutes ago: make a new client assertion for each request (it lives at most five minutes)',
    });
  });

  test('a key of another algorithm under a registered kid -> invalid_client', async () => {
    await expectClientError(await tokenWith(await assertion(inlineId, { key: { ...keys.ES256!, kid: 'RS384-key' } })));
  });

  test('alg none and HS256 -> invalid_client', async () => {
    const now = Math.floor(t.clock.now() / 1000);
    const claims = { iss: inlineId, sub: inlineId, aud: TOKEN_URL, exp: now + 60, jti: 'x1' };
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    await expectClientError(await tokenWith(`${b64({ alg: 'none' })}.${b64(claims)}.`));
    const hs = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(new TextEncoder().encode('k'.repeat(32)));
    await expectClientError(await tokenWith(hs));
  });

  test('not a JWT -> invalid_client', async () => {
    await expectClientError(await tokenWith('garbage'));
  });

  test('a tampered signature -> invalid_client', async () => {
    const jwt = await assertion(inlineId);
    await expectClientError(await tokenWith(jwt.slice(0, -4) + (jwt.endsWith('AAAA') ? 'BBBB' : 'AAAA')));
  });

  test('unknown client -> invalid_client', async () => {
    await expectClientError(await tokenWith(await assertion('no-such-client')));
  });

  test('client_id in the body differing from iss -> invalid_client', async () => {
    await expectClientError(await tokenWith(await assertion(inlineId), { client_id: urlId }));
  });

  test('jku on an inline-JWKS client -> invalid_client', async () => {
    await expectClientError(await tokenWith(await assertion(inlineId, { header: { jku: JWKS_URL } })));
  });

  test('assertion plus Basic -> invalid_request', async () => {
    await expectClientError(await tokenWith(await assertion(inlineId), {}, { Authorization: basic(inlineId, 'x') }), 'invalid_request');
  });

  test('wrong or missing client_assertion_type -> invalid_request', async () => {
    const jwt = await assertion(inlineId);
    await expectClientError(await tokenWith(jwt, { client_assertion_type: 'urn:other' }), 'invalid_request');
    await expectClientError(await post(t, { grant_type: 'client_credentials', client_assertion: jwt }), 'invalid_request');
  });
});

describe('private_key_jwt with a JWK Set URL', () => {
  test('fetched once and cached per Cache-Control', async () => {
    expect((await tokenWith(await assertion(urlId, { key: keys.ES384 }))).status).toBe(200);
    expect((await tokenWith(await assertion(urlId, { key: keys.ES384 }))).status).toBe(200);
    expect(host.downloads).toBe(1);
    t.clock.advance(301_000);
    expect((await tokenWith(await assertion(urlId, { key: keys.ES384 }))).status).toBe(200);
    expect(host.downloads).toBe(2);
  });

  test('no-store: fetched every time', async () => {
    host.cacheControl = 'no-store';
    for (let i = 0; i < 2; i++) expect((await tokenWith(await assertion(urlId, { key: keys.ES384 }))).status).toBe(200);
    expect(host.downloads).toBe(2);
  });

  test('an unknown kid re-fetches once (key rotation at the client)', async () => {
    expect((await tokenWith(await assertion(urlId, { key: keys.ES384 }))).status).toBe(200);
    host.set = { keys: [keys.ES384!.jwk, keys.RS384!.jwk] };
    t.clock.advance(11_000);
    expect((await tokenWith(await assertion(urlId, { key: keys.RS384 }))).status).toBe(200);
    expect(host.downloads).toBe(2);
  });

  test('a kid that is still unknown after the re-fetch -> invalid_client, without a download storm', async () => {
    expect((await tokenWith(await assertion(urlId, { key: keys.ES384 }))).status).toBe(200);
    t.clock.advance(11_000);
    for (let i = 0; i < 3; i++) await expectClientError(await tokenWith(await assertion(urlId, { key: keys.RS384 })));
    expect(host.downloads).toBe(2);
  });

  test('jku equal to the registered URL is accepted; any other -> invalid_client', async () => {
    expect((await tokenWith(await assertion(urlId, { key: keys.ES384, header: { jku: JWKS_URL } }))).status).toBe(200);
    await expectClientError(await tokenWith(await assertion(urlId, { key: keys.ES384, header: { jku: 'https://evil.example/jwks' } })));
  });

  test('JWK Set URL failing -> invalid_client', async () => {
    host.status = 500;
    await expectClientError(await tokenWith(await assertion(urlId, { key: keys.ES384 })));
  });
});
