/**
 * The audit trail's memory is bounded by what it keeps, responses included (src/audit/trail.ts keepResponse):
 * a transaction's or batch's response text was kept until the flush whatever its size, only its request counted
 * against the 32 MiB bound, so concurrent large responses all stayed in memory until the timer's flush. Past the
 * bound, a response is reduced at once to what its AuditEvents need and the queue is flushed without waiting for
 * the timer; no event is lost. And a Bundle's event names the patient of every resource it touched, not of its
 * first 100 alone: their versions are read by the lot (ResourceRepo.vreadMany).
 */
import { afterAll, describe, expect, test } from 'bun:test';
import { createTestApp } from '../helpers/app.ts';
import { fhirClient, type Json } from '../helpers/fhir.ts';
import { storeTargets } from '../helpers/stores.ts';

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

const subtypeOf = (e: Json) => e.subtype?.[0]?.code as string;
const whats = (e: Json) => (e.entity ?? []).filter((x: Json) => x.role?.code === '4').map((x: Json) => x.what.reference);
const patientsOf = (e: Json) => (e.entity ?? []).filter((x: Json) => x.role?.code === '1').map((x: Json) => x.what.reference);

for (const target of targets) {
  describe(`the audit trail's kept responses, on ${target.kind}`, () => {
    test('concurrent batches whose responses pass the bound are flushed early, each entry still audited', async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      // The timer would flush a minute later: only the bound flushes early.
      const t = await createTestApp({ store, env: { CINDER_AUDIT: 'on', CINDER_AUDIT_FLUSH_MS: '60000' } });
      try {
        const api = fhirClient(t, await t.token());
        // A Patient of about 1 MiB: a batch reading it 20 times answers with a response of about 20 MiB, from a request of 1 KiB.
        const big = { resourceType: 'Patient', id: 'big', name: [{ family: 'Lee', given: ['Ann'] }], address: [{ text: 'x'.repeat(1 << 20) }] };
        expect((await api.put('Patient/big', big)).status).toBe(201);
        await t.app.audit!.flush();
        const written = t.app.audit!.counts.written;
        const batch = { resourceType: 'Bundle', type: 'batch', entry: Array.from({ length: 20 }, () => ({ request: { method: 'GET', url: 'Patient/big' } })) };
        const sent = await Promise.all([api.call('POST', '', batch), api.call('POST', '', batch)]);
        expect(sent.map((r) => r.status)).toEqual([200, 200]);
        await Promise.all(sent.map((r) => r.text()));
        // 40 MiB of responses: the second is past the 32 MiB bound, and the queue is written without waiting for the timer.
        const deadline = Date.now() + 20_000;
        while (t.app.audit!.counts.written === written && Date.now() < deadline) await Bun.sleep(50);
        expect(t.app.audit!.counts.written).toBeGreaterThan(written);
        await t.app.audit!.flush();
        expect(t.app.audit!.counts).toMatchObject({ dropped: 0, failed: 0 });
        const all = ((await api.search('AuditEvent?_count=1000')).entry ?? []).map((e: Json) => e.resource);
        const batches = all.filter((e: Json) => subtypeOf(e) === 'batch');
        const reads = all.filter((e: Json) => subtypeOf(e) === 'read');
        // Each batch is one event (its entries audited each), and each of its 40 reads names the version read and its patient.
        expect(batches.map((e: Json) => whats(e))).toEqual([[], []]);
        expect(reads).toHaveLength(40);
        expect(new Set(reads.map((e: Json) => JSON.stringify([whats(e), patientsOf(e)])))).toEqual(new Set([JSON.stringify([['Patient/big/_history/1'], ['Patient/big']])]));
      } finally {
        await t.close();
      }
    }, 120_000);

    test('a batch over 4 MiB reading 600 resources names the patient of each, looked up by the lot', async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      const t = await createTestApp({ store, env: { CINDER_AUDIT: 'on' } });
      try {
        const api = fhirClient(t, await t.token());
        const n = 600;
        const entry = Array.from({ length: n }, (_, i) => [
          { resource: { resourceType: 'Patient', id: `q${i}` }, request: { method: 'PUT', url: `Patient/q${i}` } },
          {
            resource: { resourceType: 'Observation', id: `o${i}`, status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] }, valueQuantity: { value: 95, unit: 'mg/dL', system: 'http://unitsofmeasure.org', code: 'mg/dL' }, subject: { reference: `Patient/q${i}` } },
            request: { method: 'PUT', url: `Observation/o${i}` },
          },
        ]).flat();
        const written = await api.call('POST', '', { resourceType: 'Bundle', type: 'transaction', entry }, { Prefer: 'return=minimal' });
        expect([written.status, written.status === 200 ? '' : await written.text()]).toEqual([200, '']);
        await t.app.audit!.flush();
        // Padded past ENTRY_BUNDLE_CHARS with blanks: its own event names what its entries read, and their patients.
        const batch = { resourceType: 'Bundle', type: 'batch', entry: Array.from({ length: n }, (_, i) => ({ request: { method: 'GET', url: `Observation/o${i}` } })) };
        const text = JSON.stringify(batch).replace('"entry":', `"entry":${' '.repeat(4 << 20)}`);
        const sent = await t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${await t.token()}`, 'Content-Type': 'application/fhir+json', 'Content-Length': String(text.length) }, body: text });
        expect(sent.status).toBe(200);
        await t.app.audit!.flush();
        const [event] = ((await api.search('AuditEvent?subtype=batch')).entry ?? []).map((e: Json) => e.resource);
        expect(whats(event)).toHaveLength(n);
        // Every one of the 600 patients, in the order read (the first 100 alone were named).
        expect(patientsOf(event)).toEqual(Array.from({ length: n }, (_, i) => `Patient/q${i}`));
        // And the AuditEvents are found in each patient's compartment, the last one's included.
        expect(((await api.search(`AuditEvent?subtype=batch&patient=Patient/q${n - 1}`)).entry ?? []).length).toBe(1);
      } finally {
        await t.close();
      }
    }, 120_000);

    test("a batch over 4 MiB whose $convert entries echo versions is audited, naming what it read alone", async () => {
      const db = await target.migrated();
      const store = db.open();
      await store.migrate();
      const t = await createTestApp({ store, env: { CINDER_AUDIT: 'on' } });
      try {
        const api = fhirClient(t, await t.token());
        expect((await api.put('Patient/c1', { resourceType: 'Patient', id: 'c1' })).status).toBe(201);
        const obs = { resourceType: 'Observation', id: 'c2', status: 'final', code: { coding: [{ system: 'http://loinc.org', code: '2339-0' }] }, subject: { reference: 'Patient/c1' } };
        expect((await api.put('Observation/c2', obs)).status).toBe(201);
        // Another patient's record, which the batch never reads.
        expect((await api.put('Patient/d1', { resourceType: 'Patient', id: 'd1' })).status).toBe(201);
        expect((await api.put('Observation/d2', { ...obs, id: 'd2', subject: { reference: 'Patient/d1' } })).status).toBe(201);
        await t.app.audit!.flush();
        const failed = t.app.audit!.counts.failed;
        // $convert answers with the resource it was sent: its meta.versionId (a valid id) is past any version a store numbers.
        const echoed = { ...obs, id: 'c3', meta: { versionId: '99999999999' } };
        const batch = {
          resourceType: 'Bundle', type: 'batch',
          entry: [
            { request: { method: 'GET', url: 'Observation/c2' } }, { resource: echoed, request: { method: 'POST', url: '$convert' } },
            // An echo naming a stored version of another patient's record: not a read of it, nor of that patient.
            { resource: { ...obs, id: 'd2', subject: { reference: 'Patient/d1' }, meta: { versionId: '1' } }, request: { method: 'POST', url: '$convert' } },
          ],
        };
        const text = JSON.stringify(batch).replace('"entry":', `"entry":${' '.repeat(4 << 20)}`);
        const sent = await t.request(t.fhir(), { method: 'POST', headers: { Authorization: `Bearer ${await t.token()}`, 'Content-Type': 'application/fhir+json', 'Content-Length': String(text.length) }, body: text });
        expect(sent.status).toBe(200);
        const answered = (await sent.json()) as Json;
        expect(answered.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '200 OK', '200 OK']);
        await t.app.audit!.flush();
        expect(t.app.audit!.counts.failed).toBe(failed);
        const [event] = ((await api.search('AuditEvent?subtype=batch')).entry ?? []).map((e: Json) => e.resource);
        expect(whats(event)).toContain('Observation/c2/_history/1');
        // What was read, and its patient, alone: not what the $convert entries echoed.
        expect(whats(event)).toEqual(['Observation/c2/_history/1']);
        expect(patientsOf(event)).toEqual(['Patient/c1']);
      } finally {
        await t.close();
      }
    }, 120_000);
  });
}
