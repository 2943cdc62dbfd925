/**
 * XML request bodies are read in slices that let the event loop turn (src/fhir/xml/from-xml-paced.ts): a
 * large XML Bundle does not hold the process's other requests while it is read, and what is read is what
 * reading the whole text at once gives (the stored resources, the 400 naming the element), on both stores.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { createTestApp, type TestApp } from '../helpers/app.ts';
import { eachStore } from '../helpers/export.ts';
import { tailHold } from '../helpers/loop.ts';
import type { Json } from '../helpers/fhir.ts';
import { parseFhirXml } from '../../src/fhir/xml/from-xml.ts';
import { XML_SLICE } from '../../src/fhir/xml/from-xml-paced.ts';
import { toFhirXml } from '../../src/fhir/xml/to-xml.ts';

const NS = 'xmlns="http://hl7.org/fhir"';

/** An Observation entry of a transaction, with a narrative and a note that make it a few hundred bytes. */
function observation(i: number): Json {
  return {
    fullUrl: `urn:uuid:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    resource: {
      resourceType: 'Observation',
      text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml"><p>Heart rate <b>${i}</b> &amp; more &#x1F600; \u00e9</p></div>` },
      status: 'final',
      category: [{ coding: [{ system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' }] }],
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }], text: `hr \u{1F600} ${i}` },
      subject: { reference: 'Patient/p1' },
      effectiveDateTime: '2020-01-01T00:00:00Z',
      valueQuantity: { value: 60.5 + (i % 40), unit: '/min', system: 'http://unitsofmeasure.org', code: '/min' },
      note: [{ text: `note ${i}: ${'x'.repeat(300)}` }],
    },
    request: { method: 'POST', url: 'Observation' },
  };
}

const transaction = (n: number): Json => ({ resourceType: 'Bundle', type: 'transaction', entry: Array.from({ length: n }, (_, i) => observation(i)) });

await eachStore((kind, fresh) => {
  describe(`XML bodies read in slices (${kind})`, () => {
    let t: TestApp;
    let token: string;
    const post = (path: string, body: string, type = 'application/fhir+xml') =>
      t.request(`${t.fhir()}${path}`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': type, Accept: 'application/fhir+json' }, body });

    beforeAll(async () => {
      t = await createTestApp({ store: await fresh() });
      token = await t.token();
    });
    afterAll(() => t.close());

    test('a transaction in XML many slices long stores what its JSON twin stores', async () => {
      const bundle = transaction(240);
      const xml = toFhirXml(bundle as never, true);
      expect(xml.length).toBeGreaterThan(4 * XML_SLICE);
      const stored = async (res: Response) => {
        const answer = (await res.json()) as Json;
        expect([res.status, answer.type]).toEqual([200, 'transaction-response']);
        return Promise.all((answer.entry as Json[]).map(async (e) => {
          const { id: _id, meta: _meta, ...content } = (await (await t.request(e.response.location.replace(/\/_history\/.*$/, ''), { headers: { Authorization: `Bearer ${token}` } })).json()) as Json;
          return content;
        }));
      };
      const fromXml = await stored(await post('', xml));
      const fromJson = await stored(await post('', JSON.stringify(bundle), 'application/fhir+json'));
      expect(fromXml.length).toBe(240);
      expect(fromXml).toEqual(fromJson);
      expect(fromXml[7]!.text.div).toBe(bundle.entry[7].resource.text.div);
    });

    test('a number written otherwise than JSON writes it keeps its literal, in an entry far into a long body', async () => {
      const xml = toFhirXml(transaction(240) as never, false).replace('<value value="60.5"/><unit value="/min"/><system value="http://unitsofmeasure.org"/><code value="/min"/></valueQuantity><note><text value="note 200:', '<value value="60.50"/><unit value="/min"/><system value="http://unitsofmeasure.org"/><code value="/min"/></valueQuantity><note><text value="note 200:');
      expect(xml).toContain('"60.50"');
      const answer = (await (await post('', xml)).json()) as Json;
      const read = await t.request(answer.entry[200].response.location.replace(/\/_history\/.*$/, ''), { headers: { Authorization: `Bearer ${token}` } });
      expect(await read.text()).toContain('"valueQuantity":{"value":60.50,');
    });

    test('an entry that is not FHIR XML, far into the body, is the 400 the whole text gives, and nothing is stored', async () => {
      const bundle = transaction(300);
      const xml = toFhirXml(bundle as never, false).replace('<note><text value="note 41:', '<nickname value="Jim"/><note><text value="note 41:');
      let expected: Json | undefined;
      try {
        parseFhirXml(xml);
      } catch (err) {
        expected = { diagnostics: (err as Error).message, expression: (err as { issues: Json[] }).issues[0]!.expression };
      }
      expect(expected!.expression).toEqual(['Bundle.entry[41].resource.nickname']);
      const before = ((await (await t.request(`${t.fhir()}/Observation?_summary=count`, { headers: { Authorization: `Bearer ${token}` } })).json()) as Json).total;
      const res = await post('', xml);
      const body = (await res.json()) as Json;
      expect([res.status, body.issue[0].diagnostics, body.issue[0].expression]).toEqual([400, expected!.diagnostics, expected!.expression]);
      const after = ((await (await t.request(`${t.fhir()}/Observation?_summary=count`, { headers: { Authorization: `Bearer ${token}` } })).json()) as Json).total;
      expect(after).toBe(before);
    });

    test('malformed XML at the end of a long body is the 400 with the line and column the whole text gives', async () => {
      const xml = toFhirXml(transaction(300) as never, true).replace(/<\/Bundle>\s*$/, '</Bundl>');
      expect(() => parseFhirXml(xml)).toThrow('</Bundl>');
      let expected = '';
      try {
        parseFhirXml(xml);
      } catch (err) {
        expected = (err as Error).message;
      }
      const res = await post('', xml);
      expect([res.status, ((await res.json()) as Json).issue[0].diagnostics]).toEqual([400, expected]);
    });

    test("of several problems in a long body, the 400 is the whole text's first: a Bundle's element out of order before an entry not FHIR XML, malformed XML after the Bundle's own", async () => {
      const messageOf = (xml: string) => {
        try {
          parseFhirXml(xml);
        } catch (err) {
          return { diagnostics: (err as Error).message, expression: (err as { issues: Json[] }).issues[0]!.expression };
        }
        throw new Error('read');
      };
      const body = toFhirXml(transaction(300) as never, false);
      const link = body.replace('<entry><fullUrl value="urn:uuid:00000000-0000-4000-8000-000000000250"/>', '<link><relation value="self"/><url value="http://x.org"/></link>$&')
        .replace('<note><text value="note 260:', '<nickname value="Jim"/><note><text value="note 260:');
      const malformed = body.replace('<type value="transaction"/>', '<type value="transaction"/><nonsense/>').replace(/<\/Bundle>$/, '<open></Bundle>');
      for (const [xml, expected] of [[link, { diagnostics: "Element 'link' in Bundle is out of order: R4 defines it before 'entry'", expression: ['Bundle.link'] }], [malformed, undefined]] as const) {
        expect(xml.length).toBeGreaterThan(4 * XML_SLICE);
        const whole = messageOf(xml);
        if (expected) expect(whole).toEqual(expected);
        else expect(whole.diagnostics).toContain("does not match '<open>'");
        const res = await post('', xml);
        const issue = ((await res.json()) as Json).issue[0];
        expect([res.status, issue.diagnostics, issue.expression]).toEqual([400, whole.diagnostics, whole.expression]);
      }
    });

    test("a List many slices long keeps its own entries (List.entry is no Bundle's entry)", async () => {
      const items = Array.from({ length: 2000 }, (_, i) => `<entry><flag><text value="f${i}"/></flag><item><reference value="Patient/p${i}"/></item></entry>`).join('');
      const xml = `<List ${NS}><status value="current"/><mode value="working"/>${items}</List>`;
      expect(xml.length).toBeGreaterThan(2 * XML_SLICE);
      const res = await post('/List', xml);
      const created = (await res.json()) as Json;
      expect([res.status, created.entry?.length, created.entry?.[1999]]).toEqual([201, 2000, { flag: { text: 'f1999' }, item: { reference: 'Patient/p1999' } }]);
    });

    test('a resource other than a Bundle, many slices long, is read whole as before', async () => {
      const div = `<div xmlns="http://www.w3.org/1999/xhtml">${'<p>Ann &amp; <b>Lee</b></p>\n'.repeat(12_000)}</div>`;
      const xml = `<Patient ${NS}><text><status value="generated"/>${div}</text><name><family value="Lee"/><given value="Ann \u{1F600}"/></name></Patient>`;
      expect(xml.length).toBeGreaterThan(4 * XML_SLICE);
      const res = await post('/Patient', xml);
      const created = (await res.json()) as Json;
      expect(res.status).toBe(201);
      expect(created.text.div).toBe(div);
      expect(created.name).toEqual([{ family: 'Lee', given: ['Ann \u{1F600}'] }]);
    });
  });
});

describe('the event loop while an XML body is read', () => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp();
    token = await t.token();
  });
  afterAll(() => t.close());

  test('a large XML Bundle lets the event loop turn while it is read, up to its answer', async () => {
    // Its last entry is not FHIR XML: the answer is the 400 of reading the body, with no store work after it.
    const xml = toFhirXml(transaction(12_000) as never, false).replace(/<note><text value="note 11999:/, '<nickname value="Jim"/><note><text value="note 11999:');
    // Encoded before: what the client does is not the server's work.
    const body = new TextEncoder().encode(xml);
    const { result: res, took, tail } = await tailHold(() =>
      t.request(`${t.fhir()}`, { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/fhir+xml', Accept: 'application/fhir+json' }, body }));
    expect(res.status).toBe(400);
    expect(((await res.json()) as Json).issue[0].expression).toEqual(['Bundle.entry[11999].resource.nickname']);
    // Read at once, the body (7 MB) held the loop from its reading to the answer (0.6-1.6 s, 84-100% of the
    // request's time on two busy cores); read in slices, the loop turns after each 10 ms of reading
    // (WORK_SLICE_MS, src/fhir/turns.ts), up to the 400.
    expect({ took: took > 80, tail: tail < took / 4 }).toEqual({ took: true, tail: true });
  });
});
