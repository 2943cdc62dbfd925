import { literalOf } from '../exact-json.ts';
import type { Slot } from '../validation/model.ts';
import { FHIR_NS, isAttributeElement, XHTML_NS, xmlTypeModel, type XmlTypeModel } from './xml-model.ts';
import { parseXml } from './xml-parse.ts';

type Obj = Record<string, unknown>;

/** A JSON member name that can be an XML element name (others, only stored with validation off, are left out). */
const XML_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

const ATTRIBUTE_ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\n': '&#10;', '\r': '&#13;', '\t': '&#9;' };
/**
 * What an attribute value escapes, and the characters XML cannot carry at all (characters.ts), which
 * only a resource stored before every write refused them can hold: written as U+FFFD, so that the
 * document stays well-formed.
 */
const NEEDS_ESCAPE = /[&<>"\n\r\t\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/;
const ESCAPED = new RegExp(NEEDS_ESCAPE.source, 'g');

/** An attribute value, escaped so that it reads back as it is (XML's attribute-value normalisation turns raw tabs and line ends into spaces). */
function attr(value: string): string {
  return NEEDS_ESCAPE.test(value) ? value.replace(ESCAPED, (c) => ATTRIBUTE_ESCAPES[c] ?? '\uFFFD') : value;
}

const TEXT_ESCAPES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;' };
/** What a narrative that is not well-formed escapes, written as text: markup, and what XML cannot carry (as in attr). */
const TEXT_ESCAPED = /[&<>\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g;

/**
 * Narrative `div`s checked as well-formed XHTML, by text, so that the generated narratives a Bundle repeats
 * are checked once; none is written that is not. Only short ones are kept (the map holds its keys: 1,000
 * narratives of megabytes would hold gigabytes); a long one is checked each time, in linear time.
 */
const checkedDivs = new Map<string, boolean>();
const MAX_CACHED_DIV = 4096;

/** Whether `div` is one well-formed XHTML `div` (the validator's rule; a resource stored with validation off may break it). */
function wellFormedDiv(div: string): boolean {
  let ok = checkedDivs.get(div);
  if (ok !== undefined) return ok;
  try {
    // Any depth the validator lets a narrative have (the reader is iterative): a bound here would write a valid narrative as text.
    const root = parseXml(div, Number.MAX_SAFE_INTEGER);
    // Read alone, the div's namespace is one it declares itself: by default (`<div xmlns=...>`) or by a prefix (`<h:div xmlns:h=...>`).
    ok = root.local === 'div' && root.ns === XHTML_NS;
  } catch {
    ok = false;
  }
  if (div.length > MAX_CACHED_DIV) return ok;
  if (checkedDivs.size > 1000) checkedDivs.clear();
  checkedDivs.set(div, ok);
  return ok;
}

/** Writes XML text into parts, indented when `pretty`. */
class Writer {
  readonly parts: string[] = [];
  constructor(readonly pretty: boolean) {}

  line(depth: number, s: string): void {
    if (this.pretty) this.parts.push(this.parts.length === 0 ? '' : '\n', '  '.repeat(depth), s);
    else this.parts.push(s);
  }
}

/**
 * A resource in the FHIR R4 XML format (R4 xml.html), from its JSON form, by the R4 definitions the
 * validator uses: elements in definition order, primitives as `value` attributes with their `id` and
 * extensions (`_name`), `id` of data types and `url` of extensions as attributes, nested resources in
 * an element named by their type, the narrative `div` as written, numbers as written (exact-json.ts).
 * Members the definitions do not know (only possible for content stored with validation off) are
 * written after the known ones, by their JSON shape.
 */
export function toFhirXml(resource: Obj, pretty = false): string {
  const w = new Writer(pretty);
  w.line(0, '<?xml version="1.0" encoding="UTF-8"?>');
  writeResource(w, resource, 0, true);
  return w.parts.join('');
}

function writeResource(w: Writer, r: Obj, depth: number, root: boolean): void {
  const type = String(r.resourceType);
  const m = xmlTypeModel(type);
  const open = root ? `<${type} xmlns="${FHIR_NS}"` : `<${type}`;
  if (m === null || !m.resource) {
    writeUnknown(w, type, r, depth, open);
    return;
  }
  writeComplex(w, type, open, type, m, r, depth);
}

/** An element of a complex type (or a resource): its attributes, then its children in definition order. */
function writeComplex(w: Writer, tag: string, open: string, type: string, m: XmlTypeModel, value: Obj, depth: number): void {
  let start = open;
  // The object's own members, each placed by its element's place in the definition (objects hold few; types define many).
  const known: [place: number, name: string, slot: Slot][] = [];
  const unknown: string[] = [];
  for (const key of Object.keys(value)) {
    if ((key === 'resourceType' && m.resource) || key === 'fhir_comments') continue;
    const name = key.charCodeAt(0) === 95 ? key.slice(1) : key;
    const slot = m.model.slots.get(name);
    if (slot === undefined) {
      if (value[key] !== null) unknown.push(key);
      continue;
    }
    if (isAttributeElement(m, slot.element, type)) {
      if (name === key && value[key] !== undefined && value[key] !== null) start += ` ${key}="${attr(String(value[key]))}"`;
      continue;
    }
    // `_name` beside `name` is written with it.
    if (name !== key && value[name] !== undefined) continue;
    known.push([m.order.get(slot.element)!, name, slot]);
  }
  if (known.length > 1) known.sort((a, b) => a[0] - b[0]);
  const mark = w.parts.length;
  w.line(depth, `${start}>`);
  const before = w.parts.length;
  for (const [, name, slot] of known) writeElement(w, value, name, slot.type, slot.primitive, depth + 1);
  for (const key of unknown) writeUnknownMember(w, value, key, depth + 1);
  if (w.parts.length === before) {
    // No children: `<tag .../>`.
    w.parts.length = mark;
    w.line(depth, `${start}/>`);
  } else w.line(depth, `</${tag}>`);
}

/** Every value of one JSON name (one, or each of an array), as elements named so. */
function writeElement(w: Writer, holder: Obj, name: string, type: string, primitive: boolean, depth: number): void {
  const v = holder[name];
  const ext = holder[`_${name}`];
  if (type === 'xhtml') {
    if (typeof v !== 'string') return;
    const div = wellFormedDiv(v) ? v : `<div xmlns="${XHTML_NS}">${v.replace(TEXT_ESCAPED, (c) => TEXT_ESCAPES[c] ?? '\uFFFD')}</div>`;
    // A carriage return would be read back as a line end (XML 1.0 2.11): written as a reference, which keeps it.
    w.line(depth, div.includes('\r') ? div.replace(/\r/g, '&#13;') : div);
    return;
  }
  if (Array.isArray(v) || Array.isArray(ext)) {
    const values = Array.isArray(v) ? v : [];
    const exts = Array.isArray(ext) ? ext : [];
    const n = Math.max(values.length, exts.length);
    for (let i = 0; i < n; i++) writeValue(w, name, type, primitive, values[i], exts[i], values, i, depth);
    return;
  }
  writeValue(w, name, type, primitive, v, ext, holder, name, depth);
}

function writeValue(w: Writer, name: string, type: string, primitive: boolean, v: unknown, ext: unknown, holder: object, key: string | number, depth: number): void {
  if (primitive) {
    writePrimitive(w, name, v, ext, holder, key, depth);
    return;
  }
  if (v === null || v === undefined) return;
  if (typeof v !== 'object') {
    // A primitive where R4 has a complex type (stored with validation off): written as it is.
    w.line(depth, `<${name} value="${attr(String(v))}"/>`);
    return;
  }
  if (type === 'Resource') {
    w.line(depth, `<${name}>`);
    writeResource(w, v as Obj, depth + 1, false);
    w.line(depth, `</${name}>`);
    return;
  }
  const m = xmlTypeModel(type);
  if (m === null) writeUnknown(w, name, v as Obj, depth, `<${name}`);
  else writeComplex(w, name, `<${name}`, type, m, v as Obj, depth);
}

/** A primitive: `<name id=".." value="..">` and its extensions; the number's literal as written. */
function writePrimitive(w: Writer, name: string, v: unknown, ext: unknown, holder: object, key: string | number, depth: number): void {
  const x = ext !== null && typeof ext === 'object' ? (ext as Obj) : undefined;
  let start = `<${name}`;
  if (x && typeof x.id === 'string') start += ` id="${attr(x.id)}"`;
  if (v !== null && v !== undefined) {
    const text = typeof v === 'number' ? (literalOf(holder, key) ?? String(v)) : typeof v === 'object' ? JSON.stringify(v) : String(v);
    start += ` value="${attr(text)}"`;
  } else if (!x) return;
  const extensions = x && Array.isArray(x.extension) ? (x.extension as unknown[]) : [];
  if (extensions.length === 0) {
    w.line(depth, `${start}/>`);
    return;
  }
  w.line(depth, `${start}>`);
  const m = xmlTypeModel('Extension')!;
  for (const item of extensions) if (item !== null && typeof item === 'object') writeComplex(w, 'extension', '<extension', 'Extension', m, item as Obj, depth + 1);
  w.line(depth, `</${name}>`);
}

/** A member R4 does not define here, written by its JSON shape. */
function writeUnknownMember(w: Writer, holder: Obj, key: string, depth: number): void {
  const v = holder[key];
  if (!XML_NAME.test(key)) return;
  const items = Array.isArray(v) ? v : [v];
  items.forEach((item, i) => {
    if (item === null || item === undefined) return;
    if (typeof item === 'object') writeUnknown(w, key, item as Obj, depth, `<${key}`);
    else {
      const text = typeof item === 'number' ? (literalOf(Array.isArray(v) ? v : holder, Array.isArray(v) ? i : key) ?? String(item)) : String(item);
      w.line(depth, `<${key} value="${attr(text)}"/>`);
    }
  });
}

function writeUnknown(w: Writer, tag: string, value: Obj, depth: number, open: string): void {
  w.line(depth, `${open}>`);
  for (const key of Object.keys(value)) if (key !== 'resourceType') writeUnknownMember(w, value, key, depth + 1);
  w.line(depth, `</${tag}>`);
}
