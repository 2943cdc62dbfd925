/**
 * The websocket channel of topic-based Subscriptions (R5 Backport IG): `Subscription/{id}/$get-ws-binding-token`
 * issues a short-lived token to a caller that may read the Subscription; a client sends `bind-with-token {token}`
 * on the websocket and is sent a handshake Bundle, then each event's notification Bundle (its payload content)
 * and heartbeats, whichever of two servers sharing the database signed the token or recorded the event. The
 * R4 `bind {id}` does not bind a topic-based Subscription. Real servers (Bun.serve on port 0), the delivery
 * rounds driven by hand. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect, type Socket } from 'node:net';
import { createApp, type App } from '../../src/app.ts';
import { createClient } from '../../src/auth/admin.ts';
import { disableClient } from '../../src/auth/client-lifecycle.ts';
import { createKeyRing } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL, signAccessToken } from '../../src/auth/tokens.ts';
import { createUser } from '../../src/auth/users.ts';
import { WS_BINDING_TTL_S } from '../../src/auth/ws-binding-token.ts';
import { silentLogger } from '../../src/log.ts';
import type { Store } from '../../src/store/types.ts';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { craftToken, type Json } from '../helpers/fhir.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { storeTargets } from '../helpers/stores.ts';
import { testCoreBundle } from '../helpers/terminology-service.ts';
import { serveWithWebsocket, websocketClient } from '../helpers/websocket.ts';
import { CHECK_INTERVAL_MS } from '../../src/fhir/subscriptions/hub.ts';

const serve = serveWithWebsocket;
const client = websocketClient;

const X5 = 'http://hl7.org/fhir/5.0/StructureDefinition/extension-SubscriptionTopic.';
const BP = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition/';
const CHANGES = 'http://example.org/topics/encounter-changes';
const sub = (name: string, value: Json) => ({ url: name, ...value });
const changesTopic: Json = {
  resourceType: 'Basic',
  code: { coding: [{ system: 'http://hl7.org/fhir/fhir-types', code: 'SubscriptionTopic' }] },
  extension: [
    { url: `${X5}url`, valueUri: CHANGES },
    { url: `${X5}resourceTrigger`, extension: [sub('resource', { valueUri: 'Encounter' })] },
    { url: `${X5}canFilterBy`, extension: [sub('filterParameter', { valueString: 'status' })] },
    { url: `${X5}status`, valueCode: 'active' },
  ],
};

function websocketTopicSubscription(content: string, channel: Json = {}): Json {
  return {
    resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: CHANGES,
    channel: {
      type: 'websocket', payload: 'application/fhir+json', _payload: { extension: [{ url: `${BP}backport-payload-content`, valueCode: content }] },
      _type: { extension: [{ url: `${BP}backport-channel-type`, valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/subscription-channel-type', code: 'websocket' } }] },
      ...channel,
    },
  };
}

const encounter = (status: string) => ({
  resourceType: 'Encounter', status, class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' }, subject: { reference: 'Patient/pa' },
});

const param = (p: Json, name: string) => (p.parameter as Json[]).find((x) => x.name === name);
const part = (p: Json, name: string) => ((param(p, 'notification-event')?.part ?? []) as Json[]).find((x) => x.name === name);
/** A notification Bundle's SubscriptionStatus. */
const statusOf = (bundle: Json) => (bundle.entry as Json[])[0]!.resource as Json;

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`topic-based websocket subscriptions (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let second: { app: App; store: Store };
    let servers: ReturnType<typeof serve>[];
    let databaseUrl: string;
    const call = (method: string, path: string, body?: unknown, tok = token) => t.request(`${t.fhir()}/${path}`, fhirInit(tok, method, body));
    const json = async (res: Response | Promise<Response>) => (await (await res).json()) as Json;
    const rounds = async () => {
      for (let i = 0; i < 10; i++) {
        const done = [await t.app.subscriptions.runOnce(), await second.app.subscriptions.runOnce()];
        if (done.every((n) => n === 0)) return;
      }
    };
    const subscribe = async (body: Json) => {
      const res = await call('POST', 'Subscription', body);
      const out = await json(res);
      if (res.status !== 201) throw new Error(`subscription refused: ${res.status} ${JSON.stringify(out)}`);
      return out;
    };
    const bindingToken = async (id: string, app: (p: string, i: RequestInit) => Response | Promise<Response> = t.request) => {
      const res = await app(`${t.fhir()}/Subscription/${id}/$get-ws-binding-token`, fhirInit(token));
      expect(res.status).toBe(200);
      return (param(await res.json() as Json, 'token')!.valueString) as string;
    };

    beforeAll(async () => {
      const db = await target.migrated();
      databaseUrl = db.url;
      const store = db.open();
      await store.migrate();
      // `$import` from a server on this machine (the test of a Subscription an import writes over).
      t = await createTestApp({ store, env: { CINDER_IMPORT_ALLOW_PRIVATE: 'true' } });
      const other = db.open();
      const keys = createKeyRing(other, t.clock, MAX_TOKEN_TTL);
      await keys.init();
      second = { app: createApp({ config: t.config, store: other, keys, clock: t.clock, log: silentLogger, core: testCoreBundle() }), store: other };
      servers = [serve(t.app), serve(second.app)];
      token = await t.token();
      expect((await call('POST', 'Basic', changesTopic)).status).toBe(201);
    });
    afterAll(async () => {
      for (const s of servers) s.stop();
      await second.store.close();
      await t.close();
    });

    test('$get-ws-binding-token answers a token, its expiration, the Subscription and the websocket URL; the CapabilityStatement lists it', async () => {
      const s = await subscribe(websocketTopicSubscription('id-only'));
      expect(s.status).toBe('active');
      const res = await call('GET', `Subscription/${s.id}/$get-ws-binding-token`);
      expect(res.status).toBe(200);
      const out = (await res.json()) as Json;
      expect(out.resourceType).toBe('Parameters');
      expect(typeof param(out, 'token')!.valueString).toBe('string');
      expect(param(out, 'expiration')!.valueDateTime).toBe(new Date((Math.floor(t.clock.now() / 1000) + WS_BINDING_TTL_S) * 1000).toISOString());
      expect(param(out, 'subscription')!.valueString).toBe(`Subscription/${s.id}`);
      expect(param(out, 'websocket-url')!.valueUrl).toBe('ws://cinder.test/tenants/t1/fhir/R4/websocket');
      expect((await call('POST', `Subscription/${s.id}/$get-ws-binding-token`, { resourceType: 'Parameters' })).status).toBe(200);
      // A websocket needs no channel.payload (its Bundles are JSON): backport-payload-content alone.
      const noPayload = websocketTopicSubscription('empty');
      delete (noPayload.channel as Json).payload;
      expect((await subscribe(noPayload)).status).toBe('active');
      const statement = await json(t.request(`${t.fhir()}/metadata`));
      const subscription = ((statement.rest as Json[])[0]!.resource as Json[]).find((r) => r.type === 'Subscription')!;
      expect(subscription.operation).toContainEqual({ name: 'get-ws-binding-token', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-get-ws-binding-token' });
    });

    test('$get-ws-binding-token is refused for a Subscription the caller may not read, one that is not topic-based websocket and active, or with a parameter', async () => {
      const s = await subscribe(websocketTopicSubscription('id-only'));
      const r4 = await subscribe({ resourceType: 'Subscription', status: 'requested', reason: 'r4', criteria: 'Encounter?status=finished', channel: { type: 'websocket' } });
      const restHook = await subscribe({ ...websocketTopicSubscription('id-only'), status: 'off', channel: { ...(websocketTopicSubscription('id-only').channel as Json), type: 'rest-hook', endpoint: 'https://hook.example/x', _type: undefined } });
      const off = await subscribe({ ...websocketTopicSubscription('id-only'), status: 'off' });
      const refused = async (path: string, status: number, expression?: string, tok = token) => {
        const res = await call('GET', path, undefined, tok);
        const outcome = await json(res);
        expect({ status: res.status, ...(expression && { expression: (outcome.issue as Json[])[0]!.expression }) }).toEqual({ status, ...(expression && { expression: [expression] }) });
      };
      await refused('Subscription/nope/$get-ws-binding-token', 404);
      await refused(`Subscription/${s.id}/$get-ws-binding-token`, 403, undefined, await craftToken(t, 'patient/*.rs', { patient: 'pa' }));
      // Another app that may read the Subscription (and every resource) is not its owner: what the socket is sent
      // was matched with the owner's reach.
      await refused(`Subscription/${s.id}/$get-ws-binding-token`, 403, undefined, await craftToken(t, 'user/*.rs'));
      expect((await call('GET', `Subscription/${s.id}`, undefined, await craftToken(t, 'user/*.rs'))).status).toBe(200);
      await refused(`Subscription/${r4.id}/$get-ws-binding-token`, 400, 'Subscription.criteria');
      await refused(`Subscription/${restHook.id}/$get-ws-binding-token`, 400, 'Subscription.channel.type');
      await refused(`Subscription/${off.id}/$get-ws-binding-token`, 400, 'Subscription.status');
      await refused(`Subscription/${s.id}/$get-ws-binding-token?id=${s.id}`, 400, 'id');
    });

    test('$get-ws-binding-token of a Subscription activated in one patient\'s context is refused to the same app in another patient\'s', async () => {
      const scopes = 'user/Subscription.cruds patient/*.rs';
      const inPa = await craftToken(t, scopes, { patient: 'pa' });
      const res = await call('POST', 'Subscription', websocketTopicSubscription('full-resource'), inPa);
      const s = await json(res);
      expect([res.status, s.status]).toEqual([201, 'active']);
      expect((await call('GET', `Subscription/${s.id}/$get-ws-binding-token`, undefined, inPa)).status).toBe(200);
      // The same app in patient pb's context may read the Subscription, but what the socket would be sent is pa's.
      const inPb = await craftToken(t, scopes, { patient: 'pb' });
      expect((await call('GET', `Subscription/${s.id}`, undefined, inPb)).status).toBe(200);
      const refused = await call('GET', `Subscription/${s.id}/$get-ws-binding-token`, undefined, inPb);
      expect(refused.status).toBe(403);
      expect(((await json(refused)).issue as Json[])[0]!.code).toBe('forbidden');
    });

    test('$get-ws-binding-token is refused to the owner\'s app with a token that reads less than the one that activated it (v1 and v2 spellings of the same grant are alike)', async () => {
      const bindAs = (id: string, scopes: string) => craftToken(t, scopes).then((tok) => call('GET', `Subscription/${id}/$get-ws-binding-token`, undefined, tok));
      const owner = 'user/Subscription.cruds user/*.rs';
      const res = await call('POST', 'Subscription', websocketTopicSubscription('full-resource'), await craftToken(t, owner));
      const s = await json(res);
      expect([res.status, s.status]).toEqual([201, 'active']);
      expect((await bindAs(s.id as string, owner)).status).toBe(200);
      expect((await bindAs(s.id as string, 'user/Subscription.read user/*.read')).status).toBe(200);
      expect((await bindAs(s.id as string, 'user/*.cruds')).status).toBe(200);
      // May read the Subscription, but not the Encounters (full resources) the socket would be sent; nor all of them.
      const narrower = await bindAs(s.id as string, 'user/Subscription.rs user/Basic.rs');
      expect(narrower.status).toBe(403);
      const said = ((await json(narrower)).issue as Json[])[0]!.diagnostics as string;
      expect([said.includes('user/*.rs'), said.includes('A PUT of it with status requested and this token takes ownership')]).toEqual([true, true]);
      expect((await bindAs(s.id as string, 'user/Subscription.rs user/Encounter.rs?status=planned')).status).toBe(403);
      expect((await bindAs(s.id as string, 'user/Subscription.rs user/*.s')).status).toBe(403);
      // Turned off and activated again with the narrower token, it is that token's to bind (matched with its reach from then on).
      const narrow = await craftToken(t, 'user/Subscription.cruds user/Encounter.rs?status=planned');
      expect((await call('PUT', `Subscription/${s.id}`, { ...s, status: 'off' }, narrow)).status).toBe(200);
      const again = await call('PUT', `Subscription/${s.id}`, { ...s, status: 'requested' }, narrow);
      expect([again.status, (await json(again)).status]).toEqual([200, 'active']);
      expect((await call('GET', `Subscription/${s.id}/$get-ws-binding-token`, undefined, narrow)).status).toBe(200);
      expect((await bindAs(s.id as string, 'user/Subscription.rs user/Encounter.rs?status=planned')).status).toBe(200);
      expect((await bindAs(s.id as string, 'user/Subscription.rs user/Encounter.rs?status=finished')).status).toBe(403);
    });

    test('$get-ws-binding-token compares read and search one by one, filters as sets of their pairs, and holds a user/ scope to cover a patient/ one in the same patient\'s context', async () => {
      const bindAs = (id: string, scopes: string) => craftToken(t, scopes, { patient: 'pa' }).then((tok) => call('GET', `Subscription/${id}/$get-ws-binding-token`, undefined, tok));
      const owner = 'user/Subscription.cruds patient/Observation.rs patient/Encounter.rs?status=planned&class=AMB';
      const res = await call('POST', 'Subscription', websocketTopicSubscription('full-resource'), await craftToken(t, owner, { patient: 'pa' }));
      const s = await json(res);
      expect([res.status, s.status]).toEqual([201, 'active']);
      const id = s.id as string;
      // Read and search granted as two scopes; the filter's parameters in another order, or fewer of them (wider).
      expect((await bindAs(id, 'user/Subscription.rs patient/Observation.r patient/Observation.s patient/Encounter.rs?class=AMB&status=planned')).status).toBe(200);
      expect((await bindAs(id, 'user/Subscription.rs patient/Observation.rs patient/Encounter.r?class=AMB patient/Encounter.s?status=planned&class=AMB')).status).toBe(200);
      // A user/ scope reads what the patient/ one did of the patient in context, and more.
      expect((await bindAs(id, 'user/Subscription.rs user/Observation.read user/Encounter.rs?class=AMB&status=planned')).status).toBe(200);
      expect((await bindAs(id, 'user/Subscription.rs user/*.rs')).status).toBe(200);
      // Narrower: no search, a filter with a pair more or another value, a filter where there was none, a context never implied.
      const narrower = [
        'user/Subscription.rs patient/Observation.r patient/Encounter.rs?status=planned&class=AMB',
        'user/Subscription.rs patient/Observation.rs patient/Encounter.rs?status=planned&class=AMB&subject=Patient/pa',
        'user/Subscription.rs patient/Observation.rs patient/Encounter.rs?status=finished&class=AMB',
        'user/Subscription.rs patient/Observation.rs?category=laboratory patient/Encounter.rs?status=planned&class=AMB',
        'user/Subscription.rs system/Observation.rs system/Encounter.rs?status=planned&class=AMB',
      ];
      for (const scopes of narrower) expect([scopes, (await bindAs(id, scopes)).status]).toEqual([scopes, 403]);
    });

    test('$get-ws-binding-token is refused to a token whose patient/ scope binds to the patient in context what the activating token read of every patient', async () => {
      const bindAs = (id: string, scopes: string) => craftToken(t, scopes, { patient: 'pa' }).then((tok) => call('GET', `Subscription/${id}/$get-ws-binding-token`, undefined, tok));
      const owner = 'user/Subscription.cruds user/Encounter.rs?status=planned';
      const res = await call('POST', 'Subscription', websocketTopicSubscription('full-resource'), await craftToken(t, owner, { patient: 'pa' }));
      const s = await json(res);
      expect([res.status, s.status]).toEqual([201, 'active']);
      expect((await bindAs(s.id as string, owner)).status).toBe(200);
      // Beside a patient/ scope of the type, the filtered user/ one reads the patient's planned Encounters alone.
      const bound = await bindAs(s.id as string, `${owner} patient/Encounter.rs`);
      expect(bound.status).toBe(403);
      expect(((await json(bound)).issue as Json[])[0]!.diagnostics).toContain('user/Encounter.rs?status=planned');
      // Unless an unfiltered user/ scope lifts the bound.
      expect((await bindAs(s.id as string, `${owner} patient/Encounter.rs user/Encounter.s user/Encounter.r`)).status).toBe(200);
    });

    test('bind-with-token is answered with a handshake, then each event is sent as its Bundle, on either server', async () => {
      const idOnly = await subscribe(websocketTopicSubscription('id-only'));
      const full = await subscribe(websocketTopicSubscription('full-resource'));
      const a = await client(servers[0]!.url);
      // A token the other server signed binds here: the keys are in the shared database.
      const b = await client(servers[1]!.url);
      try {
        a.send(`bind-with-token ${await bindingToken(idOnly.id as string, second.app.request)}`);
        const handshake = JSON.parse(await a.next()) as Json;
        expect([handshake.resourceType, handshake.type]).toEqual(['Bundle', 'history']);
        expect([param(statusOf(handshake), 'type')!.valueCode, param(statusOf(handshake), 'topic')!.valueCanonical]).toEqual(['handshake', CHANGES]);
        expect(param(statusOf(handshake), 'subscription')!.valueReference).toEqual({ reference: `${t.fhir()}/Subscription/${idOnly.id}` });
        b.send(`bind-with-token ${await bindingToken(full.id as string)}`);
        expect(param(statusOf(JSON.parse(await b.next()) as Json), 'type')!.valueCode).toBe('handshake');
        t.clock.advance(1);

        const e = await json(call('POST', 'Encounter', encounter('planned')));
        await call('PUT', `Encounter/${e.id}`, { ...e, status: 'finished' });
        await call('DELETE', `Encounter/${e.id}`);
        await rounds();
        const gotA = (await a.drained()).map((m) => JSON.parse(m) as Json);
        const gotB = (await b.drained()).map((m) => JSON.parse(m) as Json);
        const summary = (bundles: Json[]) => bundles.map((x) => [
          param(statusOf(x), 'type')!.valueCode, part(statusOf(x), 'event-number')!.valueString,
          ((x.entry as Json[])[1]!.request as Json).method, (x.entry as Json[])[1]!.fullUrl, ((x.entry as Json[])[1]!.resource as Json | undefined)?.status,
        ]);
        const focus = `${t.fhir()}/Encounter/${e.id}`;
        expect(summary(gotA)).toEqual([['event-notification', '1', 'POST', focus, undefined], ['event-notification', '2', 'PUT', focus, undefined], ['event-notification', '3', 'DELETE', focus, undefined]]);
        expect(summary(gotB)).toEqual([['event-notification', '1', 'POST', focus, 'planned'], ['event-notification', '2', 'PUT', focus, 'finished'], ['event-notification', '3', 'DELETE', focus, undefined]]);
        // Recorded once, sent once: another round sends nothing again.
        await rounds();
        expect(await a.drained()).toEqual([]);
      } finally {
        a.close();
        b.close();
      }
    });

    test('a Subscription another app activates again is sent to no socket its earlier owner bound, and that owner\'s binding token binds it no more', async () => {
      const s = await subscribe(websocketTopicSubscription('full-resource'));
      const c = await client(servers[0]!.url);
      try {
        const stale = await bindingToken(s.id as string);
        c.send(`bind-with-token ${await bindingToken(s.id as string)}`);
        expect(param(statusOf(JSON.parse(await c.next()) as Json), 'type')!.valueCode).toBe('handshake');
        // Turned off by its owner, then activated again by another app, which owns it now.
        expect((await call('PUT', `Subscription/${s.id}`, { ...s, status: 'off' })).status).toBe(200);
        const other = await craftToken(t, 'user/*.cruds');
        const again = await call('PUT', `Subscription/${s.id}`, { ...s, status: 'requested' }, other);
        expect([again.status, (await json(again)).status]).toEqual([200, 'active']);
        t.clock.advance(1);
        await call('POST', 'Encounter', encounter('planned'), other);
        await rounds();
        // Told it was activated again, and unbound: the event is not sent to it.
        expect(await c.drained()).toEqual([`error ${s.id} was activated again since it was bound: nothing more is sent for it here; ask Subscription/${s.id}/$get-ws-binding-token for another`]);
        c.send(`bind-with-token ${stale}`);
        expect(await c.next()).toStartWith('error');
      } finally {
        c.close();
      }
    });

    test("a disabled app's bound Subscription is sent nothing more, though it still reads active (disabled behind cinder's back, or before `client disable` paused it)", async () => {
      const app = await createClient(t.store, t.clock, { tenant: 't1', scopes: ['system/*.*'] });
      const appToken = await t.token(undefined, app.client.clientId, app.clientSecret!);
      const res = await call('POST', 'Subscription', websocketTopicSubscription('full-resource'), appToken);
      expect(res.status).toBe(201);
      const s = await json(res);
      const c = await client(servers[0]!.url);
      try {
        const bound = await t.request(`${t.fhir()}/Subscription/${s.id}/$get-ws-binding-token`, fhirInit(appToken));
        c.send(`bind-with-token ${param((await bound.json()) as Json, 'token')!.valueString}`);
        expect(param(statusOf(JSON.parse(await c.next()) as Json), 'type')!.valueCode).toBe('handshake');
        t.clock.advance(1);
        // An event recorded while the app is enabled, then the app disabled before a round sends it.
        expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
        await disableClient(t.store, t.clock, app.client.clientId);
        // Past the servers' client cache (5 s).
        t.clock.advance(6_000);
        await rounds();
        expect(await c.drained()).toEqual([]);
        expect((await json(call('GET', `Subscription/${s.id}`))).status).toBe('active');
      } finally {
        c.close();
      }
    });

    test("a guardian's bound Subscription is sent nothing recorded of the child once their record no longer names them, and binds no more", async () => {
      for (const id of ['pa', 'pz']) expect((await call('PUT', `Patient/${id}`, { resourceType: 'Patient', id })).status).toBeOneOf([200, 201]);
      expect((await call('PUT', 'RelatedPerson/rp-ws', { resourceType: 'RelatedPerson', id: 'rp-ws', patient: { reference: 'Patient/pa' } })).status).toBeOneOf([200, 201]);
      const app = await createClient(t.store, t.clock, { tenant: 't1', grants: ['authorization_code'], redirectUris: ['https://app.example/cb'], scopes: ['launch/patient', 'patient/*.rs', 'user/Subscription.cruds'] });
      const guardian = await createUser(t.store, t.clock, { tenant: 't1', username: 'ws-guardian', password: 'correct horse battery', fhirUser: 'RelatedPerson/rp-ws' });
      // A token of the guardian's sign-in (a grant), the child chosen at the picker.
      const guardianToken = (await signAccessToken(t.keys, t.clock, t.config.baseUrl, {
        sub: guardian.id, aud: t.fhir(), client_id: app.client.clientId, scope: 'launch/patient patient/*.rs user/Subscription.cruds', tenant: 't1', patient: 'pa', gid: 'grant-ws', urt: t.clock.now(),
      }, 3600)).token;
      const res = await call('POST', 'Subscription', websocketTopicSubscription('full-resource'), guardianToken);
      expect(res.status).toBe(201);
      const s = await json(res);
      const bindToken = async () => param((await (await t.request(`${t.fhir()}/Subscription/${s.id}/$get-ws-binding-token`, fhirInit(guardianToken))).json()) as Json, 'token')!.valueString as string;
      const first = await bindToken();
      const c = await client(servers[0]!.url);
      const d = await client(servers[1]!.url);
      try {
        c.send(`bind-with-token ${first}`);
        expect(param(statusOf(JSON.parse(await c.next()) as Json), 'type')!.valueCode).toBe('handshake');
        t.clock.advance(1);
        // An event of the child recorded while the relationship stands; then it ends before a round sends it.
        expect((await call('POST', 'Encounter', encounter('planned'))).status).toBe(201);
        expect((await call('PUT', 'RelatedPerson/rp-ws', { resourceType: 'RelatedPerson', id: 'rp-ws', patient: { reference: 'Patient/pz' } })).status).toBe(200);
        // Past the servers' caches (5 s).
        t.clock.advance(6_000);
        await rounds();
        expect(await c.drained()).toEqual([]);
        // A binding token issued before binds it no more.
        d.send(`bind-with-token ${first}`);
        expect(await d.next()).toBe(`error ${s.id} is not an active topic-based websocket Subscription`);
      } finally {
        c.close();
        d.close();
      }
    });

    test('another app takes an active Subscription with a requested PUT: the binding token is then issued to it and refused to the earlier owner, whose socket and token bind it no more', async () => {
      const first = token;
      const s = await subscribe(websocketTopicSubscription('full-resource'));
      const bindAs = (tok: string) => call('GET', `Subscription/${s.id}/$get-ws-binding-token`, undefined, tok);
      const other = await craftToken(t, 'user/*.cruds');
      const refused = await bindAs(other);
      expect(refused.status).toBe(403);
      expect(((await json(refused)).issue as Json[])[0]!.diagnostics).toContain('a PUT of it with status requested and this token takes ownership');
      // Written active by the other app, unchanged: still the first app's.
      const same = await call('PUT', `Subscription/${s.id}`, { ...s, status: 'active' }, other);
      expect([same.status, ((await json(same)).meta as Json).versionId]).toEqual([200, '1']);
      expect((await bindAs(other)).status).toBe(403);
      const stale = await bindingToken(s.id as string);
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind-with-token ${stale}`);
        expect(param(statusOf(JSON.parse(await c.next()) as Json), 'type')!.valueCode).toBe('handshake');
        // Requested by the other app, active as it was: a new version, and the other app's from then on.
        const again = await call('PUT', `Subscription/${s.id}`, { ...s, status: 'requested' }, other);
        const stored = await json(again);
        expect([again.status, stored.status, (stored.meta as Json).versionId]).toEqual([200, 'active', '2']);
        expect((await bindAs(other)).status).toBe(200);
        const gone = await bindAs(first);
        expect(gone.status).toBe(403);
        expect(((await json(gone)).issue as Json[])[0]!.diagnostics).toContain('is bound only by the app');
        t.clock.advance(1);
        await call('POST', 'Encounter', encounter('planned'), other);
        await rounds();
        expect(await c.drained()).toEqual([`error ${s.id} was activated again since it was bound: nothing more is sent for it here; ask Subscription/${s.id}/$get-ws-binding-token for another`]);
        c.send(`bind-with-token ${stale}`);
        expect(await c.next()).toStartWith('error');
      } finally {
        c.close();
      }
    });

    test('a socket bound with a token is told and unbound promptly once its Subscription is no longer active (off, error, deleted), whichever server wrote it, with no event waiting', async () => {
      for (const end of ['off', 'error', 'deleted'] as const) {
        const s = await subscribe(websocketTopicSubscription('id-only', { extension: [{ url: `${BP}backport-heartbeat-period`, valueUnsignedInt: 30 }] }));
        const c = await client(servers[0]!.url);
        try {
          c.send(`bind-with-token ${await bindingToken(s.id as string)}`);
          expect(param(statusOf(JSON.parse(await c.next()) as Json), 'type')!.valueCode).toBe('handshake');
          await rounds();
          const path = `${t.fhir()}/Subscription/${s.id}`;
          const res = end === 'deleted'
            ? await second.app.request(path, fhirInit(token, 'DELETE'))
            : await second.app.request(path, fhirInit(token, 'PUT', { ...s, status: end, ...(end === 'error' && { error: 'broken' }) }));
          expect(res.status).toBeLessThan(300);
          t.clock.advance(CHECK_INTERVAL_MS);
          await rounds();
          const why = end === 'deleted' ? 'deleted' : `status ${end}`;
          expect({ end, got: await c.drained() }).toEqual({
            end, got: [`error ${s.id} is no longer an active topic-based websocket Subscription (${why}): nothing more is sent for it; bind it again with a new binding token (Subscription/${s.id}/$get-ws-binding-token) once it is active`],
          });
          // Unbound: no heartbeat, nor a second telling.
          t.clock.advance(31_000);
          await rounds();
          expect(await c.drained()).toEqual([]);
        } finally {
          c.close();
        }
      }
    });

    test('a socket bound with a token to a Subscription an import writes over (its content still active, no owner since) is told it is not activated, not that it was activated again', async () => {
      const s = await subscribe(websocketTopicSubscription('id-only'));
      const source = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(JSON.stringify({ ...s, meta: undefined, reason: 'imported' }) + '\n') });
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind-with-token ${await bindingToken(s.id as string)}`);
        expect(param(statusOf(JSON.parse(await c.next()) as Json), 'type')!.valueCode).toBe('handshake');
        await rounds();
        const kickoff = await call('POST', '$import', {
          resourceType: 'Parameters',
          parameter: [
            { name: 'inputFormat', valueCode: 'application/fhir+ndjson' },
            { name: 'input', part: [{ name: 'type', valueCode: 'Subscription' }, { name: 'url', valueUri: `http://127.0.0.1:${source.port}/subscriptions.ndjson` }] },
          ],
        });
        expect(kickoff.status).toBe(202);
        await t.app.imports.runOnce();
        expect((await json(t.request(kickoff.headers.get('content-location')!, fhirInit(token)))).output).toMatchObject([{ count: 1, unchanged: 0 }]);
        expect((await json(call('GET', `Subscription/${s.id}`))).status).toBe('active');
        t.clock.advance(CHECK_INTERVAL_MS);
        await rounds();
        expect(await c.drained()).toEqual([
          `error ${s.id} is no longer an active topic-based websocket Subscription (not activated: an import wrote it, and it has no owner until it is written through the API): nothing more is sent for it; bind it again with a new binding token (Subscription/${s.id}/$get-ws-binding-token) once it is active`,
        ]);
      } finally {
        source.stop(true);
        c.close();
      }
    });

    test('a heartbeat Bundle is sent after each heartbeat period without a message', async () => {
      const s = await subscribe(websocketTopicSubscription('empty', { extension: [{ url: `${BP}backport-heartbeat-period`, valueUnsignedInt: 30 }] }));
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind-with-token ${await bindingToken(s.id as string)}`);
        expect(param(statusOf(JSON.parse(await c.next()) as Json), 'type')!.valueCode).toBe('handshake');
        t.clock.advance(29_000);
        await rounds();
        expect(await c.drained()).toEqual([]);
        t.clock.advance(1_000);
        await rounds();
        const got = (await c.drained()).map((m) => JSON.parse(m) as Json);
        expect(got.map((x) => [param(statusOf(x), 'type')!.valueCode, (x.entry as Json[]).length])).toEqual([['heartbeat', 1]]);
        // The `empty` content names no topic.
        expect(param(statusOf(got[0]!), 'topic')).toBeUndefined();
      } finally {
        c.close();
      }
    });

    test('bind-with-token refuses a token that is not valid, expired, or of a Subscription no longer active; the R4 bind does not bind a topic Subscription', async () => {
      const s = await subscribe(websocketTopicSubscription('id-only'));
      const c = await client(servers[0]!.url);
      try {
        c.send(`bind ${s.id}`);
        expect(await c.next()).toBe(`error ${s.id} is topic-based: bind it with "bind-with-token {token}" (Subscription/${s.id}/$get-ws-binding-token)`);
        c.send('bind-with-token not-a-token');
        expect(await c.next()).toStartWith('error the binding token is not valid here');
        // An access token is no binding token.
        c.send(`bind-with-token ${token}`);
        expect(await c.next()).toStartWith('error the binding token is not valid here');
        const expiring = await bindingToken(s.id as string);
        t.clock.advance(WS_BINDING_TTL_S * 1000 + 1_000);
        c.send(`bind-with-token ${expiring}`);
        expect(await c.next()).toStartWith('error the binding token is not valid here');
        token = await t.token();
        const fresh = await bindingToken(s.id as string);
        const current = await json(call('GET', `Subscription/${s.id}`));
        expect((await call('PUT', `Subscription/${s.id}`, { ...current, status: 'off' })).status).toBe(200);
        c.send(`bind-with-token ${fresh}`);
        expect(await c.next()).toBe(`error ${s.id} is not an active topic-based websocket Subscription`);
        // Nothing was bound: an event is not sent.
        await call('POST', 'Encounter', encounter('planned'));
        await rounds();
        expect(await c.drained()).toEqual([]);
      } finally {
        c.close();
      }
    });

    // Last: it withdraws the keys every token above was signed with.
    test('keys rotate --compromised unbinds, on every server within a minute, the sockets bound with a token the withdrawn keys signed', async () => {
      const s = await subscribe(websocketTopicSubscription('full-resource'));
      const sockets = [await client(servers[0]!.url), await client(servers[1]!.url)];
      const cli = createCliEnv({ CINDER_DATABASE_URL: databaseUrl });
      try {
        for (const c of sockets) {
          c.send(`bind-with-token ${await bindingToken(s.id as string)}`);
          expect(param(statusOf(JSON.parse(await c.next()) as Json), 'type')!.valueCode).toBe('handshake');
        }
        const rotated = await cli.run(['keys', 'rotate', '--compromised']);
        expect(rotated.code).toBe(0);
        // Every server reads the keys again within a minute; a token of the new keys writes an event.
        t.clock.advance(61_000);
        token = await t.token();
        await call('POST', 'Encounter', encounter('planned'));
        await rounds();
        const told = `error ${s.id} was bound with a binding token whose signing key is no longer published (a key rotation): nothing more is sent for it here; ask Subscription/${s.id}/$get-ws-binding-token for another`;
        for (const c of sockets) expect(await c.drained()).toEqual([told]);
        // A token of the new keys binds it again.
        t.clock.advance(1);
        sockets[0]!.send(`bind-with-token ${await bindingToken(s.id as string)}`);
        expect(param(statusOf(JSON.parse(await sockets[0]!.next()) as Json), 'type')!.valueCode).toBe('handshake');
        t.clock.advance(1);
        await call('POST', 'Encounter', encounter('finished'));
        await rounds();
        expect((await sockets[0]!.drained()).map((m) => param(statusOf(JSON.parse(m) as Json), 'type')!.valueCode)).toEqual(['event-notification']);
      } finally {
        for (const c of sockets) c.close();
        cli.close();
      }
    });
  });
}

describe('topic-based websocket subscriptions under a long CINDER_BASE_URL', () => {
  test('a binding token carrying a 250-character base URL (issuer and audience) binds', async () => {
    const host = `${Array.from({ length: 4 }, (_, i) => `${String(i)}${'a'.repeat(59)}`).join('.')}.example`;
    const t = await createTestApp({ env: { CINDER_BASE_URL: `https://${host}` } });
    const server = serve(t.app);
    try {
      const token = await t.token();
      const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
      expect((await call('POST', 'Basic', changesTopic)).status).toBe(201);
      const s = (await (await call('POST', 'Subscription', websocketTopicSubscription('id-only'))).json()) as Json;
      const res = await call('GET', `Subscription/${s.id}/$get-ws-binding-token`);
      expect(res.status).toBe(200);
      const bind = `bind-with-token ${param((await res.json()) as Json, 'token')!.valueString}`;
      expect(bind.length).toBeGreaterThan(1024);
      const c = await client(server.url);
      try {
        c.send(bind);
        const answer = await c.next();
        expect(answer).toStartWith('{');
        expect(param(statusOf(JSON.parse(answer) as Json), 'type')!.valueCode).toBe('handshake');
      } finally {
        c.close();
      }
    } finally {
      server.stop();
      await t.close();
    }
  });
});

describe('a topic-based websocket whose client reads nothing', () => {
  /** A websocket of `url` opened by hand, sent `message`, that reads nothing after the handshake's answer: a client that stopped reading. */
  async function stalledSocket(url: string, message: string) {
    const u = new URL(url);
    const socket = connect(Number(u.port), u.hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(`GET ${u.pathname} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    let seen = '';
    await new Promise<void>((resolve) => {
      const on = (d: Buffer) => {
        seen += d.toString('latin1');
        if (seen.includes('\r\n\r\n')) (socket.off('data', on), resolve());
      };
      socket.on('data', on);
    });
    // One masked text frame (RFC 6455 5.2), as a client sends it.
    const payload = Buffer.from(message);
    const mask = Buffer.from([7, 1, 8, 2]);
    socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 255]), mask, payload.map((b, i) => b ^ mask[i % 4]!)]));
    socket.on('error', () => undefined);
    return socket;
  }

  test('is closed once more than its bound of messages waits for it, not sent into a buffer without end nor dropped unseen; a client that reads gets everything', async () => {
    const t = await createTestApp();
    const server = serve(t.app);
    const stalled: Socket[] = [];
    let reading: Awaited<ReturnType<typeof client>> | undefined;
    try {
      const token = await t.token();
      const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
      const open = async () => Number(/^cinder_subscription_websockets (\d+)$/m.exec(await (await t.request('/metrics')).text())![1]);
      expect((await call('POST', 'Basic', changesTopic)).status).toBe(201);
      const s = (await (await call('POST', 'Subscription', websocketTopicSubscription('full-resource'))).json()) as Json;
      const bind = async () => `bind-with-token ${param((await (await call('GET', `Subscription/${s.id}/$get-ws-binding-token`)).json()) as Json, 'token')!.valueString}`;
      reading = await client(server.url);
      reading.send(await bind());
      expect(param(statusOf(JSON.parse(await reading.next()) as Json), 'type')!.valueCode).toBe('handshake');
      for (let i = 0; i < 3; i++) stalled.push(await stalledSocket(server.url, await bind()));
      await Bun.sleep(100);
      for (const socket of stalled) socket.pause();
      expect(await open()).toBe(4);
      // Encounters of 1 MB each: the stalled sockets' kernel buffers fill, then what Cinder holds for them.
      const big = 'x'.repeat(1_000_000);
      const written = 24;
      for (let i = 0; i < written; i++) {
        const res = await call('POST', 'Encounter', { ...encounter('planned'), text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${big}${i}</div>` } });
        expect(res.status).toBe(201);
        await t.app.subscriptions.runOnce();
      }
      // The stalled ones are closed; the reading one is open and was sent each event.
      expect(await open()).toBe(1);
      const numbers: string[] = [];
      for (let i = 0; i < written; i++) numbers.push(String(part(statusOf(JSON.parse(await reading.next()) as Json), 'event-number')!.valueString));
      expect(numbers).toEqual(Array.from({ length: written }, (_, i) => String(i + 1)));
    } finally {
      reading?.close();
      for (const socket of stalled) socket.destroy();
      server.stop();
      await t.close();
    }
  }, 120_000);
});
