/**
 * The R4 notification of a topic-based Subscription (R5 Backport IG: profiles backport-subscription-notification-r4
 * and backport-subscription-status-r4): a `history` Bundle whose first entry is the SubscriptionStatus, a
 * `Parameters` (subscription, topic, status, type, events-since-subscription-start, notification-event),
 * then, by the Subscription's payload content, the focus resource (full-resource: with the resources its
 * topic's notificationShape includes), its fullUrl alone (id-only) or nothing (empty). `$status` answers
 * the same Parameters (type query-status) in a `searchset` Bundle.
 */
import { randomUUID } from 'node:crypto';
import { FhirError } from '../../errors.ts';
import type { CapabilityContribution } from '../capability.ts';
import type { ResourceVersion } from '../../store/types.ts';
import { readResource, vreadResource, type FhirDeps, type FhirRequest } from '../crud.ts';
import { MAX_COUNT, searchResources } from '../search.ts';
import { isTopicCriteria, PAYLOAD_CONTENT, STATUS_PROFILE, type PayloadContent } from './topics.ts';

type Json = Record<string, unknown>;

/** SubscriptionStatus.type (R5 subscription-notification-type). */
export type NotificationType = 'handshake' | 'heartbeat' | 'event-notification' | 'query-status' | 'query-event';

/** One event a notification carries. */
export interface NotifiedEvent {
  number: number;
  /** When it was recorded (ms). */
  at: number;
  type: string;
  id: string;
  interaction: 'create' | 'update' | 'delete';
  /** The focus version's JSON (full-resource, and not for a deletion). */
  resource?: Json;
  /** Resources the topic's notificationShape includes (full-resource). */
  included?: { type: string; id: string; resource: Json }[];
}

export interface StatusInput {
  /** The tenant's FHIR base (absolute references). */
  base: string;
  subscriptionId: string;
  topic?: string;
  status: string;
  type: NotificationType;
  eventsSinceStart: number;
  events?: NotifiedEvent[];
  /** The Subscription's `error`, when in error. */
  error?: string;
  content?: PayloadContent;
}

/** The SubscriptionStatus Parameters (backport-subscription-status-r4). */
export function statusParameters(s: StatusInput, id: string): Json {
  const parameter: Json[] = [
    { name: 'subscription', valueReference: { reference: `${s.base}/Subscription/${s.subscriptionId}` } },
    // The IG: topic SHOULD NOT be sent with empty payloads.
    ...(s.topic !== undefined && s.content !== 'empty' ? [{ name: 'topic', valueCanonical: s.topic }] : []),
    { name: 'status', valueCode: s.status },
    { name: 'type', valueCode: s.type },
    { name: 'events-since-subscription-start', valueString: String(s.eventsSinceStart) },
  ];
  for (const e of s.events ?? []) {
    const part: Json[] = [
      { name: 'event-number', valueString: String(e.number) },
      { name: 'timestamp', valueInstant: new Date(e.at).toISOString() },
    ];
    if (s.content !== 'empty') {
      part.push({ name: 'focus', valueReference: { reference: `${s.base}/${e.type}/${e.id}` } });
      for (const inc of e.included ?? []) part.push({ name: 'additional-context', valueReference: { reference: `${s.base}/${inc.type}/${inc.id}` } });
    }
    parameter.push({ name: 'notification-event', part });
  }
  if (s.error !== undefined) parameter.push({ name: 'error', valueCodeableConcept: { text: s.error } });
  return { resourceType: 'Parameters', id, meta: { profile: [STATUS_PROFILE] }, parameter };
}

/** A notification Bundle (type history) for `s`, sent at `now`. */
export function notificationBundle(s: StatusInput, now: number): Json {
  const statusId = randomUUID();
  const entry: Json[] = [{
    fullUrl: `urn:uuid:${statusId}`,
    resource: statusParameters(s, statusId),
    request: { method: 'GET', url: `Subscription/${s.subscriptionId}/$status` },
    response: { status: '200' },
  }];
  if (s.content !== 'empty') {
    for (const e of s.events ?? []) {
      const method = e.interaction === 'create' ? 'POST' : e.interaction === 'update' ? 'PUT' : 'DELETE';
      entry.push({
        fullUrl: `${s.base}/${e.type}/${e.id}`,
        ...(s.content === 'full-resource' && e.resource !== undefined && { resource: e.resource }),
        request: { method, url: method === 'POST' ? e.type : `${e.type}/${e.id}` },
        response: { status: method === 'POST' ? '201' : method === 'PUT' ? '200' : '204' },
      });
      if (s.content === 'full-resource') {
        for (const inc of e.included ?? []) entry.push({ fullUrl: `${s.base}/${inc.type}/${inc.id}`, resource: inc.resource, request: { method: 'GET', url: `${inc.type}/${inc.id}` }, response: { status: '200' } });
      }
    }
  }
  return { resourceType: 'Bundle', id: randomUUID(), meta: { lastUpdated: new Date(now).toISOString() }, type: 'history', timestamp: new Date(now).toISOString(), entry };
}

/**
 * `Subscription/{id}/$status` and `Subscription/$status` (the IG's OperationDefinition backport-subscription-status):
 * a `searchset` Bundle of SubscriptionStatus Parameters (type query-status), one per Subscription: the one
 * named (read as a read would be: 404, 410, 403), or those the caller may search, narrowed by `id` and
 * `status` (each repeatable, values ORed).
 */
export async function subscriptionStatus(deps: FhirDeps, req: FhirRequest, base: string, id: string | undefined, params: URLSearchParams): Promise<Json> {
  let rows: ResourceVersion[];
  if (id !== undefined) {
    rows = [await readResource(deps, req, 'Subscription', id)];
  } else {
    for (const key of params.keys()) {
      if (key !== 'id' && key !== 'status') throw new FhirError('invalid', `Subscription/$status takes the parameters id and status, not '${key}'`, { expression: [key] });
    }
    const search = new URLSearchParams([['_count', String(MAX_COUNT)]]);
    const ids = params.getAll('id').flatMap((v) => v.split(',')).filter(Boolean);
    const statuses = params.getAll('status').flatMap((v) => v.split(',')).filter(Boolean);
    if (ids.length) search.set('_id', ids.join(','));
    if (statuses.length) search.set('status', statuses.join(','));
    rows = (await searchResources(deps, req, 'Subscription', search, true)).rows;
  }
  const entry: Json[] = [];
  for (const row of rows) {
    const sub = JSON.parse(row.content) as Json;
    const statusId = randomUUID();
    const resource = statusParameters({
      base, subscriptionId: row.id, ...(isTopicCriteria(sub.criteria) && { topic: sub.criteria }), status: String(sub.status), type: 'query-status',
      eventsSinceStart: (await deps.store.subscriptions.events(req.tenant, row.id)) ?? 0, ...(typeof sub.error === 'string' && { error: sub.error }),
    }, statusId);
    entry.push({ fullUrl: `urn:uuid:${statusId}`, resource, search: { mode: 'match' } });
  }
  return { resourceType: 'Bundle', id: randomUUID(), type: 'searchset', total: entry.length, ...(entry.length && { entry }) };
}

/** The most events one `$events` answers (the IG lets the server cap it). */
export const MAX_EVENTS = 100;

/** A positive event number given to `$events`, or a 400 naming it. */
function eventNumber(params: URLSearchParams, name: string): number | undefined {
  const raw = params.get(name);
  if (raw === null) return undefined;
  if (!/^[1-9][0-9]{0,15}$/.test(raw)) throw new FhirError('invalid', `${name} '${raw}' is not a positive event number`, { expression: [name] });
  return Number(raw);
}

/**
 * `Subscription/{id}/$events` (the IG's OperationDefinition backport-subscription-events): the kept events
 * (the last EVENTS_KEPT of a topic-based Subscription) numbered `eventsSinceNumber` to `eventsUntilNumber`
 * (default: the last MAX_EVENTS up to the latest; at most MAX_EVENTS, the earliest first), as a `history`
 * Bundle led by a SubscriptionStatus of type `query-event`, with `content` (default: the Subscription's
 * payload content). A full-resource focus is the version the event was about, as the caller may read it
 * (one it may not read, or gone, is sent as id-only).
 */
export async function subscriptionEvents(deps: FhirDeps, req: FhirRequest, base: string, id: string, params: URLSearchParams): Promise<Json> {
  const row = await readResource(deps, req, 'Subscription', id);
  for (const key of params.keys()) {
    if (!['eventsSinceNumber', 'eventsUntilNumber', 'content'].includes(key)) {
      throw new FhirError('invalid', `Subscription/$events takes eventsSinceNumber, eventsUntilNumber and content, not '${key}'`, { expression: [key] });
    }
  }
  const sub = JSON.parse(row.content) as Json;
  if (!isTopicCriteria(sub.criteria)) throw new FhirError('invalid', `Subscription/${id} is not topic-based: $events answers for topic-based Subscriptions`, { expression: ['Subscription.criteria'] });
  const content = params.get('content') ?? topicRequestContent(sub);
  if (content !== 'empty' && content !== 'id-only' && content !== 'full-resource') {
    throw new FhirError('invalid', `content '${content}' is not empty, id-only or full-resource`, { expression: ['content'] });
  }
  const count = (await deps.store.subscriptions.events(req.tenant, id)) ?? 0;
  const since = eventNumber(params, 'eventsSinceNumber');
  const until = eventNumber(params, 'eventsUntilNumber') ?? count;
  const from = since ?? Math.max(1, until - MAX_EVENTS + 1);
  const kept = from > until ? [] : await deps.store.subscriptions.eventLog(req.tenant, id, from, until, MAX_EVENTS);
  const events: NotifiedEvent[] = [];
  for (const e of kept) {
    const event: NotifiedEvent = { number: e.number, at: e.createdAt, type: e.type, id: e.id, interaction: e.event };
    if (content === 'full-resource' && e.event !== 'delete') {
      try {
        event.resource = JSON.parse((await vreadResource(deps, req, e.type, e.id, String(e.versionId))).content) as Json;
      } catch (err) {
        if (!(err instanceof FhirError && err.status < 500)) throw err;
      }
    }
    events.push(event);
  }
  return notificationBundle({
    base, subscriptionId: id, topic: sub.criteria as string, status: String(sub.status), type: 'query-event', eventsSinceStart: count, events, content,
  }, deps.clock.now());
}

/** A Subscription's backport-payload-content, or id-only when it has none. */
function topicRequestContent(sub: Json): string {
  const channel = (sub.channel ?? {}) as { _payload?: { extension?: Json[] } };
  const code = channel._payload?.extension?.find((e) => e.url === PAYLOAD_CONTENT)?.valueCode;
  return typeof code === 'string' ? code : 'id-only';
}

/** `$status` and `$events` on Subscription in the CapabilityStatement, and the IG's server CapabilityStatement instantiated. */
export const subscriptionStatusCapability: CapabilityContribution = {
  operations: [
    { name: 'status', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status', types: ['Subscription'] },
    { name: 'events', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-events', types: ['Subscription'] },
  ],
  instantiates: ['http://hl7.org/fhir/uv/subscriptions-backport/CapabilityStatement/backport-subscription-server-r4'],
};
