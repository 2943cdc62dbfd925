/**
 * Differential: HL7's own FHIR R4 XML examples (test/fixtures/r4-xml, CC0), parsed by Cinder, give the
 * JSON examples of the same type and id that HL7 published (npm hl7.fhir.r4.examples), and Cinder's
 * XML of those JSON examples reads back as HL7's XML does.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { parseLiterally, stringifyExact } from '../../../src/fhir/exact-json.ts';
import { parseFhirXml } from '../../../src/fhir/xml/from-xml.ts';
import { toFhirXml } from '../../../src/fhir/xml/to-xml.ts';
import { parseXml, type XmlNode } from '../../../src/fhir/xml/xml-parse.ts';

const XML_DIR = new URL('../../fixtures/r4-xml/', import.meta.url);
const JSON_DIR = new URL('../../../node_modules/hl7.fhir.r4.examples/', import.meta.url);

/** XHTML as elements, sorted attributes and text, whitespace runs as one space and trimmed: HL7's JSON writer re-serialised narratives. */
function xhtml(n: XmlNode): string {
  if (n.kind === 'text') return n.text.replace(/\s+/g, ' ').trim();
  const attributes = n.attributes.map((a) => `${a.qname}=${JSON.stringify(a.value.replace(/\s+/g, ' '))}`).sort().join(' ');
  return `<${n.local} ${attributes}>${n.children.map(xhtml).join('')}</${n.local}>`;
}

/** A JSON value with members sorted, numbers as their literals, narratives as xhtml() gives them. */
function canonical(v: unknown, key = ''): unknown {
  if (key === 'div' && typeof v === 'string') return xhtml(parseXml(v, 1000));
  if (Array.isArray(v)) return v.map((x) => canonical(x));
  if (v !== null && typeof v === 'object' && !(JSON as unknown as { isRawJSON(v: unknown): boolean }).isRawJSON(v)) {
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical((v as Record<string, unknown>)[k], k)]));
  }
  return v;
}
const same = (text: string) => JSON.stringify(canonical(parseLiterally(text)));

/** HL7's JSON examples by type and id. */
function jsonExamples(): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of readdirSync(JSON_DIR)) {
    if (!name.endsWith('.json') || name === 'package.json') continue;
    const text = readFileSync(new URL(name, JSON_DIR), 'utf8');
    const v = JSON.parse(text) as { resourceType?: string; id?: string };
    if (v.resourceType && v.id) out.set(`${v.resourceType}/${v.id}`, text);
  }
  return out;
}

describe("HL7's R4 XML examples", () => {
  const json = jsonExamples();
  const files = readdirSync(XML_DIR).filter((f) => f.endsWith('.xml'));

  test('there are some, each with a JSON example of the same type and id', () => {
    expect(files.length).toBeGreaterThanOrEqual(40);
  });

  for (const file of files) {
    test(file, () => {
      const xml = readFileSync(new URL(file, XML_DIR), 'utf8');
      const parsed = parseFhirXml(xml) as { resourceType: string; id: string };
      const expected = json.get(`${parsed.resourceType}/${parsed.id}`);
      expect(expected).toBeDefined();
      expect(same(stringifyExact(parsed))).toBe(same(expected!));
      // And back: Cinder's XML of HL7's JSON reads as the same content as HL7's XML.
      expect(same(stringifyExact(parseFhirXml(toFhirXml(parseLiterally(expected!) as Record<string, unknown>))))).toBe(same(stringifyExact(parsed)));
    });
  }
});
