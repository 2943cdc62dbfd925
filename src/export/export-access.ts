import { enumerationAccess, type Access } from '../fhir/access.ts';

/**
 * What an export may read of each type with `access` (Bulk Data 2.0 kick-off, status and files): a type is
 * exported whole or in part, unknown ids included, which is what a search of it reads, so it takes both
 * read and search (SMART v2 `rs`, as v1 `.read` grants), within the narrower bound and filter of the two
 * (enumerationAccess). A token that may read resources by id alone (`system/Patient.r`, whose searches are
 * a 403) exported every Patient, telling it ids it could not have learnt.
 */
export function exportAccess(access: Access): Access {
  return enumerationAccess(access);
}
