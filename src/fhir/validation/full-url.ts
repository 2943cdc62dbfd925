/**
 * A Bundle entry's fullUrl agrees with its resource (FHIR R4 Bundle.entry.fullUrl: it "SHALL NOT
 * disagree with the id in the resource"): a fullUrl that is a RESTful URL (`[base]/Type/id`, or the
 * relative `Type/id`; references.html's pattern, with or without `/_history/n`) names the resource's own
 * type and id. Anything else (`urn:uuid:`, `urn:oid:`, a URL of another shape) says nothing to disagree
 * with, and neither does an entry whose resource has no id (a create's temporary fullUrl, http.html
 * 3.1.0.11.2). A versioned fullUrl is bdl-8's to refuse; its type and id are compared all the same.
 */
import { R4_RESOURCE_TYPES } from '../resource-types.ts';

type Json = Record<string, unknown>;

/** The walk's state this check needs. */
export interface FullUrlScope {
  add(code: 'value', expression: string, text: string): void;
}

const RESOURCE_TYPES: ReadonlySet<string> = new Set(R4_RESOURCE_TYPES);
/** R4 references.html's RESTful URL: an optional http(s) base, then `Type/id`, then an optional `/_history/vid`. */
const RESTFUL_URL = /^(?:https?:\/\/(?:[A-Za-z0-9\-\\.:%$]*\/)+)?([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;

/** The fullUrl of `entry` (a Bundle.entry at `path`) names the type and id of its resource, when it is a RESTful URL and the resource has an id. */
export function checkFullUrl(scope: FullUrlScope, entry: Json, path: string): void {
  const { fullUrl, resource } = entry;
  if (typeof fullUrl !== 'string' || resource === null || typeof resource !== 'object' || Array.isArray(resource)) return;
  const { resourceType, id } = resource as Json;
  if (typeof resourceType !== 'string' || typeof id !== 'string') return;
  const m = RESTFUL_URL.exec(fullUrl);
  if (m === null || !RESOURCE_TYPES.has(m[1]!) || (m[1] === resourceType && m[2] === id)) return;
  scope.add('value', `${path}.fullUrl`, `The fullUrl ${JSON.stringify(fullUrl)} is the RESTful URL of ${m[1]}/${m[2]}, but the entry's resource is ${resourceType}/${id}: a fullUrl may not disagree with the resource's type and id`);
}
