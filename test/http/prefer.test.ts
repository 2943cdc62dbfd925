/**
 * `Prefer: return=minimal|representation|OperationOutcome` on every kind of write (FHIR R4
 * http.html#ops): create, update, conditional create and update, PATCH and conditional PATCH (JSON and
 * FHIRPath), Binary writes from native content, delete and conditional delete, and the entries of
 * transaction and batch Bundles; and the Content-Location every write answers with. On both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const bundle = (type: string, entry: Json[]) => ({ resourceType: 'Bundle', type, entry });

await eachStore((kind, fresh) => {
  describe(`Prefer: return (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
      await api.put200({ resourceType: 'Patient', id: 'read-me', active: true, birthDate: '2100-01-01' });
    });
    afterAll(() => t.close());

    const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };
    const native = (h: Record<string, string>) => ({ ...h, 'Content-Type': 'application/pdf' });
    /** A birth date of its own for each call's patch, so that every patch changes the resource (one that changes nothing stores no version). */
    const born = (n: number) => `${1800 + n}-01-01`;
    /** Every single-resource write, as a function of the Prefer header; each answers one version of `type`. */
    const writes: [string, (prefer: Record<string, string>, n: number) => Response | Promise<Response>, number, string][] = [
      ['create', (h) => api.post('Patient', { resourceType: 'Patient', active: true }, h), 201, 'Patient'],
      ['update', (h, n) => api.put(`Patient/u${n}`, { resourceType: 'Patient', id: `u${n}`, active: true }, h), 201, 'Patient'],
      ['conditional create', (h, n) => api.post('Patient', { resourceType: 'Patient', identifier: [{ system: 'urn:x', value: `c${n}` }] }, { ...h, 'If-None-Exist': `identifier=urn:x|c${n}` }), 201, 'Patient'],
      ['conditional create, matched', (h) => api.post('Patient', { resourceType: 'Patient' }, { ...h, 'If-None-Exist': '_id=read-me' }), 200, 'Patient'],
      ['conditional update', (h, n) => api.put(`Patient?identifier=urn:y|${n}`, { resourceType: 'Patient', identifier: [{ system: 'urn:y', value: String(n) }] }, h), 201, 'Patient'],
      ['patch', (h, n) => api.call('PATCH', 'Patient/read-me', JSON.stringify([{ op: 'replace', path: '/birthDate', value: born(n) }]), { ...h, ...JSON_PATCH }), 200, 'Patient'],
      ['conditional patch', (h, n) => api.call('PATCH', 'Patient?_id=read-me', JSON.stringify([{ op: 'replace', path: '/birthDate', value: born(n) }]), { ...h, ...JSON_PATCH }), 200, 'Patient'],
      ['FHIRPath patch', (h, n) => api.call('PATCH', 'Patient/read-me', {
        resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Patient.birthDate' }, { name: 'value', valueDate: born(n) }] }],
      }, h), 200, 'Patient'],
      ['Binary create from native content', (h) => api.call('POST', 'Binary', '%PDF-1.7 not really', native(h)), 201, 'Binary'],
      ['Binary update from native content', (h, n) => api.call('PUT', `Binary/b${n}`, '%PDF-1.7 not really', native(h)), 201, 'Binary'],
    ];

    test('representation (and no Prefer): the stored resource', async () => {
      let n = 0;
      for (const [name, write, status, type] of writes) {
        for (const prefer of [{}, { Prefer: 'return=representation' }] as Record<string, string>[]) {
          const res = await write(prefer, n++);
          expect({ name, status: res.status }).toEqual({ name, status });
          const body = (await res.json()) as Json;
          expect({ name, type: body.resourceType, version: body.meta?.versionId }).toEqual({ name, type, version: res.headers.get('etag')!.slice(3, -1) });
        }
      }
    });

    test('minimal: no body, the same status and version headers', async () => {
      let n = 100;
      for (const [name, write, status] of writes) {
        const res = await write({ Prefer: 'return=minimal' }, n++);
        expect({ name, status: res.status, body: await res.text() }).toEqual({ name, status, body: '' });
        expect(res.headers.get('etag')).toMatch(/^W\/"\d+"$/);
        expect(res.headers.get('last-modified')).not.toBeNull();
        if (status === 201) expect(res.headers.get('location')).toMatch(/\/(Patient|Binary)\/[^/]+\/_history\/1$/);
      }
    });

    test('OperationOutcome: an informational outcome naming the version stored', async () => {
      let n = 200;
      for (const [name, write, status] of writes) {
        const res = await write({ Prefer: 'return=OperationOutcome' }, n++);
        expect({ name, status: res.status }).toEqual({ name, status });
        const body = (await res.json()) as Json;
        expect(body.resourceType).toBe('OperationOutcome');
        expect(body.issue[0]).toMatchObject({ severity: 'information', code: 'informational' });
        const version = res.headers.get('etag')!.slice(3, -1);
        // A conditional create that matched wrote nothing: its outcome says so.
        expect({ name, text: body.issue[0].diagnostics }).toEqual({
          name, text: name === 'conditional create, matched' ? `Patient/read-me version ${version} matches If-None-Exist, so nothing was created` : expect.stringContaining(`version ${version} stored`),
        });
      }
    });

    test('every preference: Content-Location names the resource and version answered (the one a conditional write settled on)', async () => {
      let n = 300;
      for (const [name, write, , type] of writes) {
        for (const prefer of ['minimal', 'representation', 'OperationOutcome']) {
          const res = await write({ Prefer: `return=${prefer}` }, n++);
          const version = res.headers.get('etag')!.slice(3, -1);
          const location = res.headers.get('content-location');
          expect({ name, prefer, location }).toEqual({ name, prefer, location: expect.stringMatching(new RegExp(`^${api.base}/${type}/[^/]+/_history/${version}$`)) });
          if (res.headers.get('location') !== null) expect(res.headers.get('location')).toBe(location);
          const body = prefer === 'representation' ? ((await res.json()) as Json) : undefined;
          if (body) expect(location).toBe(`${api.base}/${type}/${body.id}/_history/${body.meta.versionId}`);
          if (name === 'conditional create, matched' || name.includes('patch')) expect(location).toStartWith(`${api.base}/Patient/read-me/_history/`);
        }
      }
    });

    test('delete and conditional delete: minimal is 204 without a body; otherwise an informational outcome', async () => {
      for (const id of ['d1', 'd2', 'd3', 'd4', 'd5', 'd6']) await api.put200({ resourceType: 'Patient', id });
      for (const [path, prefer] of [['Patient/d1', 'minimal'], ['Patient?_id=d2', 'minimal'], ['Patient/d3', 'OperationOutcome'], ['Patient?_id=d4', 'OperationOutcome'], ['Patient/d5', 'representation'], ['Patient?_id=d6', undefined]] as const) {
        const res = await api.del(path, prefer ? { Prefer: `return=${prefer}` } : {});
        expect(res.headers.get('etag')).toBe('W/"2"');
        if (prefer === 'minimal') {
          expect({ path, status: res.status, body: await res.text() }).toEqual({ path, status: 204, body: '' });
        } else {
          expect({ path, status: res.status }).toEqual({ path, status: 200 });
          expect(((await res.json()) as Json).issue[0]).toMatchObject({ severity: 'information', code: 'informational' });
        }
      }
    });

    for (const type of ['transaction', 'batch']) {
      /** A Bundle with each kind of entry: create, update, patch, delete, read. */
      const entries = (tag: string) => [
        { resource: { resourceType: 'Patient', active: true }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Patient', id: `${type}-${tag}`, active: true }, request: { method: 'PUT', url: `Patient/${type}-${tag}` } },
        {
          resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Patient.active' }, { name: 'value', valueBoolean: false }] }] },
          request: { method: 'PATCH', url: 'Patient/read-me' },
        },
        { request: { method: 'DELETE', url: `Patient/${type}-gone-${tag}` } },
        { request: { method: 'GET', url: 'Patient/read-me' } },
      ];
      const sendBundle = async (tag: string, prefer?: string) => {
        await api.put200({ resourceType: 'Patient', id: `${type}-gone-${tag}` });
        const res = await api.post(api.base, bundle(type, entries(tag)), prefer ? { Prefer: `return=${prefer}` } : {});
        expect(res.status).toBe(200);
        return ((await res.json()) as Json).entry as Json[];
      };

      test(`${type}: each write entry's resource by default, none with minimal, an outcome with OperationOutcome; reads keep theirs`, async () => {
        for (const prefer of [undefined, 'representation']) {
          const out = await sendBundle(`r-${prefer}`, prefer);
          expect(out.map((e) => e.response.status)).toEqual(['201 Created', '201 Created', '200 OK', '204 No Content', '200 OK']);
          expect(out.map((e) => e.resource?.resourceType ?? null)).toEqual(['Patient', 'Patient', 'Patient', null, 'Patient']);
        }
        const minimal = await sendBundle('m', 'minimal');
        expect(minimal.map((e) => e.response.status)).toEqual(['201 Created', '201 Created', '200 OK', '204 No Content', '200 OK']);
        expect(minimal.map((e) => e.resource?.resourceType ?? null)).toEqual([null, null, null, null, 'Patient']);
        expect(minimal[0]!.response.location).toMatch(/\/Patient\/[^/]+\/_history\/1$/);
        const outcome = await sendBundle('o', 'OperationOutcome');
        expect(outcome.map((e) => e.resource?.resourceType ?? null)).toEqual([null, null, null, null, 'Patient']);
        expect(outcome.map((e) => e.response.outcome?.issue[0].code ?? null)).toEqual(['informational', 'informational', 'informational', null, null]);
        expect(outcome[1]!.response.outcome.issue[0].diagnostics).toBe(`Patient/${type}-o version 1 stored`);
      });
    }

    test('OperationOutcome in a Bundle: a conditional create entry that matched says that it wrote nothing', async () => {
      for (const type of ['transaction', 'batch']) {
        const res = await api.post(api.base, bundle(type, [
          { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient', ifNoneExist: '_id=read-me' } },
          { resource: { resourceType: 'Patient', identifier: [{ system: 'urn:m', value: type }] }, request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=urn:m|${type}` } },
        ]), { Prefer: 'return=OperationOutcome' });
        const out = ((await res.json()) as Json).entry as Json[];
        expect(out.map((e) => e.response.status)).toEqual(['200 OK', '201 Created']);
        expect(out[0]!.response.outcome.issue[0].diagnostics).toMatch(/^Patient\/read-me version \d+ matches request\.ifNoneExist, so nothing was created$/);
        expect(out[1]!.response.outcome.issue[0].diagnostics).toMatch(/^Patient\/[^ ]+ version 1 stored$/);
      }
    });

    test('batch: a failed entry keeps its error outcome whatever the preference', async () => {
      const res = await api.post(api.base, bundle('batch', [
        { resource: { resourceType: 'Patient', bogus: 1 }, request: { method: 'POST', url: 'Patient' } },
        { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
      ]), { Prefer: 'return=OperationOutcome' });
      const out = ((await res.json()) as Json).entry as Json[];
      expect(out[0]!.response.status).toBe('422 Unprocessable Entity');
      expect(out[0]!.response.outcome.issue[0].severity).toBe('error');
      expect(out[1]!.response.outcome.issue[0].code).toBe('informational');
    });
  });
});
