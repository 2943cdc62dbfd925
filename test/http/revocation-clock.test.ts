/**
 * A client or user revocation is timed by the clock the rest of the auth code reads (the app's), on every store: the
 * tokens issued on records read after it pass, those issued before it are refused. On PostgreSQL it was raised to the
 * database's clock, so a server whose clock ran behind the database's refused the tokens it issued after the change
 * for as long as it lagged (a test clock months behind: every one).
 */
import { describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient, enableClient, updateClient } from '../../src/auth/client-lifecycle.ts';
import { disableUser, enableUser, updateUser } from '../../src/auth/user-lifecycle.ts';
import type { Clock } from '../../src/clock.ts';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { fhirClient } from '../helpers/fhir.ts';
import { eachStore } from '../helpers/export.ts';
import { basic, PASSWORD, post, redeem, signIn, testUser, userClient } from '../helpers/oauth.ts';

/** Past the app's client cache and revocation poll (5 s each). */
const PAST_CACHES_MS = 6_000;

await eachStore((kind, fresh) => {
  describe(`client revocations on the app's clock, on ${kind}`, () => {
    test('narrowed scopes refuse the tokens issued before, and pass those issued 6 s after; so does a disable and an enable', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read', 'system/*.write'] });
        const token = (scope?: string) => t.token(scope, client.clientId, clientSecret!);
        const read = async (token: string) => (await t.request(`${t.fhir()}/Patient`, fhirInit(token))).status;
        const before = await token();
        expect(await read(before)).toBe(200);

        t.clock.advance(1_000);
        const { tokensRevoked } = await updateClient(t.store, t.clock, client.clientId, { scopes: ['system/*.read'] });
        expect(tokensRevoked).toBe(true);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(before)).toBe(401);
        const after = await token();
        expect(await read(after)).toBe(200);

        t.clock.advance(1_000);
        await disableClient(t.store, t.clock, client.clientId);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(after)).toBe(401);
        await enableClient(t.store, client.clientId);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(await token())).toBe(200);
      } finally {
        await t.close();
      }
    });
  });

  describe(`a change recorded by a clock ahead of the server's (a database ahead of it, as \`cinder\` raises its clock to), on ${kind}`, () => {
    /** How far the clock that records the change (the database's, for \`cinder client\`) runs ahead of the server's. */
    const LEAD_MS = 10 * 60_000;

    test('tokens issued after the change pass at once, those issued before it (on a record still cached) are refused', async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.read', 'system/*.write'] });
        const token = (scope?: string) => t.token(scope, client.clientId, clientSecret!);
        const read = async (token: string) => (await t.request(`${t.fhir()}/Patient`, fhirInit(token))).status;
        const ahead: Clock = { now: () => t.clock.now() + LEAD_MS };
        const before = await token();
        expect(await read(before)).toBe(200);

        t.clock.advance(1_000);
        const { tokensRevoked } = await updateClient(t.store, ahead, client.clientId, { scopes: ['system/*.read'] });
        expect(tokensRevoked).toBe(true);
        // Issued on the record the server's client cache still holds from before the change.
        const cached = await token();
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(before)).toBe(401);
        expect(await read(cached)).toBe(401);
        // Issued on the record read after the change: the server's clock is ten minutes behind the change's.
        const after = await token();
        expect(await read(after)).toBe(200);

        t.clock.advance(1_000);
        await disableClient(t.store, ahead, client.clientId);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(after)).toBe(401);
        await enableClient(t.store, client.clientId);
        t.clock.advance(PAST_CACHES_MS);
        const enabled = await token();
        expect(await read(enabled)).toBe(200);
        // Its introspection says so too (the store's isRevoked, not the server's list).
        const introspected = await t.request('/oauth2/introspect', {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${btoa(`${client.clientId}:${clientSecret}`)}` },
          body: new URLSearchParams({ token: enabled }),
        });
        expect(((await introspected.json()) as { active: boolean }).active).toBe(true);
      } finally {
        await t.close();
      }
    });
  });

  describe(`a client change and the sign-ins around it, on ${kind}`, () => {
    /** How far the clock that records the change (the database's, for \`cinder client\`) runs ahead of the server's. */
    const LEAD_MS = 10 * 60_000;

    test("a code redeems when its sign-in came after the client's revocation, though in the same millisecond or on a clock behind it; not when before", async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const c = await userClient(t);
        await testUser(t, { fhirUser: 'Practitioner/d1' });
        const codeOf = async () => {
          const res = await signIn(t, { clientId: c.id, scope: 'openid user/*.read' }, 'alice', PASSWORD);
          expect(res.status).toBe(303);
          return new URL(res.headers.get('location')!).searchParams.get('code')!;
        };
        const redeemed = async (code: string) => {
          const res = await redeem(t, code, c);
          return { status: res.status, body: (await res.json()) as { access_token?: string; error?: string } };
        };

        // Signed in before a disable (undone at once), redeemed after: refused.
        const pending = await codeOf();
        t.clock.advance(1_000);
        await disableClient(t.store, t.clock, c.id);
        await enableClient(t.store, c.id);
        // Signed in after it, in the same millisecond of the server's clock.
        const sameMs = await codeOf();
        t.clock.advance(PAST_CACHES_MS);
        expect(await redeemed(pending)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
        const same = await redeemed(sameMs);
        expect(same.status).toBe(200);
        expect((await t.request(`${t.fhir()}/Patient`, fhirInit(same.body.access_token!))).status).toBe(200);

        // A disable recorded by a clock ten minutes ahead (the database's, as \`cinder client disable\` takes it).
        const ahead: Clock = { now: () => t.clock.now() + LEAD_MS };
        const before = await codeOf();
        t.clock.advance(1_000);
        await disableClient(t.store, ahead, c.id);
        await enableClient(t.store, c.id);
        t.clock.advance(1_000);
        const after = await codeOf();
        t.clock.advance(PAST_CACHES_MS);
        expect(await redeemed(before)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
        expect((await redeemed(after)).status).toBe(200);
      } finally {
        await t.close();
      }
    });
  });

  describe(`Subscriptions activated on sign-ins around a revocation, on ${kind}`, () => {
    /** How far the clock that records the change (the database's, for \`cinder\`) runs ahead of the server's. */
    const LEAD_MS = 10 * 60_000;
    const NEW_PASSWORD = 'a new horse battery staple';
    const NEWER_PASSWORD = 'a newer horse battery staple';

    test("one activated on a sign-in after the user's or the app's revocation notifies, though the revocation was recorded in the same millisecond or by a clock ahead; one activated before it does not", async () => {
      const t = await createTestApp({ store: await fresh(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      try {
        const app = await userClient(t, { scopes: ['openid', 'user/*.*'] });
        await testUser(t, { fhirUser: 'Practitioner/d1' });
        const ahead: Clock = { now: () => t.clock.now() + LEAD_MS };
        const admin = fhirClient(t, await t.token());
        /** Signs in with `password` and activates a rest-hook Subscription to Patients of family `numbered` with the token. */
        const subscribed = async (password: string) => {
          const signedIn = await signIn(t, { clientId: app.id, scope: 'openid user/*.*' }, 'alice', password);
          const res = await redeem(t, new URL(signedIn.headers.get('location')!).searchParams.get('code')!, app);
          expect(res.status).toBe(200);
          const user = fhirClient(t, ((await res.json()) as { access_token: string }).access_token);
          const sub = await user.create({ resourceType: 'Subscription', status: 'requested', reason: 'numbers', criteria: 'Patient?family=numbered', channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:9/hook' } });
          expect(sub.status).toBe('active');
          return sub.id as string;
        };
        let n = 0;
        /** Writes a matching Patient once the servers' caches lapsed; how many notifications each of `ids` has waiting. */
        const notified = async (ids: string[]) => {
          t.clock.advance(PAST_CACHES_MS);
          await admin.put200({ resourceType: 'Patient', id: `numbered-${n++}`, name: [{ family: 'numbered' }] });
          return Promise.all(ids.map(async (id) => (await t.store.subscriptions.pending('t1', id, 100)).length));
        };

        const first = await subscribed(PASSWORD);
        // The user's tokens revoked (a new password), the sign-in in the same millisecond of the server's clock: the
        // user's record is read anew for each sign-in, so its token states the revocation's number.
        t.clock.advance(1_000);
        await updateUser(t.store, t.clock, 't1', 'alice', { password: NEW_PASSWORD });
        const sameMs = await subscribed(NEW_PASSWORD);
        expect(await notified([first, sameMs])).toEqual([0, 1]);

        // Revoked again by a clock ten minutes ahead of the server's: the Subscription of the sign-in before is silent,
        // that of the sign-in after notifies.
        t.clock.advance(1_000);
        await updateUser(t.store, ahead, 't1', 'alice', { password: NEWER_PASSWORD });
        t.clock.advance(PAST_CACHES_MS);
        const afterUser = await subscribed(NEWER_PASSWORD);
        expect(await notified([first, sameMs, afterUser])).toEqual([0, 1, 1]);

        // The app's tokens revoked (a disable, undone) by a clock ahead too; signed in once the servers' client caches
        // read its record again (a token issued on the record cached from before states the older number: refused).
        t.clock.advance(1_000);
        await disableClient(t.store, ahead, app.id);
        await enableClient(t.store, app.id);
        t.clock.advance(PAST_CACHES_MS);
        const afterApp = await subscribed(NEWER_PASSWORD);
        expect(await notified([first, sameMs, afterUser, afterApp])).toEqual([0, 1, 1, 1]);
      } finally {
        await t.close();
      }
    });
  });

  describe(`a user change recorded by a clock ahead of the server's (a database ahead of it, as \`cinder user\` raises its clock to), on ${kind}`, () => {
    /** How far the clock that records the change (the database's, for \`cinder user\`) runs ahead of the server's. */
    const LEAD_MS = 10 * 60_000;
    const NEW_PASSWORD = 'a new horse battery staple';

    test("a sign-in after the change gets tokens that pass at once; its refresh too; a code of a sign-in before it gets none", async () => {
      const t = await createTestApp({ store: await fresh() });
      try {
        const c = await userClient(t);
        await testUser(t, { fhirUser: 'Practitioner/d1' });
        const ahead: Clock = { now: () => t.clock.now() + LEAD_MS };
        const codeOf = async (password: string) => {
          const res = await signIn(t, { clientId: c.id, scope: 'openid offline_access user/*.read' }, 'alice', password);
          expect(res.status).toBe(303);
          return new URL(res.headers.get('location')!).searchParams.get('code')!;
        };
        const tokens = async (code: string) => {
          const res = await redeem(t, code, c);
          return { status: res.status, body: (await res.json()) as { access_token: string; refresh_token: string; error?: string } };
        };
        const refreshed = async (refreshToken: string) =>
          (await post(t, { grant_type: 'refresh_token', refresh_token: refreshToken }, { authorization: basic(c.id, c.secret!) })).status;
        const read = async (token: string) => (await t.request(`${t.fhir()}/Patient`, fhirInit(token))).status;
        const active = async (token: string) => {
          const res = await post(t, { token }, { authorization: basic(c.id, c.secret!) }, '/oauth2/introspect');
          return ((await res.json()) as { active: boolean }).active;
        };

        const before = (await tokens(await codeOf(PASSWORD))).body;
        expect(await read(before.access_token)).toBe(200);
        // Signed in before the change, redeemed after it.
        const pending = await codeOf(PASSWORD);

        t.clock.advance(1_000);
        const { tokensRevoked } = await updateUser(t.store, ahead, 't1', 'alice', { password: NEW_PASSWORD });
        expect(tokensRevoked).toBe(true);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(before.access_token)).toBe(401);
        expect(await refreshed(before.refresh_token)).toBe(400);
        expect(await tokens(pending)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });

        // Signed in after the change: the server's clock is ten minutes behind the change's.
        const after = await tokens(await codeOf(NEW_PASSWORD));
        expect(after.status).toBe(200);
        expect(await read(after.body.access_token)).toBe(200);
        expect(await active(after.body.access_token)).toBe(true);
        expect(await refreshed(after.body.refresh_token)).toBe(200);

        t.clock.advance(1_000);
        await disableUser(t.store, ahead, 't1', 'alice');
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(after.body.access_token)).toBe(401);
        expect(await refreshed(after.body.refresh_token)).toBe(400);
        await enableUser(t.store, 't1', 'alice');
        const enabled = await tokens(await codeOf(NEW_PASSWORD));
        expect(enabled.status).toBe(200);
        t.clock.advance(PAST_CACHES_MS);
        expect(await read(enabled.body.access_token)).toBe(200);
        // Its introspection says so too (the store's isRevoked, not the server's list).
        expect(await active(enabled.body.access_token)).toBe(true);
        expect(await refreshed(enabled.body.refresh_token)).toBe(200);
      } finally {
        await t.close();
      }
    });
  });
});
