/**
 * What a write's transaction judges in reach agrees with what a read by the same token answers, on both
 * databases (src/fhir/crud.ts referenceReach, src/fhir/subscriptions/hub.ts): for each target, a read is
 * allowed ⇔ a reference to it passes referential integrity ⇔ a Subscription of that token is notified of it.
 *  - A patient's token: a Provenance naming an earlier version of the patient's record (`Observation/o1/_history/1`,
 *    o1 at version 2 now) is in reach, one naming a version that was another patient's is not; a Binary whose
 *    securityContext is such a Provenance is judged by the Provenance's targets, not by its compartment alone.
 *  - A scope filter with a chain (`Observation.rs?subject:Patient.name=taylor`) and a filter of Binary: the chain
 *    is searched in the write's transaction, and the Binary's own filter counts, as on a read.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { receiver } from '../helpers/rest-hook.ts';

const CATEGORY = 'http://terminology.hl7.org/CodeSystem/observation-category';
const observation = (id: string, patient: string, category = 'vital-signs', extra: Json = {}): Json => ({
  resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${patient}` },
  category: [{ coding: [{ system: CATEGORY, code: category }] }], ...extra,
});
const provenance = (id: string, targets: string[]): Json => ({
  resourceType: 'Provenance', id, target: targets.map((reference) => ({ reference })), recorded: '2024-01-02T03:04:05Z',
  agent: [{ who: { reference: 'Practitioner/dr1' } }],
});
const binary = (id: string, context?: string): Json => ({
  resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', ...(context ? { securityContext: { reference: context } } : {}),
});
const subscription = (criteria: string, endpoint: string): Json => ({
  resourceType: 'Subscription', status: 'requested', reason: criteria, criteria, channel: { type: 'rest-hook', endpoint, payload: 'application/fhir+json' },
});

/** One row of a table: a target, and whether a read of it by the token is allowed (so too a reference, a notification). */
type Case = [target: string, readable: boolean];

await eachStore((kind, fresh) => {
  describe(`a write judges a target in reach as a read does (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    // One receiver per test: each test's subscriptions end with it.
    let hook: ReturnType<typeof receiver>;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_REFERENTIAL_INTEGRITY: 'on', CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      admin = fhirClient(t, await t.token());
    });
    beforeEach(() => {
      hook = receiver();
    });
    afterEach(async () => {
      for (const e of (await admin.search('Subscription')).entry ?? []) expect((await admin.del(`Subscription/${e.resource.id}`)).status).toBeLessThan(300);
      hook.stop();
    });
    afterAll(() => t.close());

    /** The `Type/id` of the resources the receiver was sent since the last call (each notification carries the resource). */
    const notified = async () => {
      for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
      return hook.got.splice(0).filter((body) => body !== '').map((body) => JSON.parse(body) as Json).map((r) => `${r.resourceType}/${r.id}`).sort();
    };

    /** For each case, [target, read allowed, reference allowed, notified]; all three agree with `readable`. */
    const table = async (api: FhirClient, cases: Case[], refer: (target: string, i: number) => Promise<Response> | Response, sent: string[]) => {
      const rows: [string, boolean, boolean, boolean][] = [];
      for (const [i, [target]] of cases.entries()) {
        const read = await api.get(target);
        expect({ target, status: read.status }).toEqual({ target, status: read.status === 200 ? 200 : 403 });
        const ref = await refer(target, i);
        if (ref.status !== 201) {
          const outcome = await expectOutcome(ref, 422, 'not-found');
          expect(outcome.issue[0].diagnostics).toContain('which does not exist or is outside what the access token may read');
        }
        rows.push([target, read.status === 200, ref.status === 201, sent.includes(target)]);
      }
      expect(rows).toEqual(cases.map(([target, readable]) => [target, readable, readable, readable]));
    };

    test("a patient's token: a Provenance naming an earlier version, and a Binary whose securityContext is a Provenance", async () => {
      for (const r of [
        { resourceType: 'Patient', id: 'p1' }, { resourceType: 'Patient', id: 'p2' }, { resourceType: 'Practitioner', id: 'dr1' },
        observation('o1', 'p1'), observation('o2', 'p2'), observation('mv', 'p2'),
      ]) await admin.put200(r);
      // o1 stays p1's at version 2; mv was p2's at version 1 and is p1's at version 2.
      for (const r of [observation('o1', 'p1', 'laboratory'), observation('mv', 'p1')]) await admin.put200(r);
      const api = fhirClient(t, await craftToken(t, 'launch/patient patient/*.cruds user/Subscription.cruds', { patient: 'p1' }));
      for (const criteria of ['Provenance', 'Binary']) expect((await api.create(subscription(criteria, hook.url))).status).toBe('active');
      await notified();
      for (const r of [
        provenance('pv', ['Observation/o1/_history/1']), provenance('pv-now', ['Observation/o1']),
        provenance('pv-mv1', ['Observation/mv/_history/1']), provenance('pv-o2', ['Observation/o2']),
        binary('b-pv', 'Provenance/pv'), binary('b-pv-now', 'Provenance/pv-now'),
        binary('b-pv-mv1', 'Provenance/pv-mv1'), binary('b-pv-o2', 'Provenance/pv-o2'),
      ]) await admin.put200(r);
      const sent = await notified();
      const cases: Case[] = [
        ['Provenance/pv', true], ['Provenance/pv-now', true], ['Provenance/pv-mv1', false], ['Provenance/pv-o2', false],
        ['Binary/b-pv', true], ['Binary/b-pv-now', true], ['Binary/b-pv-mv1', false], ['Binary/b-pv-o2', false],
      ];
      await table(api, cases, (target, i) => api.post('Observation', observation(`f${i}`, 'p1', 'vital-signs', { id: undefined, focus: [{ reference: target }] })), sent);
    });

    test('a scope filter with a chain, and a filter of Binary', async () => {
      for (const r of [
        { resourceType: 'Patient', id: 'pt', name: [{ family: 'Taylor', given: ['Sam'] }] },
        { resourceType: 'Patient', id: 'pr', name: [{ family: 'Rivera', given: ['Alex'] }] },
      ]) await admin.put200(r);
      const api = fhirClient(t, await craftToken(t, [
        'system/Patient.rs', 'system/Observation.rs?subject:Patient.name=taylor', 'system/Binary.rs?_id=bin-ok',
        'system/Basic.c', 'system/Subscription.cruds',
      ].join(' ')));
      for (const criteria of ['Observation', 'Binary']) expect((await api.create(subscription(criteria, hook.url))).status).toBe('active');
      await notified();
      for (const r of [observation('ot', 'pt'), observation('or', 'pr'), binary('bin-ok'), binary('bin-other')]) await admin.put200(r);
      const sent = await notified();
      const cases: Case[] = [['Observation/ot', true], ['Observation/or', false], ['Binary/bin-ok', true], ['Binary/bin-other', false]];
      await table(api, cases, (target) => api.post('Basic', { resourceType: 'Basic', code: { text: 'note' }, subject: { reference: target } }), sent);
    });
  });
});
