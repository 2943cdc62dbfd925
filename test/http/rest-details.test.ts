/**
 * Details of FHIR R4's http.html a careful client relies on: content negotiation (`_format` with an
 * unencoded `+` and overriding `Accept`, `q=0`, `fhirVersion`, generic `application/json` answered as such), `_pretty`, the CapabilityStatement's patch formats, history's `_count`
 * capped as search's, a PATCH entry's Binary media type with parameters, and a create ignoring the id
 * its body holds, even one that is not valid.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { expectOutcome, fhirClient, type FhirClient, type Json } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;

beforeAll(async () => {
  t = await createTestApp();
  api = fhirClient(t, await t.token());
  await api.put200({ resourceType: 'Patient', id: 'p1', gender: 'male' });
});
afterAll(() => t.close());

describe('content negotiation', () => {
  test('_format takes application/fhir+json with its + left unencoded, and refuses another FHIR version', async () => {
    expect((await api.get('Patient/p1?_format=application/fhir+json')).status).toBe(200);
    expect((await api.get('Patient/p1?_format=application/fhir%2Bjson')).status).toBe(200);
    await expectOutcome(await api.get('Patient/p1?_format=application/fhir%2Bjson;fhirVersion=3.0'), 406);
    await expectOutcome(await api.get('Patient/p1?_format=application/fhir%2Bxml;fhirVersion=3.0'), 406);
    await expectOutcome(await api.get('Patient/p1?_format=turtle'), 406);
    // A space after the `;`, as a media type is often written: the parameter is read, not taken for part of the type.
    await expectOutcome(await api.get('Patient/p1?_format=application/fhir%2Bjson;%20fhirVersion=3.0'), 406);
    await expectOutcome(await api.get('Patient/p1?_format=application/fhir+json;%20fhirVersion=3.0'), 406);
    const r4 = await api.get('Patient/p1?_format=application/fhir+xml;%20fhirVersion=4.0');
    expect([r4.status, r4.headers.get('content-type')]).toEqual([200, 'application/fhir+xml; charset=utf-8']);
  });

  test('a JSON _format overrides Accept (http.html 3.1.0.1.10), and an XML one does; a _format Cinder does not serve is 406 whatever Accept says', async () => {
    const xml = { Accept: 'application/fhir+xml' };
    for (const path of ['Patient/p1?_format=json', 'Patient/p1?_format=application/fhir%2Bjson', 'Patient?_format=json', 'Patient/p1/_history?_format=json', 'metadata?_format=json']) {
      const res = await api.get(path, xml);
      expect([path, res.status, res.headers.get('content-type')]).toEqual([path, 200, 'application/fhir+json; charset=utf-8']);
    }
    expect((await api.post('Patient?_format=json', { resourceType: 'Patient' }, xml)).status).toBe(201);
    const binary = await api.call('PUT', 'Binary/b-format?_format=json', 'hello', { 'Content-Type': 'text/plain', ...xml });
    expect(binary.status).toBe(201);
    for (const accept of ['application/fhir+xml', 'application/fhir+json', '*/*']) {
      const res = await api.get('Patient/p1?_format=xml', { Accept: accept });
      expect([accept, res.status, res.headers.get('content-type')]).toEqual([accept, 200, 'application/fhir+xml; charset=utf-8']);
      await expectOutcome(await api.get('Patient/p1?_format=turtle', { Accept: accept }), 406);
    }
    // Without _format, Accept alone decides.
    expect((await api.get('Patient/p1', xml)).headers.get('content-type')).toBe('application/fhir+xml; charset=utf-8');
  });

  test('Accept: text/* is answered in JSON labelled text/json, ranking as a wildcard; text/xml is XML; text/html or text/plain alone is 406', async () => {
    const answer = async (path: string, accept: string) => {
      const res = await api.get(path, { Accept: accept });
      const body = await res.text();
      return [path, accept, res.status, res.headers.get('content-type'), body.startsWith('{') ? 'json' : body.startsWith('<') ? 'xml' : body];
    };
    const TEXT_JSON = 'text/json; charset=utf-8';
    // The hot read, Hono's search and history, the CapabilityStatement, and an error.
    for (const [path, status] of [['Patient/p1', 200], ['Patient?_id=p1', 200], ['Patient/p1/_history', 200], ['metadata', 200], ['Patient/nobody', 404]] as const) {
      expect(await answer(path, 'text/*')).toEqual([path, 'text/*', status, TEXT_JSON, 'json']);
    }
    const cases: [string, string, string][] = [
      ['text/*;q=0.5, application/fhir+json', 'application/fhir+json; charset=utf-8', 'json'],
      ['application/fhir+json, text/*', 'application/fhir+json; charset=utf-8', 'json'],
      ['text/*, application/fhir+xml;q=0.5', TEXT_JSON, 'json'],
      ['application/fhir+xml, text/*;q=0.5', 'application/fhir+xml; charset=utf-8', 'xml'],
      ['text/xml', 'text/xml; charset=utf-8', 'xml'],
      ['text/html, text/*;q=0.1', TEXT_JSON, 'json'],
    ];
    for (const [accept, type, format] of cases) expect(await answer('Patient/p1', accept)).toEqual(['Patient/p1', accept, 200, type, format]);
    for (const accept of ['text/html', 'text/plain', 'text/*;q=0']) await expectOutcome(await api.get('Patient/p1', { Accept: accept }), 406);
  });

  test('Accept: a range with q=0 is refused, a fhirVersion other than 4.0 is not served', async () => {
    await expectOutcome(await api.get('Patient/p1', { Accept: 'application/fhir+json;q=0, text/html' }), 406);
    await expectOutcome(await api.get('Patient/p1', { Accept: 'application/fhir+json; fhirVersion=3.0' }), 406);
    for (const accept of ['application/fhir+json; fhirVersion=4.0', 'application/fhir+json;fhirVersion=4.0.1', 'text/html;q=0.9, application/json;q=0.5']) {
      expect([accept, (await api.get('Patient/p1', { Accept: accept })).status]).toEqual([accept, 200]);
    }
  });

  test('Accept: a type refused with q=0 stays refused beside a wildcard: another type the client accepts is answered, or 406', async () => {
    const JSON_TYPE = 'application/json; charset=utf-8';
    const cases: [string, string][] = [
      ['application/fhir+json;q=0, */*', JSON_TYPE],
      ['application/fhir+json;q=0, application/*', JSON_TYPE],
      ['application/fhir+json; q=0.0, */*;q=0.5', JSON_TYPE],
      ['application/fhir+json;q=0, application/json;q=0, */*', 'text/json; charset=utf-8'],
      ['application/fhir+json;q=0, application/json;q=0, text/json;q=0, */*', 'application/fhir+xml; charset=utf-8'],
      ['application/fhir+json;q=0, application/json;q=0, application/*, text/xml;q=0.5', 'application/fhir+xml; charset=utf-8'],
    ];
    // The hot read, Hono's read, a search, the CapabilityStatement and an error.
    for (const path of ['Patient/p1', 'Patient/p1?_elements=gender', 'Patient?_id=p1', 'metadata', 'Patient/nobody']) {
      for (const [accept, type] of cases) {
        const res = await api.get(path, { Accept: accept });
        await res.arrayBuffer();
        expect([path, accept, res.status, res.headers.get('content-type')]).toEqual([path, accept, path.includes('nobody') ? 404 : 200, type]);
      }
    }
    // Every type Cinder answers in refused: nothing acceptable is left for the wildcard.
    const none = 'application/fhir+json;q=0, application/json;q=0, application/json+fhir;q=0, application/fhir+xml;q=0, application/xml;q=0, application/xml+fhir;q=0, application/fhir+ndjson;q=0, application/ndjson;q=0, application/*';
    await expectOutcome(await api.get('Patient/p1', { Accept: none }), 406);
    // Without q=0 nothing changes: the wildcard is FHIR JSON's.
    expect((await api.get('Patient/p1', { Accept: 'application/fhir+json;q=0.5, */*;q=0.1' })).headers.get('content-type')).toBe('application/fhir+json; charset=utf-8');
  });

  test('Accept: application/json is answered as application/json (http.html 3.1.0.1.10), FHIR JSON stays the default', async () => {
    const type = async (path: string, accept?: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
      const res = await api.call(init.method ?? 'GET', path, init.body, { ...(accept === undefined ? {} : { Accept: accept }), ...init.headers });
      await res.arrayBuffer();
      return [path, accept, res.status, res.headers.get('content-type')];
    };
    const JSON_TYPE = 'application/json; charset=utf-8';
    const FHIR_TYPE = 'application/fhir+json; charset=utf-8';
    // Reads (the hot route and Hono's), searches, history, metadata, a create, and errors of the gate and of a route.
    for (const path of ['Patient/p1', 'Patient/p1?_elements=gender', 'Patient?_id=p1', 'Patient/p1/_history', 'metadata', 'Patient/nobody', 'Nonsense/1']) {
      const [, , status, got] = await type(path, 'application/json');
      expect([path, status, got]).toEqual([path, path.includes('nobody') || path.includes('Nonsense') ? 404 : 200, JSON_TYPE]);
    }
    expect(await type('Patient', 'application/json', { method: 'POST', body: { resourceType: 'Patient' } })).toEqual(['Patient', 'application/json', 201, JSON_TYPE]);
    const unauthenticated = await t.request(`${api.base}/Patient/p1`, { headers: { Accept: 'application/json' } });
    expect([unauthenticated.status, unauthenticated.headers.get('content-type')]).toEqual([401, JSON_TYPE]);
    // The client's preference decides; a FHIR JSON type it names as high keeps FHIR JSON, and wildcards name nothing.
    const cases: [string | undefined, string][] = [
      [undefined, FHIR_TYPE], ['*/*', FHIR_TYPE], ['application/fhir+json', FHIR_TYPE], ['application/json, */*', JSON_TYPE],
      ['application/fhir+json, application/json', FHIR_TYPE], ['application/json, application/json+fhir', FHIR_TYPE],
      ['application/json;q=0.5, application/fhir+json', FHIR_TYPE], ['application/fhir+json;q=0.5, application/json', JSON_TYPE],
      ['Application/JSON; fhirVersion=4.0', JSON_TYPE], ['application/json; fhirVersion=3.0, application/fhir+json;q=0.1', FHIR_TYPE],
    ];
    for (const [accept, expected] of cases) expect(await type('Patient/p1', accept)).toEqual(['Patient/p1', accept, 200, expected]);
    // `_format` overrides Accept: application/json asks for that type, `json` for the JSON format (application/fhir+json).
    expect(await type('Patient/p1?_format=application/json', 'application/fhir+json')).toEqual(['Patient/p1?_format=application/json', 'application/fhir+json', 200, JSON_TYPE]);
    expect(await type('Patient/p1?_format=json', 'application/json')).toEqual(['Patient/p1?_format=json', 'application/json', 200, FHIR_TYPE]);
    // text/json, the other generic type R4 names: accepted, and answered as asked.
    const TEXT_TYPE = 'text/json; charset=utf-8';
    for (const [accept, expected] of [['text/json', TEXT_TYPE], ['text/json, application/json;q=0.5', TEXT_TYPE], ['text/json;q=0.5, application/json', JSON_TYPE], ['text/json;q=0.5, application/fhir+json', FHIR_TYPE]] as const) {
      expect(await type('Patient/p1', accept)).toEqual(['Patient/p1', accept, 200, expected]);
    }
    expect(await type('Patient?_id=p1&_format=text/json', undefined)).toEqual(['Patient?_id=p1&_format=text/json', undefined, 200, TEXT_TYPE]);
    // A long answer is still compressed; HEAD says what GET would; _pretty still indents.
    const long = await api.get('metadata', { Accept: 'application/json', 'Accept-Encoding': 'gzip' });
    expect([long.headers.get('content-type'), long.headers.get('content-encoding')]).toEqual([JSON_TYPE, 'gzip']);
    expect((await api.call('HEAD', 'Patient/p1', undefined, { Accept: 'application/json' })).headers.get('content-type')).toBe(JSON_TYPE);
    // The label follows Accept, on every FHIR JSON answer and its 304: caches are told (RFC 9110 12.5.5, 15.4.5).
    for (const accept of [undefined, 'application/json']) {
      for (const [path, extra] of [['Patient/p1', {}], ['Patient?_id=p1', {}], ['metadata', {}], ['Patient/p1', { 'If-None-Match': 'W/"1"' }]] as const) {
        const res = await api.get(path, { ...(accept === undefined ? {} : { Accept: accept }), ...extra });
        expect([path, accept, res.status, res.headers.get('vary')?.split(/\s*,\s*/).includes('Accept')]).toEqual([path, accept, 'If-None-Match' in extra ? 304 : 200, true]);
      }
    }
    const pretty = await api.get('Patient/p1?_pretty=true', { Accept: 'application/json' });
    expect([pretty.headers.get('content-type'), (await pretty.text()).includes('\n  "resourceType"')]).toEqual([JSON_TYPE, true]);
  });

  test('a body of another FHIR version is a 415; of R4, taken', async () => {
    const body = { resourceType: 'Patient' };
    await expectOutcome(await api.post('Patient', body, { 'Content-Type': 'application/fhir+json; fhirVersion=3.0' }), 415);
    expect((await api.post('Patient', body, { 'Content-Type': 'application/fhir+json; fhirVersion=4.0' })).status).toBe(201);
  });
});

test('_pretty=true indents the answer; without it the answer is compact', async () => {
  const pretty = await api.get('Patient/p1?_pretty=true');
  expect(pretty.status).toBe(200);
  expect(pretty.headers.get('etag')).toBe('W/"1"');
  const text = await pretty.text();
  expect(text).toContain('\n  "resourceType": "Patient"');
  expect(JSON.parse(text).id).toBe('p1');
  expect(await (await api.get('Patient?_id=p1&_pretty=true')).text()).toContain('\n  "type": "searchset"');
  expect(await (await api.get('Patient/p1?_pretty=false')).text()).not.toContain('\n');
});

test("history's _count past a page's most is that most, as search's", async () => {
  const res = await api.get('Patient/p1/_history?_count=10000000');
  expect(res.status).toBe(200);
  const bundle = (await res.json()) as Json;
  expect(bundle.link[0].url).toContain('_count=1000');
});

test("a PATCH entry's Binary may give its media type with parameters", async () => {
  const data = Buffer.from(JSON.stringify([{ op: 'replace', path: '/gender', value: 'female' }])).toString('base64');
  const res = await api.post(api.base, {
    resourceType: 'Bundle', type: 'transaction',
    entry: [{ resource: { resourceType: 'Binary', contentType: 'application/json-patch+json; charset=utf-8', data }, request: { method: 'PATCH', url: 'Patient/p1' } }],
  });
  expect(res.status).toBe(200);
  expect(((await res.json()) as Json).entry[0].resource.gender).toBe('female');
});

test("a create ignores the id its body holds, even one that is not a valid id", async () => {
  for (const id of ['given', 'a_b']) {
    const created = await api.create({ resourceType: 'Patient', id });
    expect(created.id).not.toBe(id);
  }
  const conditional = await api.post('Patient', { resourceType: 'Patient', id: 'a_b', identifier: [{ system: 'urn:x', value: 'ignore-id' }] }, { 'If-None-Exist': 'identifier=urn:x|ignore-id' });
  expect(conditional.status).toBe(201);
  const tx = await api.post(api.base, { resourceType: 'Bundle', type: 'transaction', entry: [{ resource: { resourceType: 'Patient', id: 'a_b' }, request: { method: 'POST', url: 'Patient' } }] });
  expect(tx.status).toBe(200);
  expect(((await tx.json()) as Json).entry[0].response.status).toBe('201 Created');
  // An update keeps to its rules: the id is the resource's.
  await expectOutcome(await api.put('Patient/a_b', { resourceType: 'Patient', id: 'a_b' }), 400);
});
