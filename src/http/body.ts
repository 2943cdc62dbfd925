import { FhirError } from '../errors.ts';
import { parseJson } from '../fhir/resource.ts';

const FHIR_BODY_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir'];

/** Reads at most `limit` bytes of the request body as text; 413 beyond that. */
export async function readLimited(req: Request, limit: number): Promise<string> {
  const length = req.headers.get('content-length');
  if (length !== null) {
    const declared = Number(length);
    if (declared > limit) throw new FhirError('too-large', `Request body of ${declared} bytes exceeds the limit of ${limit} bytes`);
    // With a declared length within the limit the server frames the body: read it natively, without
    // materialising `req.body` as a stream (which costs more than the read itself).
    if (declared <= limit) return req.text();
  }
  if (!req.body) return '';
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw new FhirError('too-large', `Request body exceeds the limit of ${limit} bytes`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Checks the media type (415 otherwise) and parses the FHIR JSON body (400 when malformed). */
export async function readFhirBody(req: Request, limit: number): Promise<unknown> {
  const type = (req.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (!FHIR_BODY_TYPES.includes(type)) {
    throw new FhirError('unsupported-media', `Content-Type '${type || '(none)'}' is not supported: send application/fhir+json`);
  }
  const text = await readLimited(req, limit);
  if (text.trim() === '') throw new FhirError('structure', 'Request body is empty');
  return parseJson(text);
}
