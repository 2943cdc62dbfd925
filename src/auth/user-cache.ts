import type { Clock } from '../clock.ts';
import type { Store, User } from '../store/types.ts';
import { CLIENT_CACHE_TTL_MS } from './client-cache.ts';

/** Reads a tenant's user by id, as the Subscription hub and delivery do for each owner's authority. */
export type UserLookup = (tenant: string, userId: string) => Promise<User | null>;

/**
 * Remembers user records for `ttlMs` (unknown ids too), as the client cache remembers clients, so that matching a
 * write against Subscriptions activated on users' authority needs no database read per write: a user disabled or
 * deleted, or whose tokens were revoked (`cinder user ...`), is seen by every process within `ttlMs`. Bounded: past
 * `maxEntries` the cache starts over.
 */
export function createUserCache(store: Store, clock: Clock, ttlMs = CLIENT_CACHE_TTL_MS, maxEntries = 10_000): UserLookup {
  const cache = new Map<string, { user: Promise<User | null>; until: number }>();
  return (tenant, userId) => {
    // No id holds U+0000 (PostgreSQL could not store one); not asked, so both databases answer alike.
    if (tenant.includes('\0') || userId.includes('\0')) return Promise.resolve(null);
    const now = clock.now();
    const key = `${tenant}\u0000${userId}`;
    const hit = cache.get(key);
    if (hit && hit.until > now && hit.until - ttlMs <= now) return hit.user;
    const user = store.users.get(tenant, userId);
    if (cache.size >= maxEntries) cache.clear();
    cache.set(key, { user, until: now + ttlMs });
    // A failed read is not remembered: the next asks again.
    user.catch(() => cache.get(key)?.user === user && cache.delete(key));
    return user;
  };
}
