/**
 * The XML reader fed in chunks (src/fhir/xml/xml-parse.ts createXmlReader) and FHIR XML read as a stream
 * (src/fhir/xml/from-xml-stream.ts): cut anywhere, a document gives the tree, the JSON and the errors
 * (with their line and column) that the whole text gives; a streamed Bundle hands over each entry as it
 * completes and lets go of the text before it.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { FhirError } from '../../../src/errors.ts';
import { stringifyExact } from '../../../src/fhir/exact-json.ts';
import { parseFhirXml } from '../../../src/fhir/xml/from-xml.ts';
import { streamFhirXml, type StreamedEntry } from '../../../src/fhir/xml/from-xml-stream.ts';
import { createXmlReader, parseXml, type XmlElement } from '../../../src/fhir/xml/xml-parse.ts';

const DIR = new URL('../../fixtures/r4-xml/', import.meta.url);
const EXAMPLES = readdirSync(DIR).filter((f) => f.endsWith('.xml')).map((f) => [f, readFileSync(new URL(f, DIR), 'utf8')] as const);
const NS = 'xmlns="http://hl7.org/fhir"';
const SIZES = [1, 2, 3, 7, 64, 4096];

const pieces = (text: string, size: number) => Array.from({ length: Math.ceil(text.length / size) }, (_, k) => text.slice(k * size, (k + 1) * size));

/** The tree (or the error's message) a text gives read whole, or pushed in chunks of `size`. */
function outcome(read: () => XmlElement): string {
  try {
    return JSON.stringify(read());
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  }
}
const whole = (text: string) => outcome(() => parseXml(text, 100, true));
function chunked(text: string, size: number): string {
  return outcome(() => {
    const reader = createXmlReader({ maxDepth: 100, dropSpace: true });
    for (const piece of pieces(text, size)) reader.push(piece);
    return reader.end();
  });
}

describe('the XML reader fed in chunks', () => {
  test("HL7's XML examples give the tree the whole text gives, whatever the chunks' size", () => {
    for (const [name, text] of EXAMPLES) {
      const expected = whole(text);
      expect(expected.startsWith('{')).toBe(true);
      for (const size of SIZES) expect({ name, size, tree: chunked(text, size) }).toEqual({ name, size, tree: expected });
    }
  });

  test('CR LF cut between its two characters, a BOM, the declaration, comments, CDATA and PIs cut anywhere', () => {
    const text = `\uFEFF<?xml version="1.0" encoding="UTF-8"?>\r\n<!-- a -- comment? no: --><a x="1\r\n2">\r\n<?pi data?><![CDATA[<b>\r</b>]]>&lt;&#x41;<c/>\r</a>\r\n`.replace('a -- comment? no: ', 'a comment ');
    const expected = whole(text);
    expect(expected).toContain('"text":"<b>\\n</b>"');
    for (const size of SIZES) expect(chunked(text, size)).toBe(expected);
  });

  test('a US-ASCII declaration over ASCII text reads as UTF-8 does, wherever the chunks end', () => {
    const text = `<?xml version='1.0' encoding='ANSI_X3.4-1968'?>\n<a x="&#xe9;">\n${'<b/>'.repeat(20)}</a>`;
    const expected = whole(text);
    // The same text declared UTF-8 (spaces keep the offsets).
    expect(expected).toBe(whole(text.replace("encoding='ANSI_X3.4-1968'", `encoding='UTF-8'${' '.repeat(9)}`)));
    expect(expected).toContain('\u00e9');
    for (const size of SIZES) expect(chunked(text, size)).toBe(expected);
  });

  test('malformed text is refused with the message, line and column of a whole parse, wherever the chunks end', () => {
    const bad = [
      '<a>\n<b>\n</a>',
      '<a>\n  <b x="1" x="2"/></a>',
      '<a>\n\n<!DOCTYPE a></a>',
      '<a>text &bogus; more</a>',
      '<a>\n<b/>\n',
      '<a><!-- unterminated',
      '<a>\u0001</a>',
      '<?xml version="1.0" encoding="ISO-8859-1"?><a/>',
      // US-ASCII declared: read as UTF-8 up to the first character beyond it, early or late.
      '<?xml version="1.0" encoding="US-ASCII"?><a>\u00e9</a>',
      '<?xml version="1.0" encoding="us-ascii"?>\n<a>\n<b/>\n<c v="\u65e5"/></a>',
      '<a/><b/>',
      '<a x="1></a>',
      '  \n ',
    ];
    for (const text of bad) {
      const expected = whole(text);
      expect(expected).toMatch(/^Xml(Syntax|Encoding)Error: /);
      for (const size of SIZES) expect({ text, size, got: chunked(text, size) }).toEqual({ text, size, got: expected });
    }
  });

  test("a streamed document hands over the root's children as they complete, keeps their places, and lets go of their text", () => {
    const text = `<r>\n<keep v="1"/>\n${Array.from({ length: 50 }, (_, k) => `<item n="${k}"><x>${'y'.repeat(k)}</x></item>`).join('\n')}\n</r>`;
    const seen: string[] = [];
    const reader = createXmlReader({
      maxDepth: 10,
      dropSpace: true,
      stream: (root) => (root.local === 'r' ? (child) => child.local === 'item' && seen.push(reader.slice(child.start, child.end)) > 0 : undefined),
    });
    for (const piece of pieces(text, 5)) reader.push(piece);
    const root = reader.end();
    expect(seen).toEqual(Array.from({ length: 50 }, (_, k) => `<item n="${k}"><x>${'y'.repeat(k)}</x></item>`));
    // The items' places hold empty elements of their name; what was not let go stays whole.
    expect(root.children.map((c) => (c.kind === 'element' ? `${c.local}:${c.attributes.length}:${c.children.length}` : 'text'))).toEqual(['keep:1:0', ...Array(50).fill('item:0:0')]);
    // The text before the last item is no longer held.
    expect(() => reader.slice(0, 3)).toThrow(RangeError);
  });
});

describe('FHIR XML read as a stream', () => {
  const bundle = (type: string, entries: string[], before = '') =>
    `<Bundle ${NS}>\r\n<id value="b1"/>${before}<type value="${type}"/>\r\n${entries.join('\r\n')}\r\n</Bundle>\r\n`;
  const narrated = (id: string) =>
    `<entry><fullUrl value="urn:uuid:${id}"/><resource><Patient ${NS}><id value="${id}"/><text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml">\r\n<p>Patient ${id} &amp; <b>friends</b></p>\r\n</div></text><multipleBirthInteger value="0020"/></Patient></resource></entry>`.replace('0020', '20');
  /** Everything the stream hands over for `text` in chunks of `size`: the entries, the Bundle's own elements, the document with the entries kept. */
  function streamed(text: string, size: number) {
    const stream = streamFhirXml();
    const entries: StreamedEntry[] = [];
    for (const piece of pieces(text, size)) entries.push(...stream.push(piece));
    entries.push(...stream.end());
    return { entries, bundle: stream.bundle, document: stream.document(entries.flatMap((e) => (e.json ? [e.json] : []))) };
  }

  test('a Bundle cut anywhere gives the JSON the whole text gives, its entries one by one and its own elements first', () => {
    const texts = [bundle('collection', ['0a1', '0a2', '0a3'].map(narrated)), EXAMPLES.find(([n]) => n === 'bundle-search-warning.xml')![1]];
    for (const text of texts) {
      const expected = stringifyExact(parseFhirXml(text));
      for (const size of SIZES) {
        const got = streamed(text, size);
        expect(stringifyExact(got.document)).toBe(expected);
        const value = JSON.parse(expected) as { type: string; entry: unknown[] };
        expect(got.entries.map((e) => JSON.parse(e.json!))).toEqual(value.entry);
        expect(got.bundle).toMatchObject({ resourceType: 'Bundle', type: value.type });
        expect(got.bundle).not.toHaveProperty('entry');
      }
    }
    // The narrative is copied as written (CR LF read as LF), from chunks of one character too.
    const div = (JSON.parse(stringifyExact(streamed(texts[0]!, 1).document)) as { entry: { resource: { text: { div: string } } }[] }).entry[0]!.resource.text.div;
    expect(div).toBe('<div xmlns="http://www.w3.org/1999/xhtml">\n<p>Patient 0a1 &amp; <b>friends</b></p>\n</div>');
  });

  test("an entry that is not FHIR XML is handed over as its 400; the Bundle's own elements before the first entry are checked first", () => {
    const text = bundle('collection', [narrated('0b1'), `<entry><resource><Patient ${NS}><nickname value="Jim"/></Patient></resource></entry>`, narrated('0b3')]);
    const got = streamed(text, 16);
    expect(got.entries.map((e) => e.index)).toEqual([0, 1, 2]);
    expect(got.entries[1]!.error).toBeInstanceOf(FhirError);
    expect(got.entries[1]!.error!.issues[0]!.expression).toEqual(['Bundle.entry[1].resource.nickname']);
    expect([got.entries[0]!.json, got.entries[2]!.json].every((j) => typeof j === 'string')).toBe(true);

    const shell = streamFhirXml();
    expect(() => shell.push(bundle('collection', [narrated('0b4')], '<nonsense value="x"/>'))).toThrow("Unknown element 'nonsense' in Bundle (an element of Bundle)");
  });

  test('a document that is not a Bundle is read whole, as parseFhirXml reads it', () => {
    const [, text] = EXAMPLES.find(([n]) => n === 'patient-example.xml')!;
    const got = streamed(text, 100);
    expect(got.entries).toEqual([]);
    expect(got.bundle).toBeUndefined();
    expect(stringifyExact(got.document)).toBe(stringifyExact(parseFhirXml(text)));
  });
});
