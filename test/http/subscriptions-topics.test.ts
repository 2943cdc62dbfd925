/**
 * Topic-based Subscriptions on R4 (HL7 Subscriptions R5 Backport IG 1.1.0): SubscriptionTopics stored as
 * Basic and checked as they are written, topic Subscriptions activated against their topic's canFilterBy,
 * create/update/delete events under the triggers' queryCriteria delivered as notification Bundles to a
 * real receiver (payload content empty, id-only, full-resource with the notificationShape's includes),
 * the handshake, heartbeats, event numbers kept by the database (another app on it goes on counting), the
 * owner's reach, $status and $events. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createApp } from '../../src/app.ts';
import { silentLogger } from '../../src/log.ts';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { craftToken, type Json } from '../helpers/fhir.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rawStatements, storeTargets, type StoreDatabase } from '../helpers/stores.ts';
import { testCoreBundle } from '../helpers/terminology-service.ts';
import { parseFhirXml } from '../../src/fhir/xml/from-xml.ts';
import { CHECK_INTERVAL_MS } from '../../src/fhir/subscriptions/hub.ts';
import postgres from 'postgres';
import { createPostgresStore } from '../../src/store/postgres/index.ts';

interface Received {
  path: string;
  contentType: string | null;
  body: string;
}

/** A rest-hook receiver on a free port of 127.0.0.1 that records what it is sent. */
function receiver() {
  const got: Received[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      got.push({ path: new URL(req.url).pathname, contentType: req.headers.get('content-type'), body: await req.text() });
      return new Response(null, { status: 200 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/hook`, got, stop: () => server.stop(true) };
}

/** A receiver that holds each request it is sent (its body kept in `held`) until `release()`: a delivery in flight. */
function gatedReceiver() {
  let open = () => {};
  const held: string[] = [];
  const server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    async fetch(req) {
      held.push(await req.text());
      await new Promise<void>((r) => (open = r));
      return new Response(null, { status: 200 });
    },
  });
  return { port: server.port, held, release: () => open(), stop: (force: boolean) => server.stop(force) };
}

/**
 * Waits until `held` holds a request, or `run` (the delivery) has ended without sending one: however long a loaded
 * machine takes (the test's timeout bounds it), where 200 polls of 5 ms gave it a second.
 */
async function firstHeld(held: string[], run: Promise<unknown>): Promise<void> {
  let ended = false;
  run.then(() => (ended = true), () => (ended = true));
  while (!held.length && !ended) await Bun.sleep(5);
}

const ALLOW = { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' };
const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const COMPLETE = 'http://example.org/topics/encounter-complete';
const CHANGES = 'http://example.org/topics/encounter-changes';

const sub = (name: string, value: Json) => ({ url: name, ...value });

/** The IG's R4 encounter-complete topic (queryCriteria previous/current, requireBoth), with filters and a notificationShape. */
function completeTopic(extra: Json[] = []): Json {
  return {
    resourceType: 'Basic',
    code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
    modifierExtension: [{ url: `${X5}status`, valueCode: 'active' }],
    extension: [
      { url: `${X5}url`, valueUri: COMPLETE },
      { url: `${X5}version`, valueString: '1.0' },
      {
        url: `${X5}resourceTrigger`,
        extension: [
          sub('description', { valueMarkdown: 'An encounter is completed' }),
          sub('resource', { valueUri: 'http://hl7.org/fhir/StructureDefinition/Encounter' }),
          sub('supportedInteraction', { valueCode: 'create' }),
          sub('supportedInteraction', { valueCode: 'update' }),
          {
            url: 'queryCriteria',
            extension: [
              sub('previous', { valueString: 'status:not=finished' }), sub('resultForCreate', { valueCode: 'test-passes' }),
              sub('current', { valueString: 'status=finished' }), sub('resultForDelete', { valueCode: 'test-fails' }),
              sub('requireBoth', { valueBoolean: true }),
            ],
          },
          sub('fhirPathCriteria', { valueString: "(%previous.id.empty() or (%previous.status != 'finished')) and (%current.status = 'finished')" }),
        ],
      },
      { url: `${X5}canFilterBy`, extension: [sub('resource', { valueUri: 'Encounter' }), sub('filterParameter', { valueString: 'subject' })] },
      { url: `${X5}notificationShape`, extension: [sub('resource', { valueUri: 'Encounter' }), sub('include', { valueString: 'Encounter:subject' })] },
      ...extra,
    ],
  };
}

/** A topic of every change to an Encounter, deletions included, with no queryCriteria. */
const changesTopic: Json = {
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: CHANGES },
    { url: `${X5}resourceTrigger`, extension: [sub('resource', { valueUri: 'Encounter' })] },
    { url: `${X5}canFilterBy`, extension: [sub('filterParameter', { valueString: 'status' })] },
    { url: `${X5}status`, valueCode: 'active' },
  ],
};

function topicSubscription(endpoint: string, topic: string, content: string, filters: string[] = [], channel: Json = {}, payload = 'application/fhir+json'): Json {
  return {
    resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: topic,
    ...(filters.length && { _criteria: { extension: filters.map((f) => ({ url: `${BP}backport-filter-criteria`, valueString: f })) } }),
    channel: { type: 'rest-hook', endpoint, payload, _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: content }] }, ...channel },
  };
}

const encounter = (status: string, patient = 'pa', extra: Json = {}) => ({
  resourceType: 'Encounter', status, class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: `Patient/${patient}` }, ...extra,
});

/** A parameter of a SubscriptionStatus, or a part of its notification-event. */
const param = (p: Json, name: string) => (p.parameter as Json[]).find((x) => x.name === name);
/** A notification's type and the Subscription's status it reports (`handshake requested`). */
const typeAndStatus = (b: Json) => {
  const p = (b.entry as Json[])[0]!.resource as Json;
  return `${param(p, 'type')!.valueCode} ${param(p, 'status')!.valueCode}`;
};
const part = (p: Json, name: string) => ((param(p, 'notification-event')?.part ?? []) as Json[]).find((x) => x.name === name);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`topic-based subscriptions (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let hook: ReturnType<typeof receiver>;
    let database: StoreDatabase;
    const call = (method: string, path: string, body?: unknown, tok = token) => t.request(`${t.fhir()}/${path}`, fhirInit(tok, method, body));
    const json = async (res: Response | Promise<Response>) => (await (await res).json()) as Json;
    const drain = async (app = t.app) => {
      for (let i = 0; i < 50 && (await app.subscriptions.runOnce()) > 0; i++);
    };
    /** The Bundles the receiver got since the last call, parsed. */
    const received = () => hook.got.splice(0).map((r) => JSON.parse(r.body) as Json);
    const subscribe = async (body: Json, tok = token) => {
      const res = await call('POST', 'Subscription', body, tok);
      const out = await json(res);
      if (res.status !== 201) throw new Error(`subscription refused: ${res.status} ${JSON.stringify(out)}`);
      return out;
    };
    const off = async (s: Json) => {
      const current = await json(call('GET', `Subscription/${s.id}`));
      expect((await call('PUT', `Subscription/${s.id}`, { ...current, status: 'off' })).status).toBe(200);
      await drain();
      hook.got.length = 0;
    };
    const refused = async (path: string, body: Json, expression: string, status = 422) => {
      const res = await call('POST', path, body);
      const outcome = await json(res);
      expect({ status: res.status, expression: (outcome.issue as Json[])?.[0]?.expression }).toEqual({ status, expression: [expression] });
      return outcome;
    };

    beforeAll(async () => {
      database = await target.migrated();
      const store = database.open();
      await store.migrate();
      t = await createTestApp({ store, env: { ...ALLOW, CINDER_EXPUNGE: 'on' } });
      token = await t.token();
      hook = receiver();
      expect((await call('POST', 'Basic', completeTopic())).status).toBe(201);
      expect((await call('POST', 'Basic', changesTopic)).status).toBe(201);
    });
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    test('topics are stored as Basic, found by Basic?code=SubscriptionTopic, and each one Cinder cannot honour is a 422 naming its element', async () => {
      const found = await json(call('GET', 'Basic?code=SubscriptionTopic'));
      expect(found.total).toBe(2);
      const bad = (change: (b: Json) => void) => {
        const b = structuredClone(completeTopic());
        change(b);
        return b;
      };
      const ext = (b: Json) => b.extension as Json[];
      const trigger = (b: Json) => ext(b)[2]!.extension as Json[];
      await refused('Basic', bad((b) => ext(b).splice(0, 1)), 'Basic.extension');
      await refused('Basic', bad((b) => (ext(b)[0]!.valueUri = 'topics/relative')), 'Basic.extension[0]');
      await refused('Basic', bad((b) => ((b.modifierExtension as Json[])[0]!.valueCode = 'final')), 'Basic.modifierExtension[0]');
      await refused('Basic', bad((b) => (trigger(b)[1]!.valueUri = 'NoSuchType')), 'Basic.extension[2].extension[1]');
      await refused('Basic', bad((b) => (trigger(b)[2]!.valueCode = 'read')), 'Basic.extension[2].extension[2]');
      await refused('Basic', bad((b) => (((trigger(b)[4]!.extension as Json[])[2]!).valueString = 'no-such-param=1')), 'Basic.extension[2].extension[4].extension[2]');
      await refused('Basic', bad((b) => (((trigger(b)[4]!.extension as Json[])[1]!).valueCode = 'maybe')), 'Basic.extension[2].extension[4].extension[1]');
      // fhirPathCriteria that is not FHIRPath, or that needs what a write's matching cannot give (resolve(), another variable).
      await refused('Basic', bad((b) => (trigger(b)[5]!.valueString = "%current.status = 'finished' and")), 'Basic.extension[2].extension[5]');
      await refused('Basic', bad((b) => (trigger(b)[5]!.valueString = '%current.subject.resolve().active')), 'Basic.extension[2].extension[5]');
      await refused('Basic', bad((b) => (trigger(b)[5]!.valueString = '%before.exists()')), 'Basic.extension[2].extension[5]');
      await refused('Basic', bad((b) => ((ext(b)[3]!.extension as Json[])[1]!.valueString = 'no-such-param')), 'Basic.extension[3]');
      await refused('Basic', bad((b) => ((ext(b)[4]!.extension as Json[])[1]!.valueString = 'Encounter:no-such-param')), 'Basic.extension[4].extension[1]');
      // An update is held to the same checks, and a Basic of another code is none of this.
      const topic = (found.entry as Json[])[0]!.resource as Json;
      const res = await call('PUT', `Basic/${topic.id}`, { ...topic, extension: (topic.extension as Json[]).slice(1) });
      expect(res.status).toBe(422);
      expect((await call('POST', 'Basic', { resourceType: 'Basic', code: { text: 'other' }, extension: [{ url: `${X5}url`, valueUri: 'x' }] })).status).toBe(201);
      expect((await json(call('GET', 'Basic?code=SubscriptionTopic'))).total).toBe(2);
    });

    test('a topic Subscription is activated when its topic is known and its filters are offered; otherwise a 422 naming the element', async () => {
      const before = (await json(call('GET', 'Subscription?_summary=count'))).total;
      await refused('Subscription', topicSubscription(hook.url, 'http://example.org/topics/none', 'id-only'), 'Subscription.criteria');
      await refused('Subscription', topicSubscription(hook.url, `${COMPLETE}|2.0`, 'id-only'), 'Subscription.criteria');
      // A topic that is not active (a draft) is none a Subscription may name; an extension on criteria Cinder does not read is no filter to leave out.
      const draft = { ...changesTopic, extension: [{ url: `${X5}url`, valueUri: 'http://example.org/topics/draft' }, ...(changesTopic.extension as Json[]).slice(1, -1), { url: `${X5}status`, valueCode: 'draft' }] };
      expect((await call('POST', 'Basic', draft)).status).toBe(201);
      await refused('Subscription', topicSubscription(hook.url, 'http://example.org/topics/draft', 'id-only'), 'Subscription.criteria');
      const crossVersion = { ...topicSubscription(hook.url, COMPLETE, 'id-only'), _criteria: { extension: [{ url: 'http://hl7.org/fhir/5.0/subscriptions-backport/StructureDefinition/backport-filter-criteria', valueString: 'Encounter?subject=Patient/pa' }] } };
      await refused('Subscription', crossVersion, 'Subscription.criteria.extension[0]');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', ['Encounter?status=finished']), 'Subscription.criteria.extension[0]');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', ['Encounter?subject=Patient/pa', 'Observation?subject=Patient/pa']), 'Subscription.criteria.extension[1]');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', ['Encounter?subject:missing=true']), 'Subscription.criteria.extension[0]');
      // A filter's parameter with no value, which a search ignores, would notify every Encounter the topic triggers on.
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', ['Encounter?subject=']), 'Subscription.criteria.extension[0]');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', ['subject=Patient/pa']), 'Subscription.criteria.extension[0]');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'some'), 'Subscription.channel.payload');
      const noContent = topicSubscription(hook.url, COMPLETE, 'id-only');
      delete (noContent.channel as Json)._payload;
      await refused('Subscription', noContent, 'Subscription.channel.payload');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', [], { extension: [{ url: `${BP}backport-heartbeat-period`, valueUnsignedInt: 0 }] }), 'Subscription.channel.extension[0]');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', [], { extension: [{ url: `${BP}backport-timeout`, valueUnsignedInt: 600 }] }), 'Subscription.channel.extension[0]');
      // A websocket sends its Bundles as JSON; backport-channel-type may only repeat channel.type.
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', [], { type: 'websocket' }, 'application/fhir+xml'), 'Subscription.channel.payload');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', [], { _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { code: 'websocket' } }] } }), 'Subscription.channel.type.extension[0]');
      await refused('Subscription', topicSubscription(hook.url, COMPLETE, 'id-only', [], { _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { code: 'email' } }] } }), 'Subscription.channel.type.extension[0]');
      expect((await json(call('GET', 'Subscription?_summary=count'))).total).toBe(before);

      const s = await subscribe(topicSubscription(hook.url, `${COMPLETE}|1.0`, 'id-only', ['Encounter?subject=Patient/pa'], {
        extension: [{ url: `${BP}backport-timeout`, valueUnsignedInt: 10 }, { url: `${BP}backport-max-count`, valuePositiveInt: 5 }],
      }));
      // A rest-hook is requested until its handshake is accepted (the IG's REST Hook channel), then active.
      expect(s.status).toBe('requested');
      // The handshake, sent on activation: a history Bundle holding the SubscriptionStatus alone.
      await drain();
      expect((await json(call('GET', `Subscription/${s.id}`))).status).toBe('active');
      const [handshake] = received();
      expect(handshake!.type).toBe('history');
      const status = ((handshake!.entry as Json[])[0]!.resource) as Json;
      expect(status.resourceType).toBe('Parameters');
      expect(param(status, 'type')!.valueCode).toBe('handshake');
      // The status the handshake is part of (the IG's R4 handshake example, its workflow): the request's, requested.
      expect(param(status, 'status')!.valueCode).toBe('requested');
      expect(((handshake!.entry as Json[])[0]!.request as Json).url).toBe(`Subscription/${s.id}/$status`);
      expect(param(status, 'subscription')!.valueReference).toEqual({ reference: `${t.fhir()}/Subscription/${s.id}` });
      expect(param(status, 'events-since-subscription-start')!.valueString).toBe('0');
      expect((handshake!.entry as Json[]).length).toBe(1);
      await off(s);
    });

    test('events follow the trigger: interactions and queryCriteria previous/current with resultForCreate, resultForDelete and requireBoth', async () => {
      const s = await subscribe(topicSubscription(hook.url, COMPLETE, 'id-only'));
      const all = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      await drain();
      received();
      const finished = await json(call('POST', 'Encounter', encounter('finished')));
      const planned = await json(call('POST', 'Encounter', encounter('planned')));
      await drain();
      // COMPLETE: a finished creation (resultForCreate passes, current passes); CHANGES: both creations.
      const first = received();
      const byTopic = (bundles: Json[], topic: string) => bundles.filter((b) => param((b.entry as Json[])[0]!.resource as Json, 'topic')?.valueCanonical === topic);
      const foci = (bundles: Json[]) => bundles.map((b) => (part((b.entry as Json[])[0]!.resource as Json, 'focus')?.valueReference as Json)?.reference);
      expect(foci(byTopic(first, COMPLETE))).toEqual([`${t.fhir()}/Encounter/${finished.id}`]);
      expect(foci(byTopic(first, CHANGES))).toEqual([`${t.fhir()}/Encounter/${finished.id}`, `${t.fhir()}/Encounter/${planned.id}`]);
      // planned -> finished passes both tests; finished -> finished (another change) fails previous; a deletion fails current.
      await call('PUT', `Encounter/${planned.id}`, { ...planned, status: 'finished' });
      await call('PUT', `Encounter/${finished.id}`, { ...finished, period: { start: '2026-01-01' } });
      expect((await call('DELETE', `Encounter/${planned.id}`)).status).toBe(200);
      await drain();
      const second = received();
      expect(foci(byTopic(second, COMPLETE))).toEqual([`${t.fhir()}/Encounter/${planned.id}`]);
      // CHANGES is told of every one, the deletion included, each entry naming its interaction.
      const changes = byTopic(second, CHANGES);
      expect(changes.map((b) => ((b.entry as Json[])[1]!.request as Json).method)).toEqual(['PUT', 'PUT', 'DELETE']);
      expect(changes.map((b) => part((b.entry as Json[])[0]!.resource as Json, 'event-number')!.valueString)).toEqual(['3', '4', '5']);
      const last = (changes[2]!.entry as Json[])[0]!.resource as Json;
      expect(param(last, 'events-since-subscription-start')!.valueString).toBe('5');
      expect(param(last, 'type')!.valueCode).toBe('event-notification');
      await off(s);
      await off(all);
    });

    test('payload content: empty sends the status alone, id-only the focus fullUrl, full-resource the version and its notificationShape includes; XML when asked', async () => {
      const empty = await subscribe(topicSubscription(hook.url, COMPLETE, 'empty'));
      await drain();
      received();
      await call('PUT', 'Patient/pa', { resourceType: 'Patient', id: 'pa', name: [{ family: 'A' }] });
      const e = await json(call('POST', 'Encounter', encounter('finished')));
      await drain();
      const [bEmpty] = received();
      expect((bEmpty!.entry as Json[]).length).toBe(1);
      const sEmpty = (bEmpty!.entry as Json[])[0]!.resource as Json;
      expect([param(sEmpty, 'topic'), part(sEmpty, 'focus'), part(sEmpty, 'event-number')!.valueString]).toEqual([undefined, undefined, '1']);
      await off(empty);

      const idOnly = await subscribe(topicSubscription(hook.url, COMPLETE, 'id-only'));
      const full = await subscribe(topicSubscription(hook.url, COMPLETE, 'full-resource'));
      const xml = await subscribe(topicSubscription(hook.url, COMPLETE, 'full-resource', [], {}, 'application/fhir+xml'));
      await drain();
      hook.got.length = 0;
      await call('PUT', `Encounter/${e.id}`, { ...e, status: 'in-progress' });
      await call('PUT', `Encounter/${e.id}`, { ...e, status: 'finished' });
      await drain();
      const bodies = hook.got.splice(0);
      expect(bodies.map((b) => b.contentType).sort()).toEqual(['application/fhir+json', 'application/fhir+json', 'application/fhir+xml']);
      const [bXml] = bodies.filter((b) => b.contentType === 'application/fhir+xml').map((b) => parseFhirXml(b.body) as Json);
      const bundles = bodies.filter((b) => b.contentType === 'application/fhir+json').map((b) => JSON.parse(b.body) as Json);
      const of = (s: Json) => bundles.find((b) => (param((b.entry as Json[])[0]!.resource as Json, 'subscription')!.valueReference as Json).reference === `${t.fhir()}/Subscription/${s.id}`)!;
      const idEntry = (of(idOnly).entry as Json[])[1]!;
      expect([idEntry.fullUrl, idEntry.resource]).toEqual([`${t.fhir()}/Encounter/${e.id}`, undefined]);
      const fullEntries = of(full).entry as Json[];
      expect((fullEntries[1]!.resource as Json).status).toBe('finished');
      expect((fullEntries[1]!.resource as Json).meta).toMatchObject({ versionId: '3' });
      // notificationShape include Encounter:subject: the patient, named as additional context.
      expect(fullEntries.slice(2).map((x) => x.fullUrl)).toEqual([`${t.fhir()}/Patient/pa`]);
      expect(part(fullEntries[0]!.resource as Json, 'additional-context')!.valueReference).toEqual({ reference: `${t.fhir()}/Patient/pa` });
      expect(((bXml!.entry as Json[])[1]!.resource as Json).resourceType).toBe('Encounter');
      for (const s of [idOnly, full, xml]) await off(s);
    });

    test("filters and the owner's reach: a patient-context owner is told only of its patient's events", async () => {
      const filtered = await subscribe(topicSubscription(hook.url, CHANGES, 'full-resource', ['Encounter?status=arrived']));
      const patientToken = await craftToken(t, 'patient/Encounter.rs user/Subscription.cruds', { patient: 'pa' });
      const mine = await subscribe(topicSubscription(hook.url, CHANGES, 'full-resource'), patientToken);
      await drain();
      received();
      const a = await json(call('POST', 'Encounter', encounter('arrived', 'pa')));
      const b = await json(call('POST', 'Encounter', encounter('arrived', 'pb')));
      await call('POST', 'Encounter', encounter('planned', 'pb'));
      // A deletion of another patient's Encounter is no more the patient app's than its creation.
      expect((await call('DELETE', `Encounter/${b.id}`)).status).toBe(200);
      await drain();
      const got = received();
      const to = (s: Json) => got.filter((x) => (param((x.entry as Json[])[0]!.resource as Json, 'subscription')!.valueReference as Json).reference === `${t.fhir()}/Subscription/${s.id}`)
        .map((x) => `${((x.entry as Json[])[1]!.request as Json).method} ${(x.entry as Json[])[1]!.fullUrl}`);
      expect(to(filtered)).toEqual([`POST ${t.fhir()}/Encounter/${a.id}`, `POST ${t.fhir()}/Encounter/${b.id}`, `DELETE ${t.fhir()}/Encounter/${b.id}`]);
      expect(to(mine)).toEqual([`POST ${t.fhir()}/Encounter/${a.id}`]);
      await off(filtered);
      await off(mine);
    });

    test("$events names to its caller only the resources it may read and search: another patient's events are counted, their focus left out", async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      const mine = await json(call('POST', 'Encounter', encounter('planned', 'pa')));
      const theirs = await json(call('POST', 'Encounter', encounter('planned', 'pb')));
      expect((await call('DELETE', `Encounter/${theirs.id}`)).status).toBe(200);
      const patientToken = await craftToken(t, 'patient/Encounter.rs user/Subscription.rs', { patient: 'pa' });
      for (const content of ['id-only', 'full-resource']) {
        const events = await json(call('GET', `Subscription/${s.id}/$events?content=${content}`, undefined, patientToken));
        const status = (events.entry as Json[])[0]!.resource as Json;
        const parts = (status.parameter as Json[]).filter((x) => x.name === 'notification-event').map((x) => (x.part as Json[]).map((p) => p.name === 'focus' ? (p.valueReference as Json).reference : p.name));
        expect(parts).toEqual([['event-number', 'timestamp', `${t.fhir()}/Encounter/${mine.id}`], ['event-number', 'timestamp'], ['event-number', 'timestamp']]);
        // The two withheld have their entries, naming nothing (no fullUrl): the $events call of each alone, a 403.
        expect((events.entry as Json[]).slice(1).map((x) => x.fullUrl ?? `${(x.request as Json).url} ${(x.response as Json).status}`)).toEqual([
          `${t.fhir()}/Encounter/${mine.id}`, `Subscription/${s.id}/$events?eventsSinceNumber=2&eventsUntilNumber=2 403`, `Subscription/${s.id}/$events?eventsSinceNumber=3&eventsUntilNumber=3 403`,
        ]);
      }
      // A token that reads Encounters by id but may not search them is told of none: the events list them, as a search would.
      const readOnly = await craftToken(t, 'user/Encounter.r user/Subscription.rs');
      for (const content of ['id-only', 'full-resource']) {
        const events = await json(call('GET', `Subscription/${s.id}/$events?content=${content}`, undefined, readOnly));
        const status = (events.entry as Json[])[0]!.resource as Json;
        const parts = (status.parameter as Json[]).filter((x) => x.name === 'notification-event').map((x) => (x.part as Json[]).map((p) => p.name));
        expect({ content, parts }).toEqual({ content, parts: [['event-number', 'timestamp'], ['event-number', 'timestamp'], ['event-number', 'timestamp']] });
        expect((events.entry as Json[]).slice(1).map((x) => [x.fullUrl, (x.response as Json).status])).toEqual([[undefined, '403'], [undefined, '403'], [undefined, '403']]);
      }
      // Its owner is told of all three.
      const all = await json(call('GET', `Subscription/${s.id}/$events`));
      expect((all.entry as Json[]).length).toBe(4);
      await drain();
      received();
      await off(s);
    });

    test("a topic's change reaches its active Subscriptions: delete added to its trigger makes deletions notify", async () => {
      const topic = { ...changesTopic, extension: [...(changesTopic.extension as Json[])] };
      (topic.extension as Json[])[1] = { url: `${X5}resourceTrigger`, extension: [sub('resource', { valueUri: 'Encounter' }), sub('supportedInteraction', { valueCode: 'create' })] };
      const stored = await json(call('POST', 'Basic', { ...topic, extension: [{ url: `${X5}url`, valueUri: 'http://example.org/topics/changing' }, ...(topic.extension as Json[]).slice(1)] }));
      const s = await subscribe(topicSubscription(hook.url, 'http://example.org/topics/changing', 'id-only'));
      const e = await json(call('POST', 'Encounter', encounter('planned')));
      await call('DELETE', `Encounter/${e.id}`);
      await drain();
      const kinds = () => received().map((b) => param((b.entry as Json[])[0]!.resource as Json, 'type')!.valueCode === 'handshake' ? 'handshake' : ((b.entry as Json[])[1]!.request as Json).method);
      expect(kinds()).toEqual(['handshake', 'POST']);
      const withDelete = (stored.extension as Json[]).map((x, i) => (i === 1 ? { ...x, extension: [...(x.extension as Json[]), sub('supportedInteraction', { valueCode: 'delete' })] } : x));
      expect((await call('PUT', `Basic/${stored.id}`, { ...stored, extension: withDelete })).status).toBe(200);
      const f = await json(call('POST', 'Encounter', encounter('planned')));
      await call('DELETE', `Encounter/${f.id}`);
      await drain();
      expect(kinds()).toEqual(['POST', 'DELETE']);
      await off(s);
    });

    test('$events answers the kept events in a range, with the content asked for', async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      const a = await json(call('POST', 'Encounter', encounter('planned')));
      await call('PUT', `Encounter/${a.id}`, { ...a, status: 'arrived' });
      await call('DELETE', `Encounter/${a.id}`);
      const numbers = (b: Json) => ((b.entry as Json[])[0]!.resource as Json).parameter as Json[];
      const eventNumbers = (b: Json) => numbers(b).filter((x) => x.name === 'notification-event').map((x) => ((x.part as Json[])[0]!).valueString);
      const all = await json(call('GET', `Subscription/${s.id}/$events`));
      expect([all.type, param((all.entry as Json[])[0]!.resource as Json, 'type')!.valueCode, eventNumbers(all)]).toEqual(['history', 'query-event', ['1', '2', '3']]);
      expect((all.entry as Json[]).slice(1).map((x) => [(x.request as Json).method, x.resource])).toEqual([['POST', undefined], ['PUT', undefined], ['DELETE', undefined]]);
      const some = await json(call('GET', `Subscription/${s.id}/$events?eventsSinceNumber=2&eventsUntilNumber=3&content=full-resource`));
      expect(eventNumbers(some)).toEqual(['2', '3']);
      expect((all.entry as Json[]).length).toBe(4);
      expect(((some.entry as Json[])[1]!.resource as Json).status).toBe('arrived');
      const posted = await json(call('POST', `Subscription/${s.id}/$events`, { resourceType: 'Parameters', parameter: [{ name: 'eventsSinceNumber', valueString: '3' }] }));
      expect(eventNumbers(posted)).toEqual(['3']);
      for (const bad of ['eventsSinceNumber=0', 'content=all', 'bogus=1']) expect((await call('GET', `Subscription/${s.id}/$events?${bad}`)).status).toBe(400);
      const criteria = await subscribe({ resourceType: 'Subscription', status: 'requested', reason: 'r', criteria: 'Encounter', channel: { type: 'rest-hook', endpoint: hook.url } });
      expect((await call('GET', `Subscription/${criteria.id}/$events`)).status).toBe(400);
      await off(criteria);
      await off(s);
    });

    test("$events with full-resource carries the notificationShape's includes, as the caller may read them", async () => {
      const s = await subscribe(topicSubscription(hook.url, COMPLETE, 'full-resource'));
      await call('PUT', 'Patient/pa', { resourceType: 'Patient', id: 'pa', name: [{ family: 'A' }] });
      const e = await json(call('POST', 'Encounter', encounter('finished')));
      const events = await json(call('GET', `Subscription/${s.id}/$events?content=full-resource`));
      const entries = events.entry as Json[];
      expect(entries.slice(1).map((x) => x.fullUrl)).toEqual([`${t.fhir()}/Encounter/${e.id}`, `${t.fhir()}/Patient/pa`]);
      expect(part(entries[0]!.resource as Json, 'additional-context')!.valueReference).toEqual({ reference: `${t.fhir()}/Patient/pa` });
      // A caller that may read Encounters and the Subscription but no Patient gets the event without the include.
      const narrow = await craftToken(t, 'user/Subscription.rs user/Encounter.rs');
      const seen = await json(t.request(`${t.fhir()}/Subscription/${s.id}/$events?content=full-resource`, fhirInit(narrow)));
      expect((seen.entry as Json[]).slice(1).map((x) => x.fullUrl)).toEqual([`${t.fhir()}/Encounter/${e.id}`]);
      await off(s);
    });

    test('an expunged Subscription takes its kept events with it: one created again with its id counts from 1, and writes go on', async () => {
      const body = { ...topicSubscription(hook.url, CHANGES, 'id-only'), id: 'reused' };
      expect((await call('PUT', 'Subscription/reused', body)).status).toBe(201);
      const a = await json(call('POST', 'Encounter', encounter('planned')));
      expect((await call('DELETE', 'Subscription/reused')).status).toBe(200);
      const expunged = { resourceType: 'Parameters', parameter: [{ name: 'expungeDeletedResources', valueBoolean: true }] };
      expect((await call('POST', 'Subscription/reused/$expunge', expunged)).status).toBe(200);
      expect((await call('PUT', 'Subscription/reused', body)).status).toBe(201);
      // Nothing of the first one: no event kept, none counted.
      const fresh = await json(call('GET', 'Subscription/reused/$events'));
      expect((fresh.entry as Json[]).length).toBe(1);
      expect(param((fresh.entry as Json[])[0]!.resource as Json, 'events-since-subscription-start')!.valueString).toBe('0');
      const res = await call('POST', 'Encounter', encounter('planned'));
      expect(res.status).toBe(201);
      const b = await json(res);
      const events = await json(call('GET', 'Subscription/reused/$events'));
      expect((events.entry as Json[]).slice(1).map((x) => x.fullUrl)).toEqual([`${t.fhir()}/Encounter/${b.id}`]);
      expect(a.id).not.toBe(b.id);
      await drain();
      received();
      await off({ id: 'reused' });
    });

    test('a Subscription deleted and created again with its id is a new one: its events are numbered from 1 and $events and $status show none of the deleted one\'s', async () => {
      const body = { ...topicSubscription(hook.url, CHANGES, 'id-only'), id: 'recreated' };
      expect((await call('PUT', 'Subscription/recreated', body)).status).toBe(201);
      await call('POST', 'Encounter', encounter('planned'));
      await call('POST', 'Encounter', encounter('planned'));
      const since = async () => param(((await json(call('GET', 'Subscription/recreated/$status'))).entry as Json[])[0]!.resource as Json, 'events-since-subscription-start')!.valueString;
      expect(await since()).toBe('2');
      expect((await call('DELETE', 'Subscription/recreated')).status).toBe(200);
      expect((await call('GET', 'Subscription/recreated/$events')).status).toBe(410);
      // Created again off: nothing counted; then activated, and an event is number 1.
      expect((await call('PUT', 'Subscription/recreated', { ...body, status: 'off' })).status).toBe(201);
      expect(await since()).toBe('0');
      expect((await call('PUT', 'Subscription/recreated', body)).status).toBe(200);
      const fresh = await json(call('GET', 'Subscription/recreated/$events'));
      expect((fresh.entry as Json[]).length).toBe(1);
      const e = await json(call('POST', 'Encounter', encounter('planned')));
      const events = await json(call('GET', 'Subscription/recreated/$events'));
      expect((events.entry as Json[]).slice(1).map((x) => x.fullUrl)).toEqual([`${t.fhir()}/Encounter/${e.id}`]);
      const status = (events.entry as Json[])[0]!.resource as Json;
      expect([param(status, 'events-since-subscription-start')!.valueString, part(status, 'event-number')!.valueString]).toEqual(['1', '1']);
      // The notification delivered carries the new number, and none of the deleted one's was left to send.
      await drain();
      const sent = received().filter((b) => param((b.entry as Json[])[0]!.resource as Json, 'subscription')?.valueReference?.reference?.endsWith('Subscription/recreated'))
        .map((b) => { const st = (b.entry as Json[])[0]!.resource as Json; return `${param(st, 'type')!.valueCode} ${part(st, 'event-number')?.valueString ?? '-'}`; });
      expect(sent).toEqual(['handshake -', 'event-notification 1']);
      await off({ id: 'recreated' });
    });

    test("$expunge takes the kept events of the versions it removes: $events no longer names them", async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      const gone = await json(call('POST', 'Encounter', encounter('planned')));
      await call('DELETE', `Encounter/${gone.id}`);
      const kept = await json(call('POST', 'Encounter', encounter('planned')));
      await call('PUT', `Encounter/${kept.id}`, { ...kept, status: 'arrived' });
      const named = async () => ((await json(call('GET', `Subscription/${s.id}/$events`))).entry as Json[]).slice(1)
        .map((x) => `${(x.request as Json).method} ${(x.fullUrl as string).slice(t.fhir().length + 1)}`);
      expect(await named()).toEqual([`POST Encounter/${gone.id}`, `DELETE Encounter/${gone.id}`, `POST Encounter/${kept.id}`, `PUT Encounter/${kept.id}`]);
      const expunge = (path: string, name: string) => call('POST', `${path}/$expunge`, { resourceType: 'Parameters', parameter: [{ name, valueBoolean: true }] });
      expect((await expunge(`Encounter/${gone.id}`, 'expungeDeletedResources')).status).toBe(200);
      expect((await expunge(`Encounter/${kept.id}`, 'expungePreviousVersions')).status).toBe(200);
      // The numbers of those left stand (the events removed leave gaps).
      expect(await named()).toEqual([`PUT Encounter/${kept.id}`]);
      const numbers = ((await json(call('GET', `Subscription/${s.id}/$events`))).entry as Json[])[0]!.resource as Json;
      expect(part(numbers, 'event-number')!.valueString).toBe('4');
      await drain();
      received();
      await off(s);
    });

    test('a Subscription activated again after it was off is sent nothing that waited from its earlier activation', async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      await call('POST', 'Encounter', encounter('planned'));
      // Off, and activated again (another endpoint, as another owner might) before the delivery loop saw it off.
      const current = await json(call('GET', `Subscription/${s.id}`));
      expect((await call('PUT', `Subscription/${s.id}`, { ...current, status: 'off' })).status).toBe(200);
      const other = receiver();
      try {
        expect((await call('PUT', `Subscription/${s.id}`, { ...current, status: 'requested', channel: { ...(current.channel as Json), endpoint: other.url } })).status).toBe(200);
        await drain();
        const got = other.got.splice(0).map((r) => param(((JSON.parse(r.body) as Json).entry as Json[])[0]!.resource as Json, 'type')!.valueCode);
        expect(got).toEqual(['handshake']);
        expect(received()).toEqual([]);
      } finally {
        other.stop();
      }
      await off(s);
    });

    test('an active Subscription written requested again is activated again: a new version, a handshake, its new owner, its count going on; written active unchanged, nothing', async () => {
      const patientToken = await craftToken(t, 'patient/Encounter.rs user/Subscription.cruds', { patient: 'pa' });
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'), patientToken);
      const kinds = () => received().map((b) => {
        const p = (b.entry as Json[])[0]!.resource as Json;
        return `${param(p, 'type')!.valueCode} ${param(p, 'events-since-subscription-start')!.valueString}${part(p, 'focus') ? ` ${((b.entry as Json[])[1]!.fullUrl as string).split('/').pop()}` : ''}`;
      });
      const events = async () => {
        const a = await json(call('POST', 'Encounter', encounter('planned', 'pa')));
        const b = await json(call('POST', 'Encounter', encounter('planned', 'pb')));
        await drain();
        return kinds().map((k) => k.replace(a.id as string, 'pa').replace(b.id as string, 'pb'));
      };
      await drain();
      expect(kinds()).toEqual(['handshake 0']);
      expect(await events()).toEqual(['event-notification 1 pa']);
      // The same content with status active (as its accepted handshake left it, version 2): no version, no handshake, the same owner.
      const same = await call('PUT', `Subscription/${s.id}`, { ...s, status: 'active' }, patientToken);
      expect([same.status, ((await json(same)).meta as Json).versionId]).toEqual([200, '2']);
      expect(await events()).toEqual(['event-notification 2 pa']);
      // Requested by the admin: version 3, requested until its handshake is accepted (version 4), the admin's reach, and the count goes on.
      const again = await call('PUT', `Subscription/${s.id}`, { ...s, status: 'requested' });
      const stored = await json(again);
      expect([again.status, stored.status, (stored.meta as Json).versionId]).toEqual([200, 'requested', '3']);
      await drain();
      expect(kinds()).toEqual(['handshake 2']);
      expect(((await json(call('GET', `Subscription/${s.id}`))).meta as Json).versionId).toBe('4');
      expect(await events()).toEqual(['event-notification 3 pa', 'event-notification 4 pb']);
      const status = await json(call('GET', `Subscription/${s.id}/$status`));
      expect(param((status.entry as Json[])[0]!.resource as Json, 'events-since-subscription-start')!.valueString).toBe('4');
      await off(s);
    });

    test('a topic rest-hook Subscription written active is stored requested and sent the handshake first unless its endpoint was verified: created active, moved while active, written active while awaiting its handshake', async () => {
      /** What `r` got since the last call: each Bundle's type and status. */
      const kinds = (r: ReturnType<typeof receiver>) => r.got.splice(0).map((x) => {
        const p = ((JSON.parse(x.body) as Json).entry as Json[])[0]!.resource as Json;
        return `${param(p, 'type')!.valueCode} ${param(p, 'status')!.valueCode}`;
      });
      const read = async (id: unknown) => json(call('GET', `Subscription/${String(id)}`));
      // Created active: its endpoint is verified first, as one created requested.
      const created = await call('POST', 'Subscription', { ...topicSubscription(hook.url, CHANGES, 'id-only'), status: 'active' });
      const s = await json(created);
      expect([created.status, s.status]).toEqual([201, 'requested']);
      expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
      await drain();
      expect(kinds(hook)).toEqual(['handshake requested', 'event-notification active']);
      expect((await read(s.id)).status).toBe('active');
      // Verified, written active to the same endpoint (another header): active as it is, no handshake.
      const same = await call('PUT', `Subscription/${s.id}`, { ...(await read(s.id)), channel: { ...(s.channel as Json), header: ['X-Other: 1'] } });
      expect([same.status, (await json(same)).status]).toEqual([200, 'active']);
      await drain();
      expect(kinds(hook)).toEqual([]);
      const other = receiver();
      try {
        // Moved to another endpoint, written active: requested until the new endpoint accepts its handshake, which goes first.
        const current = await read(s.id);
        const moved = await call('PUT', `Subscription/${s.id}`, { ...current, status: 'active', channel: { ...(current.channel as Json), endpoint: other.url } });
        const stored = await json(moved);
        expect([moved.status, stored.status, (stored.meta as Json).versionId]).toEqual([200, 'requested', String(Number((current.meta as Json).versionId) + 1)]);
        expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
        await drain();
        expect([kinds(other), kinds(hook)]).toEqual([['handshake requested', 'event-notification active'], []]);
        // Written requested, then active (as read) while it awaits its handshake: it stays requested, and is active once verified.
        const asked = await json(call('PUT', `Subscription/${s.id}`, { ...(await read(s.id)), status: 'requested' }));
        const written = await call('PUT', `Subscription/${s.id}`, { ...asked, status: 'active' });
        expect([written.status, (await json(written)).status]).toEqual([200, 'requested']);
        await drain();
        expect(kinds(other)).toEqual(['handshake requested']);
        expect((await read(s.id)).status).toBe('active');
      } finally {
        other.stop();
      }
      await off(s);
    });

    test("a client's write while the handshake is in flight wins: the server's active write over the version it read fails, and the new endpoint is verified before it is sent anything", async () => {
      const gate = gatedReceiver();
      const { held } = gate;
      const release = () => gate.release();
      const other = receiver();
      try {
        const s = await subscribe(topicSubscription(`http://127.0.0.1:${gate.port}/hook`, CHANGES, 'id-only'));
        const delivering = t.app.subscriptions.runOnce();
        await firstHeld(held, delivering);
        expect(held.length).toBe(1);
        // Moved to another endpoint while the first endpoint's handshake is unanswered, and an event matched.
        const current = await json(call('GET', `Subscription/${s.id}`));
        const moved = await call('PUT', `Subscription/${s.id}`, { ...current, channel: { ...(current.channel as Json), endpoint: other.url } });
        expect([moved.status, (await json(moved)).status]).toEqual([200, 'requested']);
        expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
        release();
        await delivering;
        // The client's version stands (not made active over it), pointing at the new endpoint.
        const after = await json(call('GET', `Subscription/${s.id}`));
        expect([after.status, (after.channel as Json).endpoint, (after.meta as Json).versionId]).toEqual(['requested', other.url, '2']);
        await drain();
        const kinds = other.got.splice(0).map((r) => {
          const p = ((JSON.parse(r.body) as Json).entry as Json[])[0]!.resource as Json;
          return `${param(p, 'type')!.valueCode} ${param(p, 'status')!.valueCode}`;
        });
        expect(kinds).toEqual(['handshake requested', 'event-notification active']);
        expect(held.length).toBe(1);
        expect((await json(call('GET', `Subscription/${s.id}`))).status).toBe('active');
        await off(s);
      } finally {
        release();
        gate.stop(true);
        other.stop();
      }
    });

    test('a topic rest-hook Subscription stored by cinder import (no owner) is activated by a write of it as read, active or requested: its endpoint verified first', async () => {
      const cli = createCliEnv({ CINDER_DATABASE_URL: database.url });
      try {
        const file = join(cli.dir, 'subscriptions.ndjson');
        const imported = (id: string, status: string) => ({ ...topicSubscription(hook.url, CHANGES, 'id-only'), id, status });
        writeFileSync(file, [imported('imported-active', 'active'), imported('imported-requested', 'requested')].map((r) => JSON.stringify(r)).join('\n') + '\n');
        const run = await cli.run(['import', '--tenant', 't1', file]);
        expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
      } finally {
        cli.close();
      }
      t.clock.advance(CHECK_INTERVAL_MS);
      // Written back as read, the status each had: each is activated, stored requested until its handshake is accepted.
      for (const id of ['imported-active', 'imported-requested']) {
        const current = await json(call('GET', `Subscription/${id}`));
        const res = await call('PUT', `Subscription/${id}`, current);
        const stored = await json(res);
        expect([id, res.status, stored.status, (stored.meta as Json).versionId]).toEqual([id, 200, 'requested', '2']);
      }
      expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
      await drain();
      const sent = received().map((b) => {
        const p = (b.entry as Json[])[0]!.resource as Json;
        return `${((param(p, 'subscription')!.valueReference as Json).reference as string).split('/').pop()} ${param(p, 'type')!.valueCode}`;
      });
      for (const id of ['imported-active', 'imported-requested']) {
        expect(sent.filter((x) => x.startsWith(`${id} `))).toEqual([`${id} handshake`, `${id} event-notification`]);
        expect((await json(call('GET', `Subscription/${id}`))).status).toBe('active');
        await off({ id });
      }
    });

    test('a Subscription asked to be activated twice before its handshake went is sent one handshake: the endpoint it verified is the one the second asks for', async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      const again = await json(call('PUT', `Subscription/${s.id}`, { ...s, status: 'active' }));
      expect([again.status, (again.meta as Json).versionId]).toEqual(['requested', '2']);
      expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
      await drain();
      const sent = received().map(typeAndStatus);
      expect(sent).toEqual(['handshake requested', 'event-notification active']);
      const read = await json(call('GET', `Subscription/${s.id}`));
      expect([read.status, (read.meta as Json).versionId]).toEqual(['active', '3']);
      await off(s);
    });

    test('one stored active by an older release with its handshake still waiting is not taken as verified: a write of it active is requested, and the handshake goes before anything else', async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      // As a release that stored a topic rest-hook Subscription active at once, its handshake recorded, left it.
      const read = async () => json(call('GET', `Subscription/${String(s.id)}`));
      const legacy: Json = { ...(await read()), status: 'active' };
      await rawStatements(target.kind, database.url, [[`UPDATE resources SET content = $1 WHERE tenant = $2 AND type = 'Subscription' AND id = $3`, [JSON.stringify(legacy), 't1', String(s.id)]]]);
      expect((await read()).status).toBe('active');
      // The app changes a header, writing it back active as read.
      const written = await call('PUT', `Subscription/${String(s.id)}`, { ...legacy, channel: { ...(legacy.channel as Json), header: ['X-Changed: 1'] } });
      const stored = await json(written);
      expect([written.status, stored.status, (stored.meta as Json).versionId]).toEqual([200, 'requested', '2']);
      expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
      await drain();
      const sent = received().map(typeAndStatus);
      expect(sent).toEqual(['handshake requested', 'event-notification active']);
      expect((await read()).status).toBe('active');
      await off(s);
    });

    test('a Subscription awaiting its handshake that is deleted while the handshake is in flight stays deleted; one whose end passes first is set off and sent nothing', async () => {
      const gate = gatedReceiver();
      const { held } = gate;
      const release = () => gate.release();
      try {
        const s = await subscribe(topicSubscription(`http://127.0.0.1:${gate.port}/hook`, CHANGES, 'id-only'));
        const delivering = t.app.subscriptions.runOnce();
        await firstHeld(held, delivering);
        expect(held.length).toBe(1);
        expect((await call('DELETE', `Subscription/${s.id}`)).status).toBe(200);
        release();
        await delivering;
        // Its accepted handshake writes no active version over the deletion.
        expect((await call('GET', `Subscription/${s.id}`)).status).toBe(410);
        await drain();
        expect([held.length, (await call('GET', `Subscription/${s.id}`)).status]).toEqual([1, 410]);
      } finally {
        release();
        gate.stop(true);
      }
      // Its end passed before the handshake went: off (a version the server writes), nothing sent.
      const ending = await subscribe({ ...topicSubscription(hook.url, CHANGES, 'id-only'), end: new Date(t.clock.now() + 60_000).toISOString() });
      t.clock.advance(61_000);
      await drain();
      const read = await json(call('GET', `Subscription/${ending.id}`));
      expect([read.status, (read.meta as Json).versionId, received()]).toEqual(['off', '2', []]);
    });

    test("another owner's activation is sent nothing that waited under the earlier owner's reach; the count goes on and $events holds to the caller's reach", async () => {
      const patientToken = await craftToken(t, 'patient/Encounter.rs user/Subscription.cruds', { patient: 'pa' });
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'full-resource'));
      await drain();
      received();
      const kinds = (bundles: Json[]) => bundles.map((b) => {
        const p = (b.entry as Json[])[0]!.resource as Json;
        const focus = part(p, 'focus') ? ` ${(((b.entry as Json[])[1]!.resource as Json).subject as Json).reference}` : '';
        return `${param(p, 'type')!.valueCode} ${param(p, 'events-since-subscription-start')!.valueString}${focus}`;
      });
      const queue = async () => {
        for (const p of ['pa', 'pb']) expect((await call('POST', 'Encounter', encounter('planned', p))).status).toBe(201);
      };
      const requested = async (endpoint: string, tok: string) => {
        const current = await json(call('GET', `Subscription/${s.id}`));
        const res = await call('PUT', `Subscription/${s.id}`, { ...current, status: 'requested', channel: { ...(current.channel as Json), endpoint } }, tok);
        expect(res.status).toBe(200);
      };
      // Two events wait (the delivery rounds not run), one per patient; the admin activates it again: the same owner, kept,
      // and sent once the endpoint is verified by the new handshake.
      await queue();
      await requested(hook.url, token);
      await drain();
      expect(kinds(received())).toEqual(['handshake 2', 'event-notification 1 Patient/pa', 'event-notification 2 Patient/pb']);
      // Two more wait; the patient app activates it again with its own endpoint: none of them is sent, there or here.
      await queue();
      const other = receiver();
      try {
        await requested(other.url, patientToken);
        await drain();
        const got = () => kinds(other.got.splice(0).map((r) => JSON.parse(r.body) as Json));
        expect(got()).toEqual(['handshake 4']);
        expect(received()).toEqual([]);
        // Its count goes on, with its patient's events alone.
        await queue();
        await drain();
        expect(got()).toEqual(['event-notification 5 Patient/pa']);
      } finally {
        other.stop();
      }
      // The events stay in $events, each caller told of what it may read: the patient app of its patient's.
      const events = await json(call('GET', `Subscription/${s.id}/$events?content=id-only`, undefined, patientToken));
      const status = (events.entry as Json[])[0]!.resource as Json;
      const focused = (status.parameter as Json[]).filter((x) => x.name === 'notification-event')
        .map((x) => (x.part as Json[]).some((p) => p.name === 'focus'));
      expect(focused).toEqual([true, false, true, false, true]);
      await off(s);
    });

    test("a transaction's events reach no Subscription it deletes or gives another owner: FHIR writes them in between (DELETE, then POST, then PUT)", async () => {
      const tx = (entries: Json[], tok = token) => call('POST', '', { resourceType: 'Bundle', type: 'transaction', entry: entries }, tok);
      const post = (resource: Json) => ({ resource, request: { method: 'POST', url: resource.resourceType as string } });
      const status = async (id: string) => {
        const p = (((await json(call('GET', `Subscription/${id}/$status`))).entry as Json[])[0]!.resource as Json);
        return param(p, 'events-since-subscription-start')!.valueString;
      };
      const kinds = (bundles: Json[]) => bundles.map((b) => {
        const p = (b.entry as Json[])[0]!.resource as Json;
        return `${param(p, 'type')!.valueCode} ${param(p, 'events-since-subscription-start')!.valueString}`;
      });
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      await drain();
      received();
      expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
      expect(await status(s.id as string)).toBe('1');
      // The same owner's activation in such a transaction: what waits is kept, its event sent with the handshake.
      const again = await json(call('GET', `Subscription/${s.id}`));
      expect((await tx([{ resource: { ...again, status: 'requested' }, request: { method: 'PUT', url: `Subscription/${s.id}` } }, post(encounter('planned'))])).status).toBe(200);
      await drain();
      expect(kinds(received()).sort()).toEqual(['event-notification 1', 'event-notification 2', 'handshake 2']);
      // Deleted with an Encounter: nothing is left waiting for it.
      expect((await tx([{ request: { method: 'DELETE', url: `Subscription/${s.id}` } }, post(encounter('planned'))])).status).toBe(200);
      expect(await t.store.subscriptions.waiting()).toBe(0);
      await drain();
      expect(received()).toEqual([]);
      // Another owner's activation in the transaction that writes an event: the event is written first and waits, matched with
      // the earlier owner's reach, so it is dropped as one written by an earlier request is.
      const r = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      await drain();
      received();
      const patientToken = await craftToken(t, 'patient/Encounter.crs user/Subscription.cruds', { patient: 'pa' });
      const current = await json(call('GET', `Subscription/${r.id}`));
      const other = receiver();
      try {
        const moved = await tx([
          { resource: { ...current, status: 'requested', channel: { ...(current.channel as Json), endpoint: other.url } }, request: { method: 'PUT', url: `Subscription/${r.id}` } },
          post(encounter('planned')),
        ], patientToken);
        expect(moved.status).toBe(200);
        await drain();
        expect(kinds(other.got.splice(0).map((x) => JSON.parse(x.body) as Json))).toEqual(['handshake 1']);
        expect(received()).toEqual([]);
        // Numbered and kept for $events, as an event written by an earlier request would be.
        const events = await json(call('GET', `Subscription/${r.id}/$events`));
        expect((((events.entry as Json[])[0]!.resource as Json).parameter as Json[]).filter((x) => x.name === 'notification-event')).toHaveLength(1);
      } finally {
        other.stop();
      }
      await off(r);
    });

    test('concurrent updates of Subscriptions on a pool of two connections all answer: activation reads nothing outside the write', async () => {
      const subs = [];
      for (let i = 0; i < 4; i++) subs.push(await subscribe(topicSubscription(hook.url, CHANGES, 'id-only')));
      await drain();
      received();
      // A server whose PostgreSQL pool holds two connections: each update's transaction holds one while it activates.
      const small = target.kind === 'postgres' ? createPostgresStore(database.url, { max: 2 }) : database.open();
      try {
        const second = await secondServer(t, () => small);
        const updates = Promise.all(subs.map(async (s) => {
          const current = await json(call('GET', `Subscription/${s.id}`));
          return (await second(`${t.fhir()}/Subscription/${s.id}`, fhirInit(token, 'PUT', { ...current, reason: 'moved on' }))).status;
        }));
        const stalled = new Promise<string>((r) => setTimeout(() => r('stalled'), 10_000));
        expect(await Promise.race([updates, stalled])).toEqual([200, 200, 200, 200]);
      } finally {
        await small.close();
      }
      for (const s of subs) await off(s);
    });

    test("an event another server matched with the earlier owner's reach, after another owner's activation, is numbered and kept for $events, and not sent", async () => {
      const patientToken = await craftToken(t, 'patient/Encounter.rs user/Subscription.cruds', { patient: 'pa' });
      const secondStore = database.open();
      const other = receiver();
      try {
        // Server B (CINDER_PROCESSES=2) keeps its compiled Subscriptions CHECK_INTERVAL_MS: the clock stands still meanwhile.
        const second = await secondServer(t, () => secondStore);
        const viaSecond = async (patient: string) => expect((await second(`${t.fhir()}/Encounter`, fhirInit(token, 'POST', encounter('planned', patient)))).status).toBe(201);
        const s = await subscribe(topicSubscription(hook.url, CHANGES, 'full-resource'));
        await drain();
        received();
        const kinds = (bundles: Json[]) => bundles.map((b) => {
          const p = (b.entry as Json[])[0]!.resource as Json;
          const focus = part(p, 'focus') ? ` ${(((b.entry as Json[])[1]!.resource as Json).subject as Json).reference}` : '';
          return `${param(p, 'type')!.valueCode} ${param(p, 'events-since-subscription-start')!.valueString}${focus}`;
        });
        const got = () => kinds(other.got.splice(0).map((r) => JSON.parse(r.body) as Json));
        // B reads the Subscription, the admin its owner.
        await viaSecond('pb');
        await drain();
        expect(kinds(received())).toEqual(['event-notification 1 Patient/pb']);
        // The patient app activates it with its own endpoint through A; B matches the next write with the admin's reach.
        const current = await json(call('GET', `Subscription/${s.id}`));
        const moved = { ...current, status: 'requested', channel: { ...(current.channel as Json), endpoint: other.url } };
        expect((await call('PUT', `Subscription/${s.id}`, moved, patientToken)).status).toBe(200);
        await viaSecond('pb');
        await drain();
        expect(got()).toEqual(['handshake 2']);
        expect(received()).toEqual([]);
        // Once B has read it again, its writes are matched with the patient app's reach; the count went on.
        t.clock.advance(CHECK_INTERVAL_MS);
        await viaSecond('pb');
        await viaSecond('pa');
        await drain();
        expect(got()).toEqual(['event-notification 3 Patient/pa']);
        expect(received()).toEqual([]);
        const events = await json(call('GET', `Subscription/${s.id}/$events?content=id-only`));
        const status = (events.entry as Json[])[0]!.resource as Json;
        expect((status.parameter as Json[]).filter((x) => x.name === 'notification-event').map((x) => (x.part as Json[]).find((p) => p.name === 'event-number')!.valueString)).toEqual(['1', '2', '3']);
        await off(s);
      } finally {
        other.stop();
        await secondStore.close();
      }
    });

    test('the CapabilityStatement lists $status on Subscription and instantiates the IG server statement', async () => {
      const cs = await json(call('GET', 'metadata'));
      const subscription = ((cs.rest as Json[])[0]!.resource as Json[]).find((r) => r.type === 'Subscription')!;
      expect(subscription.operation).toContainEqual({ name: 'status', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status' });
      expect(subscription.operation).toContainEqual({ name: 'events', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-events' });
      expect(cs.instantiates).toContain('http://hl7.org/fhir/uv/subscriptions-backport/CapabilityStatement/backport-subscription-server-r4');
    });

    test('heartbeats: one after each heartbeat period without a notification, until the Subscription is off', async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only', [], { extension: [{ url: `${BP}backport-heartbeat-period`, valueUnsignedInt: 60 }] }));
      await drain();
      expect(received().map((b) => param((b.entry as Json[])[0]!.resource as Json, 'type')!.valueCode)).toEqual(['handshake']);
      t.clock.advance(59_000);
      await drain();
      expect(received()).toEqual([]);
      t.clock.advance(2_000);
      await drain();
      const [beat] = received();
      const p = (beat!.entry as Json[])[0]!.resource as Json;
      expect([param(p, 'type')!.valueCode, param(p, 'events-since-subscription-start')!.valueString, (beat!.entry as Json[]).length]).toEqual(['heartbeat', '0', 1]);
      // An event restarts the period; so does a heartbeat.
      t.clock.advance(30_000);
      await call('POST', 'Encounter', encounter('planned'));
      t.clock.advance(40_000);
      await drain();
      expect(received().map((b) => param((b.entry as Json[])[0]!.resource as Json, 'type')!.valueCode)).toEqual(['event-notification']);
      t.clock.advance(21_000);
      await drain();
      expect(received().map((b) => param((b.entry as Json[])[0]!.resource as Json, 'events-since-subscription-start')!.valueString)).toEqual(['1']);
      await off(s);
      t.clock.advance(600_000);
      await drain();
      expect(received()).toEqual([]);
      token = await t.token();
    });

    test('$status answers a searchset of SubscriptionStatus; event numbers are kept by the database for another app on it', async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      await call('POST', 'Encounter', encounter('planned'));
      await call('POST', 'Encounter', encounter('planned'));
      await drain();
      received();
      const status = await json(call('GET', `Subscription/${s.id}/$status`));
      expect([status.resourceType, status.type, status.total]).toEqual(['Bundle', 'searchset', 1]);
      const p = (status.entry as Json[])[0]!.resource as Json;
      expect([param(p, 'type')!.valueCode, param(p, 'status')!.valueCode, param(p, 'topic')!.valueCanonical, param(p, 'events-since-subscription-start')!.valueString])
        .toEqual(['query-status', 'active', CHANGES, '2']);
      const posted = await json(call('POST', `Subscription/${s.id}/$status`, { resourceType: 'Parameters' }));
      expect(posted.total).toBe(1);
      const typeLevel = await json(call('GET', `Subscription/$status?id=${s.id}`));
      expect((typeLevel.entry as Json[]).map((x) => (param(x.resource as Json, 'subscription')!.valueReference as Json).reference)).toEqual([`${t.fhir()}/Subscription/${s.id}`]);
      expect((await call('GET', 'Subscription/nope/$status')).status).toBe(404);
      expect((await call('GET', 'Subscription/$status?bogus=1')).status).toBe(400);
      expect((await call('GET', `Subscription/${s.id}/$status`, undefined, await craftToken(t, 'patient/*.rs', { patient: 'pa' }))).status).toBe(403);

      // Another app on the same database (a restart): the next event is number 3.
      const other = createApp({ config: t.config, store: database.open(), keys: t.keys, clock: t.clock, log: silentLogger, core: testCoreBundle() });
      const res = await other.request(`${t.fhir()}/Encounter`, fhirInit(token, 'POST', encounter('planned')));
      expect(res.status).toBe(201);
      await drain(other);
      const [next] = received();
      expect(part((next!.entry as Json[])[0]!.resource as Json, 'event-number')!.valueString).toBe('3');
      await off(s);
    });

    test('fhirPathCriteria is evaluated with %previous and %current, alone or with queryCriteria (both must pass); one failing at run time fails no write', async () => {
      const FP = 'http://example.org/topics/encounter-fhirpath';
      const BOTH = 'http://example.org/topics/encounter-both';
      const topic = (url: string, trigger: Json[]) => ({
        resourceType: 'Basic', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, { url: `${X5}resourceTrigger`, extension: [sub('resource', { valueUri: 'Encounter' }), ...trigger] }],
      });
      // Finished now and not before (a creation has no %previous), a cancelled one deleted, or one identified 'boom'
      // (single() on two identifiers is a run-time error).
      const expression = "(%current.status = 'finished' and %previous.where(status = 'finished').empty()) or (%current.empty() and %previous.status = 'cancelled')"
        + " or (%current.identifier.single().value = 'boom')";
      expect((await call('POST', 'Basic', topic(FP, [sub('fhirPathCriteria', { valueString: expression })]))).status).toBe(201);
      expect((await call('POST', 'Basic', topic(BOTH, [
        { url: 'queryCriteria', extension: [sub('current', { valueString: 'status=finished' }), sub('resultForDelete', { valueCode: 'test-fails' })] },
        sub('fhirPathCriteria', { valueString: '%current.identifier.exists()' }),
      ]))).status).toBe(201);
      const fp = await subscribe(topicSubscription(hook.url, FP, 'id-only'));
      const both = await subscribe(topicSubscription(hook.url, BOTH, 'id-only'));
      await drain();
      received();
      const id = (value: string) => ({ system: 'urn:x', value });
      const finished = await json(call('POST', 'Encounter', encounter('finished')));
      const planned = await json(call('POST', 'Encounter', encounter('planned')));
      const cancelled = await json(call('POST', 'Encounter', encounter('cancelled')));
      const boom = await json(call('POST', 'Encounter', encounter('planned', 'pa', { identifier: [id('boom')] })));
      const twice = await call('POST', 'Encounter', encounter('planned', 'pa', { identifier: [id('a'), id('b')] }));
      expect(twice.status).toBe(201);
      const identified = await json(call('POST', 'Encounter', encounter('finished', 'pa', { identifier: [id('c')] })));
      await call('PUT', `Encounter/${planned.id}`, { ...planned, status: 'finished' });
      await call('PUT', `Encounter/${finished.id}`, { ...finished, period: { start: '2026-01-01' } });
      expect((await call('DELETE', `Encounter/${cancelled.id}`)).status).toBe(200);
      expect((await call('DELETE', `Encounter/${planned.id}`)).status).toBe(200);
      await drain();
      const got = received();
      const foci = (url: string) => got.filter((b) => param((b.entry as Json[])[0]!.resource as Json, 'topic')?.valueCanonical === url)
        .map((b) => `${((b.entry as Json[])[1]!.request as Json).method} ${(b.entry as Json[])[1]!.fullUrl}`);
      const at = (e: Json) => `${t.fhir()}/Encounter/${e.id}`;
      expect(foci(FP)).toEqual([`POST ${at(finished)}`, `POST ${at(boom)}`, `POST ${at(identified)}`, `PUT ${at(planned)}`, `DELETE ${at(cancelled)}`]);
      // queryCriteria (finished) and fhirPathCriteria (identified) both: the finished ones without an identifier are not told.
      expect(foci(BOTH)).toEqual([`POST ${at(identified)}`]);
      await off(fp);
      await off(both);
    });

    test('a fhirPathCriteria is evaluated once per write for all the Subscriptions of its topic', async () => {
      const ONCE = 'http://example.org/topics/encounter-once';
      const topic = {
        resourceType: 'Basic', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: ONCE }, { url: `${X5}status`, valueCode: 'active' }, {
          url: `${X5}resourceTrigger`,
          // single() on two identifiers fails as it runs: each evaluation is logged.
          extension: [sub('resource', { valueUri: 'Encounter' }), sub('fhirPathCriteria', { valueString: "%current.identifier.single().value = 'once'" })],
        }],
      };
      expect((await call('POST', 'Basic', topic)).status).toBe(201);
      const subs = [await subscribe(topicSubscription(hook.url, ONCE, 'id-only')), await subscribe(topicSubscription(hook.url, ONCE, 'id-only')), await subscribe(topicSubscription(hook.url, ONCE, 'id-only'))];
      await drain();
      received();
      // Another app on the database, whose log is read: its write is matched by its own hub.
      const failures: unknown[] = [];
      const log = { ...silentLogger, warn: (msg: string, fields?: unknown) => { if (msg.includes('fhirPathCriteria could not be evaluated')) failures.push(fields); } };
      const other = createApp({ config: t.config, store: database.open(), keys: t.keys, clock: t.clock, log: { ...log, child: () => log }, core: testCoreBundle() });
      const identifier = [{ system: 'urn:x', value: 'a' }, { system: 'urn:x', value: 'b' }];
      expect((await other.request(`${t.fhir()}/Encounter`, fhirInit(token, 'POST', encounter('planned', 'pa', { identifier })))).status).toBe(201);
      expect(failures.length).toBe(1);
      for (const s of subs) await off(s);
    });

    test('a fhirPathCriteria is held to its budget by the length of the strings it works on: one going over a large narrative again and again fails no write and passes no trigger', async () => {
      const COSTLY = 'http://example.org/topics/encounter-costly';
      const topic = {
        resourceType: 'Basic', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: COSTLY }, { url: `${X5}status`, valueCode: 'active' }, {
          url: `${X5}resourceTrigger`,
          // 400 identifiers, each lowering a narrative of 500,000 characters: 200,000,000 characters for 1,000 values visited.
          extension: [sub('resource', { valueUri: 'Encounter' }), sub('fhirPathCriteria', { valueString: "%current.identifier.select(%current.text.div.lower()).count() > 0 or %current.status = 'cancelled'" })],
        }],
      };
      expect((await call('POST', 'Basic', topic)).status).toBe(201);
      const costly = await subscribe(topicSubscription(hook.url, COSTLY, 'id-only'));
      await drain();
      received();
      const identifier = Array.from({ length: 400 }, (_, i) => ({ system: 'urn:x', value: `v${i}` }));
      const text = { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${'A'.repeat(500_000)}</div>` };
      const big = await call('POST', 'Encounter', encounter('planned', 'pa', { identifier, text }));
      expect(big.status).toBe(201);
      const small = await json(call('POST', 'Encounter', encounter('cancelled')));
      await drain();
      const foci = received().filter((b) => param((b.entry as Json[])[0]!.resource as Json, 'topic')?.valueCanonical === COSTLY)
        .map((b) => (b.entry as Json[])[1]!.fullUrl);
      expect(foci).toEqual([`${t.fhir()}/Encounter/${small.id}`]);
      await off(costly);
    });

    test.if(target.kind === 'postgres')('an event numbered after another carries no earlier timestamp, though its write took its time first and waited for the count', async () => {
      const s = await subscribe(topicSubscription(hook.url, CHANGES, 'id-only'));
      const x = await json(call('POST', 'Encounter', encounter('planned')));
      // Another process's write, whose time is a minute later (its clock, or it took it later), numbers an event
      // of the Subscription and holds its count's row until it commits.
      const later = t.clock.now() + 60_000;
      const holder = database.open();
      const raw = postgres(database.url, { max: 1 });
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const lockTaken = new Promise<void>((r) => (locked = r));
      const holding = holder.resources.write('t1', async (w) => {
        await w.notify([{ subscriptionId: s.id as string, type: 'Encounter', id: x.id as string, versionId: 1, event: 'update' }], later);
        locked();
        await held;
      });
      try {
        await lockTaken;
        // This write takes its time now, then waits for the count.
        const waiting = call('POST', 'Encounter', encounter('planned'));
        for (let i = 0; i < 300; i++) {
          const [row] = await raw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`;
          if (row!.n > 0) break;
          await Bun.sleep(10);
        }
        release();
        await holding;
        const e = await json(waiting);
        const events = await json(call('GET', `Subscription/${s.id}/$events`));
        const foci = (events.entry as Json[]).slice(1).map((entry) => (entry.fullUrl as string).split('/').pop());
        expect(foci.slice(-2)).toEqual([x.id, e.id]);
        // Each event's number and timestamp, as the SubscriptionStatus lists them: the last one no earlier than the one before.
        const status = (events.entry as Json[])[0]!.resource as Json;
        const listed = ((status.parameter as Json[]).filter((p) => p.name === 'notification-event'))
          .map((p) => (p.part as Json[]).reduce<Json>((o, q) => ({ ...o, [q.name as string]: q.valueString ?? q.valueInstant }), {}));
        expect(listed.slice(-2).map((ev) => ev.timestamp)).toEqual([new Date(later).toISOString(), new Date(later).toISOString()]);
        expect(Number(listed.at(-1)!['event-number'])).toBe(Number(listed.at(-2)!['event-number']) + 1);
      } finally {
        release();
        await holding.catch(() => undefined);
        await raw.end();
        await holder.close();
      }
      await drain();
      received();
      await off(s);
    });

    test('a transaction that creates a topic and a Subscription to it succeeds (the Subscription, in any entry order of one method, finds it); a batch acts as separate requests', async () => {
      const topicAt = (url: string): Json => ({ ...changesTopic, extension: [{ url: `${X5}url`, valueUri: url }, ...(changesTopic.extension as Json[]).slice(1)] });
      const entry = (resource: Json, method: string, url: string, fullUrl?: string) => ({ ...(fullUrl && { fullUrl }), resource, request: { method, url } });
      const bundle = (type: string, entries: Json[]) => call('POST', '', { resourceType: 'Bundle', type, entry: entries });
      // The Subscription listed first: a transaction writes its POSTs with the Subscriptions after the topic.
      const TX = 'http://example.org/topics/in-a-transaction';
      const res = await bundle('transaction', [
        entry(topicSubscription(hook.url, TX, 'id-only'), 'POST', 'Subscription'),
        entry(topicAt(TX), 'POST', 'Basic', 'urn:uuid:5e0c1f6e-0e0a-4c1e-9a57-6a1b1f0b7c01'),
      ]);
      expect(res.status).toBe(200);
      const out = (await json(res)).entry as Json[];
      expect(out.map((e) => (e.response as Json).status)).toEqual(['201 Created', '201 Created']);
      expect((out[0]!.resource as Json).status).toBe('requested');
      const s = out[0]!.resource as Json;
      await drain();
      received();
      const e = await json(call('POST', 'Encounter', encounter('planned')));
      await drain();
      const focus = received().filter((b) => param((b.entry as Json[])[0]!.resource as Json, 'topic')?.valueCanonical === TX).map((b) => (b.entry as Json[])[1]!.fullUrl);
      expect(focus).toEqual([`${t.fhir()}/Encounter/${e.id}`]);
      await off(s);
      // FHIR's order holds across methods: POSTs before PUTs, so a POSTed Subscription does not see a topic PUT in the same transaction.
      const LATE = 'http://example.org/topics/put-after';
      await refused('', { resourceType: 'Bundle', type: 'transaction', entry: [
        entry({ ...topicAt(LATE), id: 'late-topic' }, 'PUT', 'Basic/late-topic'),
        entry(topicSubscription(hook.url, LATE, 'id-only'), 'POST', 'Subscription'),
      ] }, 'Bundle.entry[1].resource.criteria');
      expect((await call('GET', 'Basic/late-topic')).status).toBe(404);
      // A topic the transaction deletes is gone for a Subscription written after the deletion.
      const GONE = 'http://example.org/topics/deleted-in-transaction';
      const gone = await json(call('POST', 'Basic', topicAt(GONE)));
      await refused('', { resourceType: 'Bundle', type: 'transaction', entry: [
        entry(topicSubscription(hook.url, GONE, 'id-only'), 'POST', 'Subscription'),
        { request: { method: 'DELETE', url: `Basic/${gone.id}` } },
      ] }, 'Bundle.entry[0].resource.criteria');
      expect((await call('GET', `Basic/${gone.id}`)).status).toBe(200);
      expect((await call('DELETE', `Basic/${gone.id}`)).status).toBe(200);
      // A batch: each entry its own request, in entry order: a Subscription before its topic is refused, after it accepted.
      const B1 = 'http://example.org/topics/batch-first';
      const B2 = 'http://example.org/topics/batch-second';
      const batched = await bundle('batch', [
        entry(topicSubscription(hook.url, B1, 'id-only'), 'POST', 'Subscription'),
        entry(topicAt(B1), 'POST', 'Basic'),
        entry(topicAt(B2), 'POST', 'Basic'),
        entry(topicSubscription(hook.url, B2, 'id-only'), 'POST', 'Subscription'),
      ]);
      expect(batched.status).toBe(200);
      const batchOut = (await json(batched)).entry as Json[];
      expect(batchOut.map((x) => (x.response as Json).status)).toEqual(['422 Unprocessable Entity', '201 Created', '201 Created', '201 Created']);
      expect(((batchOut[0]!.response as Json).outcome as Json).issue).toMatchObject([{ expression: ['Bundle.entry[0].resource.criteria'] }]);
      await off(batchOut[3]!.resource as Json);
    });
  });
}
