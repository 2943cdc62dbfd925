/**
 * Transactions and batches as FHIR R4 http 3.1.0.11 and bundle.html define them, on both databases:
 * a Bundle stored as a resource keeps its own references, a reference's target type is checked after
 * its `urn:` is resolved, fullUrls are replaced in uri elements and narrative links too, relative
 * references resolve against their entry's fullUrl, the Bundle itself is validated, GET entries answer
 * the searchset a REST search does, a conditional update that matches nothing only creates, and a
 * body nested without bound is a 400.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { bundlePoster, countVersions, expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

const U = (n: number) => `urn:uuid:8e1f6a52-1b1d-4c4e-9a7e-00000000000${n}`;
const tx = (entry: Json[], type = 'transaction') => ({ resourceType: 'Bundle', type, entry });
const post = (fullUrl: string | undefined, resource: Json, extra: Json = {}) => ({
  ...(fullUrl ? { fullUrl } : {}), resource, request: { method: 'POST', url: resource.resourceType, ...extra },
});

/** A document Bundle whose Composition refers to its own Patient entry by urn. */
const documentBundle = (patientUrn: string): Json => ({
  resourceType: 'Bundle', type: 'document', identifier: { system: 'urn:ietf:rfc:3986', value: 'urn:uuid:4a3f0c2e-0000-4000-8000-000000000001' },
  timestamp: '2026-01-01T00:00:00Z',
  entry: [
    { fullUrl: U(1), resource: { resourceType: 'Composition', status: 'final', type: { text: 'note' }, date: '2026-01-01', title: 'Note', author: [{ display: 'Dr' }], subject: { reference: patientUrn } } },
    { fullUrl: patientUrn, resource: { resourceType: 'Patient', name: [{ family: 'Inner' }] } },
  ],
});

await eachStore((kind, fresh) => {
  describe(`transaction fidelity on ${kind}`, () => {
    let t: TestApp;
    let api: FhirClient;
    const { send, ok, nothingWritten } = bundlePoster(() => t, () => api);
    const read = async (location: string): Promise<Json> => {
      const res = await api.get(location.replace(/\/_history\/\d+$/, ''));
      expect(res.status).toBe(200);
      return (await res.json()) as Json;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      api = fhirClient(t, await t.token());
    });
    afterAll(() => t.close());

    test('a document Bundle stored by a transaction keeps the references among its own entries', async () => {
      const res = await ok(tx([post(undefined, documentBundle(U(2)))]));
      const stored = await read(res.entry[0].response.location);
      expect(stored.entry[0].resource.subject.reference).toBe(U(2));
      // An outer entry with the inner Patient's fullUrl does not capture the document's reference.
      const both = await ok(tx([post(U(2), { resourceType: 'Patient', name: [{ family: 'Outer' }] }), post(undefined, documentBundle(U(2)))]));
      const doc = await read(both.entry[1].response.location);
      expect(doc.entry[0].resource.subject.reference).toBe(U(2));
      const batch = await ok(tx([post(undefined, documentBundle(U(3)))], 'batch'));
      expect(batch.entry[0].response.status).toBe('201 Created');
    });

    test("a reference's target type is checked on the entry its urn names", async () => {
      const outcome = await nothingWritten(tx([
        post(U(4), { resourceType: 'Medication', code: { text: 'aspirin' } }),
        post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: U(4) } }),
      ]), 422);
      expect(outcome.issue.some((i: Json) => i.expression?.[0]?.startsWith('Bundle.entry[1].resource.subject'))).toBe(true);
      await nothingWritten(tx([
        post(U(5), { resourceType: 'Medication', code: { text: 'aspirin' } }),
        { ...post(undefined, { resourceType: 'Observation', id: 'o5', status: 'final', code: { text: 'x' }, subject: { reference: U(5) } }), request: { method: 'PUT', url: 'Observation/o5' } },
      ]), 422);
      // The entry it may name is accepted.
      const fine = await ok(tx([
        post(U(6), { resourceType: 'Patient' }),
        post(undefined, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: U(6) } }),
      ]));
      expect((await read(fine.entry[1].response.location)).subject.reference).toMatch(/^Patient\//);
    });

    test('fullUrls are replaced in uri and url elements and in narrative links, not only in references', async () => {
      const res = await ok(tx([
        post(U(7), { resourceType: 'Binary', contentType: 'text/plain', data: 'aGk=' }),
        post(undefined, {
          resourceType: 'DocumentReference', status: 'current',
          text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml"><a href="${U(7)}">the file</a> <img src='${U(7)}'/></div>` },
          content: [{ attachment: { contentType: 'text/plain', url: U(7) } }],
        }),
        post(undefined, { resourceType: 'Provenance', target: [{ reference: U(7) }], recorded: '2026-01-01T00:00:00Z', policy: [U(7), 'urn:uuid:00000000-0000-4000-8000-00000000abcd'], agent: [{ who: { display: 'x' } }] }),
      ]));
      const binary = `Binary/${res.entry[0].resource.id}`;
      const doc = await read(res.entry[1].response.location);
      expect(doc.content[0].attachment.url).toBe(binary);
      expect(doc.text.div).toContain(`href="${binary}"`);
      expect(doc.text.div).toContain(`src='${binary}'`);
      const provenance = await read(res.entry[2].response.location);
      expect(provenance.target[0].reference).toBe(binary);
      // A uri naming no entry is kept as written (a uri, unlike a reference, may name anything).
      expect(provenance.policy).toEqual([binary, 'urn:uuid:00000000-0000-4000-8000-00000000abcd']);
    });

    test("a relative reference names the entry whose fullUrl it resolves to against its own entry's", async () => {
      const res = await ok(tx([
        post(`${api.base}/Patient/given-by-client`, { resourceType: 'Patient' }),
        post(`${api.base}/Observation/obs-by-client`, { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/given-by-client' } }),
        post(U(8), { resourceType: 'Observation', status: 'final', code: { text: 'x' }, subject: { reference: 'Patient/given-by-client' } }),
      ]));
      const patient = `Patient/${res.entry[0].resource.id}`;
      expect(patient).not.toBe('Patient/given-by-client');
      expect((await read(res.entry[1].response.location)).subject.reference).toBe(patient);
      // A urn: fullUrl: relative references resolve against the FHIR base.
      expect((await read(res.entry[2].response.location)).subject.reference).toBe(patient);
    });

    test('the Bundle itself is validated: its elements, preconditions and fullUrls', async () => {
      const patient = { resourceType: 'Patient' };
      let outcome = await nothingWritten({ ...tx([post(undefined, patient)]), foo: 1 }, 422);
      expect(outcome.issue[0].expression).toEqual(['Bundle.foo']);
      outcome = await nothingWritten(tx([{ fullUrl: 'a b', ...post(undefined, patient) }]), 422);
      expect(outcome.issue[0].expression[0]).toStartWith('Bundle.entry[0].fullUrl');
      // A precondition that is not a string would otherwise be dropped and the write done unconditionally.
      await api.put200({ resourceType: 'Patient', id: 'pre' });
      outcome = await nothingWritten(tx([{ resource: { resourceType: 'Patient', id: 'pre' }, request: { method: 'PUT', url: 'Patient/pre', ifMatch: 5 } }]), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.ifMatch']);
      outcome = await nothingWritten(tx([post(undefined, patient, { ifNoneExist: 5 })]), 400);
      expect(outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.ifNoneExist']);
      // In a batch, an entry's own problem is that entry's; the others are written.
      const before = await countVersions(t);
      const batch = await ok(tx([{ ...post(undefined, patient), request: { method: 'POST', url: 'Patient', foo: 1 } }, post(undefined, patient)], 'batch'));
      expect(batch.entry.map((e: Json) => e.response.status)).toEqual(['422 Unprocessable Entity', '201 Created']);
      expect(batch.entry[0].response.outcome.issue[0].expression).toEqual(['Bundle.entry[0].request.foo']);
      expect(await countVersions(t)).toBe(before + 1);
      await nothingWritten({ ...tx([post(undefined, patient)], 'batch'), foo: 1 }, 422);
    });

    test('a GET entry answers the searchset a REST search does: includes, paging links, warnings', async () => {
      const org = await api.create({ resourceType: 'Organization', name: 'Acme' });
      for (let i = 0; i < 3; i++) await api.create({ resourceType: 'Patient', name: [{ family: 'Paged' }], managingOrganization: { reference: `Organization/${org.id}` } });
      const res = await ok(tx([{ request: { method: 'GET', url: '/Patient?family=Paged&_count=2&_include=Patient:organization&bogus=1' } }], 'batch'));
      const set = res.entry[0].resource;
      expect(set.entry.filter((e: Json) => e.search.mode === 'match')).toHaveLength(2);
      expect(set.entry.filter((e: Json) => e.search.mode === 'include').map((e: Json) => e.resource.id)).toEqual([org.id]);
      expect(set.entry.some((e: Json) => e.search.mode === 'outcome')).toBe(true);
      const next = set.link.find((l: Json) => l.relation === 'next').url as string;
      const page2 = (await (await api.get(next)).json()) as Json;
      expect(page2.entry.filter((e: Json) => e.search.mode === 'match')).toHaveLength(1);
    });

    test('a conditional update that matches nothing creates, and does not overwrite another resource of its id', async () => {
      await api.put200({ resourceType: 'Patient', id: 'other', identifier: [{ system: 'urn:s', value: 'a' }] });
      const outcome = await expectOutcome(await api.put('Patient?identifier=urn:s|zzz', { resourceType: 'Patient', id: 'other', identifier: [{ system: 'urn:s', value: 'zzz' }] }), 409);
      expect(outcome.issue[0].expression).toEqual(['id']);
      expect((await read('Patient/other')).identifier[0].value).toBe('a');
      await nothingWritten(tx([{ resource: { resourceType: 'Patient', id: 'other' }, request: { method: 'PUT', url: 'Patient?identifier=urn:s|zzz' } }]), 409);
      // An id nothing holds is created, by REST and in a transaction.
      expect((await api.put('Patient?identifier=urn:s|new1', { resourceType: 'Patient', id: 'new1', identifier: [{ system: 'urn:s', value: 'new1' }] })).status).toBe(201);
      const res = await ok(tx([{ resource: { resourceType: 'Patient', id: 'new2', identifier: [{ system: 'urn:s', value: 'new2' }] }, request: { method: 'PUT', url: 'Patient?identifier=urn:s|new2' } }]));
      expect(res.entry[0].response.status).toBe('201 Created');
    });

    test('a transaction deleting what does not exist succeeds as a REST delete does', async () => {
      const res = await ok(tx([{ request: { method: 'DELETE', url: 'Patient/never-was' } }]));
      expect(res.entry[0].response.status).toBe('204 No Content');
    });

    test('the FHIR base and the history paths answer 405 with Allow for methods they do not support', async () => {
      for (const [method, path, allow] of [
        ['PUT', '', 'GET, POST'], ['DELETE', '', 'GET, POST'], ['PATCH', '', 'GET, POST'],
        ['POST', '_history', 'GET'], ['DELETE', 'Patient/_history', 'GET'], ['POST', 'Patient/_history', 'GET'],
        ['POST', 'Patient/pre/_history', 'GET'], ['DELETE', 'Patient/pre/_history', 'GET'],
      ] as const) {
        const res = await api.call(method, path, method === 'DELETE' ? undefined : {});
        expect([method, path, res.status]).toEqual([method, path, 405]);
        expect(res.headers.get('allow')).toBe(allow);
      }
      expect((await api.call('DELETE', 'Nonsense/_history')).status).toBe(404);
    });

    test('a body nested deeper than 1000 levels is a 400; one within the bound is stored and patched', async () => {
      const nested = (depth: number) => {
        let ext: Json = { url: 'http://x', valueString: 'x' };
        for (let i = 0; i < depth; i++) ext = { url: 'http://x', extension: [ext] };
        return { resourceType: 'Patient', extension: [ext] };
      };
      await expectOutcome(await api.post('Patient', nested(12_000)), 400);
      await expectOutcome(await send(tx([post(undefined, nested(12_000))], 'batch')), 400);
      const fine = await api.create(nested(450));
      const patched = await api.call('PATCH', `Patient/${fine.id}`, [{ op: 'add', path: '/gender', value: 'other' }], { 'Content-Type': 'application/json-patch+json' });
      expect(patched.status).toBe(200);
    });
  });
});
