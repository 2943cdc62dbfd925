import { FhirError } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import { etag, etagMatches } from '../fhir/bundle.ts';
import { stringifyExact } from '../fhir/exact-json.ts';
import type { Shape } from '../fhir/subset.ts';
import { parseHttpDate } from './http-date.ts';
import { COMPRESS_MIN_CHARS, partedResponse, textResponse } from './content-coding.ts';
import { streamedText } from './streamed-text.ts';

export const FHIR_JSON = 'application/fhir+json; charset=utf-8';

const JSON_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir', 'text/json'];

export const FHIR_XML = 'application/fhir+xml; charset=utf-8';

/** The XML media types a client may name (R4 http.html: the FHIR type, DSTU2's, and the generic ones), answered in FHIR XML. */
export const XML_TYPES = ['application/fhir+xml', 'application/xml+fhir', 'application/xml', 'text/xml'];

/** A media range's type and parameters (names lower case, quotes dropped). */
function mediaRange(range: string): { type: string; params: Map<string, string> } {
  const [type, ...rest] = range.split(';');
  const params = new Map<string, string>();
  for (const p of rest) {
    const eq = p.indexOf('=');
    if (eq > 0) params.set(p.slice(0, eq).trim().toLowerCase(), p.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1'));
  }
  return { type: type!.trim().toLowerCase(), params };
}

/**
 * A `_format` value as a media range: a `+` of its type that arrived unencoded (and so as a space,
 * `application/fhir json`) is read back, and only there: the space after a `;` separates a parameter
 * (`application/fhir+json; fhirVersion=3.0`), which read as `;+fhirVersion` was no parameter at all.
 */
function formatRange(format: string): { type: string; params: Map<string, string> } {
  const [type, ...params] = format.trim().split(';');
  return mediaRange([type!.trim().replace(/ /g, '+'), ...params].join(';'));
}

/** A `fhirVersion` media type parameter's value for FHIR R4 (versioning.html: 4.0, or a 4.0.x release). */
export const R4_VERSION = /^4\.0(\.\d+)?$/;

/** Whether a media range's `fhirVersion` names R4, or it has none. */
function isR4Version(params: Map<string, string>): boolean {
  const v = params.get('fhirversion');
  return v === undefined || R4_VERSION.test(v);
}

/**
 * `text/*`: any text type. Cinder answers it in JSON, its default format, as `text/json` (the text type
 * R4 http.html names for JSON; `text/xml` is XML's), so that the answer is of the range asked for
 * (RFC 9110 12.5.1); it ranks as a wildcard against the types a client names.
 */
const TEXT_RANGE = 'text/*';

/**
 * The quality `accept` gives `type` (RFC 9110 12.5.1): that of the most specific range matching it (the type itself,
 * then `type/*`, then `*\/*`; the highest of equally specific ones), 0 when none does, so that
 * `application/fhir+json;q=0, *\/*` refuses FHIR JSON whatever the wildcard allows. A range of another `fhirVersion`
 * matches nothing; a `q` that is no number counts as 1, as it did when it was the only check. `exact`: only a range
 * naming the type itself counts.
 */
function quality(accept: string, type: string, exact = false): number {
  const major = exact ? type : `${type.slice(0, type.indexOf('/'))}/*`;
  let best = -1;
  let q = 0;
  for (const part of accept.split(',')) {
    const range = mediaRange(part);
    const rank = range.type === type ? 2 : range.type === major ? 1 : range.type === '*/*' && !exact ? 0 : -1;
    if (rank < 0 || rank < best || !isR4Version(range.params)) continue;
    const given = Number(range.params.get('q') ?? '1');
    const value = Number.isNaN(given) ? 1 : Math.max(given, 0);
    q = rank > best ? value : Math.max(q, value);
    best = rank;
  }
  return q;
}

/**
 * Whether `accept` takes FHIR JSON: its type, or DSTU2's `application/json+fhir` named (a wildcard matching that
 * older name, which Cinder never labels an answer with, says nothing of FHIR JSON).
 */
function takesFhirJson(accept: string): boolean {
  return quality(accept, 'application/fhir+json') > 0 || quality(accept, 'application/json+fhir', true) > 0;
}

/** The JSON types Cinder labels its JSON answers with, its default first (labelledAsAsked). */
const ANSWERED_JSON = ['application/fhir+json', 'application/json', 'text/json'];
/** The XML types Cinder labels its XML answers with, the FHIR one first (answerXmlType). */
const ANSWERED_XML = ['application/fhir+xml', 'application/xml', 'text/xml'];

/** The first of `types` that `accept` gives the highest quality above 0, or undefined when it refuses them all. */
function preferred(accept: string, types: string[]): string | undefined {
  let found: string | undefined;
  let best = 0;
  for (const type of types) {
    const q = quality(accept, type);
    if (q > best) [found, best] = [type, q];
  }
  return found;
}

/** An Accept with a range of `q=0` (what asks the negotiation to look past its wildcards: quality), cheaply tested. */
export const REFUSES_A_TYPE = /q\s*=\s*0(?:\.0*)?\s*(?:[,;]|$)/i;

/**
 * Checks `Accept` and `_format` (FHIR R4 http 3.1.0.1.10): JSON or XML, of FHIR R4, otherwise 406. A `_format`
 * whose `+` arrived unencoded (and so as a space, `application/fhir json`) is read with it, and overrides
 * `Accept` ("to allow a client to override the accept header"); an Accept range with `q=0` is one the
 * client refuses; a `fhirVersion` other than 4.0 is not served.
 */
export function checkAccept(accept: string | undefined, format: string | null): void {
  if (format !== null) {
    const f = formatRange(format);
    if (!['json', 'xml', ...JSON_TYPES, ...XML_TYPES].includes(f.type) || !isR4Version(f.params)) {
      throw new FhirError('not-acceptable', `_format '${format}' is not supported: Cinder speaks FHIR R4 JSON and XML`, { expression: ['_format'] });
    }
    return;
  }
  if (!accept) return;
  // Some type Cinder answers in that the client does not refuse (a wildcard does not undo a q=0: quality).
  const ok = [...JSON_TYPES, ...XML_TYPES, 'application/fhir+ndjson', 'application/ndjson'].some((type) => quality(accept, type) > 0);
  if (!ok) throw new FhirError('not-acceptable', `Accept '${accept}' is not supported: Cinder answers application/fhir+json or application/fhir+xml (FHIR R4)`);
}

/**
 * The XML media type a request asks its answer in, or undefined for JSON (FHIR R4 http 3.1.0.1.10):
 * `_format` first (`xml`, `application/fhir+xml`: `application/fhir+xml`; `application/xml`, `text/xml`:
 * that generic type, as the specification says a server SHOULD answer the generic type asked for);
 * else the XML type `Accept` ranks highest when that is above every JSON type it names (at an equal
 * `q`, the one named first) and not below a wildcard's `q` (which is JSON's then; a wildcard names
 * neither); else, with no `Accept` (or only wildcards), the
 * request's own body format, so that a client sending FHIR XML gets XML back as HAPI FHIR answers it.
 */
export function answerXmlType(accept: string | null | undefined, format: string | null, contentType: string | null | undefined): string | undefined {
  if (format !== null) {
    const { type, params } = formatRange(format);
    if (!isR4Version(params)) return undefined;
    if (type === 'xml' || type === 'application/fhir+xml' || type === 'application/xml+fhir') return 'application/fhir+xml';
    return XML_TYPES.includes(type) ? type : undefined;
  }
  let xml = 0;
  let xmlType: string | undefined;
  let json = 0;
  let named = false;
  let xmlFirst = false;
  let wildcard = 0;
  for (const part of (accept ?? '').split(',')) {
    const { type, params } = mediaRange(part);
    const isXml = XML_TYPES.includes(type);
    if (type === '*/*' || type === 'application/*' || type === TEXT_RANGE) {
      const q = Number(params.get('q') ?? '1');
      if (q > 0 && isR4Version(params)) wildcard = Math.max(wildcard, q);
      continue;
    }
    if (!isXml && !JSON_TYPES.includes(type)) continue;
    named = true;
    const q = Number(params.get('q') ?? '1');
    if (!(q > 0) || !isR4Version(params)) continue;
    if (xml === 0 && json === 0) xmlFirst = isXml;
    if (isXml && q > xml) [xml, xmlType] = [q, type === 'application/xml+fhir' ? 'application/fhir+xml' : type];
    else if (!isXml) json = Math.max(json, q);
  }
  // A wildcard ranked above every XML type named (`application/fhir+xml;q=0.1, */*`) takes JSON, Cinder's default (RFC 9110 12.5.1).
  const chosen = named
    ? (xml > json || (xml === json && xml > 0 && xmlFirst)) && xml >= wildcard ? xmlType : undefined
    : XML_TYPES.includes((contentType ?? '').split(';')[0]!.trim().toLowerCase()) ? 'application/fhir+xml' : undefined;
  // JSON, unless the client refuses every JSON type it could be labelled with (`q=0`) and accepts an XML one.
  if (chosen !== undefined || !accept || !REFUSES_A_TYPE.test(accept) || takesFhirJson(accept) || preferred(accept, ANSWERED_JSON) !== undefined) return chosen;
  return preferred(accept, ANSWERED_XML);
}

/** GraphQL over HTTP's own media type for a GraphQL response. */
export const GRAPHQL_RESPONSE = 'application/graphql-response+json';

/**
 * The media type of a `$graphql` answer (GraphQL over HTTP, "Accept"): `application/graphql-response+json`
 * when the client ranks it at least as high as any JSON type it accepts (by `q`), else `application/json`,
 * as with no `Accept`; `_format` overrides `Accept` as checkAccept reads it. Nothing acceptable: 406, and so
 * is `_format=xml` (or an XML type): the operation's `result` "is always returned as application/json"
 * (OperationDefinition Resource-graphql), so a request for XML alone is one the server cannot answer, as an
 * `Accept` of XML alone is (http.html: a format the server does not support for it is a 406).
 */
export function graphqlResponseType(accept: string | undefined, format: string | null): typeof GRAPHQL_RESPONSE | 'application/json' {
  if (format !== null) {
    const { type } = formatRange(format);
    if (type === GRAPHQL_RESPONSE) return GRAPHQL_RESPONSE;
    if (type === 'xml' || XML_TYPES.includes(type)) {
      throw new FhirError('not-acceptable', `_format '${format}' is not supported by $graphql: its answer is always JSON (application/json or ${GRAPHQL_RESPONSE})`, { expression: ['_format'] });
    }
    checkAccept(undefined, format);
    return 'application/json';
  }
  if (!accept) return 'application/json';
  let graphql = 0;
  let json = 0;
  for (const part of accept.split(',')) {
    const { type, params } = mediaRange(part);
    const q = Number(params.get('q') ?? '1');
    if (!(q > 0)) continue;
    if (type === GRAPHQL_RESPONSE) graphql = Math.max(graphql, q);
    else if (isR4Version(params) && (type === '*/*' || type === 'application/*' || JSON_TYPES.includes(type))) json = Math.max(json, q);
  }
  if (graphql > 0 && graphql >= json) return GRAPHQL_RESPONSE;
  if (json > 0) return 'application/json';
  throw new FhirError('not-acceptable', `Accept '${accept}' is not supported: $graphql answers ${GRAPHQL_RESPONSE} or application/json`);
}

/** The generic JSON types a client may ask for (R4 http.html names `application/json` and `text/json`). */
const PLAIN_JSON_TYPES = ['application/json', 'text/json'];

/** The FHIR JSON media types a client may name, the current one and DSTU2's. */
const FHIR_JSON_TYPES = ['application/fhir+json', 'application/json+fhir'];

/**
 * The generic JSON type (`application/json` or `text/json`) a client asked for rather than FHIR JSON, if
 * it did (FHIR R4 http 3.1.0.1.10: "If a client provides a generic mime type in the Accept header
 * (application/xml, text/json, or application/json), the server SHOULD respond with the requested mime
 * type, using the ... JSON formats described in this specification"): `_format=application/json` or
 * `_format=text/json` (which override Accept, as checkAccept reads it; `_format=json` names the JSON
 * format, whose type is application/fhir+json), or, without `_format`, the generic type an Accept ranks
 * highest when that is above any FHIR JSON type it names. Wildcards name nothing: `application/json, *\/*`
 * asks for application/json, `*\/*` alone for the default; `text/*` ranked above every JSON type named
 * asks for text/json (TEXT_RANGE). Ranges of another `fhirVersion` count for nothing.
 */
export function asksForPlainJson(accept: string | null | undefined, format: string | null): string | undefined {
  if (format !== null) {
    const type = formatRange(format).type;
    return PLAIN_JSON_TYPES.includes(type) ? type : undefined;
  }
  if (!accept) return undefined;
  let plain = 0;
  let plainType: string | undefined;
  let fhir = 0;
  let text = 0;
  for (const part of accept.split(',')) {
    const { type, params } = mediaRange(part);
    const generic = PLAIN_JSON_TYPES.includes(type);
    if (!generic && !FHIR_JSON_TYPES.includes(type) && type !== TEXT_RANGE) continue;
    if (!isR4Version(params)) continue;
    const q = Number(params.get('q') ?? '1');
    if (!(q > 0)) continue;
    if (type === TEXT_RANGE) text = Math.max(text, q);
    else if (!generic) fhir = Math.max(fhir, q);
    else if (q > plain) [plain, plainType] = [q, type];
  }
  if (plain > fhir) return plainType;
  // `text/*` above every JSON type named: answered as text/json (TEXT_RANGE).
  if (text > fhir && text > plain) return 'text/json';
  // FHIR JSON refused (`application/fhir+json;q=0, *\/*`): the generic type the client accepts, if any (else 406 or XML).
  if (!REFUSES_A_TYPE.test(accept) || takesFhirJson(accept)) return undefined;
  return preferred(accept, ANSWERED_JSON.slice(1));
}

/**
 * `res` labelled `application/json` when it is a FHIR JSON answer to a request that asked for generic
 * JSON (asksForPlainJson), else as it is; changed in place, so that the text remembered for compression
 * (content-coding.ts) stays with it. Applied at the edge to every answer, Hono's and the hot routes', so
 * that errors, searches and operations are labelled alike, each with `Vary: Accept`. A request without
 * `_format` whose Accept does not mention application/json (nearly every one) costs two header reads, an
 * append and a test.
 */
export function labelledAsAsked(req: Request, res: Response): Response {
  const fhirJson = (res.headers.get('content-type') ?? '').startsWith('application/fhir+json');
  // The label depends on Accept, so caches are told (RFC 9110 12.5.5), on a 304 too, which carries what
  // its 200 would (15.4.5): a browser keeps reads (an ETag, `Cache-Control: private, no-cache`) and revalidates them.
  if (fhirJson || res.status === 304) {
    // First, so that a HEAD (whose Accept-Encoding is described inside) lists them as its GET does.
    const vary = res.headers.get('vary');
    res.headers.set('Vary', vary ? `Accept, ${vary}` : 'Accept');
  }
  if (!fhirJson) return res;
  const accept = req.headers.get('accept');
  const url = req.url;
  const format = url.includes('_format=') ? new URL(url).searchParams.get('_format') : null;
  if (format === null && (accept === null || !PLAIN_JSON_NAMED.test(accept))) return res;
  const plain = asksForPlainJson(accept, format);
  if (plain !== undefined) res.headers.set('Content-Type', `${plain}; charset=utf-8`);
  return res;
}

/** An Accept that may ask for application/json (media types are case-insensitive), or refuse FHIR JSON (q=0). */
const PLAIN_JSON_NAMED = /application\/json|text\/(json|\*)|q\s*=\s*0/i;

/**
 * Headers of a response carrying one resource version. `Cache-Control: private, no-cache`: with `Last-Modified` and
 * no Cache-Control a browser holds an answer heuristically fresh (RFC 9111 4.2.2, a tenth of its age) and answers a
 * later read itself, a version since replaced or one the token may no longer read; `no-cache` keeps the answer but
 * has it revalidated (`If-None-Match`, a 304 judged with the request's token), `private` keeps shared caches out.
 */
export function versionHeaders(v: ResourceVersion): Record<string, string> {
  return { ETag: etag(v.versionId), 'Last-Modified': new Date(v.lastUpdated).toUTCString(), 'Cache-Control': 'private, no-cache' };
}

/** The conditional-read headers of a request (FHIR R4 http.html#cread, RFC 9110 13.1.2 and 13.1.3). */
export interface ReadConditions {
  ifNoneMatch: string | null | undefined;
  ifModifiedSince: string | null | undefined;
}

/** The conditional-read headers of a request. */
export function readConditions(headers: Headers): ReadConditions {
  return { ifNoneMatch: headers.get('if-none-match'), ifModifiedSince: headers.get('if-modified-since') };
}

/**
 * 304 Not Modified when the client's copy is current: `If-None-Match` naming the version's ETag (weak
 * comparison, lists and `*`) or, without `If-None-Match`, `If-Modified-Since` at or after the version's
 * last update (HTTP dates have whole seconds; a value that is not an HTTP-date, such as an ISO 8601
 * date, is ignored as RFC 9110 13.1.3 requires). Otherwise null.
 */
export function notModified(v: ResourceVersion, c: ReadConditions | undefined): Response | null {
  if (!c) return null;
  let fresh: boolean;
  if (c.ifNoneMatch) {
    fresh = etagMatches(c.ifNoneMatch, v.versionId);
  } else if (c.ifModifiedSince) {
    const since = parseHttpDate(c.ifModifiedSince);
    fresh = since !== null && Math.floor(v.lastUpdated / 1000) * 1000 <= since;
  } else return null;
  if (!fresh) return null;
  // RFC 9110 15.4.5: a 304 carries the Vary a 200 would have, which a long answer has (content-coding.ts).
  const headers = versionHeaders(v);
  if (v.content.length >= COMPRESS_MIN_CHARS) headers.Vary = 'Accept-Encoding';
  return new Response(null, { status: 304, headers });
}

/** A version as a read answers it: its JSON (as `_summary` / `_elements` shape it, if asked), its ETag and Last-Modified (the version's, subsetted or not). */
export function versionResponse(v: ResourceVersion, shape?: Shape): Response {
  return fhirJson(shape ? shape(v.content) : v.content, 200, versionHeaders(v));
}

/**
 * A JSON response with the FHIR media type (an object's numbers as written: stringifyExact; compressed
 * for clients that take gzip when long: src/http/content-coding.ts).
 */
/** fhirJson of a text in parts, one shared with other answers (the CapabilityStatement's: content-coding.ts partedResponse). */
export function fhirJsonParts(parts: string | [string, string, string]): Response {
  return typeof parts === 'string' ? fhirJson(parts) : partedResponse(parts, { status: 200, headers: JSON_HEADERS });
}

/**
 * fhirJson of a text given in parts (a history page's, src/fhir/bundle.ts historyParts): written a part at a time when
 * the stored texts among them reach STREAMED_FROM_CHARS, so that a page of large versions is never one text and its
 * bytes besides (src/http/streamed-text.ts); else joined, as every answer is.
 */
export function fhirJsonOfParts(parts: Generator<string>, chars: number): Response {
  return chars >= STREAMED_FROM_CHARS ? streamedText(parts, { status: 200, headers: JSON_HEADERS }) : fhirJson([...parts].join(''));
}

/** The characters of stored text from which an answer made of parts is written a part at a time (4 Mi: below it, one text costs little and is compressed at GZIP_LEVEL in one call). */
export const STREAMED_FROM_CHARS = 4 << 20;

export function fhirJson(body: string | object, status = 200, headers?: Record<string, string>): Response {
  return textResponse(typeof body === 'string' ? body : stringifyExact(body), {
    status,
    headers: headers === undefined ? JSON_HEADERS : { 'Content-Type': FHIR_JSON, ...headers },
  });
}

/** A Headers object as init: Response copies it natively (cheaper than reading a plain object); never mutated. */
const JSON_HEADERS = new Headers({ 'Content-Type': FHIR_JSON });
