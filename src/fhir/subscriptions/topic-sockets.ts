/**
 * What the websocket channel of topic-based Subscriptions (R5 Backport IG) sends, for sockets.ts, which holds
 * the sockets: `bind-with-token {token}` checked (a token of `$get-ws-binding-token` for the socket's tenant,
 * naming an active topic-based websocket Subscription whose owner is still the one the token was issued for) and
 * answered with a handshake Bundle; each event's
 * notification Bundle and each heartbeat Bundle as JSON text (topic-bundle.ts), built once per delivery round
 * for every socket bound to the Subscription, which is read once per round (a Subscription no longer active
 * is sent nothing, nor one whose owner is no longer the one it was bound for: another app activated it again, nor one
 * whose owner's recorded scopes no longer let it search what it selects by today's rules: owner-reach.ts, nor one whose
 * owner's client is disabled or whose owner's user lost the authority it was activated on, as delivery.ts drops a
 * rest-hook's: events recorded before the disable would go on being sent, full resources included, until the
 * Subscription was paused, and for good when it never was, the client disabled behind `cinder`'s back).
 */
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { RecentNotification, Store } from '../../store/types.ts';
import type { WsBindingTokens } from './operations.ts';
import { ownerDigest, ownerSilenced, type OwnerAuthority } from './owner.ts';
import { grantReaches } from './owner-reach.ts';
import { topicBundle, type TopicBundleDeps } from './topic-bundle.ts';
import { isTopicCriteria, topicRequest, type TopicRequest } from './topic-subscription.ts';

type Json = Record<string, unknown>;

/** A topic-based Subscription bound on a socket: its heartbeat period, and when it was last sent something. */
export interface TopicBinding {
  heartbeatMs?: number;
  lastSentAt: number;
  /** The digest of the owner it was bound for (ownerDigest): what the Subscription sends for another owner is not sent on it. */
  owner: string;
  /** The key that signed the binding token: the binding ends once it is no longer published (keyPublished). */
  kid: string;
}

/** A message built once in a round for the sockets bound to a Subscription, and the owner (digest) it was built for. */
export interface TopicMessage {
  owner: string;
  text: string;
}

/** A topic-based websocket Subscription as read: its resource, its request and its owner. */
interface TopicSubscription {
  resource: Json;
  request: TopicRequest;
  owner: string;
}

export interface TopicSocketsOptions {
  store: Store;
  clock: Clock;
  log: Logger;
  tokens: WsBindingTokens;
  bundles: TopicBundleDeps;
  /** The owner's client and user (HubOptions.client, .user): a disabled client's, or a revoked sign-in's, is sent nothing. */
  authority?: OwnerAuthority;
}

/** The messages of one delivery round (TopicSockets.round): each Subscription read once, each Bundle built once. */
export interface TopicRound {
  /** An event's Bundle as JSON (built once for every socket), or undefined when it is none or its Subscription is no longer active. */
  event(n: RecentNotification): Promise<TopicMessage | undefined>;
  /** A heartbeat Bundle of Subscription `id` as JSON, or undefined when it is no longer active. */
  heartbeat(tenant: string, id: string): Promise<TopicMessage | undefined>;
}

/** The most Subscription versions and owners remembered as reaching what they select (TopicSockets.read). */
const REACHED_KEPT = 10_000;

export class TopicSockets {
  /** The Subscription versions (with their owner) judged to reach what they select: judged once each. */
  private readonly reached = new Set<string>();

  constructor(private readonly options: TopicSocketsOptions) {}

  /**
   * `bind-with-token {token}` on a socket of `tenant`: the Subscription bound, its binding and the handshake
   * Bundle (JSON) to answer with; or the error text to send. `room` says whether the socket may bind `id`.
   */
  async bind(tenant: string, token: string, room: (id: string) => string | undefined): Promise<{ id: string; binding: TopicBinding; handshake: string } | { error: string }> {
    const binding = await this.options.tokens.verify(token);
    if (!binding || binding.tenant !== tenant) {
      return { error: 'error the binding token is not valid here (expired, not issued by this server, or of another tenant): ask Subscription/{id}/$get-ws-binding-token for another' };
    }
    const id = binding.subscription;
    const full = room(id);
    if (full !== undefined) return { error: full };
    const sub = await this.read(tenant, id);
    if (!sub) return { error: `error ${id} is not an active topic-based websocket Subscription` };
    const owner = ownerDigest(sub.owner);
    if (owner !== binding.owner) return { error: `error ${id} was activated again since the binding token was issued: ask Subscription/${id}/$get-ws-binding-token for another` };
    const now = this.options.clock.now();
    const handshake = JSON.stringify(await topicBundle(this.options.bundles, { tenant, id, owner: sub.owner }, sub.resource, sub.request, { event: 'handshake' }));
    return { id, handshake, binding: { lastSentAt: now, owner, kid: binding.kid, ...(sub.request.heartbeatSeconds !== undefined && { heartbeatMs: sub.request.heartbeatSeconds * 1000 }) } };
  }

  /** Whether key `kid`, which signed the token of a binding, is still published (src/auth/ws-binding-token.ts signedByPublishedKey). */
  keyPublished(kid: string): Promise<boolean> {
    return this.options.tokens.keyPublished(kid);
  }

  /** A round's reader: Subscriptions and Bundles kept for the round, a failure logged and sent as nothing. */
  round(): TopicRound {
    const subs = new Map<string, Promise<TopicSubscription | undefined>>();
    const heartbeats = new Map<string, Promise<TopicMessage | undefined>>();
    const events = new Map<number, Promise<TopicMessage | undefined>>();
    const read = (tenant: string, id: string) => {
      const k = `${tenant}\u0000${id}`;
      let found = subs.get(k);
      if (!found) subs.set(k, (found = this.read(tenant, id)));
      return found;
    };
    const text = async (tenant: string, id: string, n: RecentNotification | { event: 'heartbeat' }, what: string): Promise<TopicMessage | undefined> => {
      try {
        const sub = await read(tenant, id);
        if (!sub) return undefined;
        return { owner: ownerDigest(sub.owner), text: JSON.stringify(await topicBundle(this.options.bundles, { tenant, id, owner: sub.owner }, sub.resource, sub.request, n)) };
      } catch (err) {
        this.options.log.warn(`a topic ${what} could not be sent over its websockets`, { tenant, subscription: id, err });
        return undefined;
      }
    };
    return {
      // A handshake or heartbeat is the socket's own, never recorded for a websocket: events alone are sent.
      event: (n) => {
        if (n.event !== 'create' && n.event !== 'update' && n.event !== 'delete') return Promise.resolve(undefined);
        let found = events.get(n.pk);
        if (!found) events.set(n.pk, (found = text(n.tenant, n.subscriptionId, n, 'notification')));
        return found;
      },
      heartbeat: (tenant, id) => {
        const k = `${tenant}\u0000${id}`;
        let found = heartbeats.get(k);
        if (!found) heartbeats.set(k, (found = text(tenant, id, { event: 'heartbeat' }, 'heartbeat')));
        return found;
      },
    };
  }

  /** Subscription `id` of `tenant` when it is an active topic-based websocket one with an owner whose authority stands. */
  private async read(tenant: string, id: string): Promise<TopicSubscription | undefined> {
    const { store } = this.options;
    const current = await store.resources.read(tenant, 'Subscription', id);
    const resource = current && !current.deleted ? (JSON.parse(current.content) as Json) : undefined;
    const channel = resource?.channel as { type?: unknown } | undefined;
    if (resource?.status !== 'active' || channel?.type !== 'websocket' || !isTopicCriteria(resource.criteria)) return undefined;
    const owner = await store.subscriptions.owner(tenant, id);
    const authority = this.options.authority;
    if (owner === null || (authority !== undefined && (await ownerSilenced(authority, tenant, owner)))) return undefined;
    let request: TopicRequest;
    try {
      request = topicRequest(resource);
    } catch {
      return undefined;
    }
    // What was matched under an older release's rules (a rolling upgrade's) is not sent once its owner's grant reaches none of it.
    const key = `${tenant}\u0000${id}\u0000${current!.versionId}\u0000${owner}`;
    if (!this.reached.has(key) && this.options.bundles.restoreAccess) {
      if (!(await grantReaches(this.options.bundles.fhir, this.options.bundles.restoreAccess, tenant, owner, resource, this.options.clock.now()))) return undefined;
      if (this.reached.size >= REACHED_KEPT) this.reached.clear();
      this.reached.add(key);
    }
    return { resource, request, owner };
  }
}
