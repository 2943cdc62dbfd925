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
import { readResource, type FhirDeps, type FhirRequest } from '../crud.ts';
import { MAX_COUNT, searchResources } from '../search.ts';
import { isTopicCriteria, STATUS_PROFILE, type PayloadContent } from './topics.ts';

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

/** `$status` on Subscription in the CapabilityStatement, and the IG's server CapabilityStatement instantiated. */
export const subscriptionStatusCapability: CapabilityContribution = {
  operations: [{ name: 'status', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status', types: ['Subscription'] }],
  instantiates: ['http://hl7.org/fhir/uv/subscriptions-backport/CapabilityStatement/backport-subscription-server-r4'],
};
