import { FhirError } from '../errors.ts';
import { charsetOf, firstNonAscii, isAsciiLabel, isUtf8Label } from '../fhir/charset.ts';
import { openStringPath } from '../fhir/exact-json.ts';
import { parseJsonPaced } from '../fhir/json-paced.ts';
import { pacedTurns } from '../fhir/turns.ts';
import { decodeUtf8, NotUtf8Error, utf8Stream } from '../fhir/utf8.ts';
import { parseFhirXmlPaced } from '../fhir/xml/from-xml-paced.ts';
import { R4_VERSION, XML_TYPES } from './fhir-response.ts';

const FHIR_BODY_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir', 'application/fhir+xml', 'application/xml+fhir'];

/** Every media type a FHIR resource body is read in: FHIR_BODY_TYPES and the generic XML types (`application/xml`, `text/xml`). */
const READ_TYPES = [...FHIR_BODY_TYPES, ...XML_TYPES];

/** The media type of a Content-Type or Accept entry, without parameters, lower case (`text/plain`). */
export function mediaTypeOf(header: string | undefined): string {
  return (header ?? '').split(';')[0]!.trim().toLowerCase();
}

/**
 * Whether a Content-Type is one of the FHIR media types a resource body is sent as (JSON, and XML by
 * its FHIR types: a Binary's native content may be a generic XML document, a CDA one say).
 */
export function isFhirBodyType(header: string | undefined): boolean {
  return FHIR_BODY_TYPES.includes(mediaTypeOf(header));
}

/**
 * The content codings Cinder decodes in request bodies (RFC 9110 8.4.1), as DecompressionStream names
 * them: gzip (and its old name x-gzip) and deflate (the zlib format, RFC 9110 8.4.1.2).
 */
const DECODERS: Readonly<Record<string, CompressionFormat>> = { gzip: 'gzip', 'x-gzip': 'gzip', deflate: 'deflate' };

/**
 * The most content codings a request body may name (RFC 9110 8.4 allows a list; clients send one): each
 * is a decoder of its own, so a header of thousands (`gzip, gzip, ...`) would hold as many at once.
 */
const MAX_CODINGS = 2;

/** The `Accept-Encoding` of a 415 for a coding not in DECODERS (RFC 9110 15.5.16). */
export const REQUEST_ENCODINGS = 'gzip, deflate';

/**
 * The content codings of a request body in the order they were applied (RFC 9110 8.4), `identity`
 * left out; 415 naming those Cinder decodes for any other.
 */
function contentCodings(req: Request): string[] {
  const header = req.headers.get('content-encoding');
  if (header === null) return [];
  const codings = header.split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '' && c !== 'identity');
  if (codings.length > MAX_CODINGS) {
    throw new FhirError('unsupported-media', `Content-Encoding names ${codings.length} codings; at most ${MAX_CODINGS} are decoded`, {
      headers: { 'Accept-Encoding': REQUEST_ENCODINGS },
    });
  }
  for (const coding of codings) {
    if (DECODERS[coding] === undefined) {
      throw new FhirError('unsupported-media', `Content-Encoding '${coding}' is not supported: send the body as is, or in ${REQUEST_ENCODINGS}`, {
        headers: { 'Accept-Encoding': REQUEST_ENCODINGS },
      });
    }
  }
  return codings;
}

/** Whether the request declares a Content-Length within `limit`; 413 when it declares more. */
function declaredWithin(req: Request, limit: number): boolean {
  const length = req.headers.get('content-length');
  if (length === null) return false;
  const declared = Number(length);
  if (declared > limit) throw new FhirError('too-large', `Request body of ${declared} bytes exceeds the limit of ${limit} bytes`);
  return declared <= limit;
}

/**
 * The body's bytes as they were before their content codings, as a stream decoded while it is read.
 * A decoder hands out its output a chunk at a time as it is asked for it, so a small body that would
 * decode to gigabytes (a decompression bomb) costs no more memory than the limit its reader applies.
 */
function decoded(body: ReadableStream<Uint8Array>, codings: string[]): ReadableStream<Uint8Array> {
  let stream = body;
  for (const coding of [...codings].reverse()) {
    stream = stream.pipeThrough(new DecompressionStream(DECODERS[coding]!) as unknown as ReadableWritablePair<Uint8Array, Uint8Array>);
  }
  return stream;
}

/**
 * The most bytes handed to a reader of the body at once (a larger chunk is handed on in parts of this size):
 * 768 KiB, a multiple of 3, so that base64 encodes each part of a large chunk whole, with no bytes carried.
 */
const BODY_PIECE = 3 * 256 * 1024;

/**
 * Feeds the body's chunks, decoded from its content codings, to `each` as they arrive, in parts of at most
 * BODY_PIECE bytes, letting the event loop turn every WORK_SLICE_MS between them (src/fhir/turns.ts: a body
 * already received is read without waiting, and decoding or encoding 48 MiB held the process); 413 (and the
 * rest left unread) once they pass `limit`, which so bounds the decoded size; 400 for a body that is not in
 * the coding it names.
 */
async function eachChunk(req: Request, limit: number, codings: string[], each: (chunk: Uint8Array) => void): Promise<void> {
  if (!req.body) return;
  const reader = (codings.length === 0 ? req.body : decoded(req.body, codings)).getReader();
  const pace = pacedTurns();
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read().catch((err: unknown) => {
      if (codings.length === 0) throw err;
      throw new FhirError('invalid', `Request body is not valid ${codings.join(', ')} content (Content-Encoding): ${(err as Error).message}`, { cause: err });
    });
    if (done) return;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw new FhirError('too-large', `Request body exceeds the limit of ${limit} bytes${codings.length === 0 ? '' : ' once decoded'}`);
    }
    for (let at = 0; at < value.byteLength; at += BODY_PIECE) {
      each(value.byteLength <= BODY_PIECE ? value : value.subarray(at, at + BODY_PIECE));
      const turn = pace();
      if (turn) await turn;
    }
  }
}

/**
 * Reads at most `limit` bytes of the request body as text (decoded from a gzip or deflate
 * Content-Encoding: the limit is the decoded size's); 413 beyond that, 415 for another coding. A
 * leading byte order mark is dropped, however the body is framed (RFC 8259 8.1 lets a JSON parser
 * ignore it; Windows tools write it). The text is UTF-8 (src/fhir/utf8.ts): a body that is not is a
 * 400 naming the offset of its first bad byte, never text with U+FFFD in its place.
 */
export function readLimited(req: Request, limit: number, what?: string): Promise<string> {
  return readText(req, limit, 'text', what);
}

/** The `encoding` an XML declaration at the start of a text names (the declaration is ASCII: it precedes any bad byte). */
const XML_ENCODING = /^\uFEFF?<\?xml\s[^?]*?\bencoding\s*=\s*["']([^"']*)["']/;

/**
 * What a body holds, for the 400 of one that is not UTF-8: FHIR JSON, FHIR XML, a `_search` form, a form of the OAuth
 * endpoints, or other text (a JSON Patch, a GraphQL query).
 */
type BodyKind = 'json' | 'xml' | 'form' | 'oauth-form' | 'text';

/**
 * readLimited's text; a FHIR body (`kind`) that is not UTF-8 says so, and a JSON one names the element its bad byte falls in. A body of at most
 * BODY_PIECE bytes is read whole and decoded at once, a larger one a part at a time as eachChunk hands them on (a
 * streaming decoder: the same text, a character split between parts decoded whole, a bad byte in any part refused).
 */
async function readText(req: Request, limit: number, kind: BodyKind, what?: string): Promise<string> {
  const codings = contentCodings(req);
  try {
    // With a declared length within the limit the server frames the body: a small one is read natively, without
    // materialising `req.body` as a stream (which costs more than the read itself).
    if (codings.length === 0 && declaredWithin(req, limit) && Number(req.headers.get('content-length')) <= BODY_PIECE) return decodeUtf8(await req.bytes());
    const parts: string[] = [];
    const utf8 = utf8Stream(() => parts.join(''));
    await eachChunk(req, limit, codings, (chunk) => parts.push(utf8.decode(chunk)));
    parts.push(utf8.end());
    return parts.join('');
  } catch (err) {
    throw err instanceof NotUtf8Error ? notUtf8Body(err, kind, req.headers.get('content-type') ?? undefined, what) : err;
  }
}

/**
 * The 400 of a body that is not UTF-8: the offset of its first bad byte and, in FHIR JSON, the element whose string
 * holds it, in the message and as its expression.
 */
function notUtf8Body(err: NotUtf8Error, kind: BodyKind, header: string | undefined, what?: string): FhirError {
  if (kind === 'oauth-form') return notUtf8Form(err, header);
  const charset = charsetOf(header);
  // A body that is not FHIR's (the EHR launch request's JSON) names itself, not FHIR's rule.
  if (what !== undefined && charset !== undefined && !isUtf8Label(charset)) {
    const held = isAsciiLabel(charset) ? `, but the body holds ${err.message}, which is not US-ASCII` : '';
    return new FhirError('unsupported-media', `Content-Type '${header}' declares charset ${charset || '(empty)'}${held}: ${what} is read in UTF-8 only (RFC 8259 8.1); send it in UTF-8, with charset=utf-8 or no charset`, { cause: err });
  }
  // A body declared US-ASCII (requireUtf8) is not in the charset it declares: the 415 requireUtf8 answers for it.
  if (charset !== undefined && isAsciiLabel(charset)) {
    return new FhirError('unsupported-media', `Content-Type '${header}' declares charset ${charset}, but the body holds ${err.message}, which is not US-ASCII: send FHIR bodies in UTF-8, with charset=utf-8 or no charset`, { cause: err });
  }
  // One declared in another charset (ISO-8859-1, UTF-16) is not misread UTF-8 but text Cinder does not read: the 415 naming
  // it, as when the media type is checked before the body is read (an operation's optional body is read first).
  try {
    requireUtf8(header);
  } catch (refused) {
    return refused as FhirError;
  }
  // So is FHIR XML whose declaration names another encoding (the parser's 415, src/fhir/xml/from-xml.ts, which it
  // would answer had the bytes been read).
  const declared = kind === 'xml' ? XML_ENCODING.exec(err.before)?.[1] : undefined;
  if (declared !== undefined && isAsciiLabel(declared)) {
    return new FhirError('unsupported-media', `The request body declares encoding '${declared}' but holds ${err.message}, which is not US-ASCII: send FHIR XML in UTF-8`, { cause: err });
  }
  if (declared !== undefined && !isUtf8Label(declared)) {
    return new FhirError('unsupported-media', `The request body declares encoding '${declared}': FHIR XML is read in UTF-8 only (R4 http.html: UTF-8 SHALL be used)`, { cause: err });
  }
  const path = kind === 'json' ? openStringPath(err.before) : kind === 'form' ? formParameterAt(err.before) : undefined;
  const where = path === undefined ? '' : kind === 'form' ? `, in the parameter '${path}'` : `, in ${path}`;
  const rule = kind === 'text' || kind === 'form' ? '' : ' (FHIR R4 http.html: "UTF-8 SHALL be used")';
  return new FhirError('structure', `Request body is not valid UTF-8: ${err.message}${where}; send it in UTF-8${rule}`, {
    ...(path !== undefined && { expression: [path] }),
    cause: err,
  });
}

/**
 * The 400 of an OAuth form that is not UTF-8, in words about the form (they are UTF-8, RFC 6749 Appendix B, whatever
 * charset their Content-Type declares): its first bad byte and the parameter holding it, and the charset it declares.
 */
function notUtf8Form(err: NotUtf8Error, header: string | undefined): FhirError {
  const name = formParameterAt(err.before);
  const where = name === undefined ? '' : `, in the parameter '${name}'`;
  const charset = charsetOf(header);
  const declared = charset === undefined || isUtf8Label(charset) ? '' : ` (it declares charset ${charset || '(empty)'})`;
  return new FhirError('structure', `The form is not UTF-8${declared}: ${err.message}${where}; OAuth forms are read in UTF-8 only (RFC 6749 Appendix B): send it in UTF-8, with charset=utf-8 or no charset`, { cause: err });
}

/**
 * What to add to the refusal of an OAuth form whose percent-encoded bytes are not UTF-8 (`%FC`, as a form in ISO-8859-1
 * encodes `ü`) when its Content-Type declares another charset: the form's values are UTF-8 whatever it declares
 * (RFC 6749 Appendix B). Empty without such a declaration.
 */
export function formCharsetNote(header: string | undefined): string {
  const charset = charsetOf(header);
  if (charset === undefined || isUtf8Label(charset)) return '';
  return `; the form declares charset ${charset || '(empty)'}, but OAuth forms are read in UTF-8 only (RFC 6749 Appendix B): percent-encode the UTF-8 bytes of each character`;
}

/**
 * The name of the form parameter whose value the end of `before` (a form's text up to a bad byte) falls in, as
 * URLSearchParams decodes it; undefined when the bad byte is in a name, or the name is not well percent-encoded.
 */
function formParameterAt(before: string): string | undefined {
  const pair = before.slice(before.lastIndexOf('&') + 1);
  const eq = pair.indexOf('=');
  if (eq < 0) return undefined;
  try {
    return decodeURIComponent(pair.slice(0, eq).replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}

/**
 * The text of a form posted to an OAuth endpoint (token, revocation, introspection, the authorize endpoint's sign-in),
 * read as readLimited reads; one that is not UTF-8 is refused in words about the form (notUtf8Form).
 */
export function readFormBody(req: Request, limit: number): Promise<string> {
  return readText(req, limit, 'oauth-form');
}

/**
 * readLimited for an `application/x-www-form-urlencoded` body of the FHIR API (a `_search` form): one that is not UTF-8
 * names the parameter whose value holds its bad byte, in the message and as its expression, as a value whose
 * percent-encoding is not UTF-8 is named (src/fhir/query-encoding.ts).
 */
export function readFormText(req: Request, limit: number): Promise<string> {
  return readText(req, limit, 'form');
}

/**
 * readLimited for a body that may be a FHIR resource: one that is not UTF-8 names the element its bad byte falls in
 * when its Content-Type is FHIR JSON's (or none: read as FHIR JSON), and says FHIR content is UTF-8 when it is FHIR XML.
 */
export function readFhirText(req: Request, limit: number): Promise<string> {
  const type = req.headers.get('content-type') ?? undefined;
  return readText(req, limit, isXmlBodyType(type) ? 'xml' : type === undefined || isFhirBodyType(type) ? 'json' : 'text');
}

/**
 * Reads at most `limit` bytes of the request body, decoded from its content codings as readLimited reads them (413, 415
 * and 400 as there), as bytes: not decoded as text, so that a body that is not UTF-8 is had as it was sent.
 */
export async function readBytesLimited(req: Request, limit: number): Promise<Uint8Array> {
  const codings = contentCodings(req);
  if (codings.length === 0 && declaredWithin(req, limit) && Number(req.headers.get('content-length')) <= BODY_PIECE) return req.bytes();
  const parts: Uint8Array[] = [];
  // Copies: the stream may reuse a chunk's memory once it is handed back.
  await eachChunk(req, limit, codings, (chunk) => parts.push(chunk.slice()));
  return parts.length === 1 ? parts[0]! : new Uint8Array(Buffer.concat(parts));
}

/**
 * Reads at most `limit` bytes of the request body (decoded, as readLimited) as base64 (RFC 4648
 * section 4, padded); 413 beyond that. Each chunk is encoded as it arrives, its whole 3-byte groups at once and the 0-2 bytes left
 * over carried into the next, so the body's bytes are never held whole beside their text. The bytes carried
 * are completed to a group of their own from the next chunk, whose rest is encoded where it lies: no chunk is
 * copied to be put behind them.
 */
export async function readBase64Limited(req: Request, limit: number): Promise<{ base64: string; size: number }> {
  const codings = contentCodings(req);
  if (codings.length === 0) declaredWithin(req, limit);
  const parts: string[] = [];
  let carry: Uint8Array = new Uint8Array(0);
  let size = 0;
  await eachChunk(req, limit, codings, (chunk) => {
    size += chunk.byteLength;
    let from = 0;
    if (carry.byteLength > 0) {
      from = Math.min(3 - carry.byteLength, chunk.byteLength);
      const group = new Uint8Array(carry.byteLength + from);
      group.set(carry);
      group.set(chunk.subarray(0, from), carry.byteLength);
      if (group.byteLength < 3) {
        carry = group;
        return;
      }
      parts.push(Buffer.from(group).toString('base64'));
    }
    const rest = chunk.byteLength - from;
    const whole = rest - (rest % 3);
    if (whole > 0) parts.push(Buffer.from(chunk.buffer, chunk.byteOffset + from, whole).toString('base64'));
    // A copy: the stream may reuse the chunk's memory once it is handed back.
    carry = chunk.slice(from + whole);
  });
  if (carry.byteLength > 0) parts.push(Buffer.from(carry).toString('base64'));
  return { base64: parts.join(''), size };
}

/** Whether a Content-Type names FHIR XML (or generic XML, read as FHIR XML where a resource is expected). */
export function isXmlBodyType(header: string | undefined): boolean {
  return XML_TYPES.includes(mediaTypeOf(header));
}

/**
 * A resource body's text as its JSON value: FHIR XML (src/fhir/xml/from-xml.ts) by its Content-Type, else
 * FHIR JSON; a 400 naming what is malformed either way. Either is read in slices that let the event loop turn
 * (parseFhirXmlPaced, parseJsonPaced), so that a large Bundle does not hold every other request of the process.
 */
function parseFhirText(text: string, contentType: string | undefined): unknown {
  return isXmlBodyType(contentType) ? parseFhirXmlPaced(text) : parseJsonPaced(text);
}

/** Checks the media type (415 otherwise) and parses the FHIR JSON or XML body (400 when malformed). */
export async function readFhirBody(req: Request, limit: number): Promise<unknown> {
  requireFhirMediaType(req);
  const text = await readFhirText(req, limit);
  if (text.trim() === '') throw new FhirError('structure', 'Request body is empty');
  requireUtf8(req.headers.get('content-type') ?? undefined, text);
  return parseFhirText(text, req.headers.get('content-type') ?? undefined);
}

/** readFhirBody for a body that may be absent (an operation without parameters): undefined when empty. */
export async function readOptionalFhirBody(req: Request, limit: number): Promise<unknown> {
  const text = await readFhirText(req, limit).catch((err: unknown) => {
    // A body that is not UTF-8 is there: one of a media type that is not FHIR's is the 415 it is when readable.
    if (err instanceof FhirError && err.cause instanceof NotUtf8Error) requireFhirMediaType(req);
    throw err;
  });
  if (text.trim() === '') return undefined;
  requireFhirMediaType(req);
  requireUtf8(req.headers.get('content-type') ?? undefined, text);
  return parseFhirText(text, req.headers.get('content-type') ?? undefined);
}


/**
 * FHIR bodies are UTF-8 (R4 http.html, "UTF-8 SHALL be used"; RFC 8259 8.1 for JSON): a Content-Type
 * declaring another `charset` (ISO-8859-1, UTF-16) is a 415, since its text would be misread; `utf-8` in
 * any case, or no charset, is read. `us-ascii` (by any of its names) is read when `text`, the body, holds
 * nothing outside it (ASCII text is the same in UTF-8); without `text` (the body not read yet) it passes
 * here, to be checked again with the body. FHIR XML's own declaration is held to the same
 * (src/fhir/xml/xml-parse.ts).
 */
export function requireUtf8(header: string | undefined, text?: string): void {
  const charset = charsetOf(header);
  if (charset === undefined || isUtf8Label(charset)) return;
  if (isAsciiLabel(charset)) {
    const outside = text === undefined ? undefined : firstNonAscii(text);
    if (outside === undefined) return;
    throw new FhirError('unsupported-media', `Content-Type '${header}' declares charset ${charset}, but the body holds ${outside.code} (character ${outside.at + 1}), which is not US-ASCII: send FHIR bodies in UTF-8, with charset=utf-8 or no charset`);
  }
  throw new FhirError('unsupported-media', `Content-Type '${header}' declares charset ${charset || '(empty)'}: FHIR bodies are read in UTF-8 only (R4 http.html); send them in UTF-8, with charset=utf-8 or no charset`);
}

function requireFhirMediaType(req: Request): void {
  const header = req.headers.get('content-type') ?? undefined;
  const type = mediaTypeOf(header);
  if (!READ_TYPES.includes(type)) {
    throw new FhirError('unsupported-media', `Content-Type '${type || '(none)'}' is not supported: send application/fhir+json or application/fhir+xml`);
  }
  requireUtf8(header);
  // A body of another FHIR version (`fhirVersion=3.0`, FHIR R4 versioning.html) is not R4 content.
  const version = /;\s*fhirversion\s*=\s*"?([^";\s]*)/i.exec(header ?? '')?.[1];
  if (version !== undefined && !R4_VERSION.test(version)) {
    throw new FhirError('unsupported-media', `Content-Type '${header}' names FHIR version ${version}: Cinder takes FHIR R4 (fhirVersion=4.0)`);
  }
}
