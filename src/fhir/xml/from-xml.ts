import { FhirError } from '../../errors.ts';
import { MAX_JSON_DEPTH } from '../../terminology/model/depth.ts';
import { recordLiteral, stringifyExact } from '../exact-json.ts';
import { parseBounded } from '../resource.ts';
import { isResourceType } from '../resource-types.ts';
import { FHIR_NS, NUMBER_TYPES, XHTML_NS, xmlTypeModel } from './xml-model.ts';
import { createXmlReader, isXmlSpace, XmlEncodingError, XmlSyntaxError, type XmlAttribute, type XmlElement } from './xml-parse.ts';

/** XML Schema instance attributes (`xsi:schemaLocation`) carry nothing of the content: ignored. */
const XSI_NS = 'http://www.w3.org/2001/XMLSchema-instance';
const INTEGER = /^-?(0|[1-9][0-9]*)$/;
const DECIMAL = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

type Obj = Record<string, unknown>;
/** The document's text between two offsets (an XmlReader's `slice`): where a narrative is copied from. */
export type Slice = (start: number, end: number) => string;

/**
 * An element's FHIRPath-like path (`Patient.name[0].given[1]`), written out only when an error names it:
 * a document of a million elements has no error in most of them. Written by `String` (a template too).
 */
class Loc {
  constructor(readonly parent: Path, readonly name: string, readonly index: number) {}
  toString(): string {
    return this.index < 0 ? `${this.parent}.${this.name}` : `${this.parent}.${this.name}[${this.index}]`;
  }
}
type Path = string | Loc;

/**
 * Whether the value the last readContent or readPrimitive to finish built holds a number's literal
 * (recorded by recordLiteral), read by its caller right after the call: a flag, not a lookup of each value.
 */
let held = false;

function refuse(message: string, path: Path): never {
  throw new FhirError('structure', message, { expression: [String(path)] });
}

/** Where an XML text comes from, for the words of its errors (a request body by default; `cinder import` names a file's resource). */
export interface XmlSource {
  /** What nests too deeply (`The request body`). */
  what?: string;
  /** The error for text that is not well-formed XML. */
  malformed?: (err: XmlSyntaxError) => FhirError;
  /**
   * Its JSON not bounded to MAX_JSON_DEPTH levels (no 400 for nesting deeper), for text the server wrote (the audit
   * trail's batch-response, which holds a resource read back three levels deeper than the resource); the XML's own
   * elements still are.
   */
  plain?: boolean;
}

/**
 * A FHIR R4 resource in the XML format (R4 xml.html) as the JSON form Cinder stores, parsed from `text`
 * by the R4 definitions the validator uses (src/fhir/validation/model.ts): element order, cardinality,
 * choice types, primitives' `value`/`id`/`extension` as `name` and `_name`, nested resources, the
 * narrative `div` kept as written, numbers as written. Anything that is not FHIR XML is a 400 naming
 * the element: malformed XML, a DTD, an element out of the FHIR namespace, an unknown or misplaced element.
 */
export function parseFhirXml(source: string, opts: XmlSource = {}): unknown {
  const what = opts.what ?? 'The request body';
  // Whitespace between elements is nothing to FHIR XML (the narrative is sliced from the text).
  const reader = createXmlReader({ maxDepth: MAX_JSON_DEPTH, dropSpace: true });
  const root = readXml(() => reader.end(source), opts);
  const resource = readResource(root, reader.slice, '');
  // Each element nests its JSON value at most two levels below its parent's (an array, then an object):
  // a document of elements no deeper than half the bound cannot exceed it, and needs no second look.
  if (opts.plain || 2 * reader.depth - 1 <= MAX_JSON_DEPTH) return resource;
  return jsonValue(stringifyExact(resource), what);
}

/**
 * Runs `read` (a step of an XmlReader), its XmlSyntaxError thrown as `opts.malformed`'s FhirError (a 400 by
 * default); an encoding other than UTF-8 declared is a 415, as another charset in the Content-Type is.
 */
export function readXml<T>(read: () => T, opts: XmlSource): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof XmlEncodingError && err.outside !== undefined) {
      throw new FhirError('unsupported-media', `${opts.what ?? 'The request body'} declares encoding '${err.encoding}' but holds ${err.outside} (line ${err.at}), which is not US-ASCII: send FHIR XML in UTF-8`, { cause: err });
    }
    if (err instanceof XmlEncodingError) {
      throw new FhirError('unsupported-media', `${opts.what ?? 'The request body'} declares encoding '${err.encoding}' (line ${err.at}): FHIR XML is read in UTF-8 only (R4 http.html: UTF-8 SHALL be used)`, { cause: err });
    }
    if (!(err instanceof XmlSyntaxError)) throw err;
    throw opts.malformed ? opts.malformed(err) : new FhirError('structure', `Request body is not well-formed FHIR XML: ${err.message}`, { cause: err });
  }
}

/** JSON text read from XML as the same resource sent as JSON would be (numbers' literals, depth). */
export function jsonValue(text: string, what: string): unknown {
  return parseBounded(text, what, (err) => new FhirError('structure', `${what} is not valid JSON: ${err.message}`, { cause: err }));
}

/** A resource element (`<Patient>`): its type from its name, its content by that type's definition. */
export function readResource(el: XmlElement, text: Slice, at: Path): Obj {
  const where = at === '' ? el.local : at;
  if (el.ns !== FHIR_NS) refuse(`Element '${el.qname}' is not in the FHIR namespace (${FHIR_NS}${el.ns ? `; it is in '${el.ns}'` : ''})`, where);
  if (!isResourceType(el.local)) refuse(`'${el.local}' is not an R4 resource type`, where);
  const out: Obj = { resourceType: el.local };
  readContent(out, el, el.local, text, where);
  return out;
}

/** Reads an element's attributes and children into `out` by the definition of `type`. */
function readContent(out: Obj, el: XmlElement, type: string, text: Slice, path: Path): void {
  const m = xmlTypeModel(type);
  if (m === null) refuse(`No R4 definition of type '${type}'`, path);
  const named = m!.named;
  for (const a of el.attributes) {
    if (a.ns === XSI_NS) continue;
    const found = a.ns === '' ? named.get(a.local) : undefined;
    if (found === undefined || !found.attribute) refuse(`Attribute '${a.qname}' is not allowed on ${path}`, path);
    out[a.local] = a.value;
  }
  let last = -1;
  let lastName = '';
  // Whether an item of a repeating primitive has no value (its array may then be all nulls: dropped below).
  let inStep = false;
  // Whether a number here or below keeps its literal.
  let literals = false;
  for (const child of el.children) {
    if (child.kind === 'text') {
      if (child.cdata || !isXmlSpace(child.text)) refuse(`Text is not allowed in ${path}: FHIR XML puts values in 'value' attributes`, path);
      continue;
    }
    const name = child.local;
    if (child.ns !== FHIR_NS && !(name === 'div' && child.ns === XHTML_NS)) {
      refuse(`Element '${child.qname}' in ${path} is not in the FHIR namespace (${FHIR_NS}${child.ns ? `; it is in '${child.ns}'` : ''})`, new Loc(path, name, -1));
    }
    const found = named.get(name);
    if (found === undefined || found.attribute) refuse(`Unknown element '${name}' in ${path} (an element of ${type})`, new Loc(path, name, -1));
    const slot = found!.slot;
    if ((slot.type === 'xhtml') !== (child.ns === XHTML_NS)) refuse(`Element '${name}' in ${path} is in the wrong namespace`, new Loc(path, name, -1));
    const element = slot.element;
    const place = found!.place;
    if (place < last) refuse(`Element '${name}' in ${path} is out of order: R4 defines it before '${lastName}'`, new Loc(path, name, -1));
    if (place === last && (element.max <= 1 || name !== lastName)) refuse(`Element '${element.name}' in ${path} appears more than once (it takes at most one)`, new Loc(path, name, -1));
    last = place;
    lastName = name;
    const repeating = element.max > 1;
    // A repeating element's items so far: its index (primitives' two arrays are in step).
    const items = repeating ? ((out[name] ??= []) as unknown[]) : undefined;
    const index = items === undefined ? -1 : items.length;
    if (slot.type === 'xhtml') {
      out[name] = narrative(child, text, new Loc(path, name, index));
    } else if (slot.primitive) {
      const [value, ext, literal] = readPrimitive(child, slot.type, text, path, name, index);
      if (items !== undefined) {
        // Two arrays in step, null where an item has no value or no extensions (json.html): `_name` made at
        // the first item with extensions (its nulls before it filled in), `name` dropped below if all null.
        items.push(value);
        if (value === null) inStep = true;
        let exts = out[found!.underscored] as unknown[] | undefined;
        if (ext !== null && exts === undefined) out[found!.underscored] = exts = new Array<unknown>(items.length - 1).fill(null);
        exts?.push(ext);
        if (literal !== undefined) {
          recordLiteral(items, items.length - 1, literal);
          literals = true;
        }
        if (held) {
          recordLiteral(exts!);
          literals = true;
        }
      } else {
        if (value !== null) out[name] = value;
        if (literal !== undefined) {
          recordLiteral(out, name, literal);
          literals = true;
        }
        if (ext !== null) out[found!.underscored] = ext;
        if (held) literals = true;
      }
    } else {
      const itemPath = new Loc(path, name, index);
      const value = slot.type === 'Resource' ? resourceIn(child, text, itemPath) : complex(child, slot.type, text, itemPath);
      if (items !== undefined) items.push(value);
      else out[name] = value;
      if (held) {
        if (items !== undefined) recordLiteral(items);
        literals = true;
      }
    }
  }
  // Numbers written otherwise than String writes them are recorded as a JSON body's are (exact-json.ts), the holders above marked.
  if (literals) recordLiteral(out);
  held = literals;
  if (!inStep) return;
  for (const key of Object.keys(out)) {
    const v = out[key];
    if (Array.isArray(v) && v.every((item) => item === null)) delete out[key];
  }
}

/** An element of a complex `type` (`Bundle.entry` too): its content by that type's definition. */
export function complex(el: XmlElement, type: string, text: Slice, path: Path): Obj {
  const out: Obj = {};
  readContent(out, el, type, text, path);
  return out;
}

/** An element holding a resource (`contained`, `Bundle.entry.resource`, `Parameters.parameter.resource`): one child named by its type. */
function resourceIn(el: XmlElement, text: Slice, path: Path): Obj {
  let found: XmlElement | undefined;
  for (const a of el.attributes) if (a.ns !== XSI_NS) refuse(`Attribute '${a.qname}' is not allowed on ${path}`, path);
  for (const child of el.children) {
    if (child.kind === 'text') {
      if (child.cdata || !isXmlSpace(child.text)) refuse(`Text is not allowed in ${path}`, path);
    } else if (found !== undefined) refuse(`${path} holds more than one resource`, path);
    else found = child;
  }
  if (found === undefined) refuse(`${path} holds no resource`, path);
  return readResource(found!, text, path);
}

/**
 * A primitive (the element `name` of `parent`, item `index` of a repeating one, else -1): its `value`
 * attribute as the JSON value of `type`, its `id` and extensions (the `_name` object) or null, and the
 * literal of a number that String would not write back (`98.60`). Its path is made only for an error or
 * its extensions (most primitives have neither).
 */
function readPrimitive(el: XmlElement, type: string, text: Slice, parent: Path, name: string, index: number): [unknown, Obj | null, string | undefined] {
  let value: unknown = null;
  let ext: Obj | null = null;
  let literal: string | undefined;
  for (const a of el.attributes) {
    if (a.ns === XSI_NS) continue;
    if (a.ns === '' && a.local === 'value') {
      value = primitiveValue(a, type);
      if (value === INVALID) badValue(a, type, new Loc(parent, name, index));
      literal = typeof value === 'number' && String(value) !== a.value ? a.value : undefined;
    } else if (a.ns === '' && a.local === 'id') (ext ??= {}).id = a.value;
    else refuse(`Attribute '${a.qname}' is not allowed on ${new Loc(parent, name, index)}`, new Loc(parent, name, index));
  }
  if (el.children.length === 0) {
    held = false;
    if (value === null && ext === null) refuse(`${new Loc(parent, name, index)} has neither a value nor extensions`, new Loc(parent, name, index));
    return [value, ext, literal];
  }
  const path = new Loc(parent, name, index);
  let extensions: Obj[] | undefined;
  let extHeld = false;
  for (const child of el.children) {
    if (child.kind === 'text') {
      if (child.cdata || !isXmlSpace(child.text)) refuse(`Text is not allowed in ${path}: a primitive's value goes in its 'value' attribute`, path);
      continue;
    }
    const at = new Loc(path, 'extension', extensions?.length ?? 0);
    if (child.ns !== FHIR_NS || child.local !== 'extension') refuse(`Element '${child.qname}' is not allowed in ${path}: a primitive holds only extensions`, `${path}.${child.local}`);
    (extensions ??= []).push(complex(child, 'Extension', text, at));
    if (held) extHeld = true;
  }
  if (extensions !== undefined) {
    (ext ??= {}).extension = extensions;
    if (extHeld) {
      recordLiteral(extensions);
      recordLiteral(ext);
    }
  }
  held = extHeld;
  if (value === null && ext === null) refuse(`${path} has neither a value nor extensions`, path);
  return [value, ext, literal];
}

/** What primitiveValue answers for a value its type cannot have. */
const INVALID = Symbol('invalid');

/** A `value` attribute as JSON: a boolean, a number (its literal kept by readPrimitive when String would not write it back), or a string; INVALID when not of `type`. */
function primitiveValue(a: XmlAttribute, type: string): unknown {
  if (type === 'boolean') return a.value === 'true' ? true : a.value === 'false' ? false : INVALID;
  if (NUMBER_TYPES.has(type)) return (type === 'decimal' ? DECIMAL : INTEGER).test(a.value) ? Number(a.value) : INVALID;
  return a.value;
}

/** The 400 for a `value` attribute that is not of its primitive `type`. */
function badValue(a: XmlAttribute, type: string, path: Path): never {
  if (type === 'boolean') refuse(`'${a.value}' at ${path} is not a boolean (true or false)`, path);
  return refuse(`'${a.value}' at ${path} is not ${type === 'decimal' ? 'a decimal' : `an ${type}`}`, path);
}

/**
 * The narrative's `div` exactly as written (R4 narrative.html), which must declare the XHTML namespace
 * itself: `<div xmlns=...>`, or by a prefix (`<h:div xmlns:h=...>`, whose declaration the narrative's
 * validation checks, as it does for the same div in JSON).
 */
function narrative(el: XmlElement, text: Slice, path: Path): string {
  if (el.local !== 'div' || (el.qname === 'div' && el.declaresDefault !== XHTML_NS)) {
    refuse(`The narrative at ${path} must be written <div xmlns="${XHTML_NS}">`, path);
  }
  const div = text(el.start, el.end);
  // A carriage return survives XML only as a reference (XML 1.0 2.11): the JSON form holds the character itself.
  return div.includes('&#') ? div.replace(/&#(13|x[dD]);/g, '\r') : div;
}

