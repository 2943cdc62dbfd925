/**
 * The Subscriptions a client activated on its own authority (client credentials: an owner naming no user, owner.ts),
 * made to show what its registration allows (R4 Subscription.status and `error`, which the Backport IG's topic-based
 * Subscriptions share). Disabled (`cinder client disable`), or registered with scopes that no longer let it search
 * what a Subscription selects (`cinder client update --scope`), the client's Subscriptions notify nothing (the hub and
 * the delivery loop skip them), so each is paused: set `error`, its `error` saying why (R4: "the server has an error
 * executing the notification"). Once the registration allows again (`client enable`, scopes widened), each the server
 * paused, and only those (its current version the pause, unchanged since, and each pause changing nothing but the
 * status and `error`, however many there were: statusBefore), goes back to the status it had: `active`, or
 * `requested` for a topic rest-hook one still awaiting its handshake (R5's state machine: error to active once the
 * server recovers). Its owner and count stay: the client's authority is its registration. `cinder client delete`
 * turns every one of them `off`, for good, whatever it read (turnOffClientSubscriptions). Those it activated on its users' sign-ins rest on its registration as well as on the
 * sign-in: they are paused and set back for its scopes alike, while its disable and delete, which end every sign-in
 * with it, turn them `off` (user-authority.ts).
 */
import { isDeepStrictEqual } from 'node:util';
import type { Clock } from '../../clock.ts';
import type { ResourceVersion, Store } from '../../store/types.ts';
import type { Access } from '../access.ts';
import type { FhirDeps } from '../crud.ts';
import { ownerClient, ownerPatient, ownerScopes, ownerUser } from './owner.ts';
import { grantError, olderGrantLapsed, searchesWhatItSelects, topicRefusal, unsearchedTriggers } from './owner-reach.ts';
import { refusedPauseOf } from './refused.ts';
import { isTopicCriteria } from './topic-subscription.ts';
import { tenantTopics } from './topics.ts';
import { resumeServerPaused, writeServerStatus } from './server-status.ts';

type Json = Record<string, unknown>;

/** Why the server pauses a client's Subscription: its client is disabled, or its scopes no longer reach what it selects. */
export type PauseReason = 'disabled' | 'scopes';

/** The `error` a Subscription paused for `reason` carries: how the server knows the pause is its own, and whose. */
export function pausedError(clientId: string, reason: PauseReason): string {
  return reason === 'disabled'
    ? `paused: the app that activated it (client ${clientId}) is disabled; the server sets it back to the status it had when the app is enabled`
    : `paused: the scopes registered for the app that activated it (client ${clientId}) no longer let it search what its criteria select; the server sets it back to the status it had once they do`;
}

/** The `error` of a Subscription turned off as the client that activated it is deleted. */
export function deletedError(clientId: string): string {
  return `turned off: the app that activated it (client ${clientId}) was deleted; another app activates it again (status requested)`;
}

/** Why the server paused `sub` (a Subscription as stored) for `clientId`, if it did (its `error` is the pause's own). */
export function pausedFor(sub: Json, clientId: string | null): PauseReason | undefined {
  if (clientId === null || sub.status !== 'error') return undefined;
  return (['disabled', 'scopes'] as const).find((reason) => sub.error === pausedError(clientId, reason));
}

/** How a topic pause's `error` begins (JSON escapes none of it: the stored text holds it as it is). */
export const TOPIC_PAUSE_HEAD = 'paused: its topic now selects ';
const TOPIC_PAUSE_TAIL = ' resources, which its owner (the token that activated it) may not search; the server sets it back to the status it had once the topic selects only what its owner may search';

/**
 * The `error` of a topic-based Subscription the server paused because its topic, edited since its activation (the
 * operator added a trigger), selects `types`, which its owner may not search: it notifies nothing (its topic no longer
 * compiles for its owner, hub.ts), and neither its owner's grant nor its client's registration is to blame.
 */
export function topicPausedError(types: readonly string[]): string {
  return `${TOPIC_PAUSE_HEAD}${types.join(', ')}${TOPIC_PAUSE_TAIL}`;
}

/** The types named by the server's topic pause of `sub` (a Subscription as stored), if its `error` is one (topicPausedError). */
export function topicPausedFor(sub: Json): string[] | undefined {
  const error = sub.error;
  if (sub.status !== 'error' || typeof error !== 'string' || !error.startsWith(TOPIC_PAUSE_HEAD) || !error.endsWith(TOPIC_PAUSE_TAIL)) return undefined;
  const types = error.slice(TOPIC_PAUSE_HEAD.length, error.length - TOPIC_PAUSE_TAIL.length).split(', ');
  return types.every((t) => /^[A-Z][A-Za-z]*$/.test(t)) && topicPausedError(types) === error ? types : undefined;
}

/**
 * Whether `sub` stands paused by the server, for its client's registration (pausedFor), for its topic (topicPausedFor),
 * or as its topic or criteria no longer accepted it (refused.ts refusedPauseOf).
 */
export function serverPaused(sub: Json, clientId: string | null): boolean {
  return pausedFor(sub, clientId) !== undefined || resumablePause(sub);
}

/** Whether `sub` stands paused by the server whoever owns it, to be set back as the hub finds it compiles: for its topic's types, or refused by its topic or criteria. */
export function resumablePause(sub: Json): boolean {
  return topicPausedFor(sub) !== undefined || refusedPauseOf(sub) !== undefined;
}

/** One of the client's Subscriptions: its current version (a deletion left out), parsed, and its owner record. */
interface Owned {
  current: ResourceVersion;
  sub: Json;
  owner: string;
}

/** The Subscriptions `clientId` activated in `tenant`, on its own authority and on its users' sign-ins, in id order. */
async function ownSubscriptions(store: Store, tenant: string, clientId: string): Promise<Owned[]> {
  const owned = [...(await store.subscriptions.owners(tenant))]
    .filter(([, owner]) => ownerClient(owner) === clientId).sort(([a], [b]) => (a < b ? -1 : 1));
  const out: Owned[] = [];
  for (const [id, owner] of owned) {
    const current = await store.resources.read(tenant, 'Subscription', id);
    if (current && !current.deleted) out.push({ current, sub: JSON.parse(current.content) as Json, owner });
  }
  return out;
}

/** What a client's registration allows now: whether it is disabled, and whether an owner's access still searches what a Subscription selects. */
export interface Registration {
  disabled: boolean;
  /** The access `owner` (recorded at activation) has under the registration (held to its scopes: stillRegistered). */
  access(owner: string): Promise<Access>;
  /**
   * The access `scopes` (`owner`'s recorded ones, or some of them) give with `owner`'s patient in context by today's
   * rules, whatever is registered: an older release's grant that no longer searches what a Subscription selects
   * (owner-reach.ts olderGrantLapsed) is no pause the registration undoes.
   */
  recorded(owner: string, scopes: string[]): Promise<Access>;
}

/** Versions of a paused Subscription's history read at once (statusBefore). */
const HISTORY_PAGE = 100;

/**
 * The status a paused Subscription goes back to: that of the last version before the server's pauses (for the
 * registration of `clientId`, or for its topic: serverPaused), however many versions back (each reason change, and
 * each write of it as it stands, is one more: its history is read a page at a time). Each pause is the server's only
 * if it changed nothing but the status and `error` of the version before it: the pause's words are plain text, which
 * anyone who may write the Subscription can write (stored as written: an `error` activates nothing, and its owner
 * stays), with another endpoint or criteria that enable would otherwise set active unchecked under the owner's
 * authority. A version missing (expunged) or deleted on the way: none.
 */
export async function statusBefore(store: Store, tenant: string, current: ResourceVersion, clientId: string | null): Promise<'active' | 'requested' | undefined> {
  let after = JSON.parse(current.content) as Json;
  let last: ResourceVersion = current;
  for (;;) {
    const page = await store.resources.history(tenant, {
      type: 'Subscription', id: current.id, count: HISTORY_PAGE, before: { lastUpdated: last.lastUpdated, type: 'Subscription', id: current.id, versionId: last.versionId },
    });
    for (const before of page) {
      // Newest first, one version after another (lastUpdated grows with each: crud.ts); a gap is an expunged version.
      if (before.versionId !== last.versionId - 1 || before.deleted) return undefined;
      last = before;
      const sub = JSON.parse(before.content) as Json;
      if (!sameBesidesStatus(sub, after)) return undefined;
      if (serverPaused(sub, clientId)) {
        after = sub;
        continue;
      }
      return sub.status === 'active' || sub.status === 'requested' ? sub.status : undefined;
    }
    if (page.length < HISTORY_PAGE) return undefined;
  }
}

/** Whether two versions of a Subscription differ at most in their status, `error` and version stamp. */
function sameBesidesStatus(a: Json, b: Json): boolean {
  const rest = ({ status: _s, error: _e, meta, ...r }: Json): Json => {
    const { versionId: _v, lastUpdated: _l, ...m } = (meta ?? {}) as Json;
    return { ...r, meta: m };
  };
  return isDeepStrictEqual(rest(a), rest(b));
}

/**
 * What refuses Subscription `sub` of `owner` under `registration` now, if anything: the client disabled; its own grant,
 * by today's rules (olderGrantLapsed: `error` for good); the registration, where the registered scopes refuse what the
 * scopes recorded at its activation search, whatever its topic does; a topic-based one's topic alone, widened since to
 * types the recorded scopes do not search (`topic`, naming them: topicRefusal, as the hub judges it); else the
 * registration (`scopes`), as before.
 */
async function refusal(deps: FhirDeps, tenant: string, registration: Registration, owner: string, sub: Json, now: number): Promise<PauseReason | 'grant' | { topic: string[] } | undefined> {
  if (registration.disabled) return 'disabled';
  const registered = await registration.access(owner);
  if (await searchesWhatItSelects(deps, tenant, registered, sub, now)) return undefined;
  const scopes = ownerScopes(owner);
  if (await olderGrantLapsed(deps, tenant, scopes, ownerPatient(owner) ?? undefined, (s) => registration.recorded(owner, s), sub, now)) return 'grant';
  if (isTopicCriteria(sub.criteria)) {
    const topics = await tenantTopics(deps, tenant, now);
    const recorded = await registration.recorded(owner, [...scopes]);
    const found = await Promise.all([unsearchedTriggers(deps, tenant, recorded, sub, topics, now), unsearchedTriggers(deps, tenant, registered, sub, topics, now)])
      .then(([byRecorded, byRegistered]) => topicRefusal(byRecorded, byRegistered), () => undefined);
    if (found?.why === 'topic') return { topic: found.types };
  }
  return 'scopes';
}

/**
 * Brings `clientId`'s own Subscriptions in `tenant`, and those it activated on its users' sign-ins, in line with its
 * registration: an active or requested one it does not allow is paused (`error`, pausedError), a paused one whose
 * reason changed says the new one, and a paused one it allows again is set back to the status it had (without
 * `error`), in id order while the tenant has fewer than MAX_ACTIVE activated Subscriptions (activation.ts); those past
 * it are set `off`, their `error` naming the bound (`off`). A user's is judged by the scopes alone: the client's disable
 * turns it off (user-authority.ts). One a client or the operator wrote since is left as written. `fhir` builds the FHIR
 * layer the writes go through, only when there is one to write. The ids, by what was done.
 */
export async function reconcileClientSubscriptions(
  store: Store, clock: Clock, fhir: () => FhirDeps, tenant: string, clientId: string, registration: Registration,
): Promise<{ paused: string[]; resumed: string[]; off: string[] }> {
  const out = { paused: [] as string[], resumed: [] as string[], off: [] as string[] };
  let deps: FhirDeps | undefined;
  const now = clock.now();
  for (const { current, sub, owner } of await ownSubscriptions(store, tenant, clientId)) {
    if (registration.disabled && ownerUser(owner) !== null) continue;
    const paused = pausedFor(sub, clientId);
    // Paused for its topic (hub.ts): named anew by what refuses now, as one paused for the registration is.
    const topicPaused = topicPausedFor(sub);
    if (paused === undefined && topicPaused === undefined && sub.status !== 'active' && sub.status !== 'requested') continue;
    deps ??= fhir();
    const reason = await refusal(deps, tenant, registration, owner, sub, now);
    if (reason === 'grant') {
      // Its own grant reaches none of it by today's rules: `error` for good (owner-reach.ts), not a pause the registration undoes.
      if (await writeServerStatus(deps, clock, tenant, current, sub, 'error', grantError(clientId))) out.paused.push(current.id);
      continue;
    }
    if (typeof reason === 'object') {
      // Its topic alone refuses: paused for it (the hub sets it back once the topic compiles for it), naming its types.
      if (topicPaused?.join(',') !== reason.topic.join(',') && (await writeServerStatus(deps, clock, tenant, current, sub, 'error', topicPausedError(reason.topic)))) out.paused.push(current.id);
      continue;
    }
    if (reason !== undefined) {
      if (reason !== paused && (await writeServerStatus(deps, clock, tenant, current, sub, 'error', pausedError(clientId, reason)))) out.paused.push(current.id);
      continue;
    }
    if (paused === undefined && topicPaused === undefined) continue;
    const status = await statusBefore(store, tenant, current, clientId);
    if (status === undefined) continue;
    // Not past the tenant's bound of activated Subscriptions, which activation keeps: one more is set off, naming it.
    const written = await resumeServerPaused(deps, clock, tenant, current, sub, status);
    if (written === 'off') out.off.push(current.id);
    else if (written !== undefined) out.resumed.push(current.id);
  }
  return out;
}

/**
 * Sets `off`, with `why` as its `error`, every Subscription `clientId` activated in `tenant` (on its own authority or on
 * its users' sign-ins) that is not `off` already: active, requested, paused (for its registration or its topic) or in
 * `error` for any other reason (its grant, failed deliveries). Its deletion ends them for good: no `enable` sets one back,
 * and the app that would activate one again is gone, so none is left reading as if something could. Their ids.
 */
export async function turnOffClientSubscriptions(store: Store, clock: Clock, fhir: () => FhirDeps, tenant: string, clientId: string, why: string): Promise<string[]> {
  const off: string[] = [];
  let deps: FhirDeps | undefined;
  for (const { current, sub } of await ownSubscriptions(store, tenant, clientId)) {
    if (sub.status === 'off') continue;
    if (await writeServerStatus((deps ??= fhir()), clock, tenant, current, sub, 'off', why)) off.push(current.id);
  }
  return off;
}
