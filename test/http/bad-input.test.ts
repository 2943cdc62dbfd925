import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { BASE, createTestApp, type TestApp } from '../helpers/app.ts';
import { countVersions, expectOutcome, fhirClient, ids, type FhirClient } from '../helpers/fhir.ts';

let t: TestApp;
let api: FhirClient;
let token: string;
const base = `${BASE}/tenants/t1/fhir/R4`;
const LIMIT = 2048;

/** A raw request with the admin token. */
function raw(method: string, path: string, body?: BodyInit | null, headers: Record<string, string> = {}) {
  const init: RequestInit = { method, headers: { Authorization: `Bearer ${token}`, ...headers } };
  if (body !== undefined) init.body = body;
  return t.request(`${base}/${path}`, init);
}

/** Sends a bad request and checks: the status, an OperationOutcome, and that nothing was written. */
async function rejects(send: () => Promise<Response> | Response, status: number, code?: string) {
  const before = await countVersions(t);
  const outcome = await expectOutcome(await send(), status, code);
  expect(await countVersions(t)).toBe(before);
  return outcome;
}

beforeAll(async () => {
  t = await createTestApp({ env: { CINDER_MAX_BODY_BYTES: String(LIMIT) } });
  token = await t.token();
  api = fhirClient(t, token);
  await api.put200({ resourceType: 'Patient', id: 'existing', active: true });
});
afterAll(() => t.close());

const JSON_TYPE = { 'Content-Type': 'application/fhir+json' };

describe('malformed bodies are 400', () => {
  const bodies: [string, string][] = [
    ['malformed JSON', '{"resourceType": "Patient", '],
    ['trailing garbage', '{"resourceType": "Patient"} x'],
    ['empty body', ''],
    ['whitespace only', '  \n '],
    ['a JSON array', '[{"resourceType": "Patient"}]'],
    ['a JSON string', '"Patient"'],
    ['JSON null', 'null'],
    ['a number', '42'],
    ['no resourceType', '{"active": true}'],
    ['a non-string resourceType', '{"resourceType": 7}'],
    ['meta that is not an object', '{"resourceType": "Patient", "meta": "x"}'],
    ['meta as an array', '{"resourceType": "Patient", "meta": []}'],
  ];
  for (const [name, body] of bodies) {
    test(`POST: ${name}`, async () => {
      await rejects(() => raw('POST', 'Patient', body, JSON_TYPE), 400);
    });
    test(`PUT: ${name}`, async () => {
      await rejects(() => raw('PUT', 'Patient/existing', body, JSON_TYPE), 400);
    });
  }

  test('POST to the base: malformed JSON and a non-Bundle are 400', async () => {
    await rejects(() => raw('POST', '', '{', JSON_TYPE), 400);
    await rejects(() => raw('POST', '', '{"resourceType":"Patient"}', JSON_TYPE), 400);
  });
});

describe('media types', () => {
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x']) {
    test(`Content-Type ${type} is 415`, async () => {
      await rejects(() => raw('POST', 'Patient', '{"resourceType":"Patient"}', { 'Content-Type': type }), 415);
      await rejects(() => raw('PUT', 'Patient/existing', '{"resourceType":"Patient","id":"existing"}', { 'Content-Type': type }), 415);
    });
  }

  test('JSON sent as XML (application/xml, application/fhir+xml) is a 400: the body is read as the XML it claims to be', async () => {
    for (const type of ['application/xml', 'application/fhir+xml']) {
      const outcome = await rejects(() => raw('POST', 'Patient', '{"resourceType":"Patient"}', { 'Content-Type': type, Accept: 'application/fhir+json' }), 400);
      expect(outcome.issue[0].diagnostics).toContain('not well-formed FHIR XML');
    }
  });

  test('a charset other than UTF-8 is 415 (FHIR bodies are UTF-8), in JSON, XML, a transaction, a patch and an XML declaration; utf-8 in any case or none is read', async () => {
    const latin1 = Buffer.from('{"resourceType":"Patient","name":[{"family":"Müller"}]}', 'latin1');
    for (const type of ['application/fhir+json; charset=ISO-8859-1', 'application/json;charset="utf-16"', 'application/fhir+json; charset=windows-1252', 'application/fhir+json; charset=bogus']) {
      const outcome = await rejects(() => raw('POST', 'Patient', latin1, { 'Content-Type': type }), 415, 'not-supported');
      expect(outcome.issue[0].diagnostics).toContain('FHIR bodies are read in UTF-8 only');
    }
    const xml = '<Patient xmlns="http://hl7.org/fhir"><active value="true"/></Patient>';
    const outcome = await rejects(() => raw('PUT', 'Patient/existing', xml.replace('<active', '<id value="existing"/><active'), { 'Content-Type': 'application/fhir+xml; charset=ISO-8859-1', Accept: 'application/fhir+json' }), 415);
    expect(outcome.issue[0].diagnostics).toBe("Content-Type 'application/fhir+xml; charset=ISO-8859-1' declares charset ISO-8859-1: FHIR bodies are read in UTF-8 only (R4 http.html); send them in UTF-8, with charset=utf-8 or no charset");
    await rejects(() => raw('POST', '', '{"resourceType":"Bundle","type":"transaction"}', { 'Content-Type': 'application/fhir+json; charset=latin1' }), 415);
    await rejects(() => raw('PATCH', 'Patient/existing', '[{"op":"replace","path":"/active","value":false}]', { 'Content-Type': 'application/json-patch+json; charset=iso-8859-1' }), 415);
    // The XML declaration's own encoding: the same 415, whatever the Content-Type says.
    const declared = await rejects(() => raw('POST', 'Patient', `<?xml version="1.0" encoding="ISO-8859-1"?>${xml}`, { 'Content-Type': 'application/fhir+xml; charset=utf-8', Accept: 'application/fhir+json' }), 415, 'not-supported');
    expect(declared.issue[0].diagnostics).toBe("The request body declares encoding 'ISO-8859-1' (line 1, column 1): FHIR XML is read in UTF-8 only (R4 http.html: UTF-8 SHALL be used)");
    // UTF-8 by any of its names, or no charset: read (the umlaut intact).
    for (const type of ['application/fhir+json; charset=UTF-8', 'application/fhir+json;charset="utf-8"', 'application/fhir+json; charset=utf8', 'application/fhir+json']) {
      const res = await raw('POST', 'Patient', '{"resourceType":"Patient","name":[{"family":"Müller"}]}', { 'Content-Type': type });
      expect([type, res.status, ((await res.json()) as { name: { family: string }[] }).name[0]!.family]).toEqual([type, 201, 'Müller']);
    }
    expect((await raw('POST', 'Patient', `<?xml version="1.0" encoding="utf-8"?>${xml}`, { 'Content-Type': 'application/fhir+xml;charset=UTF-8' })).status).toBe(201);
  });

  test('US-ASCII (by its IANA names) is read when the body holds nothing beyond it, in JSON, XML, a patch and an XML declaration; a character beyond it is a 415', async () => {
    const json = '{"resourceType":"Patient","name":[{"family":"Miller"}]}';
    let id = '';
    for (const type of ['application/fhir+json; charset=us-ascii', 'application/fhir+json;charset="US-ASCII"', 'application/json; charset=ASCII', 'application/fhir+json; charset=ANSI_X3.4-1968']) {
      const res = await raw('POST', 'Patient', json, { 'Content-Type': type });
      const created = (await res.json()) as { id: string; name: { family: string }[] };
      expect([type, res.status, created.name[0]!.family]).toEqual([type, 201, 'Miller']);
      id = created.id;
    }
    // The same body with an umlaut, in UTF-8 or in Latin-1: its charset is not what it declares.
    for (const body of ['{"resourceType":"Patient","name":[{"family":"Müller"}]}', Buffer.from('{"resourceType":"Patient","name":[{"family":"Müller"}]}', 'latin1')]) {
      const outcome = await rejects(() => raw('POST', 'Patient', body, { 'Content-Type': 'application/fhir+json; charset=us-ascii' }), 415, 'not-supported');
      expect(outcome.issue[0].diagnostics).toMatch(/^Content-Type 'application\/fhir\+json; charset=us-ascii' declares charset us-ascii, but the body holds (U\+00FC \(character 47\)|byte 0xFC at byte offset 46 \(counting from 0\)), which is not US-ASCII/);
    }
    expect((await raw('POST', '', '{"resourceType":"Bundle","type":"batch"}', { 'Content-Type': 'application/fhir+json; charset=us-ascii' })).status).toBe(200);
    expect((await raw('PATCH', `Patient/${id}`, '[{"op":"add","path":"/active","value":false}]', { 'Content-Type': 'application/json-patch+json; charset=us-ascii' })).status).toBe(200);
    await rejects(() => raw('PATCH', `Patient/${id}`, '[{"op":"add","path":"/gender","value":"männlich"}]', { 'Content-Type': 'application/json-patch+json; charset=us-ascii' }), 415, 'not-supported');
    const xml = '<Patient xmlns="http://hl7.org/fhir"><name><family value="Miller"/></name></Patient>';
    for (const declaration of ['<?xml version="1.0" encoding="US-ASCII"?>', "<?xml version='1.0' encoding='ascii'?>\n"]) {
      expect((await raw('POST', 'Patient', `${declaration}${xml}`, { 'Content-Type': 'application/fhir+xml; charset=us-ascii', Accept: 'application/fhir+json' })).status).toBe(201);
    }
    const beyond = await rejects(() => raw('POST', 'Patient', `<?xml version="1.0" encoding="US-ASCII"?>\n${xml.replace('Miller', 'Müller')}`, { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }), 415, 'not-supported');
    expect(beyond.issue[0].diagnostics).toBe("The request body declares encoding 'US-ASCII' but holds U+00FC (line 2, column 60), which is not US-ASCII: send FHIR XML in UTF-8");
  });

  test('no Content-Type is 415', async () => {
    await rejects(() => raw('POST', 'Patient', new Blob(['{"resourceType":"Patient"}'])), 415);
  });

  test('application/json and application/fhir+json with charset are accepted', async () => {
    for (const type of ['application/json', 'application/fhir+json; charset=utf-8', 'APPLICATION/FHIR+JSON', 'application/json+fhir']) {
      expect((await raw('POST', 'Patient', '{"resourceType":"Patient"}', { 'Content-Type': type })).status).toBe(201);
    }
  });

  for (const accept of ['text/html', 'text/plain', 'image/png']) {
    test(`Accept: ${accept} is 406`, async () => {
      await rejects(() => raw('GET', 'Patient/existing', undefined, { Accept: accept }), 406);
      await rejects(() => raw('POST', 'Patient', '{"resourceType":"Patient"}', { ...JSON_TYPE, Accept: accept }), 406);
    });
  }

  test('acceptable Accept headers', async () => {
    for (const accept of ['application/fhir+json', 'application/json', '*/*', 'application/*', 'text/html, application/fhir+json;q=0.9', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8']) {
      expect((await raw('GET', 'Patient/existing', undefined, { Accept: accept })).status).toBe(200);
    }
  });

  for (const format of ['html', 'turtle', 'application/pdf']) {
    test(`_format=${format} is 406`, async () => {
      for (const path of [`Patient/existing?_format=${encodeURIComponent(format)}`, `Patient?_format=${encodeURIComponent(format)}`]) {
        expect((await rejects(() => raw('GET', path), 406)).issue[0].expression).toEqual(['_format']);
      }
    });
  }

  test('_format=json and its media types are accepted', async () => {
    for (const format of ['json', 'application/json', 'application/fhir+json']) {
      expect((await raw('GET', `Patient/existing?_format=${encodeURIComponent(format)}`)).status).toBe(200);
    }
  });
});

describe('oversized bodies are 413', () => {
  const big = JSON.stringify({ resourceType: 'Patient', text: { status: 'generated', div: 'x'.repeat(LIMIT) } });

  test('with Content-Length', async () => {
    await rejects(() => raw('POST', 'Patient', big, { ...JSON_TYPE, 'Content-Length': String(big.length) }), 413);
  });

  test('streamed without Content-Length', async () => {
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 8; i++) controller.enqueue(new TextEncoder().encode(i === 0 ? '{"resourceType":"Patient","x":"' : 'y'.repeat(500)));
        controller.close();
      },
    });
    await rejects(() => raw('POST', 'Patient', stream, JSON_TYPE), 413);
  });

  test('on PUT, transaction and POST _search too', async () => {
    await rejects(() => raw('PUT', 'Patient/existing', big, JSON_TYPE), 413);
    const bundle = JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [{ resource: JSON.parse(big), request: { method: 'POST', url: 'Patient' } }] });
    await rejects(() => raw('POST', '', bundle, JSON_TYPE), 413);
    await rejects(() => raw('POST', 'Patient/_search', '_id=' + 'a,'.repeat(LIMIT), { 'Content-Type': 'application/x-www-form-urlencoded' }), 413);
  });

  test('a body just under the limit is fine', async () => {
    const ok = JSON.stringify({ resourceType: 'Patient', text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${'x'.repeat(LIMIT - 170)}</div>` } });
    expect(ok.length).toBeLessThan(LIMIT);
    expect((await raw('POST', 'Patient', ok, JSON_TYPE)).status).toBe(201);
  });
});

describe('resource types', () => {
  test('an unknown type in the URL is 404 for every interaction', async () => {
    await rejects(() => raw('GET', 'Foo/1'), 404);
    await rejects(() => raw('GET', 'Foo'), 404);
    await rejects(() => raw('GET', 'Foo/_history'), 404);
    await rejects(() => raw('GET', 'Foo/1/_history/1'), 404);
    await rejects(() => raw('POST', 'Foo', '{"resourceType":"Foo"}', JSON_TYPE), 404);
    await rejects(() => raw('PUT', 'Foo/1', '{"resourceType":"Foo","id":"1"}', JSON_TYPE), 404);
    await rejects(() => raw('DELETE', 'Foo/1'), 404);
    await rejects(() => raw('GET', 'patient/existing'), 404);
  });

  test('an unknown type in the body is 400', async () => {
    await rejects(() => raw('POST', 'Patient', '{"resourceType":"Foo"}', JSON_TYPE), 400);
    await rejects(() => raw('PUT', 'Patient/existing', '{"resourceType":"Foo","id":"existing"}', JSON_TYPE), 400);
  });

  test('a body type that differs from the URL type is 400', async () => {
    const body = await rejects(() => raw('POST', 'Patient', '{"resourceType":"Observation","status":"final","code":{}}', JSON_TYPE), 400);
    expect(body.issue[0].expression).toEqual(['resourceType']);
    await rejects(() => raw('PUT', 'Patient/existing', '{"resourceType":"Observation","id":"existing"}', JSON_TYPE), 400);
  });
});

describe('ids', () => {
  test('PUT: id mismatch and missing id are 400', async () => {
    const mismatch = await rejects(() => raw('PUT', 'Patient/existing', '{"resourceType":"Patient","id":"other"}', JSON_TYPE), 400);
    expect(mismatch.issue[0].expression).toEqual(['id']);
    const missing = await rejects(() => raw('PUT', 'Patient/existing', '{"resourceType":"Patient"}', JSON_TYPE), 400, 'required');
    expect(missing.issue[0].expression).toEqual(['id']);
    expect(((await (await api.get('Patient/existing')).json()) as { meta: { versionId: string } }).meta.versionId).toBe('1');
  });

  const badIds = ['a'.repeat(65), 'a_b', 'a%20b', 'a%2Fb', '%C3%A9t%C3%A9', "x'--", 'a*'];
  for (const id of badIds) {
    test(`invalid id '${decodeURIComponent(id).slice(0, 20)}' in the URL is 400`, async () => {
      for (const [method, path, body] of [['GET', `Patient/${id}`], ['PUT', `Patient/${id}`, JSON.stringify({ resourceType: 'Patient', id: decodeURIComponent(id) })], ['DELETE', `Patient/${id}`], ['GET', `Patient/${id}/_history`]] as const) {
        const outcome = await rejects(() => raw(method, path, body, body === undefined ? {} : JSON_TYPE), 400);
        expect(outcome.issue[0].expression).toEqual(['id']);
      }
    });
  }

  test('an id of 64 characters is fine', async () => {
    const id = 'A-.9'.repeat(16);
    expect((await raw('PUT', `Patient/${id}`, JSON.stringify({ resourceType: 'Patient', id }), JSON_TYPE)).status).toBe(201);
  });

  test('a body id that is not a string is 400', async () => {
    await rejects(() => raw('PUT', 'Patient/existing', '{"resourceType":"Patient","id":7}', JSON_TYPE), 400);
    await rejects(() => raw('POST', 'Patient', '{"resourceType":"Patient","id":{"x":1}}', JSON_TYPE), 400);
  });

  test('malformed percent-encoding in the path is 400 or 404, never 500', async () => {
    for (const path of ['Patient/%ZZ', 'Patient/%E0%A4%A', 'Patient/%', 'Patient/%00']) {
      const res = await raw('GET', path);
      expect([400, 404]).toContain(res.status);
      await expectOutcome(res, res.status);
    }
  });
});

describe('search values never break the store', () => {
  test('SQL metacharacters in every kind of parameter: exact or a precise 400, and the data stays', async () => {
    const before = await countVersions(t);
    // U+0000 and the other control characters are a 400 of their own (control-characters.test.ts).
    const probes = ["' OR 1=1 --", "'); DROP TABLE resources; --", '%', '_', '\\', '"', '日本', "%' OR '%'='"];
    for (const p of probes) {
      const v = encodeURIComponent(p);
      for (const q of [`Patient?identifier=${v}`, `Observation?code=${v}`, `ValueSet?url=${v}`, `ValueSet?version=${v}`, `Patient?identifier=urn:x|${v}`]) {
        const res = await raw('GET', q);
        expect(res.status).toBe(200);
        expect(ids((await res.json()) as never)).toEqual([]);
      }
      for (const q of [`Patient?_id=${v}`, `Observation?subject=${v}`, `Patient?_lastUpdated=${v}`, `Patient?_cursor=${v}`, `Patient?_count=${v}`, `Patient?_sort=${v}`]) {
        const res = await raw('GET', q);
        await expectOutcome(res, 400);
      }
    }
    expect(await countVersions(t)).toBe(before);
    expect((await api.get('Patient/existing')).status).toBe(200);
  });
});

describe('unsupported interactions and operations', () => {
  test('unknown operations are 4xx OperationOutcomes', async () => {
    await expectOutcome(await raw('GET', 'Patient/$foo'), 404, 'not-found');
    await rejects(() => raw('POST', 'Patient/$foo', '{"resourceType":"Parameters"}', JSON_TYPE), 404);
    await expectOutcome(await raw('GET', 'Patient/existing/$foo'), 404);
    await expectOutcome(await raw('GET', '$foo'), 404);
    await rejects(() => raw('POST', '$foo', '{"resourceType":"Parameters"}', JSON_TYPE), 404);
  });

  test('POST to an instance and writes to a version are 405 with Allow', async () => {
    const patch = await raw('PATCH', 'Patient/existing/_history/1', '[]', { 'Content-Type': 'application/json-patch+json' });
    expect(patch.headers.get('allow')).toBe('GET');
    expect((await expectOutcome(patch, 405)).issue[0].code).toBe('not-supported');
    const before = await countVersions(t);
    const post = await raw('POST', 'Patient/existing', '{"resourceType":"Patient"}', JSON_TYPE);
    expect(post.headers.get('allow')).toBe('GET, PUT, PATCH, DELETE');
    await expectOutcome(post, 405);
    const put = await raw('PUT', 'Patient/existing/_history/1', '{}', JSON_TYPE);
    expect(put.headers.get('allow')).toBe('GET');
    await expectOutcome(put, 405);
    expect(await countVersions(t)).toBe(before);
  });

  test('PUT or DELETE on a type without search criteria is 400', async () => {
    await rejects(() => raw('PUT', 'Patient', '{"resourceType":"Patient"}', JSON_TYPE), 400);
    await rejects(() => raw('PUT', 'Patient?_count=1', '{"resourceType":"Patient"}', JSON_TYPE), 400);
    await rejects(() => raw('DELETE', 'Patient'), 400);
    await rejects(() => raw('DELETE', 'Patient?_sort=_id'), 400);
    await rejects(() => raw('DELETE', 'Patient?bogus=1'), 400);
  });

  test('a malformed If-None-Exist or If-Match is a 400 naming the header', async () => {
    const body = JSON.stringify({ resourceType: 'Patient', active: false });
    for (const condition of ['Observation?identifier=x|1', 'http://elsewhere.test/Patient?identifier=x|1', '_count=1', '']) {
      const outcome = await rejects(() => raw('POST', 'Patient', body, { ...JSON_TYPE, 'If-None-Exist': condition }), 400);
      expect(outcome.issue[0].expression).toEqual(['If-None-Exist']);
    }
    for (const [method, path] of [['PUT', 'Patient/existing'], ['DELETE', 'Patient/existing'], ['PATCH', 'Patient/existing']] as const) {
      const headers = { 'If-Match': 'version-1', 'Content-Type': method === 'PATCH' ? 'application/json-patch+json' : JSON_TYPE['Content-Type'] };
      const sent = method === 'PATCH' ? '[{"op":"add","path":"/active","value":false}]' : method === 'PUT' ? JSON.stringify({ resourceType: 'Patient', id: 'existing' }) : undefined;
      const outcome = await rejects(() => raw(method, path, sent, headers), 400);
      expect(outcome.issue[0].expression).toEqual(['If-Match']);
    }
  });

  test("a Bundle entry's malformed request or resource: the 400 names the element", async () => {
    const entries: [Record<string, unknown>, string][] = [
      [{ request: { method: 'POST', url: 'Patient', ifNoneExist: 'Observation?code=1' }, resource: { resourceType: 'Patient' } }, 'request.ifNoneExist'],
      [{ request: { method: 'POST', url: 'Patient/x' }, resource: { resourceType: 'Patient' } }, 'request.url'],
      [{ request: { method: 'GET', url: 'Patient/a_b' } }, 'request.url'],
      [{ request: { method: 'DELETE', url: 'Foo/1' } }, 'request.url'],
      [{ request: { method: 'OPTIONS', url: 'Patient/existing' } }, 'request.method'],
      [{ request: { method: 'PUT', url: 'Patient/existing' }, resource: { resourceType: 'Patient', id: 'other' } }, 'resource.id'],
      [{ request: { method: 'PUT', url: 'Patient/existing' }, resource: { resourceType: 'Observation', id: 'existing' } }, 'resource.resourceType'],
      [{ request: { method: 'DELETE', url: 'Patient?_count=1' } }, 'request.url'],
      [{ request: { method: 'PATCH', url: 'Patient/existing' } }, 'resource'],
      [{ request: { method: 'DELETE', url: 'Patient/existing', ifMatch: 'version-1' } }, 'request.ifMatch'],
    ];
    for (const [entry, element] of entries) {
      const bundle = JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [{ request: { method: 'GET', url: 'Patient/existing' } }, entry] });
      const outcome = await rejects(() => raw('POST', '', bundle, JSON_TYPE), 400);
      expect(outcome.issue[0].expression).toEqual([`Bundle.entry[1].${element}`]);
    }
  });

  test('unknown routes under the FHIR base are 404 OperationOutcomes', async () => {
    await expectOutcome(await raw('GET', 'Patient/existing/_history/1/extra'), 404);
    await expectOutcome(await raw('GET', 'Patient/existing/whatever'), 404);
  });
});
