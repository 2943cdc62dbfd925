/**
 * Requests creating the same resource by id at once (update as create: PUT, a transaction's PUT
 * entries): the first to commit creates it and the others update it, as they would one after another.
 * On PostgreSQL each finds no row to lock, and all but one then meet the others' rows (a unique key, or
 * a deadlock between Bundles creating several in other orders); they were answered 409, where SQLite,
 * which has one writer, answered every one.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`update as create at once (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    /** The interaction and status of each version of `ref`, oldest first. */
    const history = async (ref: string) =>
      (((await (await api.get(`${ref}/_history`)).json()) as Json).entry as Json[]).map((e) => `${e.request.method} ${e.response.status}`).reverse();

    test('PUTs of one new id: one creates it, the others update it', async () => {
      const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => api.put('Patient/new-1', { resourceType: 'Patient', id: 'new-1', birthDate: `200${i}` })));
      const statuses = answers.map((r) => r.status).sort();
      expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
      expect(await history('Patient/new-1')).toEqual(['PUT 201', ...new Array(7).fill('PUT 200')]);
    });

    test('create-only PUTs (If-None-Match: *) of one new id: one creates it, the others are refused with 412', async () => {
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => api.put('Patient/new-2', { resourceType: 'Patient', id: 'new-2', birthDate: `200${i}` }, { 'If-None-Match': '*' })));
      expect(answers.map((r) => r.status).sort()).toEqual([201, 412, 412, 412, 412, 412]);
      expect(await history('Patient/new-2')).toEqual(['PUT 201']);
    });

    test('transactions PUTting the same new resources in other orders all commit', async () => {
      const statuses: number[] = [];
      for (let round = 0; round < 4; round++) {
        const ids = [`a${round}`, `b${round}`, `c${round}`];
        const bundle = (order: string[]) => api.post(api.base, {
          resourceType: 'Bundle', type: 'transaction',
          entry: [
            ...order.map((id) => ({ resource: { resourceType: 'Organization', id, name: order.join() }, request: { method: 'PUT', url: `Organization/${id}` } })),
            { resource: { resourceType: 'Patient', managingOrganization: { reference: `Organization/${order[0]}` } }, request: { method: 'POST', url: 'Patient' } },
          ],
        });
        const answers = await Promise.all([bundle(ids), bundle([...ids].reverse()), bundle([ids[1]!, ids[2]!, ids[0]!])]);
        for (const res of answers) {
          statuses.push(res.status);
          await res.text();
        }
        // Each Organization was created once and updated by the two other Bundles.
        for (const id of ids) expect((await history(`Organization/${id}`)).map((h) => h.split(' ')[1])).toEqual(['201', '200', '200']);
      }
      expect(statuses).toEqual(new Array(12).fill(200));
    });
  });
});
