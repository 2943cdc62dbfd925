/**
 * What a write reads of its tenant's Subscription owners (hub.ts notifying), on both databases: once the 5 s caches of
 * client and user records lapsed, each owner's client and user were read with a statement of their own (hundreds of
 * owners, hundreds of reads before every write); now the clients are one read and the users one, for them all. An owner
 * whose user was disabled or whose client was disabled since is still never notified, its neighbours still are.
 * Delivery likewise: the owners of the Subscriptions a round claims are read together before their deliveries start (one
 * read for the clients, one for the users), not one by each delivery; one whose user or client was disabled is sent nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { disableUser } from '../../src/auth/user-lifecycle.ts';
import { createUser } from '../../src/auth/users.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { PASSWORD, REDIRECT } from '../helpers/oauth.ts';

/** Users, each owning one Subscription, through two clients. */
const USERS = 6;
const SCOPES = ['user/*.rs'];

await eachStore((kind, fresh) => {
  describe(`a write's reads of its Subscriptions' owners (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clientIds: string[] = [];
    const userIds: string[] = [];
    const subs: string[] = [];
    /** The statements reading client and user records while `counting`. */
    const reads = { clients: 0, users: 0 };
    let counting = false;
    const counted = (store: Store): Store => {
      const wrap = <T extends object>(repo: T, key: 'clients' | 'users'): T =>
        new Proxy(repo, {
          get: (target, name) => {
            const value = Reflect.get(target, name) as unknown;
            if ((name !== 'get' && name !== 'getMany') || typeof value !== 'function') return value;
            return (...args: unknown[]) => {
              // Those of the owners only (the bearer token's client is read as well, by the FHIR gate).
              const ids = (name === 'get' ? [args[key === 'users' ? 1 : 0]] : [...(args[key === 'users' ? 1 : 0] as string[])]) as string[];
              if (counting && ids.some((id) => (key === 'users' ? userIds : clientIds).includes(id))) reads[key]++;
              return (value as (...a: unknown[]) => unknown).apply(target, args);
            };
          },
        });
      const clients = wrap(store.clients, 'clients');
      const users = wrap(store.users, 'users');
      return new Proxy(store, { get: (target, key) => (key === 'clients' ? clients : key === 'users' ? users : Reflect.get(target, key)) });
    };
    const SUBSCRIPTION = { resourceType: 'Subscription', status: 'requested', reason: 'owners', criteria: 'Observation?code:text=watched', channel: { type: 'rest-hook', endpoint: 'https://hook.example/owners' } };
    /** The endpoints the hooks were sent to (each Subscription's its own: /owners/<its user's index>), in order. */
    const sent: string[] = [];
    const hook = (async (input: RequestInfo | URL, init?: RequestInit) => {
      sent.push(new URL(new Request(input, init).url).pathname);
      return new Response(null, { status: 200 });
    }) as typeof fetch;
    const pending = async (id: string) => (await t.store.subscriptions.pending('t1', id, 100)).length;
    /** Writes an Observation (`code` its text) once the caches lapsed, counting the owners' reads. */
    const write = async (id: string, code: string) => {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      reads.clients = reads.users = 0;
      counting = true;
      try {
        const res = await api.put(`Observation/${id}`, { resourceType: 'Observation', id, status: 'final', code: { text: code } });
        expect(res.status).toBe(201);
      } finally {
        counting = false;
      }
      return { ...reads };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: counted(await fresh()), resolveHost: async () => ['93.184.215.14'], fetch: hook });
      api = fhirClient(t, await t.token());
      for (const name of ['A', 'B']) {
        clientIds.push((await createClient(t.store, t.clock, { tenant: 't1', name, grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: SCOPES })).client.clientId);
      }
      for (let i = 0; i < USERS; i++) userIds.push((await createUser(t.store, t.clock, { tenant: 't1', username: `u${i}`, password: PASSWORD })).id);
      const res = await t.request(t.fhir(), {
        method: 'POST', headers: { Authorization: `Bearer ${await t.token()}`, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: userIds.map((_, i) => ({ resource: { ...SUBSCRIPTION, channel: { ...SUBSCRIPTION.channel, endpoint: `${SUBSCRIPTION.channel.endpoint}/${i}` } }, request: { method: 'POST', url: 'Subscription' } })) }),
      });
      expect(res.status).toBe(200);
      subs.push(...((await res.json()) as Json).entry.map((e: Json) => e.resource.id as string));
      // Each owned by a user's authority through client A or B, as activation with the user's token records it.
      await t.store.resources.write('t1', async (w) => {
        for (const [i, id] of subs.entries()) {
          const owner = { scopes: SCOPES, clientId: clientIds[i % 2]!, user: { id: userIds[i]!, readAt: t.clock.now() } };
          await w.ownSubscription(id, JSON.stringify(owner), 'rest-hook');
        }
      });
      // The hub reads its set of active Subscriptions again after a write of a type it watches (hub.ts WATCHED_TYPES).
      await api.put200({ resourceType: 'ValueSet', id: 'vs-owners', status: 'active' });
    }, 120_000);
    afterAll(() => t.close());

    test('once the caches lapsed, a write reads its owners\' clients in one statement and their users in another', async () => {
      expect(await write('o-none', 'ignored')).toEqual({ clients: 1, users: 1 });
      // Within the caches' life, none.
      reads.clients = reads.users = 0;
      counting = true;
      try {
        expect((await api.put('Observation/o-none', { resourceType: 'Observation', id: 'o-none', status: 'final', code: { text: 'ignored' } })).status).toBe(200);
      } finally {
        counting = false;
      }
      expect(reads).toEqual({ clients: 0, users: 0 });
      expect(await write('o-all', 'watched')).toEqual({ clients: 1, users: 1 });
      for (const id of subs) expect(await pending(id)).toBe(1);
    });

    test('an owner whose user or client was disabled since is not notified; the others are', async () => {
      await disableUser(t.store, t.clock, 't1', 'u0');
      await t.store.clients.update({ ...(await t.store.clients.get(clientIds[1]!))!, disabled: true });
      const before = await Promise.all(subs.map(pending));
      await write('o-after', 'watched');
      const after = await Promise.all(subs.map(pending));
      // u0's (client A) and every Subscription of client B (u1, u3, u5): nothing more; u2's and u4's (client A): one more.
      expect(after.map((n, i) => n - before[i]!)).toEqual([0, 0, 1, 0, 1, 0]);
    });

    test("once the caches lapsed, a delivery round reads its owners' clients in one statement and their users in another; the disabled are sent nothing", async () => {
      const waiting = await Promise.all(subs.map(pending));
      // u0's (its user disabled) and client B's: waiting from before the disables; u2's and u4's: two each.
      expect(waiting).toEqual([1, 1, 2, 1, 2, 1]);
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      reads.clients = reads.users = 0;
      counting = true;
      try {
        expect(await t.app.subscriptions.runOnce()).toBe(subs.length);
      } finally {
        counting = false;
      }
      expect(reads).toEqual({ clients: 1, users: 1 });
      for (let i = 0; i < 10 && (await t.app.subscriptions.runOnce()) > 0; i++);
      // Nothing of u0's nor of client B's; all of u2's and u4's.
      expect(new Set(sent)).toEqual(new Set(['/owners/2', '/owners/4']));
      expect(await Promise.all(subs.map(pending))).toEqual([0, 0, 0, 0, 0, 0]);
    });
  });
});
