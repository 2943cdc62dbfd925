/**
 * The R5 Backport IG's operations on Subscription: `$status` (SubscriptionStatus Parameters in a `searchset`),
 * `$events` (a topic-based Subscription's kept events as a notification Bundle) and `$get-ws-binding-token`, plain functions of
 * the FHIR layer that src/http/fhir.ts routes; and their CapabilityStatement contribution.
 */
import { randomUUID } from 'node:crypto';
import { FhirError } from '../../errors.ts';
import type { CapabilityContribution } from '../capability.ts';
import type { ResourceVersion } from '../../store/types.ts';
import { readResource, type FhirDeps, type FhirRequest } from '../crud.ts';
import { MAX_COUNT, searchResources } from '../search.ts';
import { notificationBundle, statusParameters, type NotifiedEvent } from './notification.ts';
import { ownerClient, ownerDigest, ownerPatient, ownerScopes, ownerUser } from './owner.ts';
import { eventFocus, shapeOf } from './topic-bundle.ts';
import { isTopicCriteria, topicRequest } from './topic-subscription.ts';
import { PAYLOAD_CONTENT, tenantTopics, type Topic } from './topics.ts';

type Json = Record<string, unknown>;

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
 * payload content). Each focus is judged for the caller as a delivery judges it for the owner (topic-bundle.ts
 * eventFocus): named only when the caller may read the version it was about (a deletion, judged by what it deleted)
 * and search its type, as a list of them: the events were matched with the owner's reach, and any reader of the
 * Subscription may ask; one it may not read is sent with its number and time alone, as with `empty`. A full-resource
 * focus is that version, with what its notificationShape includes as the caller may read it; one no longer held is
 * named with a 404 in its place, as a delivery names it, when the caller's reach of its type does not depend on content.
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
  // Each focus judged for the caller as a delivery judges it for the owner (eventFocus): named and carried when the caller
  // may read and search it, with what its topic's notificationShape includes for it as the caller may read that;
  // withheld (its number and time alone) when not.
  let topics: Promise<Topic[]> | undefined;
  const request = topicRequest(sub);
  const includesOf = (type: string) => async () => shapeOf(await (topics ??= tenantTopics(deps, req.tenant, deps.clock.now())), request, type);
  for (const e of kept) {
    const event: NotifiedEvent = { number: e.number, at: e.createdAt, type: e.type, id: e.id, interaction: e.event };
    Object.assign(event, await eventFocus(deps, req, { number: e.number, type: e.type, id: e.id, versionId: e.versionId, interaction: e.event }, content, includesOf(e.type)));
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

/** Signs and reads websocket binding tokens (src/auth/ws-binding-token.ts): one tenant's one Subscription, short-lived. */
export interface WsBindingTokens {
  /** A token for `subscription` of `tenant` while its owner is the one `owner` digests (ownerDigest). */
  sign(tenant: string, subscription: string, owner: string): Promise<{ token: string; expiresAt: number }>;
  /** What a token names and the key that signed it, or undefined for one refused (not signed here, expired, of another kind). */
  verify(token: string): Promise<{ tenant: string; subscription: string; owner: string; kid: string } | undefined>;
  /** Whether key `kid`, which signed a token that bound a socket, is still published (a rotation with --compromised withdraws it). */
  keyPublished(kid: string): Promise<boolean>;
}

/** What `$get-ws-binding-token` signs with and checks the caller's scopes by (src/app.ts injects the authorization server's). */
export interface WsBindingIssuer {
  tokens: WsBindingTokens;
  /** The read and search grants of the `recorded` scopes that `granted` does not imply (src/auth/scopes.ts readsNotImplied). */
  readsNotImplied(recorded: readonly string[], granted: readonly string[]): string[];
}

/**
 * `Subscription/{id}/$get-ws-binding-token` (the IG's OperationDefinition backport-subscription-get-ws-binding-token):
 * a Parameters with a `token` that binds this Subscription alone on `websocket-url` (`bind-with-token {token}`,
 * sockets.ts) until `expiration`. Issued to a caller that may read the Subscription (a read's 404, 410, 403), for an
 * active topic-based Subscription of channel websocket (else a 400 naming the element), and is its owner that reads
 * at least what it read when it activated it (else a 403); no parameter is taken.
 */
export async function subscriptionWsBindingToken(deps: FhirDeps, req: FhirRequest, id: string, params: URLSearchParams, issuer: WsBindingIssuer, websocketUrl: string): Promise<Json> {
  const row = await readResource(deps, req, 'Subscription', id);
  const [extra] = params.keys();
  if (extra !== undefined) throw new FhirError('invalid', `Subscription/{id}/$get-ws-binding-token takes no parameter, not '${extra}'`, { expression: [extra] });
  const sub = JSON.parse(row.content) as Json;
  if (!isTopicCriteria(sub.criteria)) {
    throw new FhirError('invalid', `Subscription/${id} is not topic-based: an R4 websocket Subscription is bound with 'bind {id}', without a token`, { expression: ['Subscription.criteria'] });
  }
  const type = (sub.channel as { type?: unknown } | undefined)?.type;
  if (type !== 'websocket') throw new FhirError('invalid', `Subscription/${id} has channel.type '${String(type)}': a binding token is for a websocket Subscription`, { expression: ['Subscription.channel.type'] });
  if (sub.status !== 'active') throw new FhirError('invalid', `Subscription/${id} is ${String(sub.status)}: a binding token is for an active Subscription`, { expression: ['Subscription.status'] });
  // What the socket is sent was matched with the owner's reach (full resources too), so only the owner may bind it:
  // its client, and the same user when a sign-in activated it. Another reader of the Subscription would hear of
  // what the owner may read and it may not (as $events keeps such events' focus from it). The owner's patient in
  // context too: the same app launched for another patient would be sent the first one's events.
  const owner = await deps.store.subscriptions.owner(req.tenant, id);
  const clientId = owner === null ? null : ownerClient(owner);
  const user = owner === null ? null : ownerUser(owner);
  const patient = owner === null ? null : ownerPatient(owner);
  if (clientId === null || clientId !== req.access.clientId || (user !== null && user.id !== req.access.user?.id) || patient !== (req.access.patient ?? null)) {
    throw new FhirError('forbidden', `Subscription/${id} is bound only by the app (and user, and patient in context) that activated it: a PUT of it with status requested and this token takes ownership (activates it again for this token), and then binds it`);
  }
  // The same app and user with narrower scopes (a token asked for fewer) would be sent what only the owner's token read:
  // each read or search grant the owner's token had must be one the caller's implies.
  const missing = issuer.readsNotImplied(ownerScopes(owner!), req.access.scopes ?? []);
  if (missing.length) {
    throw new FhirError('forbidden', `Subscription/${id} was activated by a token that also read ${missing.join(' ')}, which this token's scopes do not grant: what the websocket is sent was matched with that token's reach. A PUT of it with status requested and this token takes ownership (matched with this token's reach from then on), and then binds it`);
  }
  const { token, expiresAt } = await issuer.tokens.sign(req.tenant, id, ownerDigest(owner!));
  return {
    resourceType: 'Parameters',
    parameter: [
      { name: 'token', valueString: token },
      { name: 'expiration', valueDateTime: new Date(expiresAt).toISOString() },
      { name: 'subscription', valueString: `Subscription/${id}` },
      { name: 'websocket-url', valueUrl: websocketUrl },
    ],
  };
}

/** `$status`, `$events` and `$get-ws-binding-token` on Subscription in the CapabilityStatement, and the IG's server CapabilityStatement instantiated. */
export const subscriptionStatusCapability: CapabilityContribution = {
  operations: [
    { name: 'status', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status', types: ['Subscription'] },
    { name: 'events', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-events', types: ['Subscription'] },
    { name: 'get-ws-binding-token', definition: 'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-get-ws-binding-token', types: ['Subscription'] },
  ],
  instantiates: ['http://hl7.org/fhir/uv/subscriptions-backport/CapabilityStatement/backport-subscription-server-r4'],
};
