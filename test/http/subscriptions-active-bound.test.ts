/**
 * The tenant's bound of activated Subscriptions (activation.ts MAX_ACTIVE) under concurrency: activations sent at once
 * to two servers sharing one database (two processes of a deployment) never store more than the bound, on both
 * databases. On PostgreSQL (READ COMMITTED) two activations counting at once each saw the other's row missing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { MAX_ACTIVE } from '../../src/fhir/subscriptions/activation.ts';
import { StoreConflictError, type Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** Activations sent at once past the room left (ROOM): most must be refused. */
const ROOM = 6;
const ATTEMPTS = 40;

for (const target of targets) {
  describe(`the tenant's bound of active Subscriptions under concurrent activations, on ${target.kind}`, () => {
    let t: TestApp;
    let second: (path: string, init: RequestInit) => Promise<Response>;
    let token: string;

    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({ store: db.open() });
      second = await secondServer(t, () => db.open());
      token = await t.token();
    }, 60_000);
    afterAll(() => t.close());

    const subscription = (i: string) => ({
      resourceType: 'Subscription', status: 'requested', reason: 'bound', criteria: `Observation?code=http://loinc.org|${i}`, channel: { type: 'websocket' },
    });

    test(`activations at once on two servers store no more than ${MAX_ACTIVE}: the rest are refused with a 422 naming Subscription.status`, async () => {
      const fill = await t.request(t.fhir(), fhirInit(token, 'POST', {
        resourceType: 'Bundle', type: 'transaction',
        entry: Array.from({ length: MAX_ACTIVE - ROOM }, (_, i) => ({
          resource: { ...subscription(`f${i}`), id: `f-${i}` },
          request: { method: 'PUT', url: `Subscription/f-${i}` },
        })),
      }));
      expect(fill.status).toBe(200);
      const sends = Array.from({ length: ATTEMPTS }, (_, i) => {
        const init = fhirInit(token, 'POST', subscription(`c${i}`));
        return i % 2 === 0 ? t.request(`${t.fhir()}/Subscription`, init) : second(`${t.fhir()}/Subscription`, init);
      });
      const answers = await Promise.all(sends.map(async (p) => {
        const res = await p;
        return { status: res.status, body: (await res.json()) as Json };
      }));
      const created = answers.filter((a) => a.status === 201);
      const refused = answers.filter((a) => a.status !== 201);
      expect(created.map((a) => a.body.status)).toEqual(Array.from({ length: ROOM }, () => 'active'));
      expect(refused.map((a) => a.status)).toEqual(Array.from({ length: ATTEMPTS - ROOM }, () => 422));
      expect(refused[0]!.body.issue[0].expression).toEqual(['Subscription.status']);
      const count = await t.request(`${t.fhir()}/Subscription?status=active,requested&_summary=count`, fhirInit(token));
      expect(((await count.json()) as Json).total).toBe(MAX_ACTIVE);
    }, 120_000);
  });
}

for (const target of targets) {
  describe(`transactions activating Subscriptions beside other writes, on ${target.kind}`, () => {
    let t: TestApp;
    let token: string;
    /** The store transactions that clashed with another (a deadlock, a key taken), each run again by writeTx. */
    let conflicts = 0;

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      const resources = Object.create(store.resources) as Store['resources'];
      resources.write = async (...args) => {
        try {
          return await store.resources.write(...args);
        } catch (err) {
          if (err instanceof StoreConflictError) conflicts++;
          throw err;
        }
      };
      t = await createTestApp({ store: new Proxy(store, { get: (s, key) => (key === 'resources' ? resources : Reflect.get(s, key)) }) });
      token = await t.token();
    }, 60_000);
    afterAll(() => t.close());

    // Each activation took the tenant's lock as it counted, after the rows its transaction locked first: one that found
    // Observation/shared absent (no row to lock) took the lock, then met the row another had created since and locked
    // first, while that one waited for the lock; PostgreSQL ended it after a second (deadlock_timeout) and it ran again.
    test('concurrent transactions that activate a Subscription and create the same resource never wait for each other in a cycle', async () => {
      for (let round = 0; round < 3; round++) {
        const bundles = Array.from({ length: 12 }, (_, i) => ({
          resourceType: 'Bundle', type: 'transaction',
          entry: [
            { resource: { resourceType: 'Subscription', status: 'requested', reason: 'lock order', criteria: `Observation?code=http://loinc.org|r${round}-${i}`, channel: { type: 'websocket' } }, request: { method: 'POST', url: 'Subscription' } },
            { resource: { resourceType: 'Observation', id: `shared-${round}`, status: 'final', code: { text: `written by ${i}` } }, request: { method: 'PUT', url: `Observation/shared-${round}` } },
          ],
        }));
        const statuses = await Promise.all(bundles.map(async (b) => (await t.request(t.fhir(), fhirInit(token, 'POST', b))).status));
        expect(statuses).toEqual(bundles.map(() => 200));
      }
      expect(conflicts).toBe(0);
    }, 120_000);
  });
}
