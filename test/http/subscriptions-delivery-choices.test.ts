/**
 * What a delivery round reads of the patients in context its Subscriptions' owners chose, on both databases (delivery.ts
 * ownersOf, src/auth/patient-held.ts): once the 5 s cache of those checks lapsed, each delivery searched its owner's
 * patient on its own, one search per Subscription; now the round's choices are judged together before its deliveries
 * start, one search for the users of one app whose reach is the same (staff: any Patient of the tenant). One whose
 * patient may no longer be in context (the Patient deleted) is still sent nothing, and what waited for it is dropped.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { createUser } from '../../src/auth/users.ts';
import type { ResourceRepo, Store } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { PASSWORD, REDIRECT } from '../helpers/oauth.ts';

/** Staff users, each owning one Subscription with a patient of their choosing, through two clients. */
const USERS = 6;
const SCOPES = ['user/*.rs'];

await eachStore((kind, fresh) => {
  describe(`a delivery round's checks of its owners' chosen patients (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clientIds: string[] = [];
    const subs: string[] = [];
    /** The store searches of Patient run while `counting` (the checks search Patient by `_id`). */
    let patientSearches = 0;
    let counting = false;
    const listing = (store: Store): Store => {
      const resources: ResourceRepo = Object.create(store.resources);
      resources.search = (tenant, q) => {
        if (counting && q.type === 'Patient') patientSearches++;
        return store.resources.search(tenant, q);
      };
      return new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) });
    };
    const sent: string[] = [];
    const hook = (async (input: RequestInfo | URL, init?: RequestInit) => {
      sent.push(new URL(new Request(input, init).url).pathname);
      return new Response(null, { status: 200 });
    }) as typeof fetch;
    const pending = async (id: string) => (await t.store.subscriptions.pending('t1', id, 100)).length;

    beforeAll(async () => {
      t = await createTestApp({ store: listing(await fresh()), resolveHost: async () => ['93.184.215.14'], fetch: hook });
      api = fhirClient(t, await t.token());
      for (const name of ['A', 'B']) {
        clientIds.push((await createClient(t.store, t.clock, { tenant: 't1', name, grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: SCOPES })).client.clientId);
      }
      const userIds: string[] = [];
      for (let i = 0; i < USERS; i++) {
        userIds.push((await createUser(t.store, t.clock, { tenant: 't1', username: `u${i}`, password: PASSWORD })).id);
        await api.put200({ resourceType: 'Patient', id: `p${i}`, name: [{ family: `Chosen${i}` }] });
      }
      const SUBSCRIPTION = { resourceType: 'Subscription', status: 'requested', reason: 'choices', criteria: 'Observation?code:text=watched', channel: { type: 'rest-hook', endpoint: 'https://hook.example/choices' } };
      const res = await t.request(t.fhir(), {
        method: 'POST', headers: { Authorization: `Bearer ${await t.token()}`, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: userIds.map((_, i) => ({ resource: { ...SUBSCRIPTION, channel: { ...SUBSCRIPTION.channel, endpoint: `${SUBSCRIPTION.channel.endpoint}/${i}` } }, request: { method: 'POST', url: 'Subscription' } })) }),
      });
      expect(res.status).toBe(200);
      subs.push(...((await res.json()) as Json).entry.map((e: Json) => e.resource.id as string));
      // Each owned by its user's authority through client A or B, with patient p<i> in context, as activation records it.
      await t.store.resources.write('t1', async (w) => {
        for (const [i, id] of subs.entries()) {
          const owner = { scopes: SCOPES, clientId: clientIds[i % 2]!, patient: `p${i}`, user: { id: userIds[i]!, readAt: t.clock.now() } };
          await w.ownSubscription(id, JSON.stringify(owner), 'rest-hook');
        }
      });
      await api.put200({ resourceType: 'ValueSet', id: 'vs-choices', status: 'active' });
      // The handshakes, and the Subscriptions activated.
      for (let i = 0; i < 10 && (await t.app.subscriptions.runOnce()) > 0; i++);
      sent.length = 0;
    }, 120_000);
    afterAll(() => t.close());

    test('once the checks lapsed, a round searches its owners\' patients once per app, not once per Subscription; a patient no longer there drops what waited', async () => {
      expect((await api.put('Observation/o-1', { resourceType: 'Observation', id: 'o-1', status: 'final', code: { text: 'watched' } })).status).toBe(201);
      expect(await Promise.all(subs.map(pending))).toEqual([1, 1, 1, 1, 1, 1]);
      // p5 deleted after its notification was recorded: its user may no longer have it in context.
      expect((await api.del('Patient/p5')).status).toBe(200);
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      patientSearches = 0;
      counting = true;
      try {
        expect(await t.app.subscriptions.runOnce()).toBe(USERS);
      } finally {
        counting = false;
      }
      // One search for the users of client A (p0, p2, p4), one for those of client B (p1, p3, p5).
      expect(patientSearches).toBe(2);
      expect(new Set(sent)).toEqual(new Set([0, 1, 2, 3, 4].map((i) => `/choices/${i}`)));
      expect(await Promise.all(subs.map(pending))).toEqual([0, 0, 0, 0, 0, 0]);
    });
  });
});
