/**
 * A rest-hook delivery that fails with an error no step expected (here the store's read of the notified version
 * throws, injected through the app's store): a failed attempt as any other, logged once, retried after the usual
 * back-off and, the fifth in a row, putting the Subscription in `error`; never claimed again at once, round after
 * round, for ever. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createLogger } from '../../src/log.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`an unexpected delivery error (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let failing = false;
    const warnings: Json[] = [];
    const got: string[] = [];
    let server: ReturnType<typeof Bun.serve>;

    beforeAll(async () => {
      const database = await target.migrated();
      const store = database.open();
      // The version a JSON payload sends is read here: while `failing`, that read throws.
      const resources = new Proxy(store.resources, {
        get: (repo, key) => (key === 'vread' && failing ? () => Promise.reject(new Error('injected read fault')) : Reflect.get(repo, key)),
      });
      const wrapped = new Proxy(store, { get: (s, key) => (key === 'resources' ? resources : Reflect.get(s, key)) }) as Store;
      const log = createLogger('warn', {}, (line) => void warnings.push(JSON.parse(line) as Json));
      t = await createTestApp({ store: wrapped, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' }, log });
      token = await t.token();
      server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req) => (got.push(new URL(req.url).pathname), new Response(null, { status: 200 })) });
    });
    afterAll(async () => {
      server.stop(true);
      await t.close();
    });

    const post = async (path: string, body: Json) => {
      const res = await t.request(`${t.fhir()}/${path}`, fhirInit(token, 'POST', body));
      expect(res.status).toBe(201);
      return (await res.json()) as Json;
    };
    /** Delivery rounds until one claims nothing: how many claimed something (50 at most). */
    const drain = async () => {
      let rounds = 0;
      while (rounds < 50 && (await t.app.subscriptions.runOnce()) > 0) rounds++;
      return rounds;
    };
    const failures = () => warnings.filter((w) => w.msg === 'subscription delivery failed unexpectedly');

    test('is a failed attempt with its back-off, logged once each, and the fifth in a row sets the Subscription to error', async () => {
      const sub = await post('Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: 'Observation?code=http://loinc.org|1234-5',
        channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${server.port}/hook`, payload: 'application/fhir+json' },
      });
      expect(sub.status).toBe('active');
      await post('Observation', { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '1234-5' }] } });
      failing = true;
      const failed = t.app.subscriptions.counts.failed;
      // Claimed once, then not again until its back-off has passed (it was claimed again at once, for ever).
      expect(await drain()).toBe(1);
      expect(await drain()).toBe(0);
      expect(t.app.subscriptions.counts.failed).toBe(failed + 1);
      expect(failures().length).toBe(1);
      expect(failures()[0]).toMatchObject({ subscription: sub.id, failures: 1, err: { message: 'injected read fault' } });
      t.clock.advance(4_999);
      expect(await drain()).toBe(0);
      t.clock.advance(1);
      expect(await drain()).toBe(1);
      for (const wait of [10_000, 20_000, 40_000]) {
        t.clock.advance(wait - 1);
        expect(await drain()).toBe(0);
        t.clock.advance(1);
        expect(await drain()).toBe(1);
      }
      expect(failures().map((w) => w.failures)).toEqual([1, 2, 3, 4, 5]);
      expect(t.app.subscriptions.counts.failed).toBe(failed + 5);
      const read = await t.request(`${t.fhir()}/Subscription/${sub.id}`, fhirInit(token));
      const errored = (await read.json()) as Json;
      expect(errored.status).toBe('error');
      expect(errored.error).toBe('5 deliveries failed in a row; the last: the server failed to send it (an internal error: see the server log)');
      // The detail went to the log only.
      expect(JSON.stringify(errored)).not.toContain('injected');
      expect(await t.store.subscriptions.waiting()).toBe(0);
      expect(got).toEqual([]);
    });

    test('a delivery that succeeds after an unexpected error starts the count again', async () => {
      failing = false;
      got.length = 0;
      const sub = await post('Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: 'Observation?code=http://loinc.org|5678-9',
        channel: { type: 'rest-hook', endpoint: `http://127.0.0.1:${server.port}/hook`, payload: 'application/fhir+json' },
      });
      const observation = await post('Observation', { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '5678-9' }] } });
      failing = true;
      expect(await drain()).toBe(1);
      failing = false;
      t.clock.advance(5_000);
      expect(await drain()).toBe(1);
      expect(got).toEqual([`/hook/Observation/${observation.id}`]);
      const read = await t.request(`${t.fhir()}/Subscription/${sub.id}`, fhirInit(token));
      expect(((await read.json()) as Json).status).toBe('active');
      expect(await t.store.subscriptions.waiting()).toBe(0);
    });
  });
}
