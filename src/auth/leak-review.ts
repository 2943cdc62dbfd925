/**
 * What a token forged with leaked signing keys may have set going that outlives the tokens (`cinder keys review`):
 * the Subscriptions written since the leak that notify on an app's authority, and the export and import jobs
 * started since. `cinder keys rotate --compromised` stops every token the old keys signed, but not these: a
 * Subscription notifies on the authority recorded when it was activated, and a job runs on its own.
 *
 * They are found by when, not by which key signed the token behind them. The key is recorded nowhere, and recording
 * it would tell nothing after a leak: `--compromised` withdraws every key there is, so every token of before, forged
 * or not, was signed by a withdrawn key. What a forgery cannot hide is that it came after the keys leaked, a time the
 * operator knows (the backup or dump that was read) and the server does not.
 */
import type { Clock } from '../clock.ts';
import { FhirError } from '../errors.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import { ownerClient, ownerUser } from '../fhir/subscriptions/owner.ts';
import { writeServerStatus } from '../fhir/subscriptions/server-status.ts';
import type { ResourceVersion, Store } from '../store/types.ts';

/** One thing `cinder keys review` lists. */
export interface ReviewItem {
  kind: 'subscription' | 'export' | 'import';
  tenant: string;
  id: string;
  /** The client on whose registration it rests (a Subscription's owner, a job's starter). */
  client: string;
  /** The signed-in user on whose authority it rests, if any. */
  user: string | null;
  /** A Subscription's status, a job's state. */
  state: string;
  /** When it was last written (a Subscription) or created (a job), epoch ms. */
  at: number;
  /** Where a Subscription sends (its channel's endpoint, or its channel type), or the job's kick-off request. */
  target: string;
}

/** A listed Subscription with the version it was listed at, for a stop to write over. */
interface ListedSubscription extends ReviewItem {
  current: ResourceVersion;
  sub: Record<string, unknown>;
}

/** What a review found: the items, and the Subscriptions' versions as read. */
export interface Review {
  items: ReviewItem[];
  subscriptions: ListedSubscription[];
}

function channelTarget(sub: Record<string, unknown>): string {
  const channel = (sub.channel ?? {}) as Record<string, unknown>;
  if (typeof channel.endpoint === 'string') return channel.endpoint;
  const type = channel.type;
  return typeof type === 'string' ? type : typeof type === 'object' && type !== null ? String((type as { code?: unknown }).code ?? '-') : '-';
}

/**
 * The Subscriptions of `tenant` that notify on an app's authority (an owner recorded from a token, not the operator's)
 * and whose current version was written at or after `since`: a forged token's activation, or its edit of another
 * app's Subscription (which records it as the owner), is such a version. A later write by the server (a delivery's
 * `error`) is one too, so more may be listed than a forgery made; never fewer.
 */
async function subscriptionsWrittenSince(store: Store, tenant: string, since: number): Promise<ListedSubscription[]> {
  const found: ListedSubscription[] = [];
  for (const [id, owner] of [...(await store.subscriptions.owners(tenant))].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const client = ownerClient(owner);
    if (client === null) continue;
    const current = await store.resources.read(tenant, 'Subscription', id);
    if (!current || current.deleted || current.lastUpdated < since) continue;
    const sub = JSON.parse(current.content) as Record<string, unknown>;
    found.push({
      kind: 'subscription', tenant, id, client, user: ownerUser(owner)?.id ?? null, state: String(sub.status), at: current.lastUpdated,
      target: channelTarget(sub), current, sub,
    });
  }
  return found;
}

/**
 * Everything of `tenants` that rests on a token and was written (a Subscription) or started (an export or import job)
 * at or after `since` (epoch ms): what a token forged with keys leaked then may have set going.
 */
export async function reviewSince(store: Store, since: number, tenants: string[]): Promise<Review> {
  const subscriptions: ListedSubscription[] = [];
  for (const tenant of tenants) subscriptions.push(...(await subscriptionsWrittenSince(store, tenant, since)));
  const wanted = new Set(tenants);
  const jobs = async (kind: 'export' | 'import') => {
    const rows = await (kind === 'export' ? store.exports.jobs : store.imports).createdSince(since);
    return rows.filter((j) => wanted.has(j.tenant)).map((j): ReviewItem => ({
      kind, tenant: j.tenant, id: j.id, client: j.clientId, user: j.ownerUser, state: j.state, at: j.createdAt, target: j.request,
    }));
  };
  const items = [...subscriptions.map(({ current: _c, sub: _s, ...item }) => item), ...(await jobs('export')), ...(await jobs('import'))];
  return { items, subscriptions };
}

/** The `error` a Subscription stopped by `cinder keys review --stop` carries. */
export function leakStopError(since: number): string {
  return `turned off: written since ${new Date(since).toISOString()}, when the server's signing keys may have leaked, so possibly by a forged token (cinder keys review --stop); an app activates it again (status requested) with a token signed by the new keys`;
}

/** What a stop did: the `tenant/id`s it turned off or cancelled, by kind, and those it could not stop, with why. */
export type Stopped = Record<ReviewItem['kind'], string[]> & { failed: { item: string; reason: string }[] };

/**
 * Stops what `review` listed that still runs: a Subscription in any status but `off` (`error` included: after failed
 * deliveries it is tried again, and a pause is set back) is written `off` with `leakStopError` (as the server, over the version listed: one an app wrote since is left, and is its own
 * new owner's); an export or import job accepted or in progress is cancelled (a running one stops at its next
 * checkpoint; the server's clean-up removes an export's files). `fhir` builds a tenant's FHIR layer for the writes.
 */
export async function stopReviewed(store: Store, clock: Clock, fhir: (tenant: string) => FhirDeps, review: Review, since: number): Promise<Stopped> {
  const stopped: Stopped = { subscription: [], export: [], import: [], failed: [] };
  const layers = new Map<string, FhirDeps>();
  for (const s of review.subscriptions) {
    if (s.state === 'off') continue;
    let layer = layers.get(s.tenant);
    if (!layer) layers.set(s.tenant, (layer = fhir(s.tenant)));
    try {
      if (await writeServerStatus(layer, clock, s.tenant, s.current, s.sub, 'off', leakStopError(since))) stopped.subscription.push(`${s.tenant}/${s.id}`);
    } catch (err) {
      // One that cannot be written (its stored content refused by today's rules) does not keep the others running.
      if (!(err instanceof FhirError) || err.status >= 500) throw err;
      stopped.failed.push({ item: `Subscription ${s.tenant}/${s.id}`, reason: err.message });
    }
  }
  for (const item of review.items) {
    if (item.kind === 'subscription' || (item.state !== 'accepted' && item.state !== 'in-progress')) continue;
    const repo = item.kind === 'export' ? store.exports.jobs : store.imports;
    if ((await repo.cancel(item.tenant, item.id, clock.now())) !== null) stopped[item.kind].push(`${item.tenant}/${item.id}`);
  }
  return stopped;
}
