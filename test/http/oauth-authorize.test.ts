import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { authorizeQuery, csrfCookie, FORM, hiddenFields, PASSWORD, pkce, REDIRECT, redirectParams, signIn, testUser, userClient } from '../helpers/oauth.ts';

let t: TestApp;
let c: Awaited<ReturnType<typeof userClient>>;
beforeEach(async () => {
  t = await createTestApp();
  c = await userClient(t, { name: 'Demo <App>' });
  await testUser(t);
});
afterEach(() => t.close());

const page = (q: URLSearchParams | string, headers: Record<string, string> = {}) => t.request(`/oauth2/authorize?${q}`, { headers });


describe('login page', () => {
  test('server-rendered form with security headers, CSRF cookie and escaped values', async () => {
    const res = await page(authorizeQuery({ clientId: c.id, state: 'st"<x>', extra: { login_hint: 'bob' } }));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("form-action 'self' https://app.example");
    expect(csp).not.toContain('unsafe-inline');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const cookie = res.headers.get('set-cookie')!;
    expect(cookie).toMatch(/^cinder_csrf=[A-Za-z0-9_-]{43}; Path=\/oauth2\/authorize; HttpOnly; SameSite=Strict/);
    const html = await res.text();
    expect(html).not.toContain('<script');
    expect(html).toContain('<label for="username">');
    expect(html).toContain('autocomplete="current-password"');
    expect(html).toContain('Demo &lt;App&gt;');
    expect(html).toContain('value="bob"');
    expect(hiddenFields(html).state).toBe('st"<x>');
    expect(hiddenFields(html).csrf_token).toBe(cookie.split(';')[0]!.split('=')[1]!);
  });

  test('good credentials -> 303 to the redirect URI with code, state and iss', async () => {
    const params = redirectParams(await signIn(t, { clientId: c.id, state: 'xyz' }));
    expect(params.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(params.get('state')).toBe('xyz');
    expect(params.get('iss')).toBe('http://cinder.test');
  });

  test('the authorization request may itself be POSTed (OIDC Core 3.1.2.1)', async () => {
    const res = await t.request('/oauth2/authorize', { method: 'POST', headers: FORM, body: authorizeQuery({ clientId: c.id }) });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('name="password"');
  });

  test('wrong password -> the form again with an error, no redirect', async () => {
    const res = await signIn(t, { clientId: c.id }, 'alice', 'wrong password');
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('role="alert"');
    expect(html).toContain('The username or password is not correct.');
    expect(res.headers.get('location')).toBeNull();
  });

  test('a user of another tenant cannot sign in to this client', async () => {
    const { createTenant } = await import('../../src/auth/admin.ts');
    await createTenant(t.store, t.clock, 't2');
    await testUser(t, { tenant: 't2', username: 'bob' });
    expect((await signIn(t, { clientId: c.id }, 'bob', PASSWORD)).status).toBe(200);
  });

  test('missing or mismatched CSRF token -> 403, no redirect', async () => {
    const first = await page(authorizeQuery({ clientId: c.id }));
    const fields = hiddenFields(await first.text());
    const body = new URLSearchParams({ ...fields, username: 'alice', password: PASSWORD });
    const noCookie = await t.request('/oauth2/authorize', { method: 'POST', headers: FORM, body });
    expect(noCookie.status).toBe(403);
    const wrong = await t.request('/oauth2/authorize', { method: 'POST', headers: { ...FORM, Cookie: 'cinder_csrf=' + 'x'.repeat(43) }, body });
    expect(wrong.status).toBe(403);
    const foreign = await t.request('/oauth2/authorize', { method: 'POST', headers: { ...FORM, Cookie: csrfCookie(first), Origin: 'https://evil.example' }, body });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('location')).toBeNull();
  });

  test('cancel -> access_denied redirect', async () => {
    const first = await page(authorizeQuery({ clientId: c.id, state: 's' }));
    const body = new URLSearchParams({ ...hiddenFields(await first.text()), action: 'cancel' });
    const params = redirectParams(await t.request('/oauth2/authorize', { method: 'POST', headers: { ...FORM, Cookie: csrfCookie(first) }, body }));
    expect(params.get('error')).toBe('access_denied');
    expect(params.get('state')).toBe('s');
  });

  test('failed sign-ins are throttled per user: 429 with Retry-After, even with the right password', async () => {
    for (let i = 0; i < t.config.loginFailuresUser; i++) await signIn(t, { clientId: c.id }, 'alice', 'nope-nope');
    const res = await signIn(t, { clientId: c.id });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await res.text()).toContain('Too many failed sign-in attempts');
    t.clock.advance(15 * 60_000 + 1);
    expect((await signIn(t, { clientId: c.id })).status).toBe(303);
  });

  test('failed sign-ins are throttled per IP across usernames', async () => {
    const app = await createTestApp({ env: { CINDER_LOGIN_FAILURES_IP: '3', CINDER_TRUST_PROXY: 'on' } });
    try {
      const cl = await userClient(app);
      await testUser(app);
      const ip = { 'X-Forwarded-For': '203.0.113.9' };
      for (const u of ['u1', 'u2', 'u3']) expect((await signIn(app, { clientId: cl.id }, u, 'nope-nope', ip)).status).toBe(200);
      expect((await signIn(app, { clientId: cl.id }, 'alice', PASSWORD, ip)).status).toBe(429);
      expect((await signIn(app, { clientId: cl.id }, 'alice', PASSWORD, { 'X-Forwarded-For': '203.0.113.10' })).status).toBe(303);
    } finally {
      await app.close();
    }
  });
});

describe('request validation', () => {
  test('unknown client -> error page, never a redirect', async () => {
    const res = await page(authorizeQuery({ clientId: 'nope' }));
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
  });

  test('redirect_uri not registered exactly (or missing) -> error page, never a redirect', async () => {
    for (const uri of [REDIRECT + '/', REDIRECT + '?x=1', 'https://evil.example/callback', 'HTTPS://app.example/callback']) {
      const res = await page(authorizeQuery({ clientId: c.id, redirectUri: uri }));
      expect(res.status).toBe(400);
      expect(res.headers.get('location')).toBeNull();
    }
    const q = authorizeQuery({ clientId: c.id });
    q.delete('redirect_uri');
    expect((await page(q)).status).toBe(400);
  });

  const redirected: [string, Record<string, string> | ((q: URLSearchParams) => void), string][] = [
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
    ['response_type missing', (q) => q.delete('response_type'), 'invalid_request'],
    ['scope missing', (q) => q.delete('scope'), 'invalid_scope'],
    ['no grantable scope', { scope: 'system/*.write' }, 'invalid_scope'],
    ['plain PKCE', { code_challenge: pkce().verifier, code_challenge_method: 'plain' }, 'invalid_request'],
    ['malformed challenge', { code_challenge: 'short', code_challenge_method: 'S256' }, 'invalid_request'],
    ['method without challenge', { code_challenge_method: 'S256' }, 'invalid_request'],
    ['prompt=none', { prompt: 'none' }, 'login_required'],
    ['response_mode fragment', { response_mode: 'fragment' }, 'invalid_request'],
    ['request object', { request: 'eyJ...' }, 'request_not_supported'],
    ['request object by reference', { request_uri: 'https://app.example/request.jwt' }, 'request_uri_not_supported'],
    ['SMART aud of another server', { aud: 'https://elsewhere.example/fhir' }, 'invalid_request'],
    ['SMART aud of another tenant', { aud: 'http://cinder.test/tenants/t2/fhir/R4' }, 'invalid_request'],
    ['SMART aud missing, asking for resource scopes', (q) => q.delete('aud'), 'invalid_request'],
    ['SMART aud missing, asking for launch/patient alone', (q) => { q.delete('aud'); q.set('scope', 'openid launch/patient'); }, 'invalid_request'],
  ];
  for (const [name, change, error] of redirected) {
    test(`${name} -> redirect with error=${error} and state`, async () => {
      const q = authorizeQuery({ clientId: c.id, state: 'abc' });
      if (typeof change === 'function') change(q);
      else for (const [k, v] of Object.entries(change)) q.set(k, v);
      const params = redirectParams(await page(q));
      expect(params.get('error')).toBe(error);
      expect(params.get('state')).toBe('abc');
      expect(params.get('code')).toBeNull();
    });
  }

  test("SMART aud equal to the client's FHIR base is accepted", async () => {
    expect((await page(authorizeQuery({ clientId: c.id, extra: { aud: t.fhir('t1') } }))).status).toBe(200);
    expect((await page(authorizeQuery({ clientId: c.id, extra: { aud: t.fhir('t1') + '/' } }))).status).toBe(200);
  });

  test('a sign-in for OpenID scopes alone needs no aud (no FHIR server is asked for)', async () => {
    expect((await page(authorizeQuery({ clientId: c.id, aud: null, scope: 'openid profile fhirUser offline_access' }))).status).toBe(200);
  });

  test('a parameter sent without a value is as if omitted (RFC 6749 3.1): an empty state is not echoed, an empty challenge is none', async () => {
    const q = authorizeQuery({ clientId: c.id, extra: { state: '', nonce: '' } });
    const html = await (await page(q)).text();
    expect(hiddenFields(html)).not.toHaveProperty('state');
    expect(hiddenFields(html)).not.toHaveProperty('nonce');
    const ok = redirectParams(await signIn(t, { clientId: c.id, extra: { state: '' } }));
    expect(ok.get('code')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(ok.has('state')).toBe(false);
    const bad = redirectParams(await page(authorizeQuery({ clientId: c.id, extra: { state: '', response_type: 'token' } })));
    expect(bad.get('error')).toBe('unsupported_response_type');
    expect(bad.has('state')).toBe(false);
    const pub = await userClient(t, { secret: false, grants: ['authorization_code'] });
    const empty = redirectParams(await page(authorizeQuery({ clientId: pub.id, extra: { code_challenge: '', code_challenge_method: 'S256' } })));
    expect(empty.get('error')).toBe('invalid_request');
    expect(empty.get('error_description')).toBe('code_challenge_method without code_challenge');
  });

  test('a repeated parameter -> invalid_request redirect', async () => {
    const params = redirectParams(await page(authorizeQuery({ clientId: c.id }) + '&scope=openid'));
    expect(params.get('error')).toBe('invalid_request');
  });

  // RFC 6749 3.1: parameters "MUST NOT be included more than once"; one of them sent without a value is as if omitted
  // only when it is the one sent.
  test('a parameter sent twice, once without a value, is repeated', async () => {
    for (const name of ['state', 'scope', 'redirect_uri', 'client_id']) {
      const q = authorizeQuery({ clientId: c.id, extra: { state: 'abc' } });
      const params = redirectParams(await page(`${name}=&${q}`));
      expect({ name, error: params.get('error'), description: params.get('error_description') }).toEqual({ name, error: 'invalid_request', description: `parameter '${name}' is repeated` });
    }
  });

  // RFC 6749 4.1.2.1: a request that is malformed but names a known client and its registered redirect URI is
  // invalid_request at that URI, with the state as sent; one whose client_id, redirect_uri or state cannot be read is a page.
  test('a parameter not well percent-encoded (a stray %, %FC) -> invalid_request redirect with the state, by GET and by POST', async () => {
    const malformed = (name: string) => `The parameter '${name}' is not well percent-encoded (a '%' must start two hex digits, and the bytes they encode must be UTF-8)`;
    const nul = (name: string) => `The parameter '${name}' holds U+0000, which no value may hold`;
    const cases = [
      ['login_hint=50%', malformed('login_hint')], ['nonce=n%zz', malformed('nonce')], ['login_hint=M%FCller', malformed('login_hint')],
      ['x%=1', malformed('x%')], ['sc%C3ope%FF=1', malformed('sc%C3ope%FF')], ['login_hint=a%00b', nul('login_hint')],
    ] as const;
    for (const [extra, description] of cases) {
      const q = `${authorizeQuery({ clientId: c.id, state: 'ab c' })}&${extra}`;
      for (const res of [await page(q), await t.request('/oauth2/authorize', { method: 'POST', headers: FORM, body: q })]) {
        expect(res.status).toBe(303);
        const params = redirectParams(res);
        expect(Object.fromEntries(params)).toEqual({ error: 'invalid_request', error_description: description, state: 'ab c', iss: 'http://cinder.test' });
      }
    }
    // Without a state to return, none is.
    const bare = redirectParams(await page(`${authorizeQuery({ clientId: c.id })}&nonce=%`));
    expect([bare.get('error'), bare.has('state')]).toEqual(['invalid_request', false]);
  });

  // RFC 6749 4.1.2.1: error_description "MUST NOT include characters outside the set %x20-21 / %x23-5B / %x5D-7E"; a
  // parameter's name, which a malformed request is refused naming, may hold any (U+0000, a quote, a letter beyond ASCII).
  test("an error redirect's error_description holds only the characters RFC 6749 allows it, whatever the request's names hold", async () => {
    const cases = [
      ['st%00ate=x', "The parameter 'st<U+0000>ate' holds U+0000, which no value may hold"],
      ['%C3%BC%22%5C=%FF', "The parameter '<U+00FC><U+0022><U+005C>' is not well percent-encoded (a '%' must start two hex digits, and the bytes they encode must be UTF-8)"],
      ['response_type=%C3%BC%22', null],
    ] as const;
    for (const [extra, description] of cases) {
      const q = authorizeQuery({ clientId: c.id, state: 's1' });
      // A value the server names back: an unsupported response_type.
      if (extra.startsWith('response_type=')) q.set('response_type', 'ü"');
      const res = await page(extra.startsWith('response_type=') ? `${q}` : `${q}&${extra}`);
      expect(res.status).toBe(303);
      const got = redirectParams(res).get('error_description')!;
      expect([extra, /^[\x20-\x21\x23-\x5B\x5D-\x7E]*$/.test(got)]).toEqual([extra, true]);
      if (description !== null) expect(got).toBe(description);
    }
  });

  test('client_id, redirect_uri or state not well percent-encoded, or the client not good -> error page, never a redirect', async () => {
    const base = authorizeQuery({ clientId: c.id, state: 'abc' });
    const cases = [
      [`${base}`.replace('state=abc', 'state=ab%FC'), 'state'],
      [`${base}`.replace('state=abc', 'state=100%'), 'state'],
      [`${base}`.replace(`client_id=${c.id}`, `client_id=${c.id}%`), 'client_id'],
      [`${base}`.replace('redirect_uri=', 'redirect_uri=%zz'), 'redirect_uri'],
      [`${base}`.replace('state=abc', 'state=a%00c'), 'state'],
    ] as const;
    for (const [q, name] of cases) {
      const res = await page(q);
      expect([name, res.status, res.headers.get('location')]).toEqual([name, 400, null]);
      const why = q.includes('%00') ? 'holds U+0000' : 'is not well percent-encoded';
      expect(await res.text()).toContain(`The authorization request could not be read: The parameter &#39;${name}&#39; ${why}`);
    }
    // A stray % beside an unknown client or an unregistered redirect URI: the page those are.
    const unknown = await page(`${authorizeQuery({ clientId: 'nope' })}&nonce=%`);
    expect([unknown.status, unknown.headers.get('location')]).toEqual([400, null]);
    expect(await unknown.text()).toContain('The application that sent you here is not registered.');
    const elsewhere = await page(`${authorizeQuery({ clientId: c.id, redirectUri: 'https://evil.example/cb' })}&nonce=%`);
    expect([elsewhere.status, elsewhere.headers.get('location')]).toEqual([400, null]);
  });

  test('public clients must use PKCE', async () => {
    const pub = await userClient(t, { secret: false, grants: ['authorization_code'] });
    const params = redirectParams(await page(authorizeQuery({ clientId: pub.id })));
    expect(params.get('error')).toBe('invalid_request');
    expect((await page(authorizeQuery({ clientId: pub.id, challenge: pkce().challenge }))).status).toBe(200);
  });

  test('a client without the code grant -> unauthorized_client redirect', async () => {
    const { createClient } = await import('../../src/auth/admin.ts');
    const cc = await createClient(t.store, t.clock, { tenant: 't1', grants: ['client_credentials'], scopes: ['x'], redirectUris: [REDIRECT] });
    expect(redirectParams(await page(authorizeQuery({ clientId: cc.client.clientId }))).get('error')).toBe('unauthorized_client');
  });

  test('login page requests are rate limited per IP: 429 with Retry-After', async () => {
    const app = await createTestApp({ env: { CINDER_LOGIN_RATE_LIMIT_IP: '2' } });
    try {
      const cl = await userClient(app);
      const q = authorizeQuery({ clientId: cl.id });
      expect((await app.request(`/oauth2/authorize?${q}`)).status).toBe(200);
      expect((await app.request(`/oauth2/authorize?${q}`)).status).toBe(200);
      const limited = await app.request(`/oauth2/authorize?${q}`);
      expect(limited.status).toBe(429);
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    } finally {
      await app.close();
    }
  });
});

await eachStore((kind, fresh) => {
  describe(`sign-in attempts made at once (${kind})`, () => {
    test('are counted as they arrive: the per-user limit checks that many passwords, the rest wait', async () => {
      const app = await createTestApp({ store: await fresh() });
      try {
        const cl = await userClient(app);
        await testUser(app);
        const limit = app.config.loginFailuresUser;
        // Every form first, then every wrong password at once.
        const forms = await Promise.all(Array.from({ length: limit + 7 }, async () => {
          const res = await app.request(`/oauth2/authorize?${authorizeQuery({ clientId: cl.id })}`);
          return { cookie: csrfCookie(res), fields: hiddenFields(await res.text()) };
        }));
        const answers = await Promise.all(forms.map(({ cookie, fields }) => app.request('/oauth2/authorize', {
          method: 'POST', headers: { ...FORM, Cookie: cookie }, body: new URLSearchParams({ ...fields, username: 'alice', password: 'nope-nope', action: 'login' }),
        })));
        const statuses = answers.map((r) => r.status).sort();
        expect(statuses).toEqual([...Array(limit).fill(200), ...Array(7).fill(429)]);
        // The right password now waits too, and after the window it signs in, which clears the user's failures.
        expect((await signIn(app, { clientId: cl.id })).status).toBe(429);
        app.clock.advance(15 * 60_000 + 1);
        expect((await signIn(app, { clientId: cl.id })).status).toBe(303);
        for (let i = 0; i < limit; i++) expect((await signIn(app, { clientId: cl.id }, 'alice', 'nope-nope')).status).toBe(200);
        expect((await signIn(app, { clientId: cl.id }, 'alice', 'nope-nope')).status).toBe(429);
      } finally {
        await app.close();
      }
    });
  });
});
