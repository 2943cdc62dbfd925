/**
 * A topic-based Subscription (R5 Backport IG profile backport-subscription, topics.ts): what it asks for
 * (its topic's canonical URL, backport-filter-criteria filters, payload content, channel extensions), the
 * topic it names, and its triggers compiled for its owner, each a 422 naming the element it cannot honour.
 */
import { FhirError } from '../../errors.ts';
import type { Condition } from '../../store/types.ts';
import { requireAccess, type Access } from '../access.ts';
import type { FhirDeps } from '../crud.ts';
import { paramOf } from '../definitions.ts';
import { isResourceType } from '../resource-types.ts';
import { compileFilter, resolveConditions } from '../search.ts';
import { resolvedOnce, type ResolvedConditions } from './criteria.ts';
import { BACKPORT, CHANNEL_TYPE, FHIR_TYPES, FILTER_CRITERIA, HEARTBEAT_PERIOD, MAX_COUNT, PAYLOAD_CONTENT, TIMEOUT, type Topic, type TopicTrigger } from './topics.ts';

type Json = Record<string, unknown>;

/** The R4 channel types' code system, which backport-channel-type's Coding may name. */
const CHANNEL_TYPES = 'http://terminology.hl7.org/CodeSystem/subscription-channel-type';

/** The search parameter types whose values may carry a comparator prefix. */
const PREFIXED = new Set(['number', 'date', 'quantity']);

const refuse = (text: string, at: string) => new FhirError('unprocessable', text, { expression: [at] });

/** Whether a Subscription's `criteria` names a topic (a canonical URL) rather than a search. */
export function isTopicCriteria(criteria: unknown): criteria is string {
  return typeof criteria === 'string' && /^(https?:\/\/|urn:)/.test(criteria);
}

export type PayloadContent = 'empty' | 'id-only' | 'full-resource';

/** What a topic-based Subscription asks for (profile backport-subscription), read from its elements. */
export interface TopicRequest {
  /** The topic's canonical URL and the version it names (`url|version`), if any. */
  url: string;
  version?: string;
  /** Its filters as a query string per type (backport-filter-criteria `Type?param=value`, several ANDed). */
  filters: Map<string, string>;
  /** Where each type's (first) filter stands: `Subscription.criteria.extension[i]`. */
  filterAt: Map<string, string>;
  content: PayloadContent;
  heartbeatSeconds?: number;
  timeoutSeconds?: number;
  maxCount?: number;
}

function extensionsOf(holder: unknown): Json[] {
  const list = (holder as { extension?: unknown } | undefined)?.extension;
  return Array.isArray(list) ? (list as Json[]) : [];
}

/** An unsignedInt/positiveInt channel extension's value, or a 422 naming it. */
function channelNumber(channel: Json, url: string, key: 'valueUnsignedInt' | 'valuePositiveInt', min: number, max: number): number | undefined {
  const exts = extensionsOf(channel);
  const i = exts.findIndex((e) => e?.url === url);
  if (i < 0) return undefined;
  const v = exts[i]![key];
  const name = url.slice(BACKPORT.length);
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) {
    throw refuse(`Subscription.channel extension ${name} needs ${key} from ${min} to ${max}`, `Subscription.channel.extension[${i}]`);
  }
  return v;
}

/** The longest backport-timeout honoured (s): a delivery waits at most this long. */
export const MAX_TIMEOUT_SECONDS = 60;

/**
 * Reads a topic-based Subscription's request (criteria, filters, channel extensions), or a 422 naming the
 * element: a filter that is not `Type?query`, a payload without its content code, a number out of range.
 */
export function topicRequest(sub: Json): TopicRequest {
  const criteria = sub.criteria as string;
  const bar = criteria.indexOf('|');
  const url = bar < 0 ? criteria : criteria.slice(0, bar);
  const request: TopicRequest = { url, filters: new Map(), filterAt: new Map(), content: 'id-only', ...(bar >= 0 && { version: criteria.slice(bar + 1) }) };
  extensionsOf(sub._criteria).forEach((e, i) => {
    const at = `Subscription.criteria.extension[${i}]`;
    // An extension on criteria would narrow what is notified (R5's cross-version filter, another IG's): left unread,
    // the Subscription would be told of more than it asked for (the IG: reject what the server does not implement).
    if (e?.url !== FILTER_CRITERIA) throw refuse(`the extension '${String(e?.url)}' on Subscription.criteria is not one Cinder reads: a topic's filters are ${FILTER_CRITERIA}`, at);
    const raw = e.valueString;
    const q = typeof raw === 'string' ? raw.indexOf('?') : -1;
    if (typeof raw !== 'string' || q <= 0) throw refuse(`a backport-filter-criteria needs valueString 'Type?parameter=value' (got ${JSON.stringify(raw)})`, at);
    const type = raw.slice(0, q);
    if (!isResourceType(type)) throw refuse(`backport-filter-criteria '${raw}' does not start with a resource type Cinder knows ('${type}')`, at);
    const before = request.filters.get(type);
    request.filters.set(type, before ? `${before}&${raw.slice(q + 1)}` : raw.slice(q + 1));
    if (!request.filterAt.has(type)) request.filterAt.set(type, at);
  });
  const channel = (sub.channel ?? {}) as Json;
  const content = extensionsOf(channel._payload).find((e) => e?.url === PAYLOAD_CONTENT)?.valueCode;
  if (content === undefined) {
    throw refuse(`a topic-based Subscription needs channel.payload with the extension ${PAYLOAD_CONTENT} (empty, id-only or full-resource)`, 'Subscription.channel.payload');
  }
  if (content !== 'empty' && content !== 'id-only' && content !== 'full-resource') {
    throw refuse(`backport-payload-content '${String(content)}' is not empty, id-only or full-resource`, 'Subscription.channel.payload');
  }
  request.content = content;
  const heartbeat = channelNumber(channel, HEARTBEAT_PERIOD, 'valueUnsignedInt', 1, 86_400);
  const timeout = channelNumber(channel, TIMEOUT, 'valueUnsignedInt', 1, MAX_TIMEOUT_SECONDS);
  const maxCount = channelNumber(channel, MAX_COUNT, 'valuePositiveInt', 1, 2 ** 31 - 1);
  if (heartbeat !== undefined) request.heartbeatSeconds = heartbeat;
  if (timeout !== undefined) request.timeoutSeconds = timeout;
  if (maxCount !== undefined) request.maxCount = maxCount;
  // backport-channel-type carries channel types R4 lacks; Cinder delivers topic notifications by rest-hook and
  // websocket, which R4's channel.type has: the extension may only repeat it.
  extensionsOf(channel._type).forEach((e, i) => {
    if (e?.url !== CHANNEL_TYPE) return;
    const coding = e.valueCoding as { system?: unknown; code?: unknown } | undefined;
    if ((coding?.code !== 'rest-hook' && coding?.code !== 'websocket') || (coding.system !== undefined && coding.system !== CHANNEL_TYPES)) {
      throw refuse(`backport-channel-type ${JSON.stringify(coding ?? null)} is not delivered by Cinder: topic-based Subscriptions are delivered by rest-hook or websocket`, `Subscription.channel.type.extension[${i}]`);
    }
    if (coding.code !== channel.type) {
      throw refuse(`backport-channel-type '${coding.code}' is not Subscription.channel.type '${String(channel.type)}'`, `Subscription.channel.type.extension[${i}]`);
    }
  });
  return request;
}

/**
 * The topic a request names, among `topics`: its URL (and version when given), `active`; else a 422 naming
 * Subscription.criteria. A draft, retired, `unknown` or status-less topic is not one a Subscription may name (HAPI
 * FHIR serves only active SubscriptionTopics), and so is not advertised in `metadata` either (topic-canonicals.ts).
 */
export function findTopic(topics: Topic[], request: TopicRequest): Topic {
  const named = topics.filter((t) => t.url === request.url && (request.version === undefined || t.version === request.version));
  const usable = named.filter((t) => t.status === 'active');
  const what = request.version === undefined ? request.url : `${request.url}|${request.version}`;
  if (!usable.length) {
    const statuses = [...new Set(named.map((t) => t.status ?? 'without a status'))].join(', ');
    throw refuse(named.length
      ? `the SubscriptionTopic '${what}' is not active (${statuses}): a Subscription may name an active topic, as metadata lists them`
      : `no SubscriptionTopic '${what}' is known to this server (a Basic coded ${FHIR_TYPES}|SubscriptionTopic with that url)`, 'Subscription.criteria');
  }
  if (usable.length > 1) throw refuse(`${usable.length} active SubscriptionTopics have the url '${what}' (Basic/${usable.map((t) => t.id).join(', Basic/')}): name its version (url|version)`, 'Subscription.criteria');
  return usable[0]!;
}

/** A trigger ready to match: its type, its filters and owner's reach compiled, and its queryCriteria tests. */
export interface CompiledTrigger {
  trigger: TopicTrigger;
  /** The subscription's filters for the type, the owner's scope filters and patient compartment. */
  where: Condition[];
  /** The filter criteria as a search, to compile again (hub.ts) when the owner's client changes. */
  criteria: string;
  previous?: Condition[];
  current?: Condition[];
}

/**
 * Checks a request's filters against its topic's canFilterBy (each parameter listed for its type, with
 * its modifier listed) and compiles each trigger for `access`: a 422 naming the filter, a 403 for a
 * type the owner may not search.
 */
export async function compileTopic(deps: FhirDeps, tenant: string, access: Access, topic: Topic, request: TopicRequest, now: number,
  compileCriteria: (criteria: string) => Promise<Condition[]>, resolved?: ResolvedConditions): Promise<CompiledTrigger[]> {
  const triggerTypes = new Set(topic.triggers.map((t) => t.type));
  for (const [type, query] of request.filters) {
    const at = filterAtOf(request, type);
    if (!triggerTypes.has(type)) throw refuse(`backport-filter-criteria names ${type}, which the topic '${topic.url}' does not trigger on (${[...triggerTypes].join(', ')})`, at);
    for (const [key, value] of new URLSearchParams(query)) {
      const [param, modifier] = key.split(':', 2) as [string, string | undefined];
      const offers = topic.filters.filter((f) => f.param === param && (f.type === undefined || f.type === type));
      if (!offers.length) {
        const offered = topic.filters.filter((f) => f.type === undefined || f.type === type).map((f) => f.param);
        throw refuse(`backport-filter-criteria parameter '${key}' of ${type} is not offered by the topic's canFilterBy (${offered.length ? offered.join(', ') : 'none'})`, at);
      }
      // The canFilterBy entries of the parameter (one for the type, one for every type) together say what it allows.
      const modifiers = [...new Set(offers.flatMap((f) => f.modifiers))];
      if (modifier !== undefined && !modifiers.includes(modifier)) {
        throw refuse(`backport-filter-criteria parameter '${key}': the topic's canFilterBy allows ${modifiers.length ? `the modifiers ${modifiers.join(', ')}` : 'no modifier'} on '${param}'`, at);
      }
      // A comparator is a prefix of the value (R4's search syntax: `date=ge2024-01-01`), of the parameter types that take
      // one; without a prefix it is `eq`. Listed for the parameter, only those are allowed (R5 canFilterBy.comparator).
      const comparators = [...new Set(offers.flatMap((f) => f.comparators))];
      const def = paramOf(type, param);
      if (comparators.length && modifier === undefined && def !== undefined && PREFIXED.has(def.type)) {
        for (const v of value.split(',')) {
          const prefix = /^(eq|ne|gt|lt|ge|le|sa|eb|ap)/.exec(v)?.[1] ?? 'eq';
          if (!comparators.includes(prefix)) {
            throw refuse(`backport-filter-criteria parameter '${key}': the comparator '${prefix}' of '${v}' is not one the topic's canFilterBy allows on '${param}' (${comparators.join(', ')})`, at);
          }
        }
      }
    }
  }
  const out: CompiledTrigger[] = [];
  for (const trigger of topic.triggers) {
    requireAccess(access, trigger.type, 's');
    const query = request.filters.get(trigger.type);
    const criteria = query === undefined ? trigger.type : `${trigger.type}?${query}`;
    let where: Condition[];
    try {
      where = await compileCriteria(criteria);
    } catch (err) {
      if (err instanceof FhirError && err.status === 422) throw refuse(`backport-filter-criteria '${criteria}' is not a search Cinder can run: ${err.message}`, filterAtOf(request, trigger.type));
      throw err;
    }
    const test = (q: string | undefined) => {
      if (q === undefined) return undefined;
      const pending = compileFilter(trigger.type, new URLSearchParams(q), now);
      return resolvedOnce(resolved, trigger.type, pending, () => resolveConditions({ expandCodes: deps.expandCodes, fhirBase: deps.fhirBase, store: deps.store, access }, tenant, pending));
    };
    const previous = await test(trigger.previous);
    const current = await test(trigger.current);
    out.push({ trigger, where, criteria, ...(previous && { previous }), ...(current && { current }) });
  }
  return out;
}

/** Where the filter of `type` stands among the criteria's extensions (its first). */
function filterAtOf(request: TopicRequest, type: string): string {
  return request.filterAt.get(type) ?? 'Subscription.criteria';
}
