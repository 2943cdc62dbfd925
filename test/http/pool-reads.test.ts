/**
 * Inside a write's transaction nothing is read on another connection of the PostgreSQL pool: a server whose
 * pool holds two connections (one for the main pool, one for generic plans) answers concurrent writes whose
 * transactions would otherwise each wait for a connection only their own commits free (ARCHITECTURE.md,
 * "inside a write transaction, read only through the writer"). On SQLite (one writer connection) the same requests
 * answer alike, and on both what the transaction reads sees what it wrote.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { storeTargets, type StoreDatabase } from '../helpers/stores.ts';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import type { Store } from '../../src/store/types.ts';

/** A rest-hook receiver on a free port of 127.0.0.1 that counts what it is sent. */
function receiver() {
  const got: string[] = [];
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (req) => (got.push(new URL(req.url).pathname), new Response(null, { status: 200 })) });
  return { url: `http://127.0.0.1:${server.port}/hook`, got, stop: () => server.stop(true) };
}

const websocket = (criteria: string) => ({ resourceType: 'Subscription', status: 'requested', reason: 'test', criteria, channel: { type: 'websocket' } });
const four = [0, 1, 2, 3];

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((x) => x.cleanup())), 60_000);

for (const target of targets) {
  describe(`reads inside a write's transaction on a pool of two connections (${target.kind})`, () => {
    let t: TestApp;
    let token: string;
    let database: StoreDatabase;
    let hook: ReturnType<typeof receiver>;
    const call = (method: string, path: string, body?: unknown) => t.request(`${t.fhir()}/${path}`, fhirInit(token, method, body));
    /** Delivery rounds until one claims nothing. */
    const drain = async () => {
      for (let i = 0; i < 50 && (await t.app.subscriptions.runOnce()) > 0; i++);
    };

    beforeAll(async () => {
      database = await target.migrated();
      const store = database.open();
      await store.migrate();
      t = await createTestApp({ store, env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      token = await t.token();
      hook = receiver();
    });
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    /**
     * The statuses of `requests` sent together to a second server on `database` whose PostgreSQL pool holds two
     * connections (SQLite: a store of its own), or 'stalled' when they have not all answered within 10 s.
     */
    async function together(requests: { method: string; path: string; body?: unknown }[], first?: (second: (path: string, init: RequestInit) => Promise<Response>) => Promise<void>): Promise<number[] | string> {
      const small: Store = target.kind === 'postgres' ? createPostgresStore(database.url, { max: 2 }) : database.open();
      let timer: ReturnType<typeof setTimeout> | undefined;
      try {
        const second = await secondServer(t, () => small);
        await first?.(second);
        const answered = Promise.all(requests.map(async (r) => (await second(`${t.fhir()}/${r.path}`, fhirInit(token, r.method, r.body))).status));
        const stalled = new Promise<string>((resolve) => (timer = setTimeout(() => resolve('stalled'), 10_000)));
        return await Promise.race([answered, stalled]);
      } finally {
        clearTimeout(timer);
        await small.close();
      }
    }

    test('Subscriptions whose criteria name a tenant ValueSet (code:in) are activated together: its expansion is read before each transaction', async () => {
      expect((await call('PUT', 'CodeSystem/cs1', { resourceType: 'CodeSystem', id: 'cs1', url: 'http://example.org/cs1', status: 'active', content: 'complete', concept: [{ code: 'a' }, { code: 'b' }] })).status).toBe(201);
      expect((await call('PUT', 'ValueSet/vs1', { resourceType: 'ValueSet', id: 'vs1', url: 'http://example.org/vs1', status: 'active', compose: { include: [{ system: 'http://example.org/cs1' }] } })).status).toBe(201);
      const sub = websocket('Observation?code:in=http://example.org/vs1');
      expect(await together(four.map(() => ({ method: 'POST', path: 'Subscription', body: sub })))).toEqual([201, 201, 201, 201]);
      // As transaction and batch entries: each Bundle's activations read it before its transaction too.
      const bundle = (type: string) => ({ resourceType: 'Bundle', type, entry: [{ resource: sub, request: { method: 'POST', url: 'Subscription' } }] });
      expect(await together(four.map((i) => ({ method: 'POST', path: '', body: bundle(i % 2 ? 'batch' : 'transaction') })))).toEqual([200, 200, 200, 200]);
      // A ValueSet the criteria cannot expand is still refused, naming the criteria.
      const refused = await together([{ method: 'POST', path: 'Subscription', body: websocket('Observation?code:in=http://example.org/unknown') }]);
      expect(refused).toEqual([422]);
    });

    test("writes matched against another client's Subscription, its registration read more than 5 s before, answer: it is read again before each transaction", async () => {
      const other = await t.tokenFor('t1', ['system/*.*']);
      expect((await t.request(`${t.fhir()}/Subscription`, fhirInit(other, 'POST', { ...websocket('Encounter?status=finished'), channel: { type: 'rest-hook', endpoint: hook.url } }))).status).toBe(201);
      const encounter = { resourceType: 'Encounter', status: 'finished', class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' } };
      const statuses = await together(four.map(() => ({ method: 'POST', path: 'Encounter', body: encounter })), async (second) => {
        expect((await second(`${t.fhir()}/Encounter`, fhirInit(token, 'POST', encounter))).status).toBe(201);
        t.clock.advance(6_000);
      });
      expect(statuses).toEqual([201, 201, 201, 201]);
      // Each write was matched: five notifications.
      await drain();
      expect(hook.got.splice(0).length).toBe(5);
    });

    test('Binaries matched against a Subscription whose owner reads them through their securityContext answer: it is read in the transaction', async () => {
      const lab = { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'laboratory' }] };
      expect((await call('PUT', 'Observation/o1', { resourceType: 'Observation', id: 'o1', status: 'final', category: [lab], code: { text: 'x' } })).status).toBe(201);
      const owner = await t.tokenFor('t1', ['system/Binary.rs', 'system/Observation.rs?category=laboratory', 'system/Subscription.cruds']);
      const sub = { ...websocket('Binary'), channel: { type: 'rest-hook', endpoint: hook.url } };
      expect((await t.request(`${t.fhir()}/Subscription`, fhirInit(owner, 'POST', sub))).status).toBe(201);
      const binary = (context: string) => ({ resourceType: 'Binary', contentType: 'text/plain', data: 'aGk=', securityContext: { reference: context } });
      expect(await together(four.map(() => ({ method: 'POST', path: 'Binary', body: binary('Observation/o1') })))).toEqual([201, 201, 201, 201]);
      // A Binary whose context the owner may not read notifies nothing; one whose context the same transaction writes is matched.
      expect((await call('PUT', 'Observation/o2', { resourceType: 'Observation', id: 'o2', status: 'final', code: { text: 'x' } })).status).toBe(201);
      expect((await call('POST', 'Binary', binary('Observation/o2'))).status).toBe(201);
      const entry = [
        { fullUrl: 'urn:uuid:5a0e0e35-0000-4000-8000-000000000001', resource: { resourceType: 'Observation', status: 'final', category: [lab], code: { text: 'y' } }, request: { method: 'POST', url: 'Observation' } },
        { resource: binary('urn:uuid:5a0e0e35-0000-4000-8000-000000000001'), request: { method: 'POST', url: 'Binary' } },
      ];
      expect((await call('POST', '', { resourceType: 'Bundle', type: 'transaction', entry })).status).toBe(200);
      await drain();
      expect(hook.got.splice(0).length).toBe(5);
    });

    test("writes matched against a Subscription's _has past 100 candidates answer: it is searched in the transaction", async () => {
      for (const n of [1, 2, 3, 4]) {
        expect((await call('PUT', `Patient/h${n}`, { resourceType: 'Patient', id: `h${n}` })).status).toBe(201);
        const entry = Array.from({ length: 101 }, (_, i) => ({
          request: { method: 'POST', url: 'Observation' },
          resource: { resourceType: 'Observation', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: i === 100 && n !== 4 ? '9999-9' : '1111-1' }] }, subject: { reference: `Patient/h${n}` } },
        }));
        expect((await call('POST', '', { resourceType: 'Bundle', type: 'transaction', entry })).status).toBe(200);
      }
      const sub = { ...websocket('Patient?_has:Observation:subject:code=http://loinc.org|9999-9'), channel: { type: 'rest-hook', endpoint: hook.url } };
      expect((await call('POST', 'Subscription', sub)).status).toBe(201);
      const patients = [1, 2, 3, 4].map((n) => ({ method: 'PUT', path: `Patient/h${n}`, body: { resourceType: 'Patient', id: `h${n}`, active: true } }));
      expect(await together(patients)).toEqual([200, 200, 200, 200]);
      // h4 has no such Observation.
      await drain();
      expect(hook.got.splice(0).length).toBe(3);
    });

    test('writes matched against a Subscription chaining to a core ValueSet answer: whether the tenant shadows it is read in the transaction', async () => {
      const sub = { ...websocket('Task?focus:ValueSet.name=AdministrativeGender'), channel: { type: 'rest-hook', endpoint: hook.url } };
      expect((await call('POST', 'Subscription', sub)).status).toBe(201);
      const task = (focus: string) => ({ resourceType: 'Task', status: 'requested', intent: 'order', focus: { reference: focus } });
      expect(await together(four.map(() => ({ method: 'POST', path: 'Task', body: task('ValueSet/administrative-gender') })))).toEqual([201, 201, 201, 201]);
      // A tenant ValueSet of that id shadows the core one, and the transaction writing it sees it: not matched.
      const shadow = { resourceType: 'ValueSet', id: 'administrative-gender', url: 'http://example.org/vs/gender', name: 'Mine', status: 'active' };
      const entry = [
        { resource: shadow, request: { method: 'PUT', url: 'ValueSet/administrative-gender' } },
        { resource: task('ValueSet/administrative-gender'), request: { method: 'POST', url: 'Task' } },
      ];
      expect((await call('POST', '', { resourceType: 'Bundle', type: 'transaction', entry })).status).toBe(200);
      await drain();
      expect(hook.got.splice(0).length).toBe(4);
    });

    test('a transaction writing a Patient and its Observation notifies a Subscription chaining to that Patient: the chain is searched in the transaction, which sees its writes', async () => {
      const sub = { ...websocket('Observation?subject:Patient.name=jones'), channel: { type: 'rest-hook', endpoint: hook.url } };
      expect((await call('POST', 'Subscription', sub)).status).toBe(201);
      const entry = [
        { fullUrl: 'urn:uuid:5a0e0e35-0000-4000-8000-000000000002', resource: { resourceType: 'Patient', name: [{ family: 'Jones' }] }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Observation', status: 'final', code: { text: 'z' }, subject: { reference: 'urn:uuid:5a0e0e35-0000-4000-8000-000000000002' } }, request: { method: 'POST', url: 'Observation' } },
      ];
      expect((await call('POST', '', { resourceType: 'Bundle', type: 'transaction', entry })).status).toBe(200);
      await drain();
      expect(hook.got.splice(0).length).toBe(1);
    });

    test("transactions each writing or deleting the ValueSet their Subscription's :in names answer: the Bundle's terminology is read before each transaction", async () => {
      const vs = (i: number) => ({ resourceType: 'ValueSet', id: `txvs${i}`, url: `http://example.org/txvs${i}`, status: 'active', compose: { include: [{ system: 'http://loinc.org', concept: [{ code: '1234-5' }] }] } });
      const bundle = (i: number, method: string) => ({
        resourceType: 'Bundle', type: 'transaction',
        entry: [
          method === 'DELETE' ? { request: { method, url: `ValueSet/txvs${i}` } } : { resource: vs(i), request: { method, url: `ValueSet/txvs${i}` } },
          { resource: websocket(`Observation?code:in=http://example.org/txvs${i}`), request: { method: 'POST', url: 'Subscription' } },
        ],
      });
      expect(await together(four.map((i) => ({ method: 'POST', path: '', body: bundle(i, 'PUT') })))).toEqual([200, 200, 200, 200]);
      expect(await together(four.map((i) => ({ method: 'POST', path: '', body: bundle(i, 'DELETE') })))).toEqual([422, 422, 422, 422]);
    });
  });
}
