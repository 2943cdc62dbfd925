/**
 * Who may introspect what (RFC 7662 section 4: the server decides which protected resources may introspect which
 * tokens). Any confidential client of a tenant was told everything about every token of the tenant: the scopes,
 * user and patient of another app's sign-ins, and whether its refresh tokens were live. A client is now told about
 * its own tokens; a resource server (a client registered with the `introspect` scope) about the tenant's access
 * tokens too; a refresh token only to its own client. Whatever else is asked about is `{"active": false}`. Both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { updateClient } from '../../src/auth/client-lifecycle.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { basic, getCode, post, redeem, testUser, userClient } from '../helpers/oauth.ts';
import { storeTargets } from '../helpers/stores.ts';
import type { Store } from '../../src/store/types.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

type Who = { id: string; secret: string };

/** The repositories whose reads introspection makes, wrapped so that a test lists the calls of one request. */
const COUNTED = new Set(['tenants', 'clients', 'keys', 'users', 'oauth', 'subscriptions']);

/** `store` with its calls to COUNTED repositories recorded in `calls` while `counting.on`. */
function countingStore(store: Store, calls: string[], counting: { on: boolean }): Store {
  const wrap = (name: string, repo: object) => new Proxy(repo, {
    get(r, method) {
      const value = Reflect.get(r, method);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (counting.on) calls.push(`${name}.${String(method)}`);
        return value.apply(r, args);
      };
    },
  });
  return new Proxy(store, { get: (s, name) => (typeof name === 'string' && COUNTED.has(name) ? wrap(name, Reflect.get(s, name)) : Reflect.get(s, name)) }) as Store;
}

for (const target of targets) {
  describe(`who may introspect what, on ${target.kind}`, () => {
    let t: TestApp;
    let app: Who;
    let other: Who;
    let rs: Who;
    let signedIn: { access_token: string; refresh_token: string };
    let own: string;

    const confidential = async (scopes: string[], name: string): Promise<Who> => {
      const c = await createClient(t.store, t.clock, { tenant: 't1', name, scopes });
      return { id: c.client.clientId, secret: c.clientSecret! };
    };
    const introspect = async (token: string, who: Who, hint?: string) => {
      const res = await post(t, { token, ...(hint ? { token_type_hint: hint } : {}) }, { Authorization: basic(who.id, who.secret) }, '/oauth2/introspect');
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      return (await res.json()) as Record<string, unknown>;
    };

    const calls: string[] = [];
    const counting = { on: false };

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store: countingStore(store, calls, counting) });
      const c = await userClient(t);
      app = { id: c.id, secret: c.secret! };
      await testUser(t);
      other = await confidential(['system/*.read'], 'another backend');
      rs = await confidential(['introspect'], 'resource server');
      signedIn = (await (await redeem(t, await getCode(t, { clientId: app.id, scope: 'openid offline_access user/*.read' }), c)).json()) as typeof signedIn;
      own = await t.token('system/*.read', other.id, other.secret);
    }, 120_000);
    afterAll(() => t.close());

    test("another client of the tenant is told nothing of a sign-in's tokens; the app and a resource server are", async () => {
      expect(await introspect(signedIn.access_token, other)).toEqual({ active: false });
      expect(await introspect(signedIn.refresh_token, other, 'refresh_token')).toEqual({ active: false });
      for (const who of [app, rs]) expect(await introspect(signedIn.access_token, who)).toMatchObject({ active: true, client_id: app.id, sub: expect.any(String), scope: expect.stringContaining('patient/*.read') });
      expect(await introspect(signedIn.refresh_token, app)).toMatchObject({ active: true, token_type: 'refresh_token', client_id: app.id });
    });

    test("another client's live tokens cost the reads of a token that does not exist: the timing tells nothing", async () => {
      /** The store calls one introspection makes (the caller's record warmed in the client cache first). */
      const readsOf = async (token: string, who: Who, hint?: string) => {
        await introspect('warm-up', who);
        calls.length = 0;
        counting.on = true;
        try {
          expect(await introspect(token, who, hint)).toEqual({ active: false });
        } finally {
          counting.on = false;
        }
        return [...calls];
      };
      const guess = 'a'.repeat(signedIn.refresh_token.length);
      const forgedJwt = `${signedIn.access_token.slice(0, -8)}AAAAAAAA`;
      for (const hint of [undefined, 'refresh_token', 'access_token']) {
        const none = await readsOf(guess, other, hint);
        expect(none).toContain('oauth.getRefreshToken');
        // The app's live refresh token, to another confidential client and to a resource server.
        expect(await readsOf(signedIn.refresh_token, other, hint)).toEqual(none);
        expect(await readsOf(signedIn.refresh_token, rs, hint)).toEqual(none);
        // The app's live access token, to a client that is no resource server: as a JWT whose signature fails.
        expect(await readsOf(signedIn.access_token, other, hint)).toEqual(await readsOf(forgedJwt, other, hint));
      }
    });

    test('a refresh token is told about to its own client only, a resource server included', async () => {
      for (const hint of [undefined, 'refresh_token', 'access_token']) expect(await introspect(signedIn.refresh_token, rs, hint)).toEqual({ active: false });
    });

    test("a client is told about its own client_credentials tokens; a resource server about another client's too", async () => {
      expect(await introspect(own, other)).toMatchObject({ active: true, client_id: other.id, scope: 'system/*.read' });
      expect(await introspect(own, rs)).toMatchObject({ active: true, client_id: other.id });
      expect(await introspect(own, app)).toEqual({ active: false });
    });

    test('the introspect scope taken away, the resource server is told nothing more (within the client cache)', async () => {
      await updateClient(t.store, t.clock, rs.id, { scopes: ['system/*.read'] });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1000);
      expect(await introspect(own, rs)).toEqual({ active: false });
      await updateClient(t.store, t.clock, rs.id, { scopes: ['introspect'] });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1000);
      expect(await introspect(own, rs)).toMatchObject({ active: true });
    });
  });
}
