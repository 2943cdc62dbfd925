import type { IndexRows, ResourceVersion, SearchQuery } from '../store/types.ts';
import { keysetSort } from '../store/search-sql.ts';
import { hasCoreResources, type CoreLayer } from './core-layer.ts';
import type { FhirDeps } from './crud.ts';
import { indexEntries } from './indexer.ts';
import type { MatchContext } from './search-match.ts';
import { searchOrder, type Key, type SearchOrder, type Sortable } from './search-order.ts';

/** Core matches whose shadowing is looked up in one query, at most (and at least, while more are needed). */
const PRESENCE_BATCH = 500;
const PRESENCE_MIN = 64;

/** A page of stored and core resources merged in sort order. */
export interface MergedPage {
  rows: ResourceVersion[];
  /**
   * Where the next page starts, for sorts paged by offset, after the first `n` rows: stored rows to
   * skip (the store's offset) and the position in the sorted core matches.
   */
  offsets(n: number): { store: number; core: number };
}

/** Whether `query` reads the core layer: CodeSystem and ValueSet searches, outside a compartment. */
export function searchesCore(deps: Pick<FhirDeps, 'core'>, query: SearchQuery): deps is FhirDeps & { core: CoreLayer } {
  return deps.core !== undefined && hasCoreResources(query.type) && query.compartment === undefined;
}

/**
 * The stored resources of `query` (store paging: `after`, `offset`) and the core ones not shadowed by a
 * resource of the tenant with the same id (live or deleted), merged in the query's order, at most
 * `query.count`. `coreOffset`: where the previous page left the core matches, for offset paging.
 */
export async function searchWithCore(
  deps: FhirDeps & { core: CoreLayer }, tenant: string, query: SearchQuery, coreOffset = 0, reads: StoredReads = poolReads(deps, tenant),
): Promise<MergedPage> {
  const order = searchOrder(query.sort);
  const after = query.after;
  // The core side (matches, then the tenant's shadowing rows) runs beside the store's search.
  const fromCore = sortedCore(deps, tenant, query, order, reads).then((core) => {
    let start = coreOffset;
    if (after !== undefined && keysetSort(query.sort)) {
      const cursor = order.keys(sortable({ type: query.type, id: after.id, lastUpdated: after.lastUpdated, versionId: 0, deleted: false, content: '' }));
      start = firstAfter(core, (hit) => order.compare(hit.keys(), cursor) > 0);
    }
    return unshadowed(reads, query.type, core, start, query.count);
  });
  const [stored, picked] = await Promise.all([reads.search(query), fromCore]);
  const rows: ResourceVersion[] = [];
  /** Per merged row: the position after it in the core matches, or -1 for a stored row. */
  const corePos: number[] = [];
  let i = 0;
  let j = 0;
  const storedKeys = stored.map((v) => order.keys(sortable(v)));
  while (rows.length < query.count && (i < stored.length || j < picked.length)) {
    if (j >= picked.length || (i < stored.length && order.compare(storedKeys[i]!, picked[j]!.hit.keys()) <= 0)) {
      rows.push(stored[i++]!);
      corePos.push(-1);
    } else {
      const { hit, at } = picked[j++]!;
      rows.push(hit.version);
      corePos.push(at + 1);
    }
  }
  return {
    rows,
    offsets(n) {
      let store = query.offset ?? 0;
      let core = coreOffset;
      for (let k = 0; k < n && k < corePos.length; k++) {
        if (corePos[k] === -1) store++;
        else core = corePos[k]!;
      }
      return { store, core };
    },
  };
}

/** How many stored and unshadowed core resources `query` matches. */
export async function countWithCore(deps: FhirDeps & { core: CoreLayer }, tenant: string, query: SearchQuery): Promise<number> {
  const [stored, core] = await Promise.all([deps.store.resources.count(tenant, query), deps.core.search(query.type, query.where ?? [], lookups(deps, tenant))]);
  return stored + (await unshadowed(poolReads(deps, tenant), query.type, core, 0, core.length)).length;
}

/**
 * The first `query.count` resources of `query`, core ones included where searchesCore says so: for
 * lookups that do not page (`_include`, `_revinclude`, chains evaluated in memory, scope filters).
 */
export async function findResources(deps: FhirDeps, tenant: string, query: SearchQuery, reads: StoredReads = poolReads(deps, tenant)): Promise<ResourceVersion[]> {
  if (!searchesCore(deps, query)) return reads.search(query);
  return (await searchWithCore(deps, tenant, query, 0, reads)).rows;
}

/**
 * How a search reads the tenant's stored resources: its own (ResourceRepo.search) and which core CodeSystems and
 * ValueSets it shadows (ResourceRepo.present). On the pool (`poolReads`), or, inside a write's transaction, through
 * its writer (ResourceWriter.search and present: what it wrote is seen, and no other connection of the pool is
 * waited for; ARCHITECTURE.md, "inside a write transaction, read only through the writer").
 */
export interface StoredReads {
  search(query: SearchQuery): Promise<ResourceVersion[]>;
  present(type: string, ids: string[]): Promise<string[]>;
}

/** The tenant's stored resources read on the pool (outside a write's transaction). */
export function poolReads(deps: Pick<FhirDeps, 'store'>, tenant: string): StoredReads {
  return { search: (query) => deps.store.resources.search(tenant, query), present: (type, ids) => deps.store.resources.present(tenant, type, ids) };
}

/** Chains and `_has` in conditions matched in memory look their other side up here (core included), through `reads`. */
export function lookups(deps: FhirDeps, tenant: string, reads: StoredReads = poolReads(deps, tenant)): MatchContext {
  const base = deps.fhirBase?.(tenant);
  return { exists: async (query) => (await findResources(deps, tenant, { ...query, count: 1 }, reads)).length > 0, ...(base !== undefined && { base }) };
}

/** A core match with its sort keys (read when first needed). */
interface SortedHit {
  readonly version: ResourceVersion;
  keys(): Key[];
}

/**
 * The core matches of `query`, in its order. They come in id order, and every core resource has the
 * same lastUpdated, so a keyset sort (by `_id` or `_lastUpdated`, ties by id) is that order or its
 * reverse and reads no keys; a sort on parameters reads each match's keys once.
 */
async function sortedCore(deps: FhirDeps & { core: CoreLayer }, tenant: string, query: SearchQuery, order: SearchOrder, reads: StoredReads): Promise<SortedHit[]> {
  const hits = await deps.core.search(query.type, query.where ?? [], lookups(deps, tenant, reads));
  const sorted = hits.map((hit): SortedHit => {
    let keys: Key[] | undefined;
    return { version: hit.version, keys: () => (keys ??= order.keys({ version: hit.version, rows: () => hit.rows })) };
  });
  const keyset = keysetSort(query.sort);
  if (keyset === undefined) return sorted.map((hit) => ({ hit, keys: hit.keys() })).sort((a, b) => order.compare(a.keys, b.keys)).map((x) => x.hit);
  return keyset.descending ? sorted.reverse() : sorted;
}

/** The position of the first of `sorted` for which `after` holds (it holds for every later one too). */
function firstAfter<T>(sorted: readonly T[], after: (item: T) => boolean): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (after(sorted[mid]!)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

function sortable(version: ResourceVersion): Sortable {
  let rows: IndexRows | undefined;
  return { version, rows: () => (rows ??= indexEntries(JSON.parse(version.content) as Record<string, unknown>, undefined)) };
}

/**
 * Up to `limit` of `hits` from position `start` on whose id the tenant has no resource of its own,
 * each with its position; the tenant's rows are looked up a batch at a time, only as far as needed.
 */
async function unshadowed<T extends { version: ResourceVersion }>(
  reads: StoredReads, type: string, hits: readonly T[], start: number, limit: number,
): Promise<{ hit: T; at: number }[]> {
  const out: { hit: T; at: number }[] = [];
  let at = start;
  while (at < hits.length && out.length < limit) {
    const batch = hits.slice(at, at + Math.min(PRESENCE_BATCH, Math.max(PRESENCE_MIN, limit - out.length)));
    const present = new Set(await reads.present(type, batch.map((h) => h.version.id)));
    for (const h of batch) {
      if (out.length < limit && !present.has(h.version.id)) out.push({ hit: h, at });
      at++;
    }
  }
  return out;
}
