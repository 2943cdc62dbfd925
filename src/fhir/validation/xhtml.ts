/**
 * The narrative's XHTML (R4 narrative.html, Narrative.div; txt-1, txt-2): one well-formed XML element,
 * a `div` in the XHTML namespace, holding only the elements and attributes txt-1's XPath lists, and
 * some content. A strict single-pass scanner for the subset FHIR uses: elements, attributes, text,
 * comments and CDATA sections; the five XML entities and character references (XML has no `&nbsp;`);
 * no DOCTYPE, no processing instructions. It builds no tree and never recurses.
 */

const XHTML = 'http://www.w3.org/1999/xhtml';
const XML = 'http://www.w3.org/XML/1998/namespace';

/** txt-1's XPath: `descendant-or-self::*[not(local-name(.)=(...))]`. */
export const NARRATIVE_ELEMENTS: ReadonlySet<string> = new Set([
  'a', 'abbr', 'acronym', 'b', 'big', 'blockquote', 'br', 'caption', 'cite', 'code', 'col', 'colgroup', 'dd', 'dfn', 'div', 'dl', 'dt', 'em',
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'hr', 'i', 'img', 'li', 'ol', 'p', 'pre', 'q', 'samp', 'small', 'span', 'strong', 'sub', 'sup',
  'table', 'tbody', 'td', 'tfoot', 'th', 'thead', 'tr', 'tt', 'ul', 'var',
]);

/** txt-1's XPath: `descendant-or-self::*` then `/@*[not(name(.)=(...))]`; namespace declarations are no attributes. */
export const NARRATIVE_ATTRIBUTES: ReadonlySet<string> = new Set([
  'abbr', 'accesskey', 'align', 'alt', 'axis', 'bgcolor', 'border', 'cellhalign', 'cellpadding', 'cellspacing', 'cellvalign', 'char', 'charoff',
  'charset', 'cite', 'class', 'colspan', 'compact', 'coords', 'dir', 'frame', 'headers', 'height', 'href', 'hreflang', 'hspace', 'id', 'lang',
  'longdesc', 'name', 'nowrap', 'rel', 'rev', 'rowspan', 'rules', 'scope', 'shape', 'span', 'src', 'start', 'style', 'summary', 'tabindex',
  'title', 'type', 'valign', 'value', 'vspace', 'width',
]);

/**
 * `xml:lang`, XHTML 1.0's twin of `lang`, which HL7's fhir-xhtml.xsd allows and the XPath's list (by
 * `name()`, so unprefixed names only) leaves out.
 */
const XML_LANG = 'xml:lang';
/** Attributes holding a URL, where `javascript:` would be active content (narrative.html: no scripts). */
const URL_ATTRIBUTES = new Set(['href', 'src', 'cite', 'longdesc']);
const ACTIVE_SCHEME = /^(?:javascript|vbscript):/i;
/** What browsers ignore in a URL's scheme: ASCII whitespace and control characters. */
const URL_IGNORED = /[\u0000-\u0020]+/g;
const XML_ENTITIES: Record<string, string> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
const NON_CHARACTER = /[\uFFFE\uFFFF]/;

export interface NarrativeProblem {
  /** `xml`: not well-formed; `txt-1`: not the allowed XHTML; `txt-2`: no content. */
  rule: 'xml' | 'txt-1' | 'txt-2';
  text: string;
}

class NotWellFormed extends Error {}

/** The problems of a narrative's `div` (none when it is valid). */
export function checkNarrative(xhtml: string): NarrativeProblem[] {
  const scan = new Scan(xhtml);
  try {
    if (NON_CHARACTER.test(xhtml)) scan.fail(xhtml.search(NON_CHARACTER), 'U+FFFE and U+FFFF are not XML characters');
    scan.document();
  } catch (err) {
    if (err instanceof NotWellFormed) return [{ rule: 'xml', text: `the narrative is not well-formed XHTML: ${err.message}` }];
    throw err;
  }
  const problems = scan.problems ?? [];
  if (!scan.content) problems.push({ rule: 'txt-2', text: 'the narrative must have some non-whitespace content, or an <img> with a src (txt-2)' });
  return problems;
}

function isSpace(c: number): boolean {
  return c === 32 || c === 10 || c === 9 || c === 13;
}

function isNameStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 58 || c >= 0xc0;
}

function isNameChar(c: number): boolean {
  return isNameStart(c) || (c >= 48 && c <= 57) || c === 45 || c === 46 || c === 0xb7;
}

/** A Unicode code point XML allows (XML 1.0 Char). */
function isXmlChar(c: number): boolean {
  return c === 9 || c === 10 || c === 13 || (c >= 0x20 && c <= 0xd7ff) || (c >= 0xe000 && c <= 0xfffd) || (c >= 0x10000 && c <= 0x10ffff);
}

class Scan {
  pos = 0;
  /** Some non-whitespace text, or an image. */
  content = false;
  problems: NarrativeProblem[] | undefined;
  /** Open elements' qualified names, innermost last. */
  private readonly open: string[] = [];
  /** How many namespace bindings each open element declared. */
  private readonly declared: number[] = [];
  /** Namespace bindings in scope as prefix, uri pairs (`''` the default namespace), innermost last. */
  private readonly bindings: string[] = ['xml', XML];
  /** The same bindings by prefix, each prefix's URIs innermost last: a lookup costs one probe however many are in scope. */
  private readonly byPrefix = new Map<string, string[]>([['xml', [XML]]]);
  /** The next `&`, `]]>` and `<` (in attribute values) at or after the last place looked (the length when there is none). */
  private amp = -1;
  private cdataEnd = -1;
  private lt = -1;
  /** Reported element and attribute names, so each is reported once. */
  private reported: Set<string> | undefined;

  constructor(private readonly s: string) {}

  fail(at: number, message: string): never {
    throw new NotWellFormed(`${message} (at character ${at + 1})`);
  }

  /** One root element, with nothing but whitespace around it. */
  document(): void {
    const s = this.s;
    this.skipSpace();
    if (s.charCodeAt(this.pos) !== 60) this.fail(this.pos, 'it must start with <div');
    const next = s.charCodeAt(this.pos + 1);
    if (next === 63) this.fail(this.pos, 'processing instructions (<?...?>) are not allowed');
    if (next === 33) this.fail(this.pos, 'nothing (no DOCTYPE, no comment) may come before the <div>');
    this.elementTree();
    this.skipSpace();
    if (this.pos < s.length) this.fail(this.pos, 'the narrative must be one <div> element, with nothing after it');
  }

  private skipSpace(): boolean {
    const start = this.pos;
    while (this.pos < this.s.length && isSpace(this.s.charCodeAt(this.pos))) this.pos++;
    return this.pos > start;
  }

  /** The root element and everything in it, from its `<` to the end of its end tag. */
  private elementTree(): void {
    const s = this.s;
    if (this.startTag(true)) return;
    while (this.open.length > 0) {
      this.text();
      if (this.pos >= s.length) this.fail(this.pos, `<${this.open[this.open.length - 1]}> is not closed`);
      const next = s.charCodeAt(this.pos + 1);
      if (next === 47) this.endTag();
      else if (next === 33) this.declaration();
      else if (next === 63) this.fail(this.pos, 'processing instructions (<?...?>) are not allowed');
      else this.startTag(false);
    }
  }

  /** Character data up to the next `<`, with its references. */
  private text(): void {
    const s = this.s;
    const lt = s.indexOf('<', this.pos);
    const end = lt < 0 ? s.length : lt;
    if (this.cdataEnd < this.pos) this.cdataEnd = indexOrEnd(s, ']]>', this.pos);
    if (this.cdataEnd < end) this.fail(this.cdataEnd, ']]> is not allowed in text (write ]]&gt;)');
    while (this.pos < end) {
      if (this.amp < this.pos) this.amp = indexOrEnd(s, '&', this.pos);
      const stop = Math.min(this.amp, end);
      if (!this.content && hasNonSpace(s, this.pos, stop)) this.content = true;
      this.pos = stop;
      if (stop < end && !isSpace(this.reference())) this.content = true;
    }
  }

  /** `&name;` (the five XML entities) or `&#n;`/`&#xh;` at pos: the character it stands for (0 for an entity). */
  private reference(): number {
    const s = this.s;
    const start = this.pos;
    const semi = s.indexOf(';', start + 1);
    const body = semi < 0 || semi - start > 32 ? '' : s.slice(start + 1, semi);
    if (body.charCodeAt(0) === 35) {
      const hex = body.charCodeAt(1) === 120;
      const digits = body.slice(hex ? 2 : 1);
      if (!(hex ? /^[0-9A-Fa-f]+$/ : /^[0-9]+$/).test(digits)) this.fail(start, `${JSON.stringify(s.slice(start, start + 12))} is not a character reference`);
      const code = parseInt(digits, hex ? 16 : 10);
      if (!isXmlChar(code)) this.fail(start, `&${body}; is not a character XML allows`);
      this.pos = semi + 1;
      return code;
    }
    if (Object.hasOwn(XML_ENTITIES, body)) {
      this.pos = semi + 1;
      return 0;
    }
    if (/^[A-Za-z][A-Za-z0-9]*$/.test(body)) {
      this.fail(start, `&${body}; is no XML entity (XHTML in FHIR is XML: only &lt; &gt; &amp; &quot; &apos;, and character references such as &#160;)`);
    }
    this.fail(start, 'a bare & must be written &amp;');
  }

  /** A start tag at pos: checks its names and attributes; true when it closes itself. */
  private startTag(root: boolean): boolean {
    const s = this.s;
    const tagStart = this.pos;
    this.pos++;
    const name = this.name();
    if (name === '') this.fail(tagStart, 'a tag name must follow < (write &lt; for a literal <)');
    let names: string[] | undefined;
    let values: string[] | undefined;
    let seen: Set<string> | undefined;
    let selfClosing = false;
    for (;;) {
      const spaced = this.skipSpace();
      const c = s.charCodeAt(this.pos);
      if (c === 62) break;
      if (c === 47) {
        if (s.charCodeAt(this.pos + 1) !== 62) this.fail(this.pos, `/ must be followed by > in <${name}>`);
        this.pos++;
        selfClosing = true;
        break;
      }
      if (this.pos >= s.length) this.fail(tagStart, `<${name} is not closed by >`);
      if (!spaced) this.fail(this.pos, `attributes of <${name}> must be separated by whitespace`);
      const attribute = this.name();
      if (attribute === '') this.fail(this.pos, `unexpected ${JSON.stringify(s[this.pos])} in <${name}>`);
      this.skipSpace();
      if (s.charCodeAt(this.pos) !== 61) this.fail(this.pos, `attribute ${attribute} of <${name}> needs a value (${attribute}="...")`);
      this.pos++;
      this.skipSpace();
      const value = this.attributeValue(attribute);
      names ??= [];
      values ??= [];
      if (seen !== undefined ? seen.has(attribute) : names.includes(attribute)) this.fail(tagStart, `<${name}> has two ${attribute} attributes`);
      names.push(attribute);
      // Past a few attributes, a set: a start tag of thousands compared pairwise is quadratic.
      if (seen !== undefined) seen.add(attribute);
      else if (names.length > 16) seen = new Set(names);
      values.push(value);
    }
    this.pos++;
    this.element(name, names, values, root, tagStart);
    if (selfClosing) this.close();
    return selfClosing;
  }

  /** A quoted attribute value at pos; the raw text (references undecoded). */
  private attributeValue(attribute: string): string {
    const s = this.s;
    const quote = s.charCodeAt(this.pos);
    if (quote !== 34 && quote !== 39) this.fail(this.pos, `the value of ${attribute} must be quoted`);
    const start = ++this.pos;
    const end = s.indexOf(quote === 34 ? '"' : "'", start);
    if (end < 0) this.fail(start - 1, `the value of ${attribute} is not closed`);
    // The next `<` as looked for before: a tag's every attribute searching to its end would be quadratic.
    if (this.lt < start) this.lt = indexOrEnd(s, '<', start);
    const lt = this.lt;
    if (lt < end) this.fail(lt, `< is not allowed in an attribute value (in ${attribute}; write &lt;)`);
    for (;;) {
      if (this.amp < this.pos) this.amp = indexOrEnd(s, '&', this.pos);
      if (this.amp >= end) break;
      this.pos = this.amp;
      this.reference();
    }
    this.pos = end + 1;
    return s.slice(start, end);
  }

  /** An XML name at pos (the namespace rules check its colons), or '' when there is none. */
  private name(): string {
    const s = this.s;
    const start = this.pos;
    if (!isNameStart(s.charCodeAt(start))) return '';
    let i = start + 1;
    while (i < s.length && isNameChar(s.charCodeAt(i))) i++;
    this.pos = i;
    return s.slice(start, i);
  }

  /** An element whose start tag was read: its namespace bindings, namespace, name and attributes. */
  private element(name: string, names: string[] | undefined, values: string[] | undefined, root: boolean, at: number): void {
    let declared = 0;
    if (names !== undefined) {
      for (let i = 0; i < names.length; i++) {
        const n = names[i]!;
        if (n === 'xmlns' || n.startsWith('xmlns:')) {
          const prefix = n === 'xmlns' ? '' : n.slice(6);
          // The same string as XHTML, so that each element's comparison with it is one of references.
          const uri = values![i] === XHTML ? XHTML : decode(values![i]!);
          const reserved = prefix === 'xmlns' || (prefix === 'xml') !== (uri === XML);
          if (reserved || prefix.includes(':') || (prefix !== '' && uri === '')) this.fail(at, `${n}="${uri}" is not a namespace declaration XML allows`);
          this.bindings.push(prefix, uri);
          const uris = this.byPrefix.get(prefix);
          if (uris === undefined) this.byPrefix.set(prefix, [uri]);
          else uris.push(uri);
          declared++;
        }
      }
    }
    this.open.push(name);
    this.declared.push(declared);
    const colon = name.indexOf(':');
    const local = colon < 0 ? name : name.slice(colon + 1);
    const uri = this.namespace(colon < 0 ? '' : name.slice(0, colon), at);
    if (colon === 0 || local.includes(':') || local === '') this.fail(at, `<${name}> is not a name XML namespaces allow`);
    if (uri !== XHTML) {
      this.problem('namespace', root ? 'the narrative must be a <div> in the XHTML namespace, <div xmlns="http://www.w3.org/1999/xhtml"> (txt-1)' : `<${name}> is not in the XHTML namespace (txt-1)`);
    } else if (root && local !== 'div') {
      this.problem('root', `the narrative must be a <div> element, not <${local}> (txt-1)`);
    } else if (!NARRATIVE_ELEMENTS.has(local)) {
      this.problem(`<${local}`, `the narrative may not hold <${local}>: only basic HTML elements (txt-1)`);
    }
    if (names !== undefined) this.attributes(local, names, values!, at);
  }

  private attributes(element: string, names: string[], values: string[], at: number): void {
    for (let i = 0; i < names.length; i++) {
      const n = names[i]!;
      if (n === 'xmlns' || n.startsWith('xmlns:')) continue;
      const colon = n.indexOf(':');
      if (colon >= 0) {
        this.namespace(n.slice(0, colon), at);
        if (n !== XML_LANG) this.problem(`@${n}`, `the narrative may not hold the attribute ${n} (on <${element}>): only basic HTML attributes (txt-1)`);
      } else if (!NARRATIVE_ATTRIBUTES.has(n)) {
        this.problem(`@${n}`, `the narrative may not hold the attribute ${n} (on <${element}>): only basic HTML attributes, no event handlers (txt-1)`);
      } else if (URL_ATTRIBUTES.has(n) && activeUrl(values[i]!)) {
        this.problem('javascript', `the narrative may not hold javascript: links (${n} on <${element}>) (txt-1)`);
      } else if (n === 'src' && element === 'img') {
        this.content = true;
      }
    }
  }

  /** The namespace bound to `prefix` (`''`: the default namespace, or '' when there is none). */
  private namespace(prefix: string, at: number): string {
    const uris = this.byPrefix.get(prefix);
    if (uris !== undefined && uris.length > 0) return uris[uris.length - 1]!;
    if (prefix !== '') this.fail(at, `the prefix ${prefix}: is not declared`);
    return '';
  }

  private endTag(): void {
    const s = this.s;
    const at = this.pos;
    const open = this.open[this.open.length - 1]!;
    const after = at + 2 + open.length;
    if (s.startsWith(open, at + 2) && !isNameChar(s.charCodeAt(after))) {
      this.pos = after;
    } else {
      this.pos = at + 2;
      this.fail(at, `</${this.name() || s.slice(at + 2, at + 12)}> does not close <${open}>`);
    }
    this.skipSpace();
    if (s.charCodeAt(this.pos) !== 62) this.fail(this.pos, `</${open} is not closed by >`);
    this.pos++;
    this.close();
  }

  private close(): void {
    this.open.pop();
    const declared = this.declared.pop()!;
    const b = this.bindings;
    for (let i = b.length - 2 * declared; i < b.length; i += 2) this.byPrefix.get(b[i]!)!.pop();
    b.length -= 2 * declared;
  }

  /** `<!--...-->` or `<![CDATA[...]]>` inside the root; anything else that starts with `<!` is refused. */
  private declaration(): void {
    const s = this.s;
    const at = this.pos;
    if (s.startsWith('<!--', at)) {
      const end = s.indexOf('--', at + 4);
      if (end < 0) this.fail(at, 'the comment is not closed by -->');
      if (s.charCodeAt(end + 2) !== 62) this.fail(end, '-- is not allowed inside a comment');
      this.pos = end + 3;
    } else if (s.startsWith('<![CDATA[', at)) {
      const end = s.indexOf(']]>', at + 9);
      if (end < 0) this.fail(at, 'the CDATA section is not closed by ]]>');
      if (!this.content && hasNonSpace(s, at + 9, end)) this.content = true;
      this.pos = end + 3;
    } else {
      this.fail(at, 'declarations (<!DOCTYPE, <!ENTITY, ...) are not allowed');
    }
  }

  private problem(key: string, text: string): void {
    this.reported ??= new Set();
    if (this.reported.has(key)) return;
    this.reported.add(key);
    (this.problems ??= []).push({ rule: 'txt-1', text });
  }
}

function indexOrEnd(s: string, what: string, from: number): number {
  const i = s.indexOf(what, from);
  return i < 0 ? s.length : i;
}

function hasNonSpace(s: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (!isSpace(s.charCodeAt(i))) return true;
  return false;
}

/** A URL whose scheme runs code (`javascript:`, however spelt with references, whitespace or case). */
function activeUrl(raw: string): boolean {
  // The scheme ends at the first colon, which may be spelt as a reference (`&#58;`) before the first literal one.
  const colon = raw.indexOf(':');
  const head = colon < 0 ? raw : raw.slice(0, colon + 1);
  const references = head.includes('&');
  if (colon < 0 && !references) return false;
  return ACTIVE_SCHEME.test((references ? decode(head) : head).replace(URL_IGNORED, ''));
}

/** An attribute value with its references replaced (the scan has checked them). */
function decode(raw: string): string {
  if (!raw.includes('&')) return raw;
  return raw.replace(/&(#x[0-9A-Fa-f]+|#[0-9]+|[a-z]+);/g, (_, body: string) =>
    body.charCodeAt(0) === 35 ? String.fromCodePoint(parseInt(body.slice(body.charCodeAt(1) === 120 ? 2 : 1), body.charCodeAt(1) === 120 ? 16 : 10)) : XML_ENTITIES[body]!,
  );
}
