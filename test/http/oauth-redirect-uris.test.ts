/**
 * Which redirect URIs an authorization request may name (RFC 9700 2.1, RFC 8252 7), on both databases:
 * registered ones of a browser scheme, stored by an older release, are never redirected to; a native app's
 * private-use scheme is.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import type { Client } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import { authorizeQuery, pkce, redeem, signIn, testUser } from '../helpers/oauth.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets();
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
    jwks: null, jwksUrl: null, readAttributes: null, accessTokenTtl: null, createdAt: t.clock.now(), disabled: false,
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
  });
}
