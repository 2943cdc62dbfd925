/**
 * What a write costs a tenant with many Subscriptions activated with user tokens that carry a chosen patient, on both
 * databases (hub.ts notifying, src/auth/patient-held.ts): once the 5 s cache of those checks lapsed, a write checked
 * each Subscription's patient with a search of its own, one after another; then the choices of one user were searched
 * together (CHOOSABLE_BATCH a search), the users side by side, of every such Subscription whatever the write matched.
 * Now only the Subscriptions the write matched are asked (outside its transaction, which then runs again: hub.ts
 * OwnersToJudge); and each Subscription is still matched for nothing once its user may no longer have its patient in context.
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
      // The endpoint's host answered at once with a public address: the system resolver took about 0.2 s for each of the
      // transaction's 131 Subscriptions here (hook.example does not resolve), most of the file's time.
      t = await createTestApp({ store: listing(await fresh()), resolveHost: async () => ['93.184.215.14'] });
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

    /** The searches of Patient a write of `observe(id, patient)` ran, `code` its code's text. */
    const searchesOf = async (id: string, patient: string, code = 'watched') => {
      patientSearches = 0;
      counting = true;
      try {
        const res = await api.put(`Observation/${id}`, { resourceType: 'Observation', id, status: 'final', code: { text: code }, subject: { reference: `Patient/${patient}` } });
        expect(res.status).toBe(201);
      } finally {
        counting = false;
      }
      return patientSearches;
    };

    test("a write matching no Subscription, once the checks' cache lapsed, searches no user's patients", async () => {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      // Before: every Subscription's choice judged whatever the write matched (one search per user and CHOOSABLE_BATCH patients).
      expect(await searchesOf('o-none', 'p-5', 'ignored')).toBe(0);
      // Its own subject's reach alone: the others' patients are not searched either.
      expect(await searchesOf('o-5', 'p-5')).toBe(1);
      expect(await pending(subs[5]!)).toEqual(['o-5']);
      for (const id of [...subs, guarded]) expect(await pending(id)).toEqual(id === subs[5] ? ['o-5'] : []);
      // Within the cache: nothing searched, and the Subscription still notified.
      expect(await searchesOf('o-5b', 'p-5')).toBe(0);
      expect(await pending(subs[5]!)).toEqual(['o-5', 'o-5b']);
    });

    test("a write once the checks' cache lapsed searches the patients of the Subscriptions it matches, and notifies the Subscription of the patient written", async () => {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      expect(await searchesOf('o-6', 'p-6')).toBe(1);
      expect(await pending(subs[6]!)).toEqual(['o-6']);
      expect(await pending(subs[5]!)).toEqual(['o-5', 'o-5b']);
      expect(await pending(subs[7]!)).toEqual([]);
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

    test("a transaction matching every Subscription, once the checks' cache lapsed, searches each user's patients together", async () => {
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      // Every patient's but the deleted p-12's.
      const entry = Array.from({ length: SUBS }, (_, i) => i).filter((i) => i !== 12).map((i) => ({
        resource: { resourceType: 'Observation', id: `all-${i}`, status: 'final', code: { text: 'watched' }, subject: { reference: `Patient/p-${i}` } },
        request: { method: 'PUT', url: `Observation/all-${i}` },
      }));
      patientSearches = 0;
      counting = true;
      try {
        const res = await t.request(t.fhir(), {
          method: 'POST', headers: { Authorization: `Bearer ${await t.token()}`, 'Content-Type': 'application/fhir+json' },
          body: JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry }),
        });
        expect(res.status).toBe(200);
      } finally {
        counting = false;
      }
      // One search per user and CHOOSABLE_BATCH patients (the Practitioner's, and the guardian's p-9), not one per Subscription.
      expect(patientSearches).toBe(Math.ceil((SUBS - 1) / CHOOSABLE_BATCH) + 1);
      expect(await pending(subs[20]!)).toEqual(['all-20']);
      expect(await pending(subs[9]!)).toEqual(['o-9a', 'o-9b', 'all-9']);
      // The guardian's record no longer names p-9 (above).
      expect(await pending(guarded)).toEqual(['o-9a']);
    });
  });
});
