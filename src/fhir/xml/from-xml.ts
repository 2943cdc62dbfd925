import { FhirError } from '../../errors.ts';
import { MAX_JSON_DEPTH } from '../../terminology/model/depth.ts';
import { parseBounded } from '../resource.ts';
import { isResourceType } from '../resource-types.ts';
import { FHIR_NS, isAttributeElement, NUMBER_TYPES, XHTML_NS, xmlTypeModel } from './xml-model.ts';
import { createXmlReader, XmlEncodingError, XmlSyntaxError, type XmlAttribute, type XmlElement } from './xml-parse.ts';

/** XML Schema instance attributes (`xsi:schemaLocation`) carry nothing of the content: ignored. */
const XSI_NS = 'http://www.w3.org/2001/XMLSchema-instance';
const rawJSON = (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON;
const INTEGER = /^-?(0|[1-9][0-9]*)$/;
const DECIMAL = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

type Obj = Record<string, unknown>;
/** The document's text between two offsets (an XmlReader's `slice`): where a narrative is copied from. */
export type Slice = (start: number, end: number) => string;

function refuse(message: string, path: string): never {
  throw new FhirError('structure', message, { expression: [path] });
}

/** Where an XML text comes from, for the words of its errors (a request body by default; `cinder import` names a file's resource). */
export interface XmlSource {
  /** What nests too deeply (`The request body`). */
  what?: string;
  /** The error for text that is not well-formed XML. */
  malformed?: (err: XmlSyntaxError) => FhirError;
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
  return jsonValue(JSON.stringify(resource), what);
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
export function readResource(el: XmlElement, text: Slice, at: string): Obj {
  const where = at === '' ? el.local : at;
  if (el.ns !== FHIR_NS) refuse(`Element '${el.qname}' is not in the FHIR namespace (${FHIR_NS}${el.ns ? `; it is in '${el.ns}'` : ''})`, where);
  if (!isResourceType(el.local)) refuse(`'${el.local}' is not an R4 resource type`, where);
  const out: Obj = { resourceType: el.local };
  readContent(out, el, el.local, text, at === '' ? el.local : at);
  return out;
}

/** Reads an element's attributes and children into `out` by the definition of `type`. */
function readContent(out: Obj, el: XmlElement, type: string, text: Slice, path: string): void {
  const m = xmlTypeModel(type);
  if (m === null) refuse(`No R4 definition of type '${type}'`, path);
  for (const a of el.attributes) {
    if (a.ns === XSI_NS) continue;
    const slot = a.ns === '' ? m!.model.slots.get(a.local) : undefined;
    if (slot === undefined || !isAttributeElement(m!, slot.element, type)) refuse(`Attribute '${a.qname}' is not allowed on ${path}`, path);
    out[a.local] = a.value;
  }
  let last = -1;
  let lastName = '';
  const counts = new Map<string, number>();
  for (const child of el.children) {
    if (child.kind === 'text') {
      if (child.cdata || child.text.trim() !== '') refuse(`Text is not allowed in ${path}: FHIR XML puts values in 'value' attributes`, path);
      continue;
    }
    const name = child.local;
    const childPath = `${path}.${name}`;
    if (child.ns !== FHIR_NS && !(name === 'div' && child.ns === XHTML_NS)) {
      refuse(`Element '${child.qname}' in ${path} is not in the FHIR namespace (${FHIR_NS}${child.ns ? `; it is in '${child.ns}'` : ''})`, childPath);
    }
    const slot = m!.model.slots.get(name);
    if (slot === undefined || isAttributeElement(m!, slot.element, type)) refuse(`Unknown element '${name}' in ${path} (an element of ${type})`, childPath);
    if ((slot!.type === 'xhtml') !== (child.ns === XHTML_NS)) refuse(`Element '${name}' in ${path} is in the wrong namespace`, childPath);
    const element = slot!.element;
    const place = m!.order.get(element)!;
    if (place < last) refuse(`Element '${name}' in ${path} is out of order: R4 defines it before '${lastName}'`, childPath);
    if (place === last && (element.max <= 1 || name !== lastName)) refuse(`Element '${element.name}' in ${path} appears more than once (it takes at most one)`, childPath);
    last = place;
    lastName = name;
    const index = counts.get(name) ?? 0;
    counts.set(name, index + 1);
    const repeating = element.max > 1;
    const itemPath = repeating ? `${childPath}[${index}]` : childPath;
    if (slot!.type === 'xhtml') {
      out[name] = narrative(child, text, itemPath);
    } else if (slot!.primitive) {
      const [value, ext] = readPrimitive(child, slot!.type, text, itemPath);
      if (repeating) {
        // Two arrays in step, null where an item has no value or no extensions (json.html); emptied ones dropped below.
        ((out[name] ??= []) as unknown[]).push(value);
        ((out[`_${name}`] ??= []) as unknown[]).push(ext);
      } else {
        if (value !== null) out[name] = value;
        if (ext !== null) out[`_${name}`] = ext;
      }
    } else {
      const value = slot!.type === 'Resource' ? resourceIn(child, text, itemPath) : complex(child, slot!.type, text, itemPath);
      if (repeating) ((out[name] ??= []) as unknown[]).push(value);
      else out[name] = value;
    }
  }
  for (const key of Object.keys(out)) {
    const v = out[key];
    if (Array.isArray(v) && v.every((item) => item === null)) delete out[key];
  }
}

/** An element of a complex `type` (`Bundle.entry` too): its content by that type's definition. */
export function complex(el: XmlElement, type: string, text: Slice, path: string): Obj {
  const out: Obj = {};
  readContent(out, el, type, text, path);
  return out;
}

/** An element holding a resource (`contained`, `Bundle.entry.resource`, `Parameters.parameter.resource`): one child named by its type. */
function resourceIn(el: XmlElement, text: Slice, path: string): Obj {
  let found: XmlElement | undefined;
  for (const a of el.attributes) if (a.ns !== XSI_NS) refuse(`Attribute '${a.qname}' is not allowed on ${path}`, path);
  for (const child of el.children) {
    if (child.kind === 'text') {
      if (child.cdata || child.text.trim() !== '') refuse(`Text is not allowed in ${path}`, path);
    } else if (found !== undefined) refuse(`${path} holds more than one resource`, path);
    else found = child;
  }
  if (found === undefined) refuse(`${path} holds no resource`, path);
  return readResource(found!, text, path);
}

/** A primitive: its `value` attribute as the JSON value of `type`, and its `id` and extensions (the `_name` object), or null. */
function readPrimitive(el: XmlElement, type: string, text: Slice, path: string): [unknown, Obj | null] {
  let value: unknown = null;
  const ext: Obj = {};
  for (const a of el.attributes) {
    if (a.ns === XSI_NS) continue;
    if (a.ns === '' && a.local === 'value') value = primitiveValue(a, type, path);
    else if (a.ns === '' && a.local === 'id') ext.id = a.value;
    else refuse(`Attribute '${a.qname}' is not allowed on ${path}`, path);
  }
  const extensions: Obj[] = [];
  for (const child of el.children) {
    if (child.kind === 'text') {
      if (child.cdata || child.text.trim() !== '') refuse(`Text is not allowed in ${path}: a primitive's value goes in its 'value' attribute`, path);
      continue;
    }
    const at = `${path}.extension[${extensions.length}]`;
    if (child.ns !== FHIR_NS || child.local !== 'extension') refuse(`Element '${child.qname}' is not allowed in ${path}: a primitive holds only extensions`, `${path}.${child.local}`);
    extensions.push(complex(child, 'Extension', text, at));
  }
  if (extensions.length > 0) ext.extension = extensions;
  const hasExt = Object.keys(ext).length > 0;
  if (value === null && !hasExt) refuse(`${path} has neither a value nor extensions`, path);
  return [value, hasExt ? ext : null];
}

/** A `value` attribute as JSON: a boolean, a number (as written: its precision kept), or a string. */
function primitiveValue(a: XmlAttribute, type: string, path: string): unknown {
  if (type === 'boolean') {
    if (a.value === 'true') return true;
    if (a.value === 'false') return false;
    return refuse(`'${a.value}' at ${path} is not a boolean (true or false)`, path);
  }
  if (NUMBER_TYPES.has(type)) {
    if (!(type === 'decimal' ? DECIMAL : INTEGER).test(a.value)) refuse(`'${a.value}' at ${path} is not ${type === 'decimal' ? 'a decimal' : `an ${type}`}`, path);
    return rawJSON(a.value);
  }
  return a.value;
}

/**
 * The narrative's `div` exactly as written (R4 narrative.html), which must declare the XHTML namespace
 * itself: `<div xmlns=...>`, or by a prefix (`<h:div xmlns:h=...>`, whose declaration the narrative's
 * validation checks, as it does for the same div in JSON).
 */
function narrative(el: XmlElement, text: Slice, path: string): string {
  if (el.local !== 'div' || (el.qname === 'div' && el.declaresDefault !== XHTML_NS)) {
    refuse(`The narrative at ${path} must be written <div xmlns="${XHTML_NS}">`, path);
  }
  const div = text(el.start, el.end);
  // A carriage return survives XML only as a reference (XML 1.0 2.11): the JSON form holds the character itself.
  return div.includes('&#') ? div.replace(/&#(13|x[dD]);/g, '\r') : div;
}

