/**
 * The safe time (src/store/write-times.ts, ARCHITECTURE.md "Safe time"), on both databases: a write takes its
 * `meta.lastUpdated` before its transaction commits, so an export's `transactionTime` and a history or search
 * Bundle's `meta.lastUpdated` are the instant before the oldest write still in flight. A version committed
 * after an export ran is in the next export `_since` its transactionTime; one committed after a history or
 * search read is in the next poll `_since` (or `_lastUpdated=ge`) that Bundle's `meta.lastUpdated`.
 * A write is held in flight by a store whose next resource write waits, after its timestamp is taken, until
 * the test lets it go (as a write waits for SQLite's single writer or for a PostgreSQL row lock).
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import type { Store } from '../../src/store/types.ts';

/** `store` whose next resource write, once `hold()` is called, waits until `release()`; `held` settles when it waits. */
function holdingStore(store: Store) {
  let armed: { reached: () => void; gate: Promise<void> } | undefined;
  let release = () => {};
  const write: Store['resources']['write'] = async (tenant, fn) => {
    const wait = armed;
    armed = undefined;
    if (wait) {
      wait.reached();
      await wait.gate;
    }
    return store.resources.write(tenant, fn);
  };
  const resources = new Proxy(store.resources, { get: (target, key) => (key === 'write' ? write : Reflect.get(target, key)) });
  return {
    store: new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) }),
    /** Holds the next resource write; resolves once it waits. */
    hold(): Promise<void> {
      const { promise: gate, resolve } = Promise.withResolvers<void>();
      release = resolve;
      return new Promise((reached) => void (armed = { reached, gate }));
    },
    release: () => release(),
  };
}

await eachStore((kind, fresh) => {
  describe(`safe time (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let token: string;
    let held: ReturnType<typeof holdingStore>;
    const clock = testClock();
    /** How a Subscription endpoint's host resolves, when set (else at once, to a public address). */
    let resolving: ((host: string) => Promise<string[]>) | undefined;

    beforeEach(async () => {
      held = holdingStore(await fresh());
      resolving = undefined;
      t = await createTestApp({ store: held.store, clock, resolveHost: (host) => resolving?.(host) ?? Promise.resolve(['93.184.216.34']) });
      token = await t.token();
      api = fhirClient(t, token);
      await api.put200({ resourceType: 'Patient', id: 'p1', gender: 'female' });
      clock.advance(1000);
    });
    afterEach(async () => {
      held.release();
      await t.close();
    });

    /** Starts an update of Patient/p1 to `gender` and waits until it is held in flight, its time taken; then a second passes. */
    async function updateHeld(gender: string): Promise<{ done: Promise<Response> }> {
      const reached = held.hold();
      const done = Promise.resolve(api.put('Patient/p1', { resourceType: 'Patient', id: 'p1', gender }));
      await reached;
      clock.advance(1000);
      return { done };
    }

    test('a write in flight at kick-off is in that export or in the next one since its transactionTime', async () => {
      const update = await updateHeld('male');
      const first = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient'));
      held.release();
      expect((await update.done).status).toBe(200);
      const firstLines = (await download(t, token, first.output)).Patient ?? [];
      expect(firstLines.map((p) => p.gender)).toEqual(['female']);
      expect(Date.parse(first.transactionTime)).toBeLessThan(clock.now() - 1000);

      const next = await finish(t, token, await kickOff(t, token, `/$export?_type=Patient&_since=${first.transactionTime}`));
      const nextLines = (await download(t, token, next.output)).Patient ?? [];
      expect(nextLines.map((p) => `${p.gender}/${(p.meta as Json).versionId}`)).toEqual(['male/2']);
    });

    test('a history poll since the last Bundle.meta.lastUpdated finds a version committed after that read', async () => {
      const update = await updateHeld('male');
      const page = await api.search('Patient/_history');
      expect(page.entry.map((e: Json) => e.response.etag)).toEqual(['W/"1"']);
      held.release();
      expect((await update.done).status).toBe(200);

      const since = encodeURIComponent(page.meta.lastUpdated);
      const next = await api.search(`Patient/_history?_since=${since}`);
      expect(next.entry.map((e: Json) => `${e.resource.gender}/${e.response.etag}`)).toEqual(['male/W/"2"']);
      const instance = await api.search(`Patient/p1/_history?_since=${since}`);
      expect(instance.entry.map((e: Json) => e.response.etag)).toEqual(['W/"2"']);
    });

    test("a history read in pages: each page says the first page's time, so a poll since the last page's finds a version written meanwhile", async () => {
      await api.put200({ resourceType: 'Patient', id: 'p2', gender: 'male' });
      clock.advance(1000);
      const first = await api.search('Patient/_history?_count=1');
      expect(first.entry.map((e: Json) => e.resource.id)).toEqual(['p2']);
      const next = first.link.find((l: Json) => l.relation === 'next').url as string;
      // Written after the first page was read, above its keyset: no later page of this read holds it.
      clock.advance(1000);
      await api.put200({ resourceType: 'Patient', id: 'p3', gender: 'other' });
      clock.advance(1000);
      const last = await api.search(next.slice(next.indexOf('Patient/_history')));
      expect(last.entry.map((e: Json) => e.resource.id)).toEqual(['p1']);
      expect(last.meta.lastUpdated).toBe(first.meta.lastUpdated);

      const poll = await api.search(`Patient/_history?_since=${encodeURIComponent(last.meta.lastUpdated)}`);
      expect(poll.entry.map((e: Json) => e.resource.id)).toContain('p3');
      // A batch's history entry pages the same way.
      const batch = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: next.slice(next.indexOf('Patient/_history')) } }] });
      const entry = (await batch.json()).entry[0].resource;
      expect(entry.meta.lastUpdated).toBe(first.meta.lastUpdated);
      // A cursor whose time is before any a Date can hold is refused, not a 500.
      const [lastUpdated, type, id, versionId] = JSON.parse(Buffer.from(new URL(next).searchParams.get('_cursor')!, 'base64url').toString('utf8'));
      const forged = Buffer.from(JSON.stringify([lastUpdated, type, id, versionId, -9e15])).toString('base64url');
      expect((await api.get(`Patient/_history?_count=1&_cursor=${forged}`)).status).toBe(400);
    });

    test("a Subscription write whose endpoint's host is being resolved holds no time: Bundles meanwhile say now", async () => {
      const { promise: answered, resolve: answer } = Promise.withResolvers<string[]>();
      const { promise: asked, resolve: ask } = Promise.withResolvers<void>();
      resolving = () => (ask(), answered);
      const created = Promise.resolve(api.post('Subscription', {
        resourceType: 'Subscription', status: 'requested', reason: 'safe time', criteria: 'Patient?gender=male',
        channel: { type: 'rest-hook', endpoint: 'https://hooks.example.org/notify', payload: 'application/fhir+json' },
      }));
      await asked;
      clock.advance(1000);
      const page = await api.search('Patient/_history');
      expect(page.meta.lastUpdated).toBe(new Date(clock.now()).toISOString());
      answer(['93.184.216.34']);
      expect((await created).status).toBe(201);
    });

    test('a search polled with _lastUpdated=ge the last Bundle.meta.lastUpdated finds a resource changed after that read', async () => {
      const update = await updateHeld('male');
      const page = await api.search('Patient');
      expect(page.entry.map((e: Json) => e.resource.gender)).toEqual(['female']);
      held.release();
      expect((await update.done).status).toBe(200);

      const next = await api.search(`Patient?_lastUpdated=ge${encodeURIComponent(page.meta.lastUpdated)}`);
      expect(next.entry.map((e: Json) => e.resource.gender)).toEqual(['male']);
    });

    test('with no write in flight a Bundle and an export say now; a write after them in the same millisecond is later', async () => {
      await api.put200({ resourceType: 'Patient', id: 'p2' });
      const page = await api.search('Patient/_history');
      expect(page.meta.lastUpdated).toBe(new Date(clock.now()).toISOString());
      const manifest = await finish(t, token, await kickOff(t, token, '/$export?_type=Patient'));
      expect(manifest.transactionTime).toBe(new Date(clock.now()).toISOString());
      expect(((await download(t, token, manifest.output)).Patient ?? []).map((p) => p.id).sort()).toEqual(['p1', 'p2']);
      const after = await api.put200({ resourceType: 'Patient', id: 'p3' });
      expect(after.meta.lastUpdated).toBe(new Date(clock.now() + 1).toISOString());
      clock.advance(1);
      const next = await finish(t, token, await kickOff(t, token, `/$export?_type=Patient&_since=${manifest.transactionTime}`));
      expect(((await download(t, token, next.output)).Patient ?? []).map((p) => p.id)).toEqual(['p3']);
    });
  });
});
