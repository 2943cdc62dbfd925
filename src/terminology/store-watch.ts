import type { ResourceVersion, Store } from '../store/types.ts';
import type { Clock } from '../clock.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import { BoundedCache } from './compile/bounded-cache.ts';

/** What ChangeWatch reads: the store, the clock and how long a token read is trusted (ms). */
export interface WatchOptions {
  readonly store: Store;
  readonly clock: Clock;
  readonly checkIntervalMs: number;
}

/**
 * Stored versions parsed once: the same version always yields the same object. A version is known by its number
 * and time: once `$expunge` has removed a resource, a new one of the same id starts again at version 1.
 */
export class ParsedVersions<T> {
  private readonly cache: BoundedCache<string, { readonly versionId: number; readonly lastUpdated: number; readonly resource: T }>;

  constructor(
    private readonly parse: (json: unknown, what: string) => T,
    capacity: number,
  ) {
    this.cache = new BoundedCache(capacity);
  }

  of(v: ResourceVersion): T {
    const key = `${v.type}/${v.id}`;
    const cached = this.cache.get(key);
    if (cached !== undefined && cached.versionId === v.versionId && cached.lastUpdated === v.lastUpdated) return cached.resource;
    const resource = this.parse(JSON.parse(v.content), key);
    this.cache.set(key, { versionId: v.versionId, lastUpdated: v.lastUpdated, resource });
    return resource;
  }
}

/**
 * The store's change token of some resource types of a tenant, re-read at most every checkIntervalMs,
 * and given at once once read; `markStale` (a write of this process) makes the next call read it.
 */
export class ChangeWatch {
  private token: Promise<string> | undefined;
  /** What `token` resolved to, while it is still the current read. */
  private settled: string | undefined;
  private checkedAt = 0;

  constructor(
    private readonly tenant: string,
    private readonly types: string[],
    private readonly options: WatchOptions,
  ) {}

  markStale(): void {
    this.token = undefined;
    this.settled = undefined;
  }

  changeToken(): SyncOrAsync<string> {
    const now = this.options.clock.now();
    if (this.token === undefined || !this.fresh(now)) {
      const token = this.options.store.resources.changeToken(this.tenant, this.types);
      this.token = token;
      this.settled = undefined;
      this.checkedAt = now;
      token.then(
        (value) => {
          if (this.token === token) this.settled = value;
        },
        () => {
          if (this.token === token) this.token = undefined;
        },
      );
    }
    return this.settled ?? this.token;
  }

  private fresh(now: number): boolean {
    return now - this.checkedAt < this.options.checkIntervalMs && now >= this.checkedAt;
  }
}

