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
