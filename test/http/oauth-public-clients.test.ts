/**
 * Public clients (no secret, no keys) hold no refresh tokens (RFC 9700 2.2.2: a public client's refresh
 * tokens must be rotated or sender-constrained; Cinder's are neither). A public client an older release
 * registered with the refresh_token grant, and what it was issued then, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { randomToken, sha256Hex } from '../../src/auth/secrets.ts';
import type { Client } from '../../src/store/types.ts';
import type { TestApp } from '../helpers/app.ts';
import { basic, getCode, pkce, post, redeem, REDIRECT, testUser, userClient } from '../helpers/oauth.ts';
import { appOnFresh } from '../helpers/search-runner.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Tokens = { access_token: string; refresh_token?: string; scope: string; error?: string; error_description?: string };

for (const target of targets) {
  describe(`a public client registered with the refresh_token grant by an older release, on ${target.kind}`, () => {
    let t: TestApp;
    let userId: string;
    const pub = { id: 'legacy-public-app', secret: null };

    beforeAll(async () => {
      ({ t } = await appOnFresh(target));
      // The row as an older release's `cinder client create --no-secret --grant authorization_code --grant refresh_token` stored it.
      const row: Client = {
        tenant: 't1', clientId: pub.id, name: 'Legacy app', secretHash: null, grants: ['authorization_code', 'refresh_token'],
        scopes: ['user/*.read'], redirectUris: [REDIRECT], jwks: null, jwksUrl: null, readAttributes: null, accessTokenTtl: null,
        createdAt: t.clock.now(), disabled: false, previousSecretHash: null, previousSecretUntil: null, deletedAt: null, tokensRevokedAt: null,
      };
      await t.store.clients.create(row);
      userId = (await testUser(t, { fhirUser: 'Practitioner/d1' })).id;
    });

    test('a sign-in asking for offline_access or offline is granted neither: no refresh_token, and the scope does not claim it', async () => {
      for (const offline of ['offline_access', 'offline']) {
        const { verifier, challenge } = pkce();
        const code = await getCode(t, { clientId: pub.id, challenge, scope: `openid ${offline} user/*.read` });
        const res = await redeem(t, code, pub, { code_verifier: verifier });
        expect(res.status).toBe(200);
        const body = (await res.json()) as Tokens;
        expect(body.refresh_token).toBeUndefined();
        expect(body.scope).toBe('openid user/*.read');
      }
    });

    test('a code issued before the upgrade with offline_access gives no refresh_token either', async () => {
      const { verifier, challenge } = pkce();
      const now = t.clock.now();
      await t.store.oauth.createCode({
        codeHash: sha256Hex('pre-upgrade-code'), grantId: randomToken(16), clientId: pub.id, tenant: 't1', userId, redirectUri: REDIRECT,
        scope: 'openid offline_access user/*.read', nonce: null, codeChallenge: challenge, authTime: now, expiresAt: now + 60_000, consumedAt: null,
        patient: null, encounter: null, fhirContext: null, needPatientBanner: true,
      });
      const res = await redeem(t, 'pre-upgrade-code', pub, { code_verifier: verifier });
      expect(res.status).toBe(200);
      const body = (await res.json()) as Tokens;
      expect(body.refresh_token).toBeUndefined();
      expect(body.scope).toBe('openid user/*.read');
    });

    test('a refresh token issued to it before the upgrade -> 400 unauthorized_client', async () => {
      const now = t.clock.now();
      await t.store.oauth.createRefreshToken({
        tokenHash: sha256Hex('pre-upgrade-refresh'), grantId: randomToken(16), clientId: pub.id, tenant: 't1', userId,
        scope: 'openid offline_access user/*.read', authTime: now, createdAt: now, expiresAt: now + 3_600_000, revokedAt: null,
        patient: null, encounter: null, fhirContext: null, needPatientBanner: true,
      });
      const res = await post(t, { grant_type: 'refresh_token', refresh_token: 'pre-upgrade-refresh', client_id: pub.id });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toBe('application/json;charset=UTF-8');
      const body = (await res.json()) as Tokens;
      expect(body.error).toBe('unauthorized_client');
      expect(body.error_description).toContain('public client');
      expect(body.access_token).toBeUndefined();
      // Introspection says so too: what the token endpoint refuses is not active (RFC 7662 2.2).
      const rs = await userClient(t, { name: 'Resource server', scopes: ['introspect'] });
      const info = await post(t, { token: 'pre-upgrade-refresh' }, { Authorization: basic(rs.id, rs.secret!) }, '/oauth2/introspect');
      expect(info.status).toBe(200);
      expect(await info.json()).toEqual({ active: false });
    });
  });
}
