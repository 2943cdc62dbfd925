/**
 * FHIR XML read in slices that let the event loop turn (src/fhir/xml/from-xml-paced.ts): whatever the slice,
 * the JSON (numbers' literals included) and the errors are those of reading the whole text at once, and the
 * loop turns once the time budget is spent.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { stringifyExact } from '../../../src/fhir/exact-json.ts';
import { parseFhirXml } from '../../../src/fhir/xml/from-xml.ts';
import { parseFhirXmlPaced } from '../../../src/fhir/xml/from-xml-paced.ts';

const DIR = new URL('../../fixtures/r4-xml/', import.meta.url);
const EXAMPLES = readdirSync(DIR).filter((f) => f.endsWith('.xml')).map((f) => [f, readFileSync(new URL(f, DIR), 'utf8')] as const);
const NS = 'xmlns="http://hl7.org/fhir"';

/** What a reading gives: the JSON text (literals as written), or the error's message and expression. */
async function outcome(read: () => unknown): Promise<string> {
  try {
    return stringifyExact(await read());
  } catch (err) {
    return `${(err as Error).message} ${JSON.stringify((err as { issues?: { expression?: string[] }[] }).issues?.[0]?.expression)}`;
  }
}

const noTurn = { turn: async () => {} };

describe('FHIR XML read in slices', () => {
  test("HL7's XML examples (Bundles among them) give the JSON the whole text gives, whatever the slice", async () => {
    for (const [name, text] of EXAMPLES) {
      const expected = await outcome(() => parseFhirXml(text));
      expect(expected.startsWith('{')).toBe(true);
      for (const slice of [1, 7, 100, 4096]) {
        expect({ name, slice, got: await outcome(() => parseFhirXmlPaced(text, {}, { slice, budgetMs: 0, ...noTurn })) }).toEqual({ name, slice, got: expected });
      }
    }
  });

  const entry = (i: number, extra = '') =>
    `<entry><resource><Observation><status value="final"/><code><text value="\u{1F600} ${i}"/></code>${extra}<valueQuantity><value value="${i}.50"/></valueQuantity></Observation></resource></entry>`;
  const bundle = (entries: string[], after = '') => `<Bundle ${NS}><type value="collection"/>${entries.join('').replace(/<Observation>/g, `<Observation ${NS}>`)}${after}</Bundle>`;

  test('numbers keep their literals; a surrogate pair cut by a slice is read whole', async () => {
    const text = bundle([0, 1, 2].map((i) => entry(i)));
    const expected = await outcome(() => parseFhirXml(text));
    expect(expected).toContain('"value":1.50');
    for (const slice of [1, 2, 3, 5, 11]) expect(await outcome(() => parseFhirXmlPaced(text, {}, { slice, budgetMs: 0, ...noTurn }))).toBe(expected);
  });

  test('the errors are those of the whole text: the first entry not FHIR XML, malformed XML, the Bundle\'s own elements', async () => {
    const texts = [
      bundle([entry(0), entry(1, '<nickname value="x"/>'), entry(2, '<nickname value="y"/>')]),
      bundle([entry(0), entry(1, '<nickname value="x"/>')]).replace('</Bundle>', '</Bundl>'),
      bundle([entry(0), entry(1)], '<type value="batch"/>'),
      bundle([entry(0), entry(1, '<nickname value="x"/>')], '<type value="batch"/>'),
      bundle([entry(0)]).replace('<type value="collection"/>', '<type value="collection"/><nonsense/>'),
      `<Patient ${NS}><name><family value="A"/></name><nickname value="x"/></Patient>`,
      `<Patient ${NS}><name><family value="A"/></name>`,
    ];
    for (const text of texts) {
      const expected = await outcome(() => parseFhirXml(text));
      expect(expected.startsWith('{')).toBe(false);
      for (const slice of [1, 9, 64]) expect({ text, got: await outcome(() => parseFhirXmlPaced(text, {}, { slice, budgetMs: 0, ...noTurn })) }).toEqual({ text, got: expected });
    }
  });

  test("of several problems, the one told is the whole text's first: the Bundle's own elements before an entry, malformed XML after them", async () => {
    const texts = [
      // Bundle.link after an entry is out of order; the entry after it is not FHIR XML.
      bundle([entry(0), '<link><relation value="self"/><url value="http://x.org"/></link>', entry(1, '<nickname value="x"/>')]),
      // An entry after the Bundle's signature is out of order, and not FHIR XML besides.
      bundle([entry(0)], `<signature><type><code value="x"/></type><when value="2020-01-01T00:00:00Z"/><who><display value="x"/></who></signature>${entry(1, '<nickname value="x"/>').replace('<Observation>', `<Observation ${NS}>`)}`),
      // The Bundle's own element before its first entry is unknown, and the document is not well-formed further on.
      bundle([entry(0), entry(1)]).replace('<type value="collection"/>', '<type value="collection"/><nonsense/>').replace('</Bundle>', '<open></Bundle>'),
    ];
    for (const text of texts) {
      const expected = await outcome(() => parseFhirXml(text));
      expect(expected.startsWith('{')).toBe(false);
      for (const slice of [1, 9, 64]) expect({ text, got: await outcome(() => parseFhirXmlPaced(text, {}, { slice, budgetMs: 0, ...noTurn })) }).toEqual({ text, got: expected });
    }
  });

  test("a List's own entries, and a Bundle within a Parameters, are read whole as the whole text reads them", async () => {
    const texts = [
      `<List ${NS}><status value="current"/><mode value="working"/>${'<entry><item><reference value="Patient/a"/></item></entry>'.repeat(5)}</List>`,
      `<Parameters ${NS}><parameter><name value="b"/><resource>${bundle([entry(0), entry(1)])}</resource></parameter></Parameters>`,
    ];
    for (const text of texts) {
      const expected = await outcome(() => parseFhirXml(text));
      expect(expected).toContain('"entry":[');
      for (const slice of [1, 13]) expect(await outcome(() => parseFhirXmlPaced(text, {}, { slice, budgetMs: 0, ...noTurn }))).toBe(expected);
    }
  });

  test('the loop turns once the budget is spent, and not for a text of one slice', async () => {
    const text = bundle(Array.from({ length: 50 }, (_, i) => entry(i)));
    let turns = 0;
    const turn = async () => void turns++;
    await parseFhirXmlPaced(text, {}, { slice: 100, budgetMs: 0, turn });
    expect(turns).toBe(Math.ceil(text.length / 100));
    turns = 0;
    await parseFhirXmlPaced(text, {}, { slice: 100, budgetMs: 60_000, turn });
    expect(turns).toBe(0);
    await parseFhirXmlPaced(text, {}, { slice: text.length, budgetMs: 0, turn });
    expect(turns).toBe(0);
  });
});
