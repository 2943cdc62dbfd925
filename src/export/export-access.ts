import type { Access, Permission } from '../fhir/access.ts';
import type { Condition } from '../store/types.ts';

/** Both alternatives' lists ANDed: one of each (ORed alternatives, each ANDed conditions), the same list once. */
function both(a: Condition[][] | undefined, b: Condition[][] | undefined): Condition[][] | undefined {
  if (!a || !b) return a ?? b;
  if (JSON.stringify(a) === JSON.stringify(b)) return a;
  return a.flatMap((x) => b.map((y) => [...x, ...y]));
}

/**
 * What an export may read of each type with `access` (Bulk Data 2.0 kick-off, status and files): a type is
 * exported whole or in part, unknown ids included, which is what a search of it reads, so it takes both
 * read and search (SMART v2 `rs`, as v1 `.read` grants), within the narrower bound and filter of the two.
 * A token that may read resources by id alone (`system/Patient.r`, whose searches are a 403) exported
 * every Patient, telling it ids it could not have learnt. Read (`r`) here means that; other permissions
 * are as the token has them.
 */
export function exportAccess(access: Access): Access {
  const filters = access.filters;
  const out: Access = {
    ...access,
    can: (type: string, perm: Permission) => access.can(type, perm) && (perm !== 'r' || access.can(type, 's')),
    patientLimit: (type: string, perm: Permission) =>
      perm === 'r' ? access.patientLimit(type, 'r') ?? access.patientLimit(type, 's') : access.patientLimit(type, perm),
  };
  if (filters) out.filters = (type: string, perm: Permission) => (perm === 'r' ? both(filters(type, 'r'), filters(type, 's')) : filters(type, perm));
  return out;
}
