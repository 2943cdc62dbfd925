/**
 * A subscription's owner: the access of whoever activated it, recorded with it (SubscriptionRepo) so that
 * it notifies only about what they could read, whoever writes the resources it matches. An access on a signed-in
 * user's authority (a token from a sign-in) records that user and when their record was read to issue the token:
 * once the user's tokens are revoked after that (disable, delete, a new password or fhirUser), the subscription
 * notifies nothing more, enabled again or not, until an app activates it again with a token of a new sign-in. "After"
 * is told by the database's numbering of revocations where the token stated the records' numbers (`urs`, `crs`,
 * recorded as the user's `seq` and `clientSeq`), else by the time their records were read (`urt`).
 */
import { createHash } from 'node:crypto';
import type { UserLookup } from '../../auth/user-cache.ts';
import type { Client, User } from '../../store/types.ts';
import { operatorAccess, type Access } from '../access.ts';

/** The user whose authority an access carries (Access.user). */
export type OwnerUser = NonNullable<Access['user']>;

/** What is recorded: a token's scopes, client, patient in context and signed-in user, or the operator's access. */
export type OwnerRecord = { scopes: string[]; clientId: string; patient?: string; user?: OwnerUser } | { operator: true };

/** The record of `access` as JSON. */
export function ownerOf(access: Access): string {
  const record: OwnerRecord = access.scopes === undefined
    ? { operator: true }
    : {
      scopes: [...access.scopes], clientId: access.clientId, ...(access.patient !== undefined && { patient: access.patient }),
      ...(access.user !== undefined && { user: ownerUserOf(access.user) }),
    };
  return JSON.stringify(record);
}

/** What is recorded of the user whose authority an access carries: who, when read, and the records' numbers where stated. */
function ownerUserOf(u: OwnerUser): OwnerUser {
  return { id: u.id, readAt: u.readAt, ...(u.seq !== undefined && { seq: u.seq }), ...(u.clientSeq !== undefined && { clientSeq: u.clientSeq }) };
}

/**
 * How a recorded access is rebuilt: `registered` (the default), its scopes held to those its client still has
 * registered, as a refresh holds them; `recorded`, the scopes as recorded, to tell a grant that reaches nothing by
 * today's rules from a registration narrowed since (owner-reach.ts). Either is judged by today's rules.
 */
export type RestoreAs = 'registered' | 'recorded';

/** Rebuilds an access from its record (src/app.ts gives it: scopes are parsed by src/auth/scopes.ts). */
export type RestoreAccess = (tenant: string, record: Exclude<OwnerRecord, { operator: true }>, as?: RestoreAs) => Promise<Access>;

/** The client whose access `json` records; null for the operator's. */
export function ownerClient(json: string): string | null {
  const record = JSON.parse(json) as OwnerRecord;
  return 'operator' in record ? null : record.clientId;
}

/**
 * The app `json` records, as the delivery loop shares its places between apps (delivery.ts APP_CLAIMS): its client's
 * id, whatever the scopes, user or patient; the operator's Subscriptions are one app, ''. SubscriptionRepo.claim reads
 * the same from the stored owner.
 */
export function appOf(json: string): string {
  return ownerClient(json) ?? '';
}

/**
 * A digest of an owner record (its JSON as stored): what a websocket binding token and a bound socket remember
 * of the owner they were given for, so that a Subscription another app (or sign-in) activates again is not sent
 * to them. A digest rather than the record: the token stays short, and names no scopes.
 */
export function ownerDigest(json: string): string {
  return createHash('sha256').update(json).digest('base64url');
}

/** The patient in context of the access `json` records (SMART `patient`); null for none, or the operator's. */
export function ownerPatient(json: string): string | null {
  const record = JSON.parse(json) as OwnerRecord;
  return 'operator' in record || record.patient === undefined ? null : record.patient;
}

/** The scopes `json` records (a token's granted scopes); none for the operator's. */
export function ownerScopes(json: string): string[] {
  const record = JSON.parse(json) as OwnerRecord;
  return 'operator' in record ? [] : record.scopes;
}

/** The signed-in user whose authority `json` records; null for a client's own (or the operator's, or one recorded before users were). */
export function ownerUser(json: string): OwnerUser | null {
  const record = JSON.parse(json) as OwnerRecord;
  return 'operator' in record || record.user === undefined ? null : record.user;
}

/**
 * Whether the sign-in on whose authority a subscription was activated (`owner`: the user, when their record was read
 * for the activating token, and the numbers of the user's and the client's records it stated) has ended since: the
 * user disabled or deleted, or their tokens revoked after that; or every token of the app (`client`) revoked after it
 * (its disable or delete). After: a revocation numbered above the record's number the token stated, where both are
 * kept (a revocation in the same millisecond as the token's issue, or recorded by a clock ahead of the server's, is
 * told by it rightly); else one recorded at or after the time the user's record was read. A user or client no longer
 * stored (only a test's crafted token names one; deletion is soft) has not ended it.
 */
export function authorityRevoked(client: Client | null, user: User | null, owner: OwnerUser): boolean {
  const after = (revokedAt: number | null, revokedSeq: number | undefined, seq: number | undefined) =>
    revokedSeq !== undefined && seq !== undefined ? revokedSeq > seq : revokedAt !== null && revokedAt >= owner.readAt;
  return (client !== null && after(client.tokensRevokedAt, client.tokensRevokedSeq, owner.clientSeq))
    || (user !== null && (user.disabled || after(user.tokensRevokedAt, user.tokensRevokedSeq, owner.seq)));
}

/** The access `json` records, rebuilt by today's rules (`as`: RestoreAs). */
export function ownerAccess(tenant: string, json: string, restore: RestoreAccess, as: RestoreAs = 'registered'): Promise<Access> {
  const record = JSON.parse(json) as OwnerRecord;
  return 'operator' in record ? Promise.resolve(operatorAccess) : restore(tenant, record, as);
}

/** How an owner's client and user are read (src/app.ts: the cached lookups the hub and the delivery loop use). */
export interface OwnerAuthority {
  client: (clientId: string) => Promise<Client | null>;
  user: UserLookup;
  /**
   * Whether the patient in context a user chose at sign-in may still be theirs there (src/auth/patient-held.ts: a
   * guardian's RelatedPerson may stop naming the child); without it, a chosen patient is not judged.
   */
  patientHeld?: (choice: { tenant: string; clientId: string; userId: string; patient: string }) => boolean | Promise<boolean>;
}

/**
 * Whether the patient in context `owner` was activated with, a user's choice, no longer holds (OwnerAuthority.patientHeld):
 * what was recorded for it before the relationship ended is not sent, as the hub records nothing more for it.
 */
export async function ownerPatientLost(authority: Pick<OwnerAuthority, 'patientHeld'>, tenant: string, owner: string): Promise<boolean> {
  const user = ownerUser(owner);
  const patient = ownerPatient(owner);
  const clientId = ownerClient(owner);
  if (user === null || patient === null || clientId === null || authority.patientHeld === undefined) return false;
  return !(await authority.patientHeld({ tenant, clientId, userId: user.id, patient }));
}

/**
 * Whether a subscription of `owner` (its record's JSON) in `tenant` is sent nothing now: its client is disabled, or the
 * sign-in it rests on has ended (authorityRevoked), or the patient in context its user chose is no longer theirs
 * (ownerPatientLost), as delivery.ts drops a rest-hook's. Both websocket channels ask it
 * (sockets.ts before a ping, topic-sockets.ts before a Bundle): events recorded before the authority was cut would
 * otherwise go on being sent while the Subscription reads `active` (the client disabled behind `cinder`'s back, or
 * before `cinder client disable` wrote its status).
 */
export async function ownerSilenced(authority: OwnerAuthority, tenant: string, owner: string): Promise<boolean> {
  const clientId = ownerClient(owner);
  const client = clientId === null ? null : await authority.client(clientId);
  if (client?.disabled) return true;
  const user = ownerUser(owner);
  if (user !== null && authorityRevoked(client, await authority.user(tenant, user.id), user)) return true;
  return ownerPatientLost(authority, tenant, owner);
}
