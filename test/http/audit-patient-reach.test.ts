/**
 * AuditEvents under a patient's token, on both databases. An AuditEvent is in the compartment of every patient it
 * names: a clinician's search of `patient=pa,pb` or a transaction writing both patients' records names pa and pb, the
 * ids of pb's records and (base64 in `entity.query`) the query searched. pa's token read such events whole, and so
 * learnt of pb, pb's records and what was searched of them. A patient-context scope reaches an AuditEvent only when
 * every patient it names is the patient in context (src/auth/scopes.ts ONE_PATIENTS), on every path that reads.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const patientsOf = (e: Json): string[] => (e.entity ?? []).filter((x: Json) => x.role?.code === '1').map((x: Json) => x.what.reference);
const text = (e: Json): string => JSON.stringify(e) + (e.entity ?? []).map((x: Json) => (x.query ? Buffer.from(x.query, 'base64').toString() : '')).join(' ');
const observation = (id: string, patient: string) => ({ resourceType: 'Observation', id, status: 'final', code: { text: id }, subject: { reference: `Patient/${patient}` } });

await eachStore((kind, fresh) => {
  describe(`AuditEvents naming other patients are out of a patient's reach (${kind})`, () => {
    let t: TestApp;
    let admin: FhirClient;
    let pa: FhirClient;
    let paToken: string;
    /** The AuditEvents naming both patients, as the operator sees them. */
    let both: Json[];

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_AUDIT: 'on' } });
      admin = fhirClient(t, await t.token());
      for (const r of [{ resourceType: 'Patient', id: 'pa' }, { resourceType: 'Patient', id: 'pb' }, observation('oa', 'pa'), observation('ob', 'pb')]) await admin.put200(r);
      // A clinician's search of both patients, a read of each, and a transaction writing both patients' records.
      expect((await admin.get('Observation?patient=pa,pb&code:text=pb-secret-search')).status).toBe(200);
      expect((await admin.get('Patient/pa')).status).toBe(200);
      expect((await admin.get('Patient/pb')).status).toBe(200);
      const tx = await admin.post('', {
        resourceType: 'Bundle', type: 'transaction',
        entry: [observation('oa', 'pa'), observation('ob', 'pb')].map((resource) => ({ resource, request: { method: 'PUT', url: `Observation/${resource.id}` } })),
      });
      expect(tx.status).toBe(200);
      await t.app.audit!.flush();
      const all = (await admin.search('AuditEvent?patient=pa&_count=1000')).entry.map((e: Json) => e.resource);
      both = all.filter((e: Json) => patientsOf(e).includes('Patient/pb'));
      // The search and the transaction (its own event and its entries' when the Bundle is small).
      expect(both.map((e) => e.subtype[0].code)).toEqual(expect.arrayContaining(['search', 'transaction']));
      paToken = await craftToken(t, 'launch/patient patient/*.rs', { patient: 'pa' });
      pa = fhirClient(t, paToken);
    }, 60_000);
    afterAll(() => t.close());

    test("a search, a compartment search and $everything of AuditEvent find only those naming the patient alone", async () => {
      for (const query of ['AuditEvent?_count=1000', 'Patient/pa/AuditEvent?_count=1000', 'Patient/pa/$everything?_type=AuditEvent&_count=1000', 'AuditEvent?_id=' + both.map((e) => e.id).join(',')]) {
        const found = ((await pa.search(query)).entry ?? []).map((e: Json) => e.resource);
        for (const e of found) {
          expect({ query, patients: patientsOf(e) }).toEqual({ query, patients: ['Patient/pa'] });
          expect(text(e)).not.toContain('pb');
        }
        if (!query.includes('_id=')) expect(found.some((e: Json) => e.subtype?.[0]?.code === 'read')).toBe(true);
      }
      expect((await pa.search('AuditEvent?_summary=count')).total).toBe((await pa.search('AuditEvent?_count=1000')).entry.length);
    });

    test('a read, a vread and a history of one naming another patient are refused; includes leave it out', async () => {
      for (const e of both) {
        await expectOutcome(await pa.get(`AuditEvent/${e.id}`), 403, 'forbidden');
        await expectOutcome(await pa.get(`AuditEvent/${e.id}/_history/1`), 403, 'forbidden');
        await expectOutcome(await pa.get(`AuditEvent/${e.id}/_history`), 403, 'forbidden');
      }
      const included = ((await pa.search('Patient?_id=pa&_revinclude=AuditEvent:patient&_count=1000')).entry ?? []).filter((e: Json) => e.search.mode === 'include');
      expect(included.length).toBeGreaterThan(0);
      for (const e of included) expect(patientsOf(e.resource)).toEqual(['Patient/pa']);
    });

    test("a patient's export of AuditEvent holds only those naming the patient alone", async () => {
      const manifest = await finish(t, paToken, await kickOff(t, paToken, '/Patient/$export?_type=AuditEvent'));
      const files = await download(t, paToken, manifest.output);
      expect((files.AuditEvent ?? []).length).toBeGreaterThan(0);
      for (const e of files.AuditEvent ?? []) {
        expect(patientsOf(e as Json)).toEqual(['Patient/pa']);
        expect(text(e as Json)).not.toContain('pb');
      }
    });

    test('a user/ or system/ scope on AuditEvent, or one beside the patient/ scope, still reads them all', async () => {
      for (const token of [await craftToken(t, 'user/AuditEvent.rs'), await craftToken(t, 'launch/patient patient/*.rs user/AuditEvent.rs', { patient: 'pa' })]) {
        const api = fhirClient(t, token);
        for (const e of both) expect((await api.get(`AuditEvent/${e.id}`)).status).toBe(200);
      }
    });
  });
});
