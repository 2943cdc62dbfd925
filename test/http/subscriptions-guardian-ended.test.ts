/**
 * A Subscription activated with a guardian's token (a RelatedPerson user, the child chosen as the patient in context):
 * once their record no longer names the child, what was recorded for it before is not sent (a rest-hook's is dropped),
 * as nothing more is recorded for it (the hub) and their token reads nothing (the FHIR gate). On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { CLIENT_CACHE_TTL_MS } from '../../src/auth/client-cache.ts';
import { createUser } from '../../src/auth/users.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`a guardian's Subscription after the relationship ended, on ${target.kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const sent: string[] = [];
    const fakeFetch = (async (_url: string | URL | Request, init?: RequestInit) => {
      sent.push(String(init?.body ?? ''));
      return new Response(null, { status: 200 });
    }) as typeof fetch;

    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      t = await createTestApp({ store, fetch: fakeFetch, resolveHost: async () => ['198.51.100.7'] });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p-ann' });
      await api.put200({ resourceType: 'Patient', id: 'p-cat' });
    });
    afterAll(() => t.close());

    test('what was recorded before is dropped, not delivered; named again, what is recorded then is delivered', async () => {
      const app = await createClient(t.store, t.clock, { tenant: 't1', grants: ['authorization_code'], redirectUris: ['https://app.example/cb'], scopes: ['launch/patient', 'patient/*.rs'] });
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-ann' } });
      const guardian = await createUser(t.store, t.clock, { tenant: 't1', username: 'guardian', password: 'correct horse battery', fhirUser: 'RelatedPerson/rp-1' });
      const sub = await api.create({ resourceType: 'Subscription', status: 'requested', reason: 'guardian', criteria: 'Observation?code:text=guarded', channel: { type: 'rest-hook', endpoint: 'https://hook.example/guardian', payload: 'application/fhir+json' } });
      // Owned as activating it with the guardian's token records it (owner.ts): their sign-in, the app, the chosen patient.
      const owner = JSON.stringify({ scopes: ['launch/patient', 'patient/*.rs'], clientId: app.client.clientId, patient: 'p-ann', user: { id: guardian.id, readAt: t.clock.now() } });
      await t.store.resources.write('t1', (w) => w.ownSubscription(sub.id as string, owner, 'rest-hook'));
      const waiting = async () => (await t.store.subscriptions.pending('t1', sub.id as string, 100)).map((x) => x.id);
      const observe = (id: string) => api.put200({ resourceType: 'Observation', id, status: 'final', code: { text: 'guarded' }, subject: { reference: 'Patient/p-ann' } });
      const delivered = () => sent.filter((body) => body.includes('"guarded')).map((body) => (JSON.parse(body) as Json).id as string);
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      await observe('before-end');
      expect(await waiting()).toEqual(['before-end']);
      // The relationship ends before the delivery loop comes round.
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-cat' } });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      await t.app.subscriptions.runOnce();
      expect(delivered()).toEqual([]);
      expect(await waiting()).toEqual([]);
      expect(((await (await api.get(`Subscription/${sub.id}`)).json()) as Json).status).toBe('active');
      // Named again: what is recorded from then on is delivered.
      await api.put200({ resourceType: 'RelatedPerson', id: 'rp-1', patient: { reference: 'Patient/p-ann' } });
      t.clock.advance(CLIENT_CACHE_TTL_MS + 1);
      await observe('after-renewal');
      await t.app.subscriptions.runOnce();
      expect(delivered()).toEqual(['after-renewal']);
    });
  });
}
