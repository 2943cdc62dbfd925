/**
 * The R4 notification of a topic-based Subscription (R5 Backport IG: profiles backport-subscription-notification-r4
 * and backport-subscription-status-r4): a `history` Bundle whose first entry is the SubscriptionStatus, a
 * `Parameters` (subscription, topic, status, type, events-since-subscription-start, notification-event),
 * then, by the Subscription's payload content, the focus resource (full-resource: with the resources its
 * topic's notificationShape includes), its fullUrl alone (id-only) or nothing (empty). The operations
 * `$status` and `$events` (operations.ts) answer the same Parameters.
 */
import { randomUUID } from 'node:crypto';
import type { FhirIssue } from '../../errors.ts';
import { issue, operationOutcome } from '../outcome.ts';
import { STATUS_PROFILE } from './topics.ts';
import type { PayloadContent } from './topic-subscription.ts';

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
  /**
   * What was left out of `included` for its cost (full-resource): carried as the OperationOutcome of the focus entry's
   * `response.outcome` (R4 Bundle.entry.response.outcome: the hints and warnings of processing that entry).
   */
  warnings?: FhirIssue[];
  /**
   * Why the event's focus could not be carried, the Subscription's, its topic's or its owner's doing (full-resource:
   * the version notified no longer held, a 4xx refusal of its includes): its entry's `response.status`, and its issues
   * as `response.outcome`, in place of the resource (topic-bundle.ts).
   */
  error?: { status: number; issues: FhirIssue[] };
  /** Sent as with `empty` (its number and time alone): its focus is not the reader's to know (`$events`). */
  withheld?: boolean;
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
    if (s.content !== 'empty' && !e.withheld) {
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
      if (e.withheld) {
        entry.push(withheldEntry(s.subscriptionId, e.number));
        continue;
      }
      const method = e.interaction === 'create' ? 'POST' : e.interaction === 'update' ? 'PUT' : 'DELETE';
      const failed = s.content === 'full-resource' ? e.error : undefined;
      entry.push({
        fullUrl: `${s.base}/${e.type}/${e.id}`,
        ...(s.content === 'full-resource' && !failed && e.resource !== undefined && { resource: e.resource }),
        request: { method, url: method === 'POST' ? e.type : `${e.type}/${e.id}` },
        response: failed ? { status: String(failed.status), outcome: operationOutcome(failed.issues) } : {
          status: method === 'POST' ? '201' : method === 'PUT' ? '200' : '204',
          ...(s.content === 'full-resource' && e.warnings?.length && { outcome: operationOutcome(e.warnings) }),
        },
      });
      if (s.content === 'full-resource' && !failed) {
        for (const inc of e.included ?? []) entry.push({ fullUrl: `${s.base}/${inc.type}/${inc.id}`, resource: inc.resource, request: { method: 'GET', url: `${inc.type}/${inc.id}` }, response: { status: '200' } });
      }
    }
  }
  return { resourceType: 'Bundle', id: randomUUID(), meta: { lastUpdated: new Date(now).toISOString() }, type: 'history', timestamp: new Date(now).toISOString(), entry };
}

/**
 * The entry of an event whose focus is withheld from its reader (topic-bundle.ts eventFocus): the IG asks id-only and
 * full-resource notifications for an entry per event's resource, and a history Bundle's entry for a request and a
 * response (bdl-3, bdl-4). It names nothing the status does not (no fullUrl, no type, no id, no interaction, one status
 * whatever refused the read: out of reach, or gone where reach depends on content): the request is the `$events` call
 * that lists that event alone, which answers the same, and the response a 403 whose outcome says the focus is withheld.
 */
function withheldEntry(subscriptionId: string, n: number): Json {
  return {
    request: { method: 'GET', url: `Subscription/${subscriptionId}/$events?eventsSinceNumber=${n}&eventsUntilNumber=${n}` },
    response: {
      status: '403',
      outcome: operationOutcome([issue('warning', 'suppressed', `The focus of event ${n} is withheld: the reader of this notification may not read it (as its access stands now), so it is neither named nor carried`)]),
    },
  };
}
