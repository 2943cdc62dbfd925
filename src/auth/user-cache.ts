import type { Clock } from '../clock.ts';
import type { Store, User } from '../store/types.ts';
import { CLIENT_CACHE_TTL_MS } from './client-cache.ts';

/** Reads a tenant's user by id, as the Subscription hub and delivery do for each owner's authority. */
export type UserLookup = (tenant: string, userId: string) => Promise<User | null>;

/** Reads a tenant's users by id (null for an unknown one), those not cached in one statement: a write's Subscription owners. */
export type UsersLookup = (tenant: string, userIds: Iterable<string>) => Promise<Map<string, User | null>>;

/**
 * Remembers user records for `ttlMs` (unknown ids too), as the client cache remembers clients, so that matching a
 * write against Subscriptions activated on users' authority needs no database read per write: a user disabled or
 * deleted, or whose tokens were revoked (`cinder user ...`), is seen by every process within `ttlMs`. Bounded: past
 * `maxEntries` the cache starts over.
 */
export function createUserCache(store: Store, clock: Clock, ttlMs = CLIENT_CACHE_TTL_MS, maxEntries = 10_000): UserLookup & { many: UsersLookup } {
  const cache = new Map<string, { user: Promise<User | null>; until: number }>();
  const cached = (key: string, now: number) => {
    const hit = cache.get(key);
    return hit && hit.until > now && hit.until - ttlMs <= now ? hit.user : undefined;
  };
  const remember = (key: string, user: Promise<User | null>, now: number) => {
    if (cache.size >= maxEntries) cache.clear();
    cache.set(key, { user, until: now + ttlMs });
    // A failed read is not remembered: the next asks again.
    user.catch(() => cache.get(key)?.user === user && cache.delete(key));
  };
  const one: UserLookup = (tenant, userId) => {
    // No id holds U+0000 (PostgreSQL could not store one); not asked, so both databases answer alike.
    if (tenant.includes('\0') || userId.includes('\0')) return Promise.resolve(null);
    const now = clock.now();
    const key = `${tenant}\u0000${userId}`;
    const hit = cached(key, now);
    if (hit) return hit;
    const user = store.users.get(tenant, userId);
    remember(key, user, now);
    return user;
  };
  const many: UsersLookup = async (tenant, userIds) => {
    const now = clock.now();
    const pending = new Map<string, Promise<User | null>>();
    const missing: string[] = [];
    for (const id of userIds) {
      if (pending.has(id)) continue;
      if (tenant.includes('\0') || id.includes('\0')) {
        pending.set(id, Promise.resolve(null));
        continue;
      }
      const hit = cached(`${tenant}\u0000${id}`, now);
      if (hit) pending.set(id, hit);
      else missing.push(id);
    }
    if (missing.length) {
      // One statement for them all; each is remembered as its own entry, as a read of it alone would be.
      const read = store.users.getMany(tenant, missing).then((users) => new Map(users.map((u) => [u.id, u])));
      for (const id of missing) {
        const user = read.then((found) => found.get(id) ?? null);
        remember(`${tenant}\u0000${id}`, user, now);
        pending.set(id, user);
      }
    }
    const out = new Map<string, User | null>();
    for (const [id, user] of pending) out.set(id, await user);
    return out;
  };
  return Object.assign(one, { many });
}
