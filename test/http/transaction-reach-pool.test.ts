/**
 * A transaction's conditional search of Provenance by a patient's token (or of Binary, whose reach runs through
 * their securityContext) is searched again at its commit (bundle-held-searches.ts), keeping the first matches in
 * the token's reach: through the transaction's own connection. On the pool, many such transactions at once each held
 * a connection and waited for another (PostgreSQL: 16 at once on a pool of 10 never answered). On both stores the
 * answers are those of the token's reach: a match in reach is found, one out of reach is not.
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { createTestApp, fhirInit, type TestApp } from '../helpers/app.ts';
import { craftToken, type Json } from '../helpers/fhir.ts';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const RECORDED = '2024-05-01T10:00:00Z';
/** A Provenance of `targets`: a patient's token writes one naming its Patient (in the compartment); others name a record alone. */
const provenance = (targets: string[], agent: string, id?: string) => ({
  resourceType: 'Provenance', ...(id && { id }), target: targets.map((reference) => ({ reference })), recorded: RECORDED, agent: [{ who: { reference: `Practitioner/${agent}` } }],
});
const OWN = ['Observation/o1', 'Patient/p1'];
/** A Binary filed under `context`, tagged `tag` (what a conditional create of it searches by: a create never meets an `_id`). */
const binary = (context: string, tag: string, id?: string) => ({
  resourceType: 'Binary', ...(id && { id }), meta: { tag: [{ system: 'urn:t', code: tag }] }, contentType: 'text/plain', securityContext: { reference: context }, data: 'aGVsbG8=',
});

for (const target of targets) {
  describe(`a patient token's transaction searching Provenance or Binary again at its commit (${target.kind})`, () => {
    /** A test app on a new database, its pool of `max` connections on PostgreSQL, with p1's and p2's records. */
    const app = async (max: number) => {
      const db = await target.migrated();
      const t = await createTestApp({ store: target.kind === 'postgres' ? createPostgresStore(db.url, { max }) : db.open() });
      const admin = await t.token();
      const put = async (r: Json) => (await t.request(`${t.fhir()}/${r.resourceType}/${r.id}`, fhirInit(admin, 'PUT', r))).status;
      const observation = (id: string, patient: string, value: number) => ({
        resourceType: 'Observation', id, status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] }, subject: { reference: `Patient/${patient}` },
        valueQuantity: { value, unit: 'mg/dL', system: 'http://unitsofmeasure.org', code: 'mg/dL' },
      });
      expect([
        await put({ resourceType: 'Patient', id: 'p1' }), await put({ resourceType: 'Patient', id: 'p2' }),
        await put(observation('o1', 'p1', 70)), await put(observation('o1', 'p1', 72)), await put(observation('o2', 'p2', 80)),
      ]).toEqual([201, 201, 201, 200, 201]);
      const token = await craftToken(t, 'patient/*.cruds', { patient: 'p1' });
      return { t, put, token };
    };
    /** A transaction of `entries` by `token`: its status and its entries' responses. */
    const transaction = async (t: TestApp, token: string, entries: Json[]) => {
      const res = await t.request(t.fhir(), fhirInit(token, 'POST', { resourceType: 'Bundle', type: 'transaction', entry: entries }));
      const body = (await res.json()) as Json;
      return { status: res.status, responses: res.status === 200 ? (body.entry as Json[]).map((e) => e.response) : body };
    };
    const create = (resource: Json, ifNoneExist: string) => ({ resource, request: { method: 'POST', url: resource.resourceType, ifNoneExist } });

    test('16 transactions at once, each a conditional create of Provenance, on a pool of 10: all answer (on PostgreSQL they waited for ever)', async () => {
      const { t, token } = await app(10);
      try {
        const all = Promise.all(Array.from({ length: 16 }, (_, n) => transaction(t, token, [create(provenance(OWN, `none${n}`), `agent=Practitioner/none${n}`)])));
        const answers = await Promise.race([all, Bun.sleep(20_000).then(() => 'waited 20 s')]);
        expect(answers).toEqual(Array.from({ length: 16 }, () => ({ status: 200, responses: [expect.objectContaining({ status: '201 Created' })] })));
      } finally {
        await t.close();
      }
    }, 60_000);

    test('the commit keeps what is in reach: a Provenance of the patient\'s record (at an earlier version too) and a Binary of it are found; another patient\'s are not', async () => {
      const { t, put, token } = await app(4);
      try {
        expect([
          await put(provenance(['Observation/o1'], 'known-in', 'prov-in')), await put(provenance(['Observation/o2'], 'known-out', 'prov-out')),
          await put(provenance(['Observation/o1/_history/1'], 'known-v1', 'prov-v1')), await put(provenance(['Observation/o2/_history/1'], 'known-v2', 'prov-v2')),
          await put(binary('Observation/o1', 'bin-in', 'bin-in')), await put(binary('Observation/o2', 'bin-out', 'bin-out')),
        ]).toEqual([201, 201, 201, 201, 201, 201]);
        const answer = await transaction(t, token, [
          create(provenance(OWN, 'known-in'), 'agent=Practitioner/known-in'),
          create(provenance(OWN, 'known-out'), 'agent=Practitioner/known-out'),
          create(provenance(OWN, 'known-v1'), 'agent=Practitioner/known-v1'),
          create(provenance(OWN, 'known-v2'), 'agent=Practitioner/known-v2'),
          create(binary('Observation/o1', 'bin-in'), '_tag=urn:t|bin-in'),
          create(binary('Observation/o1', 'bin-out'), '_tag=urn:t|bin-out'),
        ]);
        expect(answer.status).toBe(200);
        const responses = answer.responses as Json[];
        expect(responses.map((r) => r.status)).toEqual(['200 OK', '201 Created', '200 OK', '201 Created', '200 OK', '201 Created']);
        const located = responses.map((r) => (r.location as string).replace(`${t.fhir()}/`, '').replace(/\/_history\/\d+$/, ''));
        expect(located[0]).toBe('Provenance/prov-in');
        expect(located[2]).toBe('Provenance/prov-v1');
        expect(located[4]).toBe('Binary/bin-in');
        // Created anew: the other patient's matches were not found.
        for (const i of [1, 3]) expect(located[i]).not.toMatch(/^Provenance\/prov-(out|v2)$/);
        expect(located[5]).not.toBe('Binary/bin-out');
      } finally {
        await t.close();
      }
    }, 60_000);
  });
}
