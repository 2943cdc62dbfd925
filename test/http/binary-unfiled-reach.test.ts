/**
 * Binaries without a securityContext under a patient's token, on both databases. Such a Binary follows the Binary
 * scopes alone, so a patient's token reads it by its id (the url an Attachment of the patient's records names), but
 * a search of Binary listed every one of them: `GET Binary` with `patient/*.rs` answered the tenant's unfiled lab
 * reports and scans, every patient's. A search by a token whose Binary searches are bound to a patient lists only
 * the Binaries filed under a resource it may read (src/fhir/crud.ts listsUnfiled). And a token of `patient/*.cruds`
 * overwrote, filed under its own patient, or deleted any of them, and any Binary filed under a shared record it reads
 * (a clinic's form, a practitioner's signature): neither is a record of the patient's, so such a token may not update
 * or delete one, nor file content under a shared record (requireFiled, requireWritableContext), by any write path.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { craftToken, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const binary = (id: string, context?: string): Json => ({ resourceType: 'Binary', id, contentType: 'text/plain', data: btoa(`file ${id}`), ...(context && { securityContext: { reference: context } }) });
const matches = (b: Json): string[] => (b.entry ?? []).filter((e: Json) => e.search?.mode === 'match').map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`).sort();

await eachStore((kind, fresh) => {
  describe(`Binaries without a securityContext under a patient's token (${kind})`, () => {
    let t: TestApp;
    let pa: FhirClient;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      const admin = fhirClient(t, await t.token());
      for (const r of [
        { resourceType: 'Patient', id: 'pa' }, { resourceType: 'Patient', id: 'pb' },
        // pb's report, stored without a context (as most feeds store them), and a file of each patient filed under them.
        binary('unfiled-b'), binary('unfiled-a'), binary('filed-a', 'Patient/pa'), binary('filed-b', 'Patient/pb'),
        // The clinic's form and a practitioner's signature, filed under shared records every patient reads.
        { resourceType: 'Organization', id: 'clinic', name: 'Clinic' }, { resourceType: 'Practitioner', id: 'dr' },
        binary('form', 'Organization/clinic'), binary('signature', 'Practitioner/dr'),
        { resourceType: 'DocumentReference', id: 'doc-a', status: 'current', subject: { reference: 'Patient/pa' }, content: [{ attachment: { url: 'Binary/unfiled-a' } }] },
        { resourceType: 'DocumentReference', id: 'doc-b', status: 'current', subject: { reference: 'Patient/pb' }, content: [{ attachment: { url: 'Binary/unfiled-b' } }] },
      ]) await admin.put200(r);
      pa = fhirClient(t, await craftToken(t, 'launch/patient patient/*.rs', { patient: 'pa' }));
    });
    afterAll(() => t.close());

    test('a search, across types too, finds only the Binaries filed under what the token reads, and counts only those', async () => {
      // Its own file, and those filed under the shared records it reads.
      const listed = ['Binary/filed-a', 'Binary/form', 'Binary/signature'];
      for (const query of ['Binary', 'Binary?_id=unfiled-b,unfiled-a,filed-a,filed-b,form,signature', '?_type=Binary', 'Binary?_total=accurate']) {
        const b = await pa.search(query);
        expect({ query, found: matches(b) }).toEqual({ query, found: listed });
        if (query.includes('_total')) expect(b.total).toBe(3);
      }
      expect((await pa.search('Binary?_summary=count')).total).toBe(3);
      const last = await pa.search('Binary?_count=1&_offset=2');
      expect({ found: matches(last), next: last.link.some((l: Json) => l.relation === 'next') }).toEqual({ found: ['Binary/signature'], next: false });
      const bundle = await pa.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Binary?_id=unfiled-b' } }] });
      expect(((await bundle.json()) as Json).entry[0].resource.total).toBe(0);
    });

    test('one is still read by its id, and $everything includes the one its records name', async () => {
      expect((await pa.get('Binary/unfiled-a')).status).toBe(200);
      const everything = await pa.search('Patient/pa/$everything');
      const included = (everything.entry ?? []).map((e: Json) => `${e.resource.resourceType}/${e.resource.id}`);
      expect(included).toContain('Binary/unfiled-a');
      expect(included).not.toContain('Binary/unfiled-b');
    });

    test("another patient's unfiled Binary is neither overwritten, filed under the patient, nor deleted, by any write path", async () => {
      const rw = await craftToken(t, 'launch/patient patient/*.cruds', { patient: 'pa' });
      const w = fhirClient(t, rw);
      const hacked = { ...binary('unfiled-b'), data: btoa('hacked') };
      const attempts: [string, () => Response | Promise<Response>][] = [
        ['PUT', () => w.put('Binary/unfiled-b', hacked)],
        ['PUT filing it', () => w.put('Binary/unfiled-b', { ...hacked, securityContext: { reference: 'Patient/pa' } })],
        ['PUT native', () => t.request(`${t.fhir()}/Binary/unfiled-b`, { method: 'PUT', headers: { Authorization: `Bearer ${rw}`, 'Content-Type': 'text/plain', 'X-Security-Context': 'Patient/pa' }, body: 'hacked' })],
        ['PATCH', () => w.call('PATCH', 'Binary/unfiled-b', [{ op: 'replace', path: '/data', value: btoa('hacked') }], { 'Content-Type': 'application/json-patch+json' })],
        ['DELETE', () => w.del('Binary/unfiled-b')],
        ['transaction PUT', () => w.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ fullUrl: `${t.fhir()}/Binary/unfiled-b`, resource: hacked, request: { method: 'PUT', url: 'Binary/unfiled-b' } }] })],
        ['transaction DELETE', () => w.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: 'Binary/unfiled-b' } }] })],
      ];
      for (const [what, attempt] of attempts) {
        const res = await attempt();
        expect({ what, status: res.status }).toEqual({ what, status: 403 });
      }
      // A conditional delete finds nothing its searches do not list.
      expect((await w.del('Binary?_id=unfiled-b')).status).toBeLessThan(300);
      const admin = fhirClient(t, await t.token());
      const stored = (await (await admin.get('Binary/unfiled-b', { Accept: 'application/fhir+json' })).json()) as Json;
      expect({ version: stored.meta.versionId, data: atob(stored.data) }).toEqual({ version: '1', data: 'file unfiled-b' });
      // It creates Binaries, with a context or without, and writes those filed under its patient.
      const created = await w.post('Binary', binary('ignored'));
      expect(created.status).toBe(201);
      expect((await fhirClient(t, await t.token()).del(`Binary/${((await created.json()) as Json).id}`)).status).toBe(200);
      expect((await w.put('Binary/filed-a', { ...binary('filed-a', 'Patient/pa'), data: btoa('new') })).status).toBe(200);
    });

    test('a Binary filed under a shared record is read, but neither written, refiled there, nor deleted', async () => {
      const rw = await craftToken(t, 'launch/patient patient/*.cruds', { patient: 'pa' });
      const w = fhirClient(t, rw);
      for (const id of ['form', 'signature']) expect((await w.get(`Binary/${id}`)).status).toBe(200);
      const attempts: [string, () => Response | Promise<Response>][] = [
        ['PUT', () => w.put('Binary/form', { ...binary('form', 'Organization/clinic'), data: btoa('hacked') })],
        ['PUT native', () => t.request(`${t.fhir()}/Binary/signature`, { method: 'PUT', headers: { Authorization: `Bearer ${rw}`, 'Content-Type': 'text/plain', 'X-Security-Context': 'Practitioner/dr' }, body: 'hacked' })],
        ['DELETE', () => w.del('Binary/form')],
        ['transaction DELETE', () => w.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'DELETE', url: 'Binary/signature' } }] })],
        ['POST filed under the clinic', () => w.post('Binary', binary('ignored', 'Organization/clinic'))],
        ['transaction POST filed under the clinic', () => w.post('', { resourceType: 'Bundle', type: 'transaction', entry: [{ fullUrl: 'urn:uuid:8c0f1f4e-5f7a-4d0b-9e3c-2a6b1d9f0c11', resource: binary('ignored', 'Organization/clinic'), request: { method: 'POST', url: 'Binary' } }] })],
        ['PATCH refiling its own', () => w.call('PATCH', 'Binary/filed-a', [{ op: 'replace', path: '/securityContext', value: { reference: 'Organization/clinic' } }], { 'Content-Type': 'application/json-patch+json' })],
      ];
      for (const [what, attempt] of attempts) {
        const res = await attempt();
        expect({ what, status: res.status }).toEqual({ what, status: 403 });
      }
      const admin = fhirClient(t, await t.token());
      for (const id of ['form', 'signature']) {
        const stored = (await (await admin.get(`Binary/${id}`, { Accept: 'application/fhir+json' })).json()) as Json;
        expect({ id, version: stored.meta.versionId, data: atob(stored.data) }).toEqual({ id, version: '1', data: `file ${id}` });
      }
      expect(matches(await admin.search('Binary?_count=100')).filter((r) => !/unfiled|filed|form|signature/.test(r))).toEqual([]);
    });

    test("a refusal names neither another patient's record it is filed under nor whether one exists", async () => {
      const w = fhirClient(t, await craftToken(t, 'launch/patient patient/*.cruds', { patient: 'pa' }));
      const read = await expectOutcome(await w.get('Binary/filed-b'), 403, 'forbidden');
      expect(JSON.stringify(read)).not.toContain('pb');
      const filing = async (context: string) => (await expectOutcome(await w.post('Binary', binary('ignored', context)), 403, 'forbidden')).issue[0].diagnostics as string;
      const [existing, unknown] = [await filing('Patient/pb'), await filing('Patient/nobody')];
      expect(existing).not.toContain('pb');
      expect(unknown).toBe(existing.replace('Patient/pb', 'Patient/nobody'));
    });

    test('a token whose Binary scope is not bound to a patient lists them all, as before', async () => {
      // Beside patient/ scopes, the Binaries filed under another patient stay out of reach (their context is).
      for (const [scope, filed] of [['user/Binary.rs user/Patient.rs', ['filed-a', 'filed-b']], ['launch/patient patient/*.rs user/Binary.rs', ['filed-a']]] as const) {
        const api = fhirClient(t, await craftToken(t, scope, { patient: 'pa' }));
        expect(matches(await api.search('Binary?_id=filed-a,filed-b,unfiled-a,unfiled-b'))).toEqual([...filed, 'unfiled-a', 'unfiled-b'].map((id) => `Binary/${id}`).sort());
      }
    });
  });
});
