/**
 * A subscription's owner: the access of whoever activated it, recorded with it (SubscriptionRepo) so that
 * it notifies only about what they could read, whoever writes the resources it matches.
 */
import { operatorAccess, type Access } from '../access.ts';

/** What is recorded: a token's scopes, client and patient in context, or the operator's access. */
export type OwnerRecord = { scopes: string[]; clientId: string; patient?: string } | { operator: true };

/** The record of `access` as JSON. */
export function ownerOf(access: Access): string {
  const record: OwnerRecord = access.scopes === undefined
    ? { operator: true }
    : { scopes: [...access.scopes], clientId: access.clientId, ...(access.patient !== undefined && { patient: access.patient }) };
  return JSON.stringify(record);
}

/** Rebuilds an access from its record (src/app.ts gives it: scopes are parsed by src/auth/scopes.ts). */
export type RestoreAccess = (tenant: string, record: Exclude<OwnerRecord, { operator: true }>) => Promise<Access>;

/** The client whose access `json` records; null for the operator's. */
export function ownerClient(json: string): string | null {
  const record = JSON.parse(json) as OwnerRecord;
  return 'operator' in record ? null : record.clientId;
}

/** The access `json` records. */
export function ownerAccess(tenant: string, json: string, restore: RestoreAccess): Promise<Access> {
  const record = JSON.parse(json) as OwnerRecord;
  return 'operator' in record ? Promise.resolve(operatorAccess) : restore(tenant, record);
}
