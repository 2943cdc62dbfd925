import { FhirError } from '../errors.ts';
import type { Condition } from '../store/types.ts';

/** What a request may do, derived from its token's SMART scopes (src/auth/scopes.ts). */
export type Permission = 'c' | 'r' | 'u' | 'd' | 's';

export interface Access {
  /** Whether the holder may perform `perm` on resources of `type`. */
  can(type: string, perm: Permission): boolean;
  /**
   * The patient whose compartment bounds `perm` on `type` (patient-context scopes), or undefined when
   * the holder's access to `type` for `perm` is not limited to one patient (a system/user scope grants
   * that permission on the type without a filter).
   */
  patientLimit(type: string, perm: Permission): string | undefined;
  /**
   * SMART v2 scope filters for `perm` on `type`: ORed alternatives, each its ANDed conditions, that the
   * resources must meet; undefined when access to `type` is not filtered.
   */
  filters?(type: string, perm: Permission): Condition[][] | undefined;
  /** Client that acts, for audit and job ownership. */
  clientId: string;
  /**
   * The granted scopes this access derives from (a token's), which rebuild it later: a Subscription
   * notifies only about what its owner's scopes read (src/fhir/subscriptions/owner.ts). Absent: operator access.
   */
  scopes?: readonly string[];
  /**
   * The token's patient in context (SMART `patient`), whatever its scopes bind: an export job belongs
   * to its client and this patient.
   */
  patient?: string;
  /**
   * The signed-in user whose authority the access carries (a token issued from a sign-in: its `sub`), with when their
   * record was read to issue it (`urt`, src/auth/revocation.ts): a Subscription activated on it notifies nothing once
   * the user's tokens are revoked after that (src/fhir/subscriptions/owner.ts). Absent: a client's own authority.
   */
  user?: { id: string; readAt: number };
}

/** Operator access (CLI, workers acting for a verified job): everything in the tenant. */
export const operatorAccess: Access = { can: () => true, patientLimit: () => undefined, clientId: 'cinder-cli' };

/** Throws 403 unless the request's scopes allow `perm` on `type`. */
export function requireAccess(access: Access, type: string, perm: Permission): void {
  if (!access.can(type, perm)) {
    const verb = { c: 'create', r: 'read', u: 'update', d: 'delete', s: 'search' }[perm];
    throw new FhirError('forbidden', `The access token's scopes do not allow ${verb} of ${type}`);
  }
}
