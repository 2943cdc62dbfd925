/**
 * Activation of a Subscription as it is written (create, update, patch, a Bundle's entries): one written
 * `requested` or `active` with a channel Cinder delivers is checked and stored `active` (HAPI FHIR's
 * behaviour; R4 subscription.html: the server sets status to active once it accepts the request), with
 * the writer recorded as its owner. A topic-based rest-hook one written `requested` is stored `requested`
 * until its handshake is accepted (R5 Backport IG, REST Hook channel: "the server SHALL set initial status to
 * requested, pending verification of the nominated endpoint URL"; delivery.ts then writes it `active`), and so is
 * one written `active` unless the version it replaces was `active` to the same endpoint (verified).
 * `off` and `error` ones are stored as written.
 */
import { FhirError } from '../../errors.ts';
import type { Condition, ResourceWriter } from '../../store/types.ts';
import { compileFilter } from '../search.ts';
import type { Access } from '../access.ts';
import type { FhirDeps } from '../crud.ts';
import type { Resource } from '../resource.ts';
import type { CodeSet } from '../search-compile.ts';
import { writtenTerminology } from '../../terminology/written-source.ts';
import { compileCriteria, emptyParameter, requireCriteriaValues, type ResolvedConditions } from './criteria.ts';
import { endpointUrl, privateEndpoint, type ResolveHost } from './endpoint.ts';
import { ownerOf } from './owner.ts';
import { compileTopic, findTopic, isTopicCriteria, topicRequest } from './topic-subscription.ts';
import { committedTopics, isTopicResource, parseTopic, tenantTopics, type Topic } from './topics.ts';

/**
 * The most activated Subscriptions of one tenant (`status` active or requested: ACTIVE_QUERY) that the hub matches
 * (hub.ts reads that many, in id order). Activation refuses one more: accepted, it would read `active` and notify
 * nothing, or, given an id sorting before theirs (a PUT), push other apps' Subscriptions out of the matched set.
 */
export const MAX_ACTIVE = 1_000;
/** The Subscriptions the hub reads to match: those stored active or requested (a topic rest-hook one awaiting its handshake). */
export const ACTIVE_QUERY = new URLSearchParams('status=active,requested');
/** The error a Subscription the server cannot set back to active (its tenant holds MAX_ACTIVE activated ones) carries, set `off`. */
export const BOUND_ERROR = `turned off: the tenant has ${MAX_ACTIVE} active Subscriptions, the most Cinder matches; set another off (or delete it), then activate this one again (status requested)`;

/**
 * The activated Subscriptions (ACTIVE_QUERY) `writer`'s tenant holds, but `except`, up to MAX_ACTIVE + 1: read in the
 * write's transaction (a Bundle's earlier entries too), under the tenant's activation lock (ResourceWriter.lockActivations),
 * held to its commit, so that concurrent activations, of this process or another, never pass the bound together.
 */
export async function activatedIn(writer: ResourceWriter, except?: string): Promise<number> {
  // Held to the commit: another write's activation counts after this one's is committed (exact on PostgreSQL too).
  await writer.lockActivations();
  const where = compileFilter('Subscription', ACTIVE_QUERY) as Condition[];
  const rows = await writer.search({ type: 'Subscription', where, sort: [], count: MAX_ACTIVE + 1 });
  return rows.filter((v) => v.id !== except).length;
}

/** Per write (its writer): the activated Subscriptions of the tenant as last counted, with this write's activations since. */
const activatedInWrite = new WeakMap<ResourceWriter, { count: number }>();

/** The channel types Cinder delivers: rest-hook (delivery.ts) and websocket (sockets.ts). */
export const DELIVERED_CHANNELS = ['rest-hook', 'websocket'];
/** The payload media types a rest-hook may ask for (none: a notification without a body). */
export const PAYLOADS = ['application/fhir+json', 'application/json', 'application/fhir+xml', 'application/xml'];
/** The payload media types a topic-based websocket Subscription may name (its Bundles are sent as JSON). */
const JSON_PAYLOADS = ['application/fhir+json', 'application/json'];

/** What activation reads besides the Subscription. */
export interface ActivationContext {
  deps: FhirDeps;
  tenant: string;
  access: Access;
  now: number;
  allowPrivate: boolean;
  resolve: ResolveHost;
  /** The write's transaction: a topic it wrote before the Subscription is found (topics.ts tenantTopics). */
  writer?: ResourceWriter;
  /**
   * The Subscription's current version as stored, parsed, with its id (none: new, or deleted): whether it was ever
   * activated (an owner recorded: not one `cinder import` stored) and whether its endpoint was verified (`verified`).
   */
  stored?: { id: string; resource: Record<string, unknown> };
  /** What the write's activations read of the committed state before its transaction began (prepareActivation). */
  reads?: ActivationReads;
}

/**
 * What a write's activations read of the committed state, read before its transaction begins
 * (prepareActivation): the tenant's topics and the conditions their criteria resolve. Inside a write transaction
 * nothing is read but through its writer (ARCHITECTURE.md): a read on another connection of the PostgreSQL pool
 * while the transaction holds one waited for ever once concurrent writes filled the pool.
 */
export interface ActivationReads {
  topics?: Promise<Topic[]>;
  resolved: ResolvedConditions;
}

/** A transaction's entries, written as one unit (prepareActivation): the resources its DELETE entries delete, besides those it writes. */
export interface Together {
  deleted: readonly { type: string; id: string }[];
}

/** An activated Subscription, its owner's record and its channel type. */
export interface Activated {
  resource: Resource;
  owner: string;
  channel: string;
  /**
   * A topic-based rest-hook Subscription asking to be activated (written `requested`, or `active` over no verified endpoint):
   * stored `requested`, a handshake notification is recorded for it.
   */
  handshake?: boolean;
  /** A topic-based Subscription's heartbeat period (backport-heartbeat-period, ms). */
  heartbeatMs?: number;
  /** The version it replaces has no owner (stored by `cinder import`): never activated, whatever its status says. */
  unowned?: boolean;
}

type Json = Record<string, unknown>;

const refuse = (text: string, at: string) => new FhirError('unprocessable', text, { expression: [at] });

/** A header line `Name: value`, as R4 channel.header has it. */
const HEADER = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t -~]*$/;

/** Whether `line` is a header line an HTTP request can carry (HEADER): checked at activation, and again as it is sent. */
export function sendableHeader(line: unknown): line is string {
  return typeof line === 'string' && HEADER.test(line);
}

/** The media type of a payload, without parameters (`application/fhir+json;charset=utf-8`). */
export function payloadType(payload: unknown): string | undefined {
  return typeof payload === 'string' ? payload.split(';')[0]!.trim().toLowerCase() : undefined;
}

/**
 * A media type as an HTTP field value may carry it (RFC 9110 8.3.1: `type/subtype`, then `;name=value` parameters,
 * each value a token or a quoted string, ASCII throughout). A rest-hook sends its payload as its Content-Type: a
 * FHIR code (any characters but whitespace runs) may hold what no header can, which a delivery could never send.
 */
const TCHAR = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const MEDIA_TYPE = new RegExp(`^${TCHAR}/${TCHAR}(?:[ \\t]*;[ \\t]*${TCHAR}=(?:${TCHAR}|"(?:[\\t \\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\t \\x21-\\x7e])*"))*$`);

/** Whether `payload` can be sent as a Content-Type header (MEDIA_TYPE). */
export function sendablePayload(payload: unknown): boolean {
  return typeof payload === 'string' && MEDIA_TYPE.test(payload);
}

/**
 * `resource` as stored when it asks to be active: checked (criteria compiled as a search by `access`,
 * a deliverable channel, an endpoint outside private networks, headers, payload) and set `active` (a
 * topic-based rest-hook one written `requested`, or written `active` without its endpoint verified (`verified`):
 * `requested`, its handshake recorded), or `off` when its `end` has passed; undefined for one that does not ask (off,
 * error). A 422 naming the element that cannot be honoured.
 */
export async function activateSubscription(resource: Resource, ctx: ActivationContext): Promise<Activated | undefined> {
  const r = resource as Json;
  if (r.status !== 'requested' && r.status !== 'active') return undefined;
  const channel = (r.channel ?? {}) as Json;
  if (!DELIVERED_CHANNELS.includes(channel.type as string)) {
    throw refuse(`Subscription.channel.type '${String(channel.type)}' is not delivered by Cinder: it delivers ${DELIVERED_CHANNELS.join(', ')}`, 'Subscription.channel.type');
  }
  const topicBased = isTopicCriteria(r.criteria);
  let heartbeatMs: number | undefined;
  if (topicBased) {
    // A topic (R5 Backport IG): its filters held to the topic's canFilterBy, compiled for the writer.
    // rest-hook (delivery.ts), or websocket (sockets.ts: bound with a token of $get-ws-binding-token, JSON sent over it).
    const request = topicRequest(r);
    if (channel.type === 'rest-hook') {
      // A websocket's heartbeats are sent by the process holding the socket (sockets.ts), not recorded.
      if (request.heartbeatSeconds !== undefined) heartbeatMs = request.heartbeatSeconds * 1000;
      if (channel.payload === undefined) throw refuse('a topic-based Subscription needs channel.payload: application/fhir+json or application/fhir+xml (with backport-payload-content)', 'Subscription.channel.payload');
    } else if (channel.payload !== undefined && !JSON_PAYLOADS.includes(payloadType(channel.payload)!)) {
      throw refuse(`Subscription.channel.payload '${String(channel.payload)}': a websocket sends its notification Bundles as JSON (${JSON_PAYLOADS.join(' or ')}, or none)`, 'Subscription.channel.payload');
    }
    const topic = findTopic(await tenantTopics(ctx.deps, ctx.tenant, ctx.now, ctx.writer, ctx.reads?.topics), request);
    // A filter's parameter with no value would be ignored, the Subscription told of every resource of the type (requireCriteriaValues).
    for (const [type, query] of request.filters) {
      const key = emptyParameter(query);
      if (key !== undefined) throw refuse(`backport-filter-criteria '${type}?${query}': the parameter '${key}' has no value, which a search would ignore, notifying every ${type} the topic triggers on; give it a value or leave it out`, request.filterAt.get(type) ?? 'Subscription.criteria');
    }
    await compileTopicFor(topic, request, ctx);
  } else {
    requireCriteriaValues(r.criteria);
    await compileCriteria(ctx.deps, ctx.tenant, ctx.access, r.criteria, ctx.now, ctx.reads?.resolved);
  }
  // A websocket subscription is pinged over the sockets bound to it: no endpoint, payload or header is used.
  if (channel.type === 'rest-hook') await checkRestHook(channel, ctx);
  const ended = typeof r.end === 'string' && Date.parse(r.end) <= ctx.now;
  // One `cinder import` stored (no owner) was never activated, nor its endpoint verified, whatever its status says.
  // Read in the write's transaction (the writer): a read on another connection while it holds one could wait for ever
  // on a pool that concurrent writes have filled.
  const unowned = ctx.stored !== undefined && ctx.writer !== undefined && !(await ctx.writer.subscriptionOwned(ctx.stored.id));
  // A websocket's handshake is sent on each bind (sockets.ts); a rest-hook's endpoint is verified by its handshake first
  // (the Backport IG's REST Hook channel), whether written `requested` or `active`: only one already verified stays active.
  // One stored `active` with its handshake still waiting (an older release stored it so at once) was not verified.
  const handshake = topicBased && !ended && channel.type === 'rest-hook'
    && (r.status === 'requested' || unowned || !verified(ctx.stored?.resource, channel.endpoint)
      || (ctx.writer !== undefined && (await ctx.writer.handshakeWaiting(ctx.stored!.id))));
  // One more activated Subscription than the hub matches is refused, not stored active to notify nothing. Counted in
  // the write's transaction (its writer: a Bundle's earlier entries too); one already activated is among them.
  if (!ended && ctx.writer !== undefined && !(ctx.stored !== undefined && isActivated(ctx.stored.resource) && !unowned)) {
    // Counted once per write and then kept up by its own activations (a transaction of many reads the rows once), and
    // counted again whenever that would reach the bound, so that a refusal always rests on the count as it stands.
    let seen = activatedInWrite.get(ctx.writer);
    if (seen === undefined || seen.count + 1 >= MAX_ACTIVE) {
      seen = { count: await activatedIn(ctx.writer, ctx.stored?.id) };
      activatedInWrite.set(ctx.writer, seen);
    }
    if (seen.count >= MAX_ACTIVE) {
      throw new FhirError('unprocessable', `the tenant has ${MAX_ACTIVE} active Subscriptions, the most Cinder matches: set one off (or delete it) before activating another`, { expression: ['Subscription.status'] });
    }
    seen.count++;
  }
  const { error: _error, ...rest } = r;
  return {
    resource: { ...rest, status: ended ? 'off' : handshake ? 'requested' : 'active' } as unknown as Resource, owner: ownerOf(ctx.access), channel: channel.type as string,
    ...(handshake && { handshake: true }),
    ...(heartbeatMs !== undefined && !ended && { heartbeatMs }),
    ...(unowned && { unowned }),
  };
}

/** A topic-based Subscription's request compiled against `topic` for its writer, its conditions resolved once (ctx.reads). */
function compileTopicFor(topic: Topic, request: ReturnType<typeof topicRequest>, ctx: Omit<ActivationContext, 'writer' | 'stored'>) {
  const resolved = ctx.reads?.resolved;
  return compileTopic(ctx.deps, ctx.tenant, ctx.access, topic, request, ctx.now,
    async (criteria) => (await compileCriteria(ctx.deps, ctx.tenant, ctx.access, criteria, ctx.now, resolved)).where, resolved);
}

/**
 * Reads, before a write's transaction begins, what activating the Subscriptions among `resources` that ask to be
 * active reads of the committed state (into `ctx.reads`): the tenant's topics, and the conditions their criteria
 * (and their topics', a topic among `resources` too) resolve from ValueSets, code systems and hierarchies. Activation
 * in the transaction then reads them from there, and through its writer alone. What fails here is left for activation
 * to refuse, as it would. `together` (a transaction's entries, one unit): the CodeSystems and ValueSets among
 * `resources` are resolved as written, in front of the stored ones (TerminologyService.contextWith), and those its
 * DELETE entries name (`together.deleted`) are not found, as a topic among them is found.
 */
export async function prepareActivation(
  resources: readonly (Resource | undefined)[], base: Omit<ActivationContext, 'writer' | 'stored'> & { reads: ActivationReads }, together?: Together,
): Promise<void> {
  const asking = resources.filter((r): r is Resource => {
    const sub = r as Json | undefined;
    return sub?.resourceType === 'Subscription' && (sub.status === 'requested' || sub.status === 'active')
      && DELIVERED_CHANNELS.includes((sub.channel as Json | undefined)?.type as string);
  }) as unknown as Json[];
  if (asking.length === 0) return;
  const terminology = together ? writtenTerminology(resources as readonly (Json | undefined)[], together.deleted) : undefined;
  const expandCodes = base.deps.expandCodes;
  const ctx = terminology === undefined || expandCodes === undefined
    ? base
    : { ...base, deps: { ...base.deps, expandCodes: (tenant: string, codes: CodeSet) => expandCodes(tenant, codes, terminology) } };
  const ignore = () => undefined;
  // Topics this write stores (a transaction's Basic entries) may be the ones its Subscriptions name.
  const written = resources.flatMap((r) => {
    try {
      return r?.resourceType === 'Basic' && isTopicResource(r) ? [parseTopic(r as unknown as Json)] : [];
    } catch {
      return [];
    }
  });
  for (const r of asking) {
    if (!isTopicCriteria(r.criteria)) {
      await compileCriteria(ctx.deps, ctx.tenant, ctx.access, r.criteria, ctx.now, ctx.reads.resolved).catch(ignore);
      continue;
    }
    let request;
    try {
      request = topicRequest(r);
    } catch {
      continue;
    }
    ctx.reads.topics ??= committedTopics(ctx.deps, ctx.tenant, ctx.now);
    ctx.reads.topics.catch(ignore);
    const stored = await ctx.reads.topics.catch(() => [] as Topic[]);
    for (const topic of [...stored, ...written]) {
      if (topic.url === request.url) await compileTopicFor(topic, request, ctx).catch(ignore);
    }
  }
}

/**
 * Whether a Subscription as stored is activated, so matched and delivered: `active`, or a topic-based rest-hook one
 * stored `requested`, which its handshake's acceptance sets `active`.
 */
export function isActivated(sub: { status?: unknown; criteria?: unknown; channel?: unknown }): boolean {
  if (sub.status === 'active') return true;
  return sub.status === 'requested' && isTopicCriteria(sub.criteria) && (sub.channel as { type?: unknown } | undefined)?.type === 'rest-hook';
}

/**
 * Whether a topic rest-hook Subscription as `stored` had `endpoint` verified: stored `active` (its handshake accepted, or
 * activated before handshakes were awaited, and then sent: activateSubscription asks the outbox), topic-based, rest-hook,
 * to the same endpoint. One new, awaiting its handshake (`requested`), off, in error, of another channel or criteria, or
 * moved to another endpoint has not.
 */
function verified(stored: Json | undefined, endpoint: unknown): boolean {
  const channel = stored?.channel as Json | undefined;
  return stored?.status === 'active' && isTopicCriteria(stored.criteria) && channel?.type === 'rest-hook' && channel.endpoint === endpoint;
}

/** A rest-hook's endpoint (an absolute http(s) URL, outside private networks), payload and headers, or a 422 naming the element. */
async function checkRestHook(channel: Json, ctx: ActivationContext): Promise<void> {
  const url = endpointUrl(channel.endpoint);
  if (typeof url === 'string') throw refuse(`Subscription.channel.endpoint ${url}: a rest-hook needs an absolute http(s) URL`, 'Subscription.channel.endpoint');
  if (!ctx.allowPrivate) {
    const why = await privateEndpoint(url, ctx.resolve);
    if (why !== undefined) throw refuse(`Subscription.channel.endpoint is refused: ${why} (CINDER_SUBSCRIPTION_ALLOW_PRIVATE=true allows it)`, 'Subscription.channel.endpoint');
  }
  if (channel.payload !== undefined && !PAYLOADS.includes(payloadType(channel.payload)!)) {
    throw refuse(`Subscription.channel.payload '${String(channel.payload)}' is not one Cinder sends: ${PAYLOADS.join(' or ')}, or none`, 'Subscription.channel.payload');
  }
  if (channel.payload !== undefined && !sendablePayload(channel.payload)) {
    throw refuse(`Subscription.channel.payload '${String(channel.payload)}' is not a media type an HTTP Content-Type can carry (type/subtype, then ;name=value parameters in ASCII)`, 'Subscription.channel.payload');
  }
  const headers = Array.isArray(channel.header) ? (channel.header as unknown[]) : [];
  headers.forEach((h, i) => {
    if (!sendableHeader(h)) throw refuse(`Subscription.channel.header[${i}] is not a header line 'Name: value'`, `Subscription.channel.header[${i}]`);
    // The Host is the endpoint's (outbound.ts sets it): another would pick a virtual host behind the address the
    // endpoint's name was checked for, one that name never named.
    if (/^host:/i.test(h)) throw refuse(`Subscription.channel.header[${i}] sets Host, which is the endpoint's own (its URL's host and port)`, `Subscription.channel.header[${i}]`);
  });
}
