/**
 * A topic notification's focus is judged when it is sent, for its reader as it stands: a delivery for the owner (its
 * client's registration as it is now, not as it was when the event was matched) and `$events` for its caller, by one
 * rule (topic-bundle.ts eventFocus), so the two tell the same of an event. A registration narrowed between the match
 * and the delivery: the event its owner may no longer read is sent with its number and time alone, never its resource.
 * A deletion whose deleted content was expunged since: named by both (the IG's id-only and full-resource notifications
 * name their focus), where `$events` withheld it while the delivery named it. An R4 criteria Subscription's payload
 * likewise: the version its owner may no longer read is not PUT. Through real rest-hook receivers, on both databases.
 */
import { afterAll, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { updateClient } from '../../src/auth/client-lifecycle.ts';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { craftToken, fhirClient, type Json } from '../helpers/fhir.ts';
import { basic, post } from '../helpers/oauth.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const TOPIC = 'http://example.org/topics/encounter-changes';
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
        { url: 'supportedInteraction', valueCode: 'update' },
        { url: 'supportedInteraction', valueCode: 'delete' },
      ],
    },
  ],
};

const encounter = (id: string, status: string) => ({ resourceType: 'Encounter', id, status, class: { code: 'AMB' } });

const subscription = (endpoint: string, content: string) => ({
  resourceType: 'Subscription', status: 'requested', reason: 'encounters', criteria: TOPIC,
  channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: content }] } },
});

/** Each notification-event of a notification Bundle (or `$events` answer): its number, its focus (or '-') and its entry. */
function events(bundle: Json): { n: string; focus: string; entry: string; resource?: string }[] {
  const entries = bundle.entry as Json[];
  const status = entries[0]!.resource as Json;
  const out: { n: string; focus: string; entry: string; resource?: string }[] = [];
  for (const p of (status.parameter as Json[]).filter((x) => x.name === 'notification-event')) {
    const parts = p.part as Json[];
    const n = parts.find((x) => x.name === 'event-number')!.valueString as string;
    const focus = (parts.find((x) => x.name === 'focus')?.valueReference as Json | undefined)?.reference as string | undefined;
    const e = focus === undefined ? undefined : entries.find((x) => x.fullUrl === focus);
    const rel = focus?.split('/').slice(-2).join('/') ?? '-';
    const resource = e?.resource as Json | undefined;
    out.push({
      n, focus: rel,
      entry: e ? `${(e.request as Json).method} ${(e.response as Json).status}` : '-',
      ...(resource && { resource: `${resource.resourceType}/${resource.id} ${String(resource.status)}` }),
    });
  }
  return out;
}

for (const target of targets) {
  test(`${target.kind}: a registration narrowed after the match: what the owner may no longer read is not delivered, nor listed by $events to it`, async () => {
    const t = await createTestApp({ store: (await target.migrated()).open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    const hook = receiver();
    try {
      const admin = fhirClient(t, await t.token());
      await admin.create(topic);
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Encounter.rs', 'system/Subscription.cruds'] });
      // The token holds the filtered scope beside the whole one: the registration narrowed to it keeps that.
      const res = await post(t, { grant_type: 'client_credentials', scope: 'system/Encounter.rs system/Encounter.rs?status=finished system/Subscription.cruds' }, { Authorization: basic(client.clientId, clientSecret!) });
      const token = ((await res.json()) as { access_token: string }).access_token;
      const api = fhirClient(t, token);
      const sub = await api.create(subscription(hook.url, 'full-resource'));
      const drain = async () => {
        for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
      };
      await drain();
      hook.got.length = 0;

      // Both matched with the registration as it was (every Encounter), and waiting.
      await admin.put200(encounter('e1', 'planned'));
      await admin.put200(encounter('e2', 'finished'));
      // Narrowed to finished Encounters before they are sent.
      await updateClient(t.store, t.clock, client.clientId, { scopes: ['system/Encounter.rs?status=finished', 'system/Subscription.cruds'] });
      t.clock.advance(PAST_CACHES_MS);
      await drain();
      const bodies = hook.got.splice(0).map((body) => JSON.parse(body) as Json);
      const sent = bodies.flatMap(events);
      expect(sent).toEqual([
        { n: '1', focus: '-', entry: '-' },
        { n: '2', focus: 'Encounter/e2', entry: 'POST 201', resource: 'Encounter/e2 finished' },
      ]);
      // The withheld event still has its entry (the IG: one per event's resource), naming nothing: the $events call
      // listing it alone, answered 403 with an outcome saying so; no fullUrl, type, id or interaction.
      const withheld = (bodies[0]!.entry as Json[]).slice(1);
      expect(withheld).toEqual([{
        request: { method: 'GET', url: `Subscription/${String(sub.id)}/$events?eventsSinceNumber=1&eventsUntilNumber=1` },
        response: { status: '403', outcome: expect.objectContaining({ resourceType: 'OperationOutcome', issue: [expect.objectContaining({ severity: 'warning', code: 'suppressed' })] }) },
      }]);
      expect(JSON.stringify(withheld)).not.toContain('Encounter');
      // $events tells a token of the narrowed scopes the same.
      const now = await craftToken(t, 'system/Encounter.rs?status=finished system/Subscription.cruds');
      const listed = await t.request(`${t.fhir()}/Subscription/${sub.id}/$events`, fhirInit(now));
      expect({ status: listed.status, body: listed.status === 200 ? undefined : await listed.clone().text() }).toEqual({ status: 200, body: undefined });
      expect(events((await listed.json()) as Json)).toEqual(sent);
      expect(((await (await admin.get(`Subscription/${sub.id}`)).json()) as Json).status).toBe('active');
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: an R4 criteria Subscription with a payload: a version its owner's narrowed registration no longer reads is not PUT`, async () => {
    const t = await createTestApp({ store: (await target.migrated()).open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    const puts: string[] = [];
    const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: async (req) => (puts.push(`${req.method} ${new URL(req.url).pathname} ${(JSON.parse(await req.text()) as Json).status}`), new Response(null, { status: 200 })) });
    try {
      const admin = fhirClient(t, await t.token());
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Encounter.rs', 'system/Subscription.cruds'] });
      const token = await t.token('system/Encounter.rs system/Encounter.rs?status=finished system/Subscription.cruds', client.clientId, clientSecret!);
      await fhirClient(t, token).create({
        resourceType: 'Subscription', status: 'requested', reason: 'encounters', criteria: 'Encounter?',
        channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${server.port}/r4`, payload: 'application/fhir+json' },
      });
      await admin.put200(encounter('e1', 'planned'));
      await admin.put200(encounter('e2', 'finished'));
      await updateClient(t.store, t.clock, client.clientId, { scopes: ['system/Encounter.rs?status=finished', 'system/Subscription.cruds'] });
      t.clock.advance(PAST_CACHES_MS);
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
      expect(puts).toEqual(['PUT /r4/Encounter/e2 finished']);
      expect(await t.store.subscriptions.waiting()).toBe(0);
    } finally {
      server.stop(true);
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: a deletion whose deleted versions were expunged is named alike by the delivery and by $events`, async () => {
    const t = await createTestApp({ store: (await target.migrated()).open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true', CINDER_EXPUNGE: 'on' } });
    const hook = receiver();
    try {
      const token = await t.token();
      const admin = fhirClient(t, token);
      await admin.create(topic);
      const sub = await admin.create(subscription(hook.url, 'id-only'));
      const drain = async () => {
        for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
      };
      await drain();
      hook.got.length = 0;
      await admin.put200(encounter('e1', 'planned'));
      expect((await t.request(`${t.fhir()}/Encounter/e1`, fhirInit(token, 'DELETE'))).status).toBe(200);
      // The versions before the deletion expunged, the deletion kept: the events of those versions go, the deletion's stays.
      const expunge = await t.request(`${t.fhir()}/Encounter/e1/$expunge`, fhirInit(token, 'POST', { resourceType: 'Parameters', parameter: [{ name: 'expungePreviousVersions', valueBoolean: true }] }));
      expect(expunge.status).toBe(200);
      await drain();
      const sent = hook.got.splice(0).flatMap((body) => events(JSON.parse(body) as Json));
      expect(sent).toEqual([{ n: '2', focus: 'Encounter/e1', entry: 'DELETE 204' }]);
      const listed = await t.request(`${t.fhir()}/Subscription/${sub.id}/$events`, fhirInit(token));
      expect(listed.status).toBe(200);
      expect(events((await listed.json()) as Json)).toEqual(sent);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);
}
