import { FhirError, type FhirIssue } from '../errors.ts';
import { hasCriteria, parseCondition } from './conditional.ts';
import { entryPatch, underEntry, type PatchDocument } from './patch.ts';
import { asResource, noEndpoint, withoutId, type Resource } from './resource.ts';
import { strictQuery } from './query-encoding.ts';
import { hasEndpoint, ID_PATTERN, isResourceType } from './resource-types.ts';
import { checkCompartmentPath, type Compartment } from './compartments.ts';
import { instanceShape } from './subset.ts';
import { metadataMode } from './terminology-capabilities.ts';
import { pacedTurns } from './turns.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';

/** One validated Bundle.entry of a transaction or batch. */
export interface Entry {
  index: number;
  method: Method;
  /** The resource type; for a GET, `''` at the system level (a search across types, system history) and `*` for `Patient/{id}/*`. */
  type: string;
  /** Target id for PUT/PATCH/DELETE/GET by id. */
  id?: string;
  /** GET `Type/id/_history/vid`: the version a vread reads. */
  version?: string;
  /** GET `Type/id/_history` or `Type/_history`: instance or type history. */
  history?: boolean;
  /** Conditional query (`Type?a=b`) or `ifNoneExist`. */
  condition?: URLSearchParams;
  /** GET search or read query string. */
  query?: URLSearchParams;
  /** GET `{Compartment}/{id}/{type}` or `{Compartment}/{id}/*`: a compartment search (src/fhir/compartments.ts). */
  compartment?: Compartment;
  fullUrl?: string;
  resource?: Resource;
  /** PATCH: the patch its resource holds (a Parameters, or a Binary holding a JSON Patch). */
  patch?: PatchDocument;
  ifMatch?: string;
  /**
   * `request.ifNoneMatch`: on a GET read or vread, ETags (FHIR R4 http 3.1.0.11: the entry answers 304
   * when one is current); on a PUT, PATCH or DELETE, `*` or ETags it must not write over (RFC 9110 13.1.2, as the header).
   */
  ifNoneMatch?: string;
  /** GET read or vread: `request.ifModifiedSince` (an instant) as epoch milliseconds. */
  ifModifiedSince?: number;
  /** `HEAD` (an R4 http-verb): read as a GET, answered without the resource. */
  head?: true;
  /**
   * An operation (`$name`, `Type/$name`, `Type/id/$name`, GET or POST): its `request.url` relative to the
   * FHIR base, query included; its `resource` the POSTed input (a Parameters, or the resource some take).
   */
  operation?: string;
  /**
   * GET (or HEAD) `metadata`: its `request.url` relative to the FHIR base, query included (`mode`,
   * `_summary`, `_elements`), answered as `GET [base]/metadata` is (http.html: any interaction may be an entry).
   */
  capabilities?: string;
}

/** Where an entry is in its Bundle: `Bundle.entry[n]`. */
export const entryPath = (entry: { index: number }) => `Bundle.entry[${entry.index}]`;

/**
 * `err` located in the Bundle: each issue naming no element gets `expression`. Expressions outside the
 * Bundle are placed: with `resource` (the path of the entry's resource), an element of the resource
 * (`id`, or `Subscription.criteria`, which names its type) under it; else they are a search parameter's name or a header's, and become `element` (the
 * request element that holds them: `Bundle.entry[1].request.url`). Texts are prefixed with the entry
 * (`Bundle.entry[1]: `) where they do not name it already.
 */
export function located(err: FhirError, expression: string, resource?: string, element = expression): FhirError {
  const place = (e: string) => (e.startsWith('Bundle.') ? e : resource === undefined ? element : under(resource, e));
  const entry = /^Bundle\.entry\[\d+\]/.exec(expression)?.[0];
  const prefix = (text: string | undefined) => (text === undefined || entry === undefined || text.startsWith(`${entry}`) ? text : `${entry}: ${text}`);
  const settled = (i: FhirIssue) => i.expression?.length && i.expression.every((e) => place(e) === e) && prefix(i.diagnostics) === i.diagnostics;
  if (err.issues.every(settled)) return err;
  const outcome = err.issues.map((i) => {
    const diagnostics = prefix(i.diagnostics);
    const text = prefix(i.details?.text);
    return {
      ...i,
      expression: i.expression?.length ? [...new Set(i.expression.map(place))] : [expression],
      ...(diagnostics === undefined ? {} : { diagnostics }),
      ...(text === undefined ? {} : { details: { ...i.details, text } }),
    };
  });
  return new FhirError(err.category, prefix(err.message)!, { outcome, headers: err.headers, cause: err });
}

/** `e`, an element of a resource (`criteria`) or a path from its type (`Subscription.criteria`), under `resource`'s path. */
function under(resource: string, e: string): string {
  const rest = e.replace(/^[A-Z][A-Za-z]*(\.|$)/, '');
  return rest === '' ? resource : `${resource}.${rest}`;
}

function fail(index: number, message: string, element?: string): never {
  throw new FhirError('invalid', `Bundle.entry[${index}]: ${message}`, { expression: [`Bundle.entry[${index}]${element === undefined ? '' : `.${element}`}`] });
}

interface ParsedUrl {
  type: string;
  id?: string;
  version?: string;
  history?: boolean;
  query?: URLSearchParams;
  compartment?: Compartment;
}

/** A `request.url` relative to the FHIR base `base`: as written, without the base (the base itself, with a query, being `?query`) or a leading `/`. */
function relativeUrl(url: string, base: string): string {
  if (url.startsWith(base + '/')) return url.slice(base.length + 1);
  if (url === base || url.startsWith(base + '?')) return url.slice(base.length);
  return url.startsWith('/') ? url.slice(1) : url;
}

/** `{Compartment}/{id}/{type}` and `{Compartment}/{id}/*`, and what else has three segments but history (a 404, as on the REST API). */
const COMPARTMENT = /^([^/]*)\/([^/]*)\/([^/]*)$/;

/**
 * The GETs of the REST API beyond one type (FHIR R4 search.html, http.html): a search across types (the
 * FHIR base with a query), system history (`_history`), a compartment search (`{Compartment}/{id}/{type}`,
 * `{Compartment}/{id}/*`, of the five R4 compartments); undefined for any other path. Another type is a 404, as on REST.
 */
function beyondType(index: number, url: string, path: string, query: URLSearchParams | undefined): ParsedUrl | undefined {
  const q = query === undefined ? {} : { query };
  if (path === '') return { type: '', ...q };
  if (path === '_history') return { type: '', history: true, ...q };
  const m = COMPARTMENT.exec(path);
  if (!m || m[3] === '_history') return undefined;
  const [, type, id, what] = m as unknown as [string, string, string, string];
  checkCompartmentPath(type, id, what, { entry: `Bundle.entry[${index}]`, expression: `Bundle.entry[${index}].request.url` });
  if (!ID_PATTERN.test(id)) fail(index, `request.url '${url}' has an invalid id`, 'request.url');
  return { type: what, compartment: { type, id }, ...q };
}

/** `Type`, `Type/_history`, `Type/id`, `Type/id/_history`, `Type/id/_history/vid`. */
const PATH = /^([^/]*)(?:\/(_history)|\/([^/]*)(?:\/(_history)(?:\/([^/]*))?)?)?$/;

/** Splits `Type/id`, `Type?query` or `Type` (relative to the FHIR base), and for GET the history paths. */
function parseUrl(index: number, url: string, base: string, method: string): ParsedUrl {
  const rel = relativeUrl(url, base);
  const q = rel.indexOf('?');
  const path = q < 0 ? rel : rel.slice(0, q);
  let query: URLSearchParams | undefined;
  try {
    query = q < 0 ? undefined : strictQuery(rel.slice(q + 1));
  } catch (err) {
    fail(index, (err as Error).message, 'request.url');
  }
  const beyond = method === 'GET' ? beyondType(index, url, path, query) : undefined;
  if (beyond) return beyond;
  const type = path.split('/', 1)[0];
  if (!type || !isResourceType(type)) fail(index, `request.url '${url}' does not name a known resource type`, 'request.url');
  // As on the REST API (checkRestType): a 404 for this entry; a batch's other entries go on.
  if (!hasEndpoint(type)) throw noEndpoint(type, { entry: `Bundle.entry[${index}]`, expression: `Bundle.entry[${index}].request.url` });
  const m = PATH.exec(path);
  const history = m?.[2] !== undefined || m?.[4] !== undefined;
  if (!m || (history && method !== 'GET')) {
    const forms = method === 'GET'
      ? 'Type, Type/id, Type?query, Type/id/_history/vid, Type/id/_history, Type/_history, _history, ?query, Patient/id/Type or Patient/id/*'
      : 'Type, Type/id or Type?query';
    fail(index, `request.url '${url}' is not of the form ${forms}`, 'request.url');
  }
  const [, , , id, , version] = m;
  if (id !== undefined && !ID_PATTERN.test(id)) fail(index, `request.url '${url}' has an invalid id`, 'request.url');
  const out: ParsedUrl = { type };
  if (id !== undefined) out.id = id;
  if (version !== undefined) out.version = version;
  else if (history) out.history = true;
  if (query) out.query = query;
  return out;
}

/**
 * An entry's operation (`$name`, `Type/$name` or `Type/id/$name`, relative to the FHIR base as other
 * request URLs), or undefined when `url` names none. Operations are invoked by GET or POST.
 */
function operationUrl(index: number, url: string, base: string, verb: string): { url: string; type: string } | undefined {
  const rel = relativeUrl(url, base);
  const q = rel.indexOf('?');
  const segments = (q < 0 ? rel : rel.slice(0, q)).split('/');
  if (!segments[segments.length - 1]!.startsWith('$')) return undefined;
  if (verb !== 'GET' && verb !== 'POST') fail(index, `request.url '${url}' names an operation, which is invoked by GET or POST, not ${verb}`, 'request.method');
  const [type, id] = segments.length > 1 ? segments : [''];
  if (segments.length > 3 || (type !== '' && !isResourceType(type!)) || (id !== undefined && segments.length === 3 && !ID_PATTERN.test(id))) {
    fail(index, `request.url '${url}' is not of the form $operation, Type/$operation or Type/id/$operation`, 'request.url');
  }
  return { url: rel, type: type! };
}

/**
 * The `request.url` of a GET of the capabilities (`metadata`, with its query), relative to the FHIR base,
 * or undefined when `url` names something else. Its `mode` is checked here (a 400 for this entry), so
 * that a transaction, which answers it after its writes commit, cannot fail on it then.
 */
function capabilitiesUrl(index: number, url: string, base: string): string | undefined {
  const rel = relativeUrl(url, base);
  const q = rel.indexOf('?');
  if ((q < 0 ? rel : rel.slice(0, q)) !== 'metadata') return undefined;
  try {
    const query = strictQuery(q < 0 ? '' : rel.slice(q + 1));
    metadataMode(query.get('mode') ?? undefined);
    instanceShape(query, false);
  } catch (err) {
    if (!(err instanceof FhirError)) throw err;
    fail(index, err.message, 'request.url');
  }
  return rel;
}

/** The conditional-read elements of a GET entry's request (FHIR R4 Bundle.entry.request). */
function readConditions(index: number, entry: Entry, request: Record<string, unknown>): void {
  if (typeof request.ifNoneMatch === 'string') entry.ifNoneMatch = request.ifNoneMatch;
  if (typeof request.ifModifiedSince === 'string') {
    const at = INSTANT.test(request.ifModifiedSince) ? Date.parse(request.ifModifiedSince) : NaN;
    if (Number.isNaN(at)) fail(index, `request.ifModifiedSince '${request.ifModifiedSince}' is not an instant`, 'request.ifModifiedSince');
    entry.ifModifiedSince = at;
  }
}

/** A FHIR R4 instant: a date and time to the second at least, with its zone. */
const INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function parseEntry(raw: unknown, index: number, base: string): Entry {
  if (raw === null || typeof raw !== 'object') fail(index, 'is not an object');
  const e = raw as Record<string, unknown>;
  const request = e.request as Record<string, unknown> | undefined;
  if (request === undefined) {
    fail(index, 'request is required: each entry of a batch or transaction says what to do, with request.method and request.url (bdl-3)', 'request');
  }
  if (request === null || typeof request !== 'object' || Array.isArray(request)) fail(index, 'request must be an object with method and url', 'request');
  for (const field of ['method', 'url']) {
    if (typeof request[field] !== 'string') fail(index, `request.${field} ${request[field] === undefined ? 'is required' : 'must be a string'}`, `request.${field}`);
  }
  const verb = request.method as Method | 'HEAD';
  if (!['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH'].includes(verb)) fail(index, `request.method '${request.method}' is not supported`, 'request.method');
  const method: Method = verb === 'HEAD' ? 'GET' : verb;
  const capabilities = method === 'GET' ? capabilitiesUrl(index, request.url as string, base) : undefined;
  if (capabilities !== undefined) {
    if (e.resource !== undefined) fail(index, `a ${verb} of metadata carries no resource`, 'resource');
    const entry: Entry = { index, method, type: '', capabilities };
    if (typeof e.fullUrl === 'string') entry.fullUrl = e.fullUrl;
    if (verb === 'HEAD') entry.head = true;
    return entry;
  }
  const operation = operationUrl(index, request.url as string, base, verb);
  if (operation !== undefined) {
    const entry: Entry = { index, method, type: operation.type, operation: operation.url };
    if (typeof e.fullUrl === 'string') entry.fullUrl = e.fullUrl;
    if (e.resource !== undefined) {
      if (method !== 'POST') fail(index, `a ${method} of an operation carries no resource`, 'resource');
      try {
        entry.resource = asResource(e.resource);
      } catch (err) {
        if (!(err instanceof FhirError)) throw err;
        const element = err.issues[0]?.expression?.[0];
        fail(index, err.message, element === undefined ? 'resource' : `resource.${element}`);
      }
    }
    return entry;
  }
  for (const field of ['ifNoneMatch', 'ifModifiedSince', 'ifMatch', 'ifNoneExist']) {
    // A precondition that is not a string would be dropped and the write done unconditionally.
    if (request[field] !== undefined && typeof request[field] !== 'string') fail(index, `request.${field} must be a string`, `request.${field}`);
  }
  const { type, id, version, history, query, compartment } = parseUrl(index, request.url as string, base, method);
  const entry: Entry = { index, method, type };
  if (typeof e.fullUrl === 'string') entry.fullUrl = e.fullUrl;
  // If-Match conditions a change of the resource it names (http.html, "Managing Resource Contention"): an update,
  // patch or delete. A create names none (its id is the server's), so a POST entry ignores it, as a REST POST
  // ignores the header and HAPI FHIR both; it made every such entry a 412, there being no current version.
  if (typeof request.ifMatch === 'string' && method !== 'POST') entry.ifMatch = request.ifMatch;
  // If-None-Match conditions any write of a named resource (RFC 9110 13.1.2): an update, patch or delete; a create's id is new.
  if (method !== 'POST' && method !== 'GET' && typeof request.ifNoneMatch === 'string') entry.ifNoneMatch = request.ifNoneMatch;
  if (method === 'GET') {
    if (id !== undefined) entry.id = id;
    if (version !== undefined) entry.version = version;
    if (history) entry.history = true;
    if (compartment !== undefined) entry.compartment = compartment;
    entry.query = query ?? new URLSearchParams();
    readConditions(index, entry, request);
    if (verb === 'HEAD') entry.head = true;
    return entry;
  }
  if (method === 'POST' || method === 'PUT') {
    try {
      entry.resource = asResource(method === 'POST' ? withoutId(e.resource) : e.resource, type);
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      const element = err.issues[0]?.expression?.[0];
      fail(index, err.message, element === undefined ? 'resource' : `resource.${element}`);
    }
  }
  if (method === 'PATCH') {
    if (e.resource === undefined) fail(index, 'a PATCH needs a resource: a Parameters (FHIRPath Patch) or a Binary holding a JSON Patch', 'resource');
    try {
      entry.patch = entryPatch(asResource(e.resource));
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      throw underEntry(err, `Bundle.entry[${index}]`);
    }
  }
  if (method === 'POST') {
    if (id !== undefined || query) fail(index, `POST request.url must be the resource type, got '${request.url}'`, 'request.url');
    if (typeof request.ifNoneExist === 'string') {
      try {
        entry.condition = parseCondition(request.ifNoneExist, type, 'ifNoneExist', undefined, base);
      } catch (err) {
        fail(index, (err as Error).message, 'request.ifNoneExist');
      }
    }
  } else if (id !== undefined) {
    entry.id = id;
    if (method === 'PUT' && entry.resource!.id !== undefined && entry.resource!.id !== id) {
      fail(index, `resource id '${entry.resource!.id}' does not match request.url id '${id}'`, 'resource.id');
    }
  } else if (query) {
    if (!hasCriteria(query)) fail(index, `conditional request.url '${request.url}' has no search criteria`, 'request.url');
    entry.condition = query;
  } else {
    fail(index, `${method} needs Type/id or a conditional Type?query, got '${request.url}'`, 'request.url');
  }
  return entry;
}

/** A Bundle entry that failed validation (a batch answers it with its own error response). */
export interface InvalidEntry {
  index: number;
  error: FhirError;
}

/**
 * Validates the shape of a transaction or batch Bundle and its entries (FHIR R4 http 3.1.0.11).
 * Invalid entries are returned apart: a transaction fails on the first, a batch answers each. The event
 * loop turns every WORK_SLICE_MS between entries (`pace`, src/fhir/turns.ts): 90,000 entries took 0.3 s.
 */
export async function parseBundle(body: unknown, base: string, pace = pacedTurns()): Promise<{ type: 'transaction' | 'batch'; entries: Entry[]; invalid: InvalidEntry[] }> {
  const bundle = asResource(body, 'Bundle');
  if (bundle.type !== 'transaction' && bundle.type !== 'batch') {
    throw new FhirError('invalid', `Bundle.type must be transaction or batch to be processed, got '${String(bundle.type)}'`, {
      expression: ['Bundle.type'],
    });
  }
  const raw = bundle.entry ?? [];
  if (!Array.isArray(raw)) throw new FhirError('structure', 'Bundle.entry must be an array', { expression: ['Bundle.entry'] });
  const entries: Entry[] = [];
  const invalid: InvalidEntry[] = [];
  for (let i = 0; i < raw.length; i++) {
    try {
      entries.push(parseEntry(raw[i], i, base));
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      invalid.push({ index: i, error: err });
    }
    const turn = pace();
    if (turn) await turn;
  }
  return { type: bundle.type, entries, invalid };
}
