/**
 * References across the files of one `cinder import` run. Synthea and similar tools write shared
 * resources (hospitals, practitioners) and Groups in Bundles of their own, whose entries other Bundles
 * name by `urn:uuid:` fullUrl. The run remembers `Type/id` of every entry it wrote under its fullUrl
 * (FHIR R4 bundle.html#references, widened from one Bundle to the run) and resolves later references
 * against it; what refers to an entry not written yet is deferred (src/fhir/import/deferred.ts).
 */
import type { FullUrlScope } from '../bundle-ops.ts';
import { isUrnReference, walkReferences } from '../references.ts';

/** fullUrl -> `Type/id` of what this run wrote. About 200 bytes a `urn:` entry; other fullUrls are not kept. */
export interface RunReferences extends FullUrlScope {
  has(fullUrl: string): boolean;
  readonly size: number;
}

export function createRunReferences(): RunReferences {
  const map = new Map<string, string>();
  return {
    get: (fullUrl) => map.get(fullUrl),
    has: (fullUrl) => map.has(fullUrl),
    // Only `urn:` fullUrls: an absolute one already says where its resource lives.
    written: (fullUrl, reference) => void (isUrnReference(fullUrl) && map.set(fullUrl, reference)),
    get size() {
      return map.size;
    },
  };
}

/** Whether `node` holds a `urn:uuid:` or `urn:oid:` reference (stops at the first). */
export function hasUrnReference(node: unknown): boolean {
  if (Array.isArray(node)) return node.some(hasUrnReference);
  if (node === null || typeof node !== 'object') return false;
  const obj = node as Record<string, unknown>;
  if (typeof obj.reference === 'string' && isUrnReference(obj.reference)) return true;
  for (const key in obj) {
    const value = obj[key];
    if (value !== null && typeof value === 'object' && hasUrnReference(value)) return true;
  }
  return false;
}

/**
 * Rewrites the `urn:` references of `resource` that `local` (its own Bundle's entries) or the run
 * knows to `Type/id`, in place; returns the ones neither knows, in order, without repeats.
 */
export function resolveUrns(resource: unknown, run: FullUrlScope, local?: ReadonlyMap<string, string>): string[] {
  const unresolved = new Set<string>();
  walkReferences(resource, (holder) => {
    if (!isUrnReference(holder.reference)) return;
    const mapped = local?.get(holder.reference) ?? run.get(holder.reference);
    if (mapped) holder.reference = mapped;
    else unresolved.add(holder.reference);
  });
  return [...unresolved];
}
