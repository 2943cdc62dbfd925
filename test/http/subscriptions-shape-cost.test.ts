/**
 * A full-resource notification whose focus names more than PAGE_READ_IN_REACH (20,000) resources not held through its
 * topic's notificationShape `_include`: what a search would refuse as too costly (a 400 naming `_include`) is sent, with
 * what could be included and a warning in the focus entry's `response.outcome` (as `$everything` pages past such a
 * record), never a delivery failed on every attempt; `$events` lists the event the same way, not withheld. The rest-hook,
 * the Subscription's status, `$status` and `$events`, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const TOPIC = 'http://example.org/topics/observation-focus';
/** PAGE_READ_IN_REACH: the most references read to no purpose a search's includes read past. */
const BOUND = 20_000;

/** A topic of Observations created, whose notificationShape includes what their `focus` names. */
const topic: Json = {
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: TOPIC },
    { url: `${X5}status`, valueCode: 'active' },
    { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Observation' }, { url: 'supportedInteraction', valueCode: 'create' }] },
    { url: `${X5}notificationShape`, extension: [{ url: 'resource', valueUri: 'Observation' }, { url: 'include', valueString: 'Observation:focus' }] },
  ],
};

function receiver() {
  const got: string[] = [];
  const server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    async fetch(req) {
      got.push(await req.text());
      return new Response(null, { status: 200 });
    },
  });
  return { url: `http://127.0.0.1:${server.port}/hook`, got, stop: () => server.stop(true) };
}

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`a notification whose focus names more than 20,000 resources not held, on ${target.kind}`, () => {
    let t: TestApp;
    let token: string;
    let hook: ReturnType<typeof receiver>;
    const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    const json = async (res: Response | Promise<Response>) => (await (await res).json()) as Json;
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };
    /** What a notification Bundle carries: its status's type, the focus entry's resource id and outcome, the entries after it. */
    const carried = (b: Json) => {
      const entries = b.entry as Json[];
      const status = entries[0]!.resource as Json;
      const type = ((status.parameter as Json[]).find((p) => p.name === 'type')!.valueCode);
      const focus = entries[1];
      return {
        type,
        focus: focus && ((focus.resource as Json | undefined)?.id ?? null),
        outcome: focus && ((focus.response as Json).outcome ?? null),
        after: entries.slice(2).map((e) => e.fullUrl),
      };
    };

    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({ store: db.open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
      hook = receiver();
      expect((await call('POST', 'Basic', topic)).status).toBe(201);
      expect((await call('PUT', 'Patient/held', { resourceType: 'Patient', id: 'held' })).status).toBe(201);
    }, 60_000);
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    test('the notification is sent with what could be included and a warning; the Subscription stays active; $events lists the event alike', async () => {
      const res = await call('POST', 'Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: TOPIC,
        channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'full-resource' }] } },
      });
      const s = await json(res);
      expect(res.status).toBe(201);
      await drain();
      hook.got.length = 0;
      // Patient/held, then Patients not held, 1,000 ids a read: 20,010 of them are all read (the bound is passed by the
      // last read, nothing is left unread), while past 21,000 reading stops at the bound and the 501 after are not read.
      const missing = (n: number) => Array.from({ length: n }, (_, i) => `Patient/none-${String(i).padStart(5, '0')}`);
      const obs = (id: string, n: number) => ({ resourceType: 'Observation', id, status: 'final', code: { text: id }, focus: ['Patient/held', ...missing(n)].map((reference) => ({ reference })) });
      expect((await call('PUT', 'Observation/wide', obs('wide', BOUND + 10))).status).toBe(201);
      expect((await call('PUT', 'Observation/wider', obs('wider', BOUND + 1_500))).status).toBe(201);
      await drain();

      const warning = {
        resourceType: 'OperationOutcome',
        issue: [expect.objectContaining({
          severity: 'warning', code: 'too-costly',
          diagnostics: "Observation/wider (version 1) names more than 20000 resources that are not held or out of this reader's reach: reading its references stopped after them, and the 501 named past them are not included; read them by the references that version holds",
        })],
      };
      const held = [`${t.fhir()}/Patient/held`];
      const expected = [
        { type: 'event-notification', focus: 'wide', outcome: null, after: held },
        { type: 'event-notification', focus: 'wider', outcome: warning, after: held },
      ];
      expect(hook.got.map((b) => carried(JSON.parse(b) as Json))).toEqual(expected);

      const sub = await json(call('GET', `Subscription/${s.id}`));
      expect({ status: sub.status, error: sub.error }).toEqual({ status: 'active', error: undefined });
      const status = await json(call('GET', `Subscription/${s.id}/$status`));
      const params = ((status.entry as Json[])[0]!.resource as Json).parameter as Json[];
      expect(params.filter((p) => ['status', 'events-since-subscription-start', 'error'].includes(p.name as string)).map((p) => [p.name, p.valueCode ?? p.valueString ?? p.valueCodeableConcept]))
        .toEqual([['status', 'active'], ['events-since-subscription-start', '2']]);

      // $events lists each event as its notification carried it: neither withheld.
      for (const [i, number] of [[0, 1], [1, 2]] as const) {
        const events = await json(call('GET', `Subscription/${s.id}/$events?content=full-resource&eventsSinceNumber=${number}&eventsUntilNumber=${number}`));
        expect(carried(events)).toEqual({ ...expected[i]!, type: 'query-event' });
      }
      // An id-only listing carries no includes, and no warning of them.
      const idOnly = await json(call('GET', `Subscription/${s.id}/$events?eventsSinceNumber=2&content=id-only`));
      expect(carried(idOnly)).toEqual({ type: 'query-event', focus: null, outcome: null, after: [] });
    }, 120_000);
  });
}
