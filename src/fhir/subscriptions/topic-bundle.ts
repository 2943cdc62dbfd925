/**
 * The notification Bundle of one of a topic-based Subscription's recorded notifications (notification.ts), as
 * both channels send it: rest-hook (delivery.ts, POSTed) and websocket (sockets.ts, sent over the socket).
 */
import type { Clock } from '../../clock.ts';
import type { PendingNotification, ResourceVersion } from '../../store/types.ts';
import { FhirError } from '../../errors.ts';
import { enumerationAccess, operatorAccess, requireAccess, type Access } from '../access.ts';
import { deletionReachLimited, vreadResource, type FhirDeps, type FhirRequest } from '../crud.ts';
import { issue } from '../outcome.ts';
import { addIncludes, compileSearch, PAGE_READ_IN_REACH } from '../search.ts';
import { notificationBundle, type NotifiedEvent } from './notification.ts';
import { ownerAccess, type RestoreAccess } from './owner.ts';
import type { PayloadContent, TopicRequest } from './topic-subscription.ts';
import { tenantTopics, type Topic } from './topics.ts';

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
  if (request.content !== 'empty') {
    // The focus as its owner may read it now (its client's registration narrowed since the event was matched: held to
    // the narrower reach), with what its topic's notificationShape includes for it, as `$events` judges it for its caller.
    // Without the owners' access (an app built without it), the operator's: the focus carried as stored, no includes.
    const reader = { tenant: sub.tenant, access: deps.restoreAccess ? await readerAccess(deps.restoreAccess, sub, clock.now()) : operatorAccess };
    const include = async () => (deps.restoreAccess ? shapeOf(await tenantTopics(fhir, sub.tenant, clock.now()), request, n.type) : []);
    Object.assign(event, await eventFocus(fhir, reader, { number: event.number, type: n.type, id: n.id, versionId: n.versionId, interaction: n.event }, request.content, include));
  }
  return notificationBundle({ ...status, type: 'event-notification', eventsSinceStart: event.number, events: [event] }, clock.now());
}

/** How long an owner's rebuilt access serves the notifications that follow (ms): less than the client cache's 5 s. */
const READER_KEPT_MS = 1_000;
/** The owners' rebuilt accesses, per app (its RestoreAccess), by tenant and owner record, with when each was rebuilt. */
const readers = new WeakMap<RestoreAccess, Map<string, { at: number; access: Promise<Access> }>>();

/**
 * The access of `sub`'s owner as it stands (ownerAccess, held to its client's registration), rebuilt at most every
 * READER_KEPT_MS for one owner: a delivery's batch and a websocket round judge each notification with it, and rebuilding
 * it for each (its client read, its scopes parsed and their `:in` filters completed) made an id-only delivery 2-4 times
 * slower. A registration narrowed is seen within the client cache's 5 s either way.
 */
function readerAccess(restore: RestoreAccess, sub: NotifiedSubscription, now: number): Promise<Access> {
  let kept = readers.get(restore);
  if (!kept) readers.set(restore, (kept = new Map()));
  const key = `${sub.tenant}\u0000${sub.owner}`;
  const hit = kept.get(key);
  if (hit && now >= hit.at && now - hit.at < READER_KEPT_MS) return hit.access;
  if (kept.size >= 1_000) kept.clear();
  const access = ownerAccess(sub.tenant, sub.owner, restore);
  kept.set(key, { at: now, access });
  // A failed rebuild is not kept: the next notification asks again.
  access.catch(() => kept.delete(key));
  return access;
}

/**
 * Whether `err` is a refusal that settles what an event's focus is for its reader (a FhirError under 500 but a 408
 * or 429, which ask for the same request later): sent as the focus entry's error (delivery), or the event withheld
 * (`$events`). Any other error fails the delivery or the request, to be retried.
 */
export function settledRefusal(err: unknown): err is FhirError {
  return err instanceof FhirError && err.status < 500 && err.status !== 408 && err.status !== 429;
}

/** The `_include`/`_revinclude` parameters of the notificationShape of `type` in the topic `request` names (none: no shape). */
export function shapeOf(topics: Topic[], request: Pick<TopicRequest, 'url' | 'version'>, type: string): [string, string][] {
  const topic = topics.find((t) => t.url === request.url && (request.version === undefined || t.version === request.version));
  return [...(topic?.shapes.find((sh) => sh.type === type)?.include ?? [])];
}

/** An event as `eventFocus` judges its focus: its number, the resource and version it recorded, and what was done. */
export interface RecordedEvent {
  number: number;
  type: string;
  id: string;
  versionId: number;
  interaction: 'create' | 'update' | 'delete';
}

/**
 * What `reader` is given of event `e`'s focus, the same for a delivery (the owner, as its access stands now) and for
 * `$events` (the caller): the version the event recorded (a deletion: the deletion, judged by the content it deleted,
 * as a vread of it is) read with read and search on its type (enumerationAccess, as the events list the type's changed
 * resources). Readable: named, and for full-resource carried (not a deletion), with what `include` (the notificationShape's
 * parameters) adds as `reader` may read it; an include refused leaves the includes out, with a warning saying why, and
 * never the focus the reader may read. Not held (expunged since, or gone under a delivery): named, as the IG asks of
 * id-only and full-resource notifications, with a 404 as the focus entry's response in place of the resource, when the
 * reader's reach of the type does not depend on content; otherwise, as for one out of the reader's reach, withheld (its
 * number and time alone). A refusal to be retried (408, 429) or a fault is thrown.
 */
export async function eventFocus(
  fhir: FhirDeps, reader: FhirRequest, e: RecordedEvent, content: PayloadContent, include: () => Promise<[string, string][]>,
): Promise<Pick<NotifiedEvent, 'resource' | 'included' | 'warnings' | 'error' | 'withheld'>> {
  if (content === 'empty') return {};
  const gone = (): FhirError => new FhirError('not-found', `${e.type}/${e.id} version ${e.versionId}, the focus of event ${e.number}, is no longer held: the notification carries no focus resource`);
  let version: ResourceVersion;
  const listed: FhirRequest = { ...reader, access: enumerationAccess(reader.access) };
  // Named whatever the version holds (its content is not carried, and the reader's reach of the type does not depend on
  // content): nothing to read, as a delivery of id-only events read nothing before it was judged.
  if ((content === 'id-only' || e.interaction === 'delete') && listed.access.can(e.type, 'r') && !deletionReachLimited(listed.access, e.type)) return {};
  try {
    version = await vreadResource(fhir, listed, e.type, e.id, String(e.versionId));
  } catch (err) {
    if (!settledRefusal(err)) throw err;
    // A deletion read within reach (judged by what it deleted): named, with no resource.
    if (e.interaction === 'delete' && err.status === 410) return {};
    if (err.status === 404 && !deletionReachLimited(listed.access, e.type)) {
      const why = gone();
      return content === 'full-resource' && e.interaction !== 'delete' ? { error: { status: why.status, issues: why.issues } } : {};
    }
    return { withheld: true };
  }
  if (content !== 'full-resource' || e.interaction === 'delete') return {};
  const out: Pick<NotifiedEvent, 'resource' | 'included' | 'warnings'> = { resource: JSON.parse(version.content) as Json };
  const params = await include();
  if (params.length === 0) return out;
  try {
    Object.assign(out, await shapeIncluded(fhir, reader, version, params));
  } catch (err) {
    if (!settledRefusal(err)) throw err;
    const why = err.issues.map((i) => i.diagnostics).filter(Boolean).join('; ');
    out.warnings = [issue('warning', 'suppressed', `What the notificationShape of ${e.type} includes for ${e.type}/${e.id} (version ${e.versionId}) was left out: reading it was refused (${err.status}${why ? `: ${why}` : ''})`)];
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
