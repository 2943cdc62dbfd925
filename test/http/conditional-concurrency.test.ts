/**
 * Conditional creates and updates of the same criteria at the same moment: they run one after another,
 * so the first creates and the others find its resource (FHIR R4 http 3.1.0.8.1, 3.1.0.4.3), whether
 * they come as REST requests, transaction entries or batch entries; without that each found no match
 * and each created a resource. Bundles holding several conditions take them in one order, so they never
 * wait for each other in a cycle. On both databases, within one process and between two servers
 * sharing the database (as CINDER_PROCESSES runs them): there each condition's claim in the database
 * sends the later writes back to search again.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, secondServer, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';
import type { Store } from '../../src/store/types.ts';

await eachStore((kind, fresh) => {
  describe(`concurrent conditional writes (${kind})`, () => {
    let t: TestApp;
    let token: string;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
    });
    afterAll(() => t.close());

    const patient = (value: string, extra: Json = {}) => ({ resourceType: 'Patient', identifier: [{ system: 'urn:mrn', value }], ...extra });
    const create = (value: string) => t.request(`${t.fhir()}/Patient`, fhirInit(token, 'POST', patient(value), { 'If-None-Exist': `identifier=urn:mrn|${value}` }));
    const update = (value: string) => t.request(`${t.fhir()}/Patient?identifier=urn:mrn|${value}`, fhirInit(token, 'PUT', patient(value, { active: true })));
    const bundle = (type: 'transaction' | 'batch', values: string[]) => t.request(t.fhir(), fhirInit(token, 'POST', {
      resourceType: 'Bundle', type,
      entry: values.map((value, i) => (i % 2
        ? { resource: patient(value), request: { method: 'PUT', url: `Patient?identifier=urn:mrn|${value}` } }
        : { resource: patient(value), request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=urn:mrn|${value}` } })),
    }));
    const matches = async (value: string) => ((await (await t.request(`${t.fhir()}/Patient?identifier=urn:mrn|${value}&_total=accurate`, fhirInit(token))).json()) as Json).total;

    test('REST conditional creates and updates of one identifier at once: one is created, the others find it', async () => {
      for (const value of ['r1', 'r2', 'r3']) {
        const answers = await Promise.all([create(value), update(value), create(value), update(value), create(value), update(value)]);
        const statuses = answers.map((r) => r.status).sort();
        expect(statuses).toEqual([200, 200, 200, 200, 200, 201]);
        expect(await matches(value)).toBe(1);
      }
    });

    test('transaction and batch entries wait for the same conditions, in any order: one resource per identifier', async () => {
      const answers = await Promise.all([
        bundle('transaction', ['b1', 'b2', 'b3']), bundle('transaction', ['b3', 'b2', 'b1']), bundle('batch', ['b2', 'b1', 'b3']),
        create('b1'), update('b2'), create('b3'), bundle('transaction', ['b2', 'b3']),
      ]);
      expect(answers.map((r) => r.status)).toEqual([200, 200, 200, expect.any(Number), expect.any(Number), expect.any(Number), 200]);
      for (const r of answers.slice(3, 6)) expect([200, 201]).toContain(r.status);
      for (const value of ['b1', 'b2', 'b3']) expect(await matches(value)).toBe(1);
    });
  });
});

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`conditional writes from two servers on one ${target.kind} database`, () => {
    let t: TestApp;
    let second: (path: string, init: RequestInit) => Promise<Response>;
    let token: string;

    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({ store: db.open() });
      token = await t.token();
      // Another server on the same database, as a second process of CINDER_PROCESSES runs it.
      second = await secondServer(t, () => db.open());
    });
    afterAll(() => t.close());

    const servers = () => [t.request, second];
    const patient = (value: string, extra: Json = {}) => ({ resourceType: 'Patient', identifier: [{ system: 'urn:two', value }], ...extra });
    const create = (on: number, value: string) =>
      servers()[on]!(`${t.fhir()}/Patient`, fhirInit(token, 'POST', patient(value), { 'If-None-Exist': `identifier=urn:two|${value}` }));
    const update = (on: number, value: string) =>
      servers()[on]!(`${t.fhir()}/Patient?identifier=urn:two|${value}`, fhirInit(token, 'PUT', patient(value, { active: true })));
    const bundle = (on: number, type: 'transaction' | 'batch', values: string[]) => servers()[on]!(t.fhir(), fhirInit(token, 'POST', {
      resourceType: 'Bundle', type,
      entry: values.flatMap((value) => {
        const fullUrl = `urn:uuid:${crypto.randomUUID()}`;
        const create = { fullUrl, resource: patient(value), request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=urn:two|${value}` } };
        // A transaction's Observation refers to the Patient entry: to the one found, where it found one.
        const observation = { resource: { resourceType: 'Observation', status: 'final', code: { text: value }, subject: { reference: fullUrl } }, request: { method: 'POST', url: 'Observation' } };
        return type === 'transaction' ? [create, observation] : [create];
      }),
    }));
    const matches = async (value: string) => ((await (await t.request(`${t.fhir()}/Patient?identifier=urn:two|${value}&_total=accurate`, fhirInit(token))).json()) as Json).total;

    test('REST conditional creates and updates of one identifier on both servers at once: one is created, the others find it', async () => {
      for (let round = 0; round < 6; round++) {
        const value = `rest-${round}`;
        const answers = await Promise.all([create(0, value), create(1, value), update(0, value), update(1, value), create(1, value), create(0, value)]);
        expect(answers.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 201]);
        expect(await matches(value)).toBe(1);
      }
    });

    test('transaction and batch entries on both servers at once: one resource per identifier, the Bundles whole', async () => {
      for (let round = 0; round < 4; round++) {
        const values = [`b${round}-1`, `b${round}-2`, `b${round}-3`];
        const answers = await Promise.all([
          bundle(0, 'transaction', values), bundle(1, 'transaction', [...values].reverse()),
          bundle(1, 'batch', values), bundle(0, 'batch', [...values].reverse()), create(1, values[1]!),
        ]);
        expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, expect.any(Number)]);
        for (const r of answers.slice(0, 4)) {
          const statuses = (((await r.json()) as Json).entry as { response: { status: string } }[]).map((e) => e.response.status);
          for (const status of statuses) expect(['200 OK', '201 Created']).toContain(status);
        }
        for (const value of values) {
          expect(await matches(value)).toBe(1);
          // Every Observation refers to that one Patient, also from a Bundle that searched again.
          const observations = (await (await t.request(`${t.fhir()}/Observation?subject:Patient.identifier=urn:two|${value}&_total=accurate`, fhirInit(token))).json()) as Json;
          expect(observations.total).toBe(2);
        }
      }
    });
  });
}

/**
 * What the conditions serialise, and what they leave alone, with the other requests run deterministically
 * while one conditional create is held at a chosen point (the store wrapped): before its search (in this
 * process's queue of the condition) and, on PostgreSQL, inside its write transaction after it moved its
 * condition's claim (the row lock that another process's write of the condition waits for). A conditional
 * create of another condition runs to its commit meanwhile; one of the same condition answers only after
 * the held one committed, 200 with its resource. Many of one condition at once, from two servers: one 201,
 * every other a 200 with that resource, or all 412 when the condition already matched two.
 */
for (const target of targets) {
  describe(`what conditional creates wait for (${target.kind})`, () => {
    let t: TestApp;
    let second: (path: string, init: RequestInit) => Response | Promise<Response>;
    let token: string;
    /** Set: the next search of the store, or the next claim a write moves (`inTx`), waits for `gate` once it has run. */
    let hold: { inTx: boolean; gate: Promise<void>; reached: () => void } | undefined;

    beforeAll(async () => {
      const db = await target.migrated();
      const store = db.open();
      const resources: Store['resources'] = Object.create(store.resources);
      const held = async () => {
        const h = hold;
        hold = undefined;
        h!.reached();
        await h!.gate;
      };
      resources.search = async (tenant, query) => {
        const rows = await store.resources.search(tenant, query);
        if (hold && !hold.inTx) await held();
        return rows;
      };
      resources.write = (tenant, fn) => store.resources.write(tenant, (w) => fn({
        ...w,
        claim: async (...args: Parameters<typeof w.claim>) => {
          const moved = await w.claim(...args);
          if (moved && hold?.inTx) await held();
          return moved;
        },
      }));
      t = await createTestApp({ store: Object.create(store, { resources: { value: resources } }) as Store });
      token = await t.token();
      second = await secondServer(t, () => db.open());
    });
    afterAll(() => t.close());

    const servers = () => [t.request, second];
    const patient = (value: string) => ({ resourceType: 'Patient', identifier: [{ system: 'urn:held', value }] });
    const create = (on: number, value: string) =>
      servers()[on]!(`${t.fhir()}/Patient`, fhirInit(token, 'POST', patient(value), { 'If-None-Exist': `identifier=urn:held|${value}` }));
    const matching = async (value: string) =>
      ((((await (await t.request(`${t.fhir()}/Patient?identifier=urn:held|${value}`, fhirInit(token))).json()) as Json).entry ?? []) as Json[]).map((e) => e.resource.id as string);
    /** Starts a conditional create of `value` on this server and resolves once it is held (hold); `release` lets it go on. */
    async function held(value: string, inTx: boolean): Promise<{ answer: Promise<Response>; release: () => void }> {
      let release!: () => void;
      let reached!: () => void;
      const at = new Promise<void>((resolve) => (reached = resolve));
      hold = { inTx, gate: new Promise<void>((resolve) => (release = resolve)), reached };
      const answer = Promise.resolve(create(0, value));
      await at;
      return { answer, release };
    }
    /** Whether `p` settles within `ms`. */
    const settles = (p: Promise<unknown>, ms: number) => Promise.race([p.then(() => true), Bun.sleep(ms).then(() => false)]);

    const cases = target.kind === 'postgres' ? [false, true] : [false];
    for (const inTx of cases) {
      test(`held ${inTx ? 'in its transaction after its claim' : 'at its search'}: another condition is created meanwhile, the same one waits and finds it`, async () => {
        const a = `a-${inTx}`;
        const first = await held(a, inTx);
        // Of another condition: on this server and on the other, to their commits while the first is held.
        const others = [create(0, `b-${inTx}`), create(1, `c-${inTx}`)];
        // Held in its transaction, SQLite's single writer would make these wait: that case runs on PostgreSQL alone.
        expect(await settles(Promise.all(others), 5_000)).toBe(true);
        expect((await Promise.all(others)).map((r) => r.status)).toEqual([201, 201]);
        // Of the same condition: in this process it queues behind the first; on the other server, held in its
        // transaction, it waits for the claim the first moved (held at its search, nothing stops the other
        // server's search, which the first's claim then sends back to search again).
        const same = inTx ? [create(0, a), create(1, a)] : [create(0, a)];
        expect(await settles(Promise.race(same), 300)).toBe(false);
        first.release();
        const created = await first.answer;
        expect(created.status).toBe(201);
        const id = ((await created.json()) as Json).id;
        for (const r of await Promise.all(same)) expect([r.status, ((await r.json()) as Json).id]).toEqual([200, id]);
        expect(await matching(a)).toEqual([id]);
      });
    }

    test('24 conditional creates of one condition at once on two servers: one 201, 23 answers of that resource', async () => {
      const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => create(i % 2, 'many')));
      const bodies = (await Promise.all(answers.map((r) => r.json()))) as Json[];
      expect(answers.map((r) => r.status).sort()).toEqual([...Array(23).fill(200), 201]);
      const ids = new Set(bodies.map((b) => b.id));
      expect(ids.size).toBe(1);
      expect(await matching('many')).toEqual([...ids]);
    });

    test('a condition that matches two already: every create at once is 412 and writes nothing', async () => {
      for (let i = 0; i < 2; i++) expect((await t.request(`${t.fhir()}/Patient`, fhirInit(token, 'POST', patient('two')))).status).toBe(201);
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => create(i % 2, 'two')));
      expect(answers.map((r) => r.status)).toEqual(Array(8).fill(412));
      expect((await matching('two')).length).toBe(2);
    });
  });
}
