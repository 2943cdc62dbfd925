/**
 * A strict, non-validating XML 1.0 parser (with Namespaces in XML 1.0) for the FHIR XML format: it reads
 * elements, attributes, text, CDATA sections and comments into a small tree, and refuses what FHIR XML
 * never needs and attackers use: a document type declaration (so no DTD, no external entities (XXE), no
 * entity expansion ("billion laughs")), entity references other than XML's five and character
 * references, and nesting deeper than a bound. Iterative: a deep document cannot exhaust the stack.
 */

/** The namespace of the `xml:` prefix (Namespaces in XML 1.0, section 3). */
const XML_NS = 'http://www.w3.org/XML/1998/namespace';

export interface XmlAttribute {
  /** The name as written (`xmlns:h`, `value`). */
  qname: string;
  local: string;
  /** The attribute's namespace: '' for an unprefixed one. */
  ns: string;
  value: string;
}

export interface XmlElement {
  kind: 'element';
  qname: string;
  local: string;
  ns: string;
  /** Attributes other than namespace declarations. */
  attributes: XmlAttribute[];
  /** The default namespace this element declares itself (`xmlns="..."`), if it does. */
  declaresDefault: string | undefined;
  children: XmlNode[];
  /** Where the element starts (its `<`) and ends (after its end tag's `>`) in the text. */
  start: number;
  end: number;
}

export interface XmlText {
  kind: 'text';
  text: string;
  /** Whether it came from a CDATA section (content, even when only whitespace). */
  cdata: boolean;
}

export type XmlNode = XmlElement | XmlText;

/** Why a text is not well-formed XML, or uses what this parser refuses; `at` is its line and column. */
export class XmlSyntaxError extends Error {
  override name = 'XmlSyntaxError';
  constructor(message: string, readonly at: string) {
    super(`${message} (line ${at})`);
  }
}

const NAME = /[A-Za-z_\u00C0-\uFFFF][A-Za-z0-9_.\-\u00B7\u00C0-\uFFFF]*(?::[A-Za-z_\u00C0-\uFFFF][A-Za-z0-9_.\-\u00B7\u00C0-\uFFFF]*)?/y;
const SPACE = /[ \t\r\n]*/y;
const PREDEFINED: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
/** Characters XML 1.0 does not allow in a document (section 2.2), even as a character reference. */
const NOT_XML_CHAR = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/;

/** The children of every empty element (`<a/>`); frozen, as nothing is ever added to them. */
const NO_CHILDREN = Object.freeze([]) as unknown as XmlNode[];

interface Open {
  element: XmlElement;
  /** The prefixes this element declares ('' for the default namespace), undone when it closes. */
  declared: string[] | undefined;
}

/** Attributes of one element compared pairwise up to this many; beyond, through a set (a start tag may hold thousands). */
const FEW_ATTRIBUTES = 16;

/** The line and column of `index` in `text`. */
function position(text: string, index: number): string {
  let line = 1;
  let last = -1;
  for (let i = text.indexOf('\n'); i >= 0 && i < index; i = text.indexOf('\n', i + 1)) {
    line++;
    last = i;
  }
  return `${line}, column ${index - last}`;
}

/**
 * Parses `text` (one XML document) to its root element; at most `maxDepth` elements nest. `dropSpace`:
 * text of whitespace alone (outside CDATA) is checked and left out of the tree, for a reader that
 * ignores it (FHIR XML's indentation: about a third of a pretty-printed document's nodes).
 */
export function parseXml(source: string, maxDepth: number, dropSpace = false): XmlElement {
  // End-of-line handling (XML 1.0 section 2.11): CR LF and a lone CR read as LF.
  const text = source.includes('\r') ? source.replace(/\r\n?/g, '\n') : source;
  const fail = (message: string, at: number): never => {
    throw new XmlSyntaxError(message, position(text, at));
  };
  const bad = NOT_XML_CHAR.exec(text);
  if (bad) fail(`U+${bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')} is not a character XML allows`, bad.index);

  /** Replaces the references in character data or an attribute value; `attribute`: XML's attribute-value normalisation too. */
  const unescape = (raw: string, at: number, attribute: boolean): string => {
    let s = attribute ? raw.replace(/[\t\n\r]/g, ' ') : raw;
    if (!s.includes('&')) return s;
    s = s.replace(/&([^;&<\s]*);?/g, (whole, name: string) => {
      if (!whole.endsWith(';')) fail(`'&' must start a reference ending in ';' (write &amp;)`, at);
      if (Object.hasOwn(PREDEFINED, name)) return PREDEFINED[name]!;
      const m = /^#(?:x([0-9A-Fa-f]+)|([0-9]+))$/.exec(name);
      if (!m) fail(`Entity '&${name};' is not defined: FHIR XML allows only &lt; &gt; &amp; &quot; &apos; and character references`, at);
      const code = parseInt(m![1] ?? m![2]!, m![1] ? 16 : 10);
      if (!(code <= 0x10ffff) || (code >= 0xd800 && code <= 0xdfff)) fail(`'&${name};' names no character`, at);
      const ch = String.fromCodePoint(code);
      if (NOT_XML_CHAR.test(ch)) fail(`'&${name};' names a character XML does not allow`, at);
      return ch;
    });
    return s;
  };

  let i = 0;
  const stack: Open[] = [];
  // The namespaces in scope: each prefix's declarations, innermost last, pushed by the element declaring
  // one and popped when it closes (so that a declaring element costs its own declarations, not a copy of all).
  const bindings = new Map<string, string[]>([['xml', [XML_NS]]]);
  const undeclare = (declared: string[] | undefined): void => {
    if (declared !== undefined) for (const prefix of declared) bindings.get(prefix)!.pop();
  };
  let root: XmlElement | undefined;

  // One string per distinct name: a large document repeats a few hundred names a million times.
  const names = new Map<string, string>();
  const name = (): string => {
    NAME.lastIndex = i;
    const m = NAME.exec(text);
    if (!m) fail('A name was expected', i);
    i = NAME.lastIndex;
    const found = m![0];
    const known = names.get(found);
    if (known !== undefined) return known;
    names.set(found, found);
    return found;
  };
  const space = (): boolean => {
    SPACE.lastIndex = i;
    SPACE.exec(text);
    const moved = SPACE.lastIndex > i;
    i = SPACE.lastIndex;
    return moved;
  };
  const expect = (s: string): void => {
    if (!text.startsWith(s, i)) fail(`'${s}' was expected`, i);
    i += s.length;
  };
  const addText = (t: string, cdata: boolean): void => {
    const top = stack[stack.length - 1];
    if (top === undefined) {
      if (cdata || t.trim() !== '') fail('Text outside the root element', i);
      return;
    }
    if (dropSpace && !cdata && t.trim() === '') return;
    top.element.children.push({ kind: 'text', text: t, cdata });
  };

  // The XML declaration: version, encoding (UTF-8 only: the body was read as UTF-8) and standalone.
  if (text.startsWith('\uFEFF')) i = 1;
  if (text.startsWith('<?xml', i) && /[\s?]/.test(text[i + 5] ?? '')) {
    const end = text.indexOf('?>', i);
    if (end < 0) fail('Unterminated XML declaration', i);
    const decl = text.slice(i + 5, end);
    const encoding = /encoding\s*=\s*["']([^"']*)["']/.exec(decl)?.[1];
    if (encoding !== undefined && !/^utf-?8$/i.test(encoding)) fail(`Encoding '${encoding}' is not supported: send FHIR XML in UTF-8`, i);
    i = end + 2;
  }

  while (i < text.length) {
    const lt = text.indexOf('<', i);
    if (lt !== i) {
      const raw = text.slice(i, lt < 0 ? text.length : lt);
      if (raw.includes(']]>')) fail("']]>' may not appear in text", i);
      addText(unescape(raw, i, false), false);
      if (lt < 0) break;
      i = lt;
    }
    if (text.startsWith('<!--', i)) {
      const end = text.indexOf('-->', i + 4);
      if (end < 0) fail('Unterminated comment', i);
      if (text.slice(i + 4, end).includes('--')) fail("'--' may not appear in a comment", i);
      i = end + 3;
    } else if (text.startsWith('<![CDATA[', i)) {
      if (stack.length === 0) fail('CDATA outside the root element', i);
      const end = text.indexOf(']]>', i + 9);
      if (end < 0) fail('Unterminated CDATA section', i);
      addText(text.slice(i + 9, end), true);
      i = end + 3;
    } else if (text.startsWith('<!DOCTYPE', i) || text.startsWith('<!ENTITY', i)) {
      fail('A document type declaration (DOCTYPE) is not allowed: FHIR XML has no DTD, and Cinder expands no entities', i);
    } else if (text.startsWith('<!', i)) {
      fail("Markup declarations ('<!') are not allowed", i);
    } else if (text.startsWith('<?', i)) {
      // A processing instruction (a stylesheet, say): nothing of FHIR content; skipped.
      const target = text.slice(i + 2, i + 5);
      if (target.toLowerCase() === 'xml' && /[\s?]/.test(text[i + 5] ?? '')) fail('The XML declaration must come first', i);
      const end = text.indexOf('?>', i + 2);
      if (end < 0) fail('Unterminated processing instruction', i);
      i = end + 2;
    } else if (text.startsWith('</', i)) {
      const start = i;
      i += 2;
      const qname = name();
      space();
      expect('>');
      const open = stack.pop();
      if (open === undefined) fail(`End tag '</${qname}>' without a start tag`, start);
      if (open!.element.qname !== qname) fail(`End tag '</${qname}>' does not match '<${open!.element.qname}>'`, start);
      open!.element.end = i;
      undeclare(open!.declared);
    } else {
      const start = i;
      i += 1;
      if (stack.length === 0 && root !== undefined) fail('A second root element', start);
      if (stack.length >= maxDepth) fail(`Elements nest deeper than ${maxDepth} levels`, start);
      const qname = name();
      const raw: [string, string, number][] = [];
      let seen: Set<string> | undefined;
      let selfClosing = false;
      for (;;) {
        const spaced = space();
        if (text.startsWith('/>', i)) {
          i += 2;
          selfClosing = true;
          break;
        }
        if (text[i] === '>') {
          i += 1;
          break;
        }
        if (!spaced) fail(`Malformed start tag '<${qname}'`, i);
        const at = i;
        const attr = name();
        space();
        expect('=');
        space();
        const quote = text[i];
        if (quote !== '"' && quote !== "'") fail(`The value of attribute '${attr}' must be quoted`, i);
        const close = text.indexOf(quote!, i + 1);
        if (close < 0) fail(`Unterminated value of attribute '${attr}'`, i);
        const value = text.slice(i + 1, close);
        if (value.includes('<')) fail(`'<' may not appear in the value of attribute '${attr}'`, i);
        if (seen !== undefined ? seen.has(attr) : raw.some(([n]) => n === attr)) fail(`Attribute '${attr}' is given twice`, at);
        raw.push([attr, unescape(value, i, true), at]);
        if (seen !== undefined) seen.add(attr);
        else if (raw.length > FEW_ATTRIBUTES) seen = new Set(raw.map(([n]) => n));
        i = close + 1;
      }
      let declared: string[] | undefined;
      let declaresDefault: string | undefined;
      const declare = (prefix: string, value: string): void => {
        let values = bindings.get(prefix);
        if (values === undefined) bindings.set(prefix, (values = []));
        values.push(value);
        (declared ??= []).push(prefix);
      };
      for (const [attr, value] of raw) {
        if (attr === 'xmlns') {
          declaresDefault = value;
          declare('', value);
        } else if (attr.startsWith('xmlns:')) {
          if (value === '') fail(`Prefix '${attr.slice(6)}' may not be undeclared`, start);
          declare(attr.slice(6), value);
        }
      }
      const inScope = (prefix: string): string | undefined => {
        const values = bindings.get(prefix);
        return values === undefined ? undefined : values[values.length - 1];
      };
      const resolve = (q: string, attribute: boolean, at: number): [string, string] => {
        const colon = q.indexOf(':');
        if (colon < 0) return [q, attribute ? '' : (inScope('') ?? '')];
        const prefix = q.slice(0, colon);
        const ns = inScope(prefix);
        if (ns === undefined) fail(`Prefix '${prefix}' is not declared`, at);
        return [q.slice(colon + 1), ns!];
      };
      const [local, ns] = resolve(qname, false, start);
      const attributes: XmlAttribute[] = [];
      for (const [attr, value, at] of raw) {
        if (attr === 'xmlns' || attr.startsWith('xmlns:')) continue;
        const [aLocal, aNs] = resolve(attr, true, at);
        attributes.push({ qname: attr, local: aLocal, ns: aNs, value });
      }
      // An empty element (most of FHIR XML: `<status value="final"/>`) gets no children: one shared empty list.
      const element: XmlElement = { kind: 'element', qname, local, ns, attributes, declaresDefault, children: selfClosing ? NO_CHILDREN : [], start, end: i };
      const parent = stack[stack.length - 1];
      if (parent) parent.element.children.push(element);
      else root = element;
      if (!selfClosing) stack.push({ element, declared });
      else undeclare(declared);
    }
  }
  if (stack.length > 0) fail(`Element '<${stack[stack.length - 1]!.element.qname}>' is not closed`, text.length);
  if (root === undefined) fail('No root element', 0);
  return root!;
}
