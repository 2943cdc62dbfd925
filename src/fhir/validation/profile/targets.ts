/**
 * The resources a reference can be resolved to without reading the store (R4 references.html,
 * "Contained resources"; bundle.html, "Resolving references in Bundles"): `#id` among the contained
 * resources of the resource it is made in (its container's, from a contained resource; `#` is the
 * container), and an entry of the Bundle it is in by `fullUrl` (an absolute reference or `urn:uuid:`
 * as it is; a relative `Type/id` from the base of the referring entry's RESTful fullUrl). A stored
 * resource is never read: that would cost a read per reference, and tell a `$validate` caller something
 * about resources it may not be allowed to read (HAPI's validator does not resolve them by default either).
 */
type Json = Record<string, unknown>;

export interface TargetScope {
  /** The resource `ref` names, made from `from` (a resource of the scope); undefined when it is not held here. */
  resolve(ref: string, from: Json): Json | undefined;
}

interface Place {
  /** The resource a contained one is in. */
  container?: Json;
  /** The Bundle entry it is the resource of (or its container is). */
  fullUrl?: string;
  bundle?: Map<string, Json>;
}

const RESTFUL = /^(.*\/)?[A-Z][A-Za-z]+\/[A-Za-z0-9\-.]{1,64}(\/_history\/[A-Za-z0-9\-.]{1,64})?$/;
const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:/;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The scope of `root` and every resource inside it, indexed on the first resolution (most checks resolve nothing). */
export function targetScope(root: Json): TargetScope {
  let places: Map<Json, Place> | undefined;
  return {
    resolve(ref, from) {
      places ??= index(root);
      const place = places.get(from) ?? {};
      if (ref.startsWith('#')) {
        const host = place.container ?? from;
        if (ref === '#') return place.container;
        const list = Array.isArray(host.contained) ? host.contained : [];
        return list.find((c): c is Json => isObject(c) && c.id === ref.slice(1));
      }
      if (place.bundle === undefined) return undefined;
      if (ABSOLUTE.test(ref)) return place.bundle.get(ref);
      const m = place.fullUrl === undefined ? null : RESTFUL.exec(place.fullUrl);
      return m === null ? undefined : place.bundle.get(`${m[1] ?? ''}${ref}`);
    },
  };
}

/**
 * A transaction's entries, validated once their references are rewritten to `Type/id`: a reference
 * resolves to the resource an entry writes under that id (`written`, by `Type/id`), `#id` as in
 * targetScope. What the transaction leaves stored is what its entries write.
 */
export function writtenScope(written: ReadonlyMap<string, Json>): TargetScope {
  const held = targetScope({ resourceType: 'Bundle', entry: [...written.values()].map((resource) => ({ resource })) });
  return {
    resolve(ref, from) {
      if (ref.startsWith('#')) return held.resolve(ref, from);
      const at = ref.indexOf('/_history/');
      return written.get(at < 0 ? ref : ref.slice(0, at));
    },
  };
}

function index(root: Json): Map<Json, Place> {
  const out = new Map<Json, Place>();
  visit(out, root, {});
  return out;
}

function visit(out: Map<Json, Place>, r: Json, place: Place): void {
  if (out.has(r)) return;
  out.set(r, place);
  if (Array.isArray(r.contained)) for (const c of r.contained) if (isObject(c)) visit(out, c, { ...place, container: r });
  if (r.resourceType !== 'Bundle' || !Array.isArray(r.entry)) return;
  const bundle = new Map<string, Json>();
  const entries: [Json, string | undefined][] = [];
  const twice = new Set<string>();
  for (const e of r.entry) {
    if (!isObject(e) || !isObject(e.resource)) continue;
    const fullUrl = typeof e.fullUrl === 'string' ? e.fullUrl : undefined;
    // Two entries with one fullUrl make it ambiguous (bundle.html): it resolves to neither.
    if (fullUrl !== undefined && bundle.has(fullUrl)) twice.add(fullUrl);
    else if (fullUrl !== undefined) bundle.set(fullUrl, e.resource);
    entries.push([e.resource, fullUrl]);
  }
  for (const url of twice) bundle.delete(url);
  for (const [resource, fullUrl] of entries) visit(out, resource, fullUrl === undefined ? { bundle } : { bundle, fullUrl });
}
