/**
 * The notification Bundle of one of a topic-based Subscription's recorded notifications (notification.ts), as
 * both channels send it: rest-hook (delivery.ts, POSTed) and websocket (sockets.ts, sent over the socket).
 */
import type { Clock } from '../../clock.ts';
import type { PendingNotification, ResourceVersion } from '../../store/types.ts';
import { FhirError } from '../../errors.ts';
import { requireAccess } from '../access.ts';
import type { FhirDeps, FhirRequest } from '../crud.ts';
import { issue } from '../outcome.ts';
import { addIncludes, compileSearch, PAGE_READ_IN_REACH } from '../search.ts';
import { notificationBundle, type NotifiedEvent } from './notification.ts';
import { ownerAccess, type RestoreAccess } from './owner.ts';
import type { TopicRequest } from './topic-subscription.ts';
import { tenantTopics } from './topics.ts';

type Json = Record<string, unknown>;

export interface TopicBundleDeps {
  fhir: FhirDeps;
  clock: Clock;
  /** Rebuilds the owner's access: a notificationShape's includes are what the owner may read (without it, none). */
  restoreAccess?: RestoreAccess | undefined;
}

/** The Subscription a notification is for: its tenant, id and owner's record (owner.ts). */
export interface NotifiedSubscription {
  tenant: string;
  id: string;
  owner: string;
}

/** A notification that is no event: the handshake or a heartbeat (sent by the channel, not recorded, for a websocket). */
export interface StatusNotification {
  event: 'handshake' | 'heartbeat';
}

/**
 * The Bundle of notification `n` of Subscription `sub` (its resource `resource`, its request `request`): a
 * handshake or heartbeat, or an event with its focus as the payload content asks (full-resource: the version
 * notified, and what the topic's notificationShape includes for it, as its owner may read it now).
 */
export async function topicBundle(deps: TopicBundleDeps, sub: NotifiedSubscription, resource: Json, request: TopicRequest, n: PendingNotification | StatusNotification): Promise<Json> {
  const { fhir, clock } = deps;
  const base = fhir.fhirBase?.(sub.tenant) ?? '';
  const status = { base, subscriptionId: sub.id, topic: resource.criteria as string, status: String(resource.status), content: request.content };
  if (!('pk' in n) || n.event === 'handshake' || n.event === 'heartbeat' || n.event === undefined) {
    const type = n.event === 'heartbeat' ? 'heartbeat' : 'handshake';
    // A recorded handshake is part of the request's activation (a rest-hook Subscription written `requested`, stored
    // so until the handshake is accepted): its status is `requested`, as in the IG's workflow and R4 handshake example,
    // even when a client wrote it `active` meanwhile. A websocket's handshake answers a bind, to a Subscription already active.
    const requested = type === 'handshake' && 'pk' in n;
    return notificationBundle({ ...status, ...(requested && { status: 'requested' }), type, eventsSinceStart: (await fhir.store.subscriptions.events(sub.tenant, sub.id)) ?? 0 }, clock.now());
  }
  const event: NotifiedEvent = { number: n.eventNumber ?? 0, at: n.createdAt, type: n.type, id: n.id, interaction: n.event };
  if (request.content === 'full-resource' && n.event !== 'delete') {
    try {
      Object.assign(event, await fullResource(deps, sub, request, n));
    } catch (err) {
      // What the Subscription, its topic or its owner's access cause (the focus no longer held, an include the owner may
      // not follow, a 4xx FhirError) is no fault of the server: the event is sent with that error as its entry's status
      // and OperationOutcome, and no focus. A fault of the server or its database still fails the delivery (delivery.ts),
      // as does a refusal to be retried (a 408 or 429): it is no answer about the focus, and an attempt later may carry it.
      if (!settledRefusal(err)) throw err;
      event.error = { status: err.status, issues: err.issues };
    }
  }
  return notificationBundle({ ...status, type: 'event-notification', eventsSinceStart: event.number, events: [event] }, clock.now());
}

/**
 * Whether `err` is a refusal that settles what an event's focus is for its reader (a FhirError under 500 but a 408
 * or 429, which ask for the same request later): sent as the focus entry's error (delivery), or the event withheld
 * (`$events`). Any other error fails the delivery or the request, to be retried.
 */
export function settledRefusal(err: unknown): err is FhirError {
  return err instanceof FhirError && err.status < 500 && err.status !== 408 && err.status !== 429;
}

/**
 * A full-resource event's focus, the version notified, and what its topic's notificationShape includes for it as
 * its owner may read it now; a 404 when that version is no longer held.
 */
async function fullResource(deps: TopicBundleDeps, sub: NotifiedSubscription, request: TopicRequest, n: PendingNotification): Promise<Pick<NotifiedEvent, 'resource' | 'included' | 'warnings'>> {
  const { fhir, clock } = deps;
  const v = await fhir.store.resources.vread(sub.tenant, n.type, n.id, n.versionId);
  if (!v || v.deleted) {
    throw new FhirError('not-found', `${n.type}/${n.id} version ${n.versionId}, the focus of event ${n.eventNumber ?? 0}, is no longer held: the notification carries no focus resource`);
  }
  const out: Pick<NotifiedEvent, 'resource' | 'included' | 'warnings'> = { resource: JSON.parse(v.content) as Json };
  const topic = (await tenantTopics(fhir, sub.tenant, clock.now())).find((t) => t.url === request.url && (request.version === undefined || t.version === request.version));
  const shape = topic?.shapes.find((sh) => sh.type === n.type);
  if (shape?.include.length && deps.restoreAccess) {
    const access = await ownerAccess(sub.tenant, sub.owner, deps.restoreAccess);
    Object.assign(out, await shapeIncluded(fhir, { tenant: sub.tenant, access }, v, shape.include));
  }
  return out;
}

/**
 * What a notificationShape's `_include`/`_revinclude` parameters (`include`) add to `version`, the focus version an event
 * notified, as `req` may read them now: an `_include` follows the references of that version, not of the resource as it
 * stands (written again since, its new subject was named beside the version notified; deleted since, nothing was). The
 * same steps as a search's includes (addIncludes: each target held to the reader's reach), with `version` as the page.
 * A reader that may not search the focus type gets none (a 403), as a search of it by `_id` answered.
 * What a search would refuse for its cost is no error here: a notification is sent, or an event listed, once its focus
 * was written, and nothing its subscriber can narrow would make it cheaper (it was a 400 thrown on every delivery
 * attempt until the Subscription went to `error`, and an event `$events` withheld). Past PAGE_READ_IN_REACH references
 * read to no purpose, reading stops as `$everything`'s does: `warnings` names the focus and what was left out; past
 * MAX_INCLUDES, it says that only the first are carried. The answer is the event's `included` and `warnings` (none: absent).
 */
export async function shapeIncluded(
  fhir: FhirDeps, req: FhirRequest, version: ResourceVersion, include: readonly [string, string][],
): Promise<Required<Pick<NotifiedEvent, 'included'>> & Pick<NotifiedEvent, 'warnings'>> {
  requireAccess(req.access, version.type, 's');
  const compiled = compileSearch(version.type, new URLSearchParams(include as [string, string][]), false, fhir.clock.now());
  // A version written over since is no longer the record: a patient-bound reader's `_revinclude=Provenance:target` must not
  // take it for the patient's record as it stands (provenance-reach.ts patientRecords), or the Provenance of the record as
  // it now is (moved to another patient) would be included. Those are then found as a search finds them, by today's reach.
  const current = await fhir.store.resources.read(req.tenant, version.type, version.id);
  const stale = current?.versionId === version.versionId ? [] : [`${version.type}/${version.id}`];
  const focus = `${version.type}/${version.id}`;
  const pastReach = (unread: number) => issue('warning', 'too-costly', `${focus} (version ${version.versionId}) names more than ${PAGE_READ_IN_REACH} resources that are not held or out of this reader's reach: reading its references stopped after them, and the ${unread} named past them are not included; read them by the references that version holds`);
  const { included, warnings } = await addIncludes(fhir, req, compiled, [version], undefined, stale, pastReach);
  return { included: included.map((r) => ({ type: r.type, id: r.id, resource: JSON.parse(r.content) as Json })), ...(warnings.length && { warnings }) };
}
