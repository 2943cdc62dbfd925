/**
 * References inside a `document` or `message` Bundle, which is read as a whole (R4 documents.html,
 * messaging.html), resolved among its entries as R4 bundle.html "Resolving references in Bundles" says: a
 * relative `Type/id` from the base of the referring entry's RESTful fullUrl, an absolute URL or `urn:uuid:`
 * as it is, the version of a versioned reference (`/_history/n`) matched by the entry's `meta.versionId`.
 * bdl-7 lets entries share a fullUrl when their versions differ, so a reference can be ambiguous: an
 * unversioned reference to such a fullUrl names more than one entry, and a versioned one may name a version
 * none of them has. Either is an error at the reference, as HL7's validator reports it. A reference that
 * names no entry at all is left alone (it may name a resource of a server), and so is a versioned one to
 * entries that give no `meta.versionId`.
 */
import { typeModel, type TypeModel } from './model.ts';

type Json = Record<string, unknown>;

/** The walk's state this check needs. */
export interface BundleReferenceScope {
  add(code: 'value', expression: string, text: string): void;
}

const RESTFUL_BASE = /^(https?:\/\/.*\/)[A-Z][A-Za-z]+\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;
const RELATIVE = /^[A-Z][A-Za-z]+\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;
const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:/;
const HISTORY = /\/_history\/([A-Za-z0-9\-.]{1,64})$/;

const isObject = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The references of a `document` or `message` Bundle `b` (at `path`) each name one entry, or none. */
export function checkBundleReferences(scope: BundleReferenceScope, b: Json, path: string): void {
  if ((b.type !== 'document' && b.type !== 'message') || !Array.isArray(b.entry)) return;
  // The versions of each fullUrl's entries (undefined: an entry without meta.versionId).
  const byUrl = new Map<string, (string | undefined)[]>();
  for (const e of b.entry) {
    if (!isObject(e) || typeof e.fullUrl !== 'string' || !isObject(e.resource)) continue;
    const meta = e.resource.meta;
    const version = isObject(meta) && typeof meta.versionId === 'string' ? meta.versionId : undefined;
    byUrl.set(e.fullUrl, [...(byUrl.get(e.fullUrl) ?? []), version]);
  }
  // Only a fullUrl shared by entries can make a reference ambiguous.
  if (![...byUrl.values()].some((versions) => versions.length > 1 || versions[0] !== undefined)) return;
  b.entry.forEach((e, i) => {
    if (!isObject(e) || !isObject(e.resource)) return;
    const model = typeModel(String(e.resource.resourceType));
    if (model === null) return;
    const base = typeof e.fullUrl === 'string' ? RESTFUL_BASE.exec(e.fullUrl)?.[1] : undefined;
    eachReference(e.resource, model, `${path}.entry[${i}].resource`, (ref, at) => {
      let url: string | undefined;
      if (ABSOLUTE.test(ref)) url = ref;
      else if (base !== undefined && RELATIVE.test(ref)) url = base + ref;
      if (url === undefined) return;
      const version = HISTORY.exec(url)?.[1];
      const versions = byUrl.get(version === undefined ? url : url.slice(0, url.length - version.length - 10));
      if (versions === undefined) return;
      if (version !== undefined && versions.some((v) => v !== undefined) && !versions.includes(version)) {
        scope.add('value', `${at}.reference`, `The reference '${ref}' names version ${version}, which no entry of the Bundle with that fullUrl has (their versions: ${versions.map((v) => v ?? 'none').join(', ')})`);
      } else if (version === undefined && versions.length > 1) {
        scope.add('value', `${at}.reference`, `The reference '${ref}' matches ${versions.length} entries of the Bundle (one fullUrl, different versions): a versioned reference (/_history/n) says which`);
      }
    });
  });
}

/** Calls `visit` with each Reference.reference in `obj` (a value of `model` at `path`) and that Reference's path; contained resources included. */
function eachReference(obj: Json, model: TypeModel, path: string, visit: (ref: string, at: string) => void): void {
  if (model.name === 'Reference' && typeof obj.reference === 'string') visit(obj.reference, path);
  for (const key in obj) {
    const slot = model.slots.get(key);
    if (slot === undefined || slot.primitive) continue;
    const value = obj[key];
    const each = (item: unknown, at: string) => {
      if (!isObject(item)) return;
      const inner = slot.type === 'Resource' ? typeModel(String(item.resourceType)) : typeModel(slot.type);
      if (inner !== null) eachReference(item, inner, at, visit);
    };
    if (Array.isArray(value)) value.forEach((item, i) => each(item, `${path}.${slot.step}[${i}]`));
    else each(value, `${path}.${slot.step}`);
  }
}
