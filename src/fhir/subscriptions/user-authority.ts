/**
 * The Subscriptions activated on a signed-in user's authority (owner.ts), turned `off` when that authority goes
 * (`cinder user disable|delete`, a new password or fhirUser; `cinder client disable|delete`, which revokes every
 * sign-in with the app): visibly, in the resource, so that every process's
 * cache of active subscriptions drops them within a quarter second (hub.ts CHECK_INTERVAL_MS), the app reading its
 * Subscription sees why, and enabling the user again restarts nothing; the app activates it again (status
 * `requested`) with a token of a new sign-in. The hub and the delivery loop refuse those that escape this (one
 * activated meanwhile with a token not yet refused, one written concurrently) all the same (owner.ts authorityRevoked).
 */
import type { Clock } from '../../clock.ts';
import type { Store } from '../../store/types.ts';
import type { FhirDeps } from '../crud.ts';
import { serverPaused } from './client-authority.ts';
import { ownerClient, ownerUser } from './owner.ts';
import { writeServerStatus } from './server-status.ts';

/**
 * The `error` the servers write on a Subscription they find resting on a revoked sign-in at a write (silenced.ts): one
 * that escaped `cinder`'s write, which says how the authority went.
 */
export const signInRevokedError =
  "turned off: the sign-in on whose authority it was activated was revoked (the user's or the app's tokens were revoked after the token that activated it was issued); an app activates it again (status requested) with a token of a new sign-in";

/** Whose Subscriptions: one user's, or those a client activated on any user's authority (not on its own). */
export type AuthorityOf = { userId: string } | { clientId: string };

const activatedOn = (of: AuthorityOf) => (owner: string): boolean => {
  const user = ownerUser(owner);
  return user !== null && ('userId' in of ? user.id === of.userId : ownerClient(owner) === of.clientId);
};

/**
 * Sets `off`, with `why` as its `error`, every active Subscription of `tenant` (or paused for its client's scopes)
 * activated on the users' authority `of` names; their ids. `fhir` builds the FHIR layer the writes go through, only when there is one to write.
 */
export async function turnOffUserSubscriptions(store: Store, clock: Clock, fhir: () => FhirDeps, tenant: string, of: AuthorityOf, why: string): Promise<string[]> {
  const owned = [...(await store.subscriptions.owners(tenant))].filter(([, owner]) => activatedOn(of)(owner));
  const off: string[] = [];
  let deps: FhirDeps | undefined;
  for (const [id, owner] of owned) {
    const current = await store.resources.read(tenant, 'Subscription', id);
    const sub = current && !current.deleted ? (JSON.parse(current.content) as Record<string, unknown>) : undefined;
    // Paused for its client's scopes (client-authority.ts), or for its topic (hub.ts), it rests on the sign-in all the same.
    if (sub?.status !== 'active' && sub?.status !== 'requested' && (sub === undefined || !serverPaused(sub, ownerClient(owner)))) continue;
    // Written by a client meanwhile: theirs stands (refused all the same if it rests on this user's old authority).
    if (await writeServerStatus((deps ??= fhir()), clock, tenant, current!, sub, 'off', why)) off.push(id);
  }
  return off;
}
