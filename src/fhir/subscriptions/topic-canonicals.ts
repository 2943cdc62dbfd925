/**
 * The SubscriptionTopics a tenant's CapabilityStatement advertises (R5 Backport IG 1.1.0, topic discovery in
 * R4: the capabilitystatement-subscriptiontopic-canonical extension on Subscription's `rest.resource`), read
 * from the store and kept until its change token of Basic moves (TenantReads).
 */
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { Store } from '../../store/types.ts';
import { TenantReads } from '../tenant-reads.ts';
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

/**
 * Each tenant's advertised topic canonicals (TenantReads), read again when the store's change token of Basic
 * moves: that token is read at most every CHECK_INTERVAL_MS (250 ms, as the subscription hub's), and at once
 * after `markChanged` (a write of this process), so another process's change shows within 250 ms.
 */
export function topicCanonicals(options: { store: Store; clock: Clock; log: Logger }): TenantReads<string[]> {
  return new TenantReads({
    ...options,
    types: ['Basic'],
    checkIntervalMs: CHECK_INTERVAL_MS,
    load: async (tenant) => advertisedCanonicals(await tenantTopics(options, tenant, options.clock.now())),
    empty: [],
    failure: 'the SubscriptionTopics of a tenant could not be read: the CapabilityStatement lists the last ones read',
  });
}
