/**
 * A delivery under way when its Subscription is deleted, or activated again by another app: what its batch still
 * holds is not sent once the write has committed (only the notification already on its way), on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

/** A receiver that holds each request until `release()` and counts what it was sent. */
function gatedReceiver() {
  const got: string[] = [];
  let opened: () => void = () => {};
  let gate = new Promise<void>((r) => (opened = r));
  let arrived: () => void = () => {};
  let first = new Promise<void>((r) => (arrived = r));
  const server = Bun.serve({
    port: 0, hostname: '127.0.0.1',
    async fetch(req) {
      got.push(new URL(req.url).pathname + ' ' + (await req.text()));
      arrived();
      await gate;
      return new Response(null, { status: 200 });
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/hook`, got,
    /** Resolves once a request is held. */
    arrived: () => first,
    /** Lets every request held, and every later one, through. */
    release: () => opened(),
    reset() {
      got.length = 0;
      gate = new Promise<void>((r) => (opened = r));
      first = new Promise<void>((r) => (arrived = r));
    },
    stop: () => server.stop(true),
  };
}

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`a delivery under way when its Subscription is deleted or activated again, on ${target.kind}`, () => {
    let t: TestApp;
    let token: string;
    let other: string;
    let hook: ReturnType<typeof gatedReceiver>;
    const call = (method: string, path: string, body?: unknown, tok = token) => t.request(`${t.fhir()}/${path}`, fhirInit(tok, method, body));
    const json = async (res: Response | Promise<Response>) => (await (await res).json()) as Json;

    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({ store: db.open(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
      other = await t.tokenFor('t1', ['system/*.*']);
      hook = gatedReceiver();
    }, 60_000);
    afterAll(async () => {
      hook.release();
      hook.stop();
      await t.close();
    });

    /** A criteria Subscription with three notifications waiting, its delivery held at the first; the delivery under way. */
    async function heldAtFirst(family: string) {
      hook.reset();
      const res = await call('POST', 'Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: `Patient?family=${family}`,
        channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json' },
      });
      expect(res.status).toBe(201);
      const sub = await json(res);
      for (let i = 0; i < 3; i++) expect((await call('POST', 'Patient', { resourceType: 'Patient', name: [{ family }] })).status).toBe(201);
      const delivering = t.app.subscriptions.runOnce();
      await hook.arrived();
      return { sub, delivering };
    }

    test('a Subscription deleted while its notifications are being sent is sent none of those left in the batch', async () => {
      const { sub, delivering } = await heldAtFirst('deleted');
      expect((await call('DELETE', `Subscription/${sub.id}`)).status).toBe(200);
      hook.release();
      await delivering;
      for (let i = 0; i < 5 && (await t.app.subscriptions.runOnce()) > 0; i++);
      expect(hook.got.length).toBe(1);
    });

    test("a Subscription activated again by another app while its notifications are being sent sends none of the first owner's left in the batch", async () => {
      const { sub, delivering } = await heldAtFirst('reowned');
      const current = await json(call('GET', `Subscription/${sub.id}`));
      expect((await call('PUT', `Subscription/${sub.id}`, { ...current, status: 'requested' }, other)).status).toBe(200);
      hook.release();
      await delivering;
      for (let i = 0; i < 5 && (await t.app.subscriptions.runOnce()) > 0; i++);
      expect(hook.got.length).toBe(1);
      // The new owner's are sent: a write it matches.
      hook.got.length = 0;
      expect((await call('POST', 'Patient', { resourceType: 'Patient', name: [{ family: 'reowned' }] })).status).toBe(201);
      for (let i = 0; i < 5 && (await t.app.subscriptions.runOnce()) > 0; i++);
      expect(hook.got.length).toBe(1);
      expect((await call('DELETE', `Subscription/${sub.id}`)).status).toBe(200);
    });
  });
}
