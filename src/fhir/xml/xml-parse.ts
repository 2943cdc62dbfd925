/**
 * A strict, non-validating XML 1.0 parser (with Namespaces in XML 1.0) for the FHIR XML format: it reads
 * elements, attributes, text, CDATA sections and comments into a small tree, and refuses what FHIR XML
 * never needs and attackers use: a document type declaration (so no DTD, no external entities (XXE), no
 * entity expansion ("billion laughs")), entity references other than XML's five and character
 * references, and nesting deeper than a bound. Iterative: a deep document cannot exhaust the stack.
 * Incremental: text may arrive in chunks (createXmlReader), and a streamed document lets go of its
 * root's children as they complete.
 */

import { firstNonAscii, isAsciiLabel } from '../charset.ts';

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

/**
 * An XML declaration naming an encoding other than UTF-8, the only one FHIR uses (R4 http.html, "UTF-8
 * SHALL be used"); or naming US-ASCII (read as UTF-8, which it is a part of) for a document holding
 * `outside`, a character beyond it.
 */
export class XmlEncodingError extends XmlSyntaxError {
  override name = 'XmlEncodingError';
  constructor(readonly encoding: string, at: string, readonly outside?: string) {
    super(outside === undefined ? `The XML declaration names encoding '${encoding}': FHIR XML is UTF-8` : `The XML declaration names encoding '${encoding}', but the document holds ${outside}, which is not US-ASCII`, at);
  }
}

/** A character that may start a name (part): `[A-Za-z_]` and U+00C0 on (code units, surrogates too). */
const isNameStart = (c: number): boolean => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || (c >= 0xc0 && c <= 0xffff);
/** A character that may follow in a name (part): a start character, `[0-9.-]` and U+00B7. */
const isNameChar = (c: number): boolean => (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 45 && c <= 57 && c !== 47) || c === 95 || c === 0xb7 || (c >= 0xc0 && c <= 0xffff);
/** XML's white space (section 2.3): space, tab, CR, LF. */
const isSpace = (c: number): boolean => c === 32 || c === 10 || c === 9 || c === 13;

/**
 * Whether `text` is XML white space alone (space, tab, CR, LF; XML 1.0 section 2.3). Not `trim()`, which
 * also takes U+00A0, U+FEFF, U+2028 and the like: to XML those are character data, content like any other.
 */
export function isXmlSpace(text: string): boolean {
  for (let j = 0; j < text.length; j++) if (!isSpace(text.charCodeAt(j))) return false;
  return true;
}
const PREDEFINED: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
/** Characters XML 1.0 does not allow in a document (section 2.2), even as a character reference. */
const NOT_XML_CHAR = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/;

/** The children of every empty element (`<a/>`); frozen, as nothing is ever added to them. */
const NO_CHILDREN = Object.freeze([]) as unknown as XmlNode[];
/** The attributes of every element without any; frozen too. */
const NO_ATTRIBUTES = Object.freeze([]) as unknown as XmlAttribute[];

interface Open {
  element: XmlElement;
  /** The prefixes this element declares ('' for the default namespace), undone when it closes. */
  declared: string[] | undefined;
}

/** Attributes of one element compared pairwise up to this many; beyond, through a set (a start tag may hold thousands). */
const FEW_ATTRIBUTES = 16;

/** Told of each child of a streamed root as it completes: true lets it go (see XmlReaderOptions.stream). */
export type DetachChild = (child: XmlElement) => boolean;

export interface XmlReaderOptions {
  /** At most this many elements nest. */
  maxDepth: number;
  /**
   * Text of whitespace alone (outside CDATA) is checked and left out of the tree, for a reader that
   * ignores it (FHIR XML's indentation: about a third of a pretty-printed document's nodes).
   */
  dropSpace?: boolean;
  /**
   * Called with the root element once its start tag is read. A function returned streams the document:
   * it is called with each child of the root as that child completes, and when it answers true the child
   * leaves the tree (an empty element of its name keeps its place among the root's children). The text
   * before the child being read is then let go: a consumer slices (`slice`) a child's text in the call only.
   * Undefined: the whole text is kept, as the tree is.
   */
  stream?: (root: XmlElement) => DetachChild | undefined;
}

/** An XML document read as its text arrives (`push`), then ended (`end`), which answers its root element. */
export interface XmlReader {
  push(chunk: string): void;
  end(last?: string): XmlElement;
  /** The text between two offsets (an element's `start` and `end`) while it is kept (see XmlReaderOptions.stream). */
  slice(start: number, end: number): string;
  /** How deep the elements read so far nest (1: the root alone). */
  readonly depth: number;
}

/**
 * Parses `source` (one XML document) to its root element; at most `maxDepth` elements nest. `dropSpace`:
 * text of whitespace alone (outside CDATA) is checked and left out of the tree, for a reader that
 * ignores it.
 */
export function parseXml(source: string, maxDepth: number, dropSpace = false): XmlElement {
  return createXmlReader({ maxDepth, dropSpace }).end(source);
}

/** A start tag's closing `>` at or after `from`, quoted attribute values skipped, or -1 when the text ends first. */
function tagEnd(text: string, from: number): number {
  for (let j = from; j < text.length; j++) {
    const c = text.charCodeAt(j);
    if (c === 62) return j;
    if (c === 34 || c === 39) {
      const close = text.indexOf(c === 34 ? '"' : "'", j + 1);
      if (close < 0) return -1;
      j = close;
    }
  }
  return -1;
}

/** The longest markup opening that tells what follows (`<![CDATA[`, `<!DOCTYPE`). */
const LONGEST_OPENING = 9;

/**
 * An incremental XML reader: text is pushed in chunks (cut anywhere, even inside a tag), parsed as far as
 * it is complete; what it reports (XmlSyntaxError) has the line and column in the whole document. Memory
 * is the tree plus the kept text; a streamed document (`stream`) keeps neither the children it lets go nor
 * their text, so reading one costs its largest child, whatever its length.
 */
export function createXmlReader(opts: XmlReaderOptions): XmlReader {
  const { maxDepth, dropSpace = false } = opts;
  // The text kept: from offset `base` of the document; `i` is the reading position within it.
  let text = '';
  let base = 0;
  let i = 0;
  // Lines of the text let go (before `base`), and the offset of its last line break, for positions.
  let linesBefore = 0;
  let lastBreakBefore = -1;
  // Chunks pushed and not yet joined to `text` (joined once they are as long as the text kept: linear in all).
  let pending: string[] = [];
  let pendingLength = 0;
  // A chunk's last character when it is a CR, which a LF opening the next may follow.
  let heldCr = false;
  let final = false;
  let started = false;
  // The declaration named US-ASCII: every character read must be within it.
  let ascii: string | undefined;

  /** The line and column of `index` (in the kept text). */
  const position = (index: number): string => {
    let line = linesBefore + 1;
    let last = lastBreakBefore - base;
    for (let at = text.indexOf('\n'); at >= 0 && at < index; at = text.indexOf('\n', at + 1)) {
      line++;
      last = at;
    }
    return `${line}, column ${index - last}`;
  };
  const fail = (message: string, at: number): never => {
    throw new XmlSyntaxError(message, position(at));
  };

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

  const stack: Open[] = [];
  // The namespaces in scope: each prefix's declarations, innermost last, pushed by the element declaring
  // one and popped when it closes (so that a declaring element costs its own declarations, not a copy of all).
  const bindings = new Map<string, string[]>([['xml', [XML_NS]]]);
  // The default namespace in scope (the last of bindings' ""), kept beside them: every unprefixed element asks for it.
  let defaultNs: string | undefined;
  const undeclare = (declared: string[] | undefined): void => {
    if (declared === undefined) return;
    for (const prefix of declared) bindings.get(prefix)!.pop();
    const defaults = bindings.get('');
    defaultNs = defaults === undefined ? undefined : defaults[defaults.length - 1];
  };
  let root: XmlElement | undefined;
  let detach: DetachChild | undefined;
  let deepest = 0;

  // One string per distinct name: a large document repeats a few hundred names a million times. Found by
  // a hash of its characters taken while scanning, and compared in place, so a known name costs no copy.
  const names = new Map<number, string>();
  // Names whose hash an earlier name has (rare): by their text.
  const collided = new Map<string, string>();
  // Where the colon of the name name() read last is (its offset in the name), or -1.
  let colon = -1;
  /** A name (with at most one colon between two parts) at `i`, scanned by character (the NAME of XML 1.0 as FHIR uses it). */
  const name = (): string => {
    const from = i;
    const n = text.length;
    let j = i;
    let c = j < n ? text.charCodeAt(j) : 0;
    if (!isNameStart(c)) fail('A name was expected', i);
    let hash = c;
    for (j++; j < n && isNameChar((c = text.charCodeAt(j))); j++) hash = (Math.imul(hash, 31) + c) | 0;
    colon = -1;
    if (j + 1 < n && text.charCodeAt(j) === 58 && isNameStart(text.charCodeAt(j + 1))) {
      colon = j - from;
      hash = (Math.imul(hash, 31) + 58) | 0;
      for (j++; j < n && isNameChar((c = text.charCodeAt(j))); j++) hash = (Math.imul(hash, 31) + c) | 0;
    }
    i = j;
    const known = names.get(hash);
    if (known !== undefined && known.length === j - from && text.startsWith(known, from)) return known;
    const found = text.slice(from, j);
    if (known === undefined) {
      names.set(hash, found);
      return found;
    }
    const other = collided.get(found);
    if (other !== undefined) return other;
    collided.set(found, found);
    return found;
  };
  const space = (): boolean => {
    const from = i;
    while (i < text.length && isSpace(text.charCodeAt(i))) i++;
    return i > from;
  };
  const expect = (s: string): void => {
    if (!text.startsWith(s, i)) fail(`'${s}' was expected`, i);
    i += s.length;
  };
  const addText = (t: string, cdata: boolean): void => {
    const top = stack[stack.length - 1];
    if (top === undefined) {
      if (cdata || !isXmlSpace(t)) fail('Text outside the root element', i);
      return;
    }
    if (dropSpace && !cdata && isXmlSpace(t)) return;
    top.element.children.push({ kind: 'text', text: t, cdata });
  };
  /** A child of the root has completed: a streamed document may let it go. */
  const completed = (element: XmlElement): void => {
    if (detach === undefined || stack.length !== 1 || !detach(element)) return;
    const siblings = root!.children;
    siblings[siblings.length - 1] = { ...element, attributes: [], children: NO_CHILDREN };
  };

  /** The XML declaration: version, encoding (UTF-8 only: the text was read as UTF-8) and standalone. False: not all of it read yet. */
  const declaration = (): boolean => {
    // A BOM, `<?xml` and the character that tells a declaration from a PI named `xml...`.
    if (text.length < 7 && !final) return false;
    if (text.startsWith('\uFEFF')) i = 1;
    if (text.startsWith('<?xml', i) && /[\s?]/.test(text[i + 5] ?? '')) {
      const end = text.indexOf('?>', i);
      if (end < 0 && !final) return (i = 0), false;
      if (end < 0) fail('Unterminated XML declaration', i);
      const decl = text.slice(i + 5, end);
      const encoding = /encoding\s*=\s*["']([^"']*)["']/.exec(decl)?.[1];
      if (encoding !== undefined && isAsciiLabel(encoding)) ascii = encoding;
      else if (encoding !== undefined && !/^utf-?8$/i.test(encoding)) throw new XmlEncodingError(encoding, position(i));
      i = end + 2;
      if (ascii !== undefined) asciiOnly(i);
    }
    return (started = true);
  };

  /** Refuses a character beyond US-ASCII in the text from `from` on, when the declaration named US-ASCII. */
  const asciiOnly = (from: number): void => {
    const outside = ascii === undefined ? undefined : firstNonAscii(text, from);
    if (outside !== undefined) throw new XmlEncodingError(ascii!, position(outside.at), outside.code);
  };

  /** An end tag at `i`. */
  const endTag = (): void => {
    const start = i;
    i += 2;
    const qname = name();
    space();
    expect('>');
    const open = stack.pop();
    if (open === undefined) fail(`End tag '</${qname}>' without a start tag`, start);
    if (open!.element.qname !== qname) fail(`End tag '</${qname}>' does not match '<${open!.element.qname}>'`, start);
    open!.element.end = base + i;
    undeclare(open!.declared);
    completed(open!.element);
  };

  // The start tag being read: its attributes' names, values and offsets (reused from tag to tag), and whether a name has a prefix.
  const attrNames: string[] = [];
  const attrValues: string[] = [];
  const attrAts: number[] = [];
  const attrColons: boolean[] = [];
  const inScope = (prefix: string): string | undefined => {
    const values = bindings.get(prefix);
    return values === undefined ? undefined : values[values.length - 1];
  };
  const declare = (declared: string[] | undefined, prefix: string, value: string): string[] => {
    let values = bindings.get(prefix);
    if (values === undefined) bindings.set(prefix, (values = []));
    values.push(value);
    if (prefix === '') defaultNs = value;
    if (declared === undefined) return [prefix];
    declared.push(prefix);
    return declared;
  };
  /** A prefixed name's namespace, as declared where it is. */
  const prefixed = (q: string, at: number): string => {
    const prefix = q.slice(0, q.indexOf(':'));
    const ns = inScope(prefix);
    if (ns === undefined) fail(`Prefix '${prefix}' is not declared`, at);
    return ns!;
  };

  // Whether the attribute value attributeValue read last holds a reference or white space other than spaces.
  let plain = true;
  /** An attribute's value as written, from the quote at `i` (moved past its closing quote); `plain` tells whether unescape has work. */
  const attributeValue = (attr: string): string => {
    const quote = text.charCodeAt(i);
    if (quote !== 34 && quote !== 39) fail(`The value of attribute '${attr}' must be quoted`, i);
    const close = text.indexOf(quote === 34 ? '"' : "'", i + 1);
    if (close < 0) fail(`Unterminated value of attribute '${attr}'`, i);
    plain = true;
    for (let j = i + 1; j < close; j++) {
      const c = text.charCodeAt(j);
      if (c === 60) fail(`'<' may not appear in the value of attribute '${attr}'`, i);
      if (c === 38 || c === 9 || c === 10 || c === 13) plain = false;
    }
    const value = text.slice(i + 1, close);
    i = close + 1;
    return value;
  };

  /** Whether one of the first `count` attributes of the tag is named `attr`. */
  const given = (attr: string, count: number): boolean => {
    for (let k = 0; k < count; k++) if (attrNames[k] === attr) return true;
    return false;
  };

  /** A start tag at `i`. */
  const startTag = (): void => {
    const start = i;
    i += 1;
    if (stack.length === 0 && root !== undefined) fail('A second root element', start);
    if (stack.length >= maxDepth) fail(`Elements nest deeper than ${maxDepth} levels`, start);
    if (stack.length >= deepest) deepest = stack.length + 1;
    const qname = name();
    const qnameColon = colon >= 0;
    let count = 0;
    let seen: Set<string> | undefined;
    let selfClosing = false;
    let declares = false;
    for (;;) {
      const spaced = space();
      const c = text.charCodeAt(i);
      if (c === 47 && text.charCodeAt(i + 1) === 62) {
        i += 2;
        selfClosing = true;
        break;
      }
      if (c === 62) {
        i += 1;
        break;
      }
      if (!spaced) fail(`Malformed start tag '<${qname}'`, i);
      const at = i;
      const attr = name();
      const attrColon = colon >= 0;
      space();
      expect('=');
      space();
      const valueAt = i;
      const written = attributeValue(attr);
      if (seen !== undefined ? seen.has(attr) : given(attr, count)) fail(`Attribute '${attr}' is given twice`, at);
      const value = plain ? written : unescape(written, valueAt, true);
      if (attr === 'xmlns' || (attrColon && attr.startsWith('xmlns:'))) declares = true;
      attrNames[count] = attr;
      attrValues[count] = value;
      attrAts[count] = at;
      attrColons[count] = attrColon;
      count++;
      if (seen !== undefined) seen.add(attr);
      else if (count > FEW_ATTRIBUTES) seen = new Set(attrNames.slice(0, count));
    }
    let declared: string[] | undefined;
    let declaresDefault: string | undefined;
    if (declares) {
      for (let k = 0; k < count; k++) {
        const attr = attrNames[k]!;
        if (attr === 'xmlns') {
          declaresDefault = attrValues[k]!;
          declared = declare(declared, '', declaresDefault);
        } else if (attrColons[k] && attr.startsWith('xmlns:')) {
          if (attrValues[k] === '') fail(`Prefix '${attr.slice(6)}' may not be undeclared`, start);
          declared = declare(declared, attr.slice(6), attrValues[k]!);
        }
      }
    }
    const local = qnameColon ? qname.slice(qname.indexOf(':') + 1) : qname;
    const ns = qnameColon ? prefixed(qname, start) : (defaultNs ?? '');
    let attributes: XmlAttribute[] = NO_ATTRIBUTES;
    if (count === 1 && !declares && !attrColons[0]) {
      // One plain attribute (`value`: most of FHIR XML's elements).
      attributes = [{ qname: attrNames[0]!, local: attrNames[0]!, ns: '', value: attrValues[0]! }];
    } else if (count > (declared?.length ?? 0)) {
      attributes = [];
      for (let k = 0; k < count; k++) {
        const attr = attrNames[k]!;
        if (!attrColons[k]) {
          if (attr !== 'xmlns') attributes.push({ qname: attr, local: attr, ns: '', value: attrValues[k]! });
        } else if (!attr.startsWith('xmlns:')) {
          attributes.push({ qname: attr, local: attr.slice(attr.indexOf(':') + 1), ns: prefixed(attr, attrAts[k]!), value: attrValues[k]! });
        }
      }
    }
    // An empty element (most of FHIR XML: `<status value="final"/>`) gets no children: one shared empty list.
    const element: XmlElement = { kind: 'element', qname, local, ns, attributes, declaresDefault, children: selfClosing ? NO_CHILDREN : [], start: base + start, end: base + i };
    const parent = stack[stack.length - 1];
    if (parent) parent.element.children.push(element);
    else {
      root = element;
      detach = opts.stream?.(element);
    }
    if (!selfClosing) stack.push({ element, declared });
    else {
      undeclare(declared);
      completed(element);
    }
  };

  /** Reads the complete markup and text from `i` on; stops where more text is needed (unless final). */
  const run = (): void => {
    if (!started && !declaration()) return;
    while (i < text.length) {
      const lt = text.indexOf('<', i);
      if (lt !== i) {
        if (lt < 0 && !final) return;
        const stop = lt < 0 ? text.length : lt;
        // White space alone (a pretty-printed document's indentation) is told by its characters, without a copy.
        let j = i;
        while (j < stop && isSpace(text.charCodeAt(j))) j++;
        if (j < stop || (!dropSpace && stack.length > 0)) {
          const raw = text.slice(i, stop);
          if (j < stop && raw.includes(']]>')) fail("']]>' may not appear in text", i);
          addText(j < stop ? unescape(raw, i, false) : raw, false);
        }
        if (lt < 0) break;
        i = lt;
      }
      if (!final && text.length - i < LONGEST_OPENING) return;
      const next = text.charCodeAt(i + 1);
      if (next !== 33 && next !== 63 && next !== 47) {
        if (!final && tagEnd(text, i + 1) < 0) return;
        startTag();
      } else if (next === 47) {
        if (!final && text.indexOf('>', i) < 0) return;
        endTag();
      } else if (text.startsWith('<!--', i)) {
        const end = text.indexOf('-->', i + 4);
        if (end < 0 && !final) return;
        if (end < 0) fail('Unterminated comment', i);
        if (text.slice(i + 4, end).includes('--')) fail("'--' may not appear in a comment", i);
        i = end + 3;
      } else if (text.startsWith('<![CDATA[', i)) {
        if (stack.length === 0) fail('CDATA outside the root element', i);
        const end = text.indexOf(']]>', i + 9);
        if (end < 0 && !final) return;
        if (end < 0) fail('Unterminated CDATA section', i);
        addText(text.slice(i + 9, end), true);
        i = end + 3;
      } else if (text.startsWith('<!DOCTYPE', i) || text.startsWith('<!ENTITY', i)) {
        fail('A document type declaration (DOCTYPE) is not allowed: FHIR XML has no DTD, and Cinder expands no entities', i);
      } else if (text.startsWith('<!', i)) {
        fail("Markup declarations ('<!') are not allowed", i);
      } else {
        // '<?': a processing instruction (a stylesheet, say): nothing of FHIR content; skipped.
        const target = text.slice(i + 2, i + 5);
        if (target.toLowerCase() === 'xml' && /[\s?]/.test(text[i + 5] ?? '')) fail('The XML declaration must come first', i);
        const end = text.indexOf('?>', i + 2);
        if (end < 0 && !final) return;
        if (end < 0) fail('Unterminated processing instruction', i);
        i = end + 2;
      }
    }
  };

  /** Where the text still needed starts: all of it, unless streamed; then the child of the root being read, or what is not read yet. */
  const kept = (): number => (detach === undefined ? 0 : stack.length >= 2 ? stack[1]!.element.start - base : i);

  /** Joins the pending chunks to the text kept (letting go of what a streamed document no longer needs), then reads on. */
  const join = (): void => {
    let added = pending.length === 1 ? pending[0]! : pending.join('');
    pending = [];
    pendingLength = 0;
    // End-of-line handling (XML 1.0 section 2.11): CR LF and a lone CR read as LF, across chunks too.
    if (heldCr) added = '\r' + added;
    heldCr = !final && added.endsWith('\r');
    if (heldCr) added = added.slice(0, -1);
    if (added.includes('\r')) added = added.replace(/\r\n?/g, '\n');
    const keep = kept();
    if (keep > 0) {
      const gone = text.slice(0, keep);
      for (let at = gone.indexOf('\n'); at >= 0; at = gone.indexOf('\n', at + 1)) {
        linesBefore++;
        lastBreakBefore = base + at;
      }
      text = text.slice(keep);
      base += keep;
      i -= keep;
    }
    const from = text.length;
    text = from === 0 ? added : text + added;
    if (ascii !== undefined) asciiOnly(from);
    const bad = NOT_XML_CHAR.exec(added);
    if (bad) fail(`U+${bad[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')} is not a character XML allows`, from + bad.index);
    run();
  };

  return {
    push(chunk) {
      if (chunk === '') return;
      pending.push(chunk);
      pendingLength += chunk.length;
      // Joined once as long as the text kept, so that a long element (or a document kept whole) costs a linear time.
      if (pendingLength >= text.length - kept()) join();
    },
    end(last) {
      if (last !== undefined && last !== '') pending.push(last);
      final = true;
      join();
      if (stack.length > 0) fail(`Element '<${stack[stack.length - 1]!.element.qname}>' is not closed`, text.length);
      if (root === undefined) fail('No root element', 0);
      return root!;
    },
    slice(start, end) {
      if (start < base) throw new RangeError(`The text at offset ${start} is no longer kept (the reader let go of what precedes ${base})`);
      return text.slice(start - base, end - base);
    },
    get depth() {
      return deepest;
    },
  };
}
