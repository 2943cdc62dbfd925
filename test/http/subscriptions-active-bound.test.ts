/**
 * The tenant's bound of activated Subscriptions (activation.ts MAX_ACTIVE) under concurrency: activations sent at once
 * to two servers sharing one database (two processes of a deployment) never store more than the bound, on both
 * databases. On PostgreSQL (READ COMMITTED) two activations counting at once each saw the other's row missing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { MAX_ACTIVE } from '../../src/fhir/subscriptions/activation.ts';
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
