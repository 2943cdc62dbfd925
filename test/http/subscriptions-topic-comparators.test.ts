/**
 * A topic's canFilterBy may list the comparators a filter parameter allows (R5 SubscriptionTopic.canFilterBy.comparator);
 * in the Backport IG's R4 filters a comparator is the value's search prefix (`Encounter?date=ge2024-01-01`, none: `eq`).
 * A Subscription asking for one the topic does not list is refused (422 naming its filter), as one asking for a modifier
 * it does not list is. They were read as modifiers: any prefix passed, and `date:ge=` passed the modifier check. A
 * filter within them is activated and matches as a search of it would. On both databases.
 */
import { afterAll, expect, test } from 'bun:test';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const TOPIC = 'http://example.org/topics/encounter-dated';
const ext = (url: string, value: Json) => ({ url, ...value });

const topic = {
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: TOPIC },
    { url: `${X5}status`, valueCode: 'active' },
    { url: `${X5}resourceTrigger`, extension: [ext('resource', { valueUri: 'Encounter' }), ext('supportedInteraction', { valueCode: 'create' })] },
    {
      url: `${X5}canFilterBy`,
      extension: [ext('resource', { valueUri: 'Encounter' }), ext('filterParameter', { valueString: 'date' }), ext('comparator', { valueCode: 'ge' }), ext('comparator', { valueCode: 'le' }), ext('modifier', { valueCode: 'missing' })],
    },
  ],
};

const subscription = (endpoint: string, filter: string) => ({
  resourceType: 'Subscription', status: 'requested', reason: 'dated encounters', criteria: TOPIC,
  _criteria: { extension: [{ url: `${BP}backport-filter-criteria`, valueString: filter }] },
  channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
});

for (const target of targets) {
  test(`${target.kind}: a filter's comparator is held to those its topic's canFilterBy lists`, async () => {
    const t = await createTestApp({ store: (await target.migrated()).open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    const hook = receiver();
    try {
      const token = await t.token();
      const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
      expect((await call('POST', 'Basic', topic)).status).toBe(201);
      const refused = async (filter: string) => {
        const res = await call('POST', 'Subscription', subscription(hook.url, filter));
        const body = (await res.json()) as Json;
        return { status: res.status, expression: (body.issue as Json[] | undefined)?.[0]?.expression };
      };
      const named = { status: 422, expression: ['Subscription.criteria.extension[0]'] };
      expect(await refused('Encounter?date=gt2024-01-01')).toEqual(named);
      expect(await refused('Encounter?date=2024-01-01')).toEqual(named);
      expect(await refused('Encounter?date=ge2024-01-01,eq2025-01-01')).toEqual(named);
      expect(await refused('Encounter?date:ge=2024-01-01')).toEqual(named);
      // Within what it lists: activated, and matching as the search would.
      const ok = await call('POST', 'Subscription', subscription(hook.url, 'Encounter?date=ge2024-06-01'));
      expect(ok.status).toBe(201);
      const missing = await call('POST', 'Subscription', subscription(hook.url, 'Encounter?date:missing=true'));
      expect(missing.status).toBe(201);
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
      hook.got.length = 0;
      const sub = (await ok.json()) as Json;
      const encounter = (start: string) => ({ resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, period: { start, end: start } });
      const early = (await (await call('POST', 'Encounter', encounter('2024-01-15'))).json()) as Json;
      const late = (await (await call('POST', 'Encounter', encounter('2024-07-15'))).json()) as Json;
      const events = (await (await call('GET', `Subscription/${sub.id}/$events`)).json()) as Json;
      expect((events.entry as Json[]).slice(1).map((e) => e.fullUrl)).toEqual([`${t.fhir()}/Encounter/${late.id}`]);
      // The search of the same filter finds the same one.
      const found = (await (await call('GET', 'Encounter?date=ge2024-06-01')).json()) as Json;
      expect(((found.entry ?? []) as Json[]).map((e) => (e.resource as Json).id)).toEqual([late.id]);
      expect(early.id).not.toBe(late.id);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);
}
