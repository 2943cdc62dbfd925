/**
 * The Subscriptions a client activated on its own authority (client credentials: an owner naming no user, owner.ts),
 * as its registration comes and goes, made visible in the resource (R4 Subscription.status and `error`, which the
 * Backport IG's topic-based Subscriptions share). `cinder client disable` pauses them: each is set `error`, its `error`
 * saying why (R4: "the server has an error executing the notification"; the hub and the delivery loop skip it, as they
 * skipped it before while it still read `active`). `cinder client enable` resumes those it paused, and only those (the
 * `error` it wrote, unchanged since): each goes back to the status it had, `active`, or `requested` for a topic
 * rest-hook one still awaiting its handshake (R5's state machine: error to active once the server recovers). Its owner
 * and count stay: the client's authority is its registration, which enable restores. `cinder client delete` turns
 * them `off`, for good. Those it activated on its users' sign-ins are user-authority.ts's.
 */
import type { Clock } from '../../clock.ts';
import type { ResourceVersion, Store } from '../../store/types.ts';
import type { FhirDeps } from '../crud.ts';
import { ownerClient, ownerUser } from './owner.ts';
import { writeServerStatus } from './server-status.ts';

type Json = Record<string, unknown>;

/** The `error` a paused Subscription carries: how `resume` knows the pause is the server's, and whose. */
export function pausedError(clientId: string): string {
  return `paused: the app that activated it (client ${clientId}) is disabled; the server sets it back to the status it had when the app is enabled`;
}

/** Whether `sub` (a Subscription as stored) is one the server paused for `clientId`'s disable (pauseClientSubscriptions). */
export function pausedFor(sub: Json, clientId: string | null): boolean {
  return clientId !== null && sub.status === 'error' && sub.error === pausedError(clientId);
}

/** The Subscriptions `clientId` activated on its own authority, each with its current version (a deletion left out), in id order. */
async function ownSubscriptions(store: Store, tenant: string, clientId: string): Promise<{ current: ResourceVersion; sub: Json }[]> {
  const ids = [...(await store.subscriptions.owners(tenant))]
    .filter(([, owner]) => ownerClient(owner) === clientId && ownerUser(owner) === null).map(([id]) => id).sort();
  const out: { current: ResourceVersion; sub: Json }[] = [];
  for (const id of ids) {
    const current = await store.resources.read(tenant, 'Subscription', id);
    if (current && !current.deleted) out.push({ current, sub: JSON.parse(current.content) as Json });
  }
  return out;
}

/**
 * Sets `error` (pausedError) on every active or requested Subscription `clientId` activated on its own authority in
 * `tenant`; their ids. One a client writes meanwhile keeps the client's version (it is silent all the same while the
 * client is disabled). `fhir` builds the FHIR layer the writes go through, only when there is one to write.
 */
export async function pauseClientSubscriptions(store: Store, clock: Clock, fhir: () => FhirDeps, tenant: string, clientId: string): Promise<string[]> {
  const paused: string[] = [];
  let deps: FhirDeps | undefined;
  for (const { current, sub } of await ownSubscriptions(store, tenant, clientId)) {
    if (sub.status !== 'active' && sub.status !== 'requested') continue;
    if (await writeServerStatus((deps ??= fhir()), clock, tenant, current, sub, 'error', pausedError(clientId))) paused.push(current.id);
  }
  return paused;
}

/**
 * Sets back the Subscriptions pauseClientSubscriptions paused for `clientId` in `tenant` (their current version its
 * `error`, unchanged) to the status of the version the pause replaced (`active`, or `requested` awaiting a handshake),
 * without `error`; their ids. Run before the client is enabled, so that none is matched before it reads as resumed.
 */
export async function resumeClientSubscriptions(store: Store, clock: Clock, fhir: () => FhirDeps, tenant: string, clientId: string): Promise<string[]> {
  const resumed: string[] = [];
  let deps: FhirDeps | undefined;
  for (const { current, sub } of await ownSubscriptions(store, tenant, clientId)) {
    if (!pausedFor(sub, clientId)) continue;
    const before = await store.resources.vread(tenant, 'Subscription', current.id, current.versionId - 1);
    const status = before && !before.deleted ? (JSON.parse(before.content) as Json).status : undefined;
    if (status !== 'active' && status !== 'requested') continue;
    if (await writeServerStatus((deps ??= fhir()), clock, tenant, current, sub, status)) resumed.push(current.id);
  }
  return resumed;
}

/**
 * Sets `off`, with `why` as its `error`, every Subscription `clientId` activated on its own authority in `tenant` that is
 * active, requested or paused (its deletion: they can never notify again); their ids.
 */
export async function turnOffClientSubscriptions(store: Store, clock: Clock, fhir: () => FhirDeps, tenant: string, clientId: string, why: string): Promise<string[]> {
  const off: string[] = [];
  let deps: FhirDeps | undefined;
  for (const { current, sub } of await ownSubscriptions(store, tenant, clientId)) {
    if (sub.status !== 'active' && sub.status !== 'requested' && !pausedFor(sub, clientId)) continue;
    if (await writeServerStatus((deps ??= fhir()), clock, tenant, current, sub, 'off', why)) off.push(current.id);
  }
  return off;
}
