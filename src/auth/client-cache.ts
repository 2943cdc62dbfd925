import type { Clock } from '../clock.ts';
import type { Client, Store } from '../store/types.ts';

/** Client records as the token endpoint reads them. */
export interface ClientLookup {
  get(clientId: string): Promise<Client | null>;
  /** When `client` (as `get` returned it) was read from the database, epoch ms: a token issued on it says so (`crt`). */
  readAt(client: Client): number;
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
  return {
    readAt: (client) => readAt.get(client) ?? clock.now(),
    async get(clientId) {
      // No client id holds U+0000 (PostgreSQL could not store one); not asked, so both databases answer alike.
      if (clientId.includes('\0')) return null;
      const now = clock.now();
      const hit = cache.get(clientId);
      if (hit && hit.until > now && hit.until - ttlMs <= now) return hit.client;
      // Taken before the read: the record is at least as new as this, which is what a revocation is compared with.
      const client = await store.clients.get(clientId);
      if (client) readAt.set(client, now);
      if (cache.size >= maxEntries) cache.clear();
      cache.set(clientId, { client, until: now + ttlMs });
      return client;
    },
  };
}
