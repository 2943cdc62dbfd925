/**
 * A user's lifecycle after `createUser`: change, disable, enable, delete. Cutting a user's access revokes every
 * token of theirs (a `user` revocation: refresh tokens at once, access tokens in every `serve` process within
 * REVOCATION_POLL_MS, src/auth/revocation.ts) and silences the Subscriptions activated on their authority (within
 * the hub's user lookup, USER_LOOKUP_TTL_MS); enabling them again revives none of those.
 */
import type { Clock } from '../clock.ts';
import type { Revocation, Store, User } from '../store/types.ts';
import { AdminError } from './admin.ts';
import { PRINCIPAL_REVOCATION_MARGIN_MS } from './revocation.ts';
import { MAX_TOKEN_TTL } from './tokens.ts';
import { checkPassword, checkUserAttributes, hashPassword } from './users.ts';

/** What `cinder user update` may change; what is left out stays as it is (null clears an attribute). */
export interface UserChanges {
  name?: string | null;
  email?: string | null;
  emailVerified?: boolean;
  phone?: string | null;
  phoneVerified?: boolean;
  address?: string | null;
  fhirUser?: string | null;
  password?: string;
}

/** Whether a user is active, disabled or deleted (`cinder user list|show`). */
export function userStatus(u: User): 'active' | 'disabled' | 'deleted' {
  return u.deletedAt !== null ? 'deleted' : u.disabled ? 'disabled' : 'active';
}

/** The user of the tenant `who` names, by username or by id; a deleted one only when `deleted` allows it (show). */
export async function findUser(store: Store, tenant: string, who: string, deleted = false): Promise<User> {
  if (!(await store.tenants.get(tenant))) throw new AdminError(`tenant '${tenant}' does not exist`);
  const user = (await store.users.byUsername(tenant, who)) ?? (await store.users.get(tenant, who));
  if (!user || (user.deletedAt !== null && !deleted)) throw new AdminError(`no user '${who}' in tenant '${tenant}'${user ? ' (they were deleted)' : ''}`);
  return user;
}

/** A revocation of every token issued to the user so far, lasting as long as the longest access token it may cover. */
function userRevocation(userId: string, now: number): Revocation {
  return { kind: 'user', value: userId, revokedAt: now, expiresAt: now + MAX_TOKEN_TTL * 1000 + PRINCIPAL_REVOCATION_MARGIN_MS };
}

/**
 * Revokes every token of `user` (as written already: a disabled user is issued nothing from here on) and keeps the
 * revocation's time, as the store recorded it, with them (User.tokensRevokedAt): the revocation row expires with the
 * tokens it covers, while the Subscriptions activated on the user's authority before it stay silent for good.
 */
async function revokeUserTokens(store: Store, user: User, now: number): Promise<User> {
  const recorded = await store.oauth.revoke(userRevocation(user.id, now));
  // Its number with it (never an earlier revocation's beside this one's time).
  const { tokensRevokedSeq: _earlier, ...rest } = user;
  const after: User = { ...rest, tokensRevokedAt: recorded.revokedAt, ...(recorded.seq !== undefined && { tokensRevokedSeq: recorded.seq }) };
  await store.users.update(after);
  return after;
}

/**
 * Changes a user's attributes, checked as at creation. A new password or a new fhirUser (whose record their
 * scopes reach) also revokes every token issued to them: they sign in again.
 */
export async function updateUser(store: Store, clock: Clock, tenant: string, who: string, changes: UserChanges): Promise<{ user: User; tokensRevoked: boolean }> {
  const before = await findUser(store, tenant, who);
  const { password, ...attributes } = changes;
  const after: User = { ...before, ...Object.fromEntries(Object.entries(attributes).filter(([, v]) => v !== undefined)) };
  checkUserAttributes(after);
  if (password !== undefined) {
    checkPassword(password);
    after.passwordHash = await hashPassword(password);
  }
  const revoke = password !== undefined || after.fhirUser !== before.fhirUser;
  await store.users.update(after);
  return { user: revoke ? await revokeUserTokens(store, after, clock.now()) : after, tokensRevoked: revoke };
}

/**
 * Disables a user: they cannot sign in (the login page's usual failure), every token of theirs is revoked, and the
 * Subscriptions activated on their authority notify nothing more. Idempotent.
 */
export async function disableUser(store: Store, clock: Clock, tenant: string, who: string): Promise<User> {
  const user = { ...(await findUser(store, tenant, who)), disabled: true };
  await store.users.update(user);
  return revokeUserTokens(store, user, clock.now());
}

/**
 * Enables a disabled user (not a deleted one): they may sign in again; the tokens revoked stay revoked, and the
 * Subscriptions activated on their authority stay silent until an app of theirs activates them again.
 */
export async function enableUser(store: Store, tenant: string, who: string): Promise<User> {
  const user = { ...(await findUser(store, tenant, who)), disabled: false };
  await store.users.update(user);
  return user;
}

/**
 * Deletes a user, softly: disabled for good (as disableUser, their tokens revoked), the password forgotten, and the
 * row kept so that the audit trail still names them; id and username are never reused.
 */
export async function deleteUser(store: Store, clock: Clock, tenant: string, who: string): Promise<User> {
  const now = clock.now();
  // The password hash goes: nothing is left to verify against (verifyUser treats the user as unknown).
  const user: User = { ...(await findUser(store, tenant, who)), disabled: true, deletedAt: now, passwordHash: '' };
  await store.users.update(user);
  return revokeUserTokens(store, user, now);
}
