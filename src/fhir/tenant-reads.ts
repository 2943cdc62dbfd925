/**
 * What `metadata` reads of a tenant's own resources (its SubscriptionTopics, its profiles), kept per tenant
 * until the store's change token of the types it is read from moves.
 */
import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { Store } from '../store/types.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import { BoundedCache } from '../terminology/compile/bounded-cache.ts';
import { ChangeWatch } from '../terminology/store-watch.ts';

export interface TenantReadsOptions<T> {
  store: Store;
  clock: Clock;
  log: Logger;
  /** The types whose change token decides when `load` runs again. */
  types: string[];
  /** How long a read of the change token is trusted (ms). */
  checkIntervalMs: number;
  /** The tenant's value, read from the store. */
  load: (tenant: string) => Promise<T>;
  /** What `of` gives when the first read fails. */
  empty: T;
  /** What the warning logged for a failed read says. */
  failure: string;
}

interface TenantValue<T> {
  watch: ChangeWatch;
  /** The value read under a change token. */
  read?: { token: string; value: T };
  loading?: { token: string; value: Promise<T> };
}

/** The tenants whose values are kept at once (then the least recently asked is read again when asked). */
const TENANTS_KEPT = 1_024;

/**
 * Each tenant's value, read again when the store's change token of `types` moves: that token is read at
 * most every `checkIntervalMs`, and at once after `markChanged` (a write of this process), so another
 * process's change shows within that interval.
 */
export class TenantReads<T> {
  private readonly tenants = new BoundedCache<string, TenantValue<T>>(TENANTS_KEPT);

  constructor(private readonly options: TenantReadsOptions<T>) {}

  /** Called after a write of this process in `tenant`: the next `of` reads the change token again. */
  markChanged(tenant: string): void {
    this.tenants.get(tenant)?.watch.markStale();
  }

  /**
   * The tenant's value: at once while its change token is the one it was read under. `metadata` needed no
   * database before it listed what a tenant holds, so a failed read gives the last value read (or `empty`)
   * and is logged.
   */
  of(tenant: string): SyncOrAsync<T> {
    const t = this.state(tenant);
    const token = t.watch.changeToken();
    if (typeof token === 'string' && t.read?.token === token) return t.read.value;
    return this.current(t, tenant, token).catch((err: unknown) => {
      this.options.log.warn(this.options.failure, { tenant, err });
      return t.read?.value ?? this.options.empty;
    });
  }

  private current(t: TenantValue<T>, tenant: string, token: SyncOrAsync<string>): Promise<T> {
    return Promise.resolve(token).then((tok) => {
      if (t.read?.token === tok) return t.read.value;
      if (t.loading?.token !== tok) {
        // Read after the token, so the value is at least as new as the token it is kept under.
        const loading = { token: tok, value: this.options.load(tenant) };
        t.loading = loading;
        loading.value.then((value) => {
          if (t.loading === loading) {
            t.read = { token: tok, value };
            t.loading = undefined;
          }
        }, () => {
          if (t.loading === loading) t.loading = undefined;
        });
      }
      return t.loading.value;
    });
  }

  private state(tenant: string): TenantValue<T> {
    let t = this.tenants.get(tenant);
    if (!t) {
      t = { watch: new ChangeWatch(tenant, this.options.types, { ...this.options }) };
      this.tenants.set(tenant, t);
    }
    return t;
  }
}
