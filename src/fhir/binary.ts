import { FhirError } from '../errors.ts';
import { parseReference, type ParsedReference } from './references.ts';
import { isResourceType } from './resource-types.ts';
import type { Resource } from './resource.ts';

/** Binary content sent in its own media type (FHIR R4 http.html "Binary"), already base64-encoded. */
export interface NativeContent {
  /** The request's Content-Type, parameters included (`text/plain; charset=utf-8`). */
  contentType: string;
  /** The bytes, base64 (RFC 4648, padded). */
  base64: string;
  /** `X-Security-Context`: a reference to the resource whose access rules apply. */
  securityContext?: string;
}

/**
 * The Binary resource holding native content (FHIR R4 binary.html), `data` last: that is how its
 * stored text ends, which lets a raw read find the data without parsing the JSON (splitStoredBinary).
 * Empty content has no `data`, and reads back as zero bytes.
 */
export function nativeBinary(content: NativeContent, id?: string): Resource {
  const binary: Resource = { resourceType: 'Binary', ...(id === undefined ? {} : { id }), contentType: content.contentType };
  if (content.securityContext !== undefined) {
    if (content.securityContext.trim() === '') throw new FhirError('invalid', 'X-Security-Context is empty: send a reference such as Patient/123');
    binary.securityContext = { reference: content.securityContext.trim() };
  }
  // An empty body is an empty file: a Binary without data (FHIR strings, base64Binary included, may not be empty).
  if (content.base64 !== '') binary.data = content.base64;
  return binary;
}

/** A stored Binary: its elements other than `data`, and `data` (base64, '' when absent). */
export interface StoredBinary {
  resource: Resource;
  data: string;
}

const DATA_KEY = '"data":"';

/**
 * Splits the stored JSON text of a Binary. When `data` is its last element (every Binary written
 * from native content, and most written as JSON) the base64 is taken as a substring and only the
 * rest is parsed; otherwise the whole text is parsed.
 */
export function splitStoredBinary(content: string): StoredBinary {
  // The first `"data":"` (a forward search, which is memchr-fast where a backward one is not) is the
  // top-level element when its string closes right before the final `}`, which closes the resource:
  // base64 holds no quote. Otherwise (a `data` nested in an extension first, or escapes) the text is parsed.
  const at = content.indexOf(DATA_KEY);
  const start = at + DATA_KEY.length;
  // A backslash means JSON escapes (`\r\n` between base64 lines): only a parse gives the real text.
  if (at > 0 && content.endsWith('"}') && content.indexOf('"', start) === content.length - 2 && content.indexOf('\\', start) < 0) {
    const resource = JSON.parse(content.slice(0, at).replace(/,\s*$/, '') + '}') as Resource;
    return { resource, data: content.slice(start, content.length - 2) };
  }
  const { data, ...resource } = JSON.parse(content) as Resource;
  return { resource: resource as Resource, data: typeof data === 'string' ? data : '' };
}

/**
 * The local resource a Binary's `securityContext` names: undefined without one, null when it names
 * nothing known to be this tenant's (contained, `urn:`, logical references, or absolute URLs but those
 * under `base`, the tenant's FHIR base: `{base}/Patient/p` is the tenant's `Patient/p`, as everywhere).
 */
export function securityContextTarget(binary: Resource, base: string | undefined): ParsedReference | null | undefined {
  const context = binary.securityContext as { reference?: unknown } | undefined;
  if (context === undefined) return undefined;
  const reference = context.reference;
  if (typeof reference !== 'string') return null;
  const parsed = parseReference(reference, base);
  return parsed !== null && isResourceType(parsed.type) ? parsed : null;
}
