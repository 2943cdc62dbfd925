/**
 * The FHIR R4 XML format (src/fhir/xml): JSON -> XML -> JSON gives back every R4 example exactly
 * (numbers as written, the narrative as written), and the parser refuses what is not FHIR XML with a
 * 400 OperationOutcome naming the element, DTDs and entity tricks first.
 */
import { describe, expect, test } from 'bun:test';
import { readdirSync, readFileSync } from 'node:fs';
import { FhirError } from '../../../src/errors.ts';
import { parseExact, parseLiterally, stringifyExact } from '../../../src/fhir/exact-json.ts';
import { parseFhirXml } from '../../../src/fhir/xml/from-xml.ts';
import { streamFhirXml } from '../../../src/fhir/xml/from-xml-stream.ts';
import { toFhirXml } from '../../../src/fhir/xml/to-xml.ts';

const EXAMPLES = new URL('../../../node_modules/hl7.fhir.r4.examples/', import.meta.url);
const NS = 'xmlns="http://hl7.org/fhir"';

/** JSON text as a value whose numbers are their literals, members sorted: equal when the JSON is the same FHIR content. */
function canonical(text: string): string {
  const sort = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sort);
    if (v !== null && typeof v === 'object' && !(JSON as unknown as { isRawJSON(v: unknown): boolean }).isRawJSON(v)) {
      return Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])]));
    }
    return v;
  };
  return JSON.stringify(sort(parseLiterally(text)));
}

/**
 * Whether two JSON texts are the same FHIR content, as their canonical() forms are equal: Bun.deepEquals
 * compares members whatever their order and numbers by their literals (JSON.rawJSON), without sorting
 * and writing out both texts (half of the round trip's time over the examples).
 */
const sameContent = (a: string, b: string) => Bun.deepEquals(parseLiterally(a), parseLiterally(b), true);

/** The 400 parseFhirXml throws for `xml`: its message and expression. */
function refusal(xml: string): { message: string; expression: string[] | undefined } {
  try {
    parseFhirXml(xml);
  } catch (err) {
    expect(err).toBeInstanceOf(FhirError);
    const e = err as FhirError;
    expect(e.status).toBe(400);
    return { message: e.message, expression: e.issues[0]!.expression };
  }
  throw new Error(`accepted: ${xml}`);
}

describe('round trip over the R4 examples', () => {
  test('JSON -> XML -> JSON is identical for every example in hl7.fhir.r4.examples', () => {
    // The comparison: members in any order, numbers as written, items in order, null not absent.
    expect(sameContent('{"a":1.0,"b":[1,{"c":"x","d":null}]}', '{"b":[1,{"d":null,"c":"x"}],"a":1.0}')).toBe(true);
    for (const other of ['{"a":1,"b":[1,{"c":"x","d":null}]}', '{"a":1.0,"b":[{"c":"x","d":null},1]}', '{"a":1.0,"b":[1,{"c":"x"}]}', '{"a":"1.0","b":[1,{"c":"x","d":null}]}']) {
      expect(sameContent('{"a":1.0,"b":[1,{"c":"x","d":null}]}', other)).toBe(false);
    }
    let count = 0;
    const failed: string[] = [];
    for (const name of readdirSync(EXAMPLES)) {
      if (!name.endsWith('.json') || name === 'package.json') continue;
      const text = readFileSync(new URL(name, EXAMPLES), 'utf8');
      const value = parseExact(text) as Record<string, unknown>;
      if (typeof value?.resourceType !== 'string') continue;
      count++;
      try {
        if (!sameContent(stringifyExact(parseFhirXml(toFhirXml(value))), text)) failed.push(name);
      } catch (err) {
        failed.push(`${name}: ${(err as Error).message}`);
      }
    }
    expect(count).toBeGreaterThan(5000);
    expect(failed).toEqual([]);
    // Over 5,000 documents both ways: 95 s on a loaded CI machine, twice that beside other work.
  }, 300_000);
});

describe('the XML form', () => {
  test('primitives are value attributes with id and extensions; elements in definition order; choice types; div as written', () => {
    const patient = parseExact(JSON.stringify({
      resourceType: 'Patient', id: 'x',
      text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">A &amp; <b>B</b></div>' },
      name: [{ given: ['Ann', null], _given: [null, { id: 'g2', extension: [{ url: 'http://e/x', valueString: 'ext only' }] }], family: 'Lee' }],
      birthDate: '2000-01-01', _birthDate: { extension: [{ url: 'http://e/t', valueDateTime: '2000-01-01T10:00:00Z' }] },
      deceasedBoolean: false,
    })) as Record<string, unknown>;
    const xml = toFhirXml(patient);
    expect(xml).toBe('<?xml version="1.0" encoding="UTF-8"?><Patient xmlns="http://hl7.org/fhir"><id value="x"/><text><status value="generated"/>'
      + '<div xmlns="http://www.w3.org/1999/xhtml">A &amp; <b>B</b></div></text><name><family value="Lee"/><given value="Ann"/>'
      + '<given id="g2"><extension url="http://e/x"><valueString value="ext only"/></extension></given></name>'
      + '<birthDate value="2000-01-01"><extension url="http://e/t"><valueDateTime value="2000-01-01T10:00:00Z"/></extension></birthDate>'
      + '<deceasedBoolean value="false"/></Patient>');
    expect(canonical(stringifyExact(parseFhirXml(xml)))).toBe(canonical(JSON.stringify(patient)));
  });

  test('a document with CR LF line ends keeps its narrative whole (as XML reads it: LF), and a CR in a JSON narrative survives as &#13;', () => {
    const xml = `<Basic ${NS}>\r\n  <text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml"><p>a</p>\r\n<p>b</p></div></text>\r\n  <code><text value="c"/></code>\r\n</Basic>`;
    expect((parseFhirXml(xml) as { text: { div: string } }).text.div).toBe('<div xmlns="http://www.w3.org/1999/xhtml"><p>a</p>\n<p>b</p></div>');
    const json = { resourceType: 'Basic', text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml"><p>a</p>\r\n<p>b</p></div>' }, code: { text: 'c' } };
    expect(parseFhirXml(toFhirXml(json))).toEqual(json);
  });

  test('decimals keep the precision they were written with, both ways', () => {
    const obs = parseExact('{"resourceType":"Observation","status":"final","code":{"text":"t"},"valueQuantity":{"value":98.60,"unit":"F"},"component":[{"code":{"text":"c"},"valueInteger":7}]}') as Record<string, unknown>;
    const xml = toFhirXml(obs);
    expect(xml).toContain('<value value="98.60"/>');
    expect(stringifyExact(parseFhirXml(xml))).toContain('"value":98.60');
    expect(stringifyExact(parseFhirXml(`<Basic ${NS}><extension url="http://e/d"><valueDecimal value="1.500e2"/></extension><code><text value="t"/></code></Basic>`))).toContain('"valueDecimal":1.500e2');
  });

  test('numbers keep their literals in repeating elements, primitives\' extensions, nested resources and streamed entries', () => {
    const obs = `<Observation><status value="final"/><code><text value="t"/></code><valueQuantity><value value="98.60"/></valueQuantity><component><code><text value="c"/></code><valueQuantity><value value="1.0e0"/></valueQuantity></component></Observation>`;
    const claim = `<ClaimResponse><item><itemSequence value="1"/><noteNumber value="2"/><noteNumber value="-0"/></item></ClaimResponse>`;
    const patient = `<Patient ${NS}><contained>${obs}</contained><contained>${claim}</contained><name><given value="a"/><given value="b"><extension url="http://e/d"><valueDecimal value="0.010"/></extension></given></name></Patient>`;
    const literals = ['"value":98.60', '"value":1.0e0', '"noteNumber":[2,-0]', '"_given":[null,{"extension":[{"url":"http://e/d","valueDecimal":0.010}]}]'];
    const read = stringifyExact(parseFhirXml(patient));
    for (const literal of literals) expect(read).toContain(literal);
    // The same numbers in a Bundle, whole and streamed (the entries as JSON text, as `cinder import` takes them).
    const bundle = `<Bundle ${NS}><type value="collection"/><total value="-0"/><entry><resource>${patient.replace(` ${NS}`, '')}</resource></entry></Bundle>`;
    const whole = stringifyExact(parseFhirXml(bundle));
    for (const literal of [...literals, '"total":-0']) expect(whole).toContain(literal);
    const stream = streamFhirXml();
    const entries = [...stream.push(bundle), ...stream.end()].map((e) => e.json!);
    for (const literal of literals) expect(entries[0]).toContain(literal);
    expect(stringifyExact(stream.document(entries))).toBe(whole);
    // Numbers String writes back as read record nothing.
    expect(stringifyExact(parseFhirXml(`<Observation ${NS}><status value="final"/><code><text value="t"/></code><valueQuantity><value value="98.6"/></valueQuantity></Observation>`))).toContain('"value":98.6}');
  });

  test('only XML white space (space, tab, CR, LF) goes unread between elements: a no-break space is text, refused', () => {
    const spaced = parseFhirXml(`\n<Patient ${NS}>\r\n\t <active value="true"/> <name><given value="A"/>\n</name></Patient>\n`);
    expect(spaced).toEqual({ resourceType: 'Patient', active: true, name: [{ given: ['A'] }] });
    for (const c of ['\u00a0', '\ufeff', '\u2028', '\u3000']) {
      expect(refusal(`<Patient ${NS}>${c}<active value="true"/></Patient>`)).toEqual({ message: "Text is not allowed in Patient: FHIR XML puts values in 'value' attributes", expression: ['Patient'] });
      expect(refusal(`<Patient ${NS}><name>${c}<given value="A"/></name></Patient>`).expression).toEqual(['Patient.name[0]']);
      expect(refusal(`<Patient ${NS}><birthDate value="2000-01-01">${c}</birthDate></Patient>`).expression).toEqual(['Patient.birthDate']);
      expect(refusal(`<Patient ${NS}/>${c}`).message).toContain('Text outside the root element');
    }
  });

  test('a document whose JSON form nests deeper than the bound is refused, though its elements nest less', () => {
    // 600 nested items: 601 elements deep, but each item is an array and an object in JSON (1,201 levels).
    const deep = `<Questionnaire ${NS}><status value="draft"/>${'<item>'.repeat(600)}${'</item>'.repeat(600)}</Questionnaire>`;
    expect(refusal(deep).message).toBe('The request body nests deeper than 1000 levels');
    const fits = `<Questionnaire ${NS}><status value="draft"/>${'<item>'.repeat(400)}${'</item>'.repeat(400)}</Questionnaire>`;
    let depth = 0;
    for (let item = (parseFhirXml(fits) as { item?: unknown[] }).item; item !== undefined; item = (item[0] as { item?: unknown[] }).item) depth++;
    expect(depth).toBe(400);
  });

  test('resources nest in contained, Bundle.entry.resource and Parameters.parameter.resource, named by their type', () => {
    const bundle = { resourceType: 'Bundle', type: 'collection', entry: [{ resource: { resourceType: 'Parameters', parameter: [{ name: 'p', resource: { resourceType: 'Patient', contained: [{ resourceType: 'Organization', id: 'o', name: 'O' }], managingOrganization: { reference: '#o' } } }] } }] };
    const xml = toFhirXml(bundle);
    expect(xml).toContain('<entry><resource><Parameters><parameter><name value="p"/><resource><Patient><contained><Organization><id value="o"/>');
    expect(parseFhirXml(xml)).toEqual(bundle);
  });

  test('_pretty indents; attribute values keep line ends and tabs; comments, the XML declaration and xsi attributes are read past', () => {
    const r = { resourceType: 'Basic', code: { text: 'a\n\tb "c" <d>' } };
    const pretty = toFhirXml(r, true);
    expect(pretty).toBe('<?xml version="1.0" encoding="UTF-8"?>\n<Basic xmlns="http://hl7.org/fhir">\n  <code>\n    <text value="a&#10;&#9;b &quot;c&quot; &lt;d&gt;"/>\n  </code>\n</Basic>');
    expect(parseFhirXml(pretty)).toEqual(r);
    const commented = `<?xml version="1.0" encoding="utf-8"?>\r\n<!-- a comment --><Basic ${NS} xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://hl7.org/fhir basic.xsd">
      <!-- inside --><code><text value="x&#x41;&#66;"/></code></Basic>`;
    expect(parseFhirXml(commented)).toEqual({ resourceType: 'Basic', code: { text: 'xAB' } });
  });

  test('a character XML cannot carry (in a resource stored before every write refused one) is written as U+FFFD: the document stays well-formed', () => {
    const r = { resourceType: 'Patient', name: [{ family: 'a\u0001b\uFFFE&\tc' }], text: { status: 'generated', div: '<div>x\u0002\ty</div>' } };
    const xml = toFhirXml(r);
    expect(parseFhirXml(xml)).toEqual({
      resourceType: 'Patient',
      text: { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">&lt;div&gt;x\uFFFD\ty&lt;/div&gt;</div>` },
      name: [{ family: 'a\uFFFDb\uFFFD&\tc' }],
    });
  });
});

describe('what is not FHIR XML is a 400 naming the element', () => {
  test('a DTD is refused, so no external entity (XXE) and no entity expansion (billion laughs)', () => {
    const xxe = `<?xml version="1.0"?><!DOCTYPE Patient [<!ENTITY xxe SYSTEM "file:///etc/passwd">]><Patient ${NS}><id value="&xxe;"/></Patient>`;
    expect(refusal(xxe).message).toContain('DOCTYPE');
    const lol = `<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><Patient ${NS}><id value="&lol2;"/></Patient>`;
    expect(refusal(lol).message).toContain('DOCTYPE');
    expect(refusal(`<Patient ${NS}><id value="&nbsp;"/></Patient>`).message).toContain("Entity '&nbsp;' is not defined");
  });

  test('unknown elements and attributes, the wrong namespace, order, repetition, text and bad values', () => {
    expect(refusal(`<Patient ${NS}><bogus value="1"/></Patient>`)).toEqual({ message: "Unknown element 'bogus' in Patient (an element of Patient)", expression: ['Patient.bogus'] });
    expect(refusal(`<Patient><id value="1"/></Patient>`).message).toContain('not in the FHIR namespace');
    expect(refusal(`<Patient ${NS}><name xmlns="urn:other"><family value="a"/></name></Patient>`).expression).toEqual(['Patient.name']);
    expect(refusal(`<Patient ${NS}><gender value="male"/><active value="true"/></Patient>`)).toEqual({ message: "Element 'active' in Patient is out of order: R4 defines it before 'gender'", expression: ['Patient.active'] });
    expect(refusal(`<Patient ${NS}><gender value="male"/><gender value="female"/></Patient>`).expression).toEqual(['Patient.gender']);
    expect(refusal(`<Patient ${NS}><deceasedBoolean value="true"/><deceasedDateTime value="2020"/></Patient>`).expression).toEqual(['Patient.deceasedDateTime']);
    expect(refusal(`<Patient ${NS}><name><family>Lee</family></name></Patient>`).expression).toEqual(['Patient.name[0].family']);
    expect(refusal(`<Patient ${NS}><active value="yes"/></Patient>`)).toEqual({ message: "'yes' at Patient.active is not a boolean (true or false)", expression: ['Patient.active'] });
    expect(refusal(`<Patient ${NS}><multipleBirthInteger value="1.5"/></Patient>`).expression).toEqual(['Patient.multipleBirthInteger']);
    expect(refusal(`<Patient ${NS}><active value="true" foo="1"/></Patient>`).expression).toEqual(['Patient.active']);
    expect(refusal(`<Patient ${NS}><name><given/></name></Patient>`).expression).toEqual(['Patient.name[0].given[0]']);
    expect(refusal(`<Patient ${NS}><text><status value="generated"/><div>x</div></text></Patient>`).expression).toEqual(['Patient.text.div']);
    expect(refusal(`<Nonsense ${NS}/>`).message).toContain('not an R4 resource type');
    expect(refusal(`<Bundle ${NS}><entry><resource><Patient/><Patient/></resource></entry></Bundle>`).expression).toEqual(['Bundle.entry[0].resource']);
  });

  test('malformed XML, another encoding, and nesting past the bound', () => {
    expect(refusal(`<Patient ${NS}><id value="1"></Patient>`).message).toContain('does not match');
    // Another encoding declared: a 415, as another charset in the Content-Type is (FHIR bodies are UTF-8).
    const encoding = (() => {
      try {
        parseFhirXml(`<?xml version="1.0" encoding="ISO-8859-1"?><Patient ${NS}/>`);
      } catch (err) {
        return err as FhirError;
      }
      return undefined;
    })();
    expect([encoding?.status, encoding?.message]).toEqual([415, "The request body declares encoding 'ISO-8859-1' (line 1, column 1): FHIR XML is read in UTF-8 only (R4 http.html: UTF-8 SHALL be used)"]);
    expect(refusal(`<Patient ${NS}/><Patient ${NS}/>`).message).toContain('second root');
    const deep = `<Questionnaire ${NS}><status value="draft"/>${'<item>'.repeat(1200)}${'</item>'.repeat(1200)}</Questionnaire>`;
    expect(refusal(deep).message).toContain('nest deeper than 1000');
  });
});
