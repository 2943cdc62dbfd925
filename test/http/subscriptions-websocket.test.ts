/**
 * The R4 Subscription `websocket` channel (subscription.html): the CapabilityStatement names the
 * websocket; a client binds an active websocket Subscription (`bind {id}` -> `bound {id}`) and is sent
 * `ping {id}` for each notification recorded after, whichever of two servers sharing the database it is
 * connected to and whichever recorded it. Real servers (Bun.serve on port 0), the delivery rounds driven
 * by hand. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createApp, type App } from '../../src/app.ts';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient } from '../../src/auth/client-lifecycle.ts';
import { disableUser } from '../../src/auth/user-lifecycle.ts';
import { createKeyRing } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { silentLogger } from '../../src/log.ts';
import type { ResourceRepo, Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';
import { MAX_MESSAGE_BYTES, MAX_WAITING } from '../../src/fhir/subscriptions/sockets.ts';
import { CHECK_INTERVAL_MS } from '../../src/fhir/subscriptions/hub.ts';
import { testCoreBundle } from '../helpers/terminology-service.ts';
import { serveWithWebsocket, websocketClient } from '../helpers/websocket.ts';
import { signedInToken, testUser, userClient } from '../helpers/oauth.ts';

const serve = serveWithWebsocket;
const client = websocketClient;

const observation = (code: string) => ({ resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code }] }, subject: { reference: 'Patient/pa' } });
const websocketSubscription = { resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: 'Observation?code=http://loinc.org|1234-5', channel: { type: 'websocket' } };

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`subscription websockets (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let second: { app: App; store: Store };
    let servers: ReturnType<typeof serve>[];
    let sub: Json;
    let gate: Promise<void> = Promise.resolve();
    /** While set, a read of a Subscription fails (as a database unreachable for a moment). */
    let failSubscriptionReads = false;
    /** While set, a search of Subscriptions, once read, waits for `release` (after telling `entered`): a bind can come between its read and its use. */
    let holdSubscriptionSearch: { entered: () => void; release: Promise<void> } | undefined;
    const post = async (app: (p: string, i: RequestInit) => Response | Promise<Response>, path: string, body: unknown) =>
      (await app(`${t.fhir()}/${path}`, fhirInit(token, 'POST', body))) as Response;
    const rounds = async () => {
      for (let i = 0; i < 10; i++) {
        // One after the other: each server pings its own clients, whatever the other did before.
        const done = [await t.app.subscriptions.runOnce(), await second.app.subscriptions.runOnce()];
        if (done.every((n) => n === 0)) return;
      }
    };

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      // Reads wait for `gate` (open but in one test), so that a socket's messages can be made to wait.
      const resources: ResourceRepo = Object.create(store.resources);
      resources.read = async (...args) => {
        await gate;
        if (failSubscriptionReads && args[1] === 'Subscription') throw new Error('the database is unreachable');
        return store.resources.read(...args);
      };
      resources.search = async (...args) => {
        if (failSubscriptionReads && args[1].type === 'Subscription') throw new Error('the database is unreachable');
        const rows = await store.resources.search(...args);
        const hold = args[1].type === 'Subscription' ? holdSubscriptionSearch : undefined;
        if (hold) {
          holdSubscriptionSearch = undefined;
          hold.entered();
          await hold.release;
        }
        return rows;
      };
      t = await createTestApp({
        store: new Proxy(store, { get: (target, key) => (key === 'resources' ? resources : Reflect.get(target, key)) }),
        // `$import` from a server on this machine (the test of a Subscription an import writes over).
        env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' },
      });
      const other = db.open();
      const keys = createKeyRing(other, t.clock, MAX_TOKEN_TTL);
      await keys.init();
      second = { app: createApp({ config: t.config, store: other, keys, clock: t.clock, log: silentLogger, core: testCoreBundle() }), store: other };
      servers = [serve(t.app), serve(second.app)];
      token = await t.token();
      const res = await post(t.request, 'Subscription', websocketSubscription);
      sub = (await res.json()) as Json;
      expect([res.status, sub.status]).toEqual([201, 'active']);
    });
    afterAll(async () => {
      for (const s of servers) s.stop();
      await second.store.close();
      await t.close();
    });

    test('the CapabilityStatement names the websocket', async () => {
      const statement = (await (await t.request(`${t.fhir()}/metadata`)).json()) as Json;
      expect(statement.rest[0].extension).toEqual([{ url: 'http://hl7.org/fhir/StructureDefinition/capabilitystatement-websocket', valueUri: 'ws://cinder.test/tenants/t1/fhir/R4/websocket' }]);
    });

    test('bind answers bound for an active websocket Subscription, an error otherwise', async () => {
      const restHook = (await (await post(t.request, 'Subscription', { ...websocketSubscription, status: 'off', channel: { type: 'rest-hook', endpoint: 'https://hook.example/x' } })).json()) as Json;
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind ${sub.id}`);
        expect(await c.next()).toBe(`bound ${sub.id}`);
        c.send('bind no-such-subscription');
        expect(await c.next()).toBe('error no-such-subscription is not an active websocket Subscription');
        c.send(`bind ${restHook.id}`);
        expect(await c.next()).toBe(`error ${restHook.id} is not an active websocket Subscription`);
        c.send('hello');
        expect(await c.next()).toBe('error expected "bind {id}"');
      } finally {
        c.close();
      }
    });

    test('a handshake naming no tenant id is not upgraded, and is answered as any request (no 500)', async () => {
      const http = servers[0]!.url.replace(/^ws/, 'http').replace('/tenants/t1/', '/tenants/%ZZ/');
      const handshake = { Upgrade: 'websocket', Connection: 'Upgrade', 'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==', 'Sec-WebSocket-Version': '13' };
      const res = await fetch(http, { headers: handshake });
      expect(res.status).not.toBe(101);
      expect(res.status).toBeLessThan(500);
    });

    test('a socket binds at most 100 Subscriptions', async () => {
      const bundle = {
        resourceType: 'Bundle', type: 'batch',
        entry: Array.from({ length: 101 }, () => ({ resource: websocketSubscription, request: { method: 'POST', url: 'Subscription' } })),
      };
      const res = (await (await post(t.request, '', bundle)).json()) as Json;
      const ids = (res.entry as Json[]).map((e) => e.resource.id as string);
      const c = await client(servers[0]!.url);
      try {
        // In batches within what a socket may have waiting (MAX_WAITING).
        for (let i = 0; i < 100; i += 25) {
          for (const id of ids.slice(i, i + 25)) c.send(`bind ${id}`);
          for (const id of ids.slice(i, i + 25)) expect(await c.next()).toBe(`bound ${id}`);
        }
        c.send(`bind ${ids[100]}`);
        expect(await c.next()).toBe(`error ${ids[100]} not bound: a socket binds at most 100 Subscriptions`);
        c.send(`bind ${ids[0]}`);
        expect(await c.next()).toBe(`bound ${ids[0]}`);
      } finally {
        c.close();
      }
    });

    test(`a client sending faster than it is answered (more than ${MAX_WAITING} messages waiting) is closed, as is one sending a message over ${MAX_MESSAGE_BYTES} bytes`, async () => {
      const closed = (ws: WebSocket) => new Promise<number>((resolve) => {
        ws.onclose = (e) => resolve(e.code);
      });
      const opened = (ws: WebSocket) => new Promise<void>((resolve) => {
        ws.onopen = () => resolve();
      });
      const flood = new WebSocket(servers[0]!.url);
      const floodClosed = closed(flood);
      let answers = 0;
      flood.onmessage = () => answers++;
      await opened(flood);
      // The store answers none of them meanwhile: they wait.
      const held = Promise.withResolvers<void>();
      gate = held.promise;
      try {
        for (let i = 0; i < 2000; i++) flood.send(`bind no-such-subscription-${i}`);
        expect(await floodClosed).toBe(1008);
      } finally {
        gate = Promise.resolve();
        held.resolve();
      }
      expect(answers).toBe(0);
      const big = new WebSocket(servers[0]!.url);
      const bigClosed = closed(big);
      await opened(big);
      big.send(`bind ${'x'.repeat(MAX_MESSAGE_BYTES)}`);
      expect(await bigClosed).toBe(1009);
      // Another client is answered as before.
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind ${sub.id}`);
        expect(await c.next()).toBe(`bound ${sub.id}`);
      } finally {
        c.close();
      }
    });

    test('a client bound through either server is pinged once per matching write, whichever server wrote it', async () => {
      const a = await client(servers[0]!.url);
      const b = await client(servers[1]!.url);
      try {
        a.send(`bind ${sub.id}`);
        b.send(`bind ${sub.id}`);
        expect([await a.next(), await b.next()]).toEqual([`bound ${sub.id}`, `bound ${sub.id}`]);
        expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
        expect((await post(second.app.request, 'Observation', observation('9999-9'))).status).toBe(201);
        expect((await post(second.app.request, 'Observation', observation('1234-5'))).status).toBe(201);
        await rounds();
        await rounds();
        expect(await a.drained()).toEqual([`ping ${sub.id}`, `ping ${sub.id}`]);
        expect(await b.drained()).toEqual([`ping ${sub.id}`, `ping ${sub.id}`]);
        expect([t.app.subscriptions.counts.pinged, second.app.subscriptions.counts.pinged]).toEqual([2, 2]);
        expect(await (await t.request('/metrics')).text()).toContain('cinder_subscription_deliveries_total{result="pinged"} 2');
      } finally {
        a.close();
        b.close();
      }
    });

    test('a Subscription no longer active (error, off, deleted) is pinged nothing more: its sockets are told and unbound', async () => {
      for (const end of ['error', 'off', 'deleted'] as const) {
        const created = (await (await post(t.request, 'Subscription', websocketSubscription)).json()) as Json;
        const c = await client(servers[0]!.url);
        try {
          c.send(`bind ${created.id}`);
          c.send(`bind ${sub.id}`);
          expect([await c.next(), await c.next()]).toEqual([`bound ${created.id}`, `bound ${sub.id}`]);
          t.clock.advance(1);
          // Recorded while it was active; it is no longer before the round that would ping it.
          expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
          const put = (status: string) => t.request(`${t.fhir()}/Subscription/${created.id}`, fhirInit(token, 'PUT', { ...created, status, ...(status === 'error' && { error: 'broken' }) }));
          const res = end === 'deleted' ? await t.request(`${t.fhir()}/Subscription/${created.id}`, fhirInit(token, 'DELETE')) : await put(end);
          expect(res.status).toBeLessThan(300);
          await rounds();
          const why = end === 'deleted' ? 'deleted' : `status ${end}`;
          expect({ end, messages: (await c.drained()).sort() }).toEqual({
            end, messages: [`error ${created.id} is no longer an active websocket Subscription (${why}): no more pings; bind it again once it is active`, `ping ${sub.id}`].sort(),
          });
          // Unbound from it alone: the other Subscription bound on the socket is pinged still, and it is not told twice.
          t.clock.advance(1);
          expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
          await rounds();
          expect(await c.drained()).toEqual([`ping ${sub.id}`]);
        } finally {
          c.close();
        }
      }
    });

    test('a socket bound after the last notification is told and unbound promptly once the Subscription is no longer active (off, error, deleted), whichever server wrote it', async () => {
      for (const end of ['off', 'error', 'deleted'] as const) {
        const created = (await (await post(t.request, 'Subscription', websocketSubscription)).json()) as Json;
        const a = await client(servers[0]!.url);
        const b = await client(servers[1]!.url);
        try {
          a.send(`bind ${created.id}`);
          b.send(`bind ${created.id}`);
          expect([await a.next(), await b.next()]).toEqual([`bound ${created.id}`, `bound ${created.id}`]);
          // The binds are seen; nothing waits for the Subscription.
          await rounds();
          expect([await a.drained(), await b.drained()]).toEqual([[], []]);
          // Written through the second server: the first sees it by the database's change token.
          const path = `${t.fhir()}/Subscription/${created.id}`;
          const res = end === 'deleted'
            ? await second.app.request(path, fhirInit(token, 'DELETE'))
            : await second.app.request(path, fhirInit(token, 'PUT', { ...created, status: end, ...(end === 'error' && { error: 'broken' }) }));
          expect(res.status).toBeLessThan(300);
          t.clock.advance(CHECK_INTERVAL_MS);
          await rounds();
          const told = `error ${created.id} is no longer an active websocket Subscription (${end === 'deleted' ? 'deleted' : `status ${end}`}): no more pings; bind it again once it is active`;
          expect({ end, a: await a.drained(), b: await b.drained() }).toEqual({ end, a: [told], b: [told] });
          // Unbound: told once.
          t.clock.advance(CHECK_INTERVAL_MS);
          expect((await post(t.request, 'Subscription', { ...websocketSubscription, status: 'off' })).status).toBe(201);
          await rounds();
          expect([await a.drained(), await b.drained()]).toEqual([[], []]);
        } finally {
          a.close();
          b.close();
        }
      }
    });

    test('a socket bound as a Subscription is turned off (its bind read it active) is told at the next round', async () => {
      const created = (await (await post(t.request, 'Subscription', websocketSubscription)).json()) as Json;
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind ${created.id}`);
        expect(await c.next()).toBe(`bound ${created.id}`);
        // Turned off before any round saw the bind, within the change token's interval: no token moved for this process yet.
        expect((await t.request(`${t.fhir()}/Subscription/${created.id}`, fhirInit(token, 'PUT', { ...created, status: 'off' }))).status).toBe(200);
        await rounds();
        expect(await c.drained()).toEqual([`error ${created.id} is no longer an active websocket Subscription (status off): no more pings; bind it again once it is active`]);
      } finally {
        c.close();
      }
    });

    test('a socket that binds a Subscription activated again while the round read it off is not told it is off (the read was before its bind)', async () => {
      const created = (await (await post(t.request, 'Subscription', websocketSubscription)).json()) as Json;
      const early = await client(servers[0]!.url);
      const late = await client(servers[0]!.url);
      try {
        early.send(`bind ${created.id}`);
        expect(await early.next()).toBe(`bound ${created.id}`);
        await rounds();
        expect((await second.app.request(`${t.fhir()}/Subscription/${created.id}`, fhirInit(token, 'PUT', { ...created, status: 'off' }))).status).toBe(200);
        t.clock.advance(CHECK_INTERVAL_MS);
        let entered!: () => void;
        let release!: () => void;
        const reading = new Promise<void>((resolve) => (entered = resolve));
        holdSubscriptionSearch = { entered: () => entered(), release: new Promise<void>((resolve) => (release = resolve)) };
        const round = t.app.subscriptions.runOnce();
        await reading;
        // Read off; before the round tells its sockets, the owner activates it again and another socket binds it.
        expect((await t.request(`${t.fhir()}/Subscription/${created.id}`, fhirInit(token, 'PUT', { ...created, status: 'requested' }))).status).toBe(200);
        late.send(`bind ${created.id}`);
        expect(await late.next()).toBe(`bound ${created.id}`);
        release();
        await round;
        expect(await early.drained()).toEqual([`error ${created.id} is no longer an active websocket Subscription (status off): no more pings; bind it again once it is active`]);
        t.clock.advance(CHECK_INTERVAL_MS);
        await rounds();
        expect(await late.drained()).toEqual([]);
        // It is still bound: pinged for what is recorded now.
        expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
        await rounds();
        expect(await late.drained()).toEqual([`ping ${created.id}`]);
      } finally {
        holdSubscriptionSearch = undefined;
        early.close();
        late.close();
      }
    });

    test('a socket whose Subscription could not be read as it was turned off is told at a later round, not never', async () => {
      const created = (await (await post(t.request, 'Subscription', websocketSubscription)).json()) as Json;
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind ${created.id}`);
        expect(await c.next()).toBe(`bound ${created.id}`);
        await rounds();
        expect((await second.app.request(`${t.fhir()}/Subscription/${created.id}`, fhirInit(token, 'PUT', { ...created, status: 'off' }))).status).toBe(200);
        t.clock.advance(CHECK_INTERVAL_MS);
        failSubscriptionReads = true;
        try {
          await t.app.subscriptions.runOnce();
        } finally {
          failSubscriptionReads = false;
        }
        expect(await c.drained()).toEqual([]);
        await rounds();
        expect(await c.drained()).toEqual([`error ${created.id} is no longer an active websocket Subscription (status off): no more pings; bind it again once it is active`]);
      } finally {
        c.close();
      }
    });

    test('a ping whose Subscription could not be read is sent the next round, not lost', async () => {
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind ${sub.id}`);
        expect(await c.next()).toBe(`bound ${sub.id}`);
        t.clock.advance(1);
        expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
        failSubscriptionReads = true;
        try {
          await t.app.subscriptions.runOnce();
        } finally {
          failSubscriptionReads = false;
        }
        expect(await c.drained()).toEqual([]);
        await rounds();
        expect(await c.drained()).toEqual([`ping ${sub.id}`]);
      } finally {
        c.close();
      }
    });

    test('a Subscription an import writes over, its content still active, has no owner: its sockets are told and unbound, and a bind of it is refused', async () => {
      const created = (await (await post(t.request, 'Subscription', websocketSubscription)).json()) as Json;
      expect(created.status).toBe('active');
      const a = await client(servers[0]!.url);
      const b = await client(servers[1]!.url);
      const source = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(JSON.stringify({ ...created, meta: undefined, reason: 'imported' }) + '\n') });
      try {
        a.send(`bind ${created.id}`);
        b.send(`bind ${created.id}`);
        expect([await a.next(), await b.next()]).toEqual([`bound ${created.id}`, `bound ${created.id}`]);
        await rounds();
        expect([await a.drained(), await b.drained()]).toEqual([[], []]);
        const kickoff = await post(t.request, '$import', {
          resourceType: 'Parameters',
          parameter: [
            { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
            { name: 'input', part: [{ name: 'type', valueCode: 'Subscription' }, { name: 'url', valueUri: `http://127.0.0.1:${source.port}/subscriptions.ndjson` }] },
          ],
        });
        expect(kickoff.status).toBe(202);
        await t.app.imports.runOnce();
        const done = (await (await t.request(kickoff.headers.get('content-location')!, fhirInit(token))).json()) as Json;
        expect(done.output).toMatchObject([{ count: 1, unchanged: 0 }]);
        const now = (await (await t.request(`${t.fhir()}/Subscription/${created.id}`, fhirInit(token))).json()) as Json;
        expect([now.status, now.reason]).toEqual(['active', 'imported']);
        // Seen by both servers (the first wrote it; the second by the database's change token), whether or not a notification waits.
        t.clock.advance(CHECK_INTERVAL_MS);
        expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
        await rounds();
        const told = `error ${created.id} is no longer an active websocket Subscription (not activated: an import wrote it, and it has no owner until it is written through the API): no more pings; bind it again once it is active`;
        expect({ a: await a.drained(), b: await b.drained() }).toEqual({ a: [told], b: [told] });
        // A bind of it is refused, as it notifies nothing.
        a.send(`bind ${created.id}`);
        expect(await a.next()).toBe(`error ${created.id} is not an active websocket Subscription (not activated: an import wrote it, and it has no owner until it is written through the API)`);
        t.clock.advance(CHECK_INTERVAL_MS);
        expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
        await rounds();
        expect([await a.drained(), await b.drained()]).toEqual([[], []]);
      } finally {
        source.stop(true);
        a.close();
        b.close();
      }
    });

    test("a disabled app's Subscription, or a revoked sign-in's, is refused a bind, as a topic-based one's is", async () => {
      const app = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.*'] });
      const appToken = await t.token(undefined, app.client.clientId, app.clientSecret!);
      const signedIn = await userClient(t, { scopes: ['user/*.cruds'] });
      await testUser(t, { username: 'wilma', fhirUser: 'Practitioner/wilma' });
      const userToken = await signedInToken(t, signedIn, 'openid user/*.cruds', 'wilma');
      const cut = [
        { token: appToken, cut: () => disableClient(t.store, t.clock, app.client.clientId) },
        { token: userToken, cut: () => disableUser(t.store, t.clock, 't1', 'wilma') },
      ];
      for (const { token: owner, cut: revoke } of cut) {
        const res = await t.request(`${t.fhir()}/Subscription`, fhirInit(owner, 'POST', websocketSubscription));
        expect(res.status).toBe(201);
        const created = (await res.json()) as Json;
        await revoke();
        // Past the servers' client and user caches (5 s).
        t.clock.advance(6_000);
        const c = await client(servers[0]!.url);
        try {
          c.send(`bind ${created.id}`);
          const answer = await c.next();
          expect(answer).toStartWith(`error ${created.id} is not an active websocket Subscription`);
          expect(answer).toContain('disabled');
          t.clock.advance(1);
          expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
          await rounds();
          expect(await c.drained()).toEqual([]);
        } finally {
          c.close();
        }
      }
      token = await t.token();
    });

    test("a disabled app's bound Subscription, or a revoked sign-in's, is pinged nothing more, though it still reads active (as a rest-hook's and a topic socket's)", async () => {
      const app = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.*'] });
      const appToken = await t.token(undefined, app.client.clientId, app.clientSecret!);
      const signedIn = await userClient(t, { scopes: ['user/*.cruds'] });
      await testUser(t, { username: 'wanda', fhirUser: 'Practitioner/wanda' });
      const userToken = await signedInToken(t, signedIn, 'openid user/*.cruds', 'wanda');
      const cut = [
        { token: appToken, cut: () => disableClient(t.store, t.clock, app.client.clientId) },
        { token: userToken, cut: () => disableUser(t.store, t.clock, 't1', 'wanda') },
      ];
      for (const { token: owner, cut: revoke } of cut) {
        const res = await t.request(`${t.fhir()}/Subscription`, fhirInit(owner, 'POST', websocketSubscription));
        expect(res.status).toBe(201);
        const created = (await res.json()) as Json;
        expect(created.status).toBe('active');
        const c = await client(servers[0]!.url);
        const d = await client(servers[1]!.url);
        try {
          c.send(`bind ${created.id}`);
          d.send(`bind ${created.id}`);
          expect([await c.next(), await d.next()]).toEqual([`bound ${created.id}`, `bound ${created.id}`]);
          t.clock.advance(1);
          // Recorded while the authority stands; then cut before a round pings it (behind cinder's back: no status written).
          expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
          await revoke();
          // Past the servers' client and user caches (5 s).
          t.clock.advance(6_000);
          token = await t.token();
          await rounds();
          expect([await c.drained(), await d.drained()]).toEqual([[], []]);
          expect(((await (await t.request(`${t.fhir()}/Subscription/${created.id}`, fhirInit(token))).json()) as Json).status).toBe('active');
        } finally {
          c.close();
          d.close();
        }
      }
    });

    test('what was recorded before a client bound is not sent to it; old notifications are purged', async () => {
      expect((await post(t.request, 'Observation', observation('1234-5'))).status).toBe(201);
      t.clock.advance(1);
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind ${sub.id}`);
        expect(await c.next()).toBe(`bound ${sub.id}`);
        await rounds();
        expect(await c.drained()).toEqual([]);
        t.clock.advance(3 * 60_000);
        token = await t.token();
        await rounds();
        expect(await t.store.subscriptions.waiting()).toBe(0);
      } finally {
        c.close();
      }
    });
  });
}
