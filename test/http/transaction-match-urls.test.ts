/**
 * fullUrls inside the conditions of Bundle entries (`request.ifNoneExist`, conditional `request.url`)
 * are searched as the ids the transaction gives them, as references to them are rewritten (FHIR R4 http
 * 3.1.0.11.2; HAPI FHIR substitutes them in match URLs too), so a replayed transaction finds what it
 * wrote before. A batch's entries may not refer to each other. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, fhirClient, ids, type FhirClient, type Json } from '../helpers/fhir.ts';

const bundle = (entry: Json[], type = 'transaction') => ({ resourceType: 'Bundle', type, entry });
const X = 'urn:uuid:7a0c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2d';
const Y = 'urn:uuid:7a0c1d2e-3f40-4a5b-8c6d-7e8f9a0b1c2e';
const observation = (subject: string, text: string, extra: Json = {}) => ({ resourceType: 'Observation', status: 'final', code: { text }, subject: { reference: subject }, ...extra });

await eachStore((kind, fresh) => {
  describe(`fullUrls in the conditions of entries (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { ok, nothingWritten } = bundlePoster(() => t, () => api);
    const observations = async (text: string) => ids(await api.search(`Observation?code:text=${text}`));
    const putPatient = (id: string) => ({ fullUrl: X, resource: { resourceType: 'Patient', id }, request: { method: 'PUT', url: `Patient/${id}` } });

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test("an ifNoneExist naming an updated entry's fullUrl, plain or percent-encoded, finds the stored match", async () => {
      await api.put200({ resourceType: 'Patient', id: 'mu-1' });
      const o = await api.create(observation('Patient/mu-1', 'mu1'));
      for (const ifNoneExist of [`subject=${X}&code:text=mu1`, `subject=${encodeURIComponent(X)}&code:text=mu1`]) {
        const res = await ok(bundle([putPatient('mu-1'), { resource: observation(X, 'mu1'), request: { method: 'POST', url: 'Observation', ifNoneExist } }]));
        expect(res.entry[1].response.status).toBe('200 OK');
        expect(res.entry[1].resource.id).toBe(o.id);
      }
      expect(await observations('mu1')).toEqual([o.id]);
    });

    test('a conditional update, delete or patch URL naming a fullUrl acts on the stored match', async () => {
      await api.put200({ resourceType: 'Patient', id: 'mu-2' });
      const o = await api.create(observation('Patient/mu-2', 'mu2'));
      const res = await ok(bundle([
        putPatient('mu-2'),
        { resource: observation(X, 'mu2', { status: 'amended' }), request: { method: 'PUT', url: `Observation?subject=${X}&code:text=mu2` } },
      ]));
      expect([res.entry[1].response.status, res.entry[1].resource.id, res.entry[1].resource.status]).toEqual(['200 OK', o.id, 'amended']);
      const patch = { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Observation.status' }, { name: 'value', valueCode: 'corrected' }] }] };
      const patched = await ok(bundle([putPatient('mu-2'), { resource: patch, request: { method: 'PATCH', url: `Observation?subject=${X}&code:text=mu2` } }]));
      expect([patched.entry[1].resource.id, patched.entry[1].resource.status]).toEqual([o.id, 'corrected']);
      const deleted = await ok(bundle([putPatient('mu-2'), { request: { method: 'DELETE', url: `Observation?subject=${encodeURIComponent(X)}&code:text=mu2` } }]));
      expect(deleted.entry[1].response.status).toBe('204 No Content');
      expect(await observations('mu2')).toEqual([]);
    });

    test("a condition naming a conditional entry's fullUrl is searched once that entry is resolved, in either order; a cycle is a 400", async () => {
      const p = await api.create({ resourceType: 'Patient', identifier: [{ system: 'urn:x', value: 'mu-3' }] });
      const o = await api.create(observation(`Patient/${p.id}`, 'mu3'));
      const patient = { fullUrl: Y, resource: { resourceType: 'Patient', identifier: [{ system: 'urn:x', value: 'mu-3' }] }, request: { method: 'PUT', url: 'Patient?identifier=urn:x|mu-3' } };
      const obs = { resource: observation(Y, 'mu3', { status: 'amended' }), request: { method: 'PUT', url: `Observation?subject=${Y}&code:text=mu3` } };
      for (const entries of [[patient, obs], [obs, patient]]) {
        const res = await ok(bundle(entries));
        const written = res.entry.find((e: Json) => e.resource.resourceType === 'Observation');
        expect([written.response.status, written.resource.id, written.resource.subject.reference]).toEqual(['200 OK', o.id, `Patient/${p.id}`]);
      }
      expect(await observations('mu3')).toEqual([o.id]);
      // A create's new id matches nothing stored: the conditional create creates.
      const created = await ok(bundle([
        { fullUrl: X, resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        { resource: observation(X, 'mu3'), request: { method: 'POST', url: 'Observation', ifNoneExist: `subject=${X}&code:text=mu3` } },
      ]));
      expect(created.entry[1].response.status).toBe('201 Created');
      expect(created.entry[1].resource.subject.reference).toBe(`Patient/${created.entry[0].resource.id}`);
      const outcome = await nothingWritten(bundle([
        { fullUrl: X, resource: { resourceType: 'Patient' }, request: { method: 'PUT', url: `Patient?link=${Y}` } },
        { fullUrl: Y, resource: { resourceType: 'Patient' }, request: { method: 'PUT', url: `Patient?link=${X}` } },
      ]), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.url']);
      expect(outcome.issue[0].diagnostics).toContain('waits for this one');
    });

    test("a batch entry's condition may not name another entry's urn fullUrl; the others go on", async () => {
      await api.put200({ resourceType: 'Patient', id: 'mu-4' });
      const res = await ok(bundle([
        putPatient('mu-4'),
        { resource: observation('Patient/mu-4', 'mu4'), request: { method: 'POST', url: 'Observation', ifNoneExist: `subject=${X}&code:text=mu4` } },
      ], 'batch'));
      expect(res.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '400 Bad Request']);
      expect(res.entry[1].response.outcome.issue[0].expression).toEqual(['Bundle.entry[1].request.ifNoneExist']);
      expect(await observations('mu4')).toEqual([]);
    });
  });
});
