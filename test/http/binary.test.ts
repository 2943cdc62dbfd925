/**
 * Binary with native content (FHIR R4 http.html "Binary", binary.html): raw create, update and read,
 * Accept negotiation, X-Security-Context and the securityContext access rule, the Binary size limit,
 * and Binary in bulk export, on both databases.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { randomBytes } from 'node:crypto';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { download, eachStore, finish, kickOff, observation, patient, put } from '../helpers/export.ts';
import { craftToken, expectOutcome, type Json } from '../helpers/fhir.ts';
import { parseFhirXml } from '../../src/fhir/xml/from-xml.ts';

/** Bytes 0..255 four times, then random bytes: every byte value, and no pattern a codec could get right by luck. */
const BYTES = Buffer.concat([Buffer.from(Array.from({ length: 1024 }, (_, i) => i % 256)), randomBytes(5000)]);
/** A PNG signature and IHDR chunk start, then bytes that are not UTF-8. */
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]), randomBytes(301)]);
const PDF = Buffer.concat([Buffer.from('%PDF-1.7\n%\xe2\xe3\xcf\xd3\n', 'latin1'), randomBytes(1000), Buffer.from('\n%%EOF\n')]);

/** A body that streams `total` bytes in 1 KiB chunks without a Content-Length; counts what was pulled. */
function endless(total: number) {
  const chunk = randomBytes(1024);
  const seen = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (seen.pulled >= total) return controller.close();
      seen.pulled += chunk.byteLength;
      controller.enqueue(new Uint8Array(chunk));
    },
    cancel() {
      seen.cancelled = true;
    },
  });
  return { stream, seen };
}

await eachStore((kind, fresh) => {
  describe(`Binary native content (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const auth = (tok = token) => ({ Authorization: `Bearer ${tok}` });
    const url = (path: string) => `${t.fhir()}/${path}`;
    const send = (method: string, path: string, body: BodyInit, headers: Record<string, string>, tok?: string) =>
      t.request(url(path), { method, body, headers: { ...auth(tok), ...headers } });
    const get = (path: string, headers: Record<string, string> = {}, tok?: string) => t.request(url(path), { headers: { ...auth(tok), ...headers } });
    const idOf = (res: Response) => /\/Binary\/([^/]+)\/_history\//.exec(res.headers.get('location') ?? '')![1]!;

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh(), env: { CINDER_MAX_BINARY_BYTES: String(64 * 1024) } });
      token = await t.token();
      await put(t, patient('p1'));
      await put(t, patient('p2'));
      await put(t, observation('o1', 'p1'));
      await put(t, observation('o2', 'p2'));
    });
    afterAll(() => t.close());

    test('POST with a native type stores the exact bytes; a read without Accept answers them with the content type', async () => {
      for (const [type, bytes] of [['application/octet-stream', BYTES], ['image/png', PNG], ['application/pdf', PDF]] as const) {
        const created = await send('POST', 'Binary', bytes, { 'Content-Type': type });
        expect(created.status).toBe(201);
        expect(created.headers.get('etag')).toBe('W/"1"');
        const stored = (await created.json()) as Json;
        expect(stored).toMatchObject({ resourceType: 'Binary', contentType: type, meta: { versionId: '1' } });
        expect(stored.securityContext).toBeUndefined();

        const raw = await get(`Binary/${idOf(created)}`);
        expect(raw.status).toBe(200);
        expect(raw.headers.get('content-type')).toBe(type);
        expect(raw.headers.get('content-length')).toBe(String(bytes.byteLength));
        expect(raw.headers.get('etag')).toBe('W/"1"');
        expect(raw.headers.get('last-modified')).toBe(created.headers.get('last-modified'));
        expect(Buffer.from(await raw.arrayBuffer()).equals(bytes)).toBe(true);
      }
    });

    test('native content that a browser would run (HTML, SVG) is served sandboxed, in a vread too; a PDF stays viewable', async () => {
      const page = Buffer.from('<!doctype html><script>fetch("/oauth2/userinfo")</script>');
      for (const type of ['text/html', 'text/html; charset=utf-8', 'image/svg+xml', 'application/octet-stream', 'image/png']) {
        const created = await send('POST', 'Binary', page, { 'Content-Type': type });
        expect(created.status).toBe(201);
        for (const path of [`Binary/${idOf(created)}`, `Binary/${idOf(created)}/_history/1`]) {
          const raw = await get(path, { Accept: 'text/html,*/*;q=0.8' });
          expect(raw.status).toBe(200);
          expect(raw.headers.get('content-type')).toBe(type);
          expect(raw.headers.get('content-security-policy')).toBe('sandbox');
          expect(raw.headers.get('x-content-type-options')).toBe('nosniff');
          expect(raw.headers.get('content-disposition')).toBeNull();
          expect(Buffer.from(await raw.arrayBuffer()).equals(page)).toBe(true);
        }
        const head = await t.request(url(`Binary/${idOf(created)}`), { method: 'HEAD', headers: auth() });
        expect(head.headers.get('content-security-policy')).toBe('sandbox');
      }
      const pdf = await send('POST', 'Binary', PDF, { 'Content-Type': 'application/pdf' });
      const raw = await get(`Binary/${idOf(pdf)}`);
      expect(raw.headers.get('content-type')).toBe('application/pdf');
      expect(raw.headers.get('content-security-policy')).toBeNull();
      // The FHIR form is JSON, not the content: no sandbox is needed there.
      const json = await get(`Binary/${idOf(pdf)}`, { Accept: 'application/fhir+json' });
      expect(json.headers.get('content-type')).toContain('application/fhir+json');
    });

    test('native content streamed in chunks of any size, 0-2 bytes of a group carried across several, is stored byte for byte', async () => {
      const bytes = randomBytes(20_000);
      const sizes = [1, 1, 2, 1, 3, 4, 5, 7, 1, 11, 1000, 1001, 1, 2, 2, 3000];
      const stream = new ReadableStream<Uint8Array>({
        start(controller) {
          let at = 0;
          for (let i = 0; at < bytes.byteLength; i++) {
            const end = Math.min(at + sizes[i % sizes.length]!, bytes.byteLength);
            controller.enqueue(new Uint8Array(bytes.subarray(at, end)));
            at = end;
          }
          controller.close();
        },
      });
      const created = await send('POST', 'Binary', stream, { 'Content-Type': 'application/octet-stream' });
      expect(created.status).toBe(201);
      expect(((await created.json()) as Json).data).toBe(bytes.toString('base64'));
      expect(Buffer.from(await (await get(`Binary/${idOf(created)}`)).arrayBuffer()).equals(bytes)).toBe(true);
    });

    test('an empty body is an empty file: a Binary without data, read back as zero bytes', async () => {
      const created = await send('POST', 'Binary', new Uint8Array(0), { 'Content-Type': 'text/plain' });
      expect(created.status).toBe(201);
      const stored = (await created.json()) as Json;
      expect(stored).toMatchObject({ resourceType: 'Binary', contentType: 'text/plain' });
      expect(stored.data).toBeUndefined();
      const raw = await get(`Binary/${idOf(created)}`);
      expect([raw.status, raw.headers.get('content-type'), raw.headers.get('content-length'), (await raw.arrayBuffer()).byteLength]).toEqual([200, 'text/plain', '0', 0]);
      // A PUT of nothing empties a Binary that had content; its first version keeps the bytes.
      const emptied = await send('PUT', 'Binary/emptied', PNG, { 'Content-Type': 'image/png' });
      expect(emptied.status).toBe(201);
      expect((await send('PUT', 'Binary/emptied', '', { 'Content-Type': 'image/png' })).status).toBe(200);
      expect((await (await get('Binary/emptied')).arrayBuffer()).byteLength).toBe(0);
      expect(Buffer.from(await (await get('Binary/emptied/_history/1')).arrayBuffer()).equals(PNG)).toBe(true);
    });

    test('the JSON read of the same Binary carries the bytes as base64 data; _format=json and application/json too', async () => {
      const id = idOf(await send('POST', 'Binary', BYTES, { 'Content-Type': 'application/octet-stream' }));
      for (const [path, headers, type] of [
        [`Binary/${id}`, { Accept: 'application/fhir+json' }, 'application/fhir+json'], [`Binary/${id}`, { Accept: 'application/json' }, 'application/json'],
        [`Binary/${id}?_format=json`, {}, 'application/fhir+json'], [`Binary/${id}`, { Accept: 'application/fhir+json, */*;q=0.8' }, 'application/fhir+json'],
      ] as const) {
        const res = await get(path, headers);
        expect(res.status).toBe(200);
        // Generic JSON asked for is answered as such (http.html 3.1.0.1.10).
        expect(res.headers.get('content-type')).toStartWith(type);
        const body = (await res.json()) as Json;
        expect(body.id).toBe(id);
        expect(Buffer.from(body.data, 'base64').equals(BYTES)).toBe(true);
      }
    });

    test('Content-Type parameters are kept as sent; text comes back byte for byte', async () => {
      const text = 'Grüße, 世界\n';
      const created = await send('POST', 'Binary', text, { 'Content-Type': 'text/plain; charset=utf-8' });
      expect(created.status).toBe(201);
      expect(((await created.json()) as Json).contentType).toBe('text/plain; charset=utf-8');
      const raw = await get(`Binary/${idOf(created)}`, { Accept: 'text/*' });
      expect(raw.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await raw.text()).toBe(text);
    });

    test('Accept: the content type, a wildcard or a preferred native type answers the content; neither is 406', async () => {
      const id = idOf(await send('POST', 'Binary', PNG, { 'Content-Type': 'image/png' }));
      for (const accept of ['image/png', 'image/*', '*/*', 'text/html, */*;q=0.8', 'image/png, application/fhir+json;q=0.5']) {
        const res = await get(`Binary/${id}`, { Accept: accept });
        expect({ accept, status: res.status, type: res.headers.get('content-type') }).toEqual({ accept, status: 200, type: 'image/png' });
        expect(Buffer.from(await res.arrayBuffer()).equals(PNG)).toBe(true);
      }
      await expectOutcome(await get(`Binary/${id}`, { Accept: 'application/pdf' }), 406, 'not-supported');
      // text/* and not FHIR JSON: the content is no text, so 406; its OperationOutcome is the JSON text/* admits, labelled text/json.
      const textOnly = await get(`Binary/${id}`, { Accept: 'text/*, application/fhir+json;q=0' });
      expect([textOnly.status, textOnly.headers.get('content-type')]).toEqual([406, 'text/json; charset=utf-8']);
      expect(((await textOnly.json()) as Json).issue).toEqual([expect.objectContaining({ code: 'not-supported' })]);
      await expectOutcome(await get(`Binary/${id}?_format=turtle`), 406, 'not-supported');
      // A FHIR XML format asked for: the Binary resource in XML, data in base64.
      for (const [path, accept] of [[`Binary/${id}?_format=xml`, undefined], [`Binary/${id}`, 'application/fhir+xml']] as const) {
        const xml = await get(path, accept === undefined ? {} : { Accept: accept });
        expect([path, xml.status, xml.headers.get('content-type')]).toEqual([path, 200, 'application/fhir+xml; charset=utf-8']);
        expect(parseFhirXml(await xml.text())).toMatchObject({ resourceType: 'Binary', contentType: 'image/png', data: PNG.toString('base64') });
      }
      // Other paths speak FHIR JSON and XML only.
      await expectOutcome(await get('Patient/p1', { Accept: 'image/png' }), 406, 'not-supported');
    });

    test('PUT with native content makes version 2 (and creates on update); vread answers each version', async () => {
      const id = idOf(await send('POST', 'Binary', PNG, { 'Content-Type': 'image/png' }));
      const updated = await send('PUT', `Binary/${id}`, PDF, { 'Content-Type': 'application/pdf', 'If-Match': 'W/"1"', Prefer: 'return=minimal' });
      expect(updated.status).toBe(200);
      expect(updated.headers.get('etag')).toBe('W/"2"');
      expect(await updated.text()).toBe('');
      const current = await get(`Binary/${id}`);
      expect(current.headers.get('content-type')).toBe('application/pdf');
      expect(current.headers.get('etag')).toBe('W/"2"');
      expect(Buffer.from(await current.arrayBuffer()).equals(PDF)).toBe(true);
      const v1 = await get(`Binary/${id}/_history/1`);
      expect(v1.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await v1.arrayBuffer()).equals(PNG)).toBe(true);
      expect(((await (await get(`Binary/${id}/_history/2`, { Accept: 'application/fhir+json' })).json()) as Json).meta.versionId).toBe('2');

      await expectOutcome(await send('PUT', `Binary/${id}`, PNG, { 'Content-Type': 'image/png', 'If-Match': 'W/"1"' }), 412);
      const created = await send('PUT', 'Binary/client-chosen', BYTES, { 'Content-Type': 'application/octet-stream' });
      expect(created.status).toBe(201);
      expect(Buffer.from(await (await get('Binary/client-chosen')).arrayBuffer()).equals(BYTES)).toBe(true);
    });

    test('FHIR JSON bodies stay ordinary Binary writes; a FHIR type other than JSON, or none, is 415', async () => {
      const res = await send('POST', 'Binary', JSON.stringify({ resourceType: 'Binary', contentType: 'text/plain', data: 'aGVsbG8=' }), { 'Content-Type': 'application/fhir+json' });
      expect(res.status).toBe(201);
      const raw = await get(`Binary/${idOf(res)}`);
      expect(raw.headers.get('content-type')).toBe('text/plain');
      expect(await raw.text()).toBe('hello');
      // `data` not last, or another `data` (an Attachment in an extension) before it: still the right bytes.
      for (const json of [
        { resourceType: 'Binary', data: 'aGVsbG8=', contentType: 'text/plain' },
        { resourceType: 'Binary', _contentType: { extension: [{ url: 'http://example.org/a', valueAttachment: { contentType: 'text/plain', data: 'AAAA' } }] }, contentType: 'text/plain', data: 'aGVsbG8=' },
      ]) {
        const other = await send('POST', 'Binary', JSON.stringify(json), { 'Content-Type': 'application/fhir+json' });
        expect(other.status).toBe(201);
        expect(await (await get(`Binary/${idOf(other)}`)).text()).toBe('hello');
      }
      // A FHIR XML body is a Binary resource too (not in the FHIR namespace here: a 400); a generic XML type is native content.
      await expectOutcome(await send('POST', 'Binary', '<Binary/>', { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }), 400);
      const fromXml = await send('POST', 'Binary', '<Binary xmlns="http://hl7.org/fhir"><contentType value="text/plain"/><data value="aGVsbG8="/></Binary>', { 'Content-Type': 'application/fhir+xml' });
      expect(fromXml.status).toBe(201);
      expect(await (await get(`Binary/${idOf(fromXml)}`)).text()).toBe('hello');
      const cda = await send('POST', 'Binary', '<ClinicalDocument xmlns="urn:hl7-org:v3"/>', { 'Content-Type': 'application/xml' });
      expect(cda.status).toBe(201);
      expect(await (await get(`Binary/${idOf(cda)}`)).text()).toBe('<ClinicalDocument xmlns="urn:hl7-org:v3"/>');
      await expectOutcome(await t.request(url('Binary'), { method: 'POST', body: new Uint8Array([1, 2, 3]), headers: { ...auth(), 'Content-Type': '' } }), 415);
      // A JSON write answers JSON: a non-JSON Accept on a Binary instance write is still 406.
      await expectOutcome(await send('PUT', 'Binary/client-chosen', PNG, { 'Content-Type': 'image/png', Accept: 'image/png' }), 406);
    });

    test('X-Security-Context sets securityContext; a patient-context token reaches only Binaries of its compartment', async () => {
      const ctx = async (context: string) => idOf(await send('POST', 'Binary', PNG, { 'Content-Type': 'image/png', 'X-Security-Context': context }));
      const ofP1 = await ctx('Patient/p1');
      const ofO1 = await ctx('Observation/o1');
      const ofP2 = await ctx('Patient/p2');
      const ofO2 = await ctx('Observation/o2');
      const ofMissing = await ctx('Observation/none');
      const free = idOf(await send('POST', 'Binary', PNG, { 'Content-Type': 'image/png' }));
      expect(((await (await get(`Binary/${ofO1}`, { Accept: 'application/fhir+json' })).json()) as Json).securityContext).toEqual({ reference: 'Observation/o1' });
      expect((await get(`Binary/${ofO1}`)).headers.get('x-security-context')).toBe('Observation/o1');

      const p1 = await craftToken(t, 'patient/*.read', { patient: 'p1' });
      for (const id of [ofP1, ofO1, free]) expect((await get(`Binary/${id}`, {}, p1)).status).toBe(200);
      for (const id of [ofP2, ofO2, ofMissing]) await expectOutcome(await get(`Binary/${id}`, {}, p1), 403, 'forbidden');
      await expectOutcome(await get(`Binary/${ofO2}/_history/1`, { Accept: 'application/fhir+json' }, p1), 403, 'forbidden');

      // Search and instance history leave out what the token may not reach.
      const found = (await (await get(`Binary?_count=1000`, {}, p1)).json()) as Json;
      const ids = (found.entry ?? []).map((e: Json) => e.resource.id);
      expect(ids).toContain(ofP1);
      // One without a context is read by its id, but a patient's search lists none (every patient's unfiled files).
      for (const id of [ofP2, ofO2, ofMissing, free]) expect(ids).not.toContain(id);
      await expectOutcome(await get(`Binary/${ofO2}/_history`, {}, p1), 403, 'forbidden');
      expect((await get(`Binary/${ofO1}/_history`, {}, p1)).status).toBe(200);

      // Binary scopes alone do not reach a context the token may not read.
      const binaryOnly = await craftToken(t, 'system/Binary.read');
      expect((await get(`Binary/${free}`, {}, binaryOnly)).status).toBe(200);
      await expectOutcome(await get(`Binary/${ofO1}`, {}, binaryOnly), 403, 'forbidden');
      const system = await craftToken(t, 'system/Binary.read system/Observation.read');
      expect((await get(`Binary/${ofO2}`, {}, system)).status).toBe(200);
      // Type history likewise shows only the versions whose context the token reaches.
      const historyIds = async (token: string) => {
        const res = await get('Binary/_history?_count=1000', { Accept: 'application/fhir+json' }, token);
        expect(res.status).toBe(200);
        return new Set((((await res.json()) as Json).entry ?? []).map((e: Json) => e.fullUrl.split('/').at(-1)));
      };
      const binaryHistory = await historyIds(binaryOnly);
      expect(binaryHistory.has(free)).toBe(true);
      for (const id of [ofO1, ofO2, ofP1]) expect(binaryHistory.has(id)).toBe(false);
      const systemHistory = await historyIds(system);
      for (const id of [free, ofO1, ofO2]) expect(systemHistory.has(id)).toBe(true);
      expect(systemHistory.has(ofP1)).toBe(false);

      // Included resources likewise (`_include`, and what $everything includes): a Provenance of p1's names every Binary.
      const provenance = {
        resourceType: 'Provenance', id: 'pv-binaries', recorded: '2026-01-01T00:00:00Z', agent: [{ who: { reference: 'Patient/p1' } }],
        target: [{ reference: 'Patient/p1' }, ...[ofP1, ofO1, ofP2, ofO2, ofMissing, free].map((id) => ({ reference: `Binary/${id}` }))],
      };
      expect((await send('PUT', 'Provenance/pv-binaries', JSON.stringify(provenance), { 'Content-Type': 'application/fhir+json' })).status).toBe(201);
      const included = async (path: string, tok: string) => {
        const res = await get(path, { Accept: 'application/fhir+json' }, tok);
        expect(res.status).toBe(200);
        return (((await res.json()) as Json).entry ?? []).filter((e: Json) => e.resource.resourceType === 'Binary').map((e: Json) => e.resource.id).sort();
      };
      const include = 'Provenance?_id=pv-binaries&_include=Provenance:target';
      expect(await included(include, p1)).toEqual([ofP1, ofO1, free].sort());
      expect(await included('Patient/p1/$everything', p1)).toEqual([ofP1, ofO1, free].sort());
      expect(await included(include, await craftToken(t, 'system/Provenance.read system/Binary.read'))).toEqual([free]);
      expect(await included(include, await craftToken(t, 'system/Provenance.read system/Binary.read system/Observation.read'))).toEqual([ofO1, ofO2, ofMissing, free].sort());

      // Writes: the stored and the new context must both be within reach.
      const p1w = await craftToken(t, 'patient/*.*', { patient: 'p1' });
      expect((await send('PUT', `Binary/${ofO1}`, PDF, { 'Content-Type': 'application/pdf', 'X-Security-Context': 'Patient/p1' }, p1w)).status).toBe(200);
      await expectOutcome(await send('PUT', `Binary/${ofO2}`, PDF, { 'Content-Type': 'application/pdf', 'X-Security-Context': 'Patient/p1' }, p1w), 403, 'forbidden');
      await expectOutcome(await send('POST', 'Binary', PDF, { 'Content-Type': 'application/pdf', 'X-Security-Context': 'Observation/o2' }, p1w), 403, 'forbidden');
      await expectOutcome(await t.request(url(`Binary/${ofP2}`), { method: 'DELETE', headers: auth(p1w) }), 403, 'forbidden');
      expect((await send('POST', 'Binary', PDF, { 'Content-Type': 'application/pdf', 'X-Security-Context': 'Observation/o1' }, p1w)).status).toBe(201);
      // The JSON form is held to the same rule, alone and in a transaction.
      const json = { resourceType: 'Binary', contentType: 'text/plain', data: 'aGk=', securityContext: { reference: 'Patient/p2' } };
      await expectOutcome(await send('POST', 'Binary', JSON.stringify(json), { 'Content-Type': 'application/fhir+json' }, p1w), 403, 'forbidden');
      const bundle = { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: json, request: { method: 'POST', url: 'Binary' } }] };
      await expectOutcome(await t.request(t.fhir(), { method: 'POST', body: JSON.stringify(bundle), headers: { ...auth(p1w), 'Content-Type': 'application/fhir+json' } }), 403, 'forbidden');
      // So is a patch's result, alone and as a Bundle entry: a patch cannot move a Binary out of reach.
      const toP2 = JSON.stringify([{ op: 'replace', path: '/securityContext', value: { reference: 'Patient/p2' } }]);
      await expectOutcome(await send('PATCH', `Binary/${ofO1}`, toP2, { 'Content-Type': 'application/json-patch+json' }, p1w), 403, 'forbidden');
      const patchEntry = { resource: { resourceType: 'Binary', contentType: 'application/json-patch+json', data: Buffer.from(toP2).toString('base64') }, request: { method: 'PATCH', url: `Binary/${ofO1}` } };
      for (const type of ['transaction', 'batch']) {
        const res = await t.request(t.fhir(), { method: 'POST', body: JSON.stringify({ resourceType: 'Bundle', type, entry: [patchEntry] }), headers: { ...auth(p1w), 'Content-Type': 'application/fhir+json' } });
        if (type === 'transaction') await expectOutcome(res, 403, 'forbidden');
        else expect((((await res.json()) as Json).entry[0].response.status as string)).toStartWith('403');
      }
      const toO1 = JSON.stringify([{ op: 'replace', path: '/securityContext', value: { reference: 'Observation/o1' } }]);
      expect((await send('PATCH', `Binary/${ofO1}`, toO1, { 'Content-Type': 'application/json-patch+json' }, p1w)).status).toBe(200);
      expect((await get(`Binary/${ofO1}`, {}, p1w)).headers.get('x-security-context')).toBe('Observation/o1');
    });

    test('counts (_summary=count, _total, across types) leave out the Binaries the token may not reach', async () => {
      // A tenant of its own, so that the other tests' Binaries are not counted.
      await t.tokenFor('counts', ['system/*.*']);
      await put(t, patient('qa'), 'counts');
      await put(t, patient('qb'), 'counts');
      const binary = (id: string, context?: string) => put(t, { resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', ...(context ? { securityContext: { reference: context } } : {}) }, 'counts');
      await binary('of-qa', 'Patient/qa');
      await binary('of-qb', 'Patient/qb');
      await binary('of-qb-2', 'Patient/qb');
      await binary('free');
      const counts = async (tok: string) => {
        const total = async (path: string) => {
          const res = await t.request(`${t.fhir('counts')}/${path}`, { headers: auth(tok) });
          expect(res.status).toBe(200);
          return ((await res.json()) as Json).total as number;
        };
        return [await total('Binary?_summary=count'), await total('Binary?_total=accurate&_count=1'), await total('Binary?_count=0'),
          await total('?_type=Binary&_summary=count'), await total('?_type=Binary&_total=accurate&_count=1')];
      };
      // A patient's token counts its own and not the one without a context, which its searches do not list.
      expect(await counts(await craftToken(t, 'patient/*.read', { tenant: 'counts', patient: 'qa' }))).toEqual([1, 1, 1, 1, 1]);
      expect(await counts(await craftToken(t, 'system/Binary.read', { tenant: 'counts' }))).toEqual([1, 1, 1, 1, 1]);
      expect(await counts(await craftToken(t, 'system/Binary.read system/Patient.read', { tenant: 'counts' }))).toEqual([4, 4, 4, 4, 4]);
      // Past one batch of Binaries read to be counted, the next batches continue where it ended.
      for (let i = 0; i < 1000; i++) await binary(`more-${String(i).padStart(4, '0')}`, i % 2 ? 'Patient/qb' : 'Patient/qa');
      expect(await counts(await craftToken(t, 'patient/*.read', { tenant: 'counts', patient: 'qa' }))).toEqual([501, 501, 501, 501, 501]);
    }, 60_000);

    test('pages tell nothing of the Binaries the token may not reach: full pages, no next link past its last, _offset counting those within', async () => {
      // A tenant of its own. In id order, qb's Binaries come first, then qa's: a page of one read qb's,
      // left it out and linked on, telling that another patient's Binary matched (of any `_filter`).
      await t.tokenFor('pages', ['system/*.*']);
      await put(t, patient('qa'), 'pages');
      await put(t, patient('qb'), 'pages');
      const binary = (id: string, context: string) => put(t, { resourceType: 'Binary', id, contentType: 'text/plain', data: 'aGk=', securityContext: { reference: context } }, 'pages');
      await binary('a-qb', 'Patient/qb');
      await binary('b-qb', 'Patient/qb');
      await binary('c-qa', 'Patient/qa');
      await binary('d-qb', 'Patient/qb');
      await binary('e-qa', 'Patient/qa');
      const tok = await craftToken(t, 'patient/*.read', { tenant: 'pages', patient: 'qa' });
      const page = async (path: string) => {
        const res = await t.request(path.startsWith('http') ? path : `${t.fhir('pages')}/${path}`, { headers: { ...auth(tok), Accept: 'application/fhir+json' } });
        expect({ path, status: res.status }).toEqual({ path, status: 200 });
        const b = (await res.json()) as Json;
        return { ids: (b.entry ?? []).map((e: Json) => e.resource.id as string), next: (b.link ?? []).find((l: Json) => l.relation === 'next')?.url as string | undefined };
      };
      for (const query of ['Binary?_count=1', '?_type=Binary&_count=1', '?_type=Binary&_count=1&_sort=_lastUpdated', 'Binary?_count=1&_sort=-_lastUpdated']) {
        const seen: string[] = [];
        let next: string | undefined = query;
        while (next !== undefined) {
          const p = await page(next);
          expect({ query, entries: p.ids.length }).toEqual({ query, entries: 1 });
          seen.push(...p.ids);
          next = p.next;
        }
        expect({ query, seen: seen.sort() }).toEqual({ query, seen: ['c-qa', 'e-qa'] });
      }
      expect(await page(`Binary?_count=1&_id=a-qb,c-qa`)).toEqual({ ids: ['c-qa'], next: undefined });
      expect((await page('Binary?_offset=1')).ids).toEqual(['e-qa']);
      expect((await page('Binary?_offset=2')).ids).toEqual([]);
    });

    test('a securityContext written as the absolute URL of a resource of the tenant is that resource, for every rule', async () => {
      const json = (context: string) => JSON.stringify({ resourceType: 'Binary', contentType: 'text/plain', data: 'aGk=', securityContext: { reference: context } });
      const absolute = `${t.fhir()}/Patient/p2`;
      const created = await send('POST', 'Binary', json(absolute), { 'Content-Type': 'application/fhir+json' });
      expect(created.status).toBe(201);
      const id = idOf(created);
      const binaryOnly = await craftToken(t, 'system/Binary.cruds');
      await expectOutcome(await get(`Binary/${id}`, {}, binaryOnly), 403, 'forbidden');
      await expectOutcome(await get(`Binary/${id}/_history`, {}, binaryOnly), 403, 'forbidden');
      const found = (await (await get(`Binary?_id=${id}`, { Accept: 'application/fhir+json' }, binaryOnly)).json()) as Json;
      expect(found.entry ?? []).toEqual([]);
      await expectOutcome(await send('PUT', `Binary/${id}`, PNG, { 'Content-Type': 'image/png' }, binaryOnly), 403, 'forbidden');
      await expectOutcome(await send('POST', 'Binary', json(absolute), { 'Content-Type': 'application/fhir+json' }, binaryOnly), 403, 'forbidden');
      // Filtered to female Patients: p2 is not one (its gender is not female).
      const femaleOnly = await craftToken(t, 'system/Binary.cruds system/Patient.rs?gender=female');
      await expectOutcome(await get(`Binary/${id}`, {}, femaleOnly), 403, 'forbidden');
      await expectOutcome(await send('POST', 'Binary', json(absolute), { 'Content-Type': 'application/fhir+json' }, femaleOnly), 403, 'forbidden');
      // p2's own token reaches it, as it reaches the relative form; p1's does not.
      expect((await get(`Binary/${id}`, {}, await craftToken(t, 'patient/*.read', { patient: 'p2' }))).status).toBe(200);
      await expectOutcome(await get(`Binary/${id}`, {}, await craftToken(t, 'patient/*.read', { patient: 'p1' })), 403, 'forbidden');
      expect((await get(`Binary/${id}`, {}, await craftToken(t, 'system/Binary.read system/Patient.read'))).status).toBe(200);
      // Another server's URL names no resource of the tenant: admitted beside Binary scopes, refused to patient-context tokens.
      const elsewhere = idOf(await send('POST', 'Binary', json('https://elsewhere.example/fhir/Patient/p2'), { 'Content-Type': 'application/fhir+json' }));
      expect((await get(`Binary/${elsewhere}`, {}, binaryOnly)).status).toBe(200);
      await expectOutcome(await get(`Binary/${elsewhere}`, {}, await craftToken(t, 'patient/*.read', { patient: 'p2' })), 403, 'forbidden');
      // Export with Binary scopes alone leaves it out.
      const exportOnly = await craftToken(t, 'system/Binary.read');
      const files = await download(t, exportOnly, (await finish(t, exportOnly, await kickOff(t, exportOnly, '/$export?_type=Binary'))).output);
      const exported = (files.Binary ?? []).map((r) => r.id);
      expect(exported).toContain(elsewhere);
      expect(exported).not.toContain(id);
    });

    test('conditional reads: If-None-Match and If-Modified-Since answer 304 for the content and for the resource', async () => {
      const res = await send('POST', 'Binary', PNG, { 'Content-Type': 'image/png' });
      const id = idOf(res);
      const lastModified = res.headers.get('last-modified')!;
      for (const accept of [{}, { Accept: 'application/fhir+json' }] as Record<string, string>[]) {
        for (const path of [`Binary/${id}`, `Binary/${id}/_history/1`]) {
          const fresh = await get(path, { ...accept, 'If-None-Match': 'W/"1"' });
          expect({ path, status: fresh.status, body: await fresh.text() }).toEqual({ path, status: 304, body: '' });
          expect(fresh.headers.get('etag')).toBe('W/"1"');
          expect((await get(path, { ...accept, 'If-Modified-Since': lastModified })).status).toBe(304);
          expect((await get(path, { ...accept, 'If-None-Match': 'W/"9"' })).status).toBe(200);
        }
      }
    });

    test('over CINDER_MAX_BINARY_BYTES: 413 by Content-Length before reading, and a chunked body cut off at the limit', async () => {
      const declared = endless(1024 * 1024);
      const res = await t.request(url('Binary'), {
        method: 'POST', body: declared.stream,
        headers: { ...auth(), 'Content-Type': 'application/octet-stream', 'Content-Length': String(1024 * 1024) },
      });
      const outcome = await expectOutcome(res, 413, 'too-costly');
      expect(outcome.issue[0].details.text).toContain(`limit of ${64 * 1024} bytes`);
      expect(declared.seen.pulled).toBeLessThan(64 * 1024);

      const chunked = endless(10 * 1024 * 1024);
      await expectOutcome(await t.request(url('Binary/big'), { method: 'PUT', body: chunked.stream, headers: { ...auth(), 'Content-Type': 'image/png' } }), 413, 'too-costly');
      expect(chunked.seen.pulled).toBeLessThan(128 * 1024);
      expect(chunked.seen.cancelled).toBe(true);
      expect((await get('Binary/big')).status).toBe(404);
      // Just under the limit is stored (the resource limit, 16 MiB, does not apply to native content).
      const whole = randomBytes(64 * 1024);
      const ok = await send('POST', 'Binary', whole, { 'Content-Type': 'application/octet-stream' });
      expect(ok.status).toBe(201);
      expect(Buffer.from(await (await get(`Binary/${idOf(ok)}`)).arrayBuffer()).equals(whole)).toBe(true);
    });

    test('large content is sent as it is decoded, byte for byte, with its length; base64 with line breaks too', async () => {
      const big = randomBytes(5 * 1024 * 1024 + 2); // over one decoding chunk, and not a multiple of 3
      const b64 = big.toString('base64');
      const wrapped = b64.replace(/.{76}/g, '$&\r\n'); // MIME-style lines, as some writers send
      for (const [id, data] of [['big-clean', b64], ['big-wrapped', wrapped]] as const) {
        const put = await send('PUT', `Binary/${id}`, JSON.stringify({ resourceType: 'Binary', id, contentType: 'application/octet-stream', data }), { 'Content-Type': 'application/fhir+json' });
        expect(put.status).toBe(201);
        const res = await get(`Binary/${id}`, { Accept: '*/*' });
        expect(res.status).toBe(200);
        expect(res.headers.get('content-length')).toBe(String(big.byteLength));
        expect(Buffer.from(await res.arrayBuffer()).equals(big)).toBe(true);
      }
    });

    test('a read at the plain URL the hot-route dispatcher takes answers the native content', async () => {
      const id = idOf(await send('POST', 'Binary', PNG, { 'Content-Type': 'image/png' }));
      const res = await t.app.fetch(new Request(url(`Binary/${id}`), { headers: auth() }));
      expect(res.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await res.arrayBuffer()).equals(PNG)).toBe(true);
    });

    test('bulk export writes Binaries as FHIR Binary resources, by _type and in a system export', async () => {
      const id = idOf(await send('POST', 'Binary', BYTES, { 'Content-Type': 'application/octet-stream', 'X-Security-Context': 'Patient/p1' }));
      for (const query of ['/$export?_type=Binary', '/$export']) {
        const files = await download(t, token, (await finish(t, token, await kickOff(t, token, query))).output);
        const exported = (files.Binary ?? []).find((r) => r.id === id) as Json | undefined;
        expect(exported).toMatchObject({ resourceType: 'Binary', contentType: 'application/octet-stream', securityContext: { reference: 'Patient/p1' } });
        expect(Buffer.from(exported!.data, 'base64').equals(BYTES)).toBe(true);
        if (query.includes('_type')) expect(Object.keys(files)).toEqual(['Binary']);
      }
    });
  });
});
