/**
 * What is set `error` "for good" for an older release's grant (owner-reach.ts) is only that: a Subscription whose
 * recorded `patient/` scopes, with no patient in context, today keep to nothing what the filtered `user/` or `system/`
 * scopes beside them reached. A Subscription whose owner's grant is judged against what its topic reads now (an
 * operator's edit of the topic, adding a trigger of a type the app does not search) is not paused for good with words
 * that blame its grant; and one activated again by another owner between a delivery's claim and its read of the
 * Subscription is not judged by the grant of the owner the claim found. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createUser } from '../../src/auth/users.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { PASSWORD, REDIRECT } from '../helpers/oauth.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const category = (code: string) => [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code }] }];
const GRANT_ERROR = 'a patient/ scope with no patient in context grants nothing';
/** The `error` of a Subscription paused while its topic selects `types` its owner may not search. */
const TOPIC_PAUSE = (types: string) => `paused: its topic now selects ${types} resources, which its owner (the token that activated it) may not search; ` +
  'the server sets it back to the status it had once the topic selects only what its owner may search';

for (const target of targets) {
  describe(`Subscriptions judged by their owner's grant, on ${target.kind}`, () => {
    let t: TestApp;
    let admin: FhirClient;
    let app: string;
    let doc: string;
    let n = 0;

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      t = await createTestApp({ store, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      admin = fhirClient(t, await t.token());
      for (const id of ['p1', 'p2']) await admin.put200({ resourceType: 'Patient', id });
      app = (await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Ward app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT],
        scopes: ['openid', 'user/Observation.rs', 'user/Subscription.cruds'],
      })).client.clientId;
      doc = (await createUser(t.store, t.clock, { tenant: 't1', username: 'doc', password: PASSWORD, fhirUser: 'Practitioner/d-1' })).id;
    }, 60_000);
    afterAll(() => t.close());

    const observation = async (patient: string) => {
      const id = `o${n++}-${patient}`;
      t.clock.advance(1);
      await admin.put200({ resourceType: 'Observation', id, status: 'final', category: category('laboratory'), code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
      return id;
    };
    const shown = async (id: string) => {
      const sub = (await (await admin.get(`Subscription/${id}`)).json()) as Json;
      return [sub.status, sub.error];
    };
    const deliver = async () => {
      for (let i = 0; i < 5; i++) await t.app.subscriptions.runOnce();
    };
    /** A signed-in user's access through the ward app, as owner.ts records it (no patient/ scope, nothing an older release read otherwise). */
    const wardOwner = () => JSON.stringify({ scopes: ['openid', 'user/Observation.rs', 'user/Subscription.cruds'], clientId: app, user: { id: doc, readAt: t.clock.now() } });

    // A user's (signed in to the app), and the app's own (activated with its own token): neither is the registration's pause.
    const owners: [string, () => string][] = [
      ['a user', wardOwner],
      ["the app's own", () => JSON.stringify({ scopes: ['user/Observation.rs', 'user/Subscription.cruds'], clientId: app })],
    ];
    test.each(owners)("a topic the operator widens to a type the app does not search: %s Subscription is neither set error for an older release's grant nor paused for the app's registration: paused for its topic, naming the type, and set back and matched again once the topic is as it was", async (_, ownerOf) => {
      const url = `http://example.org/topics/widened-${ownerOf === wardOwner ? 'user' : 'app'}`;
      const trigger = (resource: string) => ({ url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: resource }] });
      const topic = {
        resourceType: 'Basic', id: `widened-topic-${ownerOf === wardOwner ? 'user' : 'app'}`, code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, trigger('Observation')],
      };
      await admin.put200(topic);
      const sub = await admin.create({
        resourceType: 'Subscription', status: 'requested', reason: 'ward', criteria: url,
        channel: {
          type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] },
          _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/subscription-channel-type', code: 'websocket' } }] },
        },
      });
      expect(sub.status).toBe('active');
      const id = sub.id as string;
      await t.store.resources.write('t1', (w) => w.ownSubscription(id, ownerOf(), 'websocket'));
      // The operator adds an Encounter trigger, which the ward app's scopes do not search.
      await admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter')] });
      await observation('p1');
      await observation('p2');
      const [status, error] = await shown(id);
      // Nothing of an older release's grant: no `error` blaming patient/ scopes it never had, set for good, nor the
      // registration's pause: paused for its topic, naming the type its owner may not search.
      expect(typeof error === 'string' && error.includes(GRANT_ERROR)).toBe(false);
      expect([status, error]).toEqual(['error', TOPIC_PAUSE('Encounter')]);
      // The topic as it was: set back to the status it had at the next write, and matched again.
      await admin.put200(topic);
      await observation('p1');
      expect(await shown(id)).toEqual(['active', undefined]);
    });

    test("a topic rest-hook one: paused for its topic while it selects a type the app's grant does not search, delivered nothing; set back, and delivered to, once the topic is as it was", async () => {
      const hook = receiver();
      const url = 'http://example.org/topics/widened-hook';
      const trigger = (resource: string) => ({ url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: resource }] });
      const topic = {
        resourceType: 'Basic', id: 'widened-topic-hook', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, trigger('Observation')],
      };
      const events = () => hook.got.map((b) => JSON.parse(b) as Json).filter((b) => JSON.stringify(b).includes('event-notification')).map((b) => JSON.stringify(b));
      const delivered = (id: string) => events().some((b) => b.includes(`Observation/${id}`));
      try {
        await admin.put200(topic);
        const sub = await admin.create({
          resourceType: 'Subscription', status: 'requested', reason: 'ward hook', criteria: url,
          channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
        });
        const id = sub.id as string;
        // Its handshake accepted, then taken over by the app's own token (as if it had activated it).
        await deliver();
        await t.store.resources.write('t1', (w) => w.ownSubscription(id, JSON.stringify({ scopes: ['user/Observation.rs', 'user/Subscription.cruds'], clientId: app }), 'rest-hook'));
        expect(await shown(id)).toEqual(['active', undefined]);
        const before = await observation('p1');
        await deliver();
        expect(delivered(before)).toBe(true);
        // The operator adds an Encounter trigger: paused at the next write, naming Encounter; nothing delivered meanwhile.
        await admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter')] });
        const widened = [await observation('p1'), await observation('p1')];
        await deliver();
        expect(await shown(id)).toEqual(['error', TOPIC_PAUSE('Encounter')]);
        // Widened further while paused: its `error` names both types at the next write.
        await admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter'), trigger('Procedure')] });
        widened.push(await observation('p1'));
        expect(await shown(id)).toEqual(['error', TOPIC_PAUSE('Encounter, Procedure')]);
        // The topic as it was: the next write's load sets it back to active, and what follows is delivered.
        await admin.put200(topic);
        await observation('p1');
        expect(await shown(id)).toEqual(['active', undefined]);
        const after = await observation('p1');
        await deliver();
        expect({ widened: widened.map(delivered), after: delivered(after) }).toEqual({ widened: [false, false, false], after: true });
      } finally {
        hook.stop();
      }
    });

    test("a user's under a widened topic whose sign-in has ended is turned off for that, not paused for its topic", async () => {
      const url = 'http://example.org/topics/widened-ended';
      const trigger = (resource: string) => ({ url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: resource }] });
      const topic = {
        resourceType: 'Basic', id: 'widened-topic-ended', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, trigger('Observation')],
      };
      await admin.put200(topic);
      const nurse = await createUser(t.store, t.clock, { tenant: 't1', username: 'nurse', password: PASSWORD, fhirUser: 'Practitioner/n-1' });
      const sub = await admin.create({
        resourceType: 'Subscription', status: 'requested', reason: 'ended', criteria: url,
        channel: {
          type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] },
          _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/subscription-channel-type', code: 'websocket' } }] },
        },
      });
      const id = sub.id as string;
      const owner = JSON.stringify({ scopes: ['openid', 'user/Observation.rs', 'user/Subscription.cruds'], clientId: app, user: { id: nurse.id, readAt: t.clock.now() } });
      await t.store.resources.write('t1', (w) => w.ownSubscription(id, owner, 'websocket'));
      // The topic widened, then the nurse disabled by a write `cinder` did not make (its own turn-off escaped), past
      // the user cache's life: the next write's load finds it refused for its topic, and its sign-in ended.
      await admin.put200({ ...topic, extension: [...topic.extension, trigger('Encounter')] });
      t.clock.advance(1);
      await t.store.users.update({ ...(await t.store.users.get('t1', nurse.id))!, disabled: true });
      t.clock.advance(10_000);
      await observation('p1');
      const [status, error] = await shown(id);
      expect([status, typeof error === 'string' && error.startsWith('paused: its topic')]).toEqual(['off', false]);
    });

    test('a pause for its topic written by a client with another endpoint is not set back by the server', async () => {
      const hook = receiver();
      const url = 'http://example.org/topics/forged';
      const trigger = (resource: string) => ({ url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: resource }] });
      const topic = {
        resourceType: 'Basic', id: 'forged-topic', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, trigger('Observation')],
      };
      try {
        await admin.put200(topic);
        const sub = await admin.create({
          resourceType: 'Subscription', status: 'requested', reason: 'forged', criteria: url,
          channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
        });
        const id = sub.id as string;
        await deliver();
        const current = (await (await admin.get(`Subscription/${id}`)).json()) as Json;
        // The pause's words with another endpoint: a write any writer of the Subscription may make, which activates nothing.
        await admin.put200({ ...current, status: 'error', error: TOPIC_PAUSE('Encounter'), channel: { ...current.channel, endpoint: `${hook.url}/other` } });
        await admin.put200(topic);
        await observation('p1');
        await observation('p1');
        expect(await shown(id)).toEqual(['error', TOPIC_PAUSE('Encounter')]);
      } finally {
        hook.stop();
      }
    });

    test('activated again by another owner between the claim and the delivery: not judged by the grant the claim found', async () => {
      const hook = receiver();
      const older = JSON.stringify({ scopes: ['openid', 'patient/Observation.rs', 'user/Observation.rs?category=laboratory'], clientId: app, user: { id: doc, readAt: t.clock.now() } });
      const created = await admin.create({ resourceType: 'Subscription', status: 'requested', reason: 'race', criteria: 'Observation?category=laboratory', channel: { type: 'rest-hook', endpoint: hook.url } });
      const id = created.id as string;
      const matched = await observation('p2');
      await t.store.resources.write('t1', async (w) => {
        await w.ownSubscription(id, older, 'rest-hook');
        await w.notify([{ subscriptionId: id, type: 'Observation', id: matched, versionId: 1, matchedFor: older }], t.clock.now());
      });
      const subscriptions = t.store.subscriptions;
      const claim = subscriptions.claim.bind(subscriptions);
      let raced = false;
      subscriptions.claim = async (...args: Parameters<typeof claim>) => {
        const list = await claim(...args);
        if (!raced && list.some((c) => c.id === id)) {
          raced = true;
          // The operator activates it again (its token may search it) after the claim read the older owner.
          const current = (await (await admin.get(`Subscription/${id}`)).json()) as Json;
          await admin.put200({ ...current, status: 'requested', reason: 'activated again' });
        }
        return list;
      };
      try {
        await deliver();
        expect(raced).toBe(true);
        const [status, error] = await shown(id);
        expect(typeof error === 'string' && error.includes(GRANT_ERROR)).toBe(false);
        expect(status).toBe('active');
      } finally {
        subscriptions.claim = claim;
        hook.stop();
      }
    });
  });
}
