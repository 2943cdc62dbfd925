/**
 * GET entries of transactions and batches (FHIR R4 http 3.1.0.11), on both databases: vreads, instance
 * and type history as REST answers them, with its access checks, and 304 for read entries whose
 * ifNoneMatch or ifModifiedSince says the client has the version; compartment searches, searches across
 * types and system history as REST answers them (MedplumClient's automatic batching sends such GETs).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, craftToken, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const tx = (entry: Json[], type = 'transaction') => ({ resourceType: 'Bundle', type, entry });
const patient = (value: string) => ({ resourceType: 'Patient', identifier: [{ system: 'urn:x', value }] });
const create = (fullUrl: string | undefined, resource: Json) => ({ ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'POST', url: resource.resourceType } });
const update = (fullUrl: string | undefined, url: string, resource: Json) => ({ ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'PUT', url } });

await eachStore((kind, fresh) => {
  describe(`GET entries of Bundles (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { send, ok, nothingWritten } = bundlePoster(() => t, () => api);

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('GET entries read versions and history, and answer 304 to ifNoneMatch and ifModifiedSince', async () => {
      await api.put200({ resourceType: 'Patient', id: 'h-1', active: false });
      t.clock.advance(60_000);
      const v2 = await api.put200({ resourceType: 'Patient', id: 'h-1', active: true });
      const get = (url: string, extra: Json = {}) => ({ request: { method: 'GET', url, ...extra } });
      for (const type of ['batch', 'transaction']) {
        const res = await ok(tx([
          get('Patient/h-1/_history/1'), get('Patient/h-1/_history'), get('Patient/_history?_count=1'),
          get('Patient/h-1', { ifNoneMatch: 'W/"2"' }), get('Patient/h-1', { ifNoneMatch: 'W/"1"' }),
          get('Patient/h-1', { ifModifiedSince: v2.meta.lastUpdated }), get('Patient/h-1/_history/1', { ifModifiedSince: '2000-01-01T00:00:00Z' }),
        ], type));
        const [vread, instance, typeHistory, fresh, stale, since, older] = res.entry;
        expect(vread.resource).toMatchObject({ id: 'h-1', active: false, meta: { versionId: '1' } });
        expect(vread.response).toMatchObject({ status: '200 OK', etag: 'W/"1"' });
        expect(instance.resource).toMatchObject({ resourceType: 'Bundle', type: 'history' });
        expect(instance.resource.entry.map((e: Json) => e.response.etag)).toEqual(['W/"2"', 'W/"1"']);
        expect(typeHistory.resource.entry).toHaveLength(1);
        expect(typeHistory.resource.link.some((l: Json) => l.relation === 'next')).toBe(true);
        expect(fresh).toEqual({ response: expect.objectContaining({ status: '304 Not Modified', etag: 'W/"2"' }) });
        expect(stale.response.status).toBe('200 OK');
        expect(stale.resource.meta.versionId).toBe('2');
        expect(since.response.status).toBe('304 Not Modified');
        expect(since.resource).toBeUndefined();
        expect(older.resource.meta.versionId).toBe('1');
      }
      // A version that does not exist: the batch entry's 404, the transaction's 404 writing nothing.
      const batch = await ok(tx([get('Patient/h-1/_history/9'), get('Patient/nobody/_history')], 'batch'));
      expect(batch.entry.map((e: Json) => e.response.status)).toEqual(['404 Not Found', '404 Not Found']);
      expect(batch.entry[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0]']);
      await nothingWritten(tx([create(undefined, patient('h')), get('Patient/h-1/_history/9')]), 404);
      // An ifModifiedSince that is not an instant is refused rather than ignored.
      const malformed = await ok(tx([get('Patient/h-1', { ifModifiedSince: 'yesterday' })], 'batch'));
      expect(malformed.entry[0].response.status).toBe('400 Bad Request');
      expect(malformed.entry[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.ifModifiedSince']);
      // A write to a history path is refused.
      await nothingWritten(tx([update(undefined, 'Patient/h-1/_history/2', { resourceType: 'Patient', id: 'h-1' })]), 400);
    });

    test('compartment searches, searches across types and system history are answered as REST answers them', async () => {
      await api.put200({ resourceType: 'Patient', id: 'c-1', active: true });
      await api.put200({ resourceType: 'Patient', id: 'c-2', active: true });
      for (const [id, subject] of [['co-1', 'c-1'], ['co-2', 'c-1'], ['co-3', 'c-2']]) {
        await api.put200({ resourceType: 'Observation', id, status: 'final', code: { text: 'x' }, subject: { reference: `Patient/${subject}` } });
      }
      const get = (url: string) => ({ request: { method: 'GET', url } });
      // A Bundle's own id and time are its own; the rest is what the REST API answers.
      const same = (bundle: Json) => ({ type: bundle.type, total: bundle.total, link: bundle.link, entry: bundle.entry });
      const urls = [
        'Patient/c-1/Observation?_count=1', 'Patient/c-1/*?_type=Observation,Patient', '?_type=Patient&_id=c-1,c-2',
        '/?_type=Observation&subject=Patient/c-2', '_history?_count=2', `${api.base}?_type=Patient&_id=c-2`,
      ];
      for (const type of ['batch', 'transaction']) {
        const res = await ok(tx(urls.map(get), type));
        expect(res.entry.map((e: Json) => e.response.status)).toEqual(urls.map(() => '200 OK'));
        const rest = ['Patient/c-1/Observation?_count=1', 'Patient/c-1/*?_type=Observation,Patient', '?_type=Patient&_id=c-1,c-2', '?_type=Observation&subject=Patient/c-2', '_history?_count=2', '?_type=Patient&_id=c-2'];
        for (const [i, url] of rest.entries()) expect(same(res.entry[i].resource)).toEqual(same((await (await api.get(url)).json()) as Json));
        const [compartment, all, across] = res.entry.map((e: Json) => e.resource);
        expect(compartment.entry.map((e: Json) => e.resource.id)).toHaveLength(1);
        expect(compartment.link.find((l: Json) => l.relation === 'next').url).toStartWith(`${api.base}/Patient/c-1/Observation?`);
        expect(all.entry.map((e: Json) => e.resource.id).sort()).toEqual(['c-1', 'co-1', 'co-2']);
        expect(across.entry.map((e: Json) => e.resource.id).sort()).toEqual(['c-1', 'c-2']);
        expect(res.entry[4].resource).toMatchObject({ type: 'history' });
      }
      // In a transaction they read after its writes, as its other GET entries do.
      const written = await ok(tx([create(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'new' }, subject: { reference: 'Patient/c-2' } }), get('Patient/c-2/Observation')]));
      expect(written.entry[1].resource.entry.map((e: Json) => e.resource.code.text).sort()).toEqual(['new', 'x']);
      // Their errors are the entry's in a batch; a transaction holding one writes nothing.
      const bad = [get('?_type=Nothing'), get('Patient/c-1/*?_sort=birthdate'), get('Patient/c-1/Observation?_count=x'), get('_history?_since=yesterday')];
      const batch = await ok(tx(bad, 'batch'));
      expect(batch.entry.map((e: Json) => e.response.status.split(' ')[0])).toEqual(bad.map(() => expect.stringMatching(/^4\d\d$/)));
      for (const entry of bad) await nothingWritten(tx([create(undefined, patient('c')), entry]), Number(batch.entry[bad.indexOf(entry)].response.status.split(' ')[0]));
      // Paths the REST API does not answer are not answered here either.
      const unknown = await ok(tx([get('Observation/co-1/Patient'), get('Patient/c-1/Nothing')], 'batch'));
      expect(unknown.entry.map((e: Json) => e.response.status)).toEqual(['404 Not Found', '404 Not Found']);
      // The token's scopes hold as on the REST API.
      const limited = fhirClient(t, await craftToken(t, 'system/Observation.rs'));
      const scoped = await ok(tx([get('?_type=Patient'), get('_history'), get('Patient/c-1/Observation'), get('Patient/c-1/Patient')], 'batch'), limited);
      const direct = await Promise.all(['?_type=Patient', '_history', 'Patient/c-1/Observation', 'Patient/c-1/Patient'].map(async (u) => (await limited.get(u)).status));
      expect(scoped.entry.map((e: Json) => Number(e.response.status.split(' ')[0]))).toEqual(direct);
      expect(direct).toEqual([403, 403, 200, 403]);
    });

    test('GET entries check access as REST does', async () => {
      const limited = fhirClient(t, await craftToken(t, 'system/Observation.rs'));
      const get = (url: string) => ({ request: { method: 'GET', url } });
      const res = await ok(tx([get('Patient/h-1/_history/1'), get('Patient/h-1/_history'), get('Patient/_history')], 'batch'), limited);
      expect(res.entry.map((e: Json) => e.response.status)).toEqual(['403 Forbidden', '403 Forbidden', '403 Forbidden']);
      const patientBound = fhirClient(t, await craftToken(t, 'patient/*.rs', { patient: 'h-1' }));
      const bound = await ok(tx([get('Patient/_history'), get('Patient/h-1/_history')], 'batch'), patientBound);
      expect(bound.entry.map((e: Json) => e.response.status)).toEqual(['403 Forbidden', '200 OK']);
    });
  });
});
