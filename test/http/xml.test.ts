/**
 * The FHIR XML format over the REST API (R4 http.html 3.1.0.1.10, xml.html): XML bodies for create,
 * conditional update, transactions and operations; XML answers for reads, searches, history, errors and
 * the CapabilityStatement, by `_format` (which overrides Accept) or Accept, or the body's own format when
 * the client names none; on both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import type { Json } from '../helpers/fhir.ts';
import { parseFhirXml } from '../../src/fhir/xml/from-xml.ts';
import { toFhirXml } from '../../src/fhir/xml/to-xml.ts';

const XML = 'application/fhir+xml; charset=utf-8';
const NS = 'xmlns="http://hl7.org/fhir"';

await eachStore((kind, fresh) => {
  describe(`FHIR XML over HTTP (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const call = (method: string, path: string, body?: string, headers: Record<string, string> = {}) =>
      t.request(`${t.fhir()}/${path}`, { method, headers: { Authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/fhir+xml' }), ...headers }, ...(body === undefined ? {} : { body }) });
    /** The answer's status, Content-Type and body read as FHIR XML. */
    const xmlOf = async (res: Response) => ({ status: res.status, type: res.headers.get('content-type'), body: parseFhirXml(await res.text()) as Json });

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('a search whose parameters hold the text /$graphql is answered in XML as any other', async () => {
      const res = await call('GET', 'Patient?name=/$graphql&_format=xml');
      expect([res.status, res.headers.get('content-type')]).toEqual([200, XML]);
      expect((parseFhirXml(await res.text()) as Json).resourceType).toBe('Bundle');
    });

    test('create from XML answers XML (the body\'s format, no Accept); read by Accept and _format; the stored JSON is the same content', async () => {
      const body = `<?xml version="1.0" encoding="UTF-8"?>
<Patient ${NS}>
  <text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml"><p>Ann <b>Lee</b> &amp; co</p></div></text>
  <identifier><system value="urn:mrn"/><value value="x-1"/></identifier>
  <name><family value="Lee"/><given value="Ann"/><given id="g2"><extension url="http://example.org/nick"><valueString value="Annie"/></extension></given></name>
  <gender value="female"/>
  <birthDate value="1980-02-03"/>
</Patient>`;
      const created = await call('POST', 'Patient', body);
      const answer = await xmlOf(created);
      expect([answer.status, answer.type]).toEqual([201, XML]);
      const id = answer.body.id as string;
      expect(answer.body).toMatchObject({ resourceType: 'Patient', gender: 'female', name: [{ family: 'Lee', given: ['Ann', null], _given: [null, { id: 'g2' }] }] });
      const json = (await (await call('GET', `Patient/${id}`, undefined, { Accept: 'application/fhir+json' })).json()) as Json;
      expect(json.text.div).toBe('<div xmlns="http://www.w3.org/1999/xhtml"><p>Ann <b>Lee</b> &amp; co</p></div>');
      expect(json.name[0]._given).toEqual([null, { id: 'g2', extension: [{ url: 'http://example.org/nick', valueString: 'Annie' }] }]);
      for (const [path, headers] of [[`Patient/${id}`, { Accept: 'application/fhir+xml' }], [`Patient/${id}?_format=xml`, { Accept: 'application/fhir+json' }], [`Patient/${id}?_format=application/fhir%2Bxml`, {}]] as const) {
        const read = await xmlOf(await call('GET', path, undefined, headers));
        expect([path, read.status, read.type]).toEqual([path, 200, XML]);
        expect(read.body).toEqual(json);
      }
      // The generic XML types are answered as themselves; HEAD as GET, without a body.
      const generic = await call('GET', `Patient/${id}`, undefined, { Accept: 'text/xml' });
      expect(generic.headers.get('content-type')).toBe('text/xml; charset=utf-8');
      expect(generic.headers.get('vary')).toContain('Accept');
      const text = await generic.text();
      const head = await call('HEAD', `Patient/${id}`, undefined, { Accept: 'text/xml' });
      expect([head.status, head.headers.get('content-type'), head.headers.get('content-length')]).toEqual([200, 'text/xml; charset=utf-8', String(Buffer.byteLength(text))]);
      // _pretty indents the XML.
      expect(await (await call('GET', `Patient/${id}?_format=xml&_pretty=true`)).text()).toContain('\n  <id value=');
    });

    test('Accept: XML when it ranks an XML type above every JSON one (the first named at an equal q); a wildcard names neither', async () => {
      const id = ((await (await call('POST', 'Basic', `<Basic ${NS}><code><text value="n"/></code></Basic>`, { Accept: 'application/fhir+json' })).json()) as Json).id;
      const cases: [string, string][] = [
        ['application/fhir+json;q=0.5, application/fhir+xml', 'application/fhir+xml'],
        ['application/fhir+json, application/fhir+xml', 'application/fhir+json'],
        ['application/fhir+xml, application/fhir+json', 'application/fhir+xml'],
        ['application/xml, */*', 'application/xml'],
        ['application/fhir+xml;q=0, application/json', 'application/json'],
        ['*/*', 'application/fhir+json'],
        ['application/xml+fhir', 'application/fhir+xml'],
        // A wildcard above every XML type named is JSON's (RFC 9110 12.5.1); a browser's Accept still ranks XML first.
        ['application/fhir+xml;q=0.1, */*', 'application/fhir+json'],
        ['application/xml;q=0.5, application/*;q=0.8', 'application/fhir+json'],
        ['*/*;q=0.5, application/fhir+xml', 'application/fhir+xml'],
        ['text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8', 'application/xml'],
      ];
      for (const [accept, type] of cases) {
        const res = await call('GET', `Basic/${id}`, undefined, { Accept: accept });
        expect([accept, res.status, res.headers.get('content-type')]).toEqual([accept, 200, `${type}; charset=utf-8`]);
      }
      // With a wildcard only, an XML body is answered in XML; a JSON Accept overrides the body's format.
      expect((await call('POST', 'Basic', `<Basic ${NS}><code><text value="w"/></code></Basic>`, { Accept: '*/*' })).headers.get('content-type')).toBe(XML);
      expect((await call('POST', 'Basic', `<Basic ${NS}><code><text value="w"/></code></Basic>`, { Accept: 'application/json' })).headers.get('content-type')).toBe('application/json; charset=utf-8');
    });

    test('search and history Bundles in XML, decimals as written', async () => {
      const obs = `<Observation ${NS}><status value="final"/><code><text value="temp"/></code><valueQuantity><value value="98.60"/><unit value="F"/></valueQuantity></Observation>`;
      expect((await call('POST', 'Observation', obs)).status).toBe(201);
      const search = await call('GET', 'Observation?code:text=temp', undefined, { Accept: 'application/fhir+xml' });
      const text = await search.text();
      expect(text).toContain('<value value="98.60"/>');
      const bundle = parseFhirXml(text) as Json;
      expect([search.status, search.headers.get('content-type'), bundle.type, bundle.total]).toEqual([200, XML, 'searchset', 1]);
      expect(bundle.entry[0].resource.valueQuantity.value).toBe(98.6);
      expect(bundle.entry[0].search.mode).toBe('match');
      const history = await xmlOf(await call('GET', '_history?_format=xml'));
      expect([history.status, history.body.type]).toEqual([200, 'history']);
    });

    test('a valid narrative nested deeply (300 levels) is written as XHTML in an XML answer, not as escaped text', async () => {
      const div = `<div xmlns="http://www.w3.org/1999/xhtml">${'<b>'.repeat(300)}deep${'</b>'.repeat(300)}</div>`;
      const created = await call('POST', 'Patient', JSON.stringify({ resourceType: 'Patient', text: { status: 'generated', div } }), { 'Content-Type': 'application/fhir+json', Accept: 'application/fhir+xml' });
      const text = await created.text();
      expect(created.status).toBe(201);
      expect(text).toContain(`<b><b>deep</b></b>`);
      expect(((parseFhirXml(text) as Json).text as Json).div).toBe(div);
    });

    test('a narrative whose div declares XHTML by a prefix (<h:div xmlns:h=...>), valid in JSON, is written and read as XML as it is', async () => {
      const div = '<h:div xmlns:h="http://www.w3.org/1999/xhtml"><h:p>Ann</h:p></h:div>';
      const created = await call('POST', 'Patient', JSON.stringify({ resourceType: 'Patient', text: { status: 'generated', div } }), { 'Content-Type': 'application/fhir+json', Accept: 'application/fhir+xml' });
      const text = await created.text();
      expect([created.status, text]).toEqual([201, expect.stringContaining(`<status value="generated"/>${div}</text>`)]);
      const back = await call('POST', 'Patient', `<Patient ${NS}><text><status value="generated"/>${div}</text></Patient>`, { Accept: 'application/fhir+json' });
      expect(back.status).toBe(201);
      expect(((await back.json()) as Json).text.div).toBe(div);
    });

    test('a string holding U+FFFE or U+FFFF, which XML cannot carry, is refused (422), so every resource stored can be answered in XML', async () => {
      for (const family of ['a\uFFFEb', 'a\uFFFFb']) {
        const res = await call('POST', 'Patient', JSON.stringify({ resourceType: 'Patient', name: [{ family }] }), { 'Content-Type': 'application/fhir+json', Accept: 'application/fhir+json' });
        const body = (await res.json()) as Json;
        expect([res.status, body.issue[0].expression, body.issue[0].diagnostics]).toEqual([422, ['Patient.name[0].family'], expect.stringContaining('XML')]);
      }
    });

    test('conditional update and a transaction from XML', async () => {
      const update = await call('PUT', 'Patient?identifier=urn:mrn|cond-1', `<Patient ${NS}><identifier><system value="urn:mrn"/><value value="cond-1"/></identifier><active value="true"/></Patient>`, { Accept: 'application/fhir+json' });
      expect(update.status).toBe(201);
      const transaction = toFhirXml({
        resourceType: 'Bundle', type: 'transaction', entry: [
          { fullUrl: 'urn:uuid:2c1f7a34-5c3c-4b3a-9b0e-6a1d8c1a0f01', resource: { resourceType: 'Patient', name: [{ family: 'Tx' }] }, request: { method: 'POST', url: 'Patient' } },
          { resource: { resourceType: 'Observation', status: 'final', code: { text: 'tx' }, subject: { reference: 'urn:uuid:2c1f7a34-5c3c-4b3a-9b0e-6a1d8c1a0f01' } }, request: { method: 'POST', url: 'Observation' } },
        ],
      });
      const answer = await xmlOf(await call('POST', '', transaction));
      expect([answer.status, answer.type, answer.body.type]).toEqual([200, XML, 'transaction-response']);
      expect(answer.body.entry.map((e: Json) => e.response.status)).toEqual(['201 Created', '201 Created']);
      const patientId = /Patient\/([^/]+)/.exec(answer.body.entry[0].response.location)![1];
      const obs = (await (await call('GET', `Observation?subject=Patient/${patientId}`)).json()) as Json;
      expect(obs.entry?.length, JSON.stringify(obs)).toBe(1);
    });

    test('operations take a Parameters body in XML and answer in XML; the CapabilityStatement lists xml', async () => {
      const validate = toFhirXml({ resourceType: 'Parameters', parameter: [{ name: 'resource', resource: { resourceType: 'Patient', gender: 'nonsense' } }] });
      const outcome = await xmlOf(await call('POST', 'Patient/$validate', validate));
      expect([outcome.status, outcome.type, outcome.body.resourceType]).toEqual([200, XML, 'OperationOutcome']);
      expect(outcome.body.issue.some((i: Json) => i.severity === 'error' && i.expression?.[0] === 'Patient.gender')).toBe(true);
      // The terminology operations (ValueSet/$validate-code has a hot route, which leaves XML to Hono's).
      const code = toFhirXml({ resourceType: 'Parameters', parameter: [{ name: 'url', valueUri: 'http://hl7.org/fhir/ValueSet/administrative-gender' }, { name: 'code', valueCode: 'female' }, { name: 'system', valueUri: 'http://hl7.org/fhir/administrative-gender' }] });
      const result = await xmlOf(await call('POST', 'ValueSet/$validate-code', code));
      expect([result.status, result.type, result.body.parameter.find((p: Json) => p.name === 'result')]).toEqual([200, XML, { name: 'result', valueBoolean: true }]);
      const metadata = await xmlOf(await t.request(`${t.fhir()}/metadata`, { headers: { Accept: 'application/fhir+xml' } }));
      expect([metadata.status, metadata.type]).toEqual([200, XML]);
      expect(metadata.body.format).toContain('xml');
      expect(metadata.body.format).toContain('application/fhir+xml');
    });

    test('errors: malformed or non-FHIR XML is a 400 OperationOutcome naming the element, in XML; others in XML too', async () => {
      const unknown = await xmlOf(await call('POST', 'Patient', `<Patient ${NS}><nickname value="x"/></Patient>`));
      expect([unknown.status, unknown.type, unknown.body.resourceType]).toEqual([400, XML, 'OperationOutcome']);
      expect(unknown.body.issue[0].expression).toEqual(['Patient.nickname']);
      const xxe = await xmlOf(await call('POST', 'Patient', `<!DOCTYPE p [<!ENTITY e SYSTEM "file:///etc/passwd">]><Patient ${NS}><id value="&e;"/></Patient>`));
      expect([xxe.status, xxe.body.issue[0].diagnostics]).toEqual([400, expect.stringContaining('DOCTYPE')]);
      const namespace = await xmlOf(await call('POST', 'Patient', '<Patient><active value="true"/></Patient>'));
      expect([namespace.status, namespace.body.issue[0].diagnostics]).toEqual([400, expect.stringContaining('FHIR namespace')]);
      // Validation of the XML's content answers as for JSON (422), in XML.
      const invalid = await xmlOf(await call('POST', 'Patient', `<Patient ${NS}><gender value="nonsense"/></Patient>`));
      expect([invalid.status, invalid.body.issue[0].expression]).toEqual([422, ['Patient.gender']]);
      const missing = await xmlOf(await call('GET', 'Patient/nobody', undefined, { Accept: 'application/fhir+xml' }));
      expect([missing.status, missing.type, missing.body.resourceType]).toEqual([404, XML, 'OperationOutcome']);
      const noToken = await xmlOf(await t.request(`${t.fhir()}/Patient/nobody?_format=xml`));
      expect([noToken.status, noToken.type, noToken.body.resourceType]).toEqual([401, XML, 'OperationOutcome']);
      // A body over the size limit is refused as a JSON one is.
      const big = `<Basic ${NS}><code><text value="${'x'.repeat(17 * 1024 * 1024)}"/></code></Basic>`;
      expect((await call('POST', 'Basic', big)).status).toBe(413);
    });
  });
});
