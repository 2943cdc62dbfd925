/**
 * A full-resource topic notification whose focus cannot be carried for a cause that is the Subscription's, its
 * topic's or its owner's (the version notified no longer held) is sent with that error as the focus entry's
 * `response.status` and an OperationOutcome as its `response.outcome`, without the resource; a 4xx refusal while
 * reading what its notificationShape includes leaves the includes out, the focus carried, a warning saying why: it went to the unexpected-failure route
 * (logged as a server fault, retried five times, the Subscription set to `error` "an internal error"). A fault of
 * the server (an Error the store throws) still takes that route. Faults injected through the app's store (a
 * double), on both databases; the rest-hook, the Subscription and `$status` as a client sees them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { FhirError } from '../../src/errors.ts';
import { createLogger } from '../../src/log.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { storeTargets } from '../helpers/stores.ts';

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const TOPIC = 'http://example.org/topics/observation-subject';

/** A topic of Observations created or updated, whose notificationShape includes their subject. */
const topic: Json = {
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: TOPIC },
    { url: `${X5}status`, valueCode: 'active' },
    { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Observation' }, { url: 'supportedInteraction', valueCode: 'create' }, { url: 'supportedInteraction', valueCode: 'update' }] },
    { url: `${X5}notificationShape`, extension: [{ url: 'resource', valueUri: 'Observation' }, { url: 'include', valueString: 'Observation:subject' }] },
  ],
};

/** What the store double does to the delivery's reads of Observations while set. */
type Fault = 'focus-gone' | 'include-refused' | 'server-fault' | 'throttled' | 'throttled-vread' | undefined;

/** A refusal that asks for the same request later (429), as a rate limit or a busy service answers. */
const throttled = () => new FhirError('too-many', 'injected: too many requests; retry after 1 s', { headers: { 'Retry-After': '1' } });

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`a topic notification whose focus cannot be carried, on ${target.kind}`, () => {
    let t: TestApp;
    let token: string;
    let fault: Fault;
    let hook: ReturnType<typeof receiver>;
    const warnings: Json[] = [];
    const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    const json = async (res: Response | Promise<Response>) => (await (await res).json()) as Json;
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };
    const unexpected = () => warnings.filter((w) => w.msg === 'subscription delivery failed unexpectedly');
    /** The focus entry of each notification Bundle received since the last call, and what its status says. */
    const received = () => hook.got.splice(0).map((text) => {
      const b = JSON.parse(text) as Json;
      const entries = b.entry as Json[];
      const status = (entries[0]!.resource as Json).parameter as Json[];
      return { type: status.find((p) => p.name === 'type')!.valueCode, focus: entries[1] ?? null, after: entries.slice(2).map((e) => e.fullUrl) };
    });

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      // The delivery reads the notified version (vread) and, for the includes, the record as it stands (read).
      const resources = new Proxy(store.resources, {
        get: (repo, key) => {
          const real = Reflect.get(repo, key) as (...a: unknown[]) => unknown;
          if (key === 'vread' && fault === 'throttled-vread') return (...a: unknown[]) => (a[1] === 'Observation' ? Promise.reject(throttled()) : real.apply(repo, a));
          if (key === 'vread') return (...a: unknown[]) => (fault === 'focus-gone' && a[1] === 'Observation' ? Promise.resolve(undefined) : fault === 'server-fault' && a[1] === 'Observation' ? Promise.reject(new Error('injected read fault')) : real.apply(repo, a));
          if (key === 'read') {
            return (...a: unknown[]) => (fault === 'include-refused' && a[1] === 'Observation' ? Promise.reject(new FhirError('forbidden', 'injected: the owner may not read Observation/o1 as it stands'))
              : fault === 'throttled' && a[1] === 'Observation' ? Promise.reject(throttled()) : real.apply(repo, a));
          }
          return real;
        },
      });
      const wrapped = new Proxy(store, { get: (s, key) => (key === 'resources' ? resources : Reflect.get(s, key)) }) as Store;
      const log = createLogger('warn', {}, (line) => void warnings.push(JSON.parse(line) as Json));
      t = await createTestApp({ store: wrapped, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' }, log });
      token = await t.token();
      hook = receiver();
      expect((await call('POST', 'Basic', topic)).status).toBe(201);
      expect((await call('PUT', 'Patient/p1', { resourceType: 'Patient', id: 'p1' })).status).toBe(201);
    }, 60_000);
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    test('client-caused: sent with the error status and an OperationOutcome, no resource (includes refused: the focus carried, a warning); the Subscription stays active', async () => {
      const res = await call('POST', 'Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: TOPIC,
        channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'full-resource' }] } },
      });
      const sub = await json(res);
      expect(res.status).toBe(201);
      await drain();
      expect(received().map((r) => r.type)).toEqual(['handshake']);
      const obs = { resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' } };

      // The focus version no longer held at delivery: a 404.
      expect((await call('PUT', 'Observation/o1', obs)).status).toBe(201);
      fault = 'focus-gone';
      await drain();
      fault = undefined;
      const [gone] = received();
      expect(gone).toMatchObject({ type: 'event-notification', after: [] });
      expect(gone!.focus.resource).toBeUndefined();
      expect(gone!.focus.response).toEqual({
        status: '404',
        outcome: {
          resourceType: 'OperationOutcome',
          issue: [expect.objectContaining({ severity: 'error', code: 'not-found', diagnostics: 'Observation/o1 version 1, the focus of event 1, is no longer held: the notification carries no focus resource' })],
        },
      });

      // Reading its includes refused (a 403 FhirError): the focus, which the owner may read, is carried; only the
      // includes are left out, and its entry's outcome says why (the IG: the entry's response tells what could not be carried).
      expect((await call('PUT', 'Observation/o1', { ...obs, status: 'amended' })).status).toBe(200);
      fault = 'include-refused';
      await drain();
      fault = undefined;
      const [refused] = received();
      expect(refused).toMatchObject({ type: 'event-notification', after: [] });
      expect({ id: refused!.focus.resource?.id, status: refused!.focus.resource?.status }).toEqual({ id: 'o1', status: 'amended' });
      expect(refused!.focus.response).toEqual({
        status: '200',
        outcome: {
          resourceType: 'OperationOutcome',
          issue: [expect.objectContaining({
            severity: 'warning', code: 'suppressed',
            diagnostics: 'What the notificationShape of Observation includes for Observation/o1 (version 2) was left out: reading it was refused (403: injected: the owner may not read Observation/o1 as it stands)',
          })],
        },
      });

      // Neither was a server fault: nothing logged as one, the Subscription active, and the next event carried whole.
      expect(unexpected()).toEqual([]);
      const read = await json(call('GET', `Subscription/${sub.id}`));
      expect({ status: read.status, error: read.error }).toEqual({ status: 'active', error: undefined });
      expect((await call('PUT', 'Observation/o1', { ...obs, status: 'corrected' })).status).toBe(200);
      await drain();
      const [whole] = received();
      expect({ id: whole!.focus.resource?.id, status: whole!.focus.response.status, after: whole!.after }).toEqual({ id: 'o1', status: '200', after: [`${t.fhir()}/Patient/p1`] });
      expect(await t.store.subscriptions.waiting()).toBe(0);
    }, 60_000);

    test('guard: a fault of the server reading the focus still fails the delivery unexpectedly (nothing sent, retried)', async () => {
      expect((await call('PUT', 'Observation/o2', { resourceType: 'Observation', id: 'o2', status: 'final', code: { text: 'y' }, subject: { reference: 'Patient/p1' } })).status).toBe(201);
      fault = 'server-fault';
      await drain();
      fault = undefined;
      expect(received()).toEqual([]);
      expect(unexpected()).toHaveLength(1);
      expect(await t.store.subscriptions.waiting()).toBe(1);
    }, 60_000);

    test('a refusal to be retried (429) reading the includes fails the delivery, to be retried; sent whole once it passes', async () => {
      expect((await call('PUT', 'Observation/o3', { resourceType: 'Observation', id: 'o3', status: 'final', code: { text: 'z' }, subject: { reference: 'Patient/p1' } })).status).toBe(201);
      const waiting = await t.store.subscriptions.waiting();
      const failures = unexpected().length;
      fault = 'throttled';
      t.clock.advance(60_000); // past the back-off of the guard's failed attempt: o2's delivery is tried again, then o3's
      await drain();
      fault = undefined;
      // Not sent as the focus entry's error (a 429 settles nothing about the focus): a failed attempt, kept to be sent again.
      expect(received()).toEqual([]);
      expect(unexpected()).toHaveLength(failures + 1);
      expect(await t.store.subscriptions.waiting()).toBe(waiting);
      // Once nothing refuses it, the next attempt sends o2 whole, with its include.
      t.clock.advance(60_000);
      await drain();
      const sent = received();
      expect(sent.length).toBeGreaterThanOrEqual(1);
      expect(sent[0]!.focus.resource?.id).toBe('o2');
      expect(sent[0]!.focus.response.status).toBe('201');
    }, 60_000);

    test('$events: an include refused leaves the includes out, not the focus the caller may read', async () => {
      const subs = await json(call('GET', 'Subscription?status=active'));
      const id = ((subs.entry as Json[])[0]!.resource as Json).id as string;
      fault = 'include-refused';
      const res = await call('GET', `Subscription/${id}/$events?content=full-resource&eventsSinceNumber=1&eventsUntilNumber=1`);
      fault = undefined;
      expect(res.status).toBe(200);
      const entries = (await json(res)).entry as Json[];
      const focus = (((entries[0]!.resource as Json).parameter as Json[]).find((p) => p.name === 'notification-event')!.part as Json[]).find((p) => p.name === 'focus');
      expect(focus?.valueReference).toEqual({ reference: `${t.fhir()}/Observation/o1` });
      expect(entries.slice(1).map((e) => [e.fullUrl, (e.resource as Json | undefined)?.id, ((e.response as Json).outcome as Json | undefined)?.issue])).toEqual([
        [`${t.fhir()}/Observation/o1`, 'o1', [expect.objectContaining({ severity: 'warning', code: 'suppressed' })]],
      ]);
    }, 60_000);

    test("$events: a 429 reading an event's focus is the request's answer, not the event withheld", async () => {
      const subs = await json(call('GET', 'Subscription?status=active'));
      const id = ((subs.entry as Json[])[0]!.resource as Json).id as string;
      // full-resource reads each focus (id-only reads none where the caller's reach of the type does not depend on content).
      fault = 'throttled-vread';
      const res = await call('GET', `Subscription/${id}/$events?content=full-resource`);
      fault = undefined;
      expect(res.status).toBe(429);
      const ok = await call('GET', `Subscription/${id}/$events?content=full-resource`);
      expect(ok.status).toBe(200);
    }, 60_000);
  });
}
