import { FhirError } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import { etag } from '../fhir/bundle.ts';

export const FHIR_JSON = 'application/fhir+json; charset=utf-8';

const JSON_TYPES = ['application/fhir+json', 'application/json', 'application/json+fhir'];

/** Checks `Accept` and `_format` (FHIR R4 http 3.1.0.1.10): JSON only, otherwise 406. */
export function checkAccept(accept: string | undefined, format: string | null): void {
  if (format !== null && !['json', ...JSON_TYPES].includes(format.split(';')[0]!.trim())) {
    throw new FhirError('not-acceptable', `_format '${format}' is not supported: Cinder speaks FHIR JSON`);
  }
  if (!accept) return;
  const ok = accept.split(',').some((part) => {
    const type = part.split(';')[0]!.trim().toLowerCase();
    return type === '*/*' || type === 'application/*' || JSON_TYPES.includes(type) || type === 'application/fhir+ndjson' || type === 'application/ndjson';
  });
  if (!ok) throw new FhirError('not-acceptable', `Accept '${accept}' is not supported: Cinder answers application/fhir+json`);
}

/** Headers of a response carrying one resource version. */
export function versionHeaders(v: ResourceVersion): Record<string, string> {
  return { ETag: etag(v.versionId), 'Last-Modified': new Date(v.lastUpdated).toUTCString() };
}

/** A JSON response with the FHIR media type. */
export function fhirJson(body: string | object, status = 200, headers?: Record<string, string>): Response {
  return new Response(typeof body === 'string' ? body : JSON.stringify(body), {
    status,
    headers: headers === undefined ? JSON_HEADERS : { 'Content-Type': FHIR_JSON, ...headers },
  });
}

/** A Headers object as init: Response copies it natively (cheaper than reading a plain object); never mutated. */
const JSON_HEADERS = new Headers({ 'Content-Type': FHIR_JSON });
