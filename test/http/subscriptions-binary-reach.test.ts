/**
 * A Subscription on Binary whose owner's reach through a Binary's securityContext is limited (a patient-context
 * token's: src/fhir/subscriptions/hub.ts, through search's rowsInReach): it is told only of the Binaries whose
 * securityContext its owner may read (none, its patient, or a resource of its patient's compartment, written in
 * the same transaction too), never of another patient's; on both databases, delivered to a rest-hook receiver.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { receiver } from '../helpers/rest-hook.ts';

const binary = (id: string, context?: string): Json => ({ resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', ...(context ? { securityContext: { reference: context } } : {}) });

await eachStore((kind, fresh) => {
  describe(`Subscriptions on Binary and their owner's reach (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    let hook: ReturnType<typeof receiver>;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_SUBSCRIPTION_ALLOW_PRIVATE: 'true' } });
      admin = fhirClient(t, await t.token());
      for (const id of ['pa', 'pb']) await admin.put200({ resourceType: 'Patient', id });
      for (const [id, patient] of [['oa', 'pa'], ['ob', 'pb']]) {
        await admin.put200({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, subject: { reference: `Patient/${patient}` } });
      }
      hook = receiver();
    });
    afterAll(async () => {
      hook.stop();
      await t.close();
    });

    /** The ids of the Binaries the receiver was sent since the last call (each notification carries the resource). */
    const notified = async () => {
      for (let i = 0; i < 20 && (await t.app.subscriptions.runOnce()) > 0; i++);
      return hook.got.splice(0).filter((body) => body !== '').map((body) => (JSON.parse(body) as Json).id as string).sort();
    };

    test("a patient-context owner is notified only of the Binaries whose securityContext it may read", async () => {
      const owner = fhirClient(t, await craftToken(t, 'launch/patient patient/Binary.rs patient/Patient.rs patient/Observation.rs user/Subscription.cruds', { patient: 'pa' }));
      const sub = await owner.create({
        resourceType: 'Subscription', status: 'requested', reason: 'files', criteria: 'Binary', channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json' },
      });
      expect(sub.status).toBe('active');
      await notified();
      for (const b of [binary('none'), binary('mine', 'Patient/pa'), binary('theirs', 'Patient/pb'), binary('my-obs', 'Observation/oa'), binary('their-obs', 'Observation/ob'), binary('gone', 'Patient/nobody')]) {
        await admin.put200(b);
      }
      // A context written in the same transaction as the Binary is read there.
      const tx = await admin.post('', {
        resourceType: 'Bundle', type: 'transaction', entry: [
          { resource: { resourceType: 'Observation', id: 'oa2', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pa' } }, request: { method: 'PUT', url: 'Observation/oa2' } },
          { resource: { resourceType: 'Observation', id: 'ob2', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/pb' } }, request: { method: 'PUT', url: 'Observation/ob2' } },
          { resource: binary('tx-mine', 'Observation/oa2'), request: { method: 'PUT', url: 'Binary/tx-mine' } },
          { resource: binary('tx-theirs', 'Observation/ob2'), request: { method: 'PUT', url: 'Binary/tx-theirs' } },
        ],
      });
      expect(tx.status).toBe(200);
      expect(await notified()).toEqual(['mine', 'my-obs', 'none', 'tx-mine']);
      // Those its owner reads.
      const ids = ['none', 'mine', 'theirs', 'my-obs', 'their-obs', 'gone', 'tx-mine', 'tx-theirs'];
      const reads = await Promise.all(ids.map(async (id) => [id, (await owner.get(`Binary/${id}`)).status]));
      expect(reads.filter(([, status]) => status === 200).map(([id]) => id).sort()).toEqual(['mine', 'my-obs', 'none', 'tx-mine']);
      // A Binary moved into its owner's reach notifies; one moved out of it does not.
      await admin.put200(binary('theirs', 'Patient/pa'));
      await admin.put200(binary('mine', 'Patient/pb'));
      expect(await notified()).toEqual(['theirs']);
      // A system owner is told of every one.
      const all = await admin.create({
        resourceType: 'Subscription', status: 'requested', reason: 'all files', criteria: 'Binary', channel: { type: 'rest-hook', endpoint: hook.url, payload: 'application/fhir+json' },
      });
      await admin.put200(binary('their-obs', 'Observation/ob2'));
      expect(await notified()).toEqual(['their-obs']);
      for (const s of [sub, all]) expect((await admin.del(`Subscription/${s.id}`)).status).toBeLessThan(300);
    });
  });
});
