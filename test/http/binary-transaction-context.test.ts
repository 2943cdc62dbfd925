/**
 * A patient's app uploading a document in one transaction, on both databases: a Binary filed (securityContext) under
 * the DocumentReference the same Bundle creates, by that entry's fullUrl, and the DocumentReference naming the Binary.
 * The Binary's context was read from the store before the Bundle's writes, where it did not exist yet, so every such
 * upload by a patient-context token was a 403. A context another entry writes is judged as that entry writes it
 * (src/fhir/bundle-ops.ts requireEntriesInReach); one of another patient, or a shared record, is still refused.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const BINARY = 'urn:uuid:6b0e3b7c-4a8f-4d2e-9c1a-0f5e2d7b3a91';
const DOC = 'urn:uuid:9d4c2a1e-7b3f-4e6a-8d5c-1a2b3c4d5e6f';
const doc = (patient: string) => ({
  resourceType: 'DocumentReference', status: 'current', subject: { reference: `Patient/${patient}` },
  content: [{ attachment: { contentType: 'text/plain', url: BINARY } }],
});
const upload = (context: string, document: Json, method = 'POST', url = 'DocumentReference'): Json => ({
  resourceType: 'Bundle', type: 'transaction',
  entry: [
    { fullUrl: BINARY, resource: { resourceType: 'Binary', contentType: 'text/plain', data: btoa('my scan'), securityContext: { reference: context } }, request: { method: 'POST', url: 'Binary' } },
    { fullUrl: DOC, resource: document, request: { method, url } },
  ],
});

await eachStore((kind, fresh) => {
  describe(`a transaction files a Binary under the DocumentReference it creates (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    let pa: FhirClient;
    const count = async (type: string) => (await admin.search(`${type}?_summary=count`)).total as number;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      admin = fhirClient(t, await t.token());
      for (const r of [{ resourceType: 'Patient', id: 'pa' }, { resourceType: 'Patient', id: 'pb' }, { resourceType: 'Organization', id: 'clinic', name: 'Clinic' }]) await admin.put200(r);
      await admin.put200({ ...doc('pb'), id: 'doc-b', content: [{ attachment: { url: 'Binary/none' } }] });
      pa = fhirClient(t, await craftToken(t, 'launch/patient patient/*.cruds', { patient: 'pa' }));
    });
    afterAll(() => t.close());

    test("a patient's token uploads the Binary and its DocumentReference together, the Binary filed under it", async () => {
      const res = await pa.post('', upload(DOC, doc('pa')));
      expect(res.status).toBe(200);
      const [binary, document] = ((await res.json()) as Json).entry.map((e: Json) => e.response.location.split('/_history')[0].slice(t.fhir().length + 1));
      const stored = (await (await pa.get(binary, { Accept: 'application/fhir+json' })).json()) as Json;
      expect(stored.securityContext.reference).toBe(document);
      expect(((await (await pa.get(document)).json()) as Json).content[0].attachment.url).toBe(binary);
      // The entries in the other order too.
      const reversed = upload(DOC, doc('pa'));
      reversed.entry.reverse();
      expect((await pa.post('', reversed)).status).toBe(200);
    });

    test("one filed under another patient's DocumentReference, or under a shared record, is still refused and writes nothing", async () => {
      const [binaries, documents] = [await count('Binary'), await count('DocumentReference')];
      await expectOutcome(await pa.post('', upload(DOC, doc('pb'))), 403, 'forbidden');
      // An entry rewriting pb's stored DocumentReference as pa's does not make it pa's to file under.
      await expectOutcome(await pa.post('', upload(DOC, { ...doc('pa'), id: 'doc-b' }, 'PUT', 'DocumentReference/doc-b')), 403, 'forbidden');
      await expectOutcome(await pa.post('', upload(DOC, { resourceType: 'Organization', name: 'Mine' }, 'POST', 'Organization')), 403, 'forbidden');
      expect([await count('Binary'), await count('DocumentReference')]).toEqual([binaries, documents]);
    });
  });
});
