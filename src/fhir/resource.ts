import { FhirError } from '../errors.ts';
import { MAX_JSON_DEPTH } from '../terminology/model/depth.ts';
import { carryLiterals, type JsonScan, memberPath, parseExact, scanJson, stringifyExact, stringifyExactSwapping } from './exact-json.ts';
import { hasEndpoint, ID_PATTERN, isResourceType } from './resource-types.ts';

export type Resource = Record<string, unknown> & { resourceType: string; id?: string; meta?: Record<string, unknown> };

/** The 400 for a body nested deeper than MAX_JSON_DEPTH, as the terminology operations word it (checkDepth). */
export function tooDeep(what: string): FhirError {
  return new FhirError('invalid', `${what} nests deeper than ${MAX_JSON_DEPTH} levels`);
}

/**
 * Parses JSON text with its numbers as written (`98.60`: exact-json.ts). Malformed text throws
 * `malformed(error)`; text whose objects and arrays nest deeper than MAX_JSON_DEPTH is a 400 naming it
 * `what` (`The request body`). R4 resources nest a few dozen levels (a CodeSystem's concept hierarchy
 * more); every walk over a resource (validation, indexing, FHIRPath, patch) recurses once per level, and
 * the bound keeps a hostile body far from the end of the stack. One scan of the text (scanJson) finds
 * both its depth and whether its numbers need recording (`scan`: that of the text with its names, when the
 * caller has it).
 */
export function parseBounded(text: string, what: string, malformed: (err: Error) => FhirError, scan: JsonScan = scanJson(text, true)): unknown {
  const deep = scan.depth > MAX_JSON_DEPTH;
  let value: unknown;
  try {
    // Too deep for the reviver's recursion: parsed only to tell malformed text first.
    value = deep ? JSON.parse(text) : parseExact(text, scan);
  } catch (err) {
    throw malformed(err as Error);
  }
  if (deep) throw tooDeep(what);
  if (scan.duplicate >= 0) throw repeatedName(what, text, scan.duplicate, value);
  return value;
}

/** The 400 for an object giving a member name twice, at the FHIRPath-like path of its second (`Patient.name[0].family`). */
function repeatedName(what: string, text: string, at: number, value: unknown): FhirError {
  const { path, name } = memberPath(text, at);
  return repeatedNameAt(what, path, name, value);
}

/** repeatedName with the second name's path (memberPath's, below the root) and name already found. */
export function repeatedNameAt(what: string, path: string, name: string, value: unknown): FhirError {
  const type = (value as { resourceType?: unknown } | null)?.resourceType;
  const expression = typeof type === 'string' && /^[A-Z][A-Za-z]*$/.test(type) ? `${type}.${path}` : path;
  return new FhirError('structure', `${what} gives the member '${name}' twice in one object, at ${expression}: JSON property names SHALL be unique (FHIR R4 json.html)`, { expression: [expression] });
}

/** Parses a request body as JSON (parseBounded), or throws a 400 OperationOutcome saying where it is malformed. */
export function parseJson(text: string, scan?: JsonScan): unknown {
  return parseBounded(text, 'The request body', malformedBody, scan);
}

/** The 400 for a request body that JSON.parse refuses, with its message. */
export function malformedBody(err: Error): FhirError {
  return new FhirError('structure', `Request body is not valid JSON: ${err.message}`, { cause: err });
}

/**
 * A create's body without its `id`: on create "if an id is provided, the server SHALL ignore it" (FHIR
 * R4 http 3.1.0.7), so an id that is not even a valid id is no error either. An `id` that is not a
 * string is not an id but malformed content (asResource's 400); anything else is returned as is.
 */
export function withoutId(body: unknown): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || typeof (body as Record<string, unknown>).id !== 'string') return body;
  const { id: _, ...rest } = body as Record<string, unknown>;
  return carryLiterals(body, rest);
}

/** Checks that `body` is a resource of a known R4 type (and of `expectedType` when given). */
export function asResource(body: unknown, expectedType?: string): Resource {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new FhirError('structure', 'Request body must be a JSON object holding a FHIR resource');
  }
  const r = body as Record<string, unknown>;
  if (typeof r.resourceType !== 'string') {
    throw new FhirError('required', 'Resource has no resourceType', { expression: ['resourceType'] });
  }
  if (!isResourceType(r.resourceType)) {
    throw new FhirError('not-supported', `Unknown resource type '${r.resourceType}'`, { expression: ['resourceType'] });
  }
  if (expectedType && r.resourceType !== expectedType) {
    throw new FhirError('invalid', `Resource type '${r.resourceType}' does not match the URL's type '${expectedType}'`, {
      expression: ['resourceType'],
    });
  }
  if (r.id !== undefined && (typeof r.id !== 'string' || !ID_PATTERN.test(r.id))) {
    throw new FhirError('value', `Invalid resource id ${JSON.stringify(r.id)}: expected 1-64 of [A-Za-z0-9.-]`, { expression: ['id'] });
  }
  if (r.meta !== undefined && (r.meta === null || typeof r.meta !== 'object' || Array.isArray(r.meta))) {
    throw new FhirError('structure', 'meta must be an object', { expression: ['meta'] });
  }
  return r as Resource;
}

/** Checks a type and id taken from a URL: a type with a RESTful endpoint (checkRestType), a valid id. */
export function checkTypeAndId(type: string, id?: string): void {
  checkRestType(type);
  if (id !== undefined && !ID_PATTERN.test(id)) throw new FhirError('invalid', `Invalid resource id '${id}'`, { expression: ['id'] });
}

/**
 * Checks that a type taken from a URL (or a Bundle entry's `request.url`) is served RESTfully: an
 * unknown type, and Parameters, which R4 gives no RESTful endpoint, are 404 as in HAPI FHIR, which
 * answers a type it serves no provider for with 404 (Parameters: code `not-supported`).
 */
export function checkRestType(type: string): void {
  if (!isResourceType(type)) throw new FhirError('not-found', `Unknown resource type '${type}'`);
  if (!hasEndpoint(type)) throw noEndpoint(type);
}

/**
 * The refusal of a resource type R4 gives no RESTful endpoint (Parameters), in a URL, a Bundle entry
 * (`at`: the entry, named in the text too, and the element) or an import.
 */
export function noEndpoint(type: string, at?: { entry?: string; expression: string }): FhirError {
  const text = `${type} has no RESTful endpoint: it is a non-persisted resource used to pass information into and back from an operation (FHIR R4 parameters.html), so it cannot be created, read, updated, deleted or searched`;
  return new FhirError('not-found', at?.entry ? `${at.entry}: ${text}` : text, { issueCode: 'not-supported', ...(at ? { expression: [at.expression] } : {}) });
}

/** Throws unless `resource` is of a type Cinder stores: `cinder import` refuses a Parameters as the API does. */
export function requireStorable(resource: Resource): Resource {
  if (!hasEndpoint(resource.resourceType)) throw noEndpoint(resource.resourceType, { expression: 'resourceType' });
  return resource;
}

/**
 * The start of a version's stored text: `resourceType`, `id` and `meta` up to and including the
 * `lastUpdated` value. Types and ids are JSON-safe by their patterns, so no escaping is needed.
 */
export function stampHead(type: string, id: string, versionId: number, lastUpdated: number): string {
  return `{"resourceType":"${type}","id":"${id}","meta":{"versionId":"${versionId}","lastUpdated":"${new Date(lastUpdated).toISOString()}"`;
}

/**
 * The rest of a version's stored text after stampHead: the other `meta` elements, then the other
 * elements in their given order, numbers as they were written (stringifyExact). It does not depend on
 * the version, so it can be made before the version number is known (bulk import prepares it on
 * another thread).
 */
export function stampTail(resource: Resource): string {
  const { resourceType: _t, id: _id, meta, ...rest } = resource;
  let tail = '}';
  if (meta !== undefined) {
    const { versionId: _v, lastUpdated: _l, ...metaRest } = meta;
    carryLiterals(meta, metaRest);
    // `{"a":1}` -> `,"a":1}`: the members continue the object stampHead opened.
    for (const _ in metaRest) {
      tail = ',' + stringifyExact(metaRest).slice(1);
      break;
    }
  }
  // The rest patterns are new objects: their numbers' literals are the resource's and meta's (exact-json.ts).
  carryLiterals(resource, rest);
  for (const _ in rest) return tail + ',' + membersText(rest);
  return tail + '}';
}

/** Characters from which a string element, at any depth, is put into the stored text as it is, not serialised (membersText). */
export const SPLICED_CHARS = 1024 * 1024;

/** How JSON writes the end of a marker (membersText) and its closing quote. */
const MARKER_END = JSON.stringify('\u0000').slice(1);

/** A character JSON.stringify writes otherwise than as itself: a quote, a backslash, a control character, a surrogate (alone or not). */
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * stringifyExact of `members` without its opening brace, with each string of SPLICED_CHARS or more that JSON writes as
 * itself, at any depth (a Binary's `data`, a DocumentReference's `content[].attachment.data`: base64), put into the
 * text as it is rather than copied by the serialiser: the serialiser writes a marker of its own for each (its
 * replacer, which runs only for a resource holding such a string: holdsSpliced), and the text is joined around them.
 * The result is the same text (the join is a rope, flattened once, where the store binds it), and a write of 50 MiB of
 * content holds one copy fewer of its 67 Mi characters.
 */
function membersText(members: Record<string, unknown>): string {
  if (!holdsSpliced(members)) return stringifyExact(members).slice(1);
  // Markers holding a character JSON escapes and a random part, numbered: text of the resource's own holds one's JSON
  // form only by holding it whole, which the numbering below tells (then the resource is serialised as it is).
  const tag = `\u0000spliced-${crypto.randomUUID()}-`;
  const large: string[] = [];
  const text = stringifyExactSwapping(members, (s) => (s.length < SPLICED_CHARS || ESCAPED.test(s) ? undefined : `${tag}${large.push(s) - 1}\u0000`));
  if (large.length === 0) return text.slice(1);
  // Each marker once, in the order the serialiser wrote them: `"` and the tag as JSON writes it, the number, `\u0000"`.
  const pieces = text.split(JSON.stringify(tag).slice(0, -1));
  if (pieces.length !== large.length + 1) return stringifyExact(members).slice(1);
  // The pieces are sliced, never the joined text (a slice of a rope would flatten it).
  let out = pieces[0]!.slice(1);
  for (let i = 0; i < large.length; i++) {
    const end = `${i}${MARKER_END}`;
    if (!pieces[i + 1]!.startsWith(end)) return stringifyExact(members).slice(1);
    out = out + '"' + large[i]! + '"' + pieces[i + 1]!.slice(end.length);
  }
  return out;
}

/** How many objects and arrays holdsSpliced reads, at most, below the top level. */
const SPLICE_WALK = 1024;

/**
 * Whether `members` holds a string of SPLICED_CHARS or more: at the top level (a Binary's `data`), or below it within
 * the first SPLICE_WALK objects and arrays, which a resource carrying a large attachment (a DocumentReference, Media,
 * a DiagnosticReport's `presentedForm`) never reaches. A walk of every value of every resource written cost 20-30 ms
 * on a CodeSystem of 100,000 concepts (docs/PERFORMANCE.md, fifty-fourth session); past the bound, a nested large string
 * is serialised as any other (the text is the same, with one copy more).
 */
function holdsSpliced(members: Record<string, unknown>): boolean {
  let steps = 0;
  // true: found; false: none there, or the walk ran out of steps (then only top-level strings are looked at).
  const walk = (v: object): boolean => {
    if (++steps > SPLICE_WALK) return false;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) if (spliced(v[i])) return true;
    } else {
      for (const k in v) if (spliced((v as Record<string, unknown>)[k])) return true;
    }
    return false;
  };
  const spliced = (x: unknown): boolean =>
    typeof x === 'string' ? x.length >= SPLICED_CHARS : x !== null && typeof x === 'object' && steps < SPLICE_WALK && walk(x);
  for (const k in members) if (spliced(members[k])) return true;
  return false;
}

/**
 * The stored JSON text of a version: `resourceType`, `id`, `meta` (with `versionId` and `lastUpdated`)
 * first, then the other elements in their given order.
 */
export function stamp(resource: Resource, id: string, versionId: number, lastUpdated: number): string {
  return stampHead(resource.resourceType, id, versionId, lastUpdated) + stampTail(resource);
}

/**
 * A server-assigned id: a UUID v7 (RFC 9562 5.7), a valid FHIR id whose leading bits are the creation
 * time, so ids created together sort together and land on neighbouring index pages.
 */
export function newId(): string {
  return Bun.randomUUIDv7();
}
