/**
 * An activated topic-based Subscription its topic no longer accepts when the hub compiles it again: one an older release
 * activated with a filter comparator its topic's canFilterBy does not list (enforced since), or one whose topic was edited
 * since (its canFilterBy removed, its resourceTrigger moved to another type) or deleted. It read `active` and notified
 * nothing, a warning in the log at each reload its only trace. Now it is set `error`, saying what its topic refuses and
 * where, visible in `$status`; the server starts, and the other Subscriptions notify as before (set back once its topic
 * accepts it again: subscriptions-refused-resume.test.ts). On both databases.
 */
import { afterAll, expect, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { silentLogger, type Logger } from '../../src/log.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { basic, post } from '../helpers/oauth.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { rawStatements, storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const ext = (url: string, value: Json) => ({ url, ...value });
const REFUSED = 'its topic no longer accepts it, so it notifies nothing: ';

/** A topic `url` on `type` (create and update) offering `filters` (canFilterBy extensions' parts). */
const topic = (url: string, type: string, filters: Json[][] = []) => ({
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: url },
    { url: `${X5}status`, valueCode: 'active' },
    { url: `${X5}resourceTrigger`, extension: [ext('resource', { valueUri: type }), ext('supportedInteraction', { valueCode: 'create' }), ext('supportedInteraction', { valueCode: 'update' })] },
    ...filters.map((parts) => ({ url: `${X5}canFilterBy`, extension: [ext('resource', { valueUri: 'Encounter' }), ...parts] })),
  ],
});
const dateFilter = [ext('filterParameter', { valueString: 'date' }), ext('comparator', { valueCode: 'ge' }), ext('comparator', { valueCode: 'le' })];
const statusFilter = [ext('filterParameter', { valueString: 'status' })];

const subscription = (endpoint: string, url: string, filter?: string) => ({
  resourceType: 'Subscription', status: 'requested', reason: 'encounters', criteria: url,
  ...(filter !== undefined && { _criteria: { extension: [{ url: `${BP}backport-filter-criteria`, valueString: filter }] } }),
  channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
});
const encounter = (start: string) => ({ resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, period: { start, end: start } });

/** A logger keeping the warnings. */
function warnings(): { log: Logger; got: { msg: string; fields: Json }[] } {
  const got: { msg: string; fields: Json }[] = [];
  const log: Logger = { ...silentLogger, warn: (msg, fields) => void got.push({ msg, fields: (fields ?? {}) as Json }), child: () => log };
  return { log, got };
}

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
  /** Subscription `id`'s status and error as `$status` reports it, and as stored. */
  const shown = async (id: string) => {
    const status = (await call('GET', `Subscription/${id}/$status`)).body;
    const params = ((status.entry as Json[])[0]!.resource as Json).parameter as Json[];
    const stored = (await call('GET', `Subscription/${id}`)).body;
    return { status: params.find((p) => p.name === 'status')?.valueCode, stored: stored.status, error: stored.error as string | undefined };
  };
  /** The focus of each event `$events` lists for Subscription `id`. */
  const events = async (id: string) => ((await call('GET', `Subscription/${id}/$events`)).body.entry as Json[]).slice(1).map((e) => e.fullUrl);
  return { call, drain, shown, events };
}

for (const target of targets) {
  test(`${target.kind}: one an older release activated with a comparator its topic does not list reads error at start, the others notify`, async () => {
    const db = await target.migrated();
    const hook = receiver();
    const env = { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' };
    let older: string;
    let kept: string;
    const t1 = await createTestApp({ store: db.open(), env });
    try {
      const { call, drain } = await caller(t1);
      expect((await call('POST', 'Basic', topic('http://example.org/topics/dated', 'Encounter', [dateFilter]))).status).toBe(201);
      const a = await call('POST', 'Subscription', subscription(hook.url, 'http://example.org/topics/dated', 'Encounter?date=ge2024-06-01'));
      const b = await call('POST', 'Subscription', subscription(hook.url, 'http://example.org/topics/dated', 'Encounter?date=le2030-01-01'));
      expect([a.status, b.status]).toEqual([201, 201]);
      await drain();
      older = String(a.body.id);
      kept = String(b.body.id);
      // As an older release stored it: a `gt` its topic's canFilterBy does not list, which that release let through.
      const stored = (await call('GET', `Subscription/${older}`)).body;
      expect(stored.status).toBe('active');
      const legacy = { ...stored, _criteria: { extension: [{ url: `${BP}backport-filter-criteria`, valueString: 'Encounter?date=gt2024-06-01' }] } };
      await rawStatements(target.kind, db.url, [[`UPDATE resources SET content = $1 WHERE tenant = $2 AND type = 'Subscription' AND id = $3`, [JSON.stringify(legacy), 't1', older]]]);
    } finally {
      await t1.close();
    }
    // The server starts on that database and judges its Subscriptions (as `serve` does once it listens).
    const { log, got } = warnings();
    const t2 = await createTestApp({ store: db.open(), env, log });
    try {
      const { call, drain, shown, events } = await caller(t2);
      await t2.app.settleSubscriptions();
      const refused = await shown(older);
      expect(refused).toMatchObject({ status: 'error', stored: 'error' });
      expect(refused.error).toStartWith(REFUSED);
      expect(refused.error).toContain("the comparator 'gt' of 'gt2024-06-01' is not one the topic's canFilterBy allows on 'date' (ge, le)");
      expect(refused.error).toContain('(at Subscription.criteria.extension[0])');
      expect(got.filter((w) => w.fields.subscription === older).map((w) => [w.msg, w.fields.error])).toEqual([['a topic-based subscription its topic no longer accepts is set to error', refused.error]]);
      // The other one is untouched and notifies; the refused one is told of nothing.
      expect(await shown(kept)).toEqual({ status: 'active', stored: 'active', error: undefined });
      const e = await call('POST', 'Encounter', encounter('2024-07-15'));
      expect(e.status).toBe(201);
      await drain();
      expect(await events(kept)).toEqual([`${t2.fhir()}/Encounter/${String(e.body.id)}`]);
      expect(await events(older)).toEqual([]);
      expect((await shown(older)).stored).toBe('error');
      // Written again within what the topic offers, it is activated again.
      const { error: _e, ...again } = (await call('GET', `Subscription/${older}`)).body;
      const put = await call('PUT', `Subscription/${older}`, { ...again, status: 'requested', _criteria: { extension: [{ url: `${BP}backport-filter-criteria`, valueString: 'Encounter?date=ge2024-06-01' }] } });
      expect(put.status).toBe(200);
      await drain();
      expect(await shown(older)).toEqual({ status: 'active', stored: 'active', error: undefined });
    } finally {
      hook.stop();
      await t2.close();
    }
  }, 60_000);

  test(`${target.kind}: a topic edited or deleted since its Subscriptions were activated sets those it refuses to error at the next write, the others notify`, async () => {
    const hook = receiver();
    const t = await createTestApp({ store: (await target.migrated()).open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    try {
      const { call, drain, shown, events } = await caller(t);
      const urls = ['filtered', 'retriggered', 'deleted', 'kept'].map((n) => `http://example.org/topics/${n}`);
      const topics: string[] = [];
      for (const url of urls) {
        const written = await call('POST', 'Basic', topic(url, 'Encounter', [dateFilter, statusFilter]));
        expect(written.status).toBe(201);
        topics.push(String(written.body.id));
      }
      const subs: string[] = [];
      for (const [url, filter] of [[urls[0], 'Encounter?date=ge2024-01-01'], [urls[1], 'Encounter?status=finished'], [urls[2], undefined], [urls[3], 'Encounter?status=finished']] as const) {
        const s = await call('POST', 'Subscription', subscription(hook.url, url!, filter));
        expect(s.status).toBe(201);
        subs.push(String(s.body.id));
      }
      await drain();
      // Its canFilterBy of date removed; its trigger moved to Observation (the filter names Encounter); deleted.
      expect((await call('PUT', `Basic/${topics[0]}`, { ...topic(urls[0]!, 'Encounter', [statusFilter]), id: topics[0] })).status).toBe(200);
      expect((await call('PUT', `Basic/${topics[1]}`, { ...topic(urls[1]!, 'Observation'), id: topics[1] })).status).toBe(200);
      expect((await call('DELETE', `Basic/${topics[2]}`)).status).toBe(200);
      const e = await call('POST', 'Encounter', encounter('2024-07-15'));
      expect(e.status).toBe(201);
      await drain();
      const [filtered, retriggered, deleted, kept] = await Promise.all(subs.map(shown));
      expect([filtered!.status, filtered!.stored, filtered!.error]).toEqual([
        'error', 'error', `${REFUSED}backport-filter-criteria parameter 'date' of Encounter is not offered by the topic's canFilterBy (status) (at Subscription.criteria.extension[0]). The server sets it back to the status it had once its topic accepts it again; or write it again with status requested, asking for what the topic offers now`,
      ]);
      expect([retriggered!.status, retriggered!.error]).toEqual(['error', expect.stringContaining('backport-filter-criteria names Encounter, which the topic')]);
      expect([deleted!.status, deleted!.error]).toEqual(['error', expect.stringContaining(`no SubscriptionTopic '${urls[2]}' is known to this server`)]);
      expect(deleted!.error).toContain('(at Subscription.criteria)');
      expect(kept).toEqual({ status: 'active', stored: 'active', error: undefined });
      expect(await events(subs[3]!)).toEqual([`${t.fhir()}/Encounter/${String(e.body.id)}`]);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: one paused for its topic whose topic is then deleted reads error saying so, not the pause for its topic's types`, async () => {
    const hook = receiver();
    const t = await createTestApp({ store: (await target.migrated()).open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    try {
      const { call, drain, shown } = await caller(t);
      const url = 'http://example.org/topics/widened';
      const basicId = String((await call('POST', 'Basic', topic(url, 'Encounter'))).body.id);
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Encounter.rs', 'system/Subscription.cruds'] });
      const res = await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(client.clientId, clientSecret!) });
      const app = fhirClient(t, ((await res.json()) as { access_token: string }).access_token);
      const id = String((await app.create(subscription(hook.url, url))).id);
      await drain();
      // Widened to Observation, which the app may not search: paused for its topic at the next write.
      expect((await call('PUT', `Basic/${basicId}`, { ...topic(url, 'Encounter'), id: basicId, extension: [...topic(url, 'Encounter').extension, ...topic(url, 'Observation').extension.slice(2)] })).status).toBe(200);
      expect((await call('POST', 'Encounter', encounter('2024-07-15'))).status).toBe(201);
      expect((await shown(id)).error).toStartWith('paused: its topic now selects Observation resources');
      // The topic deleted: refused by it, saying so.
      expect((await call('DELETE', `Basic/${basicId}`)).status).toBe(200);
      expect((await call('POST', 'Encounter', encounter('2024-07-16'))).status).toBe(201);
      const refused = await shown(id);
      expect([refused.status, refused.error]).toEqual(['error', expect.stringContaining(`${REFUSED}no SubscriptionTopic '${url}' is known to this server`)]);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);
}
