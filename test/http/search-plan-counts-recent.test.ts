/**
 * A plan's counts may be a few seconds old on PostgreSQL (recentCounts, SearchRunner.planCount): the same
 * search asked again soon after the data changed under each of its conditions (from a few rows to hundreds,
 * then to none) answers the data as it is now (matches, order and `_total`), on both databases. Counts that
 * only steer the plan never decide what a search answers.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, BASE, type TestApp } from '../helpers/app.ts';
import { storeTargets } from '../helpers/stores.ts';
import { firstVersions } from '../helpers/versions.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const TENANT = 't1';
const base = `${BASE}/tenants/${TENANT}/fhir/R4`;
const CLINICAL = 'http://terminology.hl7.org/CodeSystem/condition-clinical';
const SEARCH = 'Condition?clinical-status=resolved&subject:Patient.gender=female&_count=5&_total=accurate';

const patient = (id: string, gender: string) => ({ resourceType: 'Patient', id, gender });
const condition = (id: string, subject: string, status: string) => ({
  resourceType: 'Condition', id, subject: { reference: `Patient/${subject}` },
  clinicalStatus: { coding: [{ system: CLINICAL, code: status }] },
});

for (const target of targets) {
  describe(`a search asked again at once after the data changed (${target.kind})`, () => {
    test('each answer is the data as it is, whatever the counts its plan was made from', async () => {
      const db = await target.migrated();
      const t: TestApp = await createTestApp({ store: db.open() });
      try {
        const token = await t.token();
        const ask = async () => {
          const res = await t.request(`${base}/${SEARCH}`, fhirInit(token));
          expect(res.status).toBe(200);
          const body = await res.json() as { total?: number; entry?: { resource: { id: string } }[] };
          return { total: body.total, ids: (body.entry ?? []).map((e) => e.resource.id) };
        };
        const write = (resources: Record<string, unknown>[]) => t.store.resources.write(TENANT, (w) => w.insertNew(firstVersions(resources)));
        // A few of each: the first plan counts a few rows of each condition.
        await write([patient('f0', 'female'), patient('m0', 'male'), condition('c000', 'f0', 'resolved'), condition('c001', 'm0', 'resolved'), condition('c002', 'f0', 'active')]);
        expect(await ask()).toEqual({ total: 1, ids: ['c000'] });
        // Then many under both: 300 resolved Conditions of female patients, 300 of male ones.
        const more: Record<string, unknown>[] = [];
        for (let i = 1; i <= 20; i++) more.push(patient(`f${i}`, 'female'), patient(`m${i}`, 'male'));
        for (let i = 0; i < 600; i++) more.push(condition(`c${String(100 + i).padStart(3, '0')}`, `${i % 2 ? 'm' : 'f'}${1 + (i % 20)}`, 'resolved'));
        await write(more);
        expect(await ask()).toEqual({ total: 301, ids: ['c000', 'c100', 'c102', 'c104', 'c106'] });
        // Then none: every female patient made male (21 updates, the chain's targets gone).
        for (let i = 0; i <= 20; i++) {
          const res = await t.request(`${base}/Patient/f${i}`, fhirInit(token, 'PUT', patient(`f${i}`, 'male')));
          expect(res.status).toBe(200);
        }
        expect(await ask()).toEqual({ total: 0, ids: [] });
      } finally {
        await t.close();
      }
    }, 120_000);
  });
}
