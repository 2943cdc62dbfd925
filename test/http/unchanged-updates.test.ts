/**
 * An update that changes nothing makes no version (crud.ts putPrepared, prepared.ts storesSame): PUT,
 * conditional update, JSON Patch and FHIRPath Patch, transaction and batch entries answer the current
 * version (200, its ETag, Last-Modified and body, as a read gives them), add no history, and leave the
 * index alone (the change token stays). A real change, a change in `meta.tag` alone included, makes a
 * version; keys in another order, or a `meta.versionId`/`lastUpdated` of the client's, do not. On both
 * databases. The clock moves 5 s before every write, so that a version written by mistake would show
 * in Last-Modified too.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, testClock, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const JSON_PATCH = { 'Content-Type': 'application/json-patch+json' };
/** A FHIRPath Patch `Parameters` of these operations (`value`: the value part's typed field). */
const fhirPatch = (...operations: { type: string; path: string; value?: Json }[]) => ({
  resourceType: 'Parameters',
  parameter: operations.map(({ type, path, value }) => ({
    name: 'operation',
    part: [{ name: 'type', valueCode: type }, { name: 'path', valueString: path }, ...(value ? [{ name: 'value', ...value }] : [])],
  })),
});

const patient = (id: string, extra: Json = {}): Json => ({
  resourceType: 'Patient', id, active: true, gender: 'female', birthDate: '2000-01-01',
  name: [{ family: 'Chalmers', given: ['Peter', 'James'] }],
  identifier: [{ system: 'urn:mrn', value: `mrn-${id}` }],
  ...extra,
});

await eachStore((kind, fresh) => {
  describe(`updates that change nothing (${kind})`, () => {
    let t: TestApp;
    let api: FhirClient;
    const clock = testClock();
    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), clock });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    /** The versions of `type/id`, newest first. */
    const history = async (ref: string) => {
      const [type, id] = ref.split('/');
      return (await t.store.resources.history('t1', { type: type!, id: id!, count: 100 })).map((v) => v.versionId);
    };
    /** What a read answers: ETag, Last-Modified and the body. */
    const read = async (ref: string) => {
      const res = await api.get(ref, { Accept: 'application/fhir+json' });
      expect(res.status).toBe(200);
      return { etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified'), body: (await res.json()) as Json };
    };
    /** A write after the clock moved on. */
    const later = async <T>(write: () => T | Promise<T>): Promise<T> => {
      clock.advance(5_000);
      return write();
    };
    /**
     * Runs `write` on `ref` and checks that it changed nothing: its answer (200) carries the read's
     * ETag and Last-Modified, and its body (when it has one) is the stored resource; the history and the
     * change token of the type are as they were.
     */
    const expectUnchanged = async (ref: string, write: () => Response | Promise<Response>, opts: { body?: boolean } = {}) => {
      const type = ref.split('/')[0]!;
      const before = await read(ref);
      const versions = await history(ref);
      const token = await t.store.resources.changeToken('t1', [type]);
      const res = await later(write);
      const text = await res.text();
      expect({ status: res.status, text: res.status === 200 ? '' : text }).toEqual({ status: 200, text: '' });
      expect({ etag: res.headers.get('etag'), lastModified: res.headers.get('last-modified') }).toEqual({ etag: before.etag, lastModified: before.lastModified });
      if (opts.body !== false) expect(JSON.parse(text)).toEqual(before.body);
      expect(res.headers.get('location')).toBeNull();
      expect(await history(ref)).toEqual(versions);
      expect(await t.store.resources.changeToken('t1', [type])).toBe(token);
      expect(await read(ref)).toEqual(before);
      return text;
    };
    /** Runs `write` and checks that it made version `version` of `ref`, after the clock moved on. */
    const expectNewVersion = async (ref: string, write: () => Response | Promise<Response>, version: number, status = 200) => {
      const before = await read(ref);
      const res = await later(write);
      const body = (await res.json()) as Json;
      expect({ status: res.status, etag: res.headers.get('etag') }).toEqual({ status, etag: `W/"${version}"` });
      expect(res.headers.get('last-modified')).not.toBe(before.lastModified);
      expect(body.meta.versionId).toBe(String(version));
      expect((await history(ref))[0]).toBe(version);
      return body;
    };

    describe('PUT', () => {
      test('the same resource again: 200 (not 201) with the current version, as a read answers it; no history', async () => {
        expect((await api.put('Patient/same', patient('same'))).status).toBe(201);
        await expectUnchanged('Patient/same', () => api.put('Patient/same', patient('same')));
        expect(await history('Patient/same')).toEqual([1]);
        // Through the API too: one version in the instance's history.
        expect(((await api.search('Patient/same/_history')).entry as Json[]).length).toBe(1);
        // A real change after it is a version as always.
        await expectNewVersion('Patient/same', () => api.put('Patient/same', patient('same', { gender: 'male' })), 2);
        await expectUnchanged('Patient/same', () => api.put('Patient/same', patient('same', { gender: 'male' })));
        expect(await history('Patient/same')).toEqual([2, 1]);
      });

      test('keys in another order, at the top and nested, are the same resource', async () => {
        await api.put200(patient('order'));
        const reordered = {
          identifier: [{ value: 'mrn-order', system: 'urn:mrn' }], birthDate: '2000-01-01',
          name: [{ given: ['Peter', 'James'], family: 'Chalmers' }], gender: 'female', active: true, id: 'order', resourceType: 'Patient',
        };
        expect(JSON.stringify(reordered)).not.toBe(JSON.stringify(patient('order')));
        await expectUnchanged('Patient/order', () => api.put('Patient/order', reordered));
      });

      test('the client\'s meta.versionId and meta.lastUpdated are the server\'s: stale or absent, still the same', async () => {
        await api.put200(patient('meta'));
        await expectUnchanged('Patient/meta', () => api.put('Patient/meta', patient('meta', { meta: { versionId: '99', lastUpdated: '1999-01-01T00:00:00Z' } })));
        await expectUnchanged('Patient/meta', () => api.put('Patient/meta', patient('meta', { meta: { lastUpdated: '2031-01-01T00:00:00.000Z' } })));
        // What a read answered, sent back as it is.
        await expectUnchanged('Patient/meta', async () => api.put('Patient/meta', (await read('Patient/meta')).body));
      });

      test('a change in meta.tag, meta.security or meta.profile alone is a change (Cinder stores meta as sent)', async () => {
        await api.put200(patient('tagged'));
        const tag = { tag: [{ system: 'urn:tags', code: 'a' }] };
        await expectNewVersion('Patient/tagged', () => api.put('Patient/tagged', patient('tagged', { meta: tag })), 2);
        await expectUnchanged('Patient/tagged', () => api.put('Patient/tagged', patient('tagged', { meta: { ...tag, versionId: '1' } })));
        await expectNewVersion('Patient/tagged', () => api.put('Patient/tagged', patient('tagged', { meta: { tag: [{ system: 'urn:tags', code: 'b' }] } })), 3);
        await expectNewVersion('Patient/tagged', () => api.put('Patient/tagged', patient('tagged', { meta: { tag: [{ system: 'urn:tags', code: 'b' }], security: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-Confidentiality', code: 'R' }] } })), 4);
        await expectNewVersion('Patient/tagged', () => api.put('Patient/tagged', patient('tagged', { meta: { profile: ['http://hl7.org/fhir/StructureDefinition/Patient'] } })), 5);
        await expectNewVersion('Patient/tagged', () => api.put('Patient/tagged', patient('tagged')), 6);
        expect(await history('Patient/tagged')).toEqual([6, 5, 4, 3, 2, 1]);
      });

      test('a change that keeps the text\'s length, and a list in another order, are changes', async () => {
        await api.put200(patient('length'));
        await expectNewVersion('Patient/length', () => api.put('Patient/length', patient('length', { birthDate: '2000-01-02' })), 2);
        // FHIR lists are ordered: the same given names the other way round are another name.
        await expectNewVersion('Patient/length', () => api.put('Patient/length', patient('length', { birthDate: '2000-01-02', name: [{ family: 'Chalmers', given: ['James', 'Peter'] }] })), 3);
      });

      test('Prefer: return=minimal and return=OperationOutcome: the same status and headers, the outcome says unchanged', async () => {
        await api.put200(patient('prefer'));
        const minimal = await expectUnchanged('Patient/prefer', () => api.put('Patient/prefer', patient('prefer'), { Prefer: 'return=minimal' }), { body: false });
        expect(minimal).toBe('');
        const outcome = JSON.parse(await expectUnchanged('Patient/prefer', () => api.put('Patient/prefer', patient('prefer'), { Prefer: 'return=OperationOutcome' }), { body: false })) as Json;
        expect(outcome.resourceType).toBe('OperationOutcome');
        expect(outcome.issue[0]).toMatchObject({ severity: 'information', code: 'informational' });
        expect(outcome.issue[0].diagnostics).toBe('Patient/prefer unchanged: the update equals version 1, so no new version was stored');
        await expectUnchanged('Patient/prefer', () => api.put('Patient/prefer', patient('prefer'), { Prefer: 'return=representation' }));
      });

      test('If-Match is checked first: a stale version is 412 even when nothing would change; the current one is unchanged', async () => {
        await api.put200(patient('locked'));
        await api.put200(patient('locked', { active: false }));
        const res = await later(() => api.put('Patient/locked', patient('locked', { active: false }), { 'If-Match': 'W/"1"' }));
        expect(res.status).toBe(412);
        await expectUnchanged('Patient/locked', () => api.put('Patient/locked', patient('locked', { active: false }), { 'If-Match': 'W/"2"' }));
        expect(await history('Patient/locked')).toEqual([2, 1]);
      });

      test('a deleted resource updated with its old content is created again (201, a new version)', async () => {
        await api.put200(patient('reborn'));
        expect((await later(() => api.del('Patient/reborn'))).status).toBe(200);
        const res = await later(() => api.put('Patient/reborn', patient('reborn')));
        expect({ status: res.status, etag: res.headers.get('etag') }).toEqual({ status: 201, etag: 'W/"3"' });
        expect(await history('Patient/reborn')).toEqual([3, 2, 1]);
        await expectUnchanged('Patient/reborn', () => api.put('Patient/reborn', patient('reborn')));
      });

      test('concurrent identical changes: one writes the version, the others find it current and write nothing', async () => {
        await api.put200(patient('race'));
        clock.advance(5_000);
        const answers = await Promise.all(Array.from({ length: 6 }, () => api.put('Patient/race', patient('race', { gender: 'other' }))));
        const seen = await Promise.all(answers.map(async (res) => [res.status, res.headers.get('etag'), ((await res.json()) as Json).gender]));
        expect(seen).toEqual(Array.from({ length: 6 }, () => [200, 'W/"2"', 'other']));
        expect(await history('Patient/race')).toEqual([2, 1]);
      });

      test('a Binary sent again as the same native content', async () => {
        const put = () => api.call('PUT', 'Binary/pdf', '%PDF-1.7 the same bytes', { 'Content-Type': 'application/pdf' });
        expect((await put()).status).toBe(201);
        await expectUnchanged('Binary/pdf', put);
        expect(await history('Binary/pdf')).toEqual([1]);
      });
    });

    describe('conditional update', () => {
      test('a match updated with the same resource, with or without its id: unchanged', async () => {
        await api.put200(patient('cond'));
        const { id: _, ...withoutId } = patient('cond');
        await expectUnchanged('Patient/cond', () => api.put('Patient?identifier=urn:mrn|mrn-cond', patient('cond')));
        await expectUnchanged('Patient/cond', () => api.put('Patient?identifier=urn:mrn|mrn-cond', withoutId));
        await expectNewVersion('Patient/cond', () => api.put('Patient?identifier=urn:mrn|mrn-cond', { ...withoutId, active: false }), 2);
      });
    });

    describe('PATCH', () => {
      test('JSON Patch whose result is the current resource: unchanged; a real one is a version', async () => {
        await api.put200(patient('jp'));
        const patch = (ops: Json[], headers: Record<string, string> = {}) => () => api.call('PATCH', 'Patient/jp', JSON.stringify(ops), { ...JSON_PATCH, ...headers });
        await expectUnchanged('Patient/jp', patch([{ op: 'replace', path: '/gender', value: 'female' }]));
        await expectUnchanged('Patient/jp', patch([{ op: 'test', path: '/active', value: true }]));
        await expectUnchanged('Patient/jp', patch([{ op: 'remove', path: '/active' }, { op: 'add', path: '/active', value: true }], { 'If-Match': 'W/"1"' }));
        await expectUnchanged('Patient/jp', () => api.call('PATCH', 'Patient?identifier=urn:mrn|mrn-jp', JSON.stringify([{ op: 'replace', path: '/birthDate', value: '2000-01-01' }]), JSON_PATCH));
        expect((await later(patch([{ op: 'replace', path: '/gender', value: 'female' }], { 'If-Match': 'W/"7"' }))).status).toBe(412);
        await expectNewVersion('Patient/jp', patch([{ op: 'replace', path: '/gender', value: 'male' }]), 2);
      });

      test('FHIRPath Patch whose result is the current resource: unchanged; a real one is a version', async () => {
        await api.put200(patient('fp'));
        const patch = (...ops: Parameters<typeof fhirPatch>) => () => api.call('PATCH', 'Patient/fp', fhirPatch(...ops));
        await expectUnchanged('Patient/fp', patch({ type: 'replace', path: 'Patient.gender', value: { valueCode: 'female' } }));
        await expectUnchanged('Patient/fp', patch({ type: 'delete', path: 'Patient.maritalStatus' }));
        await expectNewVersion('Patient/fp', patch({ type: 'replace', path: 'Patient.birthDate', value: { valueDate: '1999-12-31' } }), 2);
      });
    });

    describe('transaction and batch entries', () => {
      const put = (resource: Json) => ({ resource, request: { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } });
      const send = async (type: string, entry: Json[], headers: Record<string, string> = {}) => {
        const res = await later(() => api.post(api.base, { resourceType: 'Bundle', type, entry }, headers));
        const body = (await res.json()) as Json;
        expect({ status: res.status, type: body.type }).toEqual({ status: 200, type: `${type}-response` });
        return body.entry as Json[];
      };
      /** What an entry of an unchanged write says: 200, the current version's location, etag and lastModified, an informational outcome. */
      const unchangedEntry = async (ref: string) => {
        const current = await read(ref);
        return {
          status: '200 OK',
          location: `${api.base}/${ref}/_history/${current.body.meta.versionId}`,
          etag: current.etag,
          lastModified: current.body.meta.lastUpdated,
          outcome: { resourceType: 'OperationOutcome', issue: [expect.objectContaining({ severity: 'information', code: 'informational' })] },
        };
      };

      for (const type of ['transaction', 'batch']) {
        test(`${type}: a PUT entry (in a batch also a PATCH entry of the same resource) that changes nothing answers the current version; one that changes writes`, async () => {
          const a = patient(`${type}-a`);
          const b = patient(`${type}-b`);
          await send(type, [put(a), put(b)]);
          const before = { a: await history(`Patient/${a.id}`), b: await history(`Patient/${b.id}`) };
          const expectedA = await unchangedEntry(`Patient/${a.id}`);
          const out = await send(type, [
            put({ ...a, meta: { versionId: '42' } }),
            put({ ...b, active: false }),
            { resource: { resourceType: 'Parameters', parameter: [{ name: 'operation', part: [{ name: 'type', valueCode: 'replace' }, { name: 'path', valueString: 'Patient.gender' }, { name: 'value', valueCode: 'female' }] }] }, request: { method: 'PATCH', url: `Patient/${a.id}` } },
          ].slice(0, type === 'transaction' ? 2 : 3));
          expect(out[0]!.response).toEqual(expectedA);
          expect(out[0]!.resource).toEqual((await read(`Patient/${a.id}`)).body);
          expect(out[1]!.response).toMatchObject({ status: '200 OK', etag: 'W/"2"' });
          expect(out[1]!.response.outcome).toBeUndefined();
          if (type === 'batch') expect(out[2]!.response).toEqual(expectedA);
          expect(await history(`Patient/${a.id}`)).toEqual(before.a);
          expect(await history(`Patient/${b.id}`)).toEqual([2, ...before.b]);
        });

        test(`${type}: Prefer return=OperationOutcome keeps the outcome saying unchanged; return=minimal keeps it beside no resource`, async () => {
          const c = patient(`${type}-c`);
          await send(type, [put(c)]);
          const [outcome] = await send(type, [put(c)], { Prefer: 'return=OperationOutcome' });
          expect(outcome!.resource).toBeUndefined();
          expect(outcome!.response.outcome.issue[0].diagnostics).toBe(`Patient/${c.id} unchanged: the update equals version 1, so no new version was stored`);
          const [minimal] = await send(type, [put(c)], { Prefer: 'return=minimal' });
          expect(minimal!.resource).toBeUndefined();
          expect(minimal!.response).toEqual(await unchangedEntry(`Patient/${c.id}`));
          expect(await history(`Patient/${c.id}`)).toEqual([1]);
        });
      }

      test('transaction: references rewritten from fullUrls are compared as stored: the same Bundle again writes nothing', async () => {
        const subject = 'urn:uuid:00000000-0000-4000-8000-00000000000a';
        const bundle = [
          { fullUrl: subject, ...put(patient('tx-subject')) },
          put({ resourceType: 'Observation', id: 'tx-obs', status: 'final', code: { text: 'weight' }, subject: { reference: subject } }),
        ];
        const first = await send('transaction', structuredClone(bundle));
        expect(first.map((e) => e.response.status)).toEqual(['201 Created', '201 Created']);
        expect((await read('Observation/tx-obs')).body.subject.reference).toBe('Patient/tx-subject');
        const expected = [await unchangedEntry('Patient/tx-subject'), await unchangedEntry('Observation/tx-obs')];
        const again = await send('transaction', structuredClone(bundle));
        expect(again.map((e) => e.response)).toEqual(expected);
        expect(await history('Observation/tx-obs')).toEqual([1]);
      });

      test('transaction: a PATCH entry whose result is the current resource', async () => {
        await api.put200(patient('tx-patch'));
        const expected = await unchangedEntry('Patient/tx-patch');
        const [out] = await send('transaction', [{
          resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: btoa(JSON.stringify([{ op: 'replace', path: '/active', value: true }])) },
          request: { method: 'PATCH', url: 'Patient/tx-patch' },
        }]);
        expect(out!.response).toEqual(expected);
        expect(await history('Patient/tx-patch')).toEqual([1]);
      });

      test('transaction: a conditional PUT entry that matches and changes nothing', async () => {
        await api.put200(patient('tx-cond'));
        const { id: _, ...withoutId } = patient('tx-cond');
        const expected = await unchangedEntry('Patient/tx-cond');
        const [out] = await send('transaction', [{ resource: withoutId, request: { method: 'PUT', url: 'Patient?identifier=urn:mrn|mrn-tx-cond' } }]);
        expect(out!.response).toEqual(expected);
        expect(await history('Patient/tx-cond')).toEqual([1]);
      });
    });
  });
});
