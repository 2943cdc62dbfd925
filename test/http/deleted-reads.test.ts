/**
 * A read or vread of a deletion (FHIR R4 http.html#read, #vread: 410 Gone) answers the deletion's version
 * headers, as a read of a live version does: `ETag` names the version the deletion is and `Last-Modified`
 * when it was deleted, so that a client (a cache, a sync) learns which version it missed and since when.
 * In a batch, the GET entry's response carries them as `etag` and `lastModified`. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

await eachStore((kind, fresh) => {
  describe(`reads of a deletion (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    let deletedAt: number;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'gone', active: true });
      t.clock.advance(65_000);
      deletedAt = t.clock.now();
      expect((await api.del('Patient/gone')).status).toBe(200);
    });
    afterAll(() => t.close());

    const httpDate = () => new Date(deletedAt).toUTCString();

    test('read: 410 with the deletion version\'s ETag and Last-Modified, on GET and HEAD', async () => {
      for (const method of ['GET', 'HEAD']) {
        const res = await api.call(method, 'Patient/gone');
        expect({ method, status: res.status, etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') })
          .toEqual({ method, status: 410, etag: 'W/"2"', lastModified: httpDate() });
      }
      await expectOutcome(await api.get('Patient/gone'), 410, 'deleted');
    });

    test('vread of the deletion: 410 with its ETag and Last-Modified, on GET and HEAD', async () => {
      for (const method of ['GET', 'HEAD']) {
        const res = await api.call(method, 'Patient/gone/_history/2');
        expect({ method, status: res.status, etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') })
          .toEqual({ method, status: 410, etag: 'W/"2"', lastModified: httpDate() });
      }
      await expectOutcome(await api.get('Patient/gone/_history/2'), 410, 'deleted');
      // The version before it is read as it was.
      expect((await api.get('Patient/gone/_history/1')).headers.get('etag')).toBe('W/"1"');
    });

    test('DELETE of the deletion succeeds without a new version, answering its ETag and Last-Modified (http.html#delete)', async () => {
      t.clock.advance(5_000);
      const again = await api.del('Patient/gone');
      expect({ status: again.status, etag: again.headers.get('etag'), lastModified: again.headers.get('last-modified') })
        .toEqual({ status: 200, etag: 'W/"2"', lastModified: httpDate() });
      const outcome = (await again.json()) as Json;
      expect(outcome.issue.map((i: Json) => [i.severity, i.code])).toEqual([['information', 'informational']]);
      expect(outcome.issue[0].diagnostics ?? outcome.issue[0].details?.text).toContain('already deleted');
      const minimal = await api.del('Patient/gone', { Prefer: 'return=minimal' });
      expect({ status: minimal.status, etag: minimal.headers.get('etag'), lastModified: minimal.headers.get('last-modified'), body: await minimal.text() })
        .toEqual({ status: 204, etag: 'W/"2"', lastModified: httpDate(), body: '' });
      // No version was written: the history still ends with the one deletion.
      const history = await api.search('Patient/gone/_history');
      expect(history.entry.map((e: Json) => [e.request.method, e.response.etag])).toEqual([['DELETE', 'W/"2"'], ['PUT', 'W/"1"']]);
      // An id that never existed keeps its answer: nothing deleted, no version to name.
      const never = await api.del('Patient/never-was');
      expect({ status: never.status, etag: never.headers.get('etag'), lastModified: never.headers.get('last-modified') })
        .toEqual({ status: 200, etag: null, lastModified: null });
      expect(await never.text()).toContain('did not exist');
    });

    test('a fresh DELETE answers its deletion\'s Last-Modified beside its ETag', async () => {
      await api.put200({ resourceType: 'Patient', id: 'fresh', active: true });
      t.clock.advance(3_000);
      const res = await api.del('Patient/fresh');
      expect({ status: res.status, etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') })
        .toEqual({ status: 200, etag: 'W/"2"', lastModified: new Date(t.clock.now()).toUTCString() });
    });

    test('batch and transaction: a DELETE entry of the deletion answers its etag and lastModified, writing nothing', async () => {
      for (const type of ['batch', 'transaction']) {
        const res = await api.post('', { resourceType: 'Bundle', type, entry: [{ request: { method: 'DELETE', url: 'Patient/gone' } }] });
        expect(res.status).toBe(200);
        expect(((await res.json()) as Json).entry[0].response).toEqual({ status: '204 No Content', etag: 'W/"2"', lastModified: new Date(deletedAt).toISOString() });
      }
      expect((await api.search('Patient/gone/_history')).entry).toHaveLength(2);
    });

    test('a token whose deletes are filtered is refused the deletion of a resource whose last content was outside its filter, as a read of it is', async () => {
      const obs = (id: string, category: string) => ({ resourceType: 'Observation', id, status: 'final', code: { text: id },
        category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: category }] }] });
      await api.put200(obs('vs-gone', 'vital-signs'));
      await api.put200(obs('lab-gone', 'laboratory'));
      expect((await api.del('Observation/vs-gone')).status).toBe(200);
      expect((await api.del('Observation/lab-gone')).status).toBe(200);
      const lab = fhirClient(t, await t.tokenFor('t1', ['system/Observation.rd?category=laboratory']));
      await expectOutcome(await lab.get('Observation/vs-gone'), 403);
      await expectOutcome(await lab.del('Observation/vs-gone'), 403);
      const inReach = await lab.del('Observation/lab-gone');
      expect({ status: inReach.status, etag: inReach.headers.get('etag') }).toEqual({ status: 200, etag: 'W/"2"' });
    });

    test('batch: a GET entry of the deletion answers 410 with etag and lastModified', async () => {
      const res = await api.post('', { resourceType: 'Bundle', type: 'batch', entry: [
        { request: { method: 'GET', url: 'Patient/gone' } },
        { request: { method: 'GET', url: 'Patient/gone/_history/2' } },
      ] });
      expect(res.status).toBe(200);
      const responses = ((await res.json()) as Json).entry.map((e: Json) => ({ ...e.response, outcome: e.response.outcome?.issue[0].code }));
      const expected = { status: '410 Gone', etag: 'W/"2"', lastModified: new Date(deletedAt).toISOString(), outcome: 'deleted' };
      expect(responses).toEqual([expected, expected]);
    });
  });
});
