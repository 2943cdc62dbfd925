/**
 * A Subscription paused for its topic is set back once its topic is as it was, however many other
 * Subscriptions of the tenant are in `error`, and the set's reloads read only those paused so, not every one in
 * `error`, and set off instead while its tenant holds the 1,000 active ones the hub matches (through `app.request()`,
 * on both databases).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createBatchWriter, DEFAULT_BATCH_LIMITS } from '../../src/fhir/import/batches.ts';
import type { ResourceRepo } from '../../src/store/types.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';

// Subscriptions in `error` pile up (a rest-hook whose deliveries fail is set so, and stays): the set's load read the
// first 1,000 of them in id order alone, so one paused for its topic past them was never set back.
for (const target of targets) {
  describe(`a Subscription paused for its topic behind 1,000 others in error, on ${target.kind}`, () => {
    let t: TestApp;
    /** Subscription rows the app's searches have read. */
    let subscriptionRows = 0;
    beforeAll(async () => {
      const store = (await target.migrated()).open();
      await store.migrate();
      const resources: ResourceRepo = Object.create(store.resources);
      resources.search = async (tenant, query) => {
        const rows = await store.resources.search(tenant, query);
        if (query.type === 'Subscription') subscriptionRows += rows.length;
        return rows;
      };
      const counted = new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) });
      t = await createTestApp({ store: counted, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    }, 120_000);
    afterAll(() => t.close());

    test('is set back to active once its topic is as it was', async () => {
      const admin = fhirClient(t, await t.token());
      const writer = createBatchWriter({ store: t.store, clock: t.clock }, 't1', DEFAULT_BATCH_LIMITS, () => undefined);
      for (let i = 0; i < 1_001; i++) {
        await writer.addPrepared([writer.prepare({
          resourceType: 'Subscription', id: `a-${String(i).padStart(4, '0')}`, status: 'error', reason: 'failed', criteria: 'Observation?code=x', error: '5 deliveries failed in a row',
          channel: { type: 'rest-hook', endpoint: 'https://hook.example/x', payload: 'application/fhir+json' },
        })]);
      }
      await writer.drain();
      const url = 'http://example.org/topics/widened-many';
      const trigger = (resource: string) => ({ url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: resource }] });
      const topic = {
        resourceType: 'Basic', id: 'widened-many', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, trigger('Observation')],
      };
      await admin.put200(topic);
      const sub = await admin.put200({
        resourceType: 'Subscription', id: 'z-paused', status: 'requested', reason: 'ward', criteria: url,
        channel: {
          type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] },
          _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/subscription-channel-type', code: 'websocket' } }] },
        },
      });
      expect(sub.status).toBe('active');
      // Taken over by an app's own token, as if it had activated it: the app searches Observations and no Encounters.
      const app = (await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Ward app', grants: ['client_credentials'], scopes: ['user/Observation.rs', 'user/Subscription.cruds'],
      })).client.clientId;
      await t.store.resources.write('t1', (w) => w.ownSubscription('z-paused', JSON.stringify({ scopes: ['user/Observation.rs', 'user/Subscription.cruds'], clientId: app }), 'websocket'));
      let n = 0;
      const observation = async () => {
        t.clock.advance(1);
        await admin.put200({ resourceType: 'Observation', id: `o-${n++}`, status: 'final', code: { text: 'x' } });
      };
      const shown = async () => {
        const s = (await (await admin.get('Subscription/z-paused')).json()) as Json;
        return [s.status, typeof s.error === 'string' ? s.error.slice(0, 40) : s.error];
      };
      await admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter')] });
      await observation();
      expect(await shown()).toEqual(['error', 'paused: its topic now selects Encounter ']);
      await admin.put200(topic);
      await observation();
      expect(await shown()).toEqual(['active', undefined]);

      // Paused again: each reload of the set (here after a write of a Basic, any Basic) reads the one paused for its
      // topic among those in error (an indexed search by its words), not the 1,001 failed ones.
      await admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter')] });
      await observation();
      expect(await shown()).toEqual(['error', 'paused: its topic now selects Encounter ']);
      await admin.put200({ resourceType: 'Basic', id: 'not-a-topic', code: { text: 'x' } });
      subscriptionRows = 0;
      await observation();
      expect(subscriptionRows).toBeLessThanOrEqual(2);
    }, 120_000);

    test("is set off, not back, once its tenant holds the 1,000 active Subscriptions the hub matches", async () => {
      // A tenant of its own: the paused one, then 1,000 others activated while it was paused.
      const admin = fhirClient(t, await t.tokenFor('bound', ['system/*.*']), 'bound');
      const url = 'http://example.org/topics/widened-bound';
      const trigger = (resource: string) => ({ url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: resource }] });
      const topic = {
        resourceType: 'Basic', id: 'widened-bound', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, trigger('Observation')],
      };
      await admin.put200(topic);
      const sub = await admin.put200({
        resourceType: 'Subscription', id: 'paused', status: 'requested', reason: 'ward', criteria: url,
        channel: {
          type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] },
          _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/subscription-channel-type', code: 'websocket' } }] },
        },
      });
      expect(sub.status).toBe('active');
      const app = (await createClient(t.store, t.clock, {
        tenant: 'bound', name: 'Ward app', grants: ['client_credentials'], scopes: ['user/Observation.rs', 'user/Subscription.cruds'],
      })).client.clientId;
      await t.store.resources.write('bound', (w) => w.ownSubscription('paused', JSON.stringify({ scopes: ['user/Observation.rs', 'user/Subscription.cruds'], clientId: app }), 'websocket'));
      let n = 0;
      const observation = async () => {
        t.clock.advance(1);
        await admin.put200({ resourceType: 'Observation', id: `o-${n++}`, status: 'final', code: { text: 'x' } });
      };
      const shown = async () => {
        const s = (await (await admin.get('Subscription/paused')).json()) as Json;
        return [s.status, typeof s.error === 'string' ? s.error.slice(0, 60) : s.error];
      };
      await admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter')] });
      await observation();
      expect(await shown()).toEqual(['error', 'paused: its topic now selects Encounter resources, which its']);
      const writer = createBatchWriter({ store: t.store, clock: t.clock }, 'bound', DEFAULT_BATCH_LIMITS, () => undefined);
      for (let i = 0; i < 1_000; i++) {
        await writer.addPrepared([writer.prepare({
          resourceType: 'Subscription', id: `w-${String(i).padStart(4, '0')}`, status: 'active', reason: 'fill', criteria: `Observation?code=w${i}`,
          channel: { type: 'websocket' },
        })]);
      }
      await writer.drain();
      const active = async () => ((await (await admin.get('Subscription?status=active,requested&_summary=count')).json()) as Json).total;
      expect(await active()).toBe(1_000);
      // Its topic as it was: the next write would set it back, the 1,001st; it is set off, naming the bound.
      await admin.put200(topic);
      await observation();
      await observation();
      const off = (await (await admin.get('Subscription/paused')).json()) as Json;
      expect([off.status, off.error]).toEqual(['off', expect.stringContaining('turned off: the tenant has 1000 active Subscriptions, the most Cinder matches')]);
      expect(await active()).toBe(1_000);
      // One set off since: activated again by its app's own hand, as any other.
      expect((await admin.del('Subscription/w-0000')).status).toBe(200);
      const again = (await (await admin.get('Subscription/paused')).json()) as Json;
      const { error: _error, ...rest } = again;
      expect((await admin.put200({ ...rest, status: 'requested' })).status).toBe('active');
    }, 120_000);
  });
}
