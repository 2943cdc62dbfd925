/**
 * A revocation of the client's or the user's tokens that commits while a code is being redeemed, after the
 * redemption checked for one and before its refresh token is stored, still revokes that refresh token: the
 * revocation's update of the refresh tokens did not see it, so the redemption looks again once it is stored. Before,
 * the refresh token stayed usable: once the client (or user) was enabled again, it gave new access tokens on the
 * revoked sign-in, for as long as it lived.
 */
import { describe, expect, test } from 'bun:test';
import { disableClient, enableClient } from '../../src/auth/client-lifecycle.ts';
import { disableUser, enableUser } from '../../src/auth/user-lifecycle.ts';
import type { RefreshToken } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { basic, PASSWORD, post, redeem, signIn, testUser, userClient } from '../helpers/oauth.ts';

/** Past the app's client cache and revocation poll (5 s each). */
const PAST_CACHES_MS = 6_000;

/**
 * Runs `during` once, just before the store writes the next refresh token (a revocation committing in that gap), and
 * gives the digests of the refresh tokens stored.
 */
function beforeRefreshStored(t: TestApp, during: () => Promise<unknown>): string[] {
  const oauth = t.store.oauth;
  const create = oauth.createRefreshToken.bind(oauth);
  const stored: string[] = [];
  let pending: (() => Promise<unknown>) | null = during;
  oauth.createRefreshToken = async (r: RefreshToken) => {
    const run = pending;
    pending = null;
    if (run) await run();
    await create(r);
    stored.push(r.tokenHash);
  };
  return stored;
}

await eachStore((kind, fresh) => {
  describe(`a revocation between a code's check and its refresh token, on ${kind}`, () => {
    const cases: [string, (t: TestApp, clientId: string) => Promise<unknown>, (t: TestApp, clientId: string) => Promise<unknown>][] = [
      ['the client disabled', (t, id) => disableClient(t.store, t.clock, id), (t, id) => enableClient(t.store, id)],
      ['the user disabled', (t) => disableUser(t.store, t.clock, 't1', 'alice'), (t) => enableUser(t.store, 't1', 'alice')],
    ];
    for (const [name, revoke, undo] of cases) {
      test(`${name} meanwhile: the redemption fails and its refresh token gives nothing once enabled again`, async () => {
        const t = await createTestApp({ store: await fresh() });
        try {
          const c = await userClient(t);
          await testUser(t);
          const res = await signIn(t, { clientId: c.id, scope: 'openid offline_access user/*.read' }, 'alice', PASSWORD);
          const code = new URL(res.headers.get('location')!).searchParams.get('code')!;
          t.clock.advance(1_000);
          const stored = beforeRefreshStored(t, () => revoke(t, c.id));
          const redeemed = await redeem(t, code, c);
          const body = (await redeemed.json()) as { error?: string; refresh_token?: string };
          await undo(t, c.id);
          t.clock.advance(PAST_CACHES_MS);
          // Nothing of this sign-in works once the revocation is undone: no refresh token it gave, none it stored.
          if (body.refresh_token !== undefined) {
            const refreshed = await post(t, { grant_type: 'refresh_token', refresh_token: body.refresh_token, client_id: c.id }, { Authorization: basic(c.id, c.secret!) });
            expect(refreshed.status).toBe(400);
          }
          for (const hash of stored) {
            const r = await t.store.oauth.getRefreshToken(hash);
            expect(r === null || r.revokedAt !== null || (await t.store.oauth.isRevoked({ grantId: r.grantId }))).toBe(true);
          }
          expect(redeemed.status).toBe(400);
          expect(body.error).toBe('invalid_grant');
        } finally {
          await t.close();
        }
      });
    }
  });
});
