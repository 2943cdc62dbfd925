/**
 * The checks of Inferno's Subscriptions test kit (inferno-framework/subscriptions-test-kit, suite
 * subscriptions_r5_backport_r4_server: R5 Backport IG 1.1.0 on R4) made through the public interface, each
 * as the kit makes it: the CapabilityStatement and topic discovery, the rejection of Subscriptions Cinder
 * cannot honour (201 with the value unchanged fails), the creation response (`requested` for a rest-hook),
 * the handshake, heartbeats, event notifications per payload content (every entry with `request` and
 * `response`, the status entry's request a `$status` one, focus and additional-context resolving to entries),
 * the headers sent (Content-Type per channel.payload, each channel.header with its value) and `$status`.
 * The kit's validation is reproduced as R4 validation by `$validate` and, for the IG's SubscriptionStatus profile,
 * as its slices' names and value types. On both databases, to a real receiver.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';

interface Received {
  method: string;
  headers: Headers;
  body: Json;
}

/** A rest-hook receiver on 127.0.0.1 recording what it is sent; it answers `answer`. */
function receiver(answer = 200) {
  const got: Received[] = [];
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      got.push({ method: req.method, headers: req.headers, body: (await req.json()) as Json });
      return new Response(null, { status: answer });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/notification_listener`, got, stop: () => server.stop(true) };
}

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const STATUS_PROFILE = `${BP}backport-subscription-status-r4`;
const CANONICAL = `${BP}capabilitystatement-subscriptiontopic-canonical`;
const ADMISSION = 'http://example.org/topics/encounter-admission';

const ext = (url: string, value: Json) => ({ url, ...value });

/** A topic of every Encounter create and update, filtered by patient, whose notificationShape includes the patient. */
function topic(url: string, status?: string): Json {
  return {
    resourceType: 'Basic',
    code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
    extension: [
      { url: `${X5}url`, valueUri: url },
      ...(status === undefined ? [] : [{ url: `${X5}status`, valueCode: status }]),
      { url: `${X5}resourceTrigger`, extension: [ext('resource', { valueUri: 'Encounter' }), ext('supportedInteraction', { valueCode: 'create' }), ext('supportedInteraction', { valueCode: 'update' })] },
      { url: `${X5}canFilterBy`, extension: [ext('resource', { valueUri: 'Encounter' }), ext('filterParameter', { valueString: 'patient' })] },
      { url: `${X5}notificationShape`, extension: [ext('resource', { valueUri: 'Encounter' }), ext('include', { valueString: 'Encounter:patient' })] },
    ],
  };
}

const TOKEN_HEADER = 'Authorization: Bearer SAMPLE_TOKEN';

/** The kit's workflow Subscription (its presets' shape), to `endpoint`, with payload content `content`. */
function workflowSubscription(endpoint: string, content: string, channel: Json = {}): Json {
  return {
    resourceType: 'Subscription',
    meta: { profile: [`${BP}backport-subscription`] },
    status: 'requested',
    reason: 'R4 Topic-Based Workflow Subscription for Patient Admission',
    criteria: ADMISSION,
    _criteria: { extension: [{ url: `${BP}backport-filter-criteria`, valueString: 'Encounter?patient=Patient/123' }] },
    channel: {
      extension: [{ url: `${BP}backport-timeout`, valueUnsignedInt: 60 }, { url: `${BP}backport-max-count`, valuePositiveInt: 20 }],
      type: 'rest-hook',
      header: [TOKEN_HEADER, 'X-Session: a: b'],
      endpoint,
      payload: 'application/fhir+json',
      _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: content }] },
      ...channel,
    },
  };
}

const encounter = (status: string) => ({
  resourceType: 'Encounter', status, class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'IMP' }, subject: { reference: 'Patient/123' },
});

const params = (p: Json, name: string) => ((p.parameter ?? []) as Json[]).filter((x) => x.name === name);
const param = (p: Json, name: string) => params(p, name)[0];
const parts = (event: Json, name: string) => ((event.part ?? []) as Json[]).filter((x) => x.name === name);

/** The value element each SubscriptionStatus parameter (and notification-event part) has in backport-subscription-status-r4. */
const STATUS_SLICES: Record<string, string> = {
  subscription: 'valueReference', topic: 'valueCanonical', status: 'valueCode', type: 'valueCode',
  'events-since-subscription-start': 'valueString', error: 'valueCodeableConcept',
};
const EVENT_PARTS: Record<string, string> = { 'event-number': 'valueString', timestamp: 'valueInstant', focus: 'valueReference', 'additional-context': 'valueReference' };

/** What breaks the profile's slices: unknown names, wrong value types, the required ones missing or repeated. */
function statusProblems(p: Json): string[] {
  const out: string[] = [];
  if (p.resourceType !== 'Parameters') out.push(`a ${String(p.resourceType)}`);
  for (const x of (p.parameter ?? []) as Json[]) {
    const name = x.name as string;
    if (name === 'notification-event') {
      for (const q of (x.part ?? []) as Json[]) if (!(EVENT_PARTS[q.name as string] && EVENT_PARTS[q.name as string]! in q)) out.push(`part ${String(q.name)}`);
      if (parts(x, 'event-number').length !== 1) out.push('event-number');
    } else if (!(STATUS_SLICES[name] && STATUS_SLICES[name]! in x)) out.push(`parameter ${name}`);
  }
  for (const required of ['subscription', 'status', 'type']) if (params(p, required).length !== 1) out.push(`${required} x${params(p, required).length}`);
  return out;
}

/**
 * The kit's notification_verification: a history Bundle, every entry with `request` and `response`, the first
 * a SubscriptionStatus of `type` (and `status`) whose request is Subscription/{id}/$status.
 */
function notificationProblems(bundle: Json, type: string, id: string, status?: string): string[] {
  const out: string[] = [];
  if (bundle.type !== 'history') out.push(`type ${String(bundle.type)}`);
  const entries = (bundle.entry ?? []) as Json[];
  entries.forEach((e, i) => {
    if (!e.request) out.push(`entry ${i + 1} has no request`);
    if (!e.response) out.push(`entry ${i + 1} has no response`);
  });
  const first = entries[0];
  if (!String((first?.request as Json | undefined)?.url ?? '').endsWith(`Subscription/${id}/$status`)) out.push('the status entry\'s request is not $status');
  const p = (first?.resource ?? {}) as Json;
  out.push(...statusProblems(p));
  if (param(p, 'type')?.valueCode !== type) out.push(`type ${String(param(p, 'type')?.valueCode)}`);
  if (status !== undefined && param(p, 'status')?.valueCode !== status) out.push(`status ${String(param(p, 'status')?.valueCode)}`);
  return out;
}

/** The kit's notification_header_verification: Content-Type starts with channel.payload; each channel.header sent with its value. */
function headerProblems(r: Received, sub: Json): string[] {
  const channel = sub.channel as Json;
  const out: string[] = [];
  if (!(r.headers.get('content-type') ?? '').startsWith(channel.payload as string)) out.push(`Content-Type ${r.headers.get('content-type')}`);
  for (const line of channel.header as string[]) {
    const at = line.indexOf(': ');
    if (r.headers.get(line.slice(0, at)) !== line.slice(at + 2)) out.push(`${line} sent as ${r.headers.get(line.slice(0, at))}`);
  }
  return out;
}

/** The kit's bundle_entry_reference_valid?: a reference resolves to an entry by its `Type/id` (or its fullUrl, for a urn). */
function resolves(entries: Json[], reference: string): boolean {
  return entries.some((e) => reference.startsWith('urn:') ? e.fullUrl === reference
    : e.resource !== undefined && reference.includes(`${(e.resource as Json).resourceType}/${(e.resource as Json).id}`));
}

await eachStore((kind, fresh) => {
  describe(`the Subscriptions test kit's server checks (${kind})`, () => {
    let t: TestApp;
    let token: string;
    let hook: ReturnType<typeof receiver>;
    const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    const json = async (res: Response | Promise<Response>) => (await (await res).json()) as Json;
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };
    /** The kit's assert_valid_resource, as far as R4 goes (Cinder's $validate; the IG's profiles are checked by statusProblems). */
    const invalid = async (resource: Json) => ((await json(call('POST', `${String(resource.resourceType)}/$validate`, resource))).issue as Json[])
      .filter((i) => i.severity === 'error' || i.severity === 'fatal').map((i) => (i.details as Json | undefined)?.text);
    /** What the receiver got for Subscription `s` since the last call (the kit tags each by its status's subscription). */
    const sentTo = (s: Json, from = hook) => {
      const mine = (r: Received) => (param((r.body.entry as Json[])[0]!.resource as Json, 'subscription')?.valueReference as Json | undefined)?.reference === `${t.fhir()}/Subscription/${s.id}`;
      const out = from.got.filter(mine);
      from.got.length = 0;
      return out;
    };
    /** Subscriptions the kit saw created (201), as its topic discovery check reads them. */
    const created: Json[] = [];
    const create = async (body: Json) => {
      const res = await call('POST', 'Subscription', body);
      const out = await json(res);
      if (res.status === 201) created.push(out);
      return { status: res.status, body: out };
    };
    const off = async (s: Json) => {
      const current = await json(call('GET', `Subscription/${s.id}`));
      expect((await call('PUT', `Subscription/${s.id}`, { ...current, status: 'off' })).status).toBe(200);
    };
    /** The kit's send_unsupported_subscription: a 201 whose `paths` all kept the values sent is a failure. */
    const rejected = async (body: Json, paths: string[][]) => {
      const res = await create(body);
      if (res.status === 201) await off(res.body);
      const kept = paths.every((path) => JSON.stringify(path.reduce<unknown>((o, k) => (o as Json)?.[k], res.body)) === JSON.stringify(path.reduce<unknown>((o, k) => (o as Json)?.[k], body)));
      return { status: res.status, refused: res.status !== 201 || !kept, expression: ((res.body.issue as Json[] | undefined)?.[0]?.expression as string[] | undefined)?.[0] };
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
      hook = receiver();
      expect((await call('POST', 'Basic', topic(ADMISSION, 'active'))).status).toBe(201);
      expect((await call('PUT', 'Patient/123', { resourceType: 'Patient', id: '123', name: [{ family: 'Admitted' }] })).status).toBe(201);
    });
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    test('creation response: a rest-hook Subscription is created requested (@29); the handshake it is sent is conformant, requested (@14, @15, @70); accepted, it is active (@30)', async () => {
      const res = await create(workflowSubscription(hook.url, 'id-only'));
      expect(res.status).toBe(201);
      const s = res.body;
      expect([s.resourceType, (s.channel as Json).type, s.status]).toEqual(['Subscription', 'rest-hook', 'requested']);
      await drain();
      const got = sentTo(s);
      expect(got.length).toBe(1);
      expect(notificationProblems(got[0]!.body, 'handshake', s.id as string, 'requested')).toEqual([]);
      expect(headerProblems(got[0]!, s)).toEqual([]);
      expect(got[0]!.method).toBe('POST');
      expect((got[0]!.body.entry as Json[]).length).toBe(1);
      expect(await invalid(got[0]!.body)).toEqual([]);
      // Accepted: a new version, active, as read and as $status tells it (the kit's $status check: a searchset naming it).
      const read = await json(call('GET', `Subscription/${s.id}`));
      expect([read.status, (read.meta as Json).versionId]).toEqual(['active', '2']);
      const status = await json(call('GET', `Subscription/${s.id}/$status`));
      expect([status.type, (status.entry as Json[]).length]).toEqual(['searchset', 1]);
      expect(await invalid(status)).toEqual([]);
      const p = (status.entry as Json[])[0]!.resource as Json;
      expect(statusProblems(p)).toEqual([]);
      expect([(param(p, 'subscription')!.valueReference as Json).reference, param(p, 'status')!.valueCode]).toEqual([`${t.fhir()}/Subscription/${s.id}`, 'active']);
      await off(s);
    });

    test('an event matched while the Subscription awaits its handshake is numbered and sent after it, the Subscription then active', async () => {
      const { body: s } = await create(workflowSubscription(hook.url, 'id-only'));
      expect((await call('POST', 'Encounter', encounter('in-progress'))).status).toBe(201);
      const status = (((await json(call('GET', `Subscription/${s.id}/$status`))).entry as Json[])[0]!.resource) as Json;
      expect([param(status, 'status')!.valueCode, param(status, 'events-since-subscription-start')!.valueString]).toEqual(['requested', '1']);
      await drain();
      // Each counts the events generated when it is sent (the handshake too: the event came first).
      const got = sentTo(s).map((r) => (r.body.entry as Json[])[0]!.resource as Json);
      expect(got.map((p) => [param(p, 'type')!.valueCode, param(p, 'status')!.valueCode, param(p, 'events-since-subscription-start')!.valueString]))
        .toEqual([['handshake', 'requested', '1'], ['event-notification', 'active', '1']]);
      await off(s);
    });

    test('written requested again by its owner (moving its endpoint), it is verified first: the new handshake, then what waited, then active', async () => {
      const { body: s } = await create(workflowSubscription(hook.url, 'id-only'));
      await drain();
      sentTo(s);
      // An event waits (not yet delivered) when the owner moves the endpoint: the same owner keeps what waits.
      expect((await call('POST', 'Encounter', encounter('in-progress'))).status).toBe(201);
      const moved = receiver();
      try {
        const current = await json(call('GET', `Subscription/${s.id}`));
        const res = await call('PUT', `Subscription/${s.id}`, { ...current, status: 'requested', channel: { ...(current.channel as Json), endpoint: moved.url } });
        expect([res.status, (await json(res)).status]).toEqual([200, 'requested']);
        await drain();
        const got = sentTo(s, moved).map((r) => (r.body.entry as Json[])[0]!.resource as Json);
        expect(got.map((p) => [param(p, 'type')!.valueCode, param(p, 'status')!.valueCode])).toEqual([['handshake', 'requested'], ['event-notification', 'active']]);
        expect(sentTo(s)).toEqual([]);
        await off(s);
      } finally {
        moved.stop();
      }
    });

    test('a handshake that fails puts the Subscription in error at once, never active (@31), saying why; no event is sent to it', async () => {
      const failing = receiver(500);
      try {
        const { body: s } = await create(workflowSubscription(failing.url, 'id-only'));
        expect(s.status).toBe('requested');
        await call('POST', 'Encounter', encounter('in-progress'));
        await drain();
        const read = await json(call('GET', `Subscription/${s.id}`));
        expect([read.status, read.error]).toEqual(['error', `the handshake failed: POST ${failing.url} answered 500`]);
        const status = (((await json(call('GET', `Subscription/${s.id}/$status`))).entry as Json[])[0]!.resource) as Json;
        expect([param(status, 'status')!.valueCode, (param(status, 'error')!.valueCodeableConcept as Json).text]).toEqual(['error', read.error]);
        // Nothing more is sent to it: not the event, no retry.
        t.clock.advance(120_000);
        await drain();
        expect(sentTo(s, failing).map((r) => param((r.body.entry as Json[])[0]!.resource as Json, 'type')!.valueCode)).toEqual(['handshake']);
        // Requested again, it is sent a new handshake.
        failing.stop();
        const ok = await call('PUT', `Subscription/${s.id}`, { ...read, status: 'requested', channel: { ...(read.channel as Json), endpoint: hook.url } });
        expect([ok.status, (await json(ok)).status]).toEqual([200, 'requested']);
        await drain();
        expect(sentTo(s).map((r) => param((r.body.entry as Json[])[0]!.resource as Json, 'type')!.valueCode)).toEqual(['handshake']);
        await off(s);
      } finally {
        failing.stop();
        token = await t.token();
      }
    });

    test('event notifications, id-only: the focus named and its entry with fullUrl, request and response, no resource (@40, @42); status active, headers sent (@26, @27)', async () => {
      const { body: s } = await create(workflowSubscription(hook.url, 'id-only'));
      await drain();
      hook.got.length = 0;
      const e = await json(call('POST', 'Encounter', encounter('in-progress')));
      await drain();
      const [r] = sentTo(s);
      expect(notificationProblems(r!.body, 'event-notification', s.id as string, 'active')).toEqual([]);
      expect(headerProblems(r!, s)).toEqual([]);
      expect(await invalid(r!.body)).toEqual([]);
      const entries = r!.body.entry as Json[];
      const events = params(entries[0]!.resource as Json, 'notification-event');
      expect(events.length).toBe(1);
      expect((parts(events[0]!, 'focus')[0]!.valueReference as Json).reference).toBe(`${t.fhir()}/Encounter/${e.id}`);
      expect(entries.slice(1).map((x) => [x.fullUrl, x.resource, (x.request as Json).method])).toEqual([[`${t.fhir()}/Encounter/${e.id}`, undefined, 'POST']]);
      await off(s);
    });

    test('event notifications, full-resource: topic present, the focus and each additional-context resolve to entries with their resources (@43, @44, @45, @101)', async () => {
      const { body: s } = await create(workflowSubscription(hook.url, 'full-resource', { payload: 'application/json' }));
      await drain();
      hook.got.length = 0;
      const e = await json(call('POST', 'Encounter', encounter('in-progress')));
      await call('PUT', `Encounter/${e.id}`, { ...e, status: 'finished' });
      await drain();
      const got = sentTo(s);
      expect(got.length).toBe(2);
      for (const r of got) {
        expect(notificationProblems(r.body, 'event-notification', s.id as string, 'active')).toEqual([]);
        expect(headerProblems(r, s)).toEqual([]);
        expect(await invalid(r.body)).toEqual([]);
        const entries = r.body.entry as Json[];
        const p = entries[0]!.resource as Json;
        expect(param(p, 'topic')?.valueCanonical).toBe(ADMISSION);
        const [event] = params(p, 'notification-event');
        const refs = [...parts(event!, 'focus'), ...parts(event!, 'additional-context')].map((x) => (x.valueReference as Json).reference as string);
        expect(refs).toEqual([`${t.fhir()}/Encounter/${e.id}`, `${t.fhir()}/Patient/123`]);
        expect(refs.filter((ref) => !resolves(entries.slice(1), ref))).toEqual([]);
        expect(entries.slice(1).every((x) => x.resource !== undefined)).toBe(true);
      }
      expect(got.map((r) => (((r.body.entry as Json[])[1]!.request as Json).method))).toEqual(['POST', 'PUT']);
      await off(s);
    });

    test('event notifications, empty: the status alone, without topic, focus or additional-context, with its notification-event (@38, @39, @99)', async () => {
      const { body: s } = await create(workflowSubscription(hook.url, 'empty'));
      await drain();
      hook.got.length = 0;
      await call('POST', 'Encounter', encounter('in-progress'));
      await drain();
      const [r] = sentTo(s);
      expect(notificationProblems(r!.body, 'event-notification', s.id as string, 'active')).toEqual([]);
      expect(await invalid(r!.body)).toEqual([]);
      const entries = r!.body.entry as Json[];
      const p = entries[0]!.resource as Json;
      const events = params(p, 'notification-event');
      expect([entries.length, param(p, 'topic') === undefined, events.length]).toEqual([1, true, 1]);
      expect([...parts(events[0]!, 'focus'), ...parts(events[0]!, 'additional-context')]).toEqual([]);
      await off(s);
    });

    test('heartbeats: conformant, and sent only to a Subscription with a heartbeat period (@93, @94)', async () => {
      const { body: beating } = await create(workflowSubscription(hook.url, 'id-only', { extension: [{ url: `${BP}backport-heartbeat-period`, valueUnsignedInt: 30 }] }));
      const { body: quiet } = await create(workflowSubscription(hook.url, 'id-only'));
      await drain();
      hook.got.length = 0;
      t.clock.advance(31_000);
      await drain();
      const all = [...hook.got];
      const got = sentTo(beating);
      expect([got.length, all.length]).toEqual([1, 1]);
      expect(notificationProblems(got[0]!.body, 'heartbeat', beating.id as string, 'active')).toEqual([]);
      expect(await invalid(got[0]!.body)).toEqual([]);
      await off(beating);
      await off(quiet);
      token = await t.token();
    });

    test('rejection: an unknown, draft, retired or status-less topic (@8, @75), an unsupported filter (@9, @63), channel type (@10), endpoint (@11), payload (@12) or channel and payload pair (@13), and a cross-version filter extension', async () => {
      const base = workflowSubscription(hook.url, 'id-only');
      const at = (change: (s: Json) => void) => {
        const s = structuredClone(base);
        change(s);
        return s;
      };
      for (const [url, status] of [['http://example.org/topics/draft', 'draft'], ['http://example.org/topics/retired', 'retired'], ['http://example.org/topics/unknown', 'unknown'], ['http://example.org/topics/no-status', undefined]] as const) {
        expect((await call('POST', 'Basic', topic(url, status))).status).toBe(201);
      }
      // Each check's outcome, compared at once: the kit runs them one by one, each failing alone.
      const CRITERIA = { status: 422, refused: true, expression: 'Subscription.criteria' };
      const FILTER = { status: 422, refused: true, expression: 'Subscription.criteria.extension[0]' };
      const outcomes = {
        'unknown topic': await rejected(at((s) => (s.criteria = 'http://example.org/topics/none')), [['criteria']]),
        'draft topic': await rejected(at((s) => (s.criteria = 'http://example.org/topics/draft')), [['criteria']]),
        'retired topic': await rejected(at((s) => (s.criteria = 'http://example.org/topics/retired')), [['criteria']]),
        'topic of status unknown': await rejected(at((s) => (s.criteria = 'http://example.org/topics/unknown')), [['criteria']]),
        'topic without a status': await rejected(at((s) => (s.criteria = 'http://example.org/topics/no-status')), [['criteria']]),
        'filter the topic does not offer': await rejected(at((s) => (s._criteria = { extension: [{ url: `${BP}backport-filter-criteria`, valueString: 'Encounter?status=finished' }] })), [['_criteria']]),
        // The kit's cross-version test: R5's filter extension, which Cinder does not read, is no filter it may leave out.
        'cross-version filter extension': await rejected(at((s) => (s._criteria = { extension: [{ url: 'http://hl7.org/fhir/5.0/subscriptions-backport/StructureDefinition/backport-filter-criteria', valueString: 'Encounter.patient=Patient/123' }] })), [['_criteria']]),
        'channel type email': await rejected(at((s) => ((s.channel as Json).type = 'email')), [['channel', 'type']]),
        'endpoint mailto:': await rejected(at((s) => ((s.channel as Json).endpoint = 'mailto:someone@example.org')), [['channel', 'endpoint']]),
        'payload text/plain': await rejected(at((s) => ((s.channel as Json).payload = 'text/plain')), [['channel', 'payload']]),
        'websocket with an XML payload': await rejected(at((s) => Object.assign(s.channel as Json, { type: 'websocket', payload: 'application/fhir+xml' })), [['channel', 'type'], ['channel', 'payload']]),
      };
      expect(outcomes).toEqual({
        'unknown topic': CRITERIA, 'draft topic': CRITERIA, 'retired topic': CRITERIA, 'topic of status unknown': CRITERIA, 'topic without a status': CRITERIA,
        'filter the topic does not offer': FILTER, 'cross-version filter extension': FILTER,
        'channel type email': { status: 422, refused: true, expression: 'Subscription.channel.type' },
        'endpoint mailto:': { status: 422, refused: true, expression: 'Subscription.channel.endpoint' },
        'payload text/plain': { status: 422, refused: true, expression: 'Subscription.channel.payload' },
        'websocket with an XML payload': { status: 422, refused: true, expression: 'Subscription.channel.payload' },
      });
    });

    test("the CapabilityStatement: Subscription names the backport profile (@52, @58), and topic discovery lists every topic a Subscription was created with (@2, @48), by its url or url|version", async () => {
      // A topic with a version, subscribed to by url|version: the kit looks for the criteria as written.
      const VERSIONED = 'http://example.org/topics/versioned';
      const versioned = topic(VERSIONED, 'active');
      (versioned.extension as Json[]).splice(1, 0, { url: `${X5}version`, valueString: '2.1' });
      expect((await call('POST', 'Basic', versioned)).status).toBe(201);
      const pinned = await create({ ...workflowSubscription(hook.url, 'id-only'), criteria: `${VERSIONED}|2.1` });
      expect(pinned.status).toBe(201);
      await off(pinned.body);
      const cs = await json(call('GET', 'metadata'));
      expect(cs.instantiates).toContain('http://hl7.org/fhir/uv/subscriptions-backport/CapabilityStatement/backport-subscription-server-r4');
      const server = (cs.rest as Json[]).find((r) => r.mode === 'server')!;
      const subscription = (server.resource as Json[]).find((r) => r.type === 'Subscription')!;
      expect(subscription.supportedProfile).toContain(`${BP}backport-subscription`);
      const listed = ((subscription.extension ?? []) as Json[]).filter((x) => x.url === CANONICAL).map((x) => x.valueCanonical);
      expect(created.length).toBeGreaterThan(0);
      expect([...new Set(created.map((s) => s.criteria))].filter((c) => !listed.includes(c))).toEqual([]);
    });
  });
});
