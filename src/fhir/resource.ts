import { FhirError } from '../errors.ts';
import { ID_PATTERN, isResourceType } from './resource-types.ts';

export type Resource = Record<string, unknown> & { resourceType: string; id?: string; meta?: Record<string, unknown> };

/** Parses a request body as JSON, or throws a 400 OperationOutcome saying where it is malformed. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new FhirError('structure', `Request body is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
}

/** Checks that `body` is a resource of a known R4 type (and of `expectedType` when given). */
export function asResource(body: unknown, expectedType?: string): Resource {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new FhirError('structure', 'Request body must be a JSON object holding a FHIR resource');
  }
  const r = body as Record<string, unknown>;
  if (typeof r.resourceType !== 'string') {
    throw new FhirError('required', 'Resource has no resourceType', { expression: ['resourceType'] });
  }
  if (!isResourceType(r.resourceType)) {
    throw new FhirError('not-supported', `Unknown resource type '${r.resourceType}'`, { expression: ['resourceType'] });
  }
  if (expectedType && r.resourceType !== expectedType) {
    throw new FhirError('invalid', `Resource type '${r.resourceType}' does not match the URL's type '${expectedType}'`, {
      expression: ['resourceType'],
    });
  }
  if (r.id !== undefined && (typeof r.id !== 'string' || !ID_PATTERN.test(r.id))) {
    throw new FhirError('value', `Invalid resource id ${JSON.stringify(r.id)}: expected 1-64 of [A-Za-z0-9.-]`, { expression: ['id'] });
  }
  if (r.meta !== undefined && (r.meta === null || typeof r.meta !== 'object' || Array.isArray(r.meta))) {
    throw new FhirError('structure', 'meta must be an object', { expression: ['meta'] });
  }
  return r as Resource;
}

/** Checks a type and id taken from a URL. */
export function checkTypeAndId(type: string, id?: string): void {
  if (!isResourceType(type)) throw new FhirError('not-found', `Unknown resource type '${type}'`);
  if (id !== undefined && !ID_PATTERN.test(id)) throw new FhirError('invalid', `Invalid resource id '${id}'`);
}

/**
 * The stored JSON text of a version: `resourceType`, `id`, `meta` (with `versionId` and `lastUpdated`)
 * first, then the other elements in their given order.
 */
export function stamp(resource: Resource, id: string, versionId: number, lastUpdated: number): string {
  const { resourceType, id: _id, meta, ...rest } = resource;
  const { versionId: _v, lastUpdated: _l, ...metaRest } = (meta ?? {}) as Record<string, unknown>;
  return JSON.stringify({
    resourceType,
    id,
    meta: { versionId: String(versionId), lastUpdated: new Date(lastUpdated).toISOString(), ...metaRest },
    ...rest,
  });
}

/** A random server-assigned id (UUID v4 form, a valid FHIR id). */
export function newId(): string {
  return crypto.randomUUID();
}
