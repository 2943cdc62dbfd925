/**
 * The Subscription outbox is bounded (src/fhir/subscriptions/delivery.ts): a rest-hook Subscription found
 * with more than CINDER_SUBSCRIPTION_MAX_PENDING notifications waiting (an endpoint answering 2xx, but
 * slower than the writes its criteria match) is set to `error`, saying why, and what waits for it is
 * dropped; up to the bound everything is delivered. Set back to `requested` it resumes. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';

const MAX = 5;

const observation = { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '1234-5' }] }, subject: { reference: 'Patient/pa' } };

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`subscription backlog bound (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let database: StoreDatabase;
    let server: ReturnType<typeof Bun.serve>;
    let received = 0;

    const post = (path: string, body: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, 'POST', body));
    const read = async (path: string) => (await (await t.request(`${t.fhir()}/${path}`, fhirInit(token))).json()) as Json;
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };
    const subscribe = async () => {
      const res = await post('Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'backlog', criteria: 'Observation?code=http://loinc.org|1234-5',
        channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${server.port}/hook` },
      });
      expect(res.status).toBe(201);
      return (await res.json()) as Json;
    };
    const writes = async (n: number) => {
      for (let i = 0; i < n; i++) expect((await post('Observation', observation)).status).toBe(201);
    };

    beforeAll(async () => {
      database = await target.migrated();
      const store = database.open();
      await store.migrate();
      t = await createTestApp({ store, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true', CINDER_SUBSCRIPTION_MAX_PENDING: String(MAX) } });
      token = await t.token();
      server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => (received++, new Response(null, { status: 204 })) });
    });
    afterAll(async () => {
      server?.stop(true);
      await t?.close();
    });

    test('up to the bound every notification is delivered', async () => {
      const sub = await subscribe();
      await writes(MAX);
      expect(await t.store.subscriptions.waitingFor('t1', sub.id as string, 100)).toBe(MAX);
      await drain();
      expect(received).toBe(MAX);
      expect((await read(`Subscription/${sub.id}`)).status).toBe('active');
      expect(await t.store.subscriptions.waiting()).toBe(0);
      const current = await read(`Subscription/${sub.id}`);
      expect((await t.request(`${t.fhir()}/Subscription/${sub.id}`, fhirInit(token, 'PUT', { ...current, status: 'off' }))).status).toBe(200);
    });

    test('beyond it the Subscription is set to error with the reason, and what waits is dropped unsent; it resumes when set back', async () => {
      received = 0;
      const sub = await subscribe();
      await writes(MAX + 1);
      await drain();
      expect(received).toBe(0);
      const errored = await read(`Subscription/${sub.id}`);
      expect(errored.status).toBe('error');
      expect(errored.error).toBe(`more than ${MAX} notifications were waiting: the endpoint does not keep up with the writes the criteria match (CINDER_SUBSCRIPTION_MAX_PENDING)`);
      expect((errored.meta as Json).versionId).toBe('2');
      expect(await t.store.subscriptions.waiting()).toBe(0);
      const metrics = await (await t.request('/metrics')).text();
      expect(metrics).toContain('cinder_subscription_deliveries_total{result="backlog"} 1');
      expect(metrics).toContain('cinder_subscription_deliveries_total{result="dropped"} ' + (MAX + 1));

      // In error it records nothing more; set back to requested it is active and delivers again.
      await writes(2);
      await drain();
      expect(received).toBe(0);
      const resumed = await t.request(`${t.fhir()}/Subscription/${sub.id}`, fhirInit(token, 'PUT', { ...errored, status: 'requested' }));
      const body = (await resumed.json()) as Json;
      expect([resumed.status, body.status, body.error]).toEqual([200, 'active', undefined]);
      await writes(1);
      await drain();
      expect(received).toBe(1);
    });
  });
}
