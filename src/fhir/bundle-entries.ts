import { FhirError } from '../errors.ts';
import { hasCriteria, parseCondition } from './conditional.ts';
import { entryPatch, underEntry, type PatchDocument } from './patch.ts';
import { asResource, withoutId, type Resource } from './resource.ts';
import { ID_PATTERN, isResourceType } from './resource-types.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';

/** One validated Bundle.entry of a transaction or batch. */
export interface Entry {
  index: number;
  method: Method;
  type: string;
  /** Target id for PUT/PATCH/DELETE/GET by id. */
  id?: string;
  /** Conditional query (`Type?a=b`) or `ifNoneExist`. */
  condition?: URLSearchParams;
  /** GET search or read query string. */
  query?: URLSearchParams;
  fullUrl?: string;
  resource?: Resource;
  /** PATCH: the patch its resource holds (a Parameters, or a Binary holding a JSON Patch). */
  patch?: PatchDocument;
  ifMatch?: string;
}

function fail(index: number, message: string, element?: string): never {
  throw new FhirError('invalid', `Bundle.entry[${index}]: ${message}`, { expression: [`Bundle.entry[${index}]${element === undefined ? '' : `.${element}`}`] });
}

/** Splits `Type/id`, `Type?query` or `Type` (relative to the FHIR base). */
function parseUrl(index: number, url: string, base: string): { type: string; id?: string; query?: URLSearchParams } {
  // Relative to the FHIR base, with or without a leading `/`.
  const rel = url.startsWith(base + '/') ? url.slice(base.length + 1) : url.startsWith('/') ? url.slice(1) : url;
  const q = rel.indexOf('?');
  const path = q < 0 ? rel : rel.slice(0, q);
  const query = q < 0 ? undefined : new URLSearchParams(rel.slice(q + 1));
  const [type, id, extra] = path.split('/');
  if (!type || !isResourceType(type)) fail(index, `request.url '${url}' does not name a known resource type`);
  if (extra !== undefined) fail(index, `request.url '${url}' is not of the form Type, Type/id or Type?query`);
  if (id !== undefined && !ID_PATTERN.test(id)) fail(index, `request.url '${url}' has an invalid id`);
  const out: { type: string; id?: string; query?: URLSearchParams } = { type };
  if (id !== undefined) out.id = id;
  if (query) out.query = query;
  return out;
}

function parseEntry(raw: unknown, index: number, base: string): Entry {
  if (raw === null || typeof raw !== 'object') fail(index, 'is not an object');
  const e = raw as Record<string, unknown>;
  const request = e.request as Record<string, unknown> | undefined;
  if (!request || typeof request.method !== 'string' || typeof request.url !== 'string') fail(index, 'request.method and request.url are required');
  const method = request.method as Method;
  if (!['GET', 'POST', 'PUT', 'DELETE', 'PATCH'].includes(method)) fail(index, `request.method '${request.method}' is not supported`);
  for (const field of ['ifNoneMatch', 'ifModifiedSince', 'ifMatch', 'ifNoneExist']) {
    // A precondition that is not a string would be dropped and the write done unconditionally.
    if (request[field] !== undefined && typeof request[field] !== 'string') fail(index, `request.${field} must be a string`, `request.${field}`);
  }
  const { type, id, query } = parseUrl(index, request.url as string, base);
  const entry: Entry = { index, method, type };
  if (typeof e.fullUrl === 'string') entry.fullUrl = e.fullUrl;
  if (typeof request.ifMatch === 'string') entry.ifMatch = request.ifMatch;
  if (method === 'GET') {
    if (id !== undefined) entry.id = id;
    entry.query = query ?? new URLSearchParams();
    return entry;
  }
  if (method === 'POST' || method === 'PUT') {
    try {
      entry.resource = asResource(method === 'POST' ? withoutId(e.resource) : e.resource, type);
    } catch (err) {
      fail(index, (err as Error).message);
    }
  }
  if (method === 'PATCH') {
    if (e.resource === undefined) fail(index, 'a PATCH needs a resource: a Parameters (FHIRPath Patch) or a Binary holding a JSON Patch');
    try {
      entry.patch = entryPatch(asResource(e.resource));
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      throw underEntry(err, `Bundle.entry[${index}]`);
    }
  }
  if (method === 'POST') {
    if (id !== undefined || query) fail(index, `POST request.url must be the resource type, got '${request.url}'`);
    if (typeof request.ifNoneExist === 'string') {
      try {
        entry.condition = parseCondition(request.ifNoneExist, type, 'ifNoneExist');
      } catch (err) {
        fail(index, (err as Error).message);
      }
    }
  } else if (id !== undefined) {
    entry.id = id;
    if (method === 'PUT' && entry.resource!.id !== undefined && entry.resource!.id !== id) {
      fail(index, `resource id '${entry.resource!.id}' does not match request.url id '${id}'`);
    }
  } else if (query) {
    if (!hasCriteria(query)) fail(index, `conditional request.url '${request.url}' has no search criteria`);
    entry.condition = query;
  } else {
    fail(index, `${method} needs Type/id or a conditional Type?query, got '${request.url}'`);
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
 * Invalid entries are returned apart: a transaction fails on the first, a batch answers each.
 */
export function parseBundle(body: unknown, base: string): { type: 'transaction' | 'batch'; entries: Entry[]; invalid: InvalidEntry[] } {
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
  raw.forEach((e, i) => {
    try {
      entries.push(parseEntry(e, i, base));
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      invalid.push({ index: i, error: err });
    }
  });
  return { type: bundle.type, entries, invalid };
}
