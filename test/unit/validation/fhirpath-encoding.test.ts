/**
 * FHIRPath 2.0's string functions (STU) beyond HL7's R4 suite's cases (test/unit/validation/fhirpath-r4-suite.test.ts):
 * matchesFull() anchored at both ends, encode()/decode() on UTF-8 bytes in hex, base64 and urlbase64, escape()/unescape()
 * for HTML and JSON; a text that does not decode gives nothing, a format the functions do not define is an error.
 */
import { describe, expect, test } from 'bun:test';
import { compileInvariant, compileValues } from '../../../src/fhir/validation/fhirpath-engine.ts';
import { FHIRPATH_TYPES } from '../../../src/fhir/validation/model.ts';
import { checkFhirPath } from '../../helpers/fhirpath-cases.ts';

type Json = Record<string, unknown>;

const check = checkFhirPath;

describe('matchesFull()', () => {
  test('the whole string must match: an alternation anchored as a whole, a computed pattern, the dot across lines', () => {
    check([
      ["'abc'.matchesFull('b')", 'false'],
      ["'abc'.matchesFull('a.c')", 'true'],
      ["'abc'.matchesFull('ab|abc')", 'true'],
      ["'abcd'.matchesFull('ab|abc')", 'false'],
      ["'abc'.matchesFull('a' + 'bc')", 'true'],
      ["'a\\nb'.matchesFull('a.b')", 'true'],
      ["'abc'.matches('b')", 'true'],
      ["{}.matchesFull('a')", 'empty'],
      ["'a'.matchesFull({})", 'empty'],
      ["('a' | 'b').matchesFull('a')", 'error'],
    ]);
  });

  test("a tenant's invariant with matchesFull() on an element", () => {
    const invariant = compileInvariant("identifier.all(value.matchesFull('[0-9]{6}'))", FHIRPATH_TYPES, true);
    const ctx = (r: Json) => ({ resource: r, rootResource: r });
    const ok = { resourceType: 'Patient', identifier: [{ value: '123456' }] };
    const longer = { resourceType: 'Patient', identifier: [{ value: 'MRN 123456' }] };
    expect(invariant(ok, 'Patient', ctx(ok))).toBe(true);
    expect(invariant(longer, 'Patient', ctx(longer))).toBe(false);
  });
});

describe('encode() and decode()', () => {
  test("a string's UTF-8 bytes in hex, base64 and urlbase64 (its URL-safe alphabet, padding kept), and back", () => {
    check([
      ["'é'.encode('hex')", 'c3a9'],
      ["'?>?'.encode('base64')", 'Pz4/'],
      ["'?>?'.encode('urlbase64')", 'Pz4_'],
      ["'a'.encode('urlbase64')", 'YQ=='],
      ["'héllo ✓ 😀'.encode('base64').decode('base64')", 'héllo ✓ 😀'],
      ["'héllo ✓ 😀'.encode('urlbase64').decode('urlbase64')", 'héllo ✓ 😀'],
      ["'héllo'.encode('hex').decode('hex')", 'héllo'],
      ["'C3A9'.decode('hex')", 'é'],
      ["''.encode('hex')", ''],
    ]);
  });

  test("a text that does not decode gives nothing: odd hex digits, another alphabet's characters, bytes that are no UTF-8", () => {
    check([
      ["'abc'.decode('hex')", 'empty'],
      ["'zz'.decode('hex')", 'empty'],
      ["'!!!!'.decode('base64')", 'empty'],
      ["'Pz4_'.decode('base64')", 'empty'],
      ["'Pz4/'.decode('urlbase64')", 'empty'],
      ["'wyg='.decode('base64')", 'empty'],
      ["'c328'.decode('hex')", 'empty'],
    ]);
  });

  test('errors: a format they do not define, an argument that is no string, many items; empty in, empty out', () => {
    check([
      ["'x'.encode('rot13')", 'error'],
      ["'x'.decode('base32')", 'error'],
      ["'x'.encode(1)", 'error'],
      ["('a' | 'b').encode('hex')", 'error'],
      ["{}.encode('hex')", 'empty'],
      ["'x'.encode({})", 'empty'],
    ]);
  });
});

describe('escape() and unescape()', () => {
  test('html: the characters markup reads as references, and back; numeric references; an unknown name left as it is', () => {
    check([
      [`'<a href="x">Tom & Jerry\\'s</a>'.escape('html')`, '&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;'],
      [`'<a href="x">Tom & Jerry\\'s</a>'.escape('html').unescape('html')`, `<a href="x">Tom & Jerry's</a>`],
      ["'&#60;&#x3E;&copy;&amp;lt;'.unescape('html')", '<>&copy;&lt;'],
      ["'caf&#233;'.unescape('html')", 'café'],
    ]);
  });

  test('json: as inside a JSON string, and back; a character not escaped left as it is', () => {
    check([
      ["'a\\nb \"q\" \\\\'.escape('json')", 'a\\nb \\"q\\" \\\\'],
      ["'a\\nb \"q\" \\\\'.escape('json').unescape('json')", 'a\nb "q" \\'],
      ["'caf\\\\u00e9'.unescape('json')", 'café'],
      ["'\"bare\"'.unescape('json')", '"bare"'],
    ]);
  });

  test('errors: a target they do not define; empty in, empty out', () => {
    check([
      ["'x'.escape('xml')", 'error'],
      ["'x'.unescape('url')", 'error'],
      ["{}.escape('html')", 'empty'],
    ]);
  });
});

describe("the flags of matches(), matchesFull() and replaceMatches() (3.0 STU: 'i' and 'm')", () => {
  test('case-insensitive and multi-line, literal or computed; none by default; empty flags are none', () => {
    check([
      ["'ABC'.matches('b')", 'false'],
      ["'ABC'.matches('b', 'i')", 'true'],
      ["'ABC'.matchesFull('abc', 'i')", 'true'],
      ["'ABC'.matchesFull('ab', 'i')", 'false'],
      ["'a\\nb'.matches('^b$')", 'false'],
      ["'a\\nb'.matches('^b$', 'm')", 'true'],
      ["'a\\nb'.matches('^B$', 'mi')", 'true'],
      ["'aAa'.replaceMatches('a', 'x')", 'xAx'],
      ["'aAa'.replaceMatches('a', 'x', 'i')", 'xxx'],
      ["'ABC'.matches('b', 'i' + '')", 'true'],
      ["'ABC'.matchesFull('a' + 'bc', 'i')", 'true'],
      ["'ABC'.matches('b', '')", 'false'],
      ["'ABC'.matches('b', {})", 'false'],
    ]);
  });

  test("a flag outside 'i' and 'm': a literal one refused when compiled, a computed one an evaluation error", () => {
    expect(() => compileValues("'ABC'.matches('b', 'g')", FHIRPATH_TYPES)).toThrow(/the flags of a regular expression are 'i'/);
    check([
      ["'ABC'.matches('b', 'q' + '')", 'error'],
      ["'ABC'.replaceMatches('b', 'x', 'y')", 'error'],
      ["'ABC'.matches('b', 'i', 'm')", 'error'],
    ]);
  });
});
