/**
 * Subscriptions the server set `error` because what they rest on no longer accepts them, and what happens once it does
 * again. A topic-based one whose topic refuses it (deleted, or edited so its filter is no longer offered) is set back to
 * the status it had once the topic accepts it again, at the topic's own write (restored, or edited back), and notifies
 * again; an R4 criteria one whose criteria no longer compile (the ValueSet its `:in` names deleted, a search an older
 * release ran) is set `error` saying why, not left `active` and silent, and set back once they compile again. Its
 * `error` is what $status and the Subscription show while it lasts. On both databases.
 */
import { afterAll, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { rawStatements, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const ext = (url: string, value: Json) => ({ url, ...value });
const TOPIC_REFUSED = 'its topic no longer accepts it, so it notifies nothing: ';
const CRITERIA_REFUSED = 'its criteria no longer compile, so it notifies nothing: ';
const ENV = { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' };

/** A topic `url` on Encounter (create and update) offering `filters` (canFilterBy extensions' parts). */
const topic = (url: string, filters: Json[][] = []) => ({
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: url },
    { url: `${X5}status`, valueCode: 'active' },
    { url: `${X5}resourceTrigger`, extension: [ext('resource', { valueUri: 'Encounter' }), ext('supportedInteraction', { valueCode: 'create' }), ext('supportedInteraction', { valueCode: 'update' })] },
    ...filters.map((parts) => ({ url: `${X5}canFilterBy`, extension: [ext('resource', { valueUri: 'Encounter' }), ...parts] })),
  ],
});
const statusFilter = [ext('filterParameter', { valueString: 'status' })];

const topicSubscription = (endpoint: string, url: string, filter?: string) => ({
  resourceType: 'Subscription', status: 'requested', reason: 'encounters', criteria: url,
  ...(filter !== undefined && { _criteria: { extension: [{ url: `${BP}backport-filter-criteria`, valueString: filter }] } }),
  channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
});
const criteriaSubscription = (endpoint: string, criteria: string) => ({
  resourceType: 'Subscription', status: 'requested', reason: 'observations', criteria, channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json' },
});
const encounter = (start: string) => ({ resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, period: { start, end: start } });
const valueSet = { resourceType: 'ValueSet', id: 'watched-codes', url: 'http://example.org/ValueSet/watched-codes', status: 'active', compose: { include: [{ system: 'http://loinc.org', concept: [{ code: '1234-5' }] }] } };
const observation = { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '1234-5' }] } };

/** Calls on `t`'s FHIR API with a fresh token. */
async function caller(t: TestApp) {
  const token = await t.token();
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    return { status: res.status, body: (await res.json().catch(() => ({}))) as Json };
  };
  const drain = async () => {
    for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
  };
  /** Subscription `id`'s status as `$status` reports it, as stored, and its `error`. */
  const shown = async (id: string) => {
    const status = (await call('GET', `Subscription/${id}/$status`)).body;
    const params = ((status.entry as Json[])[0]!.resource as Json).parameter as Json[];
    const stored = (await call('GET', `Subscription/${id}`)).body;
    // The status Parameters' `error` (backport-subscription-status-r4) says what the Subscription's `error` does.
    const said = (params.find((p) => p.name === 'error')?.valueCodeableConcept as Json | undefined)?.text;
    expect(said).toBe(stored.error);
    return { status: params.find((p) => p.name === 'status')?.valueCode, stored: stored.status, error: stored.error as string | undefined };
  };
  const events = async (id: string) => ((await call('GET', `Subscription/${id}/$events`)).body.entry as Json[]).slice(1).map((e) => e.fullUrl);
  return { call, drain, shown, events };
}

for (const target of targets) {
  test(`${target.kind}: a topic Subscription set error as its topic was deleted is set back active as the topic is restored, and notifies again`, async () => {
    const hook = receiver();
    const t = await createTestApp({ store: (await target.migrated()).open(), env: ENV });
    try {
      const { call, drain, shown, events } = await caller(t);
      const url = 'http://example.org/topics/restored';
      const basicId = String((await call('POST', 'Basic', topic(url))).body.id);
      const created = await call('POST', 'Subscription', topicSubscription(hook.url, url));
      expect(created.status).toBe(201);
      const id = String(created.body.id);
      await drain();
      expect((await shown(id)).stored).toBe('active');
      expect((await call('DELETE', `Basic/${basicId}`)).status).toBe(200);
      expect((await call('POST', 'Encounter', encounter('2024-07-15'))).status).toBe(201);
      const refused = await shown(id);
      expect([refused.status, refused.stored]).toEqual(['error', 'error']);
      expect(refused.error).toStartWith(`${TOPIC_REFUSED}no SubscriptionTopic '${url}' is known to this server`);
      expect(refused.error).toContain('The server sets it back to the status it had once its topic accepts it again');
      // The operator restores the topic: its own write sets the Subscription back, no other write needed.
      expect((await call('PUT', `Basic/${basicId}`, { ...topic(url), id: basicId })).status).toBe(201);
      expect(await shown(id)).toEqual({ status: 'active', stored: 'active', error: undefined });
      const e = await call('POST', 'Encounter', encounter('2024-07-16'));
      expect(e.status).toBe(201);
      await drain();
      expect(await events(id)).toEqual([`${t.fhir()}/Encounter/${String(e.body.id)}`]);
      expect(hook.got.some((body) => body.includes(`Encounter/${String(e.body.id)}`))).toBe(true);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: a topic Subscription whose filter its topic stopped offering is set back as the topic offers it again; a new refusal renames its error`, async () => {
    const hook = receiver();
    const t = await createTestApp({ store: (await target.migrated()).open(), env: ENV });
    try {
      const { call, drain, shown, events } = await caller(t);
      const url = 'http://example.org/topics/refiltered';
      const basicId = String((await call('POST', 'Basic', topic(url, [statusFilter]))).body.id);
      const id = String((await call('POST', 'Subscription', topicSubscription(hook.url, url, 'Encounter?status=finished'))).body.id);
      await drain();
      expect((await shown(id)).stored).toBe('active');
      // Its canFilterBy of status removed: set error at the topic's write.
      expect((await call('PUT', `Basic/${basicId}`, { ...topic(url), id: basicId })).status).toBe(200);
      const refused = await shown(id);
      expect(refused.stored).toBe('error');
      expect(refused.error).toStartWith(`${TOPIC_REFUSED}backport-filter-criteria parameter 'status' of Encounter is not offered`);
      // Deleted as well: its error says what refuses now.
      expect((await call('DELETE', `Basic/${basicId}`)).status).toBe(200);
      expect((await shown(id)).error).toStartWith(`${TOPIC_REFUSED}no SubscriptionTopic '${url}' is known to this server`);
      // Restored as first written: set back.
      expect((await call('PUT', `Basic/${basicId}`, { ...topic(url, [statusFilter]), id: basicId })).status).toBe(201);
      expect(await shown(id)).toEqual({ status: 'active', stored: 'active', error: undefined });
      const e = await call('POST', 'Encounter', encounter('2024-07-16'));
      await drain();
      expect(await events(id)).toEqual([`${t.fhir()}/Encounter/${String(e.body.id)}`]);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: an R4 criteria Subscription whose :in ValueSet is deleted is set error saying why, and set back as the ValueSet is restored`, async () => {
    const hook = receiver();
    const t = await createTestApp({ store: (await target.migrated()).open(), env: ENV });
    try {
      const { call, drain, shown } = await caller(t);
      expect((await call('PUT', 'ValueSet/watched-codes', valueSet)).status).toBe(201);
      const created = await call('POST', 'Subscription', criteriaSubscription(hook.url, 'Observation?code:in=http://example.org/ValueSet/watched-codes'));
      expect(created.status).toBe(201);
      const id = String(created.body.id);
      await drain();
      expect((await shown(id)).stored).toBe('active');
      expect((await call('DELETE', 'ValueSet/watched-codes')).status).toBe(200);
      const refused = await shown(id);
      expect([refused.status, refused.stored]).toEqual(['error', 'error']);
      expect(refused.error).toStartWith(CRITERIA_REFUSED);
      expect(refused.error).toContain('http://example.org/ValueSet/watched-codes');
      expect(refused.error).toContain('(at Subscription.criteria)');
      // Nothing is sent for it meanwhile.
      const before = hook.got.length;
      expect((await call('POST', 'Observation', observation)).status).toBe(201);
      await drain();
      expect(hook.got.length).toBe(before);
      expect((await call('PUT', 'ValueSet/watched-codes', valueSet)).status).toBe(201);
      expect(await shown(id)).toEqual({ status: 'active', stored: 'active', error: undefined });
      const o = await call('POST', 'Observation', observation);
      expect(o.status).toBe(201);
      await drain();
      expect(hook.got.some((body) => body.includes(`"Observation"`) && body.includes(String(o.body.id)))).toBe(true);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: an R4 criteria Subscription an older release activated with a search today's does not run reads error at start, and activates again when written with one`, async () => {
    const db = await target.migrated();
    const hook = receiver();
    let id: string;
    const t1 = await createTestApp({ store: db.open(), env: ENV });
    try {
      const { call, drain } = await caller(t1);
      const created = await call('POST', 'Subscription', criteriaSubscription(hook.url, 'Observation?status=final'));
      expect(created.status).toBe(201);
      id = String(created.body.id);
      await drain();
      const stored = (await call('GET', `Subscription/${id}`)).body;
      expect(stored.status).toBe('active');
      await rawStatements(target.kind, db.url, [[`UPDATE resources SET content = $1 WHERE tenant = $2 AND type = 'Subscription' AND id = $3`, [JSON.stringify({ ...stored, criteria: 'Observation?no-such-parameter=1' }), 't1', id]]]);
    } finally {
      await t1.close();
    }
    const t2 = await createTestApp({ store: db.open(), env: ENV });
    try {
      const { call, drain, shown } = await caller(t2);
      await t2.app.settleSubscriptions();
      const refused = await shown(id);
      expect([refused.status, refused.stored]).toEqual(['error', 'error']);
      expect(refused.error).toStartWith(CRITERIA_REFUSED);
      expect(refused.error).toContain('no-such-parameter');
      const { error: _e, ...again } = (await call('GET', `Subscription/${id}`)).body;
      expect((await call('PUT', `Subscription/${id}`, { ...again, status: 'requested', criteria: 'Observation?status=final' })).status).toBe(200);
      await drain();
      expect(await shown(id)).toEqual({ status: 'active', stored: 'active', error: undefined });
    } finally {
      hook.stop();
      await t2.close();
    }
  }, 60_000);
}
