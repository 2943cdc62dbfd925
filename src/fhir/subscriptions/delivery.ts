/**
 * Delivery of recorded notifications (R4 subscription.html, rest-hook): a loop in each `serve` process
 * leases subscriptions with waiting notifications (SubscriptionRepo.claim: one holder at a time across
 * processes) and sends each subscription's notifications in the order they were recorded. With no
 * `channel.payload` a notification is a POST to `channel.endpoint` without a body; with a JSON or XML
 * payload it is a PUT of the version, in that format, to `{endpoint}/{type}/{id}`. Every `channel.header` is sent; redirects are
 * not followed; a 2xx is a success. A failure is retried after 5 s, 10 s, 20 s and 40 s; the fifth
 * failure in a row puts the Subscription in `error` (a new version the server writes) and drops what
 * waits for it. A topic-based one stored `requested` is set `active` once its handshake is accepted, and `error` when
 * its handshake fails, at once (Backport IG: until then it awaits the verification of its endpoint). A Subscription no longer active (off, error, deleted, not rest-hook), whose owner's client
 * is disabled or deleted, or whose owner's user lost the authority it was activated on (owner.ts), has its waiting
 * notifications dropped; one whose `end` has passed is set `off` first. One whose owner's recorded scopes no longer let
 * it search what it selects by today's rules (owner-reach.ts: a grant of an older release) is sent nothing more of what
 * was matched under the old rules: it is set `error`, saying why, and what waits is dropped.
 * A process's places (CLAIMS) are shared between the apps that activated the Subscriptions (APP_CLAIMS, RESERVED).
 * The outbox is bounded: a Subscription found with more than `maxPending` notifications waiting (an endpoint
 * that answers 2xx, but slower than the writes its criteria match) is set to `error` as after the fifth
 * failure, saying so, and what waits for it is dropped.
 */
import { randomUUID } from 'node:crypto';
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { ClaimedSubscription, Client, PendingNotification, ResourceVersion, User } from '../../store/types.ts';
import { enumerationAccess } from '../access.ts';
import { vreadResource, type FhirDeps } from '../crud.ts';
import { isActivated, payloadType, sendableHeader, sendablePayload } from './activation.ts';
import { parseExact } from '../exact-json.ts';
import { toFhirXml } from '../xml/to-xml.ts';
import { endpointUrl, systemResolve, type ResolveHost } from './endpoint.ts';
import { outboundFetch, RefusedAddress } from '../../http/outbound.ts';
import { appOf, authorityRevoked, ownerAccess, ownerClient, ownerPatient, ownerPatientLost, ownerUser, type OwnerAuthority, type RestoreAccess } from './owner.ts';
import { serverPaused } from './client-authority.ts';
import { grantError, grantReaches } from './owner-reach.ts';
import { writeServerStatus } from './server-status.ts';
import type { UserLookup, UsersLookup } from '../../auth/user-cache.ts';
import type { PatientChoice } from '../../auth/patient-held.ts';
import type { SyncOrAsync } from '../../sync-or-async.ts';
import { settledRefusal, topicBundle, type StatusNotification } from './topic-bundle.ts';
import { isTopicCriteria, topicRequest } from './topic-subscription.ts';
import type { SubscriptionSockets } from './sockets.ts';

/** Consecutive failures after which a Subscription is set to `error`. */
export const MAX_FAILURES = 5;
/** The wait after the first failure; it doubles after each further one (5, 10, 20, 40 s). */
export const FIRST_RETRY_MS = 5_000;
/** How long one delivery may take (connection and answer). */
export const DELIVERY_TIMEOUT_MS = 5_000;
/** A claim's lease: longer than a claimed subscription's batch can take (BATCH deliveries of DELIVERY_TIMEOUT_MS). */
const LEASE_MS = 120_000;
/** Notifications of one subscription sent under one claim. */
const BATCH = 20;
/**
 * How long one claim goes on sending (ms): past it the subscription gives way (SubscriptionRepo.yielded)
 * to those that waited meanwhile, so that slow endpoints filling every place take turns with the others.
 */
export const CLAIM_SENDS_FOR_MS = 10_000;
/** Subscriptions one round claims. */
export const CLAIMS = 16;
/**
 * An app's share of the loop's places (its owner's client, owner.ts appOf; the operator's Subscriptions are one app):
 * past it, the app's Subscriptions are claimed only into places beyond the RESERVED ones, so that one app's endpoints
 * that never answer leave places for every other app's.
 */
export const APP_CLAIMS = 4;
/** Places the loop keeps for apps within their share (APP_CLAIMS): an app past it takes at most CLAIMS - RESERVED. */
export const RESERVED = 4;
/** How long after now one claimed past its app's share, and handed back, is due again (ms). */
export const HANDED_BACK_MS = 1_000;

export interface DeliveryOptions {
  /** The FHIR layer: reads of the notified versions, and the server's writes of `error` and `off`. */
  fhir: FhirDeps;
  clock: Clock;
  log: Logger;
  fetch?: typeof fetch;
  /** CINDER_SUBSCRIPTION_ALLOW_PRIVATE. */
  allowPrivate: boolean;
  resolve?: ResolveHost;
  /** The websocket channel's sockets of this process, pinged each round. */
  sockets?: SubscriptionSockets;
  /** The owner's client (HubOptions.client): a disabled one's waiting notifications are dropped. */
  client: (clientId: string) => Promise<Client | null>;
  /** The user on whose authority a subscription was activated (HubOptions.user): once they lost it, what waits is dropped. */
  user: UserLookup;
  /**
   * The records of the clients, and of a tenant's users, of `ids` (HubOptions.clients and users): a claim's owners read
   * together, one statement for the clients and one per tenant for the users once the caches lapsed, not one each.
   * Without them, each delivery reads its owner's with `client` and `user`.
   */
  clients?: (ids: Iterable<string>) => Promise<Map<string, Client | null>>;
  users?: UsersLookup;
  /** Whether the patient in context its user chose still holds (HubOptions.patientHeld): once not, what waits is dropped. */
  patientHeld?: OwnerAuthority['patientHeld'];
  /**
   * patientHeld asked of many choices together (HubOptions.patientHeld, src/auth/patient-held.ts `all`): a claim's owners'
   * choices judged before their deliveries start, each user read once and one search per tenant, app and reach, not one
   * each. Without it, each delivery asks patientHeld of its own.
   */
  patientsHeld?: (choices: readonly PatientChoice[]) => SyncOrAsync<boolean[]>;
  /** CINDER_SUBSCRIPTION_MAX_PENDING: the most notifications a rest-hook Subscription may have waiting. */
  maxPending?: number;
  /** Rebuilds an owner's access (HubOptions.restoreAccess): a topic's notificationShape includes what its owner may read. */
  restoreAccess?: RestoreAccess;
}

/** The most Subscription versions and owners remembered as reaching what they select (SubscriptionDelivery.reaches). */
const REACHED_KEPT = 10_000;

/** The default of CINDER_SUBSCRIPTION_MAX_PENDING. */
export const MAX_PENDING = 10_000;

/** Deliveries by result since the process started (/metrics `cinder_subscription_deliveries_total`, a counter). */
export interface DeliveryCounts {
  delivered: number;
  failed: number;
  /** Subscriptions set to `error` after MAX_FAILURES. */
  error: number;
  /** Notifications dropped (their subscription off, in error, gone or ended). */
  dropped: number;
  /** Websocket pings sent (sockets.ts). */
  pinged: number;
  /** Subscriptions set to `error` for more than `maxPending` notifications waiting (counted in `error` too). */
  backlog: number;
}

type Json = Record<string, unknown>;

/**
 * The claimed Subscriptions' owners' records read together (SubscriptionDelivery.ownersOf): users by tenant and id; whether
 * the patient in context each chose still holds, by choiceKey.
 */
interface Owners {
  clients: Map<string, Client | null>;
  users: Map<string, User | null>;
  held: Map<string, boolean>;
}

/** The patient in context `owner` was activated with in `tenant` (a user's choice, through a client), or null: ownerPatientLost judges it. */
function choiceOf(tenant: string, owner: string): PatientChoice | null {
  const user = ownerUser(owner);
  const patient = ownerPatient(owner);
  const clientId = ownerClient(owner);
  return user === null || patient === null || clientId === null ? null : { tenant, clientId, userId: user.id, patient };
}

const choiceKey = (c: PatientChoice) => `${c.tenant}\u0000${c.clientId}\u0000${c.userId}\u0000${c.patient}`;

/** A handshake made at delivery, for a Subscription awaiting one with none waiting: sent first, deleted from no outbox. */
interface MadeHandshake extends StatusNotification {
  event: 'handshake';
}

/**
 * The batch in sending order: as recorded, except that a Subscription awaiting its handshake (stored `requested`) is
 * sent a handshake first, so that nothing reaches its endpoint before it is verified: what waited from before it was
 * written `requested` again (its owner keeps it), the heartbeats and events of one whose handshake was dropped (its
 * client disabled meanwhile, then enabled). The one waiting goes first; with none in the batch (dropped, or beyond
 * it), one is made.
 */
export function verifiedFirst(sub: Json, batch: PendingNotification[]): (PendingNotification | MadeHandshake)[] {
  if (sub.status !== 'requested' || !batch.length) return batch;
  const at = batch.findIndex((n) => n.event === 'handshake');
  if (at < 0) return [{ event: 'handshake' }, ...batch];
  return at === 0 ? batch : [batch[at]!, ...batch.slice(0, at), ...batch.slice(at + 1)];
}

export class SubscriptionDelivery {
  readonly counts: DeliveryCounts = { delivered: 0, failed: 0, error: 0, dropped: 0, pinged: 0, backlog: 0 };
  private readonly worker = randomUUID();
  private readonly resolve: ResolveHost;
  /** The loop's next claim (with its websocket round). */
  private claimTimer: ReturnType<typeof setTimeout> | undefined;
  /** The loop's claim under way. */
  private claiming: Promise<unknown> | undefined;
  /** Whether a delivery ended while a claim was under way (the loop claims again at once after it). */
  private again = false;
  /** The loop's deliveries under way, each sending one claimed subscription's notifications. */
  private readonly inFlight = new Set<Promise<void>>();
  /** The loop's deliveries under way by app (owner.ts appOf): its share of the places (APP_CLAIMS). */
  private readonly appsInFlight = new Map<string, number>();
  private intervalMs = 0;
  private stopped = true;
  /** Set by stop(): a round under way sends nothing more, so that a draining process stops at once. */
  private stopping = false;
  /**
   * Claims whose release failed (the database was unreachable), by tenant and id: released again before
   * each claim, so that a subscription waits for the database to come back and not for its lease to run out.
   */
  private readonly unreleased = new Map<string, { tenant: string; id: string }>();
  /** The Subscription versions (with their owner) judged to reach what they select: judged once each. */
  private readonly reached = new Set<string>();

  constructor(private readonly options: DeliveryOptions) {
    this.resolve = options.resolve ?? systemResolve;
  }

  /**
   * One round: claims the rest-hook subscriptions whose notifications are due and delivers them, and pings
   * this process's websockets (sockets.ts); the number of subscriptions claimed and pings sent.
   */
  async runOnce(): Promise<number> {
    const { fhir, clock, sockets } = this.options;
    await fhir.store.subscriptions.heartbeats(clock.now());
    const claimed = await fhir.store.subscriptions.claim(this.worker, clock.now(), LEASE_MS, CLAIMS);
    const owners = await this.ownersOf(claimed);
    await Promise.all(claimed.map((c) => this.deliver(c, owners)));
    const pinged = sockets ? await sockets.round() : 0;
    this.counts.pinged += pinged;
    return claimed.length + pinged;
  }

  /**
   * Runs the loop until stop(): up to CLAIMS subscriptions delivered at once, each claimed as soon as a
   * place is free (at once again after a claim that found some, else every `intervalMs`), so that a slow
   * endpoint holds its own place and no other's, and shared between apps (claimShared), so that one app's slow
   * endpoints hold no other app's places; the websockets are pinged with each claim, which
   * does not wait for the deliveries it starts.
   */
  start(intervalMs: number): void {
    this.stopped = false;
    this.intervalMs = intervalMs;
    this.wake(intervalMs);
  }

  /** Claims again after `ms` (replacing the claim waiting), or right after the claim under way. */
  private wake(ms: number): void {
    if (this.stopped) return;
    if (this.claiming) {
      if (ms === 0) this.again = true;
      return;
    }
    clearTimeout(this.claimTimer);
    this.claimTimer = setTimeout(() => {
      this.claiming = this.claim().finally(() => {
        this.claiming = undefined;
      });
    }, ms);
  }

  /** Claims as many subscriptions as there are free places and starts their deliveries; then waits for the next claim. */
  private async claim(): Promise<void> {
    const { fhir, clock, log, sockets } = this.options;
    let claimed = 0;
    this.again = false;
    try {
      await this.releaseLeftovers();
      const free = CLAIMS - this.inFlight.size;
      // Topic-based Subscriptions' heartbeats that are due, recorded to be claimed as any notification.
      await fhir.store.subscriptions.heartbeats(clock.now());
      if (free > 0) {
        const list = await this.claimShared(free);
        claimed = list.length;
        const owners = await this.ownersOf(list);
        for (const c of list) {
          const app = appOf(c.owner);
          this.appsInFlight.set(app, (this.appsInFlight.get(app) ?? 0) + 1);
          const delivery: Promise<void> = this.deliver(c, owners).catch((err: unknown) => log.warn('subscription delivery failed unexpectedly', { err })).finally(() => {
            this.inFlight.delete(delivery);
            const left = (this.appsInFlight.get(app) ?? 1) - 1;
            if (left > 0) this.appsInFlight.set(app, left);
            else this.appsInFlight.delete(app);
            this.wake(0);
          });
          this.inFlight.add(delivery);
        }
      }
      // The websockets, with each claim (after it reached the database): never behind a rest-hook delivery, which is not awaited.
      if (sockets) this.counts.pinged += await sockets.round();
    } catch (err) {
      log.warn('subscription delivery round failed', { err });
    }
    // At once again while places are free and there was something to claim; else when a delivery ends, or
    // after the interval (which also keeps the websockets pinged while every place is taken).
    const full = this.inFlight.size >= CLAIMS;
    this.claiming = undefined;
    if (!this.stopped) this.wake(!full && (claimed > 0 || this.again) ? 0 : this.intervalMs);
  }

  /**
   * Claims for up to `free` places, sharing them between apps (owner.ts appOf): none of an app holding APP_CLAIMS
   * places already, so that any other app's Subscriptions due are claimed first; of one batch, an app's past its share
   * are kept while the loop holds fewer than CLAIMS - RESERVED, the others handed back, due again HANDED_BACK_MS
   * later (behind those waiting meanwhile). With places beyond the RESERVED ones left and nothing else due, those past
   * their share are claimed into them: an app alone is not held to its share. Those to send, each counted for its app.
   */
  private async claimShared(free: number): Promise<ClaimedSubscription[]> {
    const { fhir, clock, log } = this.options;
    const repo = fhir.store.subscriptions;
    const atShare = [...this.appsInFlight].filter(([, n]) => n >= APP_CLAIMS).map(([app]) => app);
    const list = await repo.claim(this.worker, clock.now(), LEASE_MS, free, atShare);
    for (const c of list) this.unreleased.delete(`${c.tenant}\u0000${c.id}`);
    const held = new Map(this.appsInFlight);
    let spare = CLAIMS - RESERVED - this.inFlight.size;
    const kept: ClaimedSubscription[] = [];
    const past: ClaimedSubscription[] = [];
    for (const c of list) {
      const app = appOf(c.owner);
      const n = held.get(app) ?? 0;
      if (n >= APP_CLAIMS) {
        past.push(c);
        continue;
      }
      held.set(app, n + 1);
      kept.push(c);
      spare--;
    }
    for (const c of past) {
      if (spare > 0) {
        kept.push(c);
        spare--;
        continue;
      }
      await repo.handBack(c.tenant, c.id, this.worker, clock.now() + HANDED_BACK_MS).catch((err: unknown) => {
        log.warn('a claimed subscription could not be handed back', { tenant: c.tenant, subscription: c.id, err });
        this.unreleased.set(`${c.tenant}\u0000${c.id}`, { tenant: c.tenant, id: c.id });
      });
    }
    // Nothing else due (fewer found than asked for), none handed back: the places beyond the reserved ones go to those
    // past their share.
    if (atShare.length && past.length === 0 && list.length < free && spare > 0) {
      const more = await repo.claim(this.worker, clock.now(), LEASE_MS, Math.min(spare, free - list.length));
      for (const c of more) this.unreleased.delete(`${c.tenant}\u0000${c.id}`);
      kept.push(...more);
    }
    return kept;
  }

  /** Stops the loop: each delivery under way finishes the notification it is sending and sends no more. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.stopping = true;
    // Open websockets would hold the HTTP server's drain: their clients connect again elsewhere.
    this.options.sockets?.closeAll();
    clearTimeout(this.claimTimer);
    await this.claiming?.catch(() => undefined);
    // Those the last claim started too (they release their claims without sending).
    await Promise.all([...this.inFlight].map((p) => p.catch(() => undefined)));
  }

  /**
   * The clients and users of the claimed Subscriptions' owners, read together before their deliveries start (the clients
   * in one read, each tenant's users in one, those the caches hold in none): with the caches lapsed, a claim of CLAIMS
   * Subscriptions made as many reads of each, one per delivery. Each delivery judges its owner with them as it would with
   * its own reads (a disabled client or user, a sign-in revoked: nothing sent). Empty without options.clients and users.
   * A claim of one too (what the loop claims as each place frees up): its delivery read its client, then its user, then
   * its patient's check, one wait after another, where here the client and user are read side by side (as many statements).
   * So are the patients in context their users chose (options.patientsHeld, asked once the users' reads are under way,
   * whose records it then shares): each delivery asked patientHeld of its own, a user read and a search each.
   */
  private async ownersOf(list: ClaimedSubscription[]): Promise<Owners> {
    const { clients, users, patientsHeld, patientHeld } = this.options;
    const owners: Owners = { clients: new Map(), users: new Map(), held: new Map() };
    if (!clients || !users || list.length === 0) return owners;
    const clientIds = new Set<string>();
    const userIds = new Map<string, Set<string>>();
    for (const c of list) {
      const clientId = ownerClient(c.owner);
      const user = ownerUser(c.owner);
      if (clientId !== null) clientIds.add(clientId);
      if (user === null) continue;
      const ids = userIds.get(c.tenant) ?? new Set<string>();
      ids.add(user.id);
      userIds.set(c.tenant, ids);
    }
    const reads: Promise<void>[] = [];
    if (clientIds.size) reads.push(clients(clientIds).then((found) => void (owners.clients = found)));
    for (const [tenant, ids] of userIds) {
      reads.push(users(tenant, ids).then((found) => {
        for (const [id, user] of found) owners.users.set(`${tenant}\u0000${id}`, user);
      }));
    }
    // Each choice once (several Subscriptions of one sign-in share it); the user cache already holds the reads above.
    const choices = new Map<string, PatientChoice>();
    for (const c of list) {
      const choice = choiceOf(c.tenant, c.owner);
      if (choice !== null) choices.set(choiceKey(choice), choice);
    }
    if (patientsHeld && patientHeld && choices.size) {
      const asked = [...choices.values()];
      reads.push(Promise.resolve().then(() => patientsHeld(asked)).then((held) => asked.forEach((c, i) => owners.held.set(choiceKey(c), held[i]!))));
    }
    // A read that failed leaves its owners to their deliveries' own reads (each then fails or succeeds as before).
    await Promise.all(reads.map((r) => r.catch((err: unknown) => this.options.log.warn('subscription owners could not be read together', { err }))));
    return owners;
  }

  private async deliver(c: ClaimedSubscription, owners?: Owners): Promise<void> {
    const { fhir, clock, log } = this.options;
    const repo = fhir.store.subscriptions;
    let failures = c.failures;
    // Whether this attempt's failure was counted (failures) before something threw; and the Subscription as read.
    let counted = false;
    let seen: { current: ResourceVersion; sub: Json } | undefined;
    try {
      const current = await fhir.store.resources.read(c.tenant, 'Subscription', c.id);
      const sub = current && !current.deleted ? (JSON.parse(current.content) as Json) : undefined;
      const channel = (sub?.channel ?? {}) as Json;
      const clientId = ownerClient(c.owner);
      const user = ownerUser(c.owner);
      const client = clientId === null ? null : owners?.clients.has(clientId) ? (owners.clients.get(clientId) ?? null) : await this.options.client(clientId);
      const userKey = user === null ? '' : `${c.tenant}\u0000${user.id}`;
      const record = user === null ? null : owners?.users.has(userKey) ? (owners.users.get(userKey) ?? null) : await this.options.user(c.tenant, user.id);
      const revoked = user !== null && authorityRevoked(client, record, user);
      // A guardian whose record no longer names the child is sent nothing recorded of the child before (the hub records nothing more).
      const choice = choiceOf(c.tenant, c.owner);
      const held = choice === null ? undefined : owners?.held.get(choiceKey(choice));
      const lost = !revoked && !client?.disabled && !!sub && (held === undefined ? await ownerPatientLost(this.options, c.tenant, c.owner) : !held);
      if (!sub || !isActivated(sub) || channel.type !== 'rest-hook' || revoked || client?.disabled || lost) {
        // A client's disable is undone by its enable, when its own Subscriptions resume: their heartbeats too (one the
        // disable set `error`, client-authority.ts, is set back then, the period kept); so is a relationship named again.
        const paused = !!sub && (isActivated(sub) || serverPaused(sub, clientId)) && channel.type === 'rest-hook' && !revoked;
        this.counts.dropped += await repo.drop(c.tenant, c.id, paused);
        return;
      }
      if (typeof sub.end === 'string' && Date.parse(sub.end) <= clock.now()) {
        if (await this.setStatus(c.tenant, current!, sub, 'off')) this.counts.dropped += await repo.drop(c.tenant, c.id);
        return;
      }
      seen = { current: current!, sub };
      const started = clock.now();
      // The notifications, read with the version and owner they were recorded under (one statement). A Subscription
      // written since it was read above (another version: perhaps another endpoint; another owner, whose reach matched
      // what waits now) is sent nothing under this claim: released, it is claimed again at once, as it now stands.
      const { versionId, owner, notifications: batch } = await repo.pendingBatch(c.tenant, c.id, BATCH);
      if (versionId !== current!.versionId || owner !== c.owner) return;
      // Judged for the owner the Subscription has as read (above): not for one the claim found, that another activated it again since.
      if (!(await this.reaches(c, current!, sub))) {
        if (await this.setStatus(c.tenant, current!, sub, 'error', grantError(clientId!))) this.counts.dropped += await repo.drop(c.tenant, c.id);
        return;
      }
      // Only a subscription with a full batch waiting may be over the bound: the others pay no count.
      if (batch.length >= Math.min(BATCH, (this.options.maxPending ?? MAX_PENDING) + 1) && (await this.overflowed(c, current!, sub))) return;
      for (const n of verifiedFirst(sub, batch)) {
        // Left for the next process (or start) to send, in order.
        if (this.stopping) break;
        // A handshake recorded for an earlier version of one now active was answered by the one sent first: its endpoint,
        // this version's, is verified (asked to be activated twice before the first went). Sent, it would say `requested`.
        // Not one recorded for a version stored `active` (by a release that activated at once): nothing answered it.
        if ('pk' in n && n.event === 'handshake' && sub.status === 'active' && n.versionId < current!.versionId && (await this.askedFor(c.tenant, c.id, n.versionId))) {
          if (await repo.delivered(c.tenant, c.id, this.worker, n.pk)) continue;
          break;
        }
        const error = await this.send(c, sub, channel, n);
        if (error === undefined) {
          // Gone from the outbox meanwhile (the Subscription deleted, or activated anew or by another owner, whose write
          // deleted what waited; or the claim lost): the rest of the batch read before it goes no further. The next
          // claim reads the Subscription as it now stands.
          const kept = !('pk' in n) || (await repo.delivered(c.tenant, c.id, this.worker, n.pk));
          this.counts.delivered++;
          failures = 0;
          if (!kept) break;
          // Its handshake accepted, a topic rest-hook Subscription awaiting it is active (a new version, unless a client
          // wrote it since): what follows is sent under the next claim, as the Subscription then stands.
          if (n.event === 'handshake' && sub.status === 'requested') {
            await this.setStatus(c.tenant, current!, sub, 'active');
            break;
          }
          const now = clock.now();
          if (now - started >= CLAIM_SENDS_FOR_MS || now < started) {
            await repo.yielded(c.tenant, c.id, this.worker, now);
            break;
          }
          continue;
        }
        failures++;
        counted = true;
        this.counts.failed++;
        log.info('subscription delivery failed', { tenant: c.tenant, subscription: c.id, failures, error });
        // The Backport IG's REST Hook channel: "any errors in the initial handshake SHALL result in the status being changed
        // to error" (the endpoint is not verified, and is not retried; written `requested` again, it is sent a new handshake).
        if (n.event === 'handshake' && sub.status === 'requested') {
          if (await this.setStatus(c.tenant, current!, sub, 'error', `the handshake failed: ${error}`)) {
            this.counts.error++;
            this.counts.dropped += await repo.drop(c.tenant, c.id);
          }
        } else if (failures < MAX_FAILURES) {
          await repo.failed(c.tenant, c.id, this.worker, failures, clock.now() + FIRST_RETRY_MS * 2 ** (failures - 1), error);
        } else if (await this.setStatus(c.tenant, current!, sub, 'error', `${failures} deliveries failed in a row; the last: ${error}`)) {
          this.counts.error++;
          this.counts.dropped += await repo.drop(c.tenant, c.id);
        }
        break;
      }
    } catch (err) {
      await this.failedUnexpectedly(c, counted ? failures : failures + 1, seen, err);
    } finally {
      await repo.release(c.tenant, c.id, this.worker).catch(() => this.unreleased.set(`${c.tenant}\u0000${c.id}`, { tenant: c.tenant, id: c.id }));
    }
  }

  /**
   * An error no step of a delivery expected (a fault of the server or of its database): a failed attempt as any other,
   * logged once, retried after the same back-off and, the MAX_FAILURES-th in a row, putting the Subscription in `error`.
   * Its claim released alone, the subscription would be claimed again at once, for ever. The detail goes only to the
   * log: the Subscription and its `$status` say that the server failed. With the Subscription unread (the read threw),
   * or its `error` unwritten, it is retried after the longest back-off until it can be.
   */
  private async failedUnexpectedly(c: ClaimedSubscription, failures: number, seen: { current: ResourceVersion; sub: Json } | undefined, err: unknown): Promise<void> {
    const { clock, log } = this.options;
    const repo = this.options.fhir.store.subscriptions;
    this.counts.failed++;
    log.warn('subscription delivery failed unexpectedly', { tenant: c.tenant, subscription: c.id, failures, err });
    const error = 'the server failed to send it (an internal error: see the server log)';
    try {
      if (failures >= MAX_FAILURES && seen) {
        // False when a client wrote it since: their version stands, and is claimed again as it now is.
        if (await this.setStatus(c.tenant, seen.current, seen.sub, 'error', `${failures} deliveries failed in a row; the last: ${error}`)) {
          this.counts.error++;
          this.counts.dropped += await repo.drop(c.tenant, c.id);
        }
        return;
      }
    } catch (e) {
      log.warn('subscription could not be set to error', { tenant: c.tenant, subscription: c.id, err: e });
    }
    const wait = FIRST_RETRY_MS * 2 ** (Math.min(failures, MAX_FAILURES - 1) - 1);
    await repo.failed(c.tenant, c.id, this.worker, failures, clock.now() + wait, error).catch((e: unknown) => {
      log.warn('subscription delivery failure could not be recorded', { tenant: c.tenant, subscription: c.id, err: e });
    });
  }

  /**
   * Whether version `versionId` of Subscription `id` was stored `requested`, awaiting the handshake recorded for it
   * (activation.ts). A version stored `active` with a handshake recorded was activated at once by an older release:
   * no later handshake verified its endpoint.
   */
  private async askedFor(tenant: string, id: string, versionId: number): Promise<boolean> {
    const v = await this.options.fhir.store.resources.vread(tenant, 'Subscription', id, versionId);
    return !!v && !v.deleted && (JSON.parse(v.content) as Json).status === 'requested';
  }

  /**
   * Whether the claimed Subscription's owner may still search what its version `current` selects, by today's rules
   * (owner-reach.ts grantReaches): what waits may have been matched under an older release's (or, in a rolling upgrade,
   * by a server still running one). Judged once per version and owner.
   */
  private async reaches(c: ClaimedSubscription, current: ResourceVersion, sub: Json): Promise<boolean> {
    const { fhir, clock, restoreAccess } = this.options;
    if (restoreAccess === undefined) return true;
    const key = `${c.tenant}\u0000${c.id}\u0000${current.versionId}\u0000${c.owner}`;
    if (this.reached.has(key)) return true;
    if (!(await grantReaches(fhir, restoreAccess, c.tenant, c.owner, sub, clock.now()))) return false;
    if (this.reached.size >= REACHED_KEPT) this.reached.clear();
    this.reached.add(key);
    return true;
  }

  /**
   * The version an R4 criteria notification with a payload PUTs, read as its owner may read it now (with read and search
   * on its type, as the topic notifications' focus is: topic-bundle.ts eventFocus): its client's registration narrowed
   * since the match, a version out of the narrower reach is not sent. Undefined for one out of reach or no longer held.
   */
  private async payloadVersion(c: ClaimedSubscription, n: PendingNotification): Promise<ResourceVersion | undefined> {
    const { fhir, restoreAccess } = this.options;
    if (restoreAccess === undefined) {
      const v = await fhir.store.resources.vread(c.tenant, n.type, n.id, n.versionId);
      return v && !v.deleted ? v : undefined;
    }
    const access = enumerationAccess(await ownerAccess(c.tenant, c.owner, restoreAccess));
    try {
      return await vreadResource(fhir, { tenant: c.tenant, access }, n.type, n.id, String(n.versionId));
    } catch (err) {
      if (settledRefusal(err)) return undefined;
      throw err;
    }
  }

  /** Releases the claims whose release failed earlier; those that fail again stay for the next claim. */
  private async releaseLeftovers(): Promise<void> {
    for (const [k, { tenant, id }] of this.unreleased) {
      await this.options.fhir.store.subscriptions.release(tenant, id, this.worker);
      this.unreleased.delete(k);
    }
  }

  /**
   * Whether the subscription has more than `maxPending` notifications waiting: then it is set to `error`
   * (unless a client wrote it since) and what waits is dropped, as after the fifth failure in a row.
   */
  private async overflowed(c: ClaimedSubscription, current: ResourceVersion, sub: Json): Promise<boolean> {
    const max = this.options.maxPending ?? MAX_PENDING;
    const repo = this.options.fhir.store.subscriptions;
    if ((await repo.waitingFor(c.tenant, c.id, max + 1)) <= max) return false;
    this.options.log.warn('subscription set to error: too many notifications waiting', { tenant: c.tenant, subscription: c.id, maxPending: max });
    const error = `more than ${max} notifications were waiting: the endpoint does not keep up with the writes the criteria match (CINDER_SUBSCRIPTION_MAX_PENDING)`;
    if (await this.setStatus(c.tenant, current, sub, 'error', error)) {
      this.counts.error++;
      this.counts.backlog++;
      this.counts.dropped += await repo.drop(c.tenant, c.id);
    }
    return true;
  }

  /**
   * Writes the Subscription's next version with `status` (and `error`), as the server, over the version
   * read (`current`): false when a client wrote it since (their version stands, and is read next round).
   */
  private setStatus(tenant: string, current: ResourceVersion, sub: Json, status: 'off' | 'error' | 'active', error?: string): Promise<boolean> {
    return writeServerStatus(this.options.fhir, this.options.clock, tenant, current, sub, status, error);
  }

  /** Sends one notification; undefined on a 2xx, else what went wrong. */
  private async send(c: ClaimedSubscription, sub: Json, channel: Json, n: PendingNotification | MadeHandshake): Promise<string | undefined> {
    const tenant = c.tenant;
    const endpoint = endpointUrl(channel.endpoint);
    if (typeof endpoint === 'string') return `Subscription.channel.endpoint ${endpoint}`;
    // Sent as the Content-Type: one no header can carry (stored before activation refused it) is a failed delivery, retried
    // and then `error`, never a throw, which released the claim to be taken again at once, for ever.
    if (channel.payload !== undefined && !sendablePayload(channel.payload)) {
      return `Subscription.channel.payload '${String(channel.payload)}' is not a media type an HTTP Content-Type can carry`;
    }
    const headers = new Headers();
    const lines: unknown[] = Array.isArray(channel.header) ? channel.header : [];
    for (const [i, line] of lines.entries()) {
      // One no request can carry (stored before activation refused it: a line break, a name with a space, no colon) is a
      // failed delivery naming it, retried and then `error`, not a throw of Headers read as the server's own failure.
      if (!sendableHeader(line)) return `Subscription.channel.header[${i}] is not a header line an HTTP request can carry ('Name: value', the value printable ASCII)`;
      const at = line.indexOf(':');
      headers.append(line.slice(0, at).trim(), line.slice(at + 1).trim());
    }
    const target = new URL(endpoint);
    let method = 'POST';
    let body: string | undefined;
    let timeoutMs = DELIVERY_TIMEOUT_MS;
    if (isTopicCriteria(sub.criteria)) {
      // A topic-based Subscription (topics.ts): a notification Bundle POSTed to the endpoint.
      const request = topicRequest(sub);
      if (request.timeoutSeconds !== undefined) timeoutMs = request.timeoutSeconds * 1000;
      const bundle = await topicBundle({ fhir: this.options.fhir, clock: this.options.clock, restoreAccess: this.options.restoreAccess }, c, sub, request, n);
      body = payloadType(channel.payload)!.endsWith('xml') ? toFhirXml(bundle) : JSON.stringify(bundle);
      headers.set('Content-Type', String(channel.payload));
    } else if (payloadType(channel.payload) !== undefined && 'pk' in n) {
      const v = await this.payloadVersion(c, n);
      if (!v) return undefined; // the version is gone, or out of the owner's reach as it now stands (nothing to send)
      method = 'PUT';
      // The stored JSON, or the same resource in FHIR XML for an XML payload (src/fhir/xml/to-xml.ts).
      body = payloadType(channel.payload)!.endsWith('xml') ? toFhirXml(parseExact(v.content) as Record<string, unknown>) : v.content;
      target.pathname = `${target.pathname.replace(/\/+$/, '')}/${n.type}/${n.id}`;
      headers.set('Content-Type', String(channel.payload));
    }
    try {
      // The host resolved once, its addresses checked, and the request sent to the address checked
      // (src/http/outbound.ts: DNS rebinding); a refusal is a failed delivery.
      const outbound = { fetch: this.options.fetch ?? fetch, resolve: this.resolve, allowPrivate: this.options.allowPrivate };
      const res = await outboundFetch(outbound, target, { method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) });
      await res.body?.cancel().catch(() => undefined);
      return res.status >= 200 && res.status < 300 ? undefined : `${method} ${target.href} answered ${res.status}`;
    } catch (err) {
      if (err instanceof RefusedAddress) return `delivery to ${endpoint.href} refused: ${err.message}`;
      const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
      return `${method} ${target.href} ${timedOut ? `did not answer within ${timeoutMs / 1000} s` : `failed: ${err instanceof Error ? err.message : String(err)}`}`;
    }
  }
}
