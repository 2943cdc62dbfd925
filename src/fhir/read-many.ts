/**
 * Reads of many resources of one type in one store query, for the operations that follow references
 * (`$graphql`, `Composition/$document`): the ids as one search condition, with the request's access
 * applied as a search applies it (the type's scope, its SMART v2 filter, the patient compartment, a
 * Binary's securityContext), so a version found is one a read of it would answer.
 */
import type { Condition, ResourceVersion, SearchQuery } from '../store/types.ts';
import { requireAccess } from './access.ts';
import { rowsInReach, type FhirDeps, type FhirRequest } from './crud.ts';
import { inPatientCompartment } from './definitions.ts';
import { queryRows, scopeFilter } from './search.ts';

/**
 * The current versions of `type` among `ids` that `req` may read, by id. An id left out is unknown,
 * deleted, out of the token's reach or a core resource: the caller reads it alone (readResource) for the
 * read's own answer (404, 410, 403, or the core version). Throws the 403 of a token without read access to `type`.
 */
export async function readableVersions(deps: FhirDeps, req: FhirRequest, type: string, ids: string[]): Promise<Map<string, ResourceVersion>> {
  requireAccess(req.access, type, 'r');
  const where: Condition[] = [{ kind: 'id', ids }];
  const filter = scopeFilter(req, type, 'r');
  if (filter) where.push(filter);
  const q: SearchQuery = { type, where, sort: [], count: ids.length };
  const patient = req.access.patientLimit(type, 'r');
  if (patient !== undefined && inPatientCompartment(type)) q.compartment = patient;
  let rows = await queryRows(deps, req.tenant, q);
  if (type === 'Binary') rows = await rowsInReach(deps, req, rows);
  return new Map(rows.map((v) => [v.id, v]));
}
