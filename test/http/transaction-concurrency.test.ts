/**
 * Transactions changing the same resources at once, each in its own order: the resources an entry
 * changes are locked together, in key order, before the first write, so they wait for each other
 * and all commit; none deadlocks (which PostgreSQL would end after a second, one of them a 409).
 * On both databases (SQLite has one writer, so there only the outcome is checked).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`concurrent transactions (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const ids = ['a', 'b', 'c', 'd', 'e', 'f'];

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
      for (const id of ids) {
        const res = await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token, 'PUT', { resourceType: 'Patient', id, identifier: [{ system: 'urn:test', value: id }] }));
        expect(res.status).toBe(201);
      }
    });
    afterAll(() => t.close());

    /**
     * A transaction updating `order`'s Patients (by id, or by identifier where `conditional`), in that
     * order, to a birth date of the round's `which`th transaction: each changes them (one that changes
     * nothing writes no version).
     */
    const transaction = (order: string[], round: number, which: number, conditional = false) => t.request(t.fhir(), fhirInit(token, 'POST', {
      resourceType: 'Bundle', type: 'transaction',
      entry: order.map((id) => ({
        resource: { resourceType: 'Patient', ...(conditional ? {} : { id }), identifier: [{ system: 'urn:test', value: id }], birthDate: `${1950 + round}-0${which}` },
        request: { method: 'PUT', url: conditional ? `Patient?identifier=urn:test|${id}` : `Patient/${id}` },
      })),
    }));

    test('the same resources in opposite orders, by id and conditionally: every transaction commits', async () => {
      const rounds = 8;
      const statuses: number[] = [];
      for (let round = 0; round < rounds; round++) {
        const answers = await Promise.all([
          transaction(ids, round, 1), transaction([...ids].reverse(), round, 2),
          transaction(['c', 'a', 'e'], round, 3), transaction(['e', 'c', 'a'], round, 4, true),
        ]);
        for (const res of answers) {
          statuses.push(res.status);
          await res.text();
        }
      }
      expect(statuses).toEqual(new Array(rounds * 4).fill(200));
      // Every transaction wrote a version of each of its Patients: 1 + 2 per round, and 2 more for a, c, e.
      const versions = async (id: string) => (((await (await t.request(`${t.fhir()}/Patient/${id}`, fhirInit(token))).json()) as Json).meta.versionId);
      expect(await Promise.all(ids.map(versions))).toEqual(ids.map((id) => String(1 + rounds * (['a', 'c', 'e'].includes(id) ? 4 : 2))));
    });
  });
});
