/**
 * Which redirect URIs an authorization request may name (RFC 9700 2.1, RFC 8252 7), on both databases:
 * registered ones of a browser scheme, stored by an older release, are never redirected to; a native app's
 * private-use scheme is; a loopback IP literal matches with any port, and nothing else but exactly.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Client } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import { authorizeQuery, pkce, redeem, signIn, testUser, userClient } from '../helpers/oauth.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const NATIVE = 'com.example.app:/callback';
const BROWSER_SCHEMES = [
  'javascript:alert(document.domain)', 'JavaScript:alert(1)', 'data:text/html,<script>alert(1)</script>', 'vbscript:msgbox(1)',
  'file:///etc/passwd', 'blob:https://app.example/5b1f3c2e-0000-4000-8000-000000000000',
];

/** A client row as an older release stored it, without today's checks on its redirect URIs. */
function legacyClient(t: TestApp, clientId: string, redirectUris: string[]): Client {
  return {
    tenant: 't1', clientId, name: 'Legacy app', secretHash: null, grants: ['authorization_code'], scopes: ['user/*.read'], redirectUris,
    jwks: null, jwksUrl: null, readAttributes: null, accessTokenTtl: null, createdAt: t.clock.now(), disabled: false, previousSecretHash: null, previousSecretUntil: null, deletedAt: null, tokensRevokedAt: null,
  };
}

for (const target of targets) {
  describe(`redirect URIs of an authorization request, on ${target.kind}`, () => {
    let t: TestApp;
    const page = (q: URLSearchParams) => t.request(`/oauth2/authorize?${q}`);

    beforeAll(async () => {
      ({ t } = await appOnFresh(target));
      await t.store.clients.create(legacyClient(t, 'legacy-unsafe', [...BROWSER_SCHEMES, NATIVE]));
      await testUser(t);
    });

    test("a registered redirect URI of a browser scheme (an older release stored it) is never redirected to, an error page; a native app's private-use scheme is", async () => {
      for (const uri of BROWSER_SCHEMES) {
        const { challenge } = pkce();
        // Valid, and a request whose error would be reported by redirecting (response_type token).
        for (const extra of [{}, { response_type: 'token' }] as Record<string, string>[]) {
          const res = await page(authorizeQuery({ clientId: 'legacy-unsafe', redirectUri: uri, challenge, extra }));
          expect([uri, res.status]).toEqual([uri, 400]);
          expect(res.headers.get('location')).toBeNull();
          expect(res.headers.get('content-security-policy')).not.toContain(new URL(uri).protocol);
          expect(await res.text()).toContain('The redirect_uri is not registered for this application.');
        }
      }
      // The same client's native-app private-use scheme (RFC 8252 7.1) is redirected to, and its code redeemed.
      const { verifier, challenge } = pkce();
      const res = await signIn(t, { clientId: 'legacy-unsafe', redirectUri: NATIVE, challenge, state: 's1' });
      expect(res.status).toBe(303);
      const back = new URL(res.headers.get('location')!);
      expect(`${back.protocol}${back.pathname}`).toBe(NATIVE);
      expect(back.searchParams.get('state')).toBe('s1');
      const token = await redeem(t, back.searchParams.get('code')!, { id: 'legacy-unsafe', secret: null }, { redirect_uri: NATIVE, code_verifier: verifier });
      expect(token.status).toBe(200);
    });

    describe('loopback IP literals (RFC 8252 7.3)', () => {
      const LOOPBACK = ['http://127.0.0.1/callback', 'http://[::1]:8080/cb', 'http://localhost:3000/cb', 'https://app.example:8443/cb'];
      let app: { id: string; secret: string | null };
      beforeAll(async () => {
        app = await userClient(t, { secret: false, grants: ['authorization_code'], redirectUris: LOOPBACK });
      });

      /** Signs in naming `uri`; the 303's target without its query, and the code. */
      async function signInAt(uri: string, challenge: string) {
        const res = await signIn(t, { clientId: app.id, redirectUri: uri, challenge });
        const location = res.headers.get('location');
        if (res.status !== 303 || !location) return { status: res.status, target: null, code: null };
        const back = new URL(location);
        return { status: res.status, target: `${back.origin}${back.pathname}`, code: back.searchParams.get('code') };
      }

      test('a registered 127.0.0.1 or [::1] redirect URI matches with any port; everything else only exactly (localhost too)', async () => {
        for (const uri of ['http://127.0.0.1:51234/callback', 'http://127.0.0.1:1/callback', 'http://127.0.0.1/callback', 'http://[::1]:49152/cb', 'http://[::1]/cb', 'http://[::1]:8080/cb']) {
          const { status, target } = await signInAt(uri, pkce().challenge);
          expect([uri, status, target]).toEqual([uri, 303, new URL(uri).origin + new URL(uri).pathname]);
        }
        const unmatched = [
          'http://127.0.0.1:51234/callback/', 'http://127.0.0.1:51234/Callback', 'http://127.0.0.1:51234/callback?x=1', 'http://127.0.0.1:51234/callback#x',
          'https://127.0.0.1:51234/callback', 'http://127.0.0.2:51234/callback', 'http://localhost:51234/callback', 'http://127.0.0.1:99999/callback',
          'http://127.0.0.1:/callback', 'http://127.0.0.1:51234@evil.example/callback', 'http://127.0.0.1.evil.example:51234/callback',
          'http://[0:0:0:0:0:0:0:1]:8080/cb', 'http://localhost:3001/cb', 'http://localhost/cb', 'https://app.example:9443/cb', 'https://app.example/cb',
        ];
        for (const uri of unmatched) {
          const res = await t.request(`/oauth2/authorize?${authorizeQuery({ clientId: app.id, redirectUri: uri, challenge: pkce().challenge })}`);
          expect([uri, res.status, res.headers.get('location')]).toEqual([uri, 400, null]);
        }
      });

      test('the code goes to the port of the request, and the token request must name that same redirect_uri', async () => {
        const { verifier, challenge } = pkce();
        const used = 'http://127.0.0.1:51234/callback';
        const { target, code } = await signInAt(used, challenge);
        expect(target).toBe(used);
        const pub = { id: app.id, secret: null };
        for (const other of ['http://127.0.0.1/callback', 'http://127.0.0.1:51235/callback']) {
          const res = await redeem(t, code!, pub, { redirect_uri: other, code_verifier: verifier });
          expect([other, res.status, ((await res.json()) as { error?: string }).error]).toEqual([other, 400, 'invalid_grant']);
        }
        // The first try consumed the code (the second was a replay): sign in again and name the same URI.
        const again = pkce();
        const second = await signInAt(used, again.challenge);
        const ok = await redeem(t, second.code!, pub, { redirect_uri: used, code_verifier: again.verifier });
        expect(ok.status).toBe(200);
      });
    });
  });
}
