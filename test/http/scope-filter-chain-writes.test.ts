/**
 * SMART v2 create and update scope filters that read other resources (`system/Observation.cu?subject:Patient.name=x`):
 * a write is admitted when its new content meets the filter, the chain looked up inside the write's transaction (after
 * a transaction's other entries are written), as a read's filter looks it up; it was refused whatever it held. On both
 * databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const obs = (subject: string, extra: Json = {}): Json => ({ resourceType: 'Observation', status: 'final', code: { text: 'weight' }, subject: { reference: subject }, ...extra });
const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };

await eachStore((kind, fresh) => {
  describe(`scope filters with chains on writes (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    let w: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'xena', name: [{ family: 'Xena' }] });
      await admin.put200({ resourceType: 'Patient', id: 'yan', name: [{ family: 'Yan' }] });
      const scopes = ['system/Observation.cruds?subject:Patient.name=Xena', 'system/Patient.rs'];
      w = fhirClient(t, await t.tokenFor('t1', scopes, scopes.join(' ')));
    });
    afterAll(() => t.close());

    test('a create, update, conditional create and PATCH meeting the chained filter are written; one leaving it is a 403', async () => {
      const created = await w.post('Observation', obs('Patient/xena'));
      expect(created.status).toBe(201);
      const id = ((await created.json()) as Json).id as string;
      await expectOutcome(await w.post('Observation', obs('Patient/yan')), 403);
      // An absolute reference under the tenant's base is the same Patient.
      expect((await w.post('Observation', obs(`${w.base}/Patient/xena`))).status).toBe(201);

      expect((await w.put(`Observation/${id}`, obs('Patient/xena', { id, status: 'amended' }))).status).toBe(200);
      await expectOutcome(await w.put(`Observation/${id}`, obs('Patient/yan', { id })), 403);
      expect((await w.put('Observation/by-put', obs('Patient/xena', { id: 'by-put' }))).status).toBe(201);

      const conditional = await w.post('Observation', obs('Patient/xena', { identifier: [{ system: 'urn:o', value: '1' }] }), { 'If-None-Exist': 'identifier=urn:o|1' });
      expect(conditional.status).toBe(201);

      const patch = (to: string) => w.call('PATCH', `Observation/${id}`, JSON.stringify([{ op: 'replace', path: '/subject/reference', value: to }]), JSON_PATCH);
      await expectOutcome(await patch('Patient/yan'), 403);
      const kept = await w.call('PATCH', `Observation/${id}`, JSON.stringify([{ op: 'replace', path: '/status', value: 'corrected' }]), JSON_PATCH);
      expect(kept.status).toBe(200);
      const stored = (await (await admin.get(`Observation/${id}`)).json()) as Json;
      expect(stored).toMatchObject({ status: 'corrected', subject: { reference: 'Patient/xena' } });
    });

    test("a transaction's and a batch's entries are judged as the single writes are", async () => {
      const tx = await w.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'POST', url: 'Observation' }, resource: obs('Patient/xena') }] });
      expect(tx.status).toBe(200);
      expect(((await tx.json()) as Json).entry[0].response.status).toStartWith('201');
      await expectOutcome(await w.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
        { request: { method: 'POST', url: 'Observation' }, resource: obs('Patient/xena') },
        { request: { method: 'POST', url: 'Observation' }, resource: obs('Patient/yan') },
      ] }), 403);
      const batch = (await (await w.post('', { resourceType: 'Bundle', type: 'batch', entry: [
        { request: { method: 'POST', url: 'Observation' }, resource: obs('Patient/xena') },
        { request: { method: 'POST', url: 'Observation' }, resource: obs('Patient/yan') },
      ] })).json()) as Json;
      expect(batch.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '403']);
    });

    test('a Patient the same transaction writes is looked up as written', async () => {
      const scopes = ['system/Observation.c?subject:Patient.name=Xena', 'system/Patient.crs'];
      const both = fhirClient(t, await t.tokenFor('t1', scopes, scopes.join(' ')));
      const uuid = 'urn:uuid:5c1d7a4e-0d7b-4f7e-9a51-2f6f2f0d1c11';
      const entries = (family: string) => [
        { request: { method: 'POST', url: 'Observation' }, resource: obs(uuid) },
        { fullUrl: uuid, request: { method: 'POST', url: 'Patient' }, resource: { resourceType: 'Patient', name: [{ family }] } },
      ];
      const res = await both.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries('Xena') });
      expect(res.status).toBe(200);
      await expectOutcome(await both.post('', { resourceType: 'Bundle', type: 'transaction', entry: entries('Zed') }), 403);
    });
  });
});
