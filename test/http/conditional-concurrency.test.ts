/**
 * Conditional creates and updates of the same criteria at the same moment: they run one after another,
 * so the first creates and the others find its resource (FHIR R4 http 3.1.0.8.1, 3.1.0.4.3), whether
 * they come as REST requests, transaction entries or batch entries; without that each found no match
 * and each created a resource. Bundles holding several conditions take them in one order, so they never
 * wait for each other in a cycle. On both databases, within one process (see README).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';

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
