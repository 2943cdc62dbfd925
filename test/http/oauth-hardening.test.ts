/**
 * The authorization server's defences, through `app.request()`, on both databases where a store is involved:
 * a used code presented by another client revokes nothing; clients' JWK Set URLs on loopback, link-local or
 * private addresses are never fetched; per-IP limits count an IPv6 /64, a forwarded address with a port and an
 * IPv4-mapped address as one client; a client assertion addressed to other parties too is refused.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, importJWK, SignJWT, type JWTPayload } from 'jose';
import { createClient } from '../../src/auth/admin.ts';
import { ASSERTION_TYPE } from '../../src/auth/client-assertion.ts';
import { MIN_ROTATION_DELAY_MS } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { BASE, createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { authorizeQuery, basic, getCode, ipLimitedApp, PASSWORD, pkce, post, redeem, REDIRECT, signIn, testUser, userClient } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Tokens = { access_token: string; refresh_token?: string; error?: string };

for (const target of targets) {
  describe(`authorization code replay, on ${target.kind}`, () => {
    let t: TestApp;

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store });
      await testUser(t);
    }, 120_000);
    afterAll(() => t.close());

    // RFC 9700 4.4 asks for the grant of a replayed code to be revoked; a replay by another client is no
    // replay by the code's client but a client mismatch (RFC 6749 4.1.3), which must not let whoever read a
    // used code in a log or a Referer, through any client (a public one needs no secret), end the user's grant.
    test("another client presenting a used code gets invalid_grant and does not revoke the code's grant", async () => {
      const victim = await userClient(t);
      const intruder = await userClient(t, { secret: false, grants: ['authorization_code'] });
      const code = await getCode(t, { clientId: victim.id, scope: 'openid offline_access user/*.read' });
      const issued = (await (await redeem(t, code, victim)).json()) as Tokens;
      expect(issued.refresh_token).toBeDefined();

      for (const other of [intruder, await userClient(t)]) {
        const res = await redeem(t, code, other);
        expect(res.status).toBe(400);
        expect(((await res.json()) as Tokens).error).toBe('invalid_grant');
      }
      expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status).toBe(200);
      const refreshed = await post(t, { grant_type: 'refresh_token', refresh_token: issued.refresh_token! }, { Authorization: basic(victim.id, victim.secret!) });
      expect(refreshed.status).toBe(200);

      // The code's own client replaying it still revokes the grant.
      expect((await redeem(t, code, victim)).status).toBe(400);
      expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status).toBe(401);
    });

    // A native or browser app is a public client: its id is known to all, and PKCE is what keeps a code intercepted on
    // its way to the app's redirect (another app registered for its scheme, a log) from being redeemed. Replaying that
    // code after the app redeemed it gave the interceptor no token, but revoked the user's session with the app, at will.
    test("a used code presented for its public client without the code's PKCE verifier revokes nothing; with it, the grant", async () => {
      const app = await userClient(t, { secret: false, grants: ['authorization_code'] });
      const { verifier, challenge } = pkce();
      const code = await getCode(t, { clientId: app.id, challenge, scope: 'openid user/*.read' });
      const issued = (await (await redeem(t, code, app, { code_verifier: verifier })).json()) as Tokens;
      const reads = async () => (await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status;
      expect(await reads()).toBe(200);

      for (const extra of [{}, { code_verifier: pkce().verifier }] as Record<string, string>[]) {
        const res = await redeem(t, code, app, extra);
        expect(res.status).toBe(400);
        expect(((await res.json()) as Tokens).error).toBe('invalid_grant');
        expect(await reads()).toBe(200);
      }
      // The app itself (or whoever holds its verifier, and so may have had its tokens) replaying it revokes the grant.
      expect((await redeem(t, code, app, { code_verifier: verifier })).status).toBe(400);
      expect(await reads()).toBe(401);
    });

    // The interceptor may also be first. A request that does not match the code (no verifier, another one, another
    // redirect URI) used the code up, and the app's own redemption then failed as a replay: its user could not sign in.
    test('a request without the code\'s verifier or redirect URI leaves the code to its client', async () => {
      const app = await userClient(t, { secret: false, grants: ['authorization_code'], redirectUris: [REDIRECT, 'https://app.example/other'] });
      const { verifier, challenge } = pkce();
      const code = await getCode(t, { clientId: app.id, challenge });
      // No verifier is a required parameter missing (the contract's invalid_request); a wrong one, or another redirect URI, invalid_grant.
      const refusals: [Record<string, string>, string][] = [
        [{}, 'invalid_request'], [{ code_verifier: pkce().verifier }, 'invalid_grant'], [{ code_verifier: verifier, redirect_uri: 'https://app.example/other' }, 'invalid_grant'],
      ];
      for (const [extra, error] of refusals) {
        const res = await redeem(t, code, app, extra);
        expect(res.status).toBe(400);
        expect(((await res.json()) as Tokens).error).toBe(error);
      }
      const res = await redeem(t, code, app, { code_verifier: verifier });
      expect(res.status).toBe(200);
      const issued = (await res.json()) as Tokens;
      expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status).toBe(200);
      // Used now, it is a replay for anyone, which revokes nothing without the verifier.
      expect((await redeem(t, code, app)).status).toBe(400);
      expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status).toBe(200);

      // A confidential client's code requested without PKCE is kept from a verifier it never had (a downgrade) alike.
      const confidential = await userClient(t);
      const plain = await getCode(t, { clientId: confidential.id });
      expect((await redeem(t, plain, confidential, { code_verifier: verifier })).status).toBe(400);
      expect((await redeem(t, plain, confidential)).status).toBe(200);
    });

    // The interceptor racing the app: requests without the verifier sent at the same time as the app's own. Exactly the
    // app's is redeemed, whichever the database takes first; the others are refused (unused or already used: no
    // verifier, so nothing is revoked), and its tokens stay good.
    test("requests without the code's verifier sent at once with its client's redeem nothing and revoke nothing", async () => {
      const app = await userClient(t, { secret: false, grants: ['authorization_code'] });
      for (let round = 0; round < 5; round++) {
        const { verifier, challenge } = pkce();
        const code = await getCode(t, { clientId: app.id, challenge });
        const wrong = [{}, { code_verifier: pkce().verifier }, { code_verifier: pkce().verifier }] as Record<string, string>[];
        const answers = await Promise.all([...wrong.map((extra) => redeem(t, code, app, extra)), redeem(t, code, app, { code_verifier: verifier })]);
        expect(answers.map((r) => r.status)).toEqual([400, 400, 400, 200]);
        const issued = (await answers[3]!.json()) as Tokens;
        expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued.access_token))).status).toBe(200);
      }
    });
  });
}

// `cinder keys rotate` is what an operator does when a signing key leaks (a backup, a database dump read). A process
// kept every key it had loaded and took whatever it signed, dated any time: a token forged with the old key after the
// rotation, or one verified before expiring years on, was taken by every running process for as long as it ran (and a
// launch or a login ticket the same), though the JWK Set no longer listed the key.
for (const target of targets) {
  describe(`tokens forged with a retired signing key, on ${target.kind}`, () => {
    let t: TestApp;
    let issued: string;
    let claims: JWTPayload;
    let kid: string;
    let leaked: CryptoKey;

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store });
      await t.keys.rotate({ delayMs: MIN_ROTATION_DELAY_MS });
      // Issued by the old key a minute before the hand-over (it signs until then).
      t.clock.advance(MIN_ROTATION_DELAY_MS - 60_000);
      issued = await t.token();
      claims = decodeJwt(issued);
      kid = decodeProtectedHeader(issued).kid!;
      leaked = (await importJWK((await t.store.keys.list(0)).find((k) => k.kid === kid)!.privateJwk, 'ES256')) as CryptoKey;
    }, 120_000);
    afterAll(() => t.close());

    const nowS = () => Math.floor(t.clock.now() / 1000);
    const forge = (times: { iat: number; exp: number }, typ = 'at+jwt', payload: JWTPayload = claims) =>
      new SignJWT({ ...payload, ...times, jti: crypto.randomUUID() }).setProtectedHeader({ alg: 'ES256', kid, typ }).sign(leaked);
    const readWith = async (token: string) => (await t.request(`${t.fhir('t1')}/Patient`, fhirInit(token))).status;

    let lasting: string;

    test('while the old key is published, what it signed before the rotation is taken; a token dated after it is not', async () => {
      t.clock.advance(90_000);
      expect(decodeProtectedHeader(await t.token()).kid).not.toBe(kid);
      expect(await readWith(issued)).toBe(200);
      const at = Number(claims.iat);
      lasting = await forge({ iat: at, exp: at + 10 * 365 * 86400 });
      expect(await readWith(lasting)).toBe(200);
      expect(await readWith(await forge({ iat: nowS(), exp: nowS() + 3600 }))).toBe(401);
      expect(await readWith(await forge({ iat: nowS() + 86400, exp: nowS() + 2 * 86400 }))).toBe(401);
    });

    test('once the old key is no longer published, nothing it signed is taken: tokens verified before too, nor a launch at the login page', async () => {
      t.clock.advance((MAX_TOKEN_TTL + 3600) * 1000);
      const kids = ((await (await t.request('/oauth2/jwks')).json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
      expect(kids).not.toContain(kid);
      const at = Number(claims.iat);
      expect(await readWith(lasting)).toBe(401);
      expect(await readWith(await forge({ iat: at + 30, exp: nowS() + 600 }))).toBe(401);
      const c = await userClient(t);
      const launch = await new SignJWT({ tenant: 't1', patient: 'p1', jti: crypto.randomUUID() })
        .setProtectedHeader({ alg: 'ES256', kid, typ: 'cinder-launch+jwt' }).setIssuer(BASE).setAudience(`${BASE}/oauth2/authorize`)
        .setIssuedAt(nowS() - 60).setExpirationTime(nowS() + 200).sign(leaked);
      const page = await t.request(`/oauth2/authorize?${authorizeQuery({ clientId: c.id, scope: 'launch openid patient/*.read', extra: { launch } })}`);
      expect(page.status).toBe(303);
      const location = new URL(page.headers.get('location')!);
      expect(`${location.origin}${location.pathname}`).toBe(REDIRECT);
      expect(location.searchParams.get('error')).toBe('invalid_request');
    });
  });
}

// Verifying reads the signing keys again once a reload interval (for a retirement by another process); a process
// that cannot read them then (the database unreachable a moment) goes on with the keys it has, as before it read them.
test('a token of a known key verifies while the keys cannot be read again', async () => {
  const t = await createTestApp();
  try {
    const issued = await t.token();
    const list = t.store.keys.list.bind(t.store.keys);
    t.store.keys.list = async () => {
      throw new Error('the database is unreachable');
    };
    t.clock.advance(2 * 60_000);
    expect((await t.request(`${t.fhir('t1')}/Patient`, fhirInit(issued))).status).toBe(200);
    t.store.keys.list = list;
  } finally {
    await t.close();
  }
});

// A client's JWK Set URL is fetched by the server (private_key_jwt): the host named in it, or the DNS its owner
// answers, must not point Cinder at the cloud metadata address or the internal network (SSRF), and the address
// checked must be the one connected to (no second resolution for a rebinding DNS server to answer differently).
describe('JWK Set URLs on loopback, link-local or private addresses are never fetched', () => {
  let t: TestApp;
  const seen: { url: string; host: string | null }[] = [];
  const resolved: Record<string, string[]> = {
    'keys.public.example': ['93.184.216.34'],
    'keys.internal.example': ['10.1.2.3'],
    'rebind.example': ['169.254.169.254'],
    'both.example': ['93.184.216.35', '192.168.1.9'],
  };
  let key: CryptoKey;
  let jwk: Record<string, unknown>;

  beforeAll(async () => {
    const pair = await generateKeyPair('ES256', { extractable: true });
    key = pair.privateKey;
    jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256' };
    const fetchFn = (async (input: string | URL | Request, init?: RequestInit) => {
      const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      seen.push({ url, host: new Headers(init?.headers).get('host') });
      return Response.json({ keys: [jwk] });
    }) as typeof fetch;
    t = await createTestApp({ fetch: fetchFn, resolveHost: async (host) => resolved[host] ?? [] });
  });
  afterAll(() => t.close());

  async function tokenFor(jwksUrl: string): Promise<Response> {
    const id = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwksUrl })).client.clientId;
    const now = Math.floor(t.clock.now() / 1000);
    const jwt = await new SignJWT({ iss: id, sub: id, aud: `${BASE}/oauth2/token`, exp: now + 240, iat: now, jti: crypto.randomUUID() })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'JWT' })
      .sign(key);
    return post(t, { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: jwt });
  }

  for (const url of [
    'http://169.254.169.254/latest/meta-data/jwks', 'http://127.0.0.1:8080/jwks', 'http://[::1]/jwks', 'http://localhost/jwks',
    'http://10.0.0.7/jwks', 'https://keys.internal.example/jwks', 'https://rebind.example/jwks', 'https://both.example/jwks',
    'https://unresolvable.example/jwks',
  ]) {
    test(`${url}: invalid_client, and no request is sent`, async () => {
      seen.length = 0;
      const res = await tokenFor(url);
      expect(res.status).toBe(400);
      expect(((await res.json()) as Tokens).error).toBe('invalid_client');
      expect(seen).toEqual([]);
    });
  }

  test('a public address is fetched at the address checked, the name kept in the Host header', async () => {
    seen.length = 0;
    const res = await tokenFor('https://keys.public.example/jwks');
    expect(res.status).toBe(200);
    expect(seen).toEqual([{ url: 'https://93.184.216.34/jwks', host: 'keys.public.example' }]);
  });
});

// One host is routed a whole IPv6 /64 and may use any address in it: the per-IP limits count the /64, or
// rotating the interface identifier gives a password sprayer (and a token endpoint flooder) a fresh budget
// with every request. An IPv4-mapped IPv6 address is its IPv4 address.
for (const target of targets) {
  describe(`per-IP sign-in failure limits count one client once (an IPv6 /64, a forwarded port, an IPv4-mapped address), on ${target.kind}`, () => {
    let t: TestApp;
    let client: Awaited<ReturnType<typeof userClient>>;
    const from = (ip: string) => ({ 'X-Forwarded-For': ip });

    beforeAll(async () => {
      ({ t, client } = await ipLimitedApp(target));
    }, 120_000);
    afterAll(() => t.close());

    test('failed sign-ins from addresses of one /64 are counted together', async () => {
      for (const [n, u] of ['u1', 'u2', 'u3'].entries()) {
        expect((await signIn(t, { clientId: client.id }, u, 'nope-nope', from(`2001:db8:77:1::${n + 1}`))).status).toBe(200);
      }
      expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from('2001:db8:77:1:abcd:ef01:2345:6789'))).status).toBe(429);
      expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from('2001:db8:77:2::1'))).status).toBe(303);
    });

    test('a port the proxy adds to the forwarded address (Azure Application Gateway) is no address of its own', async () => {
      for (const [n, u] of ['u7', 'u8', 'u9'].entries()) {
        expect((await signIn(t, { clientId: client.id }, u, 'nope-nope', from(`198.51.100.20:5000${n}`))).status).toBe(200);
      }
      expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from('198.51.100.20:61000'))).status).toBe(429);
      for (const [n, u] of ['u10', 'u11', 'u12'].entries()) {
        expect((await signIn(t, { clientId: client.id }, u, 'nope-nope', from(`[2001:db8:88:1::${n + 1}]:4430${n}`))).status).toBe(200);
      }
      expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from('[2001:db8:88:1::9]:1'))).status).toBe(429);
    });

    test('an IPv4-mapped IPv6 address is counted as its IPv4 address', async () => {
      for (const u of ['u4', 'u5', 'u6']) expect((await signIn(t, { clientId: client.id }, u, 'nope-nope', from('198.51.100.7'))).status).toBe(200);
      expect((await signIn(t, { clientId: client.id }, 'alice', PASSWORD, from('::ffff:198.51.100.7'))).status).toBe(429);
    });
  });
}

describe('the token endpoint and login page request limits count an IPv6 /64 as one address', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { CINDER_TOKEN_RATE_LIMIT_IP: '2', CINDER_LOGIN_RATE_LIMIT_IP: '2', CINDER_TRUST_PROXY: 'on' } });
  });
  afterAll(() => t.close());

  test('token requests', async () => {
    const ask = (ip: string) => post(t, { grant_type: 'client_credentials' }, { Authorization: basic(t.admin.client.clientId, t.admin.clientSecret!), 'X-Forwarded-For': ip });
    expect((await ask('2001:db8:5:5::1')).status).toBe(200);
    expect((await ask('2001:db8:5:5::2')).status).toBe(200);
    const third = await ask('2001:db8:5:5:1:2:3:4');
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).not.toBeNull();
    expect((await ask('2001:db8:5:6::1')).status).toBe(200);
  });

  test('login page requests', async () => {
    const client = await userClient(t);
    const open = (ip: string) => t.request(`/oauth2/authorize?${new URLSearchParams({ response_type: 'code', client_id: client.id, redirect_uri: 'https://app.example/callback', scope: 'openid' })}`, { headers: { 'X-Forwarded-For': ip } });
    expect((await open('2001:db8:9:9::1')).status).toBe(200);
    expect((await open('2001:db8:9:9::2')).status).toBe(200);
    expect((await open('2001:db8:9:9::3')).status).toBe(429);
    expect((await open('2001:db8:9:a::1')).status).toBe(200);
  });
});

// A public client authenticates by naming itself, and its id is public (it is in the app's own pages): counted per
// client alone, anyone could spend its budget (600 requests a minute by default, a quarter of one address's) with
// bogus requests naming it, and every user of the app was refused a token. A public client is counted per client and
// address; a confidential one, which the bogus requests cannot authenticate as, per client still.
describe("one address cannot spend a public client's token request budget for every user of the app", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { CINDER_TOKEN_RATE_LIMIT_CLIENT: '3', CINDER_TRUST_PROXY: 'on' } });
    await testUser(t);
  });
  afterAll(() => t.close());

  test("bogus requests naming a public client from one address leave the app's users their tokens", async () => {
    const app = await userClient(t, { secret: false, grants: ['authorization_code'] });
    const { verifier, challenge } = pkce();
    const code = await getCode(t, { clientId: app.id, challenge });
    const from = (ip: string) => ({ 'X-Forwarded-For': ip });
    const bogus = { grant_type: 'authorization_code', client_id: app.id, code: 'made-up', redirect_uri: REDIRECT, code_verifier: verifier };
    for (const path of ['/oauth2/token', '/oauth2/token', '/oauth2/revoke']) {
      const body = path === '/oauth2/token' ? bogus : { client_id: app.id, token: 'made-up' };
      expect((await post(t, body, from('198.51.100.7'), path)).status).toBeLessThan(429);
    }
    expect((await post(t, bogus, from('198.51.100.7'))).status).toBe(429);
    expect((await post(t, bogus, from('198.51.100.7'), '/oauth2/introspect')).status).toBe(429);
    const res = await post(t, { grant_type: 'authorization_code', client_id: app.id, code, redirect_uri: REDIRECT, code_verifier: verifier }, from('203.0.113.5'));
    expect(res.status).toBe(200);
  });

  test('a confidential client is counted across addresses', async () => {
    const ask = (ip: string) => post(t, { grant_type: 'client_credentials' }, { Authorization: basic(t.admin.client.clientId, t.admin.clientSecret!), ...{ 'X-Forwarded-For': ip } });
    for (const n of [1, 2, 3]) expect((await ask(`192.0.2.${n}`)).status).toBe(200);
    expect((await ask('192.0.2.4')).status).toBe(429);
  });
});

// An assertion addressed to this server and to another party could be replayed here by that party (the audience
// injection draft-ietf-oauth-rfc7523bis closes): `aud` must name this server alone.
describe('a client assertion whose aud names other parties too is refused', () => {
  let t: TestApp;
  let id: string;
  let key: CryptoKey;
  beforeAll(async () => {
    t = await createTestApp();
    const pair = await generateKeyPair('ES256', { extractable: true });
    key = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256' };
    id = (await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read'], jwks: { keys: [jwk as never] } })).client.clientId;
  });
  afterAll(() => t.close());

  async function withAud(aud: unknown): Promise<Response> {
    const now = Math.floor(t.clock.now() / 1000);
    const jwt = await new SignJWT({ iss: id, sub: id, aud: aud as string, exp: now + 240, iat: now, jti: crypto.randomUUID() })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'JWT' })
      .sign(key);
    return post(t, { grant_type: 'client_credentials', client_assertion_type: ASSERTION_TYPE, client_assertion: jwt });
  }

  test('several audiences, this server among them: invalid_client', async () => {
    for (const aud of [[`${BASE}/oauth2/token`, 'https://other-as.example'], ['https://other-as.example/token', BASE], [`${BASE}/oauth2/token`, BASE]]) {
      const res = await withAud(aud);
      expect(res.status).toBe(400);
      expect(((await res.json()) as Tokens).error).toBe('invalid_client');
    }
  });

  test('one audience, as a string or a one-member array: a token', async () => {
    for (const aud of [`${BASE}/oauth2/token`, [`${BASE}/oauth2/token`], BASE]) expect((await withAud(aud)).status).toBe(200);
  });
});
