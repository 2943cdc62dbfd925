/**
 * AuditEvents are in R4's Patient compartment (by `patient`), but `$everything` leaves them out unless its
 * `_type` names AuditEvent: the record of who read the patient's data (CINDER_AUDIT writes one per request)
 * is no part of the patient's record. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const audit = (id: string, patient: string): Json => ({
  resourceType: 'AuditEvent', id, type: { system: 'http://terminology.hl7.org/CodeSystem/audit-event-type', code: 'rest' },
  action: 'R', recorded: '2026-01-15T10:00:00Z', outcome: '0', agent: [{ requestor: true, who: { display: 'an app' } }],
  source: { observer: { display: 'cinder' } }, entity: [{ what: { reference: `Patient/${patient}` } }],
});
const ids = (b: Json) => ((b.entry ?? []) as Json[]).map((e) => `${e.resource.resourceType}/${e.resource.id}`);

await eachStore((kind, fresh) => {
  describe(`$everything and AuditEvents (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'p1' });
      await api.put200({ resourceType: 'Observation', id: 'o1', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/p1' } });
      await api.put200(audit('a1', 'p1'));
    });
    afterAll(() => t.close());

    test('the AuditEvent is in the compartment, not in $everything without _type', async () => {
      expect(ids(await api.search('Patient/p1/AuditEvent'))).toEqual(['AuditEvent/a1']);
      expect(ids(await api.search('Patient/p1/$everything'))).toEqual(['Patient/p1', 'Observation/o1']);
      expect(ids(await api.search('Patient/$everything'))).toEqual(['Patient/p1', 'Observation/o1']);
    });

    test('_type=AuditEvent asks for it', async () => {
      expect(ids(await api.search('Patient/p1/$everything?_type=AuditEvent'))).toEqual(['AuditEvent/a1']);
      expect(ids(await api.search('Patient/p1/$everything?_type=Patient,AuditEvent'))).toEqual(['Patient/p1', 'AuditEvent/a1']);
    });
  });
});
