/**
 * Request bodies that are not UTF-8 (a Latin-1 `ü`, byte 0xFC) are refused with a 400 naming where the first bad
 * byte is, on every reader of client text: resource bodies in JSON and XML (read whole, or a part at a time as a
 * large or chunked body is, or through a Content-Encoding), transactions, PATCH bodies of each kind, `_search`
 * and OAuth forms, the login page, GraphQL; nothing is written. A character split between the parts a large body
 * is read in still decodes, a BOM is still dropped, and a Binary's native content is never decoded: its bytes are
 * stored as sent. On both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { gzipSync } from 'node:zlib';
import { createClient } from '../../src/auth/admin.ts';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { countVersions, expectOutcome } from '../helpers/fhir.ts';

type Json = Record<string, any>;

/** `text` as bytes, each character below U+0100 as the one byte Latin-1 writes for it (`\xfc` is 0xFC). */
const latin1 = (text: string) => new Uint8Array(Buffer.from(text, 'latin1'));
const utf8 = (text: string) => new TextEncoder().encode(text);
const concat = (...parts: Uint8Array[]) => new Uint8Array(Buffer.concat(parts));

/** `bytes` as a request body stream of chunks of `size` bytes (no Content-Length: read as a stream). */
function chunked(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.length) return c.close();
      c.enqueue(bytes.slice(at, (at += size)));
    },
  });
}

const PATIENT_LATIN1 = latin1('{"resourceType":"Patient","id":"lat","name":[{"family":"M\xfcller"}]}');
const AT = PATIENT_LATIN1.indexOf(0xfc);

await eachStore((kind, fresh) => {
  describe(`bodies that are not UTF-8 (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const send = (method: string, path: string, body: BodyInit | null, headers: Record<string, string> = {}) =>
      t.request(`${t.fhir()}/${path}`, { method, body, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+json', ...headers } });
    /** A 400 `structure` OperationOutcome whose diagnostics name `where`, and no version written. */
    const refused = async (res: Response | Promise<Response>, where: string, expression?: string) => {
      const before = await countVersions(t);
      const outcome = await expectOutcome(await res, 400, 'structure');
      expect(outcome.issue[0].diagnostics).toStartWith('Request body is not valid UTF-8: ');
      expect(outcome.issue[0].diagnostics).toContain(where);
      expect(outcome.issue[0].expression).toEqual(expression === undefined ? undefined : [expression]);
      expect(await countVersions(t)).toBe(before);
      return outcome;
    };

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('PUT and POST of a resource with a Latin-1 byte: 400 naming the byte, its offset and the element; nothing stored', async () => {
      const outcome = await refused(send('PUT', 'Patient/lat', PATIENT_LATIN1, { 'Content-Length': String(PATIENT_LATIN1.length) }), `byte 0xFC at byte offset ${AT} (counting from 0), in Patient.name[0].family`, 'Patient.name[0].family');
      expect(outcome.issue[0].diagnostics).toEndWith('send it in UTF-8 (FHIR R4 http.html: "UTF-8 SHALL be used")');
      expect((await send('GET', 'Patient/lat', null)).status).toBe(404);
      await refused(send('POST', 'Patient', PATIENT_LATIN1), `byte 0xFC at byte offset ${AT}`, 'Patient.name[0].family');
      // The same resource in UTF-8 is stored with its ü.
      const ok = await send('PUT', 'Patient/lat', utf8('{"resourceType":"Patient","id":"lat","name":[{"family":"M\u00fcller"}]}'));
      expect(ok.status).toBe(201);
      expect(((await (await send('GET', 'Patient/lat', null)).json()) as Json).name[0].family).toBe('M\u00fcller');
    });

    test('each kind of ill-formed sequence is found where it starts: a stray continuation byte, a character cut short, an overlong form, a surrogate, one past U+10FFFF, a body ending mid-character', async () => {
      const head = utf8('{"resourceType":"Patient","id":"p1","name":[{"given":["ok \u00e9 \u20ac","');
      const cases: [number[], string][] = [
        [[0x80], 'byte 0x80'],
        [[0xe2, 0x82, 0x41], 'bytes 0xE2 0x82'],
        [[0xc0, 0xaf], 'byte 0xC0'],
        [[0xed, 0xa0, 0x80], 'byte 0xED'],
        [[0xf4, 0x90, 0x80, 0x80], 'byte 0xF4'],
      ];
      for (const [bad, shown] of cases) {
        const body = concat(head, new Uint8Array(bad), utf8('"]}]}'));
        await refused(send('PUT', 'Patient/p1', body), `${shown} at byte offset ${head.length} (counting from 0), in Patient.name[0].given[1]`, 'Patient.name[0].given[1]');
      }
      // Cut short by the end of the body (read whole, and as a stream).
      const cut = concat(utf8('{"resourceType":"Patient","id":"p1"}'), new Uint8Array([0xe2, 0x82]));
      await refused(send('PUT', 'Patient/p1', cut, { 'Content-Length': String(cut.length) }), `bytes 0xE2 0x82 at byte offset ${cut.length - 2}`);
      await refused(send('PUT', 'Patient/p1', chunked(cut, 5)), `bytes 0xE2 0x82 at byte offset ${cut.length - 2}`);
    });

    test('a chunked body: a character split between chunks decodes, a bad byte in any chunk is found at its offset in the body', async () => {
      const good = utf8('{"resourceType":"Patient","id":"split","name":[{"family":"\u00e9\u20ac\ud83d\ude00 Z\u00fcrich"}]}');
      for (const size of [1, 2, 3, 5]) {
        const res = await send('PUT', 'Patient/split', chunked(good, size));
        expect(res.status).toBeLessThan(300);
      }
      expect(((await (await send('GET', 'Patient/split', null)).json()) as Json).name[0].family).toBe('\u00e9\u20ac\ud83d\ude00 Z\u00fcrich');
      for (const size of [1, 3, 7, 64]) await refused(send('PUT', 'Patient/lat', chunked(PATIENT_LATIN1, size)), `byte 0xFC at byte offset ${AT}`, 'Patient.name[0].family');
    });

    test('a large body read in parts (768 KiB): characters split between parts decode; a bad byte in a later part is found, named in its entry', async () => {
      // A transaction of entries holding 3- and 4-byte characters, long enough to cross several part boundaries whatever the alignment.
      const entry = (i: number, family: string) => ({ fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, resource: { resourceType: 'Patient', name: [{ family }] }, request: { method: 'POST', url: 'Patient' } });
      const family = '\u20ac\ud83d\ude00'.repeat(1200);
      const entries = Array.from({ length: 300 }, (_, i) => entry(i, family));
      const bundle = utf8(JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: entries }));
      expect(bundle.length).toBeGreaterThan(3 * 768 * 1024);
      expect((await send('POST', '', bundle, { 'Content-Length': String(bundle.length) })).status).toBe(200);
      expect((await send('POST', '', chunked(bundle, 1 << 20))).status).toBe(200);
      // The second entry from the end: in the last part. Its € made Latin-1's 0x80 (a stray continuation byte).
      const text = JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: entries.map((e, i) => (i === 298 ? entry(i, `M${family}`) : e)) });
      const at = text.indexOf('"M') + 2;
      const bad = concat(utf8(text.slice(0, at)), new Uint8Array([0x80]), utf8(text.slice(at + 1)));
      const offset = utf8(text.slice(0, at)).length;
      expect(offset).toBeGreaterThan(2 * 768 * 1024);
      for (const body of [bad, chunked(bad, 1000)]) {
        await refused(send('POST', '', body), `byte 0x80 at byte offset ${offset} (counting from 0), in Bundle.entry[298].resource.name[0].family`, 'Bundle.entry[298].resource.name[0].family');
      }
    });

    test('XML bodies, gzip bodies and transactions are held to it too; a BOM is still dropped', async () => {
      const xml = latin1('<Patient xmlns="http://hl7.org/fhir"><id value="lat"/><name><family value="M\xfcller"/></name></Patient>');
      await refused(send('PUT', 'Patient/lat', xml, { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }), `byte 0xFC at byte offset ${xml.indexOf(0xfc)} (counting from 0); send it in UTF-8`);
      await refused(send('PUT', 'Patient/lat', new Uint8Array(gzipSync(PATIENT_LATIN1)), { 'Content-Encoding': 'gzip' }), `byte 0xFC at byte offset ${AT}`, 'Patient.name[0].family');
      const tx = latin1(JSON.stringify({ resourceType: 'Bundle', type: 'transaction', entry: [
        { resource: { resourceType: 'Patient', id: 'tx1', active: true }, request: { method: 'PUT', url: 'Patient/tx1' } },
        { resource: { resourceType: 'Patient', id: 'tx2', name: [{ given: ['J\xfcrgen'] }] }, request: { method: 'PUT', url: 'Patient/tx2' } },
      ] }));
      await refused(send('POST', '', tx), `byte 0xFC at byte offset ${tx.indexOf(0xfc)}`, 'Bundle.entry[1].resource.name[0].given[0]');
      expect((await send('GET', 'Patient/tx1', null)).status).toBe(404);
      const bom = concat(new Uint8Array([0xef, 0xbb, 0xbf]), utf8('{"resourceType":"Patient","id":"bom","name":[{"family":"M\u00fcller"}]}'));
      expect((await send('PUT', 'Patient/bom', bom)).status).toBe(201);
      expect((await send('PUT', 'Patient/bom', chunked(bom, 1))).status).toBe(200);
      // A BOM counts in the offsets: they are the body's bytes.
      const bomBad = concat(new Uint8Array([0xef, 0xbb, 0xbf]), PATIENT_LATIN1);
      await refused(send('PUT', 'Patient/lat', bomBad), `byte 0xFC at byte offset ${AT + 3}`, 'Patient.name[0].family');
      await refused(send('PUT', 'Patient/lat', chunked(bomBad, 2)), `byte 0xFC at byte offset ${AT + 3}`, 'Patient.name[0].family');
    });

    test('a body declared in another charset, or FHIR XML declaring another encoding, is the 415 naming it, not a 400, on the routes that read the body before its media type (operations, $export) too', async () => {
      const unsupported = async (res: Response | Promise<Response>, named: string) => {
        const before = await countVersions(t);
        const outcome = await expectOutcome(await res, 415, 'not-supported');
        expect(outcome.issue[0].diagnostics).toContain(named);
        expect(await countVersions(t)).toBe(before);
      };
      const params = latin1(JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'x', valueString: 'M\xfcller' }] }));
      const utf16 = concat(new Uint8Array([0xff, 0xfe]), new Uint8Array(Buffer.from(JSON.stringify({ resourceType: 'Parameters', parameter: [] }), 'utf16le')));
      for (const [body, charset] of [[params, 'ISO-8859-1'], [utf16, 'utf-16']] as const) {
        const type = `application/fhir+json; charset=${charset}`;
        // The same 415 a resource body gets (its media type is checked first).
        await unsupported(send('PUT', 'Patient/lat', body, { 'Content-Type': type }), `declares charset ${charset}`);
        await unsupported(send('POST', 'Patient/$everything', body, { 'Content-Type': type }), `declares charset ${charset}`);
        await unsupported(send('POST', 'Patient/$everything', chunked(body, 5), { 'Content-Type': type }), `declares charset ${charset}`);
        await unsupported(send('POST', '$export', body, { 'Content-Type': type, Prefer: 'respond-async', Accept: 'application/fhir+json' }), `declares charset ${charset}`);
      }
      // GraphQL's body of a media type it does not take: its 415, as when its bytes are UTF-8.
      await unsupported(send('POST', '$graphql', latin1('{ PatientList(family: "M\xfcller") { id } }'), { 'Content-Type': 'text/plain' }), 'A POST to $graphql takes application/json');
      // An operation's body of a media type that is not FHIR's: the 415 it is when its bytes are UTF-8.
      for (const type of ['text/plain', 'application/x-www-form-urlencoded']) await unsupported(send('POST', 'Patient/$everything', params, { 'Content-Type': type }), `Content-Type '${type}' is not supported`);
      // A form declared ISO-8859-1 holding its bytes: 415 too; one declared so whose bytes are ASCII is read as before.
      await unsupported(send('POST', 'Patient/_search', latin1('family=M\xfcller'), { 'Content-Type': 'application/x-www-form-urlencoded; charset=ISO-8859-1' }), 'declares charset ISO-8859-1');
      // As a Latin-1 form is sent (its ü percent-encoded, %FC): the same 415; declared UTF-8, the 400 naming the parameter.
      await unsupported(send('POST', 'Patient/_search', 'family=M%FCller', { 'Content-Type': 'application/x-www-form-urlencoded; charset=ISO-8859-1' }), 'declares charset ISO-8859-1');
      const misencoded = await expectOutcome(await send('POST', 'Patient/_search', 'family=M%FCller', { 'Content-Type': 'application/x-www-form-urlencoded; charset=UTF-8' }), 400, 'invalid');
      expect(misencoded.issue[0].expression).toEqual(['family']);
      expect((await send('POST', 'Patient/_search', 'family=Muller', { 'Content-Type': 'application/x-www-form-urlencoded; charset=ISO-8859-1' })).status).toBe(200);
      // FHIR XML whose declaration names ISO-8859-1 (or US-ASCII) and holds Latin-1 bytes: the parser's 415, as for ASCII bytes.
      const xml = (encoding: string) => latin1(`<?xml version="1.0" encoding="${encoding}"?><Patient xmlns="http://hl7.org/fhir"><id value="lat"/><name><family value="M\xfcller"/></name></Patient>`);
      for (const body of [xml('ISO-8859-1'), chunked(xml('ISO-8859-1'), 3)]) {
        await unsupported(send('PUT', 'Patient/lat', body, { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }), "declares encoding 'ISO-8859-1': FHIR XML is read in UTF-8 only");
      }
      await unsupported(send('PUT', 'Patient/lat', xml('US-ASCII'), { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }), "declares encoding 'US-ASCII' but holds byte 0xFC");
      // Declared UTF-8, it is the 400 naming the byte.
      await refused(send('PUT', 'Patient/lat', xml('UTF-8'), { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }), 'byte 0xFC');
    });

    test('PATCH bodies of each kind: JSON Patch, FHIRPath Patch in JSON and in XML', async () => {
      expect((await send('PUT', 'Patient/pt', utf8('{"resourceType":"Patient","id":"pt","active":true}'))).status).toBe(201);
      const jsonPatch = latin1('[{"op":"add","path":"/name","value":[{"family":"M\xfcller"}]}]');
      await refused(send('PATCH', 'Patient/pt', jsonPatch, { 'Content-Type': 'application/json-patch+json' }), `byte 0xFC at byte offset ${jsonPatch.indexOf(0xfc)} (counting from 0); send it in UTF-8`);
      const fhirPath = latin1(JSON.stringify({ resourceType: 'Parameters', parameter: [{ name: 'operation', part: [
        { name: 'type', valueCode: 'add' }, { name: 'path', valueString: 'Patient' }, { name: 'name', valueString: 'birthDate' }, { name: 'value', valueString: 'M\xfcller' },
      ] }] }));
      await refused(send('PATCH', 'Patient/pt', fhirPath), `byte 0xFC at byte offset ${fhirPath.indexOf(0xfc)}`, 'Parameters.parameter[0].part[3].valueString');
      const xmlPatch = latin1('<Parameters xmlns="http://hl7.org/fhir"><parameter><name value="operation"/><part><name value="type"/><valueCode value="replace"/></part><part><name value="path"/><valueString value="Patient.active"/></part><part><name value="value"/><valueString value="M\xfcller"/></part></parameter></Parameters>');
      await refused(send('PATCH', 'Patient/pt', xmlPatch, { 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }), `byte 0xFC at byte offset ${xmlPatch.indexOf(0xfc)}`);
    });

    test('forms and other text: a _search form, GraphQL, the token endpoint (400 invalid_request) and the login page', async () => {
      const form = latin1('family=M\xfcller');
      await refused(send('POST', 'Patient/_search', form, { 'Content-Type': 'application/x-www-form-urlencoded' }), "byte 0xFC at byte offset 8 (counting from 0), in the parameter 'family'; send it in UTF-8", 'family');
      // The parameter named as URLSearchParams decodes it, read whole or in chunks; a bad byte in a name names none.
      const later = latin1('_count=5&address%2Dcity=K\xf6ln');
      for (const body of [later, chunked(later, 3)]) {
        await refused(send('POST', 'Patient/_search', body, { 'Content-Type': 'application/x-www-form-urlencoded' }), `byte 0xF6 at byte offset ${later.indexOf(0xf6)} (counting from 0), in the parameter 'address-city'`, 'address-city');
      }
      await refused(send('POST', 'Patient/_search', latin1('_count=5&f\xfc=x'), { 'Content-Type': 'application/x-www-form-urlencoded' }), 'byte 0xFC at byte offset 10 (counting from 0); send it in UTF-8');
      const query = latin1('{"query":"{ PatientList(family: \\"M\xfcller\\") { id } }"}');
      await refused(send('POST', '$graphql', query, { 'Content-Type': 'application/json' }), `byte 0xFC at byte offset ${query.indexOf(0xfc)}`);
      const tokenForm = concat(utf8(`grant_type=client_credentials&client_id=${t.admin.client.clientId}&client_secret=${t.admin.clientSecret}&scope=`), latin1('system/Patient.r\xfc'));
      for (const body of [tokenForm, chunked(tokenForm, 7)]) {
        const res = await t.request('http://cinder.test/oauth2/token', { method: 'POST', body, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
        expect(res.status).toBe(400);
        const answer = (await res.json()) as Json;
        expect(answer.error).toBe('invalid_request');
        expect(answer.error_description).toBe(`The form is not UTF-8: byte 0xFC at byte offset ${tokenForm.indexOf(0xfc)} (counting from 0), in the parameter 'scope'; OAuth forms are read in UTF-8 only (RFC 6749 Appendix B): send it in UTF-8, with charset=utf-8 or no charset`);
      }
      const login = latin1('username=m\xfcller&password=x&csrf_token=y');
      const page = await t.request('http://cinder.test/oauth2/authorize', { method: 'POST', body: login, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
      expect(page.status).toBe(400);
      expect(await page.text()).toContain("The sign-in form could not be read: The form is not UTF-8: byte 0xFC at byte offset 10 (counting from 0), in the parameter &#39;username&#39;");
    });

    // RFC 6749 Appendix B: OAuth forms are UTF-8. One declaring ISO-8859-1 is read when it is ASCII (Java's
    // UrlEncodedFormEntity declares it by default); its Latin-1 bytes, raw or percent-encoded, are refused in words about the form.
    test('OAuth forms declaring charset=ISO-8859-1: ASCII read; a Latin-1 byte or %FC refused naming the form, the parameter and the charset', async () => {
      const secret = `client_id=${t.admin.client.clientId}&client_secret=${t.admin.clientSecret}`;
      const declared = { 'Content-Type': 'application/x-www-form-urlencoded; charset=ISO-8859-1' };
      const basic = `Basic ${btoa(`${t.admin.client.clientId}:${t.admin.clientSecret}`)}`;
      const ok = await t.request('http://cinder.test/oauth2/token', { method: 'POST', body: 'grant_type=client_credentials&scope=system%2FPatient.r', headers: { ...declared, Authorization: basic } });
      expect(ok.status).toBe(200);
      expect(((await ok.json()) as Json).scope).toBe('system/Patient.r');
      const percent = await t.request('http://cinder.test/oauth2/token', { method: 'POST', body: `grant_type=client_credentials&${secret}&scope=system%2FPatient.r%FC`, headers: declared });
      expect(percent.status).toBe(400);
      expect(await percent.json()).toEqual({
        error: 'invalid_request',
        error_description: "The parameter 'scope' is not well percent-encoded (a '%' must start two hex digits, and the bytes they encode must be UTF-8); the form declares charset ISO-8859-1, but OAuth forms are read in UTF-8 only (RFC 6749 Appendix B): percent-encode the UTF-8 bytes of each character",
      });
      const raw = latin1(`grant_type=client_credentials&${secret}&scope=system/Patient.r\xfc`);
      const bytes = await t.request('http://cinder.test/oauth2/token', { method: 'POST', body: raw, headers: declared });
      expect(bytes.status).toBe(400);
      const answer = (await bytes.json()) as Json;
      expect(answer).toEqual({
        error: 'invalid_request',
        error_description: `The form is not UTF-8 (it declares charset ISO-8859-1): byte 0xFC at byte offset ${raw.indexOf(0xfc)} (counting from 0), in the parameter 'scope'; OAuth forms are read in UTF-8 only (RFC 6749 Appendix B): send it in UTF-8, with charset=utf-8 or no charset`,
      });
      expect(answer.error_description).not.toContain('FHIR');
      for (const path of ['revoke', 'introspect']) {
        const res = await t.request(`http://cinder.test/oauth2/${path}`, { method: 'POST', body: `token=x%FCy&${secret}`, headers: declared });
        expect(((await res.json()) as Json).error_description).toContain("The parameter 'token' is not well percent-encoded (a '%' must start two hex digits, and the bytes they encode must be UTF-8); the form declares charset ISO-8859-1");
      }
      const login = await t.request('http://cinder.test/oauth2/authorize', { method: 'POST', body: latin1('username=m\xfcller&password=x&csrf_token=y'), headers: declared });
      expect(login.status).toBe(400);
      const html = await login.text();
      expect(html).toContain('The sign-in form could not be read: The form is not UTF-8 (it declares charset ISO-8859-1): byte 0xFC at byte offset 10');
      expect(html).not.toContain('FHIR');
      const percentLogin = await t.request('http://cinder.test/oauth2/authorize', { method: 'POST', body: 'username=m%FCller&password=x&csrf_token=y', headers: declared });
      expect(await percentLogin.text()).toContain('is not well percent-encoded (a &#39;%&#39; must start two hex digits, and the bytes they encode must be UTF-8); the form declares charset ISO-8859-1');
    });

    test('forms whose percent-encoded bytes are not UTF-8 (%FC): the token, revocation and introspection endpoints (400 invalid_request) and the login page', async () => {
      const secret = `client_id=${t.admin.client.clientId}&client_secret=${t.admin.clientSecret}`;
      for (const [path, form] of [['token', `grant_type=client_credentials&${secret}&scope=system%2FPatient.r%FC`], ['revoke', `token=x%FCy&${secret}`], ['introspect', `token=x%FCy&${secret}`]]) {
        const res = await t.request(`http://cinder.test/oauth2/${path}`, { method: 'POST', body: form, headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
        expect([path, res.status]).toEqual([path, 400]);
        expect(await res.json()).toEqual({
          error: 'invalid_request',
          error_description: `The parameter '${path === 'token' ? 'scope' : 'token'}' is not well percent-encoded (a '%' must start two hex digits, and the bytes they encode must be UTF-8)`,
        });
      }
      const page = await t.request('http://cinder.test/oauth2/authorize', { method: 'POST', body: 'username=m%FCller&password=x&csrf_token=y', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
      expect(page.status).toBe(400);
      expect(await page.text()).toContain('The sign-in form could not be read: The parameter &#39;username&#39; is not well percent-encoded');
      // A sign-in form whose CSRF token itself is malformed is still the sign-in form: a page, no redirect to the client.
      const app1 = await createClient(t.store, t.clock, { tenant: 't1', grants: ['authorization_code'], scopes: ['openid'], redirectUris: ['https://app.example/cb'] });
      const csrf = await t.request('http://cinder.test/oauth2/authorize', {
        method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: `response_type=code&client_id=${app1.client.clientId}&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&scope=openid&state=s&username=u&password=p&csrf_token=%zz`,
      });
      expect([csrf.status, csrf.headers.get('location')]).toEqual([400, null]);
      expect(await csrf.text()).toContain('The sign-in form could not be read: The parameter &#39;csrf_token&#39; is not well percent-encoded');
      // An authorization request by GET whose state holds %FC: an error page, no redirect carrying a state changed to U+FFFD.
      const app = await createClient(t.store, t.clock, { tenant: 't1', grants: ['authorization_code'], scopes: ['openid', 'patient/*.rs'], redirectUris: ['https://app.example/cb'] });
      const query = (state: string) => `response_type=code&client_id=${app.client.clientId}&redirect_uri=https%3A%2F%2Fapp.example%2Fcb&scope=openid&state=${state}&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256`;
      expect((await t.request(`http://cinder.test/oauth2/authorize?${query('ab%C3%BCcd')}`)).status).toBe(200);
      const get = await t.request(`http://cinder.test/oauth2/authorize?${query('ab%FCcd')}`);
      expect(get.status).toBe(400);
      expect(get.headers.get('location')).toBeNull();
      expect(await get.text()).toContain('The authorization request could not be read: The parameter &#39;state&#39; is not well percent-encoded');
    });

    test('a Binary\'s native content is not decoded: Latin-1 text and any bytes are stored and read back byte for byte', async () => {
      const bytes = latin1('Name: M\xfcller\r\nStadt: K\xf6ln\xff\x80\x00');
      const put = await t.request(`${t.fhir()}/Binary/raw`, { method: 'PUT', body: bytes, headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'text/plain; charset=iso-8859-1' } });
      expect(put.status).toBe(201);
      const read = await t.request(`${t.fhir()}/Binary/raw`, { headers: { Authorization: `Bearer ${token}`, Accept: 'text/plain' } });
      expect(read.status).toBe(200);
      expect(new Uint8Array(await read.arrayBuffer())).toEqual(bytes);
      // Large and chunked: read a part at a time, as base64.
      const big = new Uint8Array(2 * 768 * 1024 + 5).map((_, i) => (i * 131 + 7) & 0xff);
      const stored = await t.request(`${t.fhir()}/Binary/big`, { method: 'PUT', body: chunked(big, 100_001), headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/octet-stream' } });
      expect(stored.status).toBe(201);
      const back = await t.request(`${t.fhir()}/Binary/big`, { headers: { Authorization: `Bearer ${token}`, Accept: 'application/octet-stream' } });
      expect(new Uint8Array(await back.arrayBuffer())).toEqual(big);
    });
  });
});
