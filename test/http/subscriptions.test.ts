/**
 * FHIR R4 Subscriptions with the rest-hook channel (subscription.html): activation and its refusals,
 * notifications recorded with the writes that cause them (REST, conditional, patch, transaction, batch,
 * $meta-add) and delivered to a real receiver by the app's delivery rounds (driven here with runOnce,
 * the clock moved by hand), the owner's reach, retries then `error`, resuming, `end`, the address check
 * at activation and at delivery, and two servers on one database delivering each notification once.
 * On both databases.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test';
import { createApp } from '../../src/app.ts';
import { createKeyRing } from '../../src/auth/keys.ts';
import { MAX_TOKEN_TTL } from '../../src/auth/tokens.ts';
import { silentLogger } from '../../src/log.ts';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { craftToken, type Json } from '../helpers/fhir.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';
import type { Store } from '../../src/store/types.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { testCoreBundle } from '../helpers/terminology-service.ts';
import { CHECK_INTERVAL_MS } from '../../src/fhir/subscriptions/hub.ts';
import { APP_CLAIMS, CLAIM_SENDS_FOR_MS, CLAIMS, HANDED_BACK_MS, RESERVED } from '../../src/fhir/subscriptions/delivery.ts';
import { parseFhirXml } from '../../src/fhir/xml/from-xml.ts';

interface Received {
  method: string;
  path: string;
  headers: Headers;
  body: string;
}

/** A rest-hook receiver on a free port of 127.0.0.1 that records what it is sent and answers `status`. */
function receiver() {
  const got: Received[] = [];
  const state = { status: 200 };
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(req) {
      got.push({ method: req.method, path: new URL(req.url).pathname, headers: req.headers, body: await req.text() });
      // A redirect names another path of this receiver: a client following it would be seen here.
      return new Response(null, { status: state.status, headers: state.status >= 300 && state.status < 400 ? { Location: '/followed' } : {} });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, got, state, stop: () => server.stop(true) };
}

const ALLOW = { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' };

const observation = (code: string, patient = 'pa', extra: Json = {}) => ({
  resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code }] }, subject: { reference: `Patient/${patient}` }, ...extra,
});

const subscription = (endpoint: string, extra: Json = {}, channel: Json = {}) => ({
  resourceType: 'Subscription', status: 'requested', reason: 'test', criteria: 'Observation?code=http://loinc.org|1234-5',
  channel: { type: 'rest-hook', endpoint, ...channel }, ...extra,
});

/** Delivery rounds until one claims nothing. */
async function drain(t: TestApp): Promise<void> {
  for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
}

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`subscriptions (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let hook: ReturnType<typeof receiver>;
    let database: StoreDatabase;
    const post = (path: string, body: unknown, tok = token, headers: Record<string, string> = {}) => t.request(`${t.fhir()}/${path}`, fhirInit(tok, 'POST', body, headers));
    const put = (path: string, body: unknown, tok = token) => t.request(`${t.fhir()}/${path}`, fhirInit(tok, 'PUT', body));
    const read = async (path: string) => (await (await t.request(`${t.fhir()}/${path}`, fhirInit(token))).json()) as Json;
    /** Subscriptions a test made and has not stopped with `off`: afterEach stops them when the test did not get that far. */
    const unstopped = new Set<string>();
    const subscribe = async (body: Json, tok = token) => {
      const res = await post('Subscription', body, tok);
      const json = (await res.json()) as Json;
      if (res.status !== 201) throw new Error(`subscription refused: ${res.status} ${JSON.stringify(json)}`);
      unstopped.add(json.id as string);
      return json;
    };
    /** Stops a subscription (so later tests start clean) and forgets what the receiver got. */
    const off = async (sub: Json) => {
      unstopped.delete(sub.id as string);
      const current = await read(`Subscription/${sub.id}`);
      expect((await put(`Subscription/${sub.id}`, { ...current, status: 'off' })).status).toBe(200);
      // Its waiting notifications are dropped when they next come up (after any backoff), unsent.
      t.clock.advance(60_000);
      await drain(t);
      expect(await t.store.subscriptions.waiting()).toBe(0);
      token = await t.token();
      hook.got.length = 0;
      hook.state.status = 200;
    };

    beforeAll(async () => {
      database = await target.migrated();
      const store = database.open();
      await store.migrate();
      t = await createTestApp({ store, env: ALLOW });
      token = await t.token();
      hook = receiver();
    });
    afterAll(async () => {
      hook.stop();
      await t.close();
    });
    // A test that failed before its `off` left its Subscriptions notifying: they are stopped and their notifications
    // dropped here, so the tests after it start clean and fail only for their own reasons.
    afterEach(async () => {
      if (!unstopped.size) return;
      token = await t.token();
      for (const id of unstopped) {
        const current = await read(`Subscription/${id}`);
        if (current.resourceType === 'Subscription' && current.status !== 'off') await put(`Subscription/${id}`, { ...current, status: 'off' });
      }
      unstopped.clear();
      t.clock.advance(60_000);
      await drain(t);
      hook.got.length = 0;
      hook.state.status = 200;
    });

    test('a requested rest-hook Subscription is stored active; off and error ones as written', async () => {
      const sub = await subscribe(subscription(hook.url));
      expect(sub.status).toBe('active');
      expect((await read(`Subscription/${sub.id}`)).status).toBe('active');
      const stopped = await subscribe(subscription(hook.url, { status: 'off' }, { type: 'email', endpoint: 'mailto:a@example.org' }));
      expect(stopped.status).toBe('off');
      const errored = await subscribe(subscription(hook.url, { status: 'error', error: 'was failing' }));
      expect([errored.status, errored.error]).toEqual(['error', 'was failing']);
      await off(sub);
    });

    test('each thing a rest-hook cannot honour is a 422 naming its element, and nothing is stored', async () => {
      const refused = async (body: Json, expression: string) => {
        const res = await post('Subscription', body);
        const outcome = (await res.json()) as Json;
        expect(res.status).toBe(422);
        expect(outcome.issue[0].expression).toEqual([expression]);
      };
      const before = (await read('Subscription?_summary=count')).total;
      await refused(subscription(hook.url, { criteria: 'Observation?no-such-param=1' }), 'Subscription.criteria');
      await refused(subscription(hook.url, { criteria: 'Observation?date=notadate' }), 'Subscription.criteria');
      await refused(subscription(hook.url, { criteria: 'Nonsense?code=1' }), 'Subscription.criteria');
      await refused(subscription(hook.url, { criteria: 'Observation?_count=5' }), 'Subscription.criteria');
      // A parameter with no value, which a search ignores, would notify every Observation the owner may read.
      await refused(subscription(hook.url, { criteria: 'Observation?code=' }), 'Subscription.criteria');
      await refused(subscription(hook.url, { criteria: 'Observation?status=final&code' }), 'Subscription.criteria');
      await refused(subscription('/relative/hook'), 'Subscription.channel.endpoint');
      await refused(subscription('ftp://example.org/hook'), 'Subscription.channel.endpoint');
      await refused(subscription(hook.url, {}, { type: 'email', endpoint: 'mailto:a@example.org' }), 'Subscription.channel.type');
      await refused(subscription(hook.url, { status: 'active' }, { type: 'message' }), 'Subscription.channel.type');
      await refused(subscription(hook.url, {}, { payload: 'text/turtle' }), 'Subscription.channel.payload');
      await refused(subscription(hook.url, {}, { header: ['Authorization: Bearer x', 'no colon'] }), 'Subscription.channel.header[1]');
      // The Host a request names is the endpoint's: another would choose a virtual host the endpoint's check never saw.
      await refused(subscription(hook.url, {}, { header: ['Authorization: Bearer x', 'HOST: internal.admin'] }), 'Subscription.channel.header[1]');
      // An update asking for activation is held to the same checks.
      const sub = await subscribe(subscription(hook.url));
      const res = await put(`Subscription/${sub.id}`, { ...sub, criteria: 'Observation?no-such-param=1' });
      expect(res.status).toBe(422);
      expect((await read(`Subscription/${sub.id}`)).criteria).toBe(sub.criteria);
      const emptied = await put(`Subscription/${sub.id}`, { ...sub, criteria: 'Observation?code=&status=final' });
      expect([emptied.status, ((await emptied.json()) as Json).issue[0].expression]).toEqual([422, ['Subscription.criteria']]);
      expect((await read(`Subscription/${sub.id}`)).criteria).toBe(sub.criteria);
      expect((await read('Subscription?_summary=count')).total).toBe(before + 1);
      await off(sub);
    });

    test('without a payload: a POST to the endpoint with no body, with each channel.header', async () => {
      const sub = await subscribe(subscription(`${hook.url}/hook`, {}, { header: ['Authorization: Bearer secret-1', 'X-Tenant: t1'] }));
      const created = (await (await post('Observation', observation('1234-5'))).json()) as Json;
      expect(hook.got).toEqual([]);
      await drain(t);
      expect(hook.got.map((r) => [r.method, r.path, r.body])).toEqual([['POST', '/hook', '']]);
      expect(hook.got[0]!.headers.get('authorization')).toBe('Bearer secret-1');
      expect(hook.got[0]!.headers.get('x-tenant')).toBe('t1');
      expect(created.id).toBeString();
      await off(sub);
    });

    test('with payload application/fhir+json: a PUT of the version to {endpoint}/{type}/{id} with that Content-Type', async () => {
      const sub = await subscribe(subscription(`${hook.url}/base/`, {}, { payload: 'application/fhir+json' }));
      const created = (await (await post('Observation', observation('1234-5'))).json()) as Json;
      await drain(t);
      expect(hook.got.map((r) => [r.method, r.path])).toEqual([['PUT', `/base/Observation/${created.id}`]]);
      expect(hook.got[0]!.headers.get('content-type')).toBe('application/fhir+json');
      const sent = JSON.parse(hook.got[0]!.body) as Json;
      expect([sent.id, sent.meta.versionId]).toEqual([created.id, '1']);
      await off(sub);
    });

    test('with payload application/fhir+xml: the version in FHIR XML, with that Content-Type', async () => {
      const sub = await subscribe(subscription(`${hook.url}/xml`, {}, { payload: 'application/fhir+xml' }));
      const created = (await (await post('Observation', observation('1234-5'))).json()) as Json;
      await drain(t);
      expect(hook.got.map((r) => [r.method, r.path])).toEqual([['PUT', `/xml/Observation/${created.id}`]]);
      expect(hook.got[0]!.headers.get('content-type')).toBe('application/fhir+xml');
      expect(parseFhirXml(hook.got[0]!.body)).toEqual(created);
      await off(sub);
    });

    test('only versions matching the criteria notify; a deletion does not', async () => {
      const sub = await subscribe(subscription(hook.url, {}, { payload: 'application/json' }));
      await post('Observation', observation('9999-9'));
      await post('Patient', { resourceType: 'Patient', id: 'x' });
      const matching = (await (await post('Observation', observation('1234-5'))).json()) as Json;
      // An update that no longer matches, and the deletion, notify nothing.
      await put(`Observation/${matching.id}`, { ...observation('9999-9'), id: matching.id });
      await t.request(`${t.fhir()}/Observation/${matching.id}`, fhirInit(token, 'DELETE'));
      await drain(t);
      expect(hook.got.map((r) => (JSON.parse(r.body) as Json).meta.versionId)).toEqual(['1']);
      await off(sub);
    });

    test('every write path notifies once: update, conditional create and update, patch, transaction, batch, $meta-add', async () => {
      const sub = await subscribe(subscription(hook.url, {}, { payload: 'application/fhir+json' }));
      const o = (await (await post('Observation', observation('1234-5'))).json()) as Json;
      await put(`Observation/${o.id}`, { ...observation('1234-5', 'pa', { status: 'amended' }), id: o.id });
      await post('Observation', observation('1234-5', 'pa', { identifier: [{ system: 'urn:x', value: 'c1' }] }), token, { 'If-None-Exist': 'identifier=urn:x|c1' });
      await put('Observation?identifier=urn:x|c1', observation('1234-5', 'pa', { identifier: [{ system: 'urn:x', value: 'c1' }], status: 'amended' }));
      const patched = await t.request(`${t.fhir()}/Observation/${o.id}`, fhirInit(token, 'PATCH', [{ op: 'replace', path: '/status', value: 'corrected' }], { 'Content-Type': 'application/json-patch+json' }));
      expect(patched.status).toBe(200);
      const bundle = (type: string) => ({
        resourceType: 'Bundle', type,
        entry: [{ resource: observation('1234-5', 'pa', { id: `b-${type}` }), request: { method: 'PUT', url: `Observation/b-${type}` } }],
      });
      expect((await post('', bundle('transaction'))).status).toBe(200);
      expect((await post('', bundle('batch'))).status).toBe(200);
      const meta = await post(`Observation/${o.id}/$meta-add`, { resourceType: 'Parameters', parameter: [{ name: 'meta', valueMeta: { tag: [{ system: 'urn:t', code: 'x' }] } }] });
      expect(meta.status).toBe(200);
      await drain(t);
      const sent = hook.got.map((r) => {
        const body = JSON.parse(r.body) as Json;
        return `${body.id === o.id ? 'o' : body.id.startsWith('b-') ? body.id : 'c1'}/${body.meta.versionId}`;
      });
      expect(sent).toEqual(['o/1', 'o/2', 'c1/1', 'c1/2', 'o/3', 'b-transaction/1', 'b-batch/1', 'o/4']);
      await off(sub);
    });

    test("a criteria's :in follows the ValueSet as it changes", async () => {
      const vs = (codes: string[]) => ({
        resourceType: 'ValueSet', id: 'sub-codes', url: 'http://example.org/ValueSet/sub-codes', status: 'active',
        compose: { include: [{ system: 'http://loinc.org', concept: codes.map((code) => ({ code })) }] },
      });
      expect((await put('ValueSet/sub-codes', vs(['1234-5']))).status).toBe(201);
      const sub = await subscribe(subscription(hook.url, { criteria: 'Observation?code:in=http://example.org/ValueSet/sub-codes' }, { payload: 'application/fhir+json' }));
      const first = (await (await post('Observation', observation('1234-5'))).json()) as Json;
      await post('Observation', observation('5678-9'));
      expect((await put('ValueSet/sub-codes', vs(['1234-5', '5678-9']))).status).toBe(200);
      const second = (await (await post('Observation', observation('5678-9'))).json()) as Json;
      await drain(t);
      expect(hook.got.map((r) => (JSON.parse(r.body) as Json).id)).toEqual([first.id, second.id]);
      await off(sub);
    });

    test("a transaction's Subscription whose :in names a ValueSet (and its CodeSystem) the same transaction writes is activated: the Bundle is one unit", async () => {
      const cs = { resourceType: 'CodeSystem', id: 'tx-cs', url: 'http://example.org/CodeSystem/tx-cs', status: 'active', content: 'complete', concept: [{ code: 'a' }, { code: 'b' }] };
      const vs = (include: Json) => ({ resourceType: 'ValueSet', id: 'tx-codes', url: 'http://example.org/ValueSet/tx-codes', status: 'active', compose: { include: [include] } });
      const sub = subscription(hook.url, { criteria: 'Observation?code:in=http://example.org/ValueSet/tx-codes' }, { payload: 'application/fhir+json' });
      const bundle = (entries: Json[]) => ({ resourceType: 'Bundle', type: 'transaction', entry: entries });
      const entry = (method: string, url: string, resource: Json) => ({ resource, request: { method, url } });
      // The Subscription listed first: FHIR sets no order among a method's entries.
      const res = await post('', bundle([entry('POST', 'Subscription', sub), entry('PUT', 'ValueSet/tx-codes', vs({ system: cs.url, concept: [{ code: 'b' }] })), entry('PUT', 'CodeSystem/tx-cs', cs)]));
      const body = (await res.json()) as Json;
      expect(res.status).toBe(200);
      const location = String(((body.entry as Json[])[0]!.response as Json).location);
      const stored = await read(location.slice(location.indexOf('Subscription/'), location.indexOf('/_history')));
      expect(stored.status).toBe('active');
      const coded = (code: string) => ({ ...observation('x'), code: { coding: [{ system: cs.url, code }] } });
      await post('Observation', coded('a'));
      const matched = (await (await post('Observation', coded('b'))).json()) as Json;
      await drain(t);
      expect(hook.got.map((r) => (JSON.parse(r.body) as Json).id)).toEqual([matched.id]);
      // A transaction's ValueSet that cannot be expanded (a code system known nowhere) is still refused, naming the criteria, and nothing is written.
      const refused = await post('', bundle([entry('PUT', 'ValueSet/tx-bad', { ...vs({ system: 'http://example.org/CodeSystem/none' }), id: 'tx-bad', url: 'http://example.org/ValueSet/tx-bad' }),
        entry('POST', 'Subscription', { ...sub, criteria: 'Observation?code:in=http://example.org/ValueSet/tx-bad' })]));
      const outcome = (await refused.json()) as Json;
      expect([refused.status, ((outcome.issue as Json[])[0]!.expression as string[])[0]]).toEqual([422, 'Bundle.entry[1].resource.criteria']);
      expect((await t.request(`${t.fhir()}/ValueSet/tx-bad`, fhirInit(token))).status).toBe(404);
      await off({ id: stored.id });
    });

    test("a transaction that deletes the ValueSet its Subscription's :in names is refused, as that ValueSet is gone once it commits", async () => {
      const vs = { resourceType: 'ValueSet', id: 'tx-gone', url: 'http://example.org/ValueSet/tx-gone', status: 'active', compose: { include: [{ system: 'http://loinc.org', concept: [{ code: '1234-5' }] }] } };
      expect((await put('ValueSet/tx-gone', vs)).status).toBe(201);
      const sub = subscription(hook.url, { criteria: 'Observation?code:in=http://example.org/ValueSet/tx-gone' }, { payload: 'application/fhir+json' });
      const res = await post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: 'ValueSet/tx-gone' } }, { resource: sub, request: { method: 'POST', url: 'Subscription' } }] });
      const outcome = (await res.json()) as Json;
      expect([res.status, ((outcome.issue as Json[] | undefined)?.[0]?.expression as string[] | undefined)?.[0]]).toEqual([422, 'Bundle.entry[1].resource.criteria']);
      expect((await t.request(`${t.fhir()}/ValueSet/tx-gone`, fhirInit(token))).status).toBe(200);
    });

    test('cinder import notifies nothing, and a Subscription it loads is stored as written and delivers nothing', async () => {
      const sub = await subscribe(subscription(hook.url));
      const cli = createCliEnv({ CINDER_DATABASE_URL: database.url });
      try {
        const file = join(cli.dir, 'load.ndjson');
        const imported = { ...subscription(hook.url, { id: 'imported', status: 'active' }), channel: { type: 'rest-hook', endpoint: `${hook.url}/imported` } };
        writeFileSync(file, [observation('1234-5', 'pa', { id: 'imported-obs' }), imported].map((r) => JSON.stringify(r)).join('\n') + '\n');
        const r = await cli.run(['import', '--tenant', 't1', file]);
        expect([r.code, r.stderr]).toEqual([0, '']);
      } finally {
        cli.close();
      }
      expect((await read('Observation/imported-obs')).id).toBe('imported-obs');
      expect((await read('Subscription/imported')).status).toBe('active');
      t.clock.advance(CHECK_INTERVAL_MS);
      await drain(t);
      expect(hook.got).toEqual([]);
      // A write through the API notifies the Subscription activated through the API alone.
      await post('Observation', observation('1234-5'));
      await drain(t);
      expect(hook.got.map((r) => r.path)).toEqual(['/']);
      await off(sub);
    });

    test('a transaction that fails notifies nothing', async () => {
      const sub = await subscribe(subscription(hook.url));
      const res = await post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          { resource: observation('1234-5'), request: { method: 'POST', url: 'Observation' } },
          { resource: observation('1234-5', 'pa', { id: 'gone' }), request: { method: 'PUT', url: 'Observation/gone', ifMatch: 'W/"7"' } },
        ],
      });
      expect(res.status).toBeGreaterThanOrEqual(400);
      await drain(t);
      expect(hook.got).toEqual([]);
      expect(await t.store.subscriptions.waiting()).toBe(0);
      await off(sub);
    });

    test("a patient-context owner's subscription notifies only about its patient's resources", async () => {
      const patientToken = await craftToken(t, 'patient/Observation.rs user/Subscription.cruds', { patient: 'pa' });
      const sub = await subscribe(subscription(hook.url, {}, { payload: 'application/fhir+json' }), patientToken);
      const mine = (await (await post('Observation', observation('1234-5', 'pa'))).json()) as Json;
      await post('Observation', observation('1234-5', 'pb'));
      await drain(t);
      expect(hook.got.map((r) => (JSON.parse(r.body) as Json).id)).toEqual([mine.id]);
      // The owner is whoever activated it last: the admin's update widens it to every patient.
      await off(sub);
      const current = await read(`Subscription/${sub.id}`);
      expect((await put(`Subscription/${sub.id}`, { ...current, status: 'requested' })).status).toBe(200);
      const other = (await (await post('Observation', observation('1234-5', 'pb'))).json()) as Json;
      await drain(t);
      expect(hook.got.map((r) => (JSON.parse(r.body) as Json).id)).toEqual([other.id]);
      await off(sub);
    });

    test("a patient-context owner's subscription of Provenance is told of those its read answers: of the patient's records too", async () => {
      const patientToken = await craftToken(t, 'patient/Observation.rs patient/Provenance.rs user/Subscription.cruds', { patient: 'pa' });
      const sub = await subscribe(subscription(hook.url, { criteria: 'Provenance' }, { payload: 'application/fhir+json' }), patientToken);
      for (const [id, patient] of [['prv-oa', 'pa'], ['prv-ob', 'pb'], ['prv-mv', 'pb'], ['prv-mv', 'pa']] as const) expect((await put(`Observation/${id}`, { ...observation('9-9', patient), id })).status).toBeLessThan(300);
      const provenance = (id: string, target: string) => ({ resourceType: 'Provenance', id, target: [{ reference: target }], recorded: '2024-01-02T03:04:05Z', agent: [{ who: { display: 'lab' } }] });
      for (const [id, target] of [['pv-oa', 'Observation/prv-oa'], ['pv-ob', 'Observation/prv-ob'], ['pv-pa', 'Patient/pa'], ['pv-mv1', 'Observation/prv-mv/_history/1'], ['pv-mv2', 'Observation/prv-mv/_history/2']]) {
        expect((await put(`Provenance/${id}`, provenance(id!, target!))).status).toBe(201);
      }
      await drain(t);
      expect(hook.got.map((r) => (JSON.parse(r.body) as Json).id).sort()).toEqual(['pv-mv2', 'pv-oa', 'pv-pa']);
      await off(sub);
    });

    test('a requested write of an active Subscription activates it again: a new version, its writer the owner (PUT, PATCH, transaction); an active one unchanged stays so', async () => {
      const patientToken = await craftToken(t, 'patient/Observation.rs user/Subscription.cruds', { patient: 'pa' });
      const sub = await subscribe(subscription(hook.url, {}, { payload: 'application/fhir+json' }), patientToken);
      const sent = async () => {
        const ids = [await post('Observation', observation('1234-5', 'pa')), await post('Observation', observation('1234-5', 'pb'))];
        const [pa, pb] = await Promise.all(ids.map(async (r) => ((await r.json()) as Json).id));
        await drain(t);
        return hook.got.splice(0).map((r) => { const id = (JSON.parse(r.body) as Json).id; return id === pa ? 'pa' : id === pb ? 'pb' : id; });
      };
      expect(await sent()).toEqual(['pa']);
      // The same content with status active changes nothing: no version, the patient app still the owner.
      const same = await put(`Subscription/${sub.id}`, { ...sub, status: 'active' });
      expect([same.status, ((await same.json()) as Json).meta]).toEqual([200, expect.objectContaining({ versionId: '1' })]);
      expect(await sent()).toEqual(['pa']);
      // Requested by the admin, without turning it off first: version 2, the admin's reach (every patient) from then on.
      const again = await put(`Subscription/${sub.id}`, { ...sub, status: 'requested' });
      expect([again.status, ((await again.json()) as Json)]).toEqual([200, expect.objectContaining({ status: 'active', meta: expect.objectContaining({ versionId: '2' }) })]);
      expect(await sent()).toEqual(['pa', 'pb']);
      // Requested back by the patient app through a PATCH: version 3, its patient's alone again.
      const patch = [{ op: 'replace', path: '/status', value: 'requested' }];
      const patched = await t.request(`${t.fhir()}/Subscription/${sub.id}`, fhirInit(patientToken, 'PATCH', patch, { 'Content-Type': 'application/json-patch+json' }));
      expect([patched.status, ((await patched.json()) as Json).meta]).toEqual([200, expect.objectContaining({ versionId: '3' })]);
      expect(await sent()).toEqual(['pa']);
      // And by the admin in a transaction entry: version 4.
      const entry = { resource: { ...sub, status: 'requested' }, request: { method: 'PUT', url: `Subscription/${sub.id}` } };
      const bundle = (await (await post('', { resourceType: 'Bundle', type: 'transaction', entry: [entry] })).json()) as Json;
      expect(((bundle.entry as Json[])[0]!.response as Json).etag).toBe('W/"4"');
      expect(await sent()).toEqual(['pa', 'pb']);
      await off(sub);
    });

    test("another owner's activation drops what waited under the earlier owner's reach, whatever endpoint it sets; the same owner's keeps it", async () => {
      const patientToken = await craftToken(t, 'patient/Observation.rs user/Subscription.cruds', { patient: 'pa' });
      const sub = await subscribe(subscription(`${hook.url}/admin`, {}, { payload: 'application/fhir+json' }));
      // One notification per patient waits, matched with the admin's reach (the delivery rounds not run).
      const queue = () => Promise.all(['pa', 'pb'].map(async (p) => expect((await post('Observation', observation('1234-5', p))).status).toBe(201)));
      const sent = async () => {
        await drain(t);
        return hook.got.splice(0).map((r) => `${r.path.split('/')[1]} ${((JSON.parse(r.body) as Json).subject as Json).reference}`).sort();
      };
      const requested = async (endpoint: string, tok: string) => {
        const current = await read(`Subscription/${sub.id}`);
        const res = await put(`Subscription/${sub.id}`, { ...current, status: 'requested', channel: { ...(current.channel as Json), endpoint } }, tok);
        expect(res.status).toBe(200);
      };
      await queue();
      // The admin again, with another endpoint: the same owner, what waited is kept and sent there.
      await requested(`${hook.url}/moved`, token);
      expect(await sent()).toEqual(['moved Patient/pa', 'moved Patient/pb']);
      await queue();
      expect(await t.store.subscriptions.waiting()).toBe(2);
      // The patient app, with its own endpoint: another owner, narrower. What waited (another patient's too) is dropped, unsent.
      await requested(`${hook.url}/patient`, patientToken);
      expect(await t.store.subscriptions.waiting()).toBe(0);
      expect(await sent()).toEqual([]);
      // From then on, its patient's alone.
      await queue();
      expect(await sent()).toEqual(['patient Patient/pa']);
      await off(sub);
    });

    test("a patient-context token reads no Subscription: another app's endpoint, header credentials and websocket id", async () => {
      const sub = await subscribe(subscription(hook.url, {}, { header: ['Authorization: Bearer app-secret'] }));
      const patientApp = await craftToken(t, 'patient/*.rs', { patient: 'pa' });
      const get = async (path: string, tok: string) => {
        const res = await t.request(`${t.fhir()}/${path}`, fhirInit(tok));
        return { status: res.status, leaked: (await res.text()).includes('app-secret') };
      };
      for (const path of [`Subscription/${sub.id}`, 'Subscription', `Subscription/${sub.id}/_history`, '_history', `?_type=Subscription`]) {
        const got = await get(path, patientApp);
        expect({ path, leaked: got.leaked }).toEqual({ path, leaked: false });
      }
      expect((await get(`Subscription/${sub.id}`, patientApp)).status).toBe(403);
      expect((await get('Subscription', patientApp)).status).toBe(403);
      // A user/ scope beside them grants it, as any user/ scope does.
      expect(await get(`Subscription/${sub.id}`, await craftToken(t, 'patient/*.rs user/Subscription.rs', { patient: 'pa' }))).toEqual({ status: 200, leaked: true });
      await off(sub);
    });

    test("a scope filter of the owner's token bounds its subscription as it bounds its searches", async () => {
      const filtered = await craftToken(t, 'system/Observation.rs?status=final system/Subscription.cruds');
      const sub = await subscribe(subscription(hook.url, {}, { payload: 'application/fhir+json' }), filtered);
      const final = (await (await post('Observation', observation('1234-5'))).json()) as Json;
      await post('Observation', observation('1234-5', 'pa', { status: 'preliminary' }));
      await drain(t);
      expect(hook.got.map((r) => (JSON.parse(r.body) as Json).id)).toEqual([final.id]);
      await off(sub);
    });

    test('failures are retried with backoff; the fifth in a row sets the Subscription to error and drops what waits', async () => {
      const sub = await subscribe(subscription(hook.url));
      hook.state.status = 500;
      await post('Observation', observation('1234-5'));
      await post('Observation', observation('1234-5'));
      await drain(t);
      expect(hook.got.length).toBe(1);
      // Not due again until the backoff has passed on the clock.
      await drain(t);
      expect(hook.got.length).toBe(1);
      for (const wait of [5_000, 10_000, 20_000, 40_000]) {
        t.clock.advance(wait);
        await drain(t);
      }
      expect(hook.got.length).toBe(5);
      const errored = await read(`Subscription/${sub.id}`);
      expect(errored.status).toBe('error');
      expect(errored.error).toContain('answered 500');
      expect(errored.meta.versionId).toBe('2');
      expect(await t.store.subscriptions.waiting()).toBe(0);
      const metrics = await (await t.request('/metrics')).text();
      expect(metrics).toContain('# TYPE cinder_subscription_deliveries_total counter');
      expect(metrics).toMatch(/cinder_subscription_deliveries_total\{result="error"\} [1-9]/);
      expect(metrics).toMatch(/cinder_subscription_deliveries_total\{result="failed"\} [1-9]/);

      // An errored subscription notifies nothing; set back to requested it resumes.
      hook.state.status = 200;
      await post('Observation', observation('1234-5'));
      await drain(t);
      expect(hook.got.length).toBe(5);
      const resumed = await put(`Subscription/${sub.id}`, { ...errored, status: 'requested' });
      const body = (await resumed.json()) as Json;
      expect([resumed.status, body.status, body.error]).toEqual([200, 'active', undefined]);
      await post('Observation', observation('1234-5'));
      await drain(t);
      expect(hook.got.length).toBe(6);
      expect(hook.got[5]!.method).toBe('POST');
      await off(sub);
    });

    test('a payload no Content-Type header can carry is a 422 at activation; one an older release stored is a failed delivery, retried and then error', async () => {
      for (const payload of ['application/fhir+json;x=\u65e5\u672c', 'application/fhir+json;x=\u00e9', 'application/fhir+json;', 'application/fhir+json;charset']) {
        const res = await post('Subscription', subscription(hook.url, {}, { payload }));
        expect(res.status).toBe(422);
        expect(((await res.json()) as Json).issue[0].expression).toEqual(['Subscription.channel.payload']);
      }
      const quoted = await subscribe(subscription(hook.url, {}, { payload: 'application/fhir+json; charset="utf-8"' }));
      expect(quoted.status).toBe('active');
      await off(quoted);
      // An older release activated one: stored as that release stored it (cinder import) and owned as it recorded its owner.
      const model = await subscribe(subscription(hook.url));
      const owner = (await t.store.subscriptions.owner('t1', model.id))!;
      await off(model);
      const cli = createCliEnv({ CINDER_DATABASE_URL: database.url });
      try {
        const file = join(cli.dir, 'older.ndjson');
        writeFileSync(file, JSON.stringify(subscription(hook.url, { id: 'older-payload', status: 'active' }, { payload: 'application/fhir+json;x=\u65e5\u672c' })) + '\n');
        const r = await cli.run(['import', '--tenant', 't1', file]);
        expect([r.code, r.stderr]).toEqual([0, '']);
      } finally {
        cli.close();
      }
      await t.store.resources.write('t1', (w) => w.ownSubscription('older-payload', owner, 'rest-hook'));
      t.clock.advance(CHECK_INTERVAL_MS);
      const failed = t.app.subscriptions.counts.failed;
      await post('Observation', observation('1234-5'));
      // One failure, then nothing until its backoff has passed (it was claimed again at once, round after round, for ever).
      await drain(t);
      expect(t.app.subscriptions.counts.failed).toBe(failed + 1);
      for (const wait of [5_000, 10_000, 20_000, 40_000]) {
        t.clock.advance(wait);
        await drain(t);
      }
      expect(t.app.subscriptions.counts.failed).toBe(failed + 5);
      const errored = await read('Subscription/older-payload');
      expect(errored.status).toBe('error');
      expect(errored.error).toContain('Subscription.channel.payload');
      expect(hook.got).toEqual([]);
      expect(await t.store.subscriptions.waiting()).toBe(0);
      token = await t.token();
    });

    test('$status counts the events of a criteria Subscription, concurrent writes matching it each counted, delivered or not', async () => {
      const sub = await subscribe(subscription(hook.url, { criteria: 'Observation?code=http://loinc.org|count-me' }));
      const since = async () => {
        const bundle = await read(`Subscription/${sub.id}/$status`);
        const parameter = (bundle.entry[0].resource.parameter as Json[]).find((p) => p.name === 'events-since-subscription-start');
        return parameter?.valueString as string;
      };
      expect(await since()).toBe('0');
      for (let i = 0; i < 3; i++) expect((await post('Observation', observation('count-me'))).status).toBe(201);
      expect((await post('Observation', observation('not-me'))).status).toBe(201);
      expect(await since()).toBe('3');
      // Written at once (on PostgreSQL, concurrent transactions each finding the others counting it).
      const statuses = await Promise.all(Array.from({ length: 12 }, async () => (await post('Observation', observation('count-me'))).status));
      expect(statuses).toEqual(Array(12).fill(201));
      expect(await since()).toBe('15');
      // Delivered, the count stays; a transaction's two matching entries are two events.
      await drain(t);
      expect(hook.got.length).toBe(15);
      const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [0, 1].map(() => ({ resource: observation('count-me'), request: { method: 'POST', url: 'Observation' } })) };
      expect((await post('', bundle)).status).toBe(200);
      expect(await since()).toBe('17');
      await drain(t);
      expect(await since()).toBe('17');
      await off(sub);
    });

    test('a redirect is a failure and is not followed; so is a refused connection', async () => {
      const sub = await subscribe(subscription(`${hook.url}/moved`));
      hook.state.status = 307;
      await post('Observation', observation('1234-5'));
      await drain(t);
      expect(hook.got.map((r) => r.path)).toEqual(['/moved']);
      expect(await t.store.subscriptions.waiting()).toBe(1);
      await off(sub);
      const closed = receiver();
      closed.stop();
      const failed = t.app.subscriptions.counts.failed;
      const unreachable = await subscribe(subscription(closed.url));
      await post('Observation', observation('1234-5'));
      await drain(t);
      expect(t.app.subscriptions.counts.failed).toBe(failed + 1);
      expect(await t.store.subscriptions.waiting()).toBe(1);
      await off(unreachable);
    });

    test('the CapabilityStatement lists Subscription and says which channels are delivered', async () => {
      const statement = (await (await t.request(`${t.fhir()}/metadata`)).json()) as Json;
      const entry = (statement.rest[0].resource as Json[]).find((r) => r.type === 'Subscription')!;
      expect(entry.interaction.map((i: Json) => i.code)).toContain('create');
      expect(entry.documentation).toContain('channel.type rest-hook is delivered');
      expect(entry.documentation).toContain('email, sms and message are not');
    });

    test('a Subscription whose end has passed is stored off, or set off at its next delivery, and delivers nothing', async () => {
      const past = new Date(t.clock.now() - 1000).toISOString();
      expect((await subscribe(subscription(hook.url, { end: past }))).status).toBe('off');
      const soon = new Date(t.clock.now() + 60_000).toISOString();
      const sub = await subscribe(subscription(hook.url, { end: soon }));
      expect(sub.status).toBe('active');
      await post('Observation', observation('1234-5'));
      t.clock.advance(120_000);
      await drain(t);
      expect(hook.got).toEqual([]);
      expect((await read(`Subscription/${sub.id}`)).status).toBe('off');
      expect(await t.store.subscriptions.waiting()).toBe(0);
    });

    test('two servers on one database deliver each notification exactly once', async () => {
      const db = await target.migrated();
      const first = db.open();
      await first.migrate();
      const a = await createTestApp({ store: first, env: ALLOW });
      const second = db.open();
      const keys = createKeyRing(second, a.clock, MAX_TOKEN_TTL);
      await keys.init();
      const b = createApp({ config: a.config, store: second, keys, clock: a.clock, log: silentLogger, core: testCoreBundle() });
      try {
        const admin = await a.token();
        const subs: Json[] = [];
        for (let i = 0; i < 4; i++) {
          const res = await a.request(`${a.fhir()}/Subscription`, fhirInit(admin, 'POST', subscription(hook.url, {}, { header: [`X-Sub: ${i}`] })));
          subs.push((await res.json()) as Json);
        }
        for (let i = 0; i < 10; i++) expect((await a.request(`${a.fhir()}/Observation`, fhirInit(admin, 'POST', observation('1234-5')))).status).toBe(201);
        let rounds = 0;
        while (rounds++ < 100) {
          const claimed = await Promise.all([a.app.subscriptions.runOnce(), b.subscriptions.runOnce(), a.app.subscriptions.runOnce(), b.subscriptions.runOnce()]);
          if (claimed.every((n) => n === 0)) break;
        }
        const bySub = new Map<string, number>();
        for (const r of hook.got) bySub.set(r.headers.get('x-sub')!, (bySub.get(r.headers.get('x-sub')!) ?? 0) + 1);
        expect(Object.fromEntries(bySub)).toEqual({ 0: 10, 1: 10, 2: 10, 3: 10 });
        expect(a.app.subscriptions.counts.delivered + b.subscriptions.counts.delivered).toBe(40);
      } finally {
        hook.got.length = 0;
        await second.close();
        await a.close();
      }
    });

    test("a tenant holds at most 1,000 activated Subscriptions: one more is a 422, never stored active to notify nothing, nor one pushing another app's out", async () => {
      const other = await t.tokenFor('t1', ['system/Observation.rs', 'system/Subscription.cruds']);
      const theirs = await subscribe(subscription(hook.url, { criteria: 'Observation?code=http://loinc.org|other-app' }), other);
      // Websocket ones cost no delivery; ids that sort before any the server assigns, as the hub reads them in id order.
      const many = (method: 'PUT' | 'DELETE', n: number) => ({
        resourceType: 'Bundle', type: 'transaction',
        entry: Array.from({ length: n }, (_, i) => ({
          ...(method === 'PUT' && { resource: { resourceType: 'Subscription', id: `0-${i}`, status: 'requested', reason: 'many', criteria: `Observation?code=http://loinc.org|m${i}`, channel: { type: 'websocket' } } }),
          request: { method, url: `Subscription/0-${i}` },
        })),
      });
      // Theirs and those earlier tests left activated (an imported one among them) are counted: one more than fills the
      // tenant's 1,000 is refused, the transaction whole.
      const room = 1000 - ((await read('Subscription?status=active,requested&_summary=count')).total as number);
      const refused = await post('', many('PUT', room + 1));
      const outcome = (await refused.json()) as Json;
      expect(refused.status).toBe(422);
      expect(outcome.issue[0].expression[0]).toEndWith('.status');
      expect(outcome.issue[0].diagnostics).toContain('1000 active Subscriptions');
      expect((await read('Subscription?_id=0-0')).total).toBe(0);
      expect((await post('', many('PUT', room))).status).toBe(200);
      t.clock.advance(CHECK_INTERVAL_MS);
      await post('Observation', observation('other-app'));
      await drain(t);
      expect(hook.got.length).toBe(1);
      const one = await post('Subscription', subscription(hook.url));
      expect(one.status).toBe(422);
      expect(((await one.json()) as Json).issue[0].expression).toEqual(['Subscription.status']);
      // Theirs written requested again is no new one; one set off makes room for another.
      expect((await put(`Subscription/${theirs.id}`, { ...theirs, status: 'requested' }, other)).status).toBe(200);
      const zero = await read('Subscription/0-0');
      expect((await put('Subscription/0-0', { ...zero, status: 'off' })).status).toBe(200);
      const next = await subscribe(subscription(hook.url, { criteria: 'Observation?code=http://loinc.org|next' }));
      expect((await post('', many('DELETE', room))).status).toBe(200);
      await off(next);
      await off(await read(`Subscription/${theirs.id}`));
    }, 120_000);
  });

  test(`writes go on while a reindex gates searches: the active subscriptions are read past the gate (${target.kind})`, async () => {
    const db = await target.migrated();
    const store = db.open();
    await store.migrate();
    const t = await createTestApp({ store, env: ALLOW, rebuilding: () => ({ from: 0, examined: 0 }) });
    const hook = receiver();
    try {
      const token = await t.token();
      const sub = await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription(hook.url)));
      expect(sub.status).toBe(201);
      expect((await t.request(`${t.fhir()}/Observation`, fhirInit(token, 'POST', observation('1234-5')))).status).toBe(201);
      await drain(t);
      expect(hook.got.length).toBe(1);
    } finally {
      hook.stop();
      await t.close();
    }
  });

  test(`stop() ends a round after the delivery under way; what is left waits for the next process (${target.kind})`, async () => {
    const db = await target.migrated();
    const store = db.open();
    await store.migrate();
    const t = await createTestApp({ store, env: ALLOW });
    const first = Promise.withResolvers<void>();
    const release = Promise.withResolvers<void>();
    let got = 0;
    const slow = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      async fetch() {
        got++;
        first.resolve();
        await release.promise;
        return new Response(null, { status: 200 });
      },
    });
    try {
      const token = await t.token();
      expect((await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription(`http://127.0.0.1:${slow.port}/`)))).status).toBe(201);
      for (let i = 0; i < 3; i++) await t.request(`${t.fhir()}/Observation`, fhirInit(token, 'POST', observation('1234-5')));
      const round = t.app.subscriptions.runOnce();
      await first.promise;
      const stopped = t.app.subscriptions.stop();
      release.resolve();
      await Promise.all([round, stopped]);
      expect(got).toBe(1);
      expect(await t.store.subscriptions.waiting()).toBe(2);
    } finally {
      slow.stop(true);
      await t.close();
    }
  });

  test(`a delivery that read the Subscription before another owner's activation sends that owner's notifications to its endpoint, not the earlier one's (${target.kind})`, async () => {
    const db = await target.migrated();
    const store = db.open();
    await store.migrate();
    // Once armed, the next read of a Subscription (the delivery's) is held until the test lets it go on.
    let hold: { reached: PromiseWithResolvers<void>; go: PromiseWithResolvers<void> } | undefined;
    const resources: Store['resources'] = {
      ...store.resources,
      async read(tenant, type, id) {
        const version = await store.resources.read(tenant, type, id);
        const held = type === 'Subscription' ? hold : undefined;
        if (held) {
          hold = undefined;
          held.reached.resolve();
          await held.go.promise;
        }
        return version;
      },
    };
    const t = await createTestApp({ store: { ...store, resources }, env: ALLOW });
    const hook = receiver();
    try {
      const token = await t.token();
      const patientToken = await craftToken(t, 'patient/Observation.rs user/Subscription.cruds', { patient: 'pa' });
      const call = (method: string, path: string, body: unknown, tok = token) => t.request(`${t.fhir()}/${path}`, fhirInit(tok, method, body));
      const created = await call('POST', 'Subscription', subscription(`${hook.url}/admin`, {}, { payload: 'application/fhir+json' }));
      const sub = (await created.json()) as Json;
      expect(created.status).toBe(201);
      // One notification waits, matched with the admin's reach: the delivery claims the subscription for it.
      expect((await call('POST', 'Observation', observation('1234-5', 'pb'))).status).toBe(201);
      hold = { reached: Promise.withResolvers(), go: Promise.withResolvers() };
      const held = hold;
      const round = t.app.subscriptions.runOnce();
      await held.reached.promise;
      // Between the delivery's read of the Subscription (the admin's endpoint) and its read of what waits: the patient
      // app activates it with its own endpoint (what waited is dropped), and a write matched with its reach is recorded.
      const current = (await (await t.request(`${t.fhir()}/Subscription/${sub.id}`, fhirInit(token))).json()) as Json;
      const moved = { ...current, status: 'requested', channel: { ...(current.channel as Json), endpoint: `${hook.url}/patient` } };
      expect((await call('PUT', `Subscription/${sub.id}`, moved, patientToken)).status).toBe(200);
      expect((await call('POST', 'Observation', observation('1234-5', 'pa'))).status).toBe(201);
      held.go.resolve();
      await round;
      await drain(t);
      const sent = hook.got.map((r) => `${r.path.split('/')[1]} ${((JSON.parse(r.body) as Json).subject as Json).reference}`);
      expect(sent).toEqual(['patient Patient/pa']);
      expect(await t.store.subscriptions.waiting()).toBe(0);
    } finally {
      hook.stop();
      await t.close();
    }
  });

  test(`a write through another server whose Subscriptions were read before another owner's activation is not sent to the new owner's endpoint (${target.kind})`, async () => {
    const db = await target.migrated();
    const store = db.open();
    await store.migrate();
    const t = await createTestApp({ store, env: ALLOW });
    const hook = receiver();
    const secondStore = db.open();
    try {
      // Server B (CINDER_PROCESSES=2, or another server on the database) keeps its compiled Subscriptions CHECK_INTERVAL_MS.
      const second = await secondServer(t, () => secondStore);
      const token = await t.token();
      const patientToken = await craftToken(t, 'patient/Observation.rs user/Subscription.cruds', { patient: 'pa' });
      const call = (method: string, path: string, body: unknown, tok = token) => t.request(`${t.fhir()}/${path}`, fhirInit(tok, method, body));
      const viaSecond = (body: unknown) => second(`${t.fhir()}/Observation`, fhirInit(token, 'POST', body));
      const created = await call('POST', 'Subscription', subscription(`${hook.url}/admin`, {}, { payload: 'application/fhir+json' }));
      const sub = (await created.json()) as Json;
      expect(created.status).toBe(201);
      // B reads the Subscription, the admin its owner, and records a match with the admin's reach.
      expect((await viaSecond(observation('1234-5', 'pb'))).status).toBe(201);
      await drain(t);
      // The patient app activates it with its own endpoint through A; B has not read it again (the clock stands still).
      const moved = { ...sub, status: 'requested', channel: { ...(sub.channel as Json), endpoint: `${hook.url}/patient` } };
      expect((await call('PUT', `Subscription/${sub.id}`, moved, patientToken)).status).toBe(200);
      // Patient pb is out of the patient app's reach: matched by B with the admin's, it must not reach the patient's endpoint.
      expect((await viaSecond(observation('1234-5', 'pb'))).status).toBe(201);
      await drain(t);
      // Once B has read the Subscription again, its writes are matched with the patient app's reach.
      t.clock.advance(CHECK_INTERVAL_MS);
      expect((await viaSecond(observation('1234-5', 'pb'))).status).toBe(201);
      expect((await viaSecond(observation('1234-5', 'pa'))).status).toBe(201);
      await drain(t);
      const sent = hook.got.map((r) => `${r.path.split('/')[1]} ${((JSON.parse(r.body) as Json).subject as Json).reference}`);
      expect(sent).toEqual(['admin Patient/pb', 'patient Patient/pa']);
      expect(await t.store.subscriptions.waiting()).toBe(0);
    } finally {
      hook.stop();
      await secondStore.close();
      await t.close();
    }
  });

  test(`the delivery loop: a slow endpoint holds its own delivery, not the others' (${target.kind})`, async () => {
    const db = await target.migrated();
    const store = db.open();
    await store.migrate();
    const t = await createTestApp({ store, env: ALLOW });
    const asked = Promise.withResolvers<void>();
    const release = Promise.withResolvers<void>();
    // An endpoint that answers 2xx, but only when released: a slow one, within its timeout each time.
    let slowRequest: Request | undefined;
    const slow = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      async fetch(req) {
        slowRequest = req;
        asked.resolve();
        await release.promise;
        return new Response(null, { status: 200 });
      },
    });
    const fast = Promise.withResolvers<string>();
    const hook = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      fetch: () => (fast.resolve(slowRequest?.signal.aborted ? 'delivered once the slow delivery gave up' : 'delivered'), new Response(null, { status: 200 })),
    });
    try {
      const token = await t.token();
      const send = (path: string, body: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, 'POST', body));
      expect((await send('Subscription', subscription(`http://127.0.0.1:${slow.port}/`, { criteria: 'Observation?code=http://loinc.org|slow' }))).status).toBe(201);
      expect((await send('Subscription', subscription(`http://127.0.0.1:${hook.port}/`, { criteria: 'Observation?code=http://loinc.org|fast' }))).status).toBe(201);
      expect((await send('Observation', observation('slow'))).status).toBe(201);
      t.app.subscriptions.start(10);
      await asked.promise;
      // Recorded while the slow endpoint's delivery is under way: delivered meanwhile, not after it.
      expect((await send('Observation', observation('fast'))).status).toBe(201);
      const waited = setTimeout(() => fast.resolve('not delivered while the slow endpoint was answering'), 20_000);
      expect(await fast.promise).toBe('delivered');
      clearTimeout(waited);
      release.resolve();
      await t.app.subscriptions.stop();
      expect(await t.store.subscriptions.waiting()).toBe(0);
    } finally {
      release.resolve();
      await t.app.subscriptions.stop();
      slow.stop(true);
      hook.stop(true);
      await t.close();
    }
  }, 40_000);

  test(`slow endpoints filling every place take turns: past its time a claim gives way to those that waited (${target.kind})`, async () => {
    const db = await target.migrated();
    const store = db.open();
    await store.migrate();
    const t = await createTestApp({ store, env: ALLOW });
    const token = await t.token();
    const send = (path: string, body: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, 'POST', body));
    const arrived: string[] = [];
    let fastWritten: Promise<Response> | undefined;
    // Each slow endpoint's answer takes the whole of a claim's time (the clock moved by it).
    const server = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      fetch(req) {
        const path = new URL(req.url).pathname;
        arrived.push(path);
        if (path.startsWith('/slow')) {
          t.clock.advance(CLAIM_SENDS_FOR_MS);
          fastWritten ??= Promise.resolve(send('Observation', observation('fast')));
        }
        return new Response(null, { status: 200 });
      },
    });
    try {
      for (let i = 0; i < CLAIMS; i++) {
        expect((await send('Subscription', subscription(`http://127.0.0.1:${server.port}/slow${i}`, { criteria: 'Observation?code=http://loinc.org|slow' }))).status).toBe(201);
      }
      expect((await send('Subscription', subscription(`http://127.0.0.1:${server.port}/fast`, { criteria: 'Observation?code=http://loinc.org|fast' }))).status).toBe(201);
      for (let i = 0; i < 2; i++) expect((await send('Observation', observation('slow'))).status).toBe(201);
      // Every place taken by a slow endpoint: one notification each, then each gives way.
      await t.app.subscriptions.runOnce();
      expect((await fastWritten!).status).toBe(201);
      expect(arrived.filter((p) => p.startsWith('/slow')).length).toBe(CLAIMS);
      // The fast one, waiting since, is claimed first in the next round.
      arrived.length = 0;
      await t.app.subscriptions.runOnce();
      expect(arrived).toContain('/fast');
      expect(arrived.length).toBe(CLAIMS);
      await drain(t);
      expect(await t.store.subscriptions.waiting()).toBe(0);
    } finally {
      server.stop(true);
      await t.close();
    }
  });

  test(`the delivery loop shares its places between apps: one app's endpoints that never answer leave places for another app's (${target.kind})`, async () => {
    const db = await target.migrated();
    const store = db.open();
    await store.migrate();
    const t = await createTestApp({ store, env: ALLOW });
    const release = Promise.withResolvers<void>();
    // Asked, and answering only when the test ends (each delivery gives up after its timeout, 5 s).
    const hanging: string[] = [];
    /** Deliveries to the hanging endpoint that gave up (their timeout aborted the request). */
    let gaveUp = 0;
    /** Answers one request each (the first asked first). */
    const answers: (() => void)[] = [];
    const hang = Bun.serve({
      port: 0, hostname: '127.0.0.1',
      async fetch(req) {
        hanging.push(new URL(req.url).pathname);
        req.signal.addEventListener('abort', () => void gaveUp++);
        const answered = Promise.withResolvers<void>();
        answers.push(answered.resolve);
        await Promise.race([release.promise, answered.promise]);
        return new Response(null, { status: 200 });
      },
    });
    /** Resolved when the other app's notification arrives, with how many hanging deliveries had given up by then. */
    const arrived = Promise.withResolvers<number>();
    const fast = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => (arrived.resolve(gaveUp), new Response(null, { status: 200 })) });
    try {
      const admin = await t.token();
      const busy = await t.tokenFor('t1', ['system/*.*']);
      const other = await t.tokenFor('t1', ['system/*.*']);
      const send = (token: string, path: string, body: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, 'POST', body));
      for (let i = 0; i < 20; i++) {
        expect((await send(busy, 'Subscription', subscription(`http://127.0.0.1:${hang.port}/h${i}`, { criteria: 'Observation?code=http://loinc.org|hang' }))).status).toBe(201);
      }
      expect((await send(other, 'Subscription', subscription(`http://127.0.0.1:${fast.port}/`, { criteria: 'Observation?code=http://loinc.org|fast' }))).status).toBe(201);
      expect((await send(admin, 'Observation', observation('hang'))).status).toBe(201);
      t.app.subscriptions.start(100);
      // The busy app alone: past its share, into every place but the reserved ones.
      // Until the places are taken, however long a loaded machine takes (the test's timeout bounds it); then none more.
      while (hanging.length < CLAIMS - RESERVED) await Bun.sleep(20);
      await Bun.sleep(300);
      expect(hanging.length).toBe(CLAIMS - RESERVED);
      expect(CLAIMS - RESERVED).toBeGreaterThan(APP_CLAIMS);
      // The other app's notification, recorded while the busy app's deliveries hang: sent while they all still hang,
      // not once some gave up (after their 5 s timeout) and handed a place back. However long a loaded machine takes
      // to send it, the test's timeout bounds it.
      expect(gaveUp).toBe(0);
      expect((await send(admin, 'Observation', observation('fast'))).status).toBe(201);
      expect(await arrived.promise).toBe(0);
      expect(hanging.length).toBe(CLAIMS - RESERVED);
      // Four of its deliveries answered, once those handed back (past the places it may take) are due again: with
      // nothing else due, the busy app takes the places beyond the reserved ones again, past its share (8 under way).
      t.clock.advance(HANDED_BACK_MS);
      for (const answer of answers.slice(0, 4)) answer();
      while (hanging.length < CLAIMS) await Bun.sleep(20);
      await Bun.sleep(300);
      expect([hanging.length, new Set(hanging).size]).toEqual([CLAIMS, CLAIMS]);
    } finally {
      release.resolve();
      await t.app.subscriptions.stop();
      hang.stop(true);
      fast.stop(true);
      await t.close();
    }
  }, 40_000);

  describe(`subscription endpoints on private addresses (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let hook: ReturnType<typeof receiver>;
    const names = new Map<string, string>([['hook.example', '203.0.113.10']]);
    /** A name whose resolution waits for `dns.release` (dns.asked: it was asked). */
    let dns = { asked: Promise.withResolvers<void>(), release: Promise.withResolvers<void>() };
    /** What the app's deliveries would have fetched (with the Host header when the URL holds an address). */
    const sent: string[] = [];
    /** Names rebound by a hostile DNS server: the answers in turn, the last one ever after. */
    const rebinding = new Map<string, string[]>();
    /** How many times each name was resolved. */
    const lookups = new Map<string, number>();

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      const fetch = async (input: string | URL | Request, init?: RequestInit) => {
        const host = new Headers(init?.headers).get('host');
        sent.push(host === null ? String(input) : `${String(input)} (Host: ${host})`);
        return new Response(null, { status: 200 });
      };
      const resolveHost = async (host: string) => {
        lookups.set(host, (lookups.get(host) ?? 0) + 1);
        if (host.startsWith('nowhere')) throw new Error(`${host} does not resolve`);
        if (host === 'slow.example') {
          dns.asked.resolve();
          await dns.release.promise;
        }
        const answers = rebinding.get(host);
        if (answers) return [answers.length > 1 ? answers.shift()! : answers[0]!];
        return [names.get(host) ?? '198.51.100.1'];
      };
      t = await createTestApp({ store, resolveHost, fetch: fetch as typeof globalThis.fetch });
      token = await t.token();
      hook = receiver();
    });
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    test('loopback, link-local and private endpoints are refused at activation (422)', async () => {
      names.set('inside.example', '10.1.2.3');
      for (const endpoint of [hook.url, 'http://localhost/x', 'http://[::1]/x', 'http://169.254.169.254/latest', 'http://10.0.0.8/', 'http://172.20.1.1/',
        'http://192.168.1.1/', 'http://0.0.0.0/', 'http://[fe80::1]/', 'http://[fd00::1]/', 'http://[::ffff:127.0.0.1]/', 'http://inside.example/hook',
        // The local-use NAT64 prefix (RFC 8215), 6to4 (RFC 3056) and IPv4-translated (RFC 2765) forms of private IPv4 addresses.
        'http://[64:ff9b:1::a9fe:a9fe]/', 'http://[64:ff9b:1:ffff::a00:8]/', 'http://[2002:a9fe:a9fe::1]/', 'http://[2002:7f00:1::]/', 'http://[::ffff:0:7f00:1]/']) {
        const res = await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription(endpoint)));
        const outcome = (await res.json()) as Json;
        expect([endpoint, res.status, outcome.issue?.[0]?.expression]).toEqual([endpoint, 422, ['Subscription.channel.endpoint']]);
      }
      expect((await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription('https://hook.example/x')))).status).toBe(201);
    });

    test("an endpoint's name is resolved before the write's transaction: other writes go on meanwhile", async () => {
      for (const bundle of [false, true]) {
        dns = { asked: Promise.withResolvers<void>(), release: Promise.withResolvers<void>() };
        const body = subscription(`https://slow.example/${bundle}`, { criteria: 'Observation?code=http://loinc.org|never' });
        const creating = t.request(bundle ? t.fhir() : `${t.fhir()}/Subscription`, fhirInit(token, 'POST', bundle
          ? { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: body, request: { method: 'POST', url: 'Subscription' } }] }
          : body));
        let settled = false;
        void Promise.resolve(creating).then(() => (settled = true));
        await dns.asked.promise;
        expect((await t.request(`${t.fhir()}/Observation`, fhirInit(token, 'POST', observation('0000-0')))).status).toBe(201);
        // Written while the Subscription's write still waits for its name (SQLite has one writer at a time).
        expect(settled).toBe(false);
        dns.release.resolve();
        expect((await creating).status).toBe(bundle ? 200 : 201);
        t.clock.advance(60_000);
        token = await t.token();
      }
    });

    test('an endpoint whose name resolves to a private address by delivery time is refused then, and never called', async () => {
      const sub = (await (await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription('http://hook.example/x'))))
        .json()) as Json;
      expect(sub.status).toBe('active');
      names.set('hook.example', '127.0.0.1');
      await t.request(`${t.fhir()}/Observation`, fhirInit(token, 'POST', observation('1234-5')));
      for (const wait of [0, 5_000, 10_000, 20_000, 40_000]) {
        t.clock.advance(wait);
        await t.app.subscriptions.runOnce();
      }
      const errored = (await (await t.request(`${t.fhir()}/Subscription/${sub.id}`, fhirInit(token))).json()) as Json;
      expect(errored.status).toBe('error');
      expect(errored.error).toBe('5 deliveries failed in a row; the last: delivery to http://hook.example/x refused: its host hook.example resolves to 127.0.0.1, which is a loopback, link-local or private address');
      expect(sent).toEqual([]);
      expect(hook.got).toEqual([]);
      // Resolving publicly again and resumed, it is delivered (through the app's fetch).
      names.set('hook.example', '203.0.113.10');
      expect((await t.request(`${t.fhir()}/Subscription/${sub.id}`, fhirInit(token, 'PUT', { ...errored, status: 'requested' }))).status).toBe(200);
      await t.request(`${t.fhir()}/Observation`, fhirInit(token, 'POST', observation('1234-5')));
      await t.app.subscriptions.runOnce();
      // To the address checked, naming the host.
      expect(sent).toEqual(['http://203.0.113.10/x (Host: hook.example)']);
      sent.length = 0;
    });

    test('a name rebound to loopback after the delivery resolved it (DNS rebinding) is delivered to the address checked, never to the rebound one', async () => {
      // Public to the activation's lookup and to the delivery's, 127.0.0.1 to every lookup after (a connection's own, were there one).
      rebinding.set('rebind.example', ['203.0.113.30', '203.0.113.30', '127.0.0.1']);
      const sub = (await (await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription('http://rebind.example/x', { criteria: 'Observation?code=http://loinc.org|2345-6' }))))
        .json()) as Json;
      expect(sub.status).toBe('active');
      await t.request(`${t.fhir()}/Observation`, fhirInit(token, 'POST', observation('2345-6')));
      await t.app.subscriptions.runOnce();
      expect(sent).toEqual(['http://203.0.113.30/x (Host: rebind.example)']);
      sent.length = 0;
      // A later delivery resolves the name again and is refused on the loopback answer (as in the test above).
    });

    test("a transaction's Subscriptions to a name that does not resolve ask for it once, before the transaction", async () => {
      const entry = [1, 2, 3].map((i) => ({ resource: subscription(`https://nowhere.example/${i}`, { criteria: 'Observation?code=http://loinc.org|never' }), request: { method: 'POST', url: 'Subscription' } }));
      const res = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'transaction', entry }));
      expect(res.status).toBe(200);
      // Not resolving is no reason to refuse (each delivery resolves it again); each entry activated.
      expect(((await res.json()) as Json).entry.map((e: Json) => e.resource.status)).toEqual(['active', 'active', 'active']);
      // Once for the three, before the transaction: not again by each activation inside it.
      expect(lookups.get('nowhere.example')).toBe(1);
    });

    test("each delivery resolves the endpoint's name once", async () => {
      names.set('count.example', '203.0.113.40');
      const sub = (await (await t.request(`${t.fhir()}/Subscription`, fhirInit(token, 'POST', subscription('http://count.example/x', { criteria: 'Observation?code=http://loinc.org|3456-7' }))))
        .json()) as Json;
      expect(sub.status).toBe('active');
      expect(lookups.get('count.example')).toBe(1);
      lookups.clear();
      for (const round of [1, 2]) {
        await t.request(`${t.fhir()}/Observation`, fhirInit(token, 'POST', observation('3456-7')));
        await t.app.subscriptions.runOnce();
        expect([sent.length, lookups.get('count.example')]).toEqual([round, round]);
      }
      sent.length = 0;
    });
  });
}
