/**
 * A history entry's request names the interaction that made its version (FHIR R4 http 3.1.0.11,
 * bundle.html; http-verb has PATCH): POST, PUT (create-on-update too), PATCH (JSON Patch and FHIRPath
 * Patch), DELETE, their conditional forms, transaction and batch entries, in instance, type and system
 * history and a batch's history read, on both databases. Versions written before the method was
 * recorded keep the inferred one (DELETE, version 1 POST, later PUT).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';
import { migrateUpTo, migrationVersion, rawStatements, storeTargets } from '../helpers/stores.ts';

const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };

/** A FHIRPath Patch replacing `path` with a boolean. */
const replaceBoolean = (path: string, value: boolean): Json => ({
  resourceType: 'Parameters',
  parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: path }, { name: 'value', valueBoolean: value }] }],
});

/** `method url` of each entry of a history Bundle, newest first, with its version. */
const requests = (bundle: Json) => (bundle.entry ?? []).map((e: Json) => `${e.response.etag} ${e.request.method} ${e.request.url}`);

const targets = await storeTargets({ main: false });
afterAll(() => Promise.all(targets.map((t) => t.cleanup())), 60_000);

for (const target of targets) {
  describe(`history request.method (${target.kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      const db = await target.migrated();
      t = await createTestApp({ store: db.open() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    const history = async (path: string) => {
      const res = await api.get(path);
      expect(res.status).toBe(200);
      return (await res.json()) as Json;
    };

    test('create, PUT that creates, update, JSON Patch, FHIRPath Patch, delete, PUT that creates again', async () => {
      const created = await ok(api.post('Patient', { resourceType: 'Patient', active: true }), 201);
      await ok(api.put('Patient/m1', { resourceType: 'Patient', id: 'm1', active: true }), 201);
      await ok(api.put('Patient/m1', { resourceType: 'Patient', id: 'm1', active: false }));
      await ok(api.call('PATCH', 'Patient/m1', [{ op: 'replace', path: '/active', value: true }], JSON_PATCH));
      await ok(api.call('PATCH', 'Patient/m1', replaceBoolean('Patient.active', false)));
      await ok(api.del('Patient/m1'));
      await ok(api.put('Patient/m1', { resourceType: 'Patient', id: 'm1', gender: 'other' }), 201);
      expect(requests(await history('Patient/m1/_history'))).toEqual([
        'W/"6" PUT Patient/m1', 'W/"5" DELETE Patient/m1', 'W/"4" PATCH Patient/m1', 'W/"3" PATCH Patient/m1',
        'W/"2" PUT Patient/m1', 'W/"1" PUT Patient/m1',
      ]);
      expect(requests(await history(`Patient/${created.id}/_history`))).toEqual(['W/"1" POST Patient']);
      // Type and system history, and a batch's history read, say the same.
      const ofM1 = (b: Json) => requests({ entry: b.entry.filter((e: Json) => e.fullUrl.endsWith('/Patient/m1')) });
      expect(ofM1(await history('Patient/_history'))).toEqual(requests(await history('Patient/m1/_history')));
      expect(ofM1(await history('_history'))).toEqual(requests(await history('Patient/m1/_history')));
      const batch = await ok(api.post('', { resourceType: 'Bundle', type: 'batch', entry: [{ request: { method: 'GET', url: 'Patient/m1/_history' } }] }));
      expect(requests(batch.entry[0].resource)).toEqual(requests(await history('Patient/m1/_history')));
    });

    test('response.status is the status the write was answered with: 201 for a PUT that creates or re-creates', async () => {
      const statuses = (b: Json) => (b.entry ?? []).map((e: Json) => `${e.response.etag} ${e.request.method} ${e.response.status}`);
      await ok(api.put('Patient/s1', { resourceType: 'Patient', id: 's1', active: true }), 201);
      await ok(api.put('Patient/s1', { resourceType: 'Patient', id: 's1', active: false }));
      await ok(api.del('Patient/s1'));
      await ok(api.put('Patient/s1', { resourceType: 'Patient', id: 's1', active: true }), 201);
      await ok(api.call('PATCH', 'Patient/s1', [{ op: 'replace', path: '/active', value: false }], JSON_PATCH));
      await ok(api.del('Patient/s1'));
      await ok(api.put('Patient/s1', { resourceType: 'Patient', id: 's1', gender: 'other' }), 201);
      const expected = [
        'W/"7" PUT 201', 'W/"6" DELETE 204', 'W/"5" PATCH 200', 'W/"4" PUT 201', 'W/"3" DELETE 204', 'W/"2" PUT 200', 'W/"1" PUT 201',
      ];
      expect(statuses(await history('Patient/s1/_history'))).toEqual(expected);
      // One version a page: the version before each is on another page, and still read.
      const paged: string[] = [];
      for (let url: string | undefined = 'Patient/s1/_history?_count=1'; url; ) {
        const page = await history(url);
        paged.push(...statuses(page));
        url = page.link.find((l: Json) => l.relation === 'next')?.url;
      }
      expect(paged).toEqual(expected);
      const ofS1 = (b: Json) => statuses({ entry: b.entry.filter((e: Json) => e.fullUrl.endsWith('/Patient/s1')) });
      expect(ofS1(await history('Patient/_history'))).toEqual(expected);
      expect(ofS1(await history('_history'))).toEqual(expected);
    });

    test('conditional create, update (matching, creating with and without an id), patch and delete', async () => {
      const id = (await ok(api.post('Patient', { resourceType: 'Patient', identifier: [{ system: 'urn:c', value: '1' }] }, { 'If-None-Exist': 'identifier=urn:c|1' }), 201)).id;
      await ok(api.put('Patient?identifier=urn:c|1', { resourceType: 'Patient', identifier: [{ system: 'urn:c', value: '1' }], active: true }));
      await ok(api.call('PATCH', 'Patient?identifier=urn:c|1', [{ op: 'replace', path: '/active', value: false }], JSON_PATCH));
      await ok(api.del('Patient?identifier=urn:c|1'));
      expect(requests(await history(`Patient/${id}/_history`))).toEqual([
        `W/"4" DELETE Patient/${id}`, `W/"3" PATCH Patient/${id}`, `W/"2" PUT Patient/${id}`, 'W/"1" POST Patient',
      ]);
      const made = await ok(api.put('Patient?identifier=urn:c|2', { resourceType: 'Patient', identifier: [{ system: 'urn:c', value: '2' }] }), 201);
      expect(requests(await history(`Patient/${made.id}/_history`))).toEqual([`W/"1" PUT Patient/${made.id}`]);
      await ok(api.put('Patient?identifier=urn:c|3', { resourceType: 'Patient', id: 'c3', identifier: [{ system: 'urn:c', value: '3' }] }), 201);
      expect(requests(await history('Patient/c3/_history'))).toEqual(['W/"1" PUT Patient/c3']);
    });

    test('transaction and batch entries: each version names its entry\'s method', async () => {
      const tx = await ok(api.post('', {
        resourceType: 'Bundle', type: 'transaction', entry: [
          { fullUrl: 'urn:uuid:7d0e4f52-3b0a-4f55-9d1c-2a4a3f0b6a01', resource: { resourceType: 'Patient', active: true }, request: { method: 'POST', url: 'Patient' } },
          { resource: { resourceType: 'Patient', id: 't1', active: true }, request: { method: 'PUT', url: 'Patient/t1' } },
        ],
      }));
      const posted = /Patient\/([^/]+)\/_history/.exec(tx.entry[0].response.location)![1]!;
      await ok(api.post('', {
        resourceType: 'Bundle', type: 'transaction', entry: [
          { resource: replaceBoolean('Patient.active', false), request: { method: 'PATCH', url: 'Patient/t1' } },
          { request: { method: 'DELETE', url: `Patient/${posted}` } },
        ],
      }));
      const batch = await ok(api.post('', {
        resourceType: 'Bundle', type: 'batch', entry: [
          { resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: Buffer.from(JSON.stringify([{ op: 'replace', path: '/active', value: true }])).toString('base64') }, request: { method: 'PATCH', url: 'Patient/t1' } },
          { resource: { resourceType: 'Patient', id: 'b1' }, request: { method: 'PUT', url: 'Patient/b1' } },
        ],
      }));
      expect(batch.entry.map((e: Json) => e.response.status)).toEqual(['200 OK', '201 Created']);
      expect(requests(await history('Patient/t1/_history'))).toEqual(['W/"3" PATCH Patient/t1', 'W/"2" PATCH Patient/t1', 'W/"1" PUT Patient/t1']);
      expect(requests(await history(`Patient/${posted}/_history`))).toEqual([`W/"2" DELETE Patient/${posted}`, 'W/"1" POST Patient']);
      expect(requests(await history('Patient/b1/_history'))).toEqual(['W/"1" PUT Patient/b1']);
    });
  });

  describe(`history request.method of versions written before it was recorded (${target.kind})`, () => {
    test('they keep the inferred method; the versions written after say theirs', async () => {
      const db = await target.fresh();
      await migrateUpTo(target.kind, db.url, migrationVersion(target.kind, 'write_method') - 1);
      const deleted = target.kind === 'sqlite' ? [0, 1] : ['false', 'true'];
      const content = (id: string, versionId: number, lastUpdated: number) =>
        JSON.stringify({ resourceType: 'Patient', id, meta: { versionId: String(versionId), lastUpdated: new Date(lastUpdated).toISOString() }, active: true });
      // As an older Cinder left them: o1 created by a PUT (shown as POST, as it always was), o2 updated then deleted.
      await rawStatements(target.kind, db.url, [
        [`INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content) VALUES ('t1', 'Patient', 'o1', 1, 1000, ${deleted[0]}, 1, $1)`, [content('o1', 1, 1000)]],
        [`INSERT INTO resource_history (tenant, type, id, version_id, last_updated, deleted, seq, content) VALUES ('t1', 'Patient', 'o2', 1, 1000, ${deleted[0]}, 2, $1)`, [content('o2', 1, 1000)]],
        [`INSERT INTO resource_history (tenant, type, id, version_id, last_updated, deleted, seq, content) VALUES ('t1', 'Patient', 'o2', 2, 2000, ${deleted[0]}, 3, $1)`, [content('o2', 2, 2000)]],
        [`INSERT INTO resources (tenant, type, id, version_id, last_updated, deleted, seq, content) VALUES ('t1', 'Patient', 'o2', 3, 3000, ${deleted[1]}, 4, '')`, []],
      ]);
      const t = await createTestApp({ store: db.open() });
      try {
        const api = fhirClient(t, await t.token());
        const history = async (path: string) => requests((await (await api.get(path)).json()) as Json);
        expect(await history('Patient/o2/_history')).toEqual(['W/"3" DELETE Patient/o2', 'W/"2" PUT Patient/o2', 'W/"1" POST Patient']);
        await ok(api.call('PATCH', 'Patient/o1', [{ op: 'replace', path: '/active', value: false }], JSON_PATCH));
        expect(await history('Patient/o1/_history')).toEqual(['W/"2" PATCH Patient/o1', 'W/"1" POST Patient']);
      } finally {
        await t.close();
      }
    });
  });
}

/** The JSON answer of a request, asserting its status. */
async function ok(res: Response | Promise<Response>, status = 200): Promise<Json> {
  const r = await res;
  const text = await r.text();
  expect({ status: r.status, text }).toMatchObject({ status });
  return text === '' ? {} : (JSON.parse(text) as Json);
}
