/**
 * A topic-based Subscription compiled again when its client's registered scopes change (the hub's in-place path,
 * which a write takes without reading the whole set again): its topic's queryCriteria tests are resolved with the new
 * access too, as a load of the set resolves them. Here the trigger's `current` test is `location:below=Location/building`,
 * a walk of the Location hierarchy as the owner may search it; narrowed to active Locations, the suspended ward is
 * no longer below the building for it. Told through a real rest-hook receiver, on both databases.
 */
import { afterAll, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { updateClient } from '../../src/auth/client-lifecycle.ts';
import { createTestApp } from '../helpers/app.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { basic, post } from '../helpers/oauth.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const TOPIC = 'http://example.org/topics/encounter-in-building';
/** Past the app's client cache (5 s). */
const PAST_CACHES_MS = 6_000;

const topic = {
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: TOPIC },
    { url: `${X5}status`, valueCode: 'active' },
    {
      url: `${X5}resourceTrigger`,
      extension: [
        { url: 'resource', valueUri: 'Encounter' },
        { url: 'supportedInteraction', valueCode: 'create' },
        { url: 'queryCriteria', extension: [{ url: 'current', valueString: 'location:below=Location/building' }] },
      ],
    },
  ],
};

const location = (id: string, status: string, partOf?: string) => ({
  resourceType: 'Location', id, status, name: id, ...(partOf && { partOf: { reference: `Location/${partOf}` } }),
});

/** A test app with the topic, the Locations, a rest-hook receiver, and a client's active Subscription to the topic obtained with `scope`. */
async function setUp(target: (typeof targets)[number], scope: string) {
  const t = await createTestApp({ store: (await target.migrated()).open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
  const hook = receiver();
  const admin = fhirClient(t, await t.token());
  await admin.create(topic);
  for (const l of [location('building', 'active'), location('ward-a', 'active', 'building'), location('ward-s', 'suspended', 'building')]) await admin.put200(l);
  const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Encounter.rs', 'system/Location.rs', 'system/Subscription.cruds'] });
  const res = await post(t, { grant_type: 'client_credentials', scope }, { Authorization: basic(client.clientId, clientSecret!) });
  const api = fhirClient(t, ((await res.json()) as { access_token: string }).access_token);
  const sub = await api.create({
    resourceType: 'Subscription', status: 'requested', reason: 'in the building', criteria: TOPIC,
    channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
  });
  const drain = async () => {
    for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
  };
  await drain();
  hook.got.length = 0;
  return {
    t, hook, admin, clientId: client.clientId, drain,
    status: async () => ((await (await admin.get(`Subscription/${sub.id}`)).json()) as Json).status as string,
    /** The Encounters the receiver was told of since the last call, by id. */
    told: () => hook.got.splice(0).flatMap((body) => ((JSON.parse(body) as Json).entry as Json[]).slice(1).map((e) => (e.fullUrl as string).split('/').pop()!)).sort(),
    encounterAt: (id: string, at: string) =>
      admin.put200({ resourceType: 'Encounter', id, status: 'finished', class: { code: 'AMB' }, location: [{ location: { reference: `Location/${at}` } }] }),
    narrow: async () => {
      await updateClient(t.store, t.clock, client.clientId, { scopes: ['system/Encounter.rs', 'system/Location.rs?status=active', 'system/Subscription.cruds'] });
      t.clock.advance(PAST_CACHES_MS);
    },
    /** Makes the hub read the set again (a Basic, which it watches for topics, written). */
    reload: () => admin.create({ resourceType: 'Basic', code: { text: 'anything' } }),
  };
}

for (const target of targets) {
  test(`${target.kind}: a narrowed registration changes what a topic-based Subscription's queryCriteria pass, compiled again in place as a reload compiles it`, async () => {
    // Its token holds the filtered Location scope beside the whole one: the registration narrowed to it keeps that.
    const s = await setUp(target, 'system/Encounter.rs system/Location.rs system/Location.rs?status=active system/Subscription.cruds');
    try {
      // Every Location searchable: both wards are below the building.
      await s.encounterAt('e1', 'ward-s');
      await s.encounterAt('e2', 'ward-a');
      await s.drain();
      expect(s.told()).toEqual(['e1', 'e2']);

      // Narrowed to active Locations: the next write compiles it again in place (nothing it watches was written).
      await s.narrow();
      await s.encounterAt('e3', 'ward-s');
      await s.encounterAt('e4', 'ward-a');
      await s.encounterAt('e5', 'building');
      await s.drain();
      expect(s.told()).toEqual(['e4', 'e5']);

      // The set read again: the same.
      await s.reload();
      await s.encounterAt('e6', 'ward-s');
      await s.encounterAt('e7', 'ward-a');
      await s.drain();
      expect(s.told()).toEqual(['e7']);
      expect(await s.status()).toBe('active');
    } finally {
      s.hook.stop();
      await s.t.close();
    }
  }, 60_000);

  test(`${target.kind}: a narrowed registration that no longer lets its queryCriteria walk the Locations pauses a topic-based Subscription in place, as a reload does`, async () => {
    // Its token holds the whole Location scope alone: narrowed to the filtered one, it may search no Location.
    const s = await setUp(target, 'system/Encounter.rs system/Location.rs system/Subscription.cruds');
    try {
      // The set read with the Subscription as it was activated.
      await s.encounterAt('e0', 'ward-s');
      await s.drain();
      expect(s.told()).toEqual(['e0']);
      // Narrowed: the next write compiles it again in place, which its queryCriteria's walk of the Locations refuses.
      await s.narrow();
      await s.encounterAt('e1', 'ward-a');
      await s.encounterAt('e2', 'building');
      await s.drain();
      expect(s.told()).toEqual([]);
      expect(await s.status()).toBe('error');
    } finally {
      s.hook.stop();
      await s.t.close();
    }
  }, 60_000);
}
