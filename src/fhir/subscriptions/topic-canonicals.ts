/**
 * The SubscriptionTopics a tenant's CapabilityStatement advertises (R5 Backport IG 1.1.0, topic discovery in
 * R4: the capabilitystatement-subscriptiontopic-canonical extension on Subscription's `rest.resource`), read
 * from the store and kept until its change token of Basic moves.
 */
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { Store } from '../../store/types.ts';
import type { SyncOrAsync } from '../../sync-or-async.ts';
import { BoundedCache } from '../../terminology/compile/bounded-cache.ts';
import { ChangeWatch } from '../../terminology/store-watch.ts';
import { CHECK_INTERVAL_MS } from './hub.ts';
import { tenantTopics, type Topic } from './topics.ts';

/**
 * The canonicals by which a Subscription's criteria names each active topic (findTopic's rule), sorted: its `url`
 * when no other active topic has it, and `url|version` for a versioned one that no other active topic shares,
 * as a client pinning the version subscribes (Inferno's topic discovery looks for each Subscription's criteria as
 * written). A topic that neither names alone (two active ones of one url, one of them without a version) cannot
 * be subscribed to, and is left out.
 */
export function advertisedCanonicals(topics: Topic[]): string[] {
  const active = topics.filter((t) => t.status === 'active');
  const out = new Set<string>();
  for (const t of active) {
    const named = active.filter((u) => u.url === t.url);
    if (named.length === 1) out.add(t.url);
    if (t.version !== undefined && named.filter((u) => u.version === t.version).length === 1) out.add(`${t.url}|${t.version}`);
  }
  return [...out].sort();
}

interface TenantCanonicals {
  watch: ChangeWatch;
  /** The list read under a change token. */
  read?: { token: string; canonicals: string[] };
  loading?: { token: string; canonicals: Promise<string[]> };
}

/** The tenants whose lists are kept at once (then the least recently asked is read again when asked). */
const TENANTS_KEPT = 1_024;

/**
 * Each tenant's advertised topic canonicals, read again when the store's change token of Basic moves:
 * that token is read at most every CHECK_INTERVAL_MS (250 ms, as the subscription hub's), and at once after
 * `markChanged` (a write of this process), so another process's change shows within 250 ms.
 */
export class TopicCanonicals {
  private readonly tenants = new BoundedCache<string, TenantCanonicals>(TENANTS_KEPT);

  constructor(private readonly options: { store: Store; clock: Clock; log: Logger }) {}

  /** Called after a write of this process in `tenant`: the next `of` reads the change token again. */
  markChanged(tenant: string): void {
    this.tenants.get(tenant)?.watch.markStale();
  }

  /**
   * The tenant's list: at once while its change token is the one it was read under. `metadata` needed no
   * database before it listed topics, so a failed read gives the last list read (or none) and is logged.
   */
  of(tenant: string): SyncOrAsync<string[]> {
    const t = this.state(tenant);
    const token = t.watch.changeToken();
    if (typeof token === 'string' && t.read?.token === token) return t.read.canonicals;
    return this.current(t, tenant, token).catch((err: unknown) => {
      this.options.log.warn('the SubscriptionTopics of a tenant could not be read: the CapabilityStatement lists the last ones read', { tenant, err });
      return t.read?.canonicals ?? [];
    });
  }

  private current(t: TenantCanonicals, tenant: string, token: SyncOrAsync<string>): Promise<string[]> {
    return Promise.resolve(token).then((tok) => {
      if (t.read?.token === tok) return t.read.canonicals;
      if (t.loading?.token !== tok) {
        // Read after the token, so the list is at least as new as the token it is kept under.
        const loading = { token: tok, canonicals: this.load(tenant) };
        t.loading = loading;
        loading.canonicals.then((canonicals) => {
          if (t.loading === loading) {
            t.read = { token: tok, canonicals };
            t.loading = undefined;
          }
        }, () => {
          if (t.loading === loading) t.loading = undefined;
        });
      }
      return t.loading.canonicals;
    });
  }

  private state(tenant: string): TenantCanonicals {
    let t = this.tenants.get(tenant);
    if (!t) {
      t = { watch: new ChangeWatch(tenant, ['Basic'], { ...this.options, checkIntervalMs: CHECK_INTERVAL_MS }) };
      this.tenants.set(tenant, t);
    }
    return t;
  }

  private async load(tenant: string): Promise<string[]> {
    return advertisedCanonicals(await tenantTopics(this.options, tenant, this.options.clock.now()));
  }
}
