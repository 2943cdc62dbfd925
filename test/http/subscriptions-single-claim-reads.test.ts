/**
 * What a delivery round that claims one Subscription reads of its owner, on both databases (delivery.ts ownersOf): a
 * round of several read its owners' clients, users and chosen patients together, side by side before the deliveries
 * started; a round of one (what the loop claims as each place frees up) left its delivery to read them one after another
 * (its client, then its user, then the patient's check), each a wait of its own. Now one claim is read as several are:
 * the same four statements, the client and the user side by side.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { createUser } from '../../src/auth/users.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { PASSWORD, REDIRECT } from '../helpers/oauth.ts';

const SCOPES = ['user/*.rs'];

/** The waits one after another of `events` (`+call` as it starts, `-call` as it settles): starts with nothing in flight. */
function stages(events: string[]): number {
  let inFlight = 0;
  let n = 0;
  for (const e of events) {
    if (e.startsWith('+') && inFlight++ === 0) n++;
    if (e.startsWith('-')) inFlight--;
  }
  return n;
}

await eachStore((kind, fresh) => {
  describe(`a delivery round of one claimed Subscription (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    /** Store calls (repository.method) made while `counting`. */
    const calls: string[] = [];
    let counting = false;
    const counted = (store: Store): Store => {
      const wrap = (name: string, repo: object): object =>
        new Proxy(repo, {
          get: (target, key) => {
            const value = Reflect.get(target, key) as unknown;
            if (typeof value !== 'function') return value;
            return (...args: unknown[]) => {
              if (!counting) return (value as (...a: unknown[]) => unknown).apply(target, args);
              const call = `${name}.${String(key)}${key === 'search' ? `(${(args[1] as { type: string }).type})` : ''}`;
              calls.push(`+${call}`);
              const out = (value as (...a: unknown[]) => unknown).apply(target, args);
              return out instanceof Promise ? out.finally(() => calls.push(`-${call}`)) : (calls.push(`-${call}`), out);
            };
          },
        });
      const repos = new Map(['clients', 'users', 'resources'].map((n) => [n, wrap(n, (store as unknown as Record<string, object>)[n]!)]));
      return new Proxy(store, { get: (target, key) => repos.get(String(key)) ?? Reflect.get(target, key) });
    };
    const sent: string[] = [];
    const hook = (async (input: RequestInfo | URL, init?: RequestInit) => {
      sent.push(new URL(new Request(input, init).url).pathname);
      return new Response(null, { status: 200 });
    }) as typeof fetch;
    let sub = '';

    beforeAll(async () => {
      t = await createTestApp({ store: counted(await fresh()), resolveHost: async () => ['93.184.215.14'], fetch: hook });
      api = fhirClient(t, await t.token());
      const clientId = (await createClient(t.store, t.clock, { tenant: 't1', name: 'A', grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: SCOPES })).client.clientId;
      const userId = (await createUser(t.store, t.clock, { tenant: 't1', username: 'u0', password: PASSWORD })).id;
      await api.put200({ resourceType: 'Patient', id: 'p0', name: [{ family: 'Chosen' }] });
      const created = await api.post('Subscription', { resourceType: 'Subscription', status: 'requested', reason: 'one', criteria: 'Observation?code:text=watched', channel: { type: 'rest-hook', endpoint: 'https://hook.example/one' } });
      expect(created.status).toBe(201);
      sub = ((await created.json()) as Json).id as string;
      // Owned by the user's authority through client A, with patient p0 in context, as activation records it.
      await t.store.resources.write('t1', async (w) => {
        await w.ownSubscription(sub, JSON.stringify({ scopes: SCOPES, clientId, patient: 'p0', user: { id: userId, readAt: t.clock.now() } }), 'rest-hook');
      });
      await api.put200({ resourceType: 'ValueSet', id: 'vs-one', status: 'active' });
      for (let i = 0; i < 10 && (await t.app.subscriptions.runOnce()) > 0; i++);
      sent.length = 0;
    }, 120_000);
    afterAll(() => t.close());

    test("once the caches lapsed, its owner's client and user are read side by side, before the chosen patient, in the same statements", async () => {
      expect((await api.put('Observation/o-1', { resourceType: 'Observation', id: 'o-1', status: 'final', code: { text: 'watched' } })).status).toBe(201);
      expect((await t.store.subscriptions.pending('t1', sub, 10)).length).toBe(1);
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      calls.length = 0;
      counting = true;
      try {
        expect(await t.app.subscriptions.runOnce()).toBe(1);
      } finally {
        counting = false;
      }
      // As many statements as before: the Subscription, its owner's client and user, one search for the chosen patient.
      // (A client or user read by `get` or by `getMany`: one statement either way.)
      const made = calls.filter((c) => c.startsWith('+')).map((c) => c.slice(1).replace(/^(clients|users)\.getMany$/, '$1.get'));
      expect(made.sort()).toEqual(['clients.get', 'resources.read', 'resources.search(Patient)', 'users.get']);
      // One after another, these were four waits (client, then user, then the patient); the client and user side by side, three.
      expect(stages(calls)).toBe(3);
      expect(sent).toEqual(['/one']);
    });
  });
});
