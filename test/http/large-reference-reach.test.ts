/**
 * Referential integrity (CINDER_REFERENTIAL_INTEGRITY=on) for a patient-context token judges a large target of a
 * compartment type by the compartment index, not by reading and parsing its stored text: a reference to the patient's
 * own DocumentReference of MiBs is admitted, another patient's is refused as a missing one, in a create and in a
 * transaction that writes the target itself, reading none of those texts (counted: a work count, not a timing). On
 * both databases, through the REST API.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { countingLargeReads, type LargeReads } from '../helpers/large-reads.ts';

/** 2 MiB of base64 that compresses to nothing smaller (a multiple of 3 bytes: no padding). */
const DATA = Buffer.from(crypto.getRandomValues(new Uint8Array(1536 * 1024)).buffer as ArrayBuffer).toString('base64');
const LARGE = 1 << 20;

const document = (id: string, patient: string): Json => ({
  resourceType: 'DocumentReference', id, status: 'current', subject: { reference: `Patient/${patient}` },
  content: [{ attachment: { contentType: 'application/pdf', data: DATA } }],
});
const observation = (document: string): Json => ({
  resourceType: 'Observation', status: 'final', code: { text: 'from a document' }, subject: { reference: 'Patient/pa' },
  derivedFrom: [{ reference: `DocumentReference/${document}` }],
});

await eachStore((kind, fresh) => {
  describe(`a patient-context token's references to large resources (${kind})`, () => {
    let t: TestApp;
    let reads: LargeReads;
    let admin: FhirClient;
    let patient: FhirClient;

    beforeAll(async () => {
      reads = countingLargeReads(await fresh(), LARGE);
      t = await createTestApp({ store: reads.store, env: { CINDER_REFERENTIAL_INTEGRITY: 'on' } });
      admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'pa' });
      await admin.put200({ resourceType: 'Patient', id: 'pb' });
      await admin.put200(document('dpa', 'pa'));
      await admin.put200(document('dpb', 'pb'));
      patient = fhirClient(t, await craftToken(t, 'patient/*.cruds', { patient: 'pa' }));
    });
    afterAll(() => t.close());

    test("its own patient's DocumentReference is admitted and another patient's refused as missing, neither text read", async () => {
      let res: Response | undefined;
      expect(await reads.during(async () => (res = await patient.post('Observation', observation('dpa'))))).toBe(0);
      expect(res!.status).toBe(201);
      let refused: Json = {};
      expect(await reads.during(async () => {
        res = await patient.post('Observation', observation('dpb'));
        refused = (await res.json()) as Json;
      })).toBe(0);
      expect(res!.status).toBe(422);
      expect(refused.issue.map((i: Json) => [i.code, i.expression, i.diagnostics])).toEqual([[
        'not-found', ['Observation.derivedFrom[0].reference'],
        "Observation.derivedFrom[0].reference: 'DocumentReference/dpb' refers to DocumentReference/dpb, which does not exist or is outside what the access token may read",
      ]]);
    });

    test('a transaction that writes the large target itself finds it in its compartment without reading it back', async () => {
      const bundle = {
        resourceType: 'Bundle', type: 'transaction', entry: [
          { resource: document('dnew', 'pa'), request: { method: 'PUT', url: 'DocumentReference/dnew' } },
          { resource: observation('dnew'), request: { method: 'POST', url: 'Observation' } },
        ],
      };
      let res: Response | undefined;
      let body: Json = {};
      expect(await reads.during(async () => {
        res = await patient.post(patient.base, bundle);
        body = (await res.json()) as Json;
      })).toBe(0);
      expect(res!.status).toBe(200);
      expect(body.entry.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '201']);
      // A deleted target is missing, as before.
      expect((await admin.del('DocumentReference/dnew')).status).toBe(200);
      expect((await patient.post('Observation', observation('dnew'))).status).toBe(422);
    });
  });
});
