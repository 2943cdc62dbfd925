/**
 * The server's judgement of the Subscriptions it paused or refused, failing (here the store's read of a Subscription
 * throws, injected through the app's store): the write that brought it about is answered as it would be, each
 * Subscription is left as it was (nothing half-written), and the next write once the fault is gone does what the
 * failed one would have. On both databases.
 */
import { afterAll, expect, test } from 'bun:test';
import { createClient, createTenant } from '../../src/auth/admin.ts';
import { updateClient } from '../../src/auth/client-lifecycle.ts';
import type { Store } from '../../src/store/types.ts';
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
const trigger = (type: string) => ({ url: `${X5}resourceTrigger`, extension: [ext('resource', { valueUri: type }), ext('supportedInteraction', { valueCode: 'create' })] });
const topic = (url: string, types: string[]) => ({
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [{ url: `${X5}url`, valueUri: url }, { url: `${X5}status`, valueCode: 'active' }, ...types.map(trigger)],
});
const subscription = (endpoint: string, url: string) => ({
  resourceType: 'Subscription', status: 'requested', reason: 'encounters', criteria: url,
  channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'id-only' }] } },
});
const encounter = { resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' } };

/** A test app whose store's reads of Subscriptions throw while `fault.on`, counted in `fault.reads`. */
async function faulty(store: Store) {
  const fault = { on: false, reads: 0 };
  const resources = new Proxy(store.resources, {
    get: (repo, key) => (key === 'read'
      ? (tenant: string, type: string, id: string) => {
        if (type === 'Subscription') fault.reads++;
        return fault.on && type === 'Subscription' ? Promise.reject(new Error('injected read fault')) : repo.read(tenant, type, id);
      }
      : Reflect.get(repo, key)),
  });
  const wrapped = new Proxy(store, { get: (s, key) => (key === 'resources' ? resources : Reflect.get(s, key)) }) as Store;
  const t = await createTestApp({ store: wrapped, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
  return { t, fault };
}

async function caller(t: TestApp) {
  const token = await t.token();
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    return { status: res.status, body: (await res.json().catch(() => ({}))) as Json };
  };
  const drain = async () => {
    for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
  };
  const stored = async (id: string) => {
    const s = (await call('GET', `Subscription/${id}`)).body;
    return [s.status, s.error, (s.meta as Json).versionId];
  };
  return { call, drain, stored };
}

for (const target of targets) {
  test(`${target.kind}: a topic restored while the refused Subscriptions cannot be read is answered, leaves them in error, and a later write sets them back`, async () => {
    const hook = receiver();
    const { t, fault } = await faulty((await target.migrated()).open());
    try {
      const { call, drain, stored } = await caller(t);
      const url = 'http://example.org/topics/settle-fault';
      const basicId = String((await call('POST', 'Basic', topic(url, ['Encounter']))).body.id);
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) ids.push(String((await call('POST', 'Subscription', subscription(hook.url, url))).body.id));
      await drain();
      expect((await call('DELETE', `Basic/${basicId}`)).status).toBe(200);
      const refused = await Promise.all(ids.map(stored));
      for (const r of refused) expect(r[0]).toBe('error');
      fault.on = true;
      expect((await call('PUT', `Basic/${basicId}`, { ...topic(url, ['Encounter']), id: basicId })).status).toBe(201);
      fault.on = false;
      // Each as it was: the same version, in error.
      expect(await Promise.all(ids.map(stored))).toEqual(refused);
      // Past the wait after a failed write, the next write sets them back.
      t.clock.advance(31_000);
      expect((await call('POST', 'Encounter', encounter)).status).toBe(201);
      for (const r of await Promise.all(ids.map(stored))) expect(r.slice(0, 2)).toEqual(['active', undefined]);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: a paused Subscription judged again as its client's scopes change fails no write when it cannot be read, and is named anew at the next`, async () => {
    const hook = receiver();
    const { t, fault } = await faulty((await target.migrated()).open());
    try {
      const { call, drain, stored } = await caller(t);
      const url = 'http://example.org/topics/rejudge-fault';
      const basicId = String((await call('POST', 'Basic', topic(url, ['Encounter']))).body.id);
      const { client, clientSecret } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/Encounter.rs', 'system/Subscription.cruds'] });
      const res = await post(t, { grant_type: 'client_credentials' }, { Authorization: basic(client.clientId, clientSecret!) });
      const app = fhirClient(t, ((await res.json()) as { access_token: string }).access_token);
      const id = String((await app.create(subscription(hook.url, url))).id);
      await drain();
      expect((await stored(id))[0]).toBe('active');
      // Widened to Observation, which the app may not search: paused for its topic at the topic's write.
      expect((await call('PUT', `Basic/${basicId}`, { ...topic(url, ['Encounter', 'Observation']), id: basicId })).status).toBe(200);
      expect(String((await stored(id))[1])).toStartWith('paused: its topic now selects Observation resources');
      // A write reads the set again after that pause; then its client's registration is narrowed (by no command, which
      // would have named it): judged again at the next write, whose read of it fails here.
      expect((await call('POST', 'Encounter', encounter)).status).toBe(201);
      await updateClient(t.store, t.clock, client.clientId, { scopes: ['system/Observation.rs', 'system/Subscription.cruds'] });
      t.clock.advance(60_000);
      fault.on = true;
      expect((await call('POST', 'Encounter', encounter)).status).toBe(201);
      fault.on = false;
      expect(String((await stored(id))[1])).toStartWith('paused: its topic now selects Observation resources');
      // Past the wait after a failed write of it, the next write names what refuses it now.
      t.clock.advance(31_000);
      expect((await call('POST', 'Encounter', encounter)).status).toBe(201);
      expect(String((await stored(id))[1])).toStartWith(`paused: the scopes registered for the app that activated it (client ${client.clientId})`);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);

  test(`${target.kind}: a write reads no paused Subscription again while its client's registration stands`, async () => {
    const hook = receiver();
    const { t, fault } = await faulty((await target.migrated()).open());
    try {
      const { call, drain, stored } = await caller(t);
      const url = 'http://example.org/topics/held-reads';
      const basicId = String((await call('POST', 'Basic', topic(url, ['Encounter']))).body.id);
      const id = String((await call('POST', 'Subscription', subscription(hook.url, url))).body.id);
      await drain();
      expect((await call('DELETE', `Basic/${basicId}`)).status).toBe(200);
      expect((await stored(id))[0]).toBe('error');
      expect((await call('POST', 'Encounter', encounter)).status).toBe(201);
      fault.reads = 0;
      for (let i = 0; i < 3; i++) expect((await call('POST', 'Encounter', encounter)).status).toBe(201);
      expect(fault.reads).toBe(0);
    } finally {
      hook.stop();
      await t.close();
    }
  }, 60_000);
}

for (const target of targets) {
  test(`${target.kind}: serve's start judges every tenant's Subscriptions though one tenant's judgement fails`, async () => {
    const db = await target.migrated();
    const hook = receiver();
    let id: string;
    const t1 = await createTestApp({ store: db.open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    try {
      await createTenant(t1.store, t1.clock, 't0');
      const { call, drain } = await caller(t1);
      const created = await call('POST', 'Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'observations', criteria: 'Observation?status=final',
        channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json' },
      });
      id = String(created.body.id);
      await drain();
      const stored = (await call('GET', `Subscription/${id}`)).body;
      // As an older release stored it: a search this release does not run.
      await rawStatements(target.kind, db.url, [[`UPDATE resources SET content = $1 WHERE tenant = $2 AND type = 'Subscription' AND id = $3`, [JSON.stringify({ ...stored, criteria: 'Observation?no-such-parameter=1' }), 't1', id]]]);
    } finally {
      await t1.close();
    }
    // Tenant t0, listed first, cannot be searched.
    const store = db.open();
    const resources = new Proxy(store.resources, {
      get: (repo, key) => (key === 'search' ? (tenant: string, ...rest: unknown[]) => (tenant === 't0' ? Promise.reject(new Error('injected search fault')) : (repo.search as (...a: unknown[]) => unknown)(tenant, ...rest)) : Reflect.get(repo, key)),
    });
    const wrapped = new Proxy(store, { get: (s, key) => (key === 'resources' ? resources : Reflect.get(s, key)) }) as Store;
    const t2 = await createTestApp({ store: wrapped, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
    try {
      await t2.app.settleSubscriptions().catch(() => undefined);
      const { call } = await caller(t2);
      const after = (await call('GET', `Subscription/${id}`)).body;
      expect(after.status).toBe('error');
      expect(String(after.error)).toContain('no-such-parameter');
    } finally {
      hook.stop();
      await t2.close();
    }
  }, 60_000);
}
