/**
 * The key dictionary of the search index (`search_keys`): each index row names its tenant, resource
 * type, parameter and, for tokens, system (for quantities, unit system and code) by one integer `k`.
 * Keys are created by writers as they meet them, never changed and never deleted, so a key once
 * committed can be cached for the life of a store instance. What both adapters share is here: which
 * key an entry has, and the cache's name for a key.
 */
import type { AnyIndexEntry, IndexEntryRecord, IndexTableSpec } from './index-tables.ts';
import { INDEX_TABLES, rowsOf } from './index-tables.ts';
import type { IndexRows, SharedKey } from './types.ts';

/** What a key stands for ('' for a part that does not apply). */
export interface SearchKey {
  tenant: string;
  type: string;
  param: string;
  system: string;
  code: string;
}

/** The key of an entry of `spec`'s table. */
export function entryKey(spec: IndexTableSpec, tenant: string, type: string, entry: AnyIndexEntry | IndexEntryRecord): SearchKey {
  const e = entry as unknown as IndexEntryRecord;
  const [system, code] = spec.key;
  return {
    tenant, type, param: e.param as string,
    system: system === undefined ? '' : ((e[system] as string | undefined) ?? ''),
    code: code === undefined ? '' : ((e[code] as string | undefined) ?? ''),
  };
}

/** A key's name in a cache: its parts, each but the last after its length, so no two keys share a name. */
export function keyName(k: SearchKey): string {
  return `${k.tenant.length}:${k.tenant}${k.type.length}:${k.type}${k.param.length}:${k.param}${k.system.length}:${k.system}${k.code}`;
}

/** The k of an index entry of `spec`'s table, of a version of `type` (the tenant is the writer's). */
export type KeyOf = (spec: IndexTableSpec, type: string, e: AnyIndexEntry | IndexEntryRecord) => number;

/** One level of resolved keys: the next part's levels, or at the last part the key. */
type Level = Map<string, Level | number>;

/** The level below `level` for `part`, made when missing. */
function step(level: Level, part: string): Level {
  let next = level.get(part) as Level | undefined;
  if (next === undefined) level.set(part, (next = new Map()));
  return next;
}

/**
 * `resolve` asked once per distinct key, the rest answered by the entry's shared key (one Map lookup
 * by identity) or level by level (table, type, param, system, code): a batch names a few hundred keys
 * over hundreds of thousands of rows, and looking the parts up costs far less than naming each row's
 * key. For one writer or batch (its keys cannot change meanwhile).
 */
export function memoizedKeyOf(resolve: KeyOf): KeyOf {
  const seen = new Map<IndexTableSpec, Level>();
  const shared = new Map<SharedKey, number>();
  return (spec, type, e) => {
    const r = e as unknown as IndexEntryRecord & { key?: SharedKey };
    if (r.key !== undefined) {
      let k = shared.get(r.key);
      if (k === undefined) shared.set(r.key, (k = resolve(spec, type, e)));
      return k;
    }
    const [system, code] = spec.key;
    let level = seen.get(spec);
    if (level === undefined) seen.set(spec, (level = new Map()));
    level = step(step(step(level, type), r.param as string), system === undefined ? '' : ((r[system] as string | undefined) ?? ''));
    const last = code === undefined ? '' : ((r[code] as string | undefined) ?? '');
    let k = level.get(last) as number | undefined;
    if (k === undefined) level.set(last, (k = resolve(spec, type, e)));
    return k;
  };
}

/** Most keys a cache holds: systems and units come from the data, so the dictionary has no bound of its own. */
export const MAX_CACHED_KEYS = 100_000;

/**
 * Committed keys by name, for one store instance. Past MAX_CACHED_KEYS it starts afresh: a key it no
 * longer holds is read again when next needed.
 */
export function createKeyCache() {
  const known = new Map<string, number>();
  return {
    get: (name: string) => known.get(name),
    set(name: string, k: number): void {
      if (known.size >= MAX_CACHED_KEYS && !known.has(name)) known.clear();
      known.set(name, k);
    },
  };
}

export type KeyCache = ReturnType<typeof createKeyCache>;

/**
 * The distinct keys of these versions' index rows, by name: those `cache` holds with their k, and the
 * others still to be read or created.
 */
export function batchKeys(tenant: string, versions: { type: string; index: IndexRows }[], cache: KeyCache) {
  const known = new Map<string, number>();
  const missing = new Map<string, SearchKey>();
  const shared = new Set<SharedKey>();
  for (const v of versions) {
    for (const spec of INDEX_TABLES) {
      for (const e of rowsOf(v.index, spec)) {
        // Entries sharing a key object have the same key: named once.
        const ref = (e as { key?: SharedKey }).key;
        if (ref !== undefined) {
          if (shared.has(ref)) continue;
          shared.add(ref);
        }
        const key = entryKey(spec, tenant, v.type, e);
        const name = keyName(key);
        if (known.has(name) || missing.has(name)) continue;
        const k = cache.get(name);
        if (k === undefined) missing.set(name, key);
        else known.set(name, k);
      }
    }
  }
  return { known, missing };
}
