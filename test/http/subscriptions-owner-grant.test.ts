/**
 * Subscriptions an older release activated with a token holding `patient/` scopes and no patient in context beside
 * filtered `user/` (or `system/`) ones: that token read every patient's records of the filtered type, and so did the
 * Subscription's matching. Today those scopes read none of it (src/auth/scopes.ts accessFromScopes), and the owner's
 * access is rebuilt from the recorded scopes by today's rules (owner-reach.ts): what waits from the old matching is
 * not sent, nothing more is matched, and the Subscription reads `error`, saying why, which no `cinder client`
 * command undoes; activated again by a token that may, it notifies again. The rows are written as an older release
 * left them (the owner recorded in the store, notifications waiting), and delivered to a rest-hook receiver, on both
 * databases.
 */
import { afterAll, beforeAll, describe, expect, setSystemTime, test } from 'bun:test';
import { createClient } from '../../src/auth/admin.ts';
import { createUser } from '../../src/auth/users.ts';
import { createTestApp, type TestApp, type TestClock } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { PASSWORD, REDIRECT } from '../helpers/oauth.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { storeTargets } from '../helpers/stores.ts';
import { serveWithWebsocket, websocketClient } from '../helpers/websocket.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

/** The system clock, moved by the tests: the app and the command line both read it. */
const systemTime: TestClock = {
  now: () => Date.now(),
  advance: (ms) => void setSystemTime(new Date(Date.now() + ms)),
  set: (ms) => void setSystemTime(new Date(ms)),
};
afterAll(() => void setSystemTime());

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const category = (code: string) => [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code }] }];
const GRANT_ERROR = 'no longer let it search what its criteria select (a patient/ scope with no patient in context grants nothing';

for (const target of targets) {
  describe(`Subscriptions an older release activated with patient/ scopes and no patient in context, on ${target.kind}`, () => {
    let t: TestApp;
    let cli: ReturnType<typeof createCliEnv>;
    let admin: FhirClient;
    let app: string;
    let doc: string;
    let n = 0;

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      t = await createTestApp({ store, clock: systemTime, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      cli = createCliEnv({ CINDER_DATABASE_URL: db.url });
      admin = fhirClient(t, await t.token());
      for (const id of ['p1', 'p2']) await admin.put200({ resourceType: 'Patient', id });
      app = (await createClient(t.store, t.clock, {
        tenant: 't1', name: 'Older app', grants: ['authorization_code', 'refresh_token'], redirectUris: [REDIRECT],
        scopes: ['openid', 'launch/patient', 'patient/*.cruds', 'user/*.cruds'],
      })).client.clientId;
      doc = (await createUser(t.store, t.clock, { tenant: 't1', username: 'doc', password: PASSWORD, fhirUser: 'Practitioner/d-1' })).id;
    }, 60_000);
    afterAll(async () => {
      await t.close();
      cli.close();
    });

    /** A laboratory (or `kind`) Observation of `patient`, written through the API; its id. */
    const observation = async (patient: string, kind = 'laboratory') => {
      const id = `o${n++}-${patient}`;
      await admin.put200({ resourceType: 'Observation', id, status: 'final', category: category(kind), code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
      return id;
    };
    /** The owner record an older release wrote for a token of `scopes` with no patient in context (owner.ts), a user's sign-in or a client's own. */
    const olderOwner = (scopes: string[], clientId = app, user: string | null = doc) =>
      JSON.stringify({ scopes, clientId, ...(user !== null && { user: { id: user, readAt: t.clock.now() } }) });
    /**
     * A rest-hook Subscription to laboratory results sent to `endpoint` (with `payload`, the versions), active and owned by `owner` as an older release left it
     * (activated through the API, its owner then recorded as that release recorded it), with notifications of `waiting`
     * recorded by that release's matching.
     */
    const olderSubscription = async (owner: string, endpoint: string, waiting: string[] = [], payload?: string) => {
      const channel = { type: 'rest-hook', endpoint, ...(payload !== undefined && { payload }) };
      const sub = await admin.create({ resourceType: 'Subscription', status: 'requested', reason: 'older', criteria: 'Observation?category=laboratory', channel });
      expect(sub.status).toBe('active');
      const id = sub.id as string;
      await t.store.resources.write('t1', async (w) => {
        await w.ownSubscription(id, owner, 'rest-hook');
        if (waiting.length) await w.notify(waiting.map((o) => ({ subscriptionId: id, type: 'Observation', id: o, versionId: 1, matchedFor: owner })), t.clock.now());
      });
      return id;
    };
    const shown = async (id: string) => {
      const sub = (await (await admin.get(`Subscription/${id}`)).json()) as Json;
      return [sub.status, sub.error, sub.meta.versionId];
    };
    const waiting = async (id: string) => (await t.store.subscriptions.pending('t1', id, 100)).map((x) => x.id);
    const deliver = async () => {
      for (let i = 0; i < 5; i++) await t.app.subscriptions.runOnce();
    };
    async function cinder(argv: string[]): Promise<Json> {
      const r = await cli.run([...argv, '--json']);
      if (r.code !== 0) throw new Error(`cinder ${argv.join(' ')}: ${r.code} ${r.stderr}`);
      return JSON.parse(r.stdout) as Json;
    }

    test("what an older release matched for every patient and left waiting is not delivered: the Subscription reads error, saying why", async () => {
      const hook = receiver();
      try {
        const matched = [await observation('p1'), await observation('p2')];
        const id = await olderSubscription(olderOwner(['openid', 'patient/Observation.rs', 'user/Observation.rs?category=laboratory']), hook.url, matched, 'application/fhir+json');
        expect(await waiting(id)).toEqual(matched);
        await deliver();
        // Not p2's (nor p1's) laboratory result: the grant never reached either without a patient in context.
        expect(hook.got).toEqual([]);
        expect(await waiting(id)).toEqual([]);
        expect(await shown(id)).toEqual(['error', expect.stringContaining(GRANT_ERROR), '2']);
        expect(t.app.subscriptions.counts.delivered).toBe(0);
      } finally {
        hook.stop();
      }
    });

    test('a write finds it: nothing is matched for it, and it reads error, saying why; activated again by a token that may, it notifies again', async () => {
      const hook = receiver();
      try {
        const id = await olderSubscription(olderOwner(['openid', 'patient/Observation.rs', 'user/Observation.rs?category=laboratory']), hook.url);
        // The grant kept reads to the patient, never searches: such a one searches every patient's results as it always did.
        const searches = await olderSubscription(olderOwner(['openid', 'patient/Observation.r', 'user/Observation.rs?category=laboratory']), hook.url);
        await observation('p2');
        expect(await waiting(id)).toEqual([]);
        expect(await waiting(searches)).toHaveLength(1);
        expect(await shown(id)).toEqual(['error', expect.stringContaining(`(client ${app})`), '2']);
        expect(await shown(searches)).toEqual(['active', undefined, '1']);
        await observation('p1');
        expect(await waiting(id)).toEqual([]);
        expect(await shown(id)).toMatchObject(['error', expect.stringContaining(GRANT_ERROR), '2']);

        // Activated again (status requested) by a token that may search it: it notifies again, as that token's.
        const sub = (await (await admin.get(`Subscription/${id}`)).json()) as Json;
        const { error: _error, ...rest } = sub;
        await admin.put200({ ...rest, status: 'requested' });
        const o = await observation('p2');
        expect(await waiting(id)).toEqual([o]);
      } finally {
        hook.stop();
      }
    });

    test('a topic-based websocket one: what an older release matched is not sent over a socket bound to it', async () => {
      // Matched by an older server (written first: no write of this one comes after the Subscription is taken over).
      const o = await observation('p2');
      const topic = 'http://example.org/topics/observations';
      await admin.create({
        resourceType: 'Basic', code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
        extension: [{ url: `${X5}url`, valueUri: topic }, { url: `${X5}status`, valueCode: 'active' }, { url: `${X5}resourceTrigger`, extension: [{ url: 'resource', valueUri: 'Observation' }] }],
      });
      const sub = await admin.create({
        resourceType: 'Subscription', status: 'requested', reason: 'older', criteria: topic,
        channel: {
          type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: 'full-resource' }] },
          _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/subscription-channel-type', code: 'websocket' } }] },
        },
      });
      expect(sub.status).toBe('active');
      const id = sub.id as string;
      // A client's own token (as tests craft them: client `crafted`, no user) with such scopes, recorded as an older release did.
      const scopes = ['patient/Observation.rs', 'user/Observation.rs?category=laboratory', 'user/Subscription.rs'];
      const owner = olderOwner(scopes, 'crafted', null);
      await t.store.resources.write('t1', (w) => w.ownSubscription(id, owner, 'websocket'));
      const token = await craftToken(t, scopes.join(' '));
      const res = await fhirClient(t, token).get(`Subscription/${id}/$get-ws-binding-token`);
      expect(res.status).toBe(200);
      const binding = ((await res.json()) as Json).parameter.find((p: Json) => p.name === 'token').valueString as string;
      const server = serveWithWebsocket(t.app);
      const socket = await websocketClient(server.url);
      try {
        socket.send(`bind-with-token ${binding}`);
        await socket.next();
        t.clock.advance(1);
        await t.store.resources.write('t1', (w) => w.notify([{ subscriptionId: id, type: 'Observation', id: o, versionId: 1, event: 'create', matchedFor: owner }], t.clock.now()));
        await deliver();
        // Not p2's laboratory result, which the grant never reached without a patient in context.
        expect((await socket.drained()).filter((m) => m.includes(o))).toEqual([]);
      } finally {
        socket.close();
        server.stop();
      }
    });

    test('an R4 websocket one: what an older release matched is not pinged over a socket bound to it; one whose grant reaches it is', async () => {
      // Matched by an older server (written first: no write of this one comes after the Subscription is taken over).
      const o = await observation('p2');
      const websocket = async (scopes: string[]) => {
        const sub = await admin.create({ resourceType: 'Subscription', status: 'requested', reason: 'older', criteria: 'Observation?category=laboratory', channel: { type: 'websocket' } });
        expect(sub.status).toBe('active');
        // A client's own token (as tests craft them: client `crafted`, no user) with such scopes, as an older release recorded it.
        return { id: sub.id as string, owner: olderOwner(scopes, 'crafted', null) };
      };
      const older = await websocket(['patient/Observation.rs', 'user/Observation.rs?category=laboratory', 'user/Subscription.rs']);
      const reaching = await websocket(['user/Observation.rs?category=laboratory', 'user/Subscription.rs']);
      const server = serveWithWebsocket(t.app);
      const socket = await websocketClient(server.url);
      try {
        for (const { id, owner } of [older, reaching]) {
          socket.send(`bind ${id}`);
          expect(await socket.next()).toBe(`bound ${id}`);
          // Taken over by the older release's owner record once bound (no write of this release finds it before the pings).
          await t.store.resources.write('t1', (w) => w.ownSubscription(id, owner, 'websocket'));
        }
        t.clock.advance(1);
        await t.store.resources.write('t1', (w) => w.notify([older, reaching].map(({ id, owner }) => ({ subscriptionId: id, type: 'Observation', id: o, versionId: 1, matchedFor: owner })), t.clock.now()));
        await deliver();
        // Not p2's laboratory result for the older grant, which never reached it without a patient in context.
        expect(await socket.drained()).toEqual([`ping ${reaching.id}`]);
      } finally {
        socket.close();
        server.stop();
      }
    });

    test("a client's own (client_credentials of an older release): paused saying its grant, not its registration; no cinder client command sets it back", async () => {
      const { client } = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['patient/*.cruds', 'system/*.cruds'] });
      const owner = olderOwner(['patient/Observation.rs', 'system/Observation.rs?category=laboratory', 'system/Subscription.cruds'], client.clientId, null);
      // One the command line finds before any write does, and one a write finds.
      const first = await olderSubscription(owner, 'http://127.0.0.1:9/hook');
      expect(await cinder(['client', 'update', client.clientId, '--scope', 'patient/*.cruds', '--scope', 'system/*.cruds', '--scope', 'openid'])).toMatchObject({ subscriptions_paused: [first] });
      const found = await olderSubscription(owner, 'http://127.0.0.1:9/hook');
      await observation('p2');
      for (const id of [found, first]) {
        expect(await waiting(id)).toEqual([]);
        expect(await shown(id)).toEqual(['error', expect.stringContaining(`(client ${client.clientId}) no longer let it search what its criteria select (a patient/`), '2']);
      }
      // Its registration is not what narrowed it: neither a widened one nor a disable and enable sets it back.
      expect(await cinder(['client', 'update', client.clientId, '--scope', 'system/*.*'])).toMatchObject({ subscriptions_resumed: [] });
      expect(await cinder(['client', 'disable', client.clientId])).toMatchObject({ subscriptions_paused: [] });
      expect(await cinder(['client', 'enable', client.clientId])).toMatchObject({ subscriptions_resumed: [] });
      for (const id of [found, first]) expect(await shown(id)).toEqual(['error', expect.stringContaining(GRANT_ERROR), '2']);
    });
  });
}
