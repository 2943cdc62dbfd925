import type { Clock } from '../clock.ts';
import type { Client, Store } from '../store/types.ts';

/** Client records as the token endpoint reads them. */
export interface ClientLookup {
  get(clientId: string): Promise<Client | null>;
}

/**
 * Remembers client records for `ttlMs` (unknown ids too, briefly), so the token endpoint's hot path
 * needs no database read per request. A client disabled or changed in the database is seen by every
 * process within `ttlMs`. Bounded: past `maxEntries` the cache starts over.
 */
export function createClientCache(store: Store, clock: Clock, ttlMs = 5_000, maxEntries = 10_000): ClientLookup {
  const cache = new Map<string, { client: Client | null; until: number }>();
  return {
    async get(clientId) {
      // No client id holds U+0000 (PostgreSQL could not store one); not asked, so both databases answer alike.
      if (clientId.includes('\0')) return null;
      const now = clock.now();
      const hit = cache.get(clientId);
      if (hit && hit.until > now && hit.until - ttlMs <= now) return hit.client;
      const client = await store.clients.get(clientId);
      if (cache.size >= maxEntries) cache.clear();
      cache.set(clientId, { client, until: now + ttlMs });
      return client;
    },
  };
}
