/**
 * A patient's app uploading a file before it files it, on both databases. A token whose updates of Binary are bound to
 * a patient may not update or delete a stored Binary without a securityContext (nothing says whose it is:
 * src/fhir/crud.ts requireFiled), so the file such a token uploaded without a context was its own no longer: its app
 * could neither correct it, nor file it under the DocumentReference it wrote next, nor delete it after a failed
 * upload, while every other patient's token read it by its id. Content a patient-context token writes without a
 * context is filed under its patient (fileUnfiled), so it stays the patient's to write, and no other patient's to read.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const file = (data: string, extra: Json = {}): Json => ({ resourceType: 'Binary', contentType: 'text/plain', data: btoa(data), ...extra });
const doc = (binary: string) => ({ resourceType: 'DocumentReference', status: 'current', subject: { reference: 'Patient/pa' }, content: [{ attachment: { contentType: 'text/plain', url: binary } }] });

await eachStore((kind, fresh) => {
  describe(`a patient's app writes the file it uploaded without a context (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    let pa: FhirClient;
    let paToken: string;
    let pb: FhirClient;
    const stored = async (id: string) => (await (await admin.get(`Binary/${id}`, { Accept: 'application/fhir+json' })).json()) as Json;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = fhirClient(t, await t.token());
      for (const r of [{ resourceType: 'Patient', id: 'pa' }, { resourceType: 'Patient', id: 'pb' }]) await admin.put200(r);
      paToken = await craftToken(t, 'launch/patient patient/*.cruds', { patient: 'pa' });
      pa = fhirClient(t, paToken);
      pb = fhirClient(t, await craftToken(t, 'launch/patient patient/*.cruds', { patient: 'pb' }));
    });
    afterAll(() => t.close());

    test('it corrects the file, files it under its DocumentReference, and deletes it; another patient reads none of it', async () => {
      const created = await pa.post('Binary', file('draft'));
      expect(created.status).toBe(201);
      const id = ((await created.json()) as Json).id as string;
      expect((await stored(id)).securityContext).toEqual({ reference: 'Patient/pa' });
      await expectOutcome(await pb.get(`Binary/${id}`), 403, 'forbidden');
      expect((await pa.put(`Binary/${id}`, file('corrected', { id }))).status).toBe(200);
      expect(atob((await stored(id)).data)).toBe('corrected');
      const document = await pa.create(doc(`Binary/${id}`));
      expect((await pa.put(`Binary/${id}`, file('corrected', { id, securityContext: { reference: `DocumentReference/${document.id}` } }))).status).toBe(200);
      expect((await stored(id)).securityContext).toEqual({ reference: `DocumentReference/${document.id}` });
      // A patch taking the context away leaves it the patient's.
      const patch = [{ op: 'remove', path: '/securityContext' }];
      expect((await pa.call('PATCH', `Binary/${id}`, patch, { 'Content-Type': 'application/json-patch+json' })).status).toBe(200);
      expect((await stored(id)).securityContext).toEqual({ reference: 'Patient/pa' });
      await expectOutcome(await pb.put(`Binary/${id}`, file('hacked', { id })), 403, 'forbidden');
      expect((await pa.del(`Binary/${id}`)).status).toBe(200);
    });

    test('a native upload and a transaction entry are filed under the patient too', async () => {
      const native = await t.request(`${t.fhir()}/Binary`, { method: 'POST', headers: { Authorization: `Bearer ${paToken}`, 'Content-Type': 'application/pdf' }, body: 'pdf' });
      expect(native.status).toBe(201);
      const nativeId = (native.headers.get('location') ?? '').split('/Binary/')[1]!.split('/')[0]!;
      expect((await stored(nativeId)).securityContext).toEqual({ reference: 'Patient/pa' });
      const url = 'urn:uuid:5f1c2b3a-9d8e-4f7a-8b6c-1d2e3f4a5b6c';
      const tx = await pa.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
        { fullUrl: url, resource: file('scan'), request: { method: 'POST', url: 'Binary' } },
        { resource: doc(url), request: { method: 'POST', url: 'DocumentReference' } },
      ] });
      expect(tx.status).toBe(200);
      const txId = ((await tx.json()) as Json).entry[0].response.location.split('/Binary/')[1].split('/')[0];
      expect((await stored(txId)).securityContext).toEqual({ reference: 'Patient/pa' });
      expect((await pa.put(`Binary/${txId}`, file('rescan', { id: txId }))).status).toBe(200);
    });

    test('a context the token may not read is refused naming Binary.securityContext, alone and as a transaction entry', async () => {
      const other = { securityContext: { reference: 'Observation/not-stored' } };
      const alone = await expectOutcome(await pa.post('Binary', file('x', other)), 403, 'forbidden');
      expect(alone.issue[0].expression).toEqual(['Binary.securityContext']);
      const tx = await pa.post('', { resourceType: 'Bundle', type: 'transaction', entry: [
        { fullUrl: 'urn:uuid:0b9f6c1e-2d3a-4e5f-8a7b-9c0d1e2f3a4b', resource: file('x', other), request: { method: 'POST', url: 'Binary' } },
      ] });
      const inEntry = await expectOutcome(tx, 403, 'forbidden');
      expect(inEntry.issue[0].expression).toEqual(['Bundle.entry[0].resource.securityContext']);
    });

    test("a token that may not read its Patient uploads unfiled, as before; other tokens' uploads are left as sent", async () => {
      for (const scope of ['patient/Binary.cru', 'patient/Binary.cru patient/Patient.rs?gender=female']) {
        const narrow = fhirClient(t, await craftToken(t, `launch/patient ${scope}`, { patient: 'pa' }));
        const created = await narrow.create(file('narrow'));
        expect({ scope, context: (await stored(created.id)).securityContext }).toEqual({ scope, context: undefined });
        expect((await narrow.get(`Binary/${created.id}`)).status).toBe(200);
      }
      const staff = fhirClient(t, await craftToken(t, 'user/*.cruds'));
      expect((await stored((await staff.create(file('staff'))).id)).securityContext).toBeUndefined();
    });
  });
});
