import { Hono, type Context, type Next } from 'hono';
import { FhirError } from '../errors.ts';
import { nativeBinary, splitStoredBinary } from '../fhir/binary.ts';
import { conditionalCreate } from '../fhir/conditional.ts';
import { updatePreconditions } from '../fhir/if-match.ts';
import { createResource, readResource, updateResource, vreadResource, type FhirDeps, type FhirRequest, type WriteResult } from '../fhir/crud.ts';
import type { ResourceVersion } from '../store/types.ts';
import { isFhirBodyType, mediaTypeOf, readBase64Limited } from './body.ts';
import type { AppEnv } from './env.ts';
import { checkAccept, notModified, readConditions, versionHeaders, versionResponse } from './fhir-response.ts';
import { parsePrefer } from './prefer.ts';
import { instanceShape, type Shape } from '../fhir/subset.ts';
import { fhirBaseOf } from '../config.ts';

/** What the Binary routes need: the FHIR deps, the base URL, the Binary size limit and the one write renderer. */
export interface BinaryRouteDeps {
  fhir: FhirDeps;
  baseUrl: string;
  /** CINDER_MAX_BINARY_BYTES, capped by CINDER_MAX_BODY_BYTES. */
  maxBinaryBytes: number;
  writeResponse(c: Context<AppEnv>, written: WriteResult, status: number, base: string): Response;
}

const ID = /^[A-Za-z0-9.-]{1,64}$/;
const INSTANCE = /^\/Binary\/[A-Za-z0-9.-]{1,64}(?:\/_history\/[^/]+)?$/;
const FHIR_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir', 'application/fhir+xml', 'application/xml+fhir'];

/**
 * Whether the path below the FHIR base (`/Binary/1`, `/Binary/1/_history/2`) is one whose `Accept` the
 * Binary routes negotiate themselves: the FHIR gate's JSON-only check would refuse native content.
 */
export function negotiatesAccept(rest: string): boolean {
  return rest.startsWith('/Binary/') && INSTANCE.test(rest);
}

/** A media range's `q` (RFC 9110 12.4.2), 1 when absent or malformed. */
function quality(params: string[]): number {
  for (const p of params) {
    const [k, v] = p.split('=').map((s) => s.trim());
    if (k?.toLowerCase() === 'q') {
      const q = Number(v);
      return Number.isFinite(q) ? Math.min(Math.max(q, 0), 1) : 1;
    }
  }
  return 1;
}

/**
 * How a Binary read answers (FHIR R4 http.html "Binary"): the Binary resource (FHIR JSON, or XML as the
 * format layer writes it) when `_format` or `Accept` asks for a FHIR JSON or XML type at least as much as for the content, otherwise the
 * native content when `Accept` is absent or admits `contentType` (`*`/`*`, `type/*`, the type itself).
 * 406 when `Accept` admits neither, or `_format` names a format other than JSON or XML.
 */
export function binaryRepresentation(accept: string | undefined, format: string | null, contentType: string): 'resource' | 'native' {
  if (format !== null) {
    checkAccept(undefined, format);
    return 'resource';
  }
  if (accept === undefined || accept.trim() === '') return 'native';
  const native = mediaTypeOf(contentType);
  let fhir = 0;
  let content = 0;
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.split(';');
    const type = range.trim().toLowerCase();
    const q = quality(params);
    if (FHIR_TYPES.includes(type)) fhir = Math.max(fhir, q);
    if (type === native || type === '*/*' || (type.endsWith('/*') && native.startsWith(type.slice(0, -1)))) content = Math.max(content, q);
  }
  if (fhir > 0 && fhir >= content) return 'resource';
  if (content > 0) return 'native';
  throw new FhirError('not-acceptable', `Accept '${accept}' admits neither this Binary's content type '${contentType}' nor a FHIR format (application/fhir+json, application/fhir+xml)`);
}

/**
 * A Binary version as its native content: the decoded bytes with the Binary's contentType. For HEAD
 * (`head`) no body, and the length of what GET sends told from the base64 text (RFC 9110 9.3.2).
 */
function nativeResponse(v: ResourceVersion, head: boolean): Response {
  const { resource, data } = splitStoredBinary(v.content);
  const { body, length } = head ? { body: null, length: decodedLength(data) } : decoded(data);
  const headers: Record<string, string> = {
    ...versionHeaders(v),
    'Content-Type': fieldValue(String(resource.contentType)),
    'Content-Length': String(length),
    // The content is whatever a client stored: never let a browser guess it into something active.
    'X-Content-Type-Options': 'nosniff',
    // The content or the resource, as Accept asks (binaryRepresentation): a browser keeps this read, and must not give it to a
    // later fetch asking for FHIR JSON (RFC 9110 12.5.5); compressed, content-coding.ts appends Accept-Encoding.
    Vary: 'Accept',
  };
  // Nor run what it is: stored HTML or SVG opened from this origin would read the user's tokens and call the API
  // as them. `sandbox` renders it in an opaque origin, with no script, forms, popups or top navigation; fetch and
  // download clients ignore it. Not on a PDF, which browsers refuse to show sandboxed (their viewers run no page
  // script). No Content-Disposition: Medplum dropped it, as it turns every image and PDF into a download.
  if (mediaTypeOf(String(resource.contentType)) !== 'application/pdf') headers['Content-Security-Policy'] = 'sandbox';
  const context = (resource.securityContext as { reference?: unknown } | undefined)?.reference;
  if (typeof context === 'string') headers['X-Security-Context'] = fieldValue(context);
  return new Response(body, { status: 200, headers });
}

/**
 * A stored FHIR string as an HTTP field value: its characters outside visible US-ASCII and space percent-encoded
 * as UTF-8 (RFC 3987 3.1, an IRI mapped to a URI), as RFC 9110 5.5 asks of new fields and as a field value must
 * be octets (`€` is none: setting it threw, a 500); ASCII text is unchanged.
 */
function fieldValue(text: string): string {
  return text.replace(/[^\x20-\x7e]+/g, (run) => [...Buffer.from(run, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''));
}

/** The number of bytes base64 `data` decodes to (RFC 4648 section 4); data holding whitespace is decoded to count them. */
function decodedLength(data: string): number {
  if (/\s/.test(data)) return Buffer.from(data, 'base64').byteLength;
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return (data.length / 4) * 3 - padding;
}

/** Base64 characters decoded per chunk of a streamed answer (3 MiB of content). */
const STREAM_CHARS = 4 * 1024 * 1024;

/**
 * The bytes of base64 `data` as a response body. Large content without whitespace (as native writes
 * store it) is decoded chunk by chunk while it is sent, so a read never holds the decoded whole beside
 * the stored text; anything else (small, or base64 written with line breaks) is decoded at once.
 */
function decoded(data: string): { body: BodyInit; length: number } {
  if (data.length <= STREAM_CHARS || /\s/.test(data)) {
    const bytes = Buffer.from(data, 'base64');
    return { body: bytes, length: bytes.byteLength };
  }
  let at = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      // STREAM_CHARS is a multiple of 4: every chunk but the last decodes whole 3-byte groups.
      controller.enqueue(Buffer.from(data.slice(at, at + STREAM_CHARS), 'base64'));
      at += STREAM_CHARS;
      if (at >= data.length) controller.close();
    },
  });
  return { body, length: decodedLength(data) };
}

/** Reads a native body as a Binary resource: `contentType` as sent, `data` its bytes, `X-Security-Context` its context. */
async function nativeBody(c: Context<AppEnv>, limit: number, id?: string) {
  const contentType = c.req.header('content-type')?.trim() ?? '';
  const type = mediaTypeOf(contentType);
  if (type === '') throw new FhirError('unsupported-media', 'Content-Type is missing: send the content\'s own media type, or application/fhir+json for a Binary resource');
  if (type.includes('fhir')) {
    throw new FhirError('unsupported-media', `Content-Type '${type}' is not supported: send application/fhir+json or application/fhir+xml, or the content's own media type`);
  }
  const { base64 } = await readBase64Limited(c.req.raw, limit);
  const securityContext = c.req.header('x-security-context');
  return nativeBinary({ contentType, base64, ...(securityContext === undefined ? {} : { securityContext }) }, id);
}

/**
 * `Binary` with native content (FHIR R4 http.html "Binary"): create and update from a body in any
 * non-FHIR media type, and read/vread answering the content itself unless a FHIR format is asked for.
 * FHIR JSON bodies and every other Binary interaction fall through to the generic routes.
 */
export function binaryRoutes(d: BinaryRouteDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const request = (c: Context<AppEnv>): FhirRequest => ({ tenant: c.get('tenant'), access: c.get('access') });
  const base = (c: Context<AppEnv>) => fhirBaseOf(d.baseUrl, c.get('tenant'));
  const format = (c: Context<AppEnv>) => (c.req.url.includes('_format=') ? (c.req.query('_format') ?? null) : null);
  /** `_summary` / `_elements`, which shape the FHIR JSON representation (native content is not a resource). */
  const shapeOf = (c: Context<AppEnv>) => instanceShape(new URL(c.req.url).searchParams, parsePrefer(c.req.header('prefer')).get('handling') === 'strict');
  const represent = (c: Context<AppEnv>, v: ResourceVersion, shape: Shape | undefined) => {
    const unchanged = notModified(v, readConditions(c.req.raw.headers));
    if (unchanged) return unchanged;
    const contentType = String(splitStoredBinary(v.content).resource.contentType ?? '');
    return binaryRepresentation(c.req.header('accept'), format(c), contentType) === 'native' ? nativeResponse(v, c.req.method === 'HEAD') : versionResponse(v, shape);
  };
  // The gate leaves Accept on these paths to us (negotiatesAccept): anything but a read answers FHIR JSON.
  const acceptJson = async (c: Context<AppEnv>, next: Next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD') checkAccept(c.req.header('accept'), format(c));
    await next();
  };
  app.use('/Binary/:id', acceptJson);
  app.use('/Binary/:id/_history/:vid', acceptJson);

  app.get('/Binary/:id', async (c, next) => {
    const id = c.req.param('id');
    if (!ID.test(id)) return next();
    const shape = shapeOf(c);
    return represent(c, await readResource(d.fhir, request(c), 'Binary', id), shape);
  });
  app.get('/Binary/:id/_history/:vid', async (c) => {
    const { id, vid } = c.req.param();
    const shape = shapeOf(c);
    return represent(c, await vreadResource(d.fhir, request(c), 'Binary', id, vid), shape);
  });
  app.post('/Binary', async (c, next) => {
    if (isFhirBodyType(c.req.header('content-type'))) return next();
    const resource = await nativeBody(c, d.maxBinaryBytes);
    const ifNoneExist = c.req.header('if-none-exist');
    const written = ifNoneExist === undefined
      ? await createResource(d.fhir, request(c), 'Binary', resource)
      : await conditionalCreate(d.fhir, request(c), 'Binary', resource, ifNoneExist);
    return d.writeResponse(c, written, written.created ? 201 : 200, base(c));
  });
  app.put('/Binary/:id', async (c, next) => {
    if (isFhirBodyType(c.req.header('content-type'))) return next();
    const pre = updatePreconditions((name) => c.req.header(name));
    const id = c.req.param('id');
    const resource = await nativeBody(c, d.maxBinaryBytes, id);
    const written = await updateResource(d.fhir, request(c), 'Binary', id, resource, pre);
    return d.writeResponse(c, written, written.created ? 201 : 200, base(c));
  });
  return app;
}
