/**
 * What a write costs a tenant with many Subscriptions activated with user tokens that carry a chosen patient, on both
 * databases (hub.ts notifying, src/auth/patient-held.ts): once the 5 s cache of those checks lapsed, a write checked
 * each Subscription's patient with a search of its own, one after another. Now the choices of one user are searched
 * together (CHOOSABLE_BATCH a search), the users side by side; and each Subscription is still matched for nothing once
 * its user may no longer have its patient in context.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { CHOOSABLE_BATCH } from '../../src/auth/patient-picker.ts';
import { createUser } from '../../src/auth/users.ts';
import type { ResourceRepo, Store } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { PASSWORD, REDIRECT } from '../helpers/oauth.ts';

/** Subscriptions of one Practitioner user, each with a patient of its own: more than one batch. */
const SUBS = CHOOSABLE_BATCH + 30;
const SCOPES = ['launch/patient', 'patient/*.rs'];

await eachStore((kind, fresh) => {
  describe(`a write with many Subscriptions of users' chosen patients (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let clientId: string;
    let docId: string;
    let guardianId: string;
    const subs: string[] = [];
    let guarded: string;
    /** The store searches of Patient run while `counting` (the patient checks search Patient by `_id`). */
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
    const SUBSCRIPTION = { resourceType: 'Subscription', status: 'requested', reason: 'choices', criteria: 'Observation?code:text=watched', channel: { type: 'rest-hook', endpoint: 'https://hook.example/choices' } };
    /** Subscriptions on Observations (one transaction), each activated with a token of its user with its patient in context. */
    const subscribe = async (owners: { userId: string; patient: string }[]) => {
      const entry = owners.map(() => ({ resource: SUBSCRIPTION, request: { method: 'POST', url: 'Subscription' } }));
      const res = await t.request(t.fhir(), {
        method: 'POST', headers: { Authorization: `Bearer ${await t.token()}`, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry }),
      });
      expect(res.status).toBe(200);
      const ids = ((await res.json()) as Json).entry.map((e: Json) => e.resource.id) as string[];
      await t.store.resources.write('t1', async (w) => {
        for (const [i, id] of ids.entries()) {
          const { userId, patient } = owners[i]!;
          await w.ownSubscription(id, JSON.stringify({ scopes: SCOPES, clientId, patient, user: { id: userId, readAt: t.clock.now() } }), 'rest-hook');
        }
      });
      // The hub reads its set of active Subscriptions again after a write of a type it watches (hub.ts WATCHED_TYPES).
      await api.put200({ resourceType: 'ValueSet', id: 'vs-owners', status: 'active' });
      return ids;
    };
    const pending = async (id: string) => (await t.store.subscriptions.pending('t1', id, 100)).map((n) => n.id);
    const observe = (id: string, patient: string) =>
      api.put(`Observation/${id}`, { resourceType: 'Observation', id, status: 'final', code: { text: 'watched' }, subject: { reference: `Patient/${patient}` } });

    beforeAll(async () => {
      t = await createTestApp({ store: listing(await fresh()) });
      api = fhirClient(t, await t.token());
      const client = await createClient(t.store, t.clock, { tenant: 't1', name: 'App', grants: ['authorization_code'], redirectUris: [REDIRECT], scopes: SCOPES });
      clientId = client.client.clientId;
      docId = (await createUser(t.store, t.clock, { tenant: 't1', username: 'doc', password: PASSWORD, fhirUser: 'Practitioner/d-1' })).id;
      guardianId = (await createUser(t.store, t.clock, { tenant: 't1', username: 'rel', password: PASSWORD, fhirUser: 'RelatedPerson/rp-1' })).id;
      const entry = Array.from({ length: SUBS }, (_, i) => ({
        resource: { resourceType: 'Patient', id: `p-${i}`, name: [{ family: `F${i}` }] }, request: { method: 'PUT', url: `Patient/p-${i}` },
      }));
      const res = await t.request(t.fhir(), {
        method: 'POST', headers: { Authorization: `Bearer ${await t.token()}`, 'Content-Type': 'application/fhir+json' },
        body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry }),
      });
      expect(res.status).toBe(200);
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-9' } });
      const ids = await subscribe([...Array.from({ length: SUBS }, (_, i) => ({ userId: docId, patient: `p-${i}` })), { userId: guardianId, patient: 'p-9' }]);
      guarded = ids.pop()!;
      subs.push(...ids);
    }, 120_000);
    afterAll(() => t.close());

    test("a write once the checks' cache lapsed searches each user's patients together, and notifies the Subscription of the patient written", async () => {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      patientSearches = 0;
      counting = true;
      try {
        expect((await observe('o-5', 'p-5')).status).toBe(201);
      } finally {
        counting = false;
      }
      // Before: one search per Subscription (SUBS + 1); now one per user and CHOOSABLE_BATCH patients.
      expect(patientSearches).toBe(Math.ceil(SUBS / CHOOSABLE_BATCH) + 1);
      expect(await pending(subs[5]!)).toEqual(['o-5']);
      expect(await pending(subs[6]!)).toEqual([]);
      expect(await pending(guarded)).toEqual([]);
    });

    test("a Subscription whose user may no longer have its patient is matched for nothing, its neighbours' still are", async () => {
      expect((await observe('o-9a', 'p-9')).status).toBe(201);
      expect(await pending(guarded)).toEqual(['o-9a']);
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-8' } });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect((await observe('o-9b', 'p-9')).status).toBe(201);
      expect(await pending(guarded)).toEqual(['o-9a']);
      expect(await pending(subs[9]!)).toEqual(['o-9a', 'o-9b']);
      // A deleted Patient is no patient the Practitioner may have in context either.
      expect((await api.del('Patient/p-12')).status).toBe(200);
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect((await observe('o-12', 'p-12')).status).toBe(201);
      expect(await pending(subs[12]!)).toEqual([]);
      expect((await observe('o-13', 'p-13')).status).toBe(201);
      expect(await pending(subs[13]!)).toEqual(['o-13']);
    });
  });
});
