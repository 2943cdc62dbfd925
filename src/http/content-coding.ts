/**
 * gzip for answers (RFC 9110 8.4.1.3) as the client's Accept-Encoding (12.5.3) allows: FHIR JSON
 * answers (searches, reads, history, operations, metadata) and export manifests of at least
 * COMPRESS_MIN_CHARS characters, compressed in one call from the text they were made of. A shorter
 * answer is sent as it is without being looked at (unless the client refuses identity), so the common
 * small read or search pays a WeakMap lookup and nothing else. An answer made of a part shared with other
 * answers (the CapabilityStatement's per-type entries) keeps that part's deflated form (partedResponse).
 */

import { constants as zlibConstants, crc32, deflateRawSync } from 'node:zlib';

/**
 * Answers of at least this many characters are compressed (8 KiB; docs/PERFORMANCE.md, "Compressed
 * answers"): below it gzip would save 1-3 KB, which the first round trip carries anyway, for 7-10 µs
 * and a copy on requests of 14-70 µs (a single read, a small search).
 */
export const COMPRESS_MIN_CHARS = 8 * 1024;

/** zlib level 1: FHIR JSON to 7-12% of its size at 1-2 GB/s; level 6 gets 4-9% at a third to a sixth of the speed (docs/PERFORMANCE.md). */
export const GZIP_LEVEL = 1;

/** The text of each answer long enough to compress, by its Response (set where the text is made). */
const texts = new WeakMap<Response, string>();
/** The parts of an answer made of a head, a part shared with other answers, and a tail (partedResponse). */
const parted = new WeakMap<Response, readonly [string, string, string]>();

/**
 * A Response of `head + shared + tail`, where `shared` is the same string across answers (the CapabilityStatement's
 * 1.4 MB of per-type entries: its `date`, in the head, differs with each): compressed, the shared part's deflated
 * form is kept (sharedDeflated) and only the head and tail are deflated per answer.
 */
export function partedResponse(parts: readonly [string, string, string], init: ResponseInit): Response {
  const res = textResponse(parts.join(''), init);
  if (texts.has(res)) parted.set(res, parts);
  return res;
}

/** A Response of `text`, remembered for compression when it is long enough. */
export function textResponse(text: string, init: ResponseInit): Response {
  const res = new Response(text, init);
  if (text.length >= COMPRESS_MIN_CHARS) texts.set(res, text);
  return res;
}

/** Answers of JSON written a part at a time (streamed-text.ts): long, and compressed as a stream when the client prefers gzip. */
const streamed = new WeakSet<Response>();

/** Remembers `res` as an answer of JSON whose body is a stream written a part at a time (streamed-text.ts). */
export function rememberStreamed(res: Response): void {
  streamed.add(res);
}

/** Remembers `res` as carrying `text` (an answer made anew from another, as `_pretty` does). */
export function rememberText(res: Response, text: string): void {
  if (text.length >= COMPRESS_MIN_CHARS) texts.set(res, text);
}

/** The q-values an Accept-Encoding gives gzip, identity and `*` (undefined: not listed). */
interface Qualities {
  gzip: number | undefined;
  identity: number | undefined;
  any: number | undefined;
}

function qualities(header: string): Qualities {
  const q: Qualities = { gzip: undefined, identity: undefined, any: undefined };
  for (const part of header.split(',')) {
    const [coding = '', ...params] = part.split(';');
    const name = coding.trim().toLowerCase();
    const key = name === 'gzip' || name === 'x-gzip' ? 'gzip' : name === 'identity' ? 'identity' : name === '*' ? 'any' : null;
    if (key === null) continue;
    const qParam = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('q='));
    const value = qParam === undefined ? 1 : Number(qParam.slice(2));
    q[key] = Math.max(q[key] ?? 0, Number.isFinite(value) ? Math.min(Math.max(value, 0), 1) : 1);
  }
  return q;
}

/**
 * Whether an answer that can be compressed should be sent in gzip (RFC 9110 12.5.3): gzip is acceptable
 * (listed, or matched by `*`, with q > 0) and not less preferred than identity where the client ranks
 * identity (`identity;q=0.9`, or `*`); identity left unranked is the fallback, not a preference
 * (`br, gzip;q=0.5` takes gzip), and `identity;q=0` ranks it below any acceptable gzip. No header, or an
 * empty one, asks for no coding. When neither is acceptable (`identity;q=0` alone) the answer goes
 * without a coding: RFC 9110 12.1 lets a server disregard the field rather than answer 406.
 */
export function prefersGzip(header: string | null): boolean {
  if (header === null || header.trim() === '') return false;
  const q = qualities(header);
  const gzip = q.gzip ?? q.any ?? 0;
  return gzip > 0 && gzip >= (q.identity ?? q.any ?? 0);
}

/** Whether the client refuses an answer without a coding (`identity;q=0`, or `*;q=0` with identity unlisted). */
export function refusesIdentity(header: string | null): boolean {
  if (header === null || !/identity|\*/i.test(header)) return false;
  const q = qualities(header);
  return (q.identity ?? q.any) === 0;
}

/** Statuses whose answers carry no content (RFC 9110 15.3.5, 15.4.5) or only part of it (206). */
const NO_CODING = new Set([204, 206, 304]);

/**
 * What a GET answer would say of its coding, for a HEAD answer (see src/http/middleware/head.ts): the
 * Content-Encoding and Vary of encode(), without compressing anything (nothing is sent).
 */
export function describeCoding(req: Request, res: Response): void {
  const header = req.headers.get('accept-encoding');
  const long = texts.has(res) || streamed.has(res);
  if (!long && !(refusesIdentity(header) && isJson(res))) return;
  if (NO_CODING.has(res.status) || res.headers.has('content-encoding')) return;
  res.headers.append('Vary', 'Accept-Encoding');
  if (!prefersGzip(header)) return;
  res.headers.set('Content-Encoding', 'gzip');
  res.headers.delete('Content-Length');
  weakenEtag(res.headers);
}

/**
 * The answer as the client's Accept-Encoding would have it: a long text answer in gzip when the client
 * prefers it (with `Vary: Accept-Encoding` either way, as the choice depends on it); a short one as it
 * is, unless the client refuses identity and takes gzip. Not for HEAD (describeCoding).
 */
export function encode(req: Request, res: Response): Response | Promise<Response> {
  const text = texts.get(res);
  if (streamed.has(res)) return streamedEncoded(req, res);
  if (text === undefined) {
    const header = req.headers.get('accept-encoding');
    if (!refusesIdentity(header) || !prefersGzip(header) || !isJson(res) || NO_CODING.has(res.status) || res.headers.has('content-encoding') || !res.body) return res;
    return res.text().then((t) => gzipped(res, t));
  }
  if (NO_CODING.has(res.status) || res.headers.has('content-encoding')) return res;
  const header = req.headers.get('accept-encoding');
  if (prefersGzip(header)) {
    const parts = parted.get(res);
    return parts ? gzippedAnswer(res, gzipOfParts(parts)) : gzipped(res, text);
  }
  res.headers.append('Vary', 'Accept-Encoding');
  return res;
}

function isJson(res: Response): boolean {
  const type = res.headers.get('content-type') ?? '';
  return /^(application\/(fhir\+json|json|fhir\+xml|xml)|text\/xml)\b/.test(type);
}

/** `res` with `text` in gzip: the same status and fields, Content-Encoding and Vary added. */
function gzipped(res: Response, text: string): Response {
  return gzippedAnswer(res, Bun.gzipSync(text, { level: GZIP_LEVEL }));
}

/**
 * encode() of an answer written a part at a time: in gzip as a stream (CompressionStream, whose level is zlib's
 * default, not GZIP_LEVEL) when the client prefers it, its parts still let go as they are written; else as it is.
 */
function streamedEncoded(req: Request, res: Response): Response {
  if (NO_CODING.has(res.status) || res.headers.has('content-encoding') || !res.body) return res;
  if (prefersGzip(req.headers.get('accept-encoding'))) return gzippedAnswer(res, res.body.pipeThrough(new CompressionStream('gzip')));
  res.headers.append('Vary', 'Accept-Encoding');
  return res;
}

/** `res` with `body` (its text in gzip): the same status and fields, Content-Encoding and Vary added. */
function gzippedAnswer(res: Response, body: Uint8Array<ArrayBuffer> | ReadableStream<Uint8Array>): Response {
  const headers = new Headers(res.headers);
  headers.set('Content-Encoding', 'gzip');
  headers.append('Vary', 'Accept-Encoding');
  headers.delete('Content-Length');
  weakenEtag(headers);
  return new Response(body, { status: res.status, statusText: res.statusText, headers });
}

/** A shared part's UTF-8 bytes (for the CRC-32 of the whole) and its deflated form, a block sequence ending on a full flush. */
interface Deflated {
  bytes: Uint8Array;
  deflated: Uint8Array;
}

/** The most shared parts whose deflated form is kept (a few per tenant's lists; 1.4 MB and 0.1 MB each): then the oldest is forgotten. */
export const SHARED_KEPT = 16;
const sharedForms = new Map<string, Deflated>();
const utf8 = new TextEncoder();

/** Raw deflate of `bytes` at GZIP_LEVEL, ending on a full flush (byte-aligned, no final block, no back-reference past it) unless `last`. */
function deflateRaw(bytes: Uint8Array, last: boolean): Uint8Array {
  return deflateRawSync(bytes, { level: GZIP_LEVEL, ...(last ? {} : { finishFlush: zlibConstants.Z_FULL_FLUSH }) });
}

/** The deflated form of `shared`, kept by the string (the same string object is found without reading its 1.4 MB again). */
function sharedDeflated(shared: string): Deflated {
  let known = sharedForms.get(shared);
  if (known === undefined) {
    const bytes = utf8.encode(shared);
    known = { bytes, deflated: deflateRaw(bytes, false) };
    if (sharedForms.size >= SHARED_KEPT) sharedForms.delete(sharedForms.keys().next().value!);
    sharedForms.set(shared, known);
  }
  return known;
}

/**
 * `head + shared + tail` as one gzip member (RFC 1952): its header, the raw deflate of the head (ending on a full
 * flush), the shared part's kept deflated form (which ends on one too, and reads nothing before it: RFC 1951 lets a
 * stream be so cut, as pigz joins the blocks it deflates apart), the tail's (the final block), then the CRC-32 and
 * length of the whole text's bytes. Level GZIP_LEVEL, as gzipped.
 */
export function gzipOfParts(parts: readonly [string, string, string]): Uint8Array<ArrayBuffer> {
  const [head, shared, tail] = parts;
  const { bytes, deflated } = sharedDeflated(shared);
  const headBytes = utf8.encode(head);
  const tailBytes = utf8.encode(tail);
  const blocks = [deflateRaw(headBytes, false), deflated, deflateRaw(tailBytes, true)];
  const out = new Uint8Array(GZIP_HEADER.length + blocks.reduce((n, b) => n + b.length, 0) + 8);
  out.set(GZIP_HEADER, 0);
  let at = GZIP_HEADER.length;
  for (const b of blocks) {
    out.set(b, at);
    at += b.length;
  }
  const trailer = new DataView(out.buffer, at, 8);
  trailer.setUint32(0, crc32(tailBytes, crc32(bytes, crc32(headBytes))) >>> 0, true);
  trailer.setUint32(4, (headBytes.length + bytes.length + tailBytes.length) >>> 0, true);
  return out;
}

/** A gzip member's header (RFC 1952 2.3): deflate, no flags, no time, no extra flags, OS unknown. */
const GZIP_HEADER = new Uint8Array([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);

/**
 * A strong ETag names one sequence of bytes (RFC 9110 8.8.3), which the gzip form is not: it becomes
 * weak. FHIR's version ETags are weak already (`W/"3"`) and stay as they are: both forms are the version.
 */
function weakenEtag(headers: Headers): void {
  const etag = headers.get('etag');
  if (etag !== null && !etag.startsWith('W/')) headers.set('ETag', `W/${etag}`);
}
