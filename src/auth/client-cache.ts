import type { Clock } from '../clock.ts';
import type { Client, Store } from '../store/types.ts';

/** Client records as the token endpoint reads them. */
export interface ClientLookup {
  get(clientId: string): Promise<Client | null>;
  /** When `client` (as `get` returned it) was read from the database, epoch ms: a token issued on it says so (`crt`). */
  readAt(client: Client): number;
  /**
   * The records of `clientIds` (null for an unknown one), those the cache does not hold read in one statement
   * together: what a write's Subscription owners cost once the cache lapsed, not one read per client.
   */
  getMany(clientIds: Iterable<string>): Promise<Map<string, Client | null>>;
}

/** How long a process trusts a client record it read (the longest a disabled client's token requests may still be taken). */
export const CLIENT_CACHE_TTL_MS = 5_000;

/**
 * Remembers client records for `ttlMs` (unknown ids too, briefly), so the token endpoint's hot path
 * needs no database read per request. A client disabled or changed in the database is seen by every
 * process within `ttlMs`. Bounded: past `maxEntries` the cache starts over.
 */
export function createClientCache(store: Store, clock: Clock, ttlMs = CLIENT_CACHE_TTL_MS, maxEntries = 10_000): ClientLookup {
  const cache = new Map<string, { client: Client | null; until: number }>();
  const readAt = new WeakMap<Client, number>();
  const remember = (clientId: string, client: Client | null, now: number) => {
    if (client) readAt.set(client, now);
    if (cache.size >= maxEntries) cache.clear();
    cache.set(clientId, { client, until: now + ttlMs });
  };
  const cached = (clientId: string, now: number) => {
    const hit = cache.get(clientId);
    return hit && hit.until > now && hit.until - ttlMs <= now ? hit : undefined;
  };
  return {
    readAt: (client) => readAt.get(client) ?? clock.now(),
    async get(clientId) {
      // No client id holds U+0000 (PostgreSQL could not store one); not asked, so both databases answer alike.
      if (clientId.includes('\0')) return null;
      const now = clock.now();
      const hit = cached(clientId, now);
      if (hit) return hit.client;
      // Taken before the read: the record is at least as new as this, which is what a revocation is compared with.
      const client = await store.clients.get(clientId);
      remember(clientId, client, now);
      return client;
    },
    async getMany(clientIds) {
      const now = clock.now();
      const out = new Map<string, Client | null>();
      const missing: string[] = [];
      for (const id of clientIds) {
        if (out.has(id)) continue;
        const hit = id.includes('\0') ? { client: null } : cached(id, now);
        out.set(id, hit ? hit.client : null);
        if (!hit) missing.push(id);
      }
      if (!missing.length) return out;
      const found = new Map((await store.clients.getMany(missing)).map((c) => [c.clientId, c]));
      for (const id of missing) {
        const client = found.get(id) ?? null;
        remember(id, client, now);
        out.set(id, client);
      }
      return out;
    },
  };
}
