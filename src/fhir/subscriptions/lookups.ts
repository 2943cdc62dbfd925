/**
 * The chains and `_has` of a tenant's Subscription criteria, looked up for one write (hub.ts match): each
 * lookup (search-match.ts: a chain's `[_id in the references, ...its conditions]`, a `_has`'s
 * `[the reference to this resource, ...its conditions]`) reads the resources its first condition names
 * once, and matches the rest in memory on them, for every subscription. So a thousand subscriptions
 * chaining through a write's `subject` read that subject once, not a thousand searches inside the
 * write's transaction. When the first condition names more than CANDIDATES resources, the lookup is the
 * search it was (each distinct one once).
 */
import type { IndexRows, ResourceVersion, SearchQuery, TextEntry } from '../../store/types.ts';
import { findResources, type StoredReads } from '../core-search.ts';
import type { FhirDeps } from '../crud.ts';
import { indexEntries } from '../indexer.ts';
import { matchConditions, type MatchContext } from '../search-match.ts';
import { textIndexOf } from '../text-index.ts';

/** The most resources one first condition may name to be matched in memory. */
export const CANDIDATES = 100;

/** A resource read for lookups, with its index rows and words made once. */
interface Candidate {
  version: ResourceVersion;
  resource: Record<string, unknown>;
  rows?: IndexRows;
  words?: TextEntry | null;
}

/**
 * A MatchContext for the subscriptions matched against one write in `tenant`, its stored resources read through
 * `reads`: the write's own transaction (ResourceWriter.search and present), which sees what it wrote, and where a
 * read on another connection of the PostgreSQL pool could wait for ever on a pool that concurrent writes fill.
 */
export function cachedLookups(deps: FhirDeps, tenant: string, reads: StoredReads): MatchContext {
  const base = deps.fhirBase?.(tenant);
  const sets = new Map<string, Promise<Candidate[] | undefined>>();
  const searched = new Map<string, Promise<boolean>>();
  const candidates = (query: SearchQuery): Promise<Candidate[] | undefined> => {
    const key = `${query.type}\u0000${JSON.stringify(query.where![0])}`;
    let set = sets.get(key);
    if (!set) {
      set = findResources(deps, tenant, { type: query.type, where: [query.where![0]!], sort: [], count: CANDIDATES + 1 }, reads).then((rows) =>
        rows.length > CANDIDATES ? undefined : rows.map((version) => ({ version, resource: JSON.parse(version.content) as Record<string, unknown> })));
      sets.set(key, set);
    }
    return set;
  };
  const ctx: MatchContext = {
    exists: async (query) => {
      const [first, ...rest] = query.where ?? [];
      const found = first === undefined ? undefined : await candidates(query);
      if (found === undefined) {
        const key = `${query.type}\u0000${JSON.stringify(query.where ?? [])}`;
        let hit = searched.get(key);
        if (!hit) {
          hit = findResources(deps, tenant, { ...query, sort: [], count: 1 }, reads).then((rows) => rows.length > 0);
          searched.set(key, hit);
        }
        return hit;
      }
      for (const c of found) {
        const rows = (c.rows ??= indexEntries(c.resource, base));
        const words = () => (c.words === undefined ? (c.words = textIndexOf(c.resource) ?? null) : c.words) ?? undefined;
        if (await matchConditions(c.resource, c.version.lastUpdated, rest, ctx, rows, words)) return true;
      }
      return false;
    },
    ...(base !== undefined && { base }),
  };
  return ctx;
}
