/**
 * Cinder behind a reverse proxy at a path: `CINDER_BASE_URL=http://cinder.test/cinder`, the proxy
 * stripping `/cinder` before Cinder sees a request (Cinder serves at its own root). The browser sees
 * every page below `/cinder`, so the login page's CSRF cookie must name that path, or the browser never
 * sends it back and every sign-in is "Sign-in form expired". A small cookie jar keeps cookies by their
 * `Path` as a browser does (RFC 6265 5.1.4), and requests go through the proxy's stripping.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { decodeJwt } from 'jose';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { authorizeQuery, basic, FORM, hiddenFields, pkce, REDIRECT, testUser, userClient } from '../helpers/oauth.ts';

const PUBLIC = 'http://cinder.test/cinder';

let t: TestApp;
let c: Awaited<ReturnType<typeof userClient>>;
beforeAll(async () => {
  t = await createTestApp({ env: { CINDER_BASE_URL: `${PUBLIC}/` } });
  c = await userClient(t);
  await testUser(t);
});
afterAll(() => t.close());

/** RFC 6265 5.1.4 path-match: the cookie's path is the request path, or a prefix of it ending at a `/`. */
function pathMatches(requestPath: string, cookiePath: string): boolean {
  if (requestPath === cookiePath) return true;
  return requestPath.startsWith(cookiePath) && (cookiePath.endsWith('/') || requestPath[cookiePath.length] === '/');
}

/** A browser's view: URLs below PUBLIC, the proxy stripping `/cinder`, cookies kept and sent back by path. */
function browser() {
  const jar = new Map<string, { value: string; path: string }>();
  return async (url: string, init: RequestInit = {}): Promise<Response> => {
    const u = new URL(url);
    expect(u.pathname.startsWith('/cinder/')).toBe(true);
    const cookie = [...jar].filter(([, v]) => pathMatches(u.pathname, v.path)).map(([k, v]) => `${k}=${v.value}`).join('; ');
    const headers = new Headers(init.headers);
    if (cookie) headers.set('Cookie', cookie);
    const res = await t.request(`http://cinder.test${u.pathname.slice('/cinder'.length)}${u.search}`, { ...init, headers });
    const set = res.headers.get('set-cookie');
    if (set) {
      const [pair, ...attrs] = set.split(';').map((s) => s.trim());
      const [name, value] = pair!.split('=') as [string, string];
      const path = attrs.find((a) => a.toLowerCase().startsWith('path='))?.slice(5) ?? '/';
      jar.set(name, { value, path });
    }
    return res;
  };
}

describe('sign-in behind a reverse proxy at /cinder', () => {
  test('the login page sets its CSRF cookie for /cinder/oauth2/authorize; the form posts back to the page\'s own path', async () => {
    const get = browser();
    const res = await get(`${PUBLIC}/oauth2/authorize?${authorizeQuery({ clientId: c.id, aud: `${PUBLIC}/tenants/t1/fhir/R4` })}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toMatch(/^cinder_csrf=[A-Za-z0-9_-]{43}; Path=\/cinder\/oauth2\/authorize; HttpOnly; SameSite=Strict/);
    expect(res.headers.get('content-security-policy')).toContain(`form-action 'self' ${new URL(REDIRECT).origin}`);
    const html = await res.text();
    // A relative action: the page's own URL, below /cinder, whatever the base URL's path.
    expect(html).toContain('<form method="post" action="authorize">');
    expect(html).not.toMatch(/(?:action|href|src)="\//);
  });

  test('the whole code flow: sign in, redeem, call the FHIR API, all at the public base URL', async () => {
    const get = browser();
    const { verifier, challenge } = pkce();
    const page = await get(`${PUBLIC}/oauth2/authorize?${authorizeQuery({ clientId: c.id, challenge, state: 's-1', scope: 'openid fhirUser user/*.read', aud: `${PUBLIC}/tenants/t1/fhir/R4` })}`);
    const fields = hiddenFields(await page.text());
    const res = await get(`${PUBLIC}/oauth2/authorize`, {
      method: 'POST', headers: { ...FORM, Origin: 'http://cinder.test' }, body: new URLSearchParams({ ...fields, username: 'alice', password: 'correct horse battery', action: 'login' }),
    });
    expect(res.status).toBe(303);
    const back = new URL(res.headers.get('location')!);
    expect(`${back.origin}${back.pathname}`).toBe(REDIRECT);
    expect(back.searchParams.get('iss')).toBe(PUBLIC);
    expect(back.searchParams.get('state')).toBe('s-1');

    const token = await get(`${PUBLIC}/oauth2/token`, {
      method: 'POST', headers: { ...FORM, Authorization: basic(c.id, c.secret!) },
      body: new URLSearchParams({ grant_type: 'authorization_code', code: back.searchParams.get('code')!, redirect_uri: REDIRECT, code_verifier: verifier }),
    });
    expect(token.status).toBe(200);
    const body = (await token.json()) as { access_token: string; id_token: string };
    const access = decodeJwt(body.access_token);
    expect(access.iss).toBe(PUBLIC);
    expect(access.aud).toBe(`${PUBLIC}/tenants/t1/fhir/R4`);
    expect(decodeJwt(body.id_token).fhirUser).toBe(`${PUBLIC}/tenants/t1/fhir/R4/Patient/p1`);
    const read = await get(`${PUBLIC}/tenants/t1/fhir/R4/Patient?_count=1`, fhirInit(body.access_token));
    expect(read.status).toBe(200);
    expect(((await read.json()) as { link: { url: string }[] }).link[0]!.url).toStartWith(`${PUBLIC}/tenants/t1/fhir/R4/Patient?`);
  });

  test('discovery names the endpoints below the path', async () => {
    const res = await browser()(`${PUBLIC}/tenants/t1/fhir/R4/.well-known/smart-configuration`);
    expect(await res.json()).toMatchObject({ issuer: PUBLIC, authorization_endpoint: `${PUBLIC}/oauth2/authorize`, token_endpoint: `${PUBLIC}/oauth2/token` });
  });
});
