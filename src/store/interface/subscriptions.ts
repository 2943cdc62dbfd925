/**
 * Subscriptions (FHIR R4 subscription.html, src/fhir/subscriptions/): who activated each one (its owner's
 * access, which decides what it may notify about), and the outbox of notifications that writes record in
 * their own transaction (ResourceWriter.notify) and the delivery loops of every process drain, one
 * subscription at a time under a lease.
 */

/**
 * What a topic-based Subscription's notification is (src/fhir/subscriptions/topics.ts): an event, by the
 * interaction that caused it, the handshake recorded when it is activated, or a heartbeat (SubscriptionRepo.heartbeats).
 */
export type TopicEvent = 'create' | 'update' | 'delete' | 'handshake' | 'heartbeat';

/** A notification a write records: subscription `subscriptionId` is told of version `versionId` of `type/id`. */
export interface NotificationToWrite {
  subscriptionId: string;
  type: string;
  id: string;
  versionId: number;
  /**
   * A topic-based Subscription's (absent for a criteria Subscription's): an event (create, update, delete)
   * moves the subscription's count of events and is numbered with it, in the write's transaction.
   */
  event?: TopicEvent;
  /**
   * Matched with the reach of an owner the write replaced (an activation by another owner in the same transaction,
   * after the event was written): an event is numbered and kept for `$events`, and nothing is queued for delivery,
   * as what waited from that owner's reach is dropped.
   */
  unsent?: boolean;
  /**
   * The owner (as stored in `subscription_state`) whose reach the notification was matched with, when a match made
   * it: compared in the write's transaction with the owner stored as the row is locked, and when they differ (another
   * process, its compiled set not yet re-read, matched it after an activation by another owner committed) it is
   * recorded as `unsent`. A handshake or heartbeat has none.
   */
  matchedFor?: string;
}

/** How many of a topic-based subscription's latest events are kept for `$events` (SubscriptionRepo.eventLog). */
export const EVENTS_KEPT = 1_000;

/** A topic event as kept for `$events`. */
export interface KeptEvent {
  number: number;
  type: string;
  id: string;
  versionId: number;
  event: 'create' | 'update' | 'delete';
  createdAt: number;
}

/** A recorded notification waiting for delivery, in the order its subscription's notifications were recorded. */
export interface PendingNotification extends NotificationToWrite {
  pk: number;
  createdAt: number;
  /** An event's number: the subscription's count of events once it was recorded (1 for its first). */
  eventNumber?: number;
}

/**
 * A subscription's notifications waiting (SubscriptionRepo.pendingBatch) with what they were recorded under, read
 * together (one statement, one snapshot): the Subscription resource's current version, which sets the endpoint,
 * and the owner stored, whose reach matched them (an activation by another owner deletes what waited, in its write).
 */
export interface PendingBatch {
  /** The Subscription's current version id (a deleted one's too), null when it has none. */
  versionId: number | null;
  /** The owner stored (SubscriptionRepo.owner), null when none is. */
  owner: string | null;
  notifications: PendingNotification[];
}

/** A subscription a delivery loop holds under its lease (SubscriptionRepo.claim). */
export interface ClaimedSubscription {
  tenant: string;
  id: string;
  /** The owner's access as recorded at activation (JSON, src/fhir/subscriptions/owner.ts). */
  owner: string;
  /** Consecutive failed deliveries so far. */
  failures: number;
}

/** A recorded notification of a websocket subscription (SubscriptionRepo.recent): a topic-based one's is sent as its Bundle. */
export interface RecentNotification extends PendingNotification {
  tenant: string;
}

export interface SubscriptionRepo {
  /** The owner recorded for each of the tenant's subscriptions that has one, by id. */
  owners(tenant: string): Promise<Map<string, string>>;
  /** The owners recorded for those of `ids` (of `tenant`) that have one, by id: one statement, by the key, whatever the tenant holds. */
  ownersOf(tenant: string, ids: readonly string[]): Promise<Map<string, string>>;
  /** The owner recorded for subscription `id` of `tenant`, or null when it has none (one lookup by the key). */
  owner(tenant: string, id: string): Promise<string | null>;
  /**
   * Leases up to `limit` rest-hook subscriptions (of any tenant) that have recorded notifications, whose lease
   * (if any) has run out and whose next attempt is due at `now`, to `worker` until `now + leaseMs`:
   * one holder at a time, whichever processes ask (PostgreSQL: FOR UPDATE SKIP LOCKED). None of the apps `exclude`
   * names (appOf in src/fhir/subscriptions/owner.ts: the owner's client id, '' for the operator's) is claimed: those
   * holding their share of the loop's places (delivery.ts APP_CLAIMS).
   */
  claim(worker: string, now: number, leaseMs: number, limit: number, exclude?: readonly string[]): Promise<ClaimedSubscription[]>;
  /** Up to `limit` of a subscription's recorded notifications, oldest first. */
  pending(tenant: string, id: string, limit: number): Promise<PendingNotification[]>;
  /**
   * Up to `limit` of a subscription's recorded notifications, oldest first, read in one statement with the
   * Subscription's current version and its owner stored (PendingBatch): a delivery compares them with what it
   * read before, so that it never sends what a later activation recorded to the endpoint of an earlier version.
   */
  pendingBatch(tenant: string, id: string, limit: number): Promise<PendingBatch>;
  /**
   * Notification `pk` was delivered: it goes, and the subscription's failure count is reset (while `worker` holds it).
   * False when it was no longer there to go, or `worker` no longer holds the subscription: a write deleted it since the
   * batch was read (the Subscription deleted, or activated anew or by another owner), or another holder has it now. The
   * delivery then sends nothing more of its batch.
   */
  delivered(tenant: string, id: string, worker: string, pk: number): Promise<boolean>;
  /** A delivery failed: the failure count and the next attempt's time are stored (while `worker` holds it). */
  failed(tenant: string, id: string, worker: string, failures: number, nextAttemptAt: number, error: string): Promise<void>;
  /**
   * Drops every recorded notification of the subscription and resets its failures (it is off, in error, gone or
   * ended), and ends its heartbeats; with `keepHeartbeats` (its client disabled, which may be enabled again) they go on.
   */
  drop(tenant: string, id: string, keepHeartbeats?: boolean): Promise<number>;
  /** Ends `worker`'s lease. */
  release(tenant: string, id: string, worker: string): Promise<void>;
  /**
   * The holder sent for its time and gives way (while `worker` holds it): its next attempt is due at
   * `at`, so that claims, oldest due first, take the subscriptions that waited meanwhile before it.
   */
  yielded(tenant: string, id: string, worker: string, at: number): Promise<void>;
  /**
   * Ends `worker`'s lease of one it claimed but will not send now (its app holds its share of the places), its next
   * attempt due at `at` (one statement): claims, oldest due first, take the others' waiting meanwhile before it.
   */
  handBack(tenant: string, id: string, worker: string, at: number): Promise<void>;
  /** Recorded notifications waiting, over every tenant (/metrics). */
  waiting(): Promise<number>;
  /** The subscription's notifications waiting, counted up to `cap` at most (a bounded count). */
  waitingFor(tenant: string, id: string, cap: number): Promise<number>;
  /**
   * The notifications of these websocket subscriptions recorded at or after `since`, in the order they
   * were recorded: every process holding a socket bound to one reads them (they are not leased).
   */
  recent(subscriptions: { tenant: string; id: string }[], since: number): Promise<RecentNotification[]>;
  /** Deletes the notifications of websocket subscriptions recorded before `before`; how many. */
  purgeWebsocket(before: number): Promise<number>;
  /** The subscription's count of topic events recorded since it started; null for one never activated. */
  events(tenant: string, id: string): Promise<number | null>;
  /**
   * Records a heartbeat notification for each rest-hook subscription with a heartbeat period that was given
   * no notification for that long and has none waiting (every process may ask: each is recorded once);
   * how many. drop() ends a subscription's heartbeats until it is activated again.
   */
  heartbeats(now: number): Promise<number>;
  /** The subscription's kept events numbered `from` to `to` (inclusive), oldest first, at most `limit`. */
  eventLog(tenant: string, id: string, from: number, to: number, limit: number): Promise<KeptEvent[]>;
}
