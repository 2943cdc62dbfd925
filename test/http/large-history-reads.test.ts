/**
 * Instance `_history` of a large resource reads its current text only with the page: the resource is found by its
 * row (measured), and a patient-context token's reach of its current version is told by the compartment index, not by
 * reading and parsing that text again; older versions are judged on their content, as before. On both databases,
 * through the REST API; the stored texts of MiBs the store hands out are counted (a work count, not a timing), and the
 * versions shown and refused are asserted as before.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { countingLargeReads, type LargeReads } from '../helpers/large-reads.ts';

/** 2 MiB of base64 (a multiple of 3 bytes: no padding). */
const DATA = Buffer.from(crypto.getRandomValues(new Uint8Array(1536 * 1024)).buffer as ArrayBuffer).toString('base64');
const LARGE = 1 << 20;

const document = (patient: string, status = 'current'): Json => ({
  resourceType: 'DocumentReference', id: 'h', status, subject: { reference: `Patient/${patient}` },
  content: [{ attachment: { contentType: 'application/pdf', data: DATA } }],
});

await eachStore((kind, fresh) => {
  describe(`instance history of a large resource (${kind})`, () => {
    let t: TestApp;
    let reads: LargeReads;
    let admin: FhirClient;
    let patient: FhirClient;
    /** The status and the versions of the entries of `client`'s history of DocumentReference/h, with the large texts read. */
    const history = async (client: FhirClient) => {
      let res: Response | undefined;
      let body: Json = {};
      const large = await reads.during(async () => {
        res = await client.get('DocumentReference/h/_history');
        body = (await res.json()) as Json;
      });
      const versions = (body.entry ?? []).map((e: Json) => Number(/W\/"(\d+)"/.exec(e.response.etag)![1]));
      return { status: res!.status, versions, large, code: body.resourceType === 'OperationOutcome' ? body.issue[0].code : undefined };
    };

    beforeAll(async () => {
      reads = countingLargeReads(await fresh(), LARGE);
      t = await createTestApp({ store: reads.store });
      admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'pa' });
      await admin.put200({ resourceType: 'Patient', id: 'pb' });
      for (const status of ['current', 'superseded', 'current']) await admin.put200(document('pa', status));
      patient = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'pa' }));
    });
    afterAll(() => t.close());

    test('each version is read once, with the page, for a token that reads the type whole and for its patient', async () => {
      expect(await history(admin)).toEqual({ status: 200, versions: [3, 2, 1], large: 3, code: undefined });
      expect(await history(patient)).toEqual({ status: 200, versions: [3, 2, 1], large: 3, code: undefined });
    });

    test("a current version in another patient's compartment is refused without reading it; one back in the patient's shows the versions in reach", async () => {
      await admin.put200(document('pb'));
      expect(await history(patient)).toEqual({ status: 403, versions: [], large: 0, code: 'forbidden' });
      await admin.put200(document('pa', 'superseded'));
      // Version 4 (pb's) is read with the page and judged on its content, as before.
      expect(await history(patient)).toEqual({ status: 200, versions: [5, 3, 2, 1], large: 5, code: undefined });
      // Deleted: judged by the content it deleted (read by its version), as before.
      expect((await admin.del('DocumentReference/h')).status).toBe(200);
      expect(await history(patient)).toEqual({ status: 200, versions: [6, 5, 3, 2, 1], large: 6, code: undefined });
    });
  });
});
