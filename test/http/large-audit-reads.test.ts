/**
 * With CINDER_AUDIT=on, the AuditEvent of a request that read or wrote one large resource names the patients whose
 * compartment holds it from the compartment index, where it is the current version: the stored text is not read and
 * parsed again when the events are written. On both databases, through the REST API and the trail's flush; the texts
 * of MiBs given to JSON.parse while the events are written are counted (a work count, not a timing), and the events
 * asserted.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { largeParses } from '../helpers/large-reads.ts';

/** 2 MiB of base64 (a multiple of 3 bytes: no padding). */
const DATA = Buffer.from(crypto.getRandomValues(new Uint8Array(1536 * 1024)).buffer as ArrayBuffer).toString('base64');
const LARGE = 1 << 20;

const document = (id: string, status = 'current'): Json => ({
  resourceType: 'DocumentReference', id, status, subject: { reference: 'Patient/pa' },
  content: [{ attachment: { contentType: 'application/pdf', data: DATA } }],
});
const patientsOf = (e: Json): string[] => (e.entity ?? []).filter((x: Json) => x.role?.code === '1').map((x: Json) => x.what.reference);

await eachStore((kind, fresh) => {
  describe(`AuditEvents of requests on a large resource (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    /** The large texts parsed while the queued events are written. */
    const flushed = () => largeParses(LARGE, () => t.app.audit!.flush());
    /** The patients the AuditEvent of `subtype` on `what` names. */
    const named = async (subtype: string, what: string) => {
      const events = ((await admin.search(`AuditEvent?entity=${what}&_count=100`)).entry ?? []).map((e: Json) => e.resource as Json);
      return events.filter((e: Json) => e.subtype?.[0]?.code === subtype).map(patientsOf);
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_AUDIT: 'on' } });
      admin = fhirClient(t, await t.token());
      await admin.put200({ resourceType: 'Patient', id: 'pa' });
      await admin.put200(document('d'));
      await t.app.audit!.flush();
    });
    afterAll(() => t.close());

    test("a read's and an update's events name the resource's patient without its text parsed again", async () => {
      expect((await admin.get('DocumentReference/d')).status).toBe(200);
      expect(await flushed()).toBe(0);
      expect(await named('read', 'DocumentReference/d')).toEqual([['Patient/pa']]);
      expect((await admin.put('DocumentReference/d', document('d', 'superseded'))).status).toBe(200);
      expect(await flushed()).toBe(0);
      // Its create by PUT, in beforeAll, and this update.
      expect(await named('update', 'DocumentReference/d')).toEqual([['Patient/pa'], ['Patient/pa']]);
    });

    test("a version no longer current is read as before: a vread's event of version 1 after version 3 (a guard)", async () => {
      expect((await admin.put('DocumentReference/d', document('d'))).status).toBe(200);
      await t.app.audit!.flush();
      expect((await admin.get('DocumentReference/d/_history/1')).status).toBe(200);
      expect(await flushed()).toBe(1);
      expect(await named('vread', 'DocumentReference/d')).toEqual([['Patient/pa']]);
    });
  });
});
