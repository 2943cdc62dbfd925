/**
 * What a full-resource notification carries of a resource written again or deleted between its event and its delivery:
 * the version that triggered the event (R4 subscription.html's rest-hook payload, the Backport IG's full-resource "the
 * resources involved in triggering the notification"; HAPI FHIR's default), and the notificationShape's includes as
 * that version references them. A topic's rest-hook, its `$events`, and an R4 criteria rest-hook with a payload, on
 * both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { signAccessToken } from '../../src/auth/tokens.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const TOPIC = 'http://example.org/topics/encounter-created';

/** A topic of Encounters created, whose notificationShape includes the subject. */
const topic: Json = {
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: TOPIC },
    { url: `${X5}status`, valueCode: 'active' },
    { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Encounter' }, { url: 'supportedInteraction', valueCode: 'create' }] },
    { url: `${X5}notificationShape`, extension: [{ url: 'resource', valueUri: 'Encounter' }, { url: 'include', valueString: 'Encounter:subject' }] },
  ],
};

const encounter = (patient: string) => ({
  resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: `Patient/${patient}` },
});

interface Received { method: string; path: string; body: string }

function receiver() {
  const got: Received[] = [];
  const server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    async fetch(req) {
      got.push({ method: req.method, path: new URL(req.url).pathname, body: await req.text() });
      return new Response(null, { status: 200 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/hook`, got, stop: () => server.stop(true) };
}

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`a full-resource notification of a resource written again or deleted before its delivery, on ${target.kind}`, () => {
    let t: TestApp;
    let token: string;
    let hook: ReturnType<typeof receiver>;
    const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    const json = async (res: Response | Promise<Response>) => (await (await res).json()) as Json;
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };
    const subscribe = async (body: Json) => {
      const res = await call('POST', 'Subscription', body);
      const out = await json(res);
      if (res.status !== 201) throw new Error(`subscription refused: ${res.status} ${JSON.stringify(out)}`);
      await drain();
      hook.got.length = 0;
      return out;
    };
    const off = async (s: Json) => {
      const current = await json(call('GET', `Subscription/${s.id}`));
      expect((await call('PUT', `Subscription/${s.id}`, { ...current, status: 'off' })).status).toBe(200);
    };
    /** The focus entry's resource (its id and version) and the fullUrls of the entries after it, with the additional context named. */
    const carried = (b: Json) => {
      const entries = b.entry as Json[];
      const status = entries[0]!.resource as Json;
      const event = ((status.parameter as Json[]).find((p) => p.name === 'notification-event')!.part as Json[]);
      const focus = entries[1]!.resource as Json | undefined;
      return {
        focus: focus && `${focus.resourceType}/${focus.id}/${(focus.meta as Json).versionId}/${((focus.subject as Json).reference as string)}`,
        after: entries.slice(2).map((e) => e.fullUrl),
        context: event.filter((p) => p.name === 'additional-context').map((p) => (p.valueReference as Json).reference),
      };
    };

    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({ store: db.open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
      hook = receiver();
      expect((await call('POST', 'Basic', topic)).status).toBe(201);
      for (const id of ['pa', 'pb']) expect((await call('PUT', `Patient/${id}`, { resourceType: 'Patient', id, name: [{ family: id }] })).status).toBe(201);
    }, 60_000);
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    /** A topic Subscription of full-resource rest-hook notifications. */
    const fullResourceTopic = () => subscribe({
      resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: TOPIC,
      channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'full-resource' }] } },
    });
    /** What a notification of Encounter `id`'s first version, whose subject is pa, carries (carried()). */
    const firstVersionForPa = (id: string) => ({ focus: `Encounter/${id}/1/Patient/pa`, after: [`${t.fhir()}/Patient/pa`], context: [`${t.fhir()}/Patient/pa`] });

    test('a topic notification carries the version created and the patient it names, though the Encounter was deleted before the delivery', async () => {
      const s = await fullResourceTopic();
      const e = await json(call('POST', 'Encounter', encounter('pa')));
      expect((await call('DELETE', `Encounter/${e.id}`)).status).toBe(200);
      await drain();
      await off(s);
      const bundles = hook.got.splice(0).map((r) => JSON.parse(r.body) as Json);
      expect(bundles.map(carried)).toEqual([firstVersionForPa(e.id)]);
      // $events tells the same of it.
      const events = await json(call('GET', `Subscription/${s.id}/$events?content=full-resource`));
      expect(carried(events)).toEqual(firstVersionForPa(e.id));
    });

    test("a topic notification carries the version created and its own subject, not the subject of the version written over it before the delivery", async () => {
      const s = await fullResourceTopic();
      const e = await json(call('POST', 'Encounter', encounter('pa')));
      expect((await call('PUT', `Encounter/${e.id}`, { ...encounter('pb'), id: e.id })).status).toBe(200);
      await drain();
      await off(s);
      const bundles = hook.got.splice(0).map((r) => JSON.parse(r.body) as Json);
      expect(bundles.map(carried)).toEqual([firstVersionForPa(e.id)]);
      const events = await json(call('GET', `Subscription/${s.id}/$events?content=full-resource`));
      expect(carried(events)).toEqual(firstVersionForPa(e.id));
    });

    test('an R4 criteria rest-hook with a payload is sent the version that matched, though the resource was deleted before the delivery', async () => {
      const s = await subscribe({
        resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: 'Encounter?subject=Patient/pb',
        channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json' },
      });
      const e = await json(call('POST', 'Encounter', encounter('pb')));
      expect((await call('DELETE', `Encounter/${e.id}`)).status).toBe(200);
      await drain();
      await off(s);
      const got = hook.got.splice(0);
      expect(got.map((r) => `${r.method} ${r.path}`)).toEqual([`PUT /hook/Encounter/${e.id}`]);
      expect(JSON.parse(got[0]!.body)).toMatchObject({ id: e.id, meta: { versionId: '1' }, subject: { reference: 'Patient/pb' } });
    });

    test("a patient-bound owner's notification of a record moved to another patient since includes no Provenance of it as it stands now", async () => {
      const OBS_TOPIC = 'http://example.org/topics/observation-written';
      expect((await call('POST', 'Basic', {
        resourceType: 'Basic',
        code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [
          { url: `${X5}url`, valueUri: OBS_TOPIC },
          { url: `${X5}status`, valueCode: 'active' },
          { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Observation' }, { url: 'supportedInteraction', valueCode: 'create' }, { url: 'supportedInteraction', valueCode: 'update' }] },
          { url: `${X5}notificationShape`, extension: [{ url: 'resource', valueUri: 'Observation' }, { url: 'revInclude', valueString: 'Provenance:target' }] },
        ],
      })).status).toBe(201);
      // The owner: an app's token bound to patient pa (its patient/ scopes), with user/ scopes for its Subscription and the topic.
      const app = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['patient/*.rs', 'user/Subscription.cruds', 'user/Basic.rs'] });
      const ownerToken = (await signAccessToken(t.keys, t.clock, t.config.baseUrl, {
        sub: app.client.clientId, aud: t.fhir(), client_id: app.client.clientId, scope: 'patient/*.rs user/Subscription.cruds user/Basic.rs', tenant: 't1', patient: 'pa',
      }, 3600)).token;
      const res = await t.request(`${t.fhir()}/Subscription`, fhirInit(ownerToken, 'POST', {
        resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: OBS_TOPIC,
        channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'full-resource' }] } },
      }));
      expect(res.status).toBe(201);
      const s = (await res.json()) as Json;
      await drain();
      hook.got.length = 0;
      const obs = (patient: string) => ({ resourceType: 'Observation', id: 'moved', status: 'final', code: { text: 'moved' }, subject: { reference: `Patient/${patient}` } });
      // pa's when written (notified to the owner), then moved to pb, and pb's Provenance of it written, before the delivery.
      expect((await call('PUT', 'Observation/moved', obs('pa'))).status).toBe(201);
      expect((await call('PUT', 'Observation/moved', obs('pb'))).status).toBe(200);
      const prov = await json(call('POST', 'Provenance', {
        resourceType: 'Provenance', target: [{ reference: 'Observation/moved' }], recorded: '2026-01-15T10:00:00Z',
        agent: [{ who: { reference: 'Patient/pb' } }], reason: [{ text: 'moved to pb' }],
      }));
      // The owner cannot read that Provenance as it stands: it is about pb's record.
      expect((await t.request(`${t.fhir()}/Provenance/${prov.id}`, fhirInit(ownerToken))).status).toBe(403);
      await drain();
      await off(s);
      const bundles = hook.got.splice(0).map((r) => JSON.parse(r.body) as Json);
      expect(bundles.length).toBe(1);
      const entries = (bundles[0]!.entry as Json[]).map((e) => e.fullUrl as string);
      expect(entries.some((u) => u.includes('Observation/moved'))).toBe(true);
      expect(entries.filter((u) => u.includes('Provenance/'))).toEqual([]);
    });
  });
}
