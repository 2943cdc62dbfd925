import { ID_PATTERN, isResourceType } from './resource-types.ts';

export interface ParsedReference {
  type: string;
  id: string;
  version?: string;
}

const TAIL = /(?:^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/([A-Za-z0-9\-.]{1,64}))?$/;

/** An absolute URL (a scheme, `http://...`). */
const ABSOLUTE = /^[a-z][a-z0-9+.-]*:/i;

/**
 * Parses a literal reference to a resource of this tenant into its parts: relative (`Type/id`,
 * `Type/id/_history/v`), or absolute under `base`, the tenant's FHIR base (`{base}/Type/id`; search.html:
 * a relative reference and the absolute URL it resolves to are the same reference). Another server's
 * URL (any absolute URL when `base` is not given), a contained (`#x`), `urn:` or conditional reference
 * gives null.
 */
export function parseReference(reference: string, base?: string): ParsedReference | null {
  const slash = reference.indexOf('/');
  if (slash > 0 && reference.indexOf('/', slash + 1) < 0) {
    // `Type/id`, the common form: what TAIL would find, without running it.
    const type = reference.slice(0, slash);
    const id = reference.slice(slash + 1);
    return isResourceType(type) && ID_PATTERN.test(id) ? { type, id } : null;
  }
  if (reference.startsWith('#') || reference.startsWith('urn:') || reference.includes('?')) return null;
  if (ABSOLUTE.test(reference)) {
    if (base === undefined || !reference.startsWith(`${base}/`)) return null;
    const rest = reference.slice(base.length + 1);
    return ABSOLUTE.test(rest) ? null : parseReference(rest);
  }
  const m = TAIL.exec(reference);
  if (!m || !isResourceType(m[1]!) || !ID_PATTERN.test(m[2]!)) return null;
  const parsed: ParsedReference = { type: m[1]!, id: m[2]! };
  if (m[3]) parsed.version = m[3];
  return parsed;
}

/** Whether a reference is an absolute URL (of this server or another). */
export function isAbsoluteReference(reference: string): boolean {
  return ABSOLUTE.test(reference);
}

/** The type an absolute URL names in its path (`http://other.org/fhir/Patient/1`: Patient), if any. */
export function absoluteType(url: string): string | undefined {
  const path = /^[a-z][a-z0-9+.-]*:\/\/[^/]*\/(.*)$/i.exec(url)?.[1];
  return path === undefined ? undefined : parseReference(path)?.type;
}

/** A `urn:uuid:` or `urn:oid:` reference: it can only name a Bundle entry by its fullUrl. */
export function isUrnReference(reference: string): boolean {
  return reference.startsWith('urn:uuid:') || reference.startsWith('urn:oid:');
}

/** Calls `visit` for every object with a string `reference` property anywhere in `node`. */
export function walkReferences(node: unknown, visit: (holder: { reference: string }) => void): void {
  if (Array.isArray(node)) {
    for (const item of node) walkReferences(item, visit);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const obj = node as Record<string, unknown>;
  if (typeof obj.reference === 'string') visit(obj as { reference: string });
  for (const key in obj) {
    const value = obj[key];
    if (value !== null && typeof value === 'object') walkReferences(value, visit);
  }
}
