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
   * `seq` and `clientSeq`: the numbers of the user's and the client's records the token states (`urs`, `crs`), by
   * which "after" is told where the token states them (a token of an older release does not).
   */
  user?: { id: string; readAt: number; seq?: number; clientSeq?: number };
}

/** Both alternatives' lists ANDed: one of each (ORed alternatives, each ANDed conditions), the same list once. */
function both(a: Condition[][] | undefined, b: Condition[][] | undefined): Condition[][] | undefined {
  if (!a || !b) return a ?? b;
  if (JSON.stringify(a) === JSON.stringify(b)) return a;
  return a.flatMap((x) => b.map((y) => [...x, ...y]));
}

/**
 * What `access` may enumerate: a list that holds every resource of a type meeting a test, unknown ids included
 * (a Bulk Data export, `$everything`'s compartment, `_revinclude`), is what a search of the type reads, so reading
 * (`r`) a type here takes both read and search on it (SMART v2 `rs`, as v1 `.read` grants), within the narrower
 * patient bound and filter of the two. A token that may read resources by id alone (`system/Observation.r`, whose
 * searches are a 403) would otherwise be told ids it could not have learnt. `focus`, the type of the one resource an
 * operation is invoked on and reads by its id (`Patient/{id}/$everything`'s Patient), keeps its read access. Other
 * permissions are as the token has them.
 */
export function enumerationAccess(access: Access, focus?: string): Access {
  const filters = access.filters;
  const listed = (type: string, perm: Permission) => perm === 'r' && type !== focus;
  const out: Access = {
    ...access,
    can: (type, perm) => access.can(type, perm) && (!listed(type, perm) || access.can(type, 's')),
    patientLimit: (type, perm) => (listed(type, perm) ? access.patientLimit(type, 'r') ?? access.patientLimit(type, 's') : access.patientLimit(type, perm)),
  };
  if (filters) out.filters = (type, perm) => (listed(type, perm) ? both(filters(type, 'r'), filters(type, 's')) : filters(type, perm));
  return out;
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
