/**
 * The R4 `websocket` channel (subscription.html): a client opens the websocket the CapabilityStatement
 * advertises (extension capabilitystatement-websocket on `rest`: `{fhir_base}/websocket`), sends
 * `bind {id}` for an active websocket Subscription of the tenant, is answered `bound {id}`, and then gets
 * `ping {id}` for each notification recorded for it after it bound, while it is active: once it is not (`error`,
 * `off`, deleted), what was recorded before is not pinged, and the socket is told so (`error {id} is no longer an
 * active websocket Subscription ...`) and unbound from it within a round or two of the change, whether or not a
 * notification waits (bound-status.ts; a topic-based one's sockets likewise). Notifications are recorded as for
 * rest-hook (hub.ts), and not leased: each process reads those of the subscriptions its own sockets are
 * bound to, every delivery round, from a window of the last KEEP_MS (so one committed late on PostgreSQL,
 * after a later-numbered one, is still seen), remembering which it has pinged; they are deleted after
 * twice that by whichever process comes first. So a client bound through any process is pinged once for
 * each, whichever process recorded it.
 *
 * A topic-based websocket Subscription (R5 Backport IG) is bound instead with `bind-with-token {token}`, a
 * token of `$get-ws-binding-token` (operations.ts; `bind {id}` refuses it): the bind is answered with a
 * handshake Bundle, each event read from the same window is sent as its notification Bundle (topic-bundle.ts,
 * built once per notification for every socket bound to it), and a heartbeat Bundle after each heartbeat
 * period without a message on that binding.
 *
 * A process holds at most `maxConnections` sockets (CINDER_WEBSOCKET_MAX_CONNECTIONS), and at most
 * `maxPerClient` of one tenant from one IP address (CINDER_WEBSOCKET_MAX_PER_CLIENT): a socket beyond
 * either is opened and closed at once with code 1013 (Try Again Later: another process, or later, may
 * have room) or 1008 (Policy Violation) and a reason naming the limit. A draining process closes its
 * sockets with 1001 (Going Away), for their clients to connect again elsewhere.
 */
import type { Server, ServerWebSocket, WebSocketHandler } from 'bun';
import type { Clock } from '../../clock.ts';
import type { Logger } from '../../log.ts';
import type { Store } from '../../store/types.ts';
import type { FhirDeps } from '../crud.ts';
import { BoundStatus, r4Ended, r4EndedMessage, r4Inactive, topicEndedMessage, UNOWNED } from './bound-status.ts';
import { ownerSilenced, type OwnerAuthority, type RestoreAccess } from './owner.ts';
import { grantReaches } from './owner-reach.ts';
import type { TopicBinding, TopicRound, TopicSockets } from './topic-sockets.ts';
import { isTopicCriteria } from './topic-subscription.ts';
import { decodeUtf8, NotUtf8Error } from '../utf8.ts';

/** How long a websocket notification is read for after it is recorded (ms); it is deleted after twice that. */
export const KEEP_MS = 60_000;
/** The most Subscriptions one socket may bind. */
export const MAX_BINDINGS = 100;
/** The most messages of one socket waiting for their answer: a client sending faster than it is answered is closed (1008). */
export const MAX_WAITING = 32;
/** The largest message a socket may send (bytes): `bind {id}` needs 70, `bind-with-token {token}` about 400 and more with a long CINDER_BASE_URL (its issuer); a larger one closes it (1009, as Bun closes it). */
export const MAX_MESSAGE_BYTES = 4096;
/** The most Subscription versions and owners whose grant was found to reach what they select that a process remembers. */
const REACHED_KEPT = 10_000;

/**
 * The most bytes a socket may have waiting to be sent (those its client has not read, past what the kernel holds):
 * a send beyond closes it (Bun's closeOnBackpressureLimit, code 1006). Bun's default, 16 MiB, was held for every
 * socket whose client stopped reading, and what came after it was dropped unseen with the socket left open; closed,
 * its client connects again and reads what it missed (a search, `$events`). One message larger than this still goes to a
 * client that keeps up: the bound is checked before each send.
 */
export const MAX_BUFFERED_BYTES = 1024 * 1024;

/** Close codes (RFC 6455 section 7.4.1, IANA registry). */
export const CLOSE_GOING_AWAY = 1001;
export const CLOSE_POLICY = 1008;
/** Invalid frame payload data: a message that is not UTF-8 (RFC 6455 7.4.1, 8.1). */
export const CLOSE_INVALID_DATA = 1007;
export const CLOSE_TRY_AGAIN_LATER = 1013;

/** What each socket carries: its tenant, the subscriptions it bound with when it bound each, and its messages in hand. */
export interface SocketData {
  tenant: string;
  /** The client's IP address (for the per-client limit). */
  ip: string;
  /** Whether the socket was admitted (counted in the limits) when it opened. */
  admitted: boolean;
  bound: Map<string, number>;
  /** The topic-based Subscriptions among them (bound with `bind-with-token`): sent Bundles, not pings. */
  topics: Map<string, TopicBinding>;
  /** The message being handled: the next waits for it, so answers come in the order of the messages. */
  queue: Promise<void>;
  /** Messages received and not yet answered (MAX_WAITING). */
  waiting: number;
}

type Socket = ServerWebSocket<SocketData>;

/**
 * What a round does with an R4 websocket Subscription's notification (SubscriptionSockets.pingJudgement): ping it, send
 * nothing (its owner's grant no longer reaches what it selects), tell its sockets it is no longer active (why), or wait
 * for the next round (the judgement failed).
 */
type PingJudgement = 'ping' | 'silent' | 'unjudged' | { inactive: string };

const key = (tenant: string, id: string) => `${tenant}\u0000${id}`;

/**
 * A socket's binding of Subscription `id`, compared by identity: its topic binding (a new one each `bind-with-token`), or
 * the time of its `bind` (a bind again within the same millisecond is taken for the same one); undefined once unbound.
 */
const bindingOf = (ws: Socket, id: string): unknown => ws.data.topics.get(id) ?? ws.data.bound.get(id);

export interface SocketLimits {
  /** The most sockets of this process. */
  maxConnections: number;
  /** The most sockets of this process of one tenant from one IP address. */
  maxPerClient: number;
}

/**
 * The text of a socket's message. The commands are text: a text frame that is not UTF-8 Bun closes itself (1007,
 * RFC 6455 8.1); a binary frame is read as the same command when it is UTF-8, and is refused as a text frame would be
 * when it is not (NotUtf8Error, the first bad byte), never read with U+FFFD in its place.
 */
function messageText(message: string | Buffer): string | NotUtf8Error {
  if (typeof message === 'string') return message;
  try {
    return decodeUtf8(message);
  } catch (err) {
    if (err instanceof NotUtf8Error) return err;
    throw err;
  }
}

/** Sockets refused since the process started, by the limit that refused them. */
export interface RefusedCounts {
  process: number;
  client: number;
}

export class SubscriptionSockets {
  private readonly sockets = new Map<string, Set<Socket>>();
  /** Every admitted socket of this process. */
  private readonly open = new Set<Socket>();
  /** Admitted sockets by tenant and IP address. */
  private readonly perClient = new Map<string, number>();
  readonly refused: RefusedCounts = { process: 0, client: 0 };
  private closing = false;
  /** The notifications pinged (by key), with when they were recorded, for the window. */
  private readonly pinged = new Map<number, number>();
  /** When this process last purged old websocket notifications (it does every half KEEP_MS at most). */
  private purgedAt = -Infinity;
  /** The Subscription versions and owners (by tenant, id, version and owner) whose grant reaches what they select (pingJudgement). */
  private readonly reached = new Set<string>();
  /** Whether the bound Subscriptions are still what their sockets bound (ended). */
  private readonly status: BoundStatus;

  /**
   * `topics`: the topic-based websocket channel (R5 Backport IG, topic-sockets.ts); without it `bind-with-token`
   * is refused. `grants`: how an owner's access is rebuilt (src/app.ts), to judge its grant before a ping. `authority`:
   * how its client and user are read, so that a disabled client's, or a revoked sign-in's, is pinged nothing.
   */
  constructor(private readonly options: {
    store: Store; clock: Clock; log: Logger; limits: SocketLimits; topics?: TopicSockets; grants?: { fhir: FhirDeps; restoreAccess: RestoreAccess };
    authority?: OwnerAuthority;
  }) {
    this.status = new BoundStatus(options);
  }

  /** Open sockets of this process (/metrics `cinder_subscription_websockets`). */
  get size(): number {
    return this.open.size;
  }

  /** Bun.serve's `websocket` handlers. */
  readonly handler: WebSocketHandler<SocketData> = {
    open: (ws) => this.admit(ws),
    message: (ws, message) => {
      if (!ws.data.admitted) return;
      const text = messageText(message);
      if (text instanceof NotUtf8Error) {
        ws.close(CLOSE_INVALID_DATA, `the message is not UTF-8: ${text.message}`);
        return;
      }
      if (ws.data.waiting >= MAX_WAITING) {
        ws.close(CLOSE_POLICY, `more than ${MAX_WAITING} messages waiting for an answer`);
        return;
      }
      ws.data.waiting++;
      ws.data.queue = ws.data.queue
        .then(() => this.message(ws, text))
        .catch((err: unknown) => this.options.log.error('answering a subscription websocket message failed', { err }))
        .finally(() => {
          ws.data.waiting--;
        });
    },
    maxPayloadLength: MAX_MESSAGE_BYTES,
    backpressureLimit: MAX_BUFFERED_BYTES,
    closeOnBackpressureLimit: true,
    close: (ws) => this.release(ws),
  };

  /** Upgrades a request for `{fhir_base}/websocket` of `tenant` from `ip` on Bun's `server`: whether it did. */
  upgrade(req: Request, server: unknown, tenant: string, ip: string): boolean {
    const bun = server as Server<SocketData> | undefined;
    const data: SocketData = { tenant, ip, admitted: false, bound: new Map(), topics: new Map(), queue: Promise.resolve(), waiting: 0 };
    return typeof bun?.upgrade === 'function' && bun.upgrade(req, { data });
  }

  /** Counts an opened socket in, or closes it at once when a limit (or a drain) leaves no room for it. */
  private admit(ws: Socket): void {
    const { maxConnections, maxPerClient } = this.options.limits;
    const client = key(ws.data.tenant, ws.data.ip);
    const ofClient = this.perClient.get(client) ?? 0;
    if (this.closing) return ws.close(CLOSE_GOING_AWAY, 'the server is shutting down');
    if (this.open.size >= maxConnections) {
      this.refused.process++;
      return ws.close(CLOSE_TRY_AGAIN_LATER, `this server process holds its most websockets (${maxConnections}); try again later`);
    }
    if (ofClient >= maxPerClient) {
      this.refused.client++;
      return ws.close(CLOSE_POLICY, `at most ${maxPerClient} websockets of one tenant from one address`);
    }
    ws.data.admitted = true;
    this.open.add(ws);
    this.perClient.set(client, ofClient + 1);
  }

  private release(ws: Socket): void {
    if (!ws.data.admitted) return;
    ws.data.admitted = false;
    this.open.delete(ws);
    const client = key(ws.data.tenant, ws.data.ip);
    const left = (this.perClient.get(client) ?? 1) - 1;
    if (left > 0) this.perClient.set(client, left);
    else this.perClient.delete(client);
    this.unbind(ws);
  }

  /** Closes every socket with 1001 (Going Away) and admits no more: the process is draining. */
  closeAll(): void {
    this.closing = true;
    for (const ws of [...this.open]) ws.close(CLOSE_GOING_AWAY, 'the server is shutting down');
  }

  private async message(ws: Socket, text: string): Promise<void> {
    const withToken = /^bind-with-token (\S{1,4000})$/.exec(text.trim());
    if (withToken) return this.bindWithToken(ws, withToken[1]!);
    const bind = /^bind ([A-Za-z0-9\-.]{1,64})$/.exec(text.trim());
    if (!bind) {
      ws.send('error expected "bind {id}"');
      return;
    }
    const id = bind[1]!;
    if (ws.data.bound.size >= MAX_BINDINGS && !ws.data.bound.has(id)) {
      ws.send(`error ${id} not bound: a socket binds at most ${MAX_BINDINGS} Subscriptions`);
      return;
    }
    const { store, clock } = this.options;
    try {
      const current = await store.resources.read(ws.data.tenant, 'Subscription', id);
      const sub = current && !current.deleted ? (JSON.parse(current.content) as { status?: string; criteria?: unknown; channel?: { type?: string } }) : undefined;
      if (sub?.status !== 'active' || sub.channel?.type !== 'websocket') {
        ws.send(`error ${id} is not an active websocket Subscription`);
        return;
      }
      // A topic-based one sends what its owner may read: only a token of $get-ws-binding-token binds it.
      if (isTopicCriteria(sub.criteria)) {
        ws.send(`error ${id} is topic-based: bind it with "bind-with-token {token}" (Subscription/${id}/$get-ws-binding-token)`);
        return;
      }
      // One an import stored has no owner, and notifies nothing (hub.ts): there is nothing to bind.
      const owner = await store.subscriptions.owner(ws.data.tenant, id);
      if (owner === null) {
        ws.send(`error ${id} is not an active websocket Subscription (${UNOWNED})`);
        return;
      }
      // Nor one that would be pinged nothing (pingJudgement): refused, as a topic-based one's bind is (topic-sockets.ts read).
      const silenced = await this.silencedBecause(ws.data.tenant, id, current!.versionId, owner, sub as Record<string, unknown>);
      if (silenced !== undefined) {
        ws.send(`error ${id} is not an active websocket Subscription (${silenced})`);
        return;
      }
      ws.data.bound.set(id, clock.now());
      ws.data.topics.delete(id);
      this.attach(ws, id);
      ws.send(`bound ${id}`);
    } catch (err) {
      this.options.log.warn('binding a subscription websocket failed', { err });
      ws.send(`error ${id} could not be bound now; try again`);
    }
  }

  private attach(ws: Socket, id: string): void {
    const k = key(ws.data.tenant, id);
    this.sockets.set(k, (this.sockets.get(k) ?? new Set()).add(ws));
    this.status.bound(ws.data.tenant, id);
  }

  /**
   * `bind-with-token {token}` (R5 Backport IG, websocket channel): a token of `$get-ws-binding-token` for this
   * tenant binds its topic-based Subscription, answered with a handshake Bundle (topic-sockets.ts); a refusal
   * is an `error {reason}` text message, and the socket stays open.
   */
  private async bindWithToken(ws: Socket, token: string): Promise<void> {
    const { topics, log } = this.options;
    if (!topics) {
      ws.send('error bind-with-token is not served here');
      return;
    }
    const room = (id: string) => (ws.data.bound.size >= MAX_BINDINGS && !ws.data.bound.has(id) ? `error ${id} not bound: a socket binds at most ${MAX_BINDINGS} Subscriptions` : undefined);
    try {
      const bound = await topics.bind(ws.data.tenant, token, room);
      if ('error' in bound) {
        ws.send(bound.error);
        return;
      }
      ws.data.bound.set(bound.id, bound.binding.lastSentAt);
      ws.data.topics.set(bound.id, bound.binding);
      this.attach(ws, bound.id);
      ws.send(bound.handshake);
    } catch (err) {
      log.warn('binding a subscription websocket with a token failed', { err });
      ws.send('error the Subscription could not be bound now; try again');
    }
  }

  /** Unbinds Subscription `id` from `ws` alone. */
  private unbindOne(ws: Socket, id: string): void {
    ws.data.bound.delete(id);
    ws.data.topics.delete(id);
    const k = key(ws.data.tenant, id);
    const set = this.sockets.get(k);
    set?.delete(ws);
    if (set?.size === 0) this.sockets.delete(k);
  }

  private unbind(ws: Socket): void {
    for (const id of ws.data.bound.keys()) {
      const k = key(ws.data.tenant, id);
      const set = this.sockets.get(k);
      set?.delete(ws);
      if (set?.size === 0) this.sockets.delete(k);
    }
  }

  /** One round: pings this process's bound sockets for what was recorded since; the number of pings. */
  async round(): Promise<number> {
    const { store, clock } = this.options;
    const now = clock.now();
    if (now - this.purgedAt >= KEEP_MS / 2 || now < this.purgedAt) {
      await store.subscriptions.purgeWebsocket(now - 2 * KEEP_MS);
      this.purgedAt = now;
    }
    for (const [pk, at] of this.pinged) if (at < now - KEEP_MS) this.pinged.delete(pk);
    await this.ended();
    await this.keysWithdrawn();
    if (!this.sockets.size) return 0;
    const subscriptions = [...this.sockets.keys()].map((k) => {
      const [tenant, id] = k.split('\u0000') as [string, string];
      return { tenant, id };
    });
    let sent = 0;
    const topics = this.options.topics?.round();
    // Whether each Subscription may still be pinged, judged once a round.
    const judged = new Map<string, Promise<PingJudgement>>();
    for (const n of await store.subscriptions.recent(subscriptions, now - KEEP_MS)) {
      if (this.pinged.has(n.pk)) continue;
      const k = key(n.tenant, n.subscriptionId);
      const bound = [...(this.sockets.get(k) ?? [])].filter((ws) => (ws.data.bound.get(n.subscriptionId) ?? Infinity) <= n.createdAt);
      let judgement: PingJudgement | undefined;
      if (bound.some((ws) => !ws.data.topics.has(n.subscriptionId))) {
        let found = judged.get(k);
        if (found === undefined) judged.set(k, (found = this.pingJudgement(n.tenant, n.subscriptionId, now)));
        judgement = await found;
        // Not judged (an error, logged): not marked pinged, so the next round judges it again while it is recent.
        if (judgement === 'unjudged') continue;
      }
      this.pinged.set(n.pk, n.createdAt);
      for (const ws of bound) {
        const topic = ws.data.topics.get(n.subscriptionId);
        if (!topic) {
          if (typeof judgement === 'object') {
            this.unbindOne(ws, n.subscriptionId);
            ws.send(r4EndedMessage(n.subscriptionId, judgement.inactive));
          }
          if (judgement !== 'ping') continue;
          ws.send(`ping ${n.subscriptionId}`);
          sent++;
          continue;
        }
        const message = await topics?.event(n);
        if (message === undefined || message.owner !== topic.owner) continue;
        ws.send(message.text);
        topic.lastSentAt = now;
        sent++;
      }
    }
    return sent + (topics ? await this.heartbeats(now, topics) : 0);
  }

  /**
   * Whether R4 websocket Subscription `id` of `tenant` may be pinged now. Not once it is no longer active (`error`, `off`,
   * deleted, another channel, topic-based, or without an owner, an import having written over it: what was recorded while it
   * was active waits in the window, or was deleted with its owner), which the sockets
   * bound to it are told as a refused bind is (and are unbound: R4 has no message that suspends a binding, and a client
   * that binds again is answered as any bind). Nor once the scopes recorded for its owner, by today's rules, no longer
   * let it search what it selects (owner-reach.ts grantReaches), as topic-sockets.ts judges a topic-based one; what
   * waits may have been recorded by an older release's matching (a rolling upgrade's server). Nor while its owner's
   * client is disabled or the sign-in it rests on has ended (owner.ts ownerSilenced, as a rest-hook's is dropped): what
   * was recorded before is not pinged (marked pinged: a client enabled again is not sent it later).
   * The grant is judged once per version and owner. An error of the judgement is `unjudged`
   * (logged): nothing is sent, and the notification is judged again the next round.
   */
  private async pingJudgement(tenant: string, id: string, now: number): Promise<PingJudgement> {
    const { store, log } = this.options;
    try {
      const current = await store.resources.read(tenant, 'Subscription', id);
      const sub = current && !current.deleted ? (JSON.parse(current.content) as Record<string, unknown>) : undefined;
      const inactive = r4Inactive(sub);
      if (inactive !== undefined || sub === undefined) return { inactive: inactive ?? 'deleted' };
      const owner = await store.subscriptions.owner(tenant, id);
      if (owner === null) return { inactive: UNOWNED };
      return (await this.silencedBecause(tenant, id, current!.versionId, owner, sub, now)) === undefined ? 'ping' : 'silent';
    } catch (err) {
      log.warn('a websocket subscription could not be judged; its pings wait for the next round', { tenant, subscription: id, err });
      return 'unjudged';
    }
  }

  /**
   * Why active R4 websocket Subscription `id` (version `versionId`, owned by `owner`) is sent nothing, or undefined when
   * it may be: its owner's client is disabled, the sign-in it rests on has ended or its chosen patient is no longer its
   * user's (ownerSilenced), or the scopes recorded
   * for its owner no longer let it search what it selects (grantReaches, judged once per version and owner).
   */
  private async silencedBecause(tenant: string, id: string, versionId: number, owner: string, sub: Record<string, unknown>, now = this.options.clock.now()): Promise<string | undefined> {
    const { grants, authority } = this.options;
    if (authority !== undefined && (await ownerSilenced(authority, tenant, owner))) {
      return "the app that activated it is disabled, the sign-in it was activated with has ended, or the patient in context its user chose is no longer theirs: it notifies nothing until an app activates it again";
    }
    if (grants === undefined) return undefined;
    const k = `${tenant}\u0000${id}\u0000${versionId}\u0000${owner}`;
    if (this.reached.has(k)) return undefined;
    if (!(await grantReaches(grants.fhir, grants.restoreAccess, tenant, owner, sub, now))) {
      return 'the scopes it was activated with no longer let its owner search what it selects: it notifies nothing until an app activates it again';
    }
    if (this.reached.size >= REACHED_KEPT) this.reached.clear();
    this.reached.add(k);
    return undefined;
  }

  /**
   * Tells the sockets bound to a Subscription that is no longer what they bound (an active criteria-based websocket one
   * for `bind`; an active topic-based one, of the owner it was bound for, for `bind-with-token`) so, and unbinds them
   * from it (bound-status.ts): whether or not a notification waits for it, within a round of the change being seen.
   */
  private async ended(): Promise<void> {
    const bound = new Map<string, Set<string>>();
    // Each socket's binding as it is before the read: one bound (or bound again) while the read is under way is judged
    // at the next round, on a read after its bind's (this one may show the Subscription before its activation).
    const before = new Map<string, Map<Socket, unknown>>();
    for (const [k, sockets] of this.sockets) {
      const [tenant, id] = k.split('\u0000') as [string, string];
      bound.set(tenant, (bound.get(tenant) ?? new Set()).add(id));
      before.set(k, new Map([...sockets].map((ws) => [ws, bindingOf(ws, id)])));
    }
    for (const now of await this.status.changed(bound)) {
      for (const [ws, binding] of before.get(key(now.tenant, now.id)) ?? []) {
        if (bindingOf(ws, now.id) !== binding) continue;
        const topic = ws.data.topics.get(now.id);
        const inactive = topic ? undefined : r4Ended(now);
        const message = topic ? topicEndedMessage(now, topic.owner) : inactive === undefined ? undefined : r4EndedMessage(now.id, inactive);
        if (message === undefined) continue;
        this.unbindOne(ws, now.id);
        ws.send(message);
      }
    }
  }

  /**
   * Tells the sockets bound with a binding token whose signing key is no longer published so, and unbinds them: a socket
   * stays bound after its token expires, so its binding is a verification kept, and ends with its key as a verified access
   * token does (a rotation with --compromised withdraws the keys at once: nothing they signed is taken, in every process
   * within a minute; a key retired by a rotation ends what it bound once it is no longer published, a day later). Each key
   * is judged once a round; one that cannot be judged now (the keys cannot be read) is judged again the next round.
   */
  private async keysWithdrawn(): Promise<void> {
    const { topics, log } = this.options;
    if (topics === undefined) return;
    // The keys of the bindings (a few, however many sockets), each judged once; the sockets walked again only when one is gone.
    const kids = new Set<string>();
    for (const ws of this.open) for (const binding of ws.data.topics.values()) kids.add(binding.kid);
    const gone = new Set<string>();
    for (const kid of kids) {
      try {
        if (!(await topics.keyPublished(kid))) gone.add(kid);
      } catch (err) {
        log.warn('whether the key of a websocket binding is still published could not be judged; it is judged again the next round', { kid, err });
      }
    }
    if (gone.size === 0) return;
    for (const ws of this.open) {
      for (const [id, binding] of [...ws.data.topics]) {
        if (!gone.has(binding.kid)) continue;
        this.unbindOne(ws, id);
        ws.send(`error ${id} was bound with a binding token whose signing key is no longer published (a key rotation): nothing more is sent for it here; ask Subscription/${id}/$get-ws-binding-token for another`);
      }
    }
  }

  /** Sends a heartbeat Bundle on each topic binding whose heartbeat period passed without a message; how many. */
  private async heartbeats(now: number, topics: TopicRound): Promise<number> {
    let sent = 0;
    for (const ws of this.open) {
      for (const [id, binding] of ws.data.topics) {
        if (binding.heartbeatMs === undefined || now - binding.lastSentAt < binding.heartbeatMs) continue;
        const message = await topics.heartbeat(ws.data.tenant, id);
        if (message === undefined || message.owner !== binding.owner) continue;
        ws.send(message.text);
        binding.lastSentAt = now;
        sent++;
      }
    }
    return sent;
  }
}
