/**
 * Referential integrity and Subscription matches judge a target's reach inside the write's transaction, through its
 * writer (src/fhir/crud.ts referenceReach, src/fhir/subscriptions/hub.ts): a Binary whose securityContext is a
 * Provenance naming an earlier version of the patient's record, and a scope filter's chain. Were any of those reads
 * made on another connection, concurrent writes would each hold one and wait for another: on a PostgreSQL pool of 2,
 * 8 writes at once must all answer, with the answers a read gives.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit } from '../helpers/app.ts';
import { craftToken, type Json } from '../helpers/fhir.ts';
import { receiver } from '../helpers/rest-hook.ts';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const CATEGORY = 'http://terminology.hl7.org/CodeSystem/observation-category';
const observation = (id: string | undefined, patient: string, category: string, extra: Json = {}): Json => ({
  resourceType: 'Observation', ...(id && { id }), status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] },
  category: [{ coding: [{ system: CATEGORY, code: category }] }], subject: { reference: `Patient/${patient}` }, ...extra,
});
const provenance = (id: string, target: string): Json => ({
  resourceType: 'Provenance', id, target: [{ reference: target }], recorded: '2024-01-02T03:04:05Z', agent: [{ who: { reference: 'Practitioner/dr1' } }],
});
const binary = (id: string, context: string): Json => ({ resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', securityContext: { reference: context } });

for (const target of targets) {
  describe(`reach judged in the write's transaction, on a pool of 2 (${target.kind})`, () => {
    test('8 writes at once referring to a Binary of a Provenance and to a chained filter\'s Observation all answer, as reads do', async () => {
      const db = await target.migrated();
      const hook = receiver();
      const t = await createTestApp({
        store: target.kind === 'postgres' ? createPostgresStore(db.url, { max: 2 }) : db.open(),
        env: { CINDER_REFERENTIAL_INTEGRITY: 'on', CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' },
      });
      try {
        const admin = await t.token();
        const put = async (r: Json) => (await t.request(`${t.fhir()}/${r.resourceType}/${r.id}`, fhirInit(admin, 'PUT', r))).status;
        for (const r of [
          { resourceType: 'Patient', id: 'p1', name: [{ family: 'Taylor' }] }, { resourceType: 'Patient', id: 'p2', name: [{ family: 'Rivera' }] },
          { resourceType: 'Practitioner', id: 'dr1' }, observation('o1', 'p1', 'laboratory'), observation('o1', 'p1', 'vital-signs'), observation('o2', 'p2', 'laboratory'),
        ]) expect([200, 201]).toContain(await put(r));
        for (const r of [provenance('pv', 'Observation/o1/_history/1'), provenance('pv2', 'Observation/o2/_history/1'), binary('b-in', 'Provenance/pv'), binary('b-out', 'Provenance/pv2')]) {
          expect(await put(r)).toBe(201);
        }
        const token = await craftToken(t, 'launch/patient patient/Patient.rs patient/Provenance.rs patient/Binary.rs patient/Observation.c patient/Observation.rs?subject:Patient.name=taylor user/Subscription.cruds', { patient: 'p1' });
        const post = (r: Json) => t.request(`${t.fhir()}/${r.resourceType}`, fhirInit(token, 'POST', r));
        const sub = await post({ resourceType: 'Subscription', status: 'requested', reason: 'Binary', criteria: 'Binary', channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json' } });
        expect(sub.status).toBe(201);
        const refer = (focus: string) => post(observation(undefined, 'p1', 'vital-signs', { focus: [{ reference: focus }] }));
        const focuses = ['Binary/b-in', 'Binary/b-out', 'Observation/o1', 'Observation/o2'];
        const all = Promise.all([...focuses, ...focuses].map(async (f) => [f, (await refer(f)).status]));
        const answers = await Promise.race([all, Bun.sleep(30_000).then(() => 'waited 30 s')]);
        const expected = [['Binary/b-in', 201], ['Binary/b-out', 422], ['Observation/o1', 201], ['Observation/o2', 422]];
        expect(answers).toEqual([...expected, ...expected]);
        // The reads agree.
        expect(await Promise.all(focuses.map(async (f) => (await t.request(`${t.fhir()}/${f}`, fhirInit(token, 'GET'))).status))).toEqual([200, 403, 200, 403]);
        // Binaries written at once by the admin: the Subscription is notified of the one in its owner's reach, judged in each write.
        const writes = await Promise.race([
          Promise.all(Array.from({ length: 8 }, (_, i) => put(binary(`nb${i}`, i % 2 ? 'Provenance/pv2' : 'Provenance/pv')))),
          Bun.sleep(30_000).then(() => 'waited 30 s'),
        ]);
        expect(writes).toEqual(Array.from({ length: 8 }, () => 201));
        for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
        const sent = hook.got.filter((b) => b !== '').map((b) => (JSON.parse(b) as Json).id as string).sort();
        expect(sent).toEqual(['nb0', 'nb2', 'nb4', 'nb6']);
      } finally {
        hook.stop();
        await t.close();
      }
    }, 90_000);

    test('writes at once referring to the same records in opposite orders all answer 201', async () => {
      const db = await target.migrated();
      const t = await createTestApp({
        store: target.kind === 'postgres' ? createPostgresStore(db.url, { max: 2 }) : db.open(),
        env: { CINDER_REFERENTIAL_INTEGRITY: 'on' },
      });
      try {
        const admin = await t.token();
        const put = async (r: Json) => (await t.request(`${t.fhir()}/${r.resourceType}/${r.id}`, fhirInit(admin, 'PUT', r))).status;
        for (const r of [{ resourceType: 'Patient', id: 'p1' }, observation('oa', 'p1', 'laboratory'), observation('ob', 'p1', 'laboratory'), observation('oc', 'p1', 'laboratory')]) {
          expect(await put(r)).toBe(201);
        }
        const token = await craftToken(t, 'launch/patient patient/Patient.rs patient/Observation.crs', { patient: 'p1' });
        const refer = (focus: string[]) => t.request(`${t.fhir()}/Observation`, fhirInit(token, 'POST', observation(undefined, 'p1', 'vital-signs', { focus: focus.map((reference) => ({ reference })) })));
        const orders = [['Observation/oa', 'Observation/ob', 'Observation/oc'], ['Observation/oc', 'Observation/ob', 'Observation/oa']];
        const statuses = await Promise.race([
          Promise.all(Array.from({ length: 16 }, (_, i) => Promise.resolve(refer(orders[i % 2]!)).then(async (r: Response) => (r.status === 201 ? 201 : `${r.status} ${await r.text()}`)))),
          Bun.sleep(60_000).then(() => 'waited 60 s'),
        ]);
        expect(statuses).toEqual(Array.from({ length: 16 }, () => 201));
      } finally {
        await t.close();
      }
    }, 120_000);
  });
}
