/**
 * A Provenance of a patient's record is within that patient's token's reach. R4's Patient
 * CompartmentDefinition puts a Provenance in a patient's compartment only when a `target` is the Patient
 * itself, but a Provenance is written for a record (`target` = `Observation/x`), and US Core requires
 * `_revinclude=Provenance:target` of every profile's search, which ONC's single-patient API tests run
 * with a patient launch's token. So, for a token whose reads of Provenance are limited to a patient:
 *  - a read (read, vread, instance history) of a Provenance outside the compartment is allowed when one
 *    of its first MAX_PROVENANCE_TARGETS targets is a record of that patient (a resource of this server in
 *    the patient's compartment, its current version) that the token may read: its type's scope, and its
 *    SMART v2 filters (provenanceOfReadableRecord);
 *  - `_revinclude=Provenance:target` (`Provenance:*` alike) adds a Provenance naming one of the records it follows that are the
 *    patient's (patientRecords), the search having found them within the token's reach (search.ts).
 * Only records in the compartment count: the Provenance of a shared record (a Practitioner, a
 * Medication) is not the patient's. One naming the patient's record and another patient's too is
 * readable: it is a Provenance of the patient's record, as in IBM's FHIR server (LinuxForHealth/FHIR
 * #1881), and the token learns from it only the other record's reference. A search of Provenance finds,
 * beside the compartment, those targeting the patient's records its `target` parameter names
 * (searchedRecords); compartment searches, `$everything` and bulk exports keep the compartment alone.
 */
import type { Condition, ResourceVersion, SearchQuery } from '../store/types.ts';
import type { Access } from './access.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { patientCompartment } from './definitions.ts';
import { compartmentsOf } from './indexer.ts';
import { parseReference } from './references.ts';

/** A read of a Provenance checks at most this many of its targets (the first ones). */
export const MAX_PROVENANCE_TARGETS = 100;

type Json = Record<string, unknown>;

/**
 * The `Type/id` of the resources among `rows` that are records of `patient`: of a type of the Patient
 * compartment, and in that patient's compartment.
 */
export function patientRecords(rows: ResourceVersion[], patient: string, base: string | undefined): Set<string> {
  const own = new Set<string>();
  for (const row of rows) {
    if (row.deleted || !patientCompartment().has(row.type)) continue;
    if (compartmentsOf(JSON.parse(row.content) as Json, base).includes(patient)) own.add(`${row.type}/${row.id}`);
  }
  return own;
}

/** `type/id` references, by type. */
type ByType = Map<string, Set<string>>;

function addTo(byType: ByType, type: string, id: string): void {
  (byType.get(type) ?? byType.set(type, new Set()).get(type)!).add(id);
}

/**
 * The records of this server that `provenance` targets, among its first MAX_PROVENANCE_TARGETS targets
 * (relative or absolute references of this server; a version-specific one names the resource, judged
 * by its current version), by type.
 */
function targetsOf(provenance: Json, base: string | undefined): ByType {
  const byType: ByType = new Map();
  const targets = Array.isArray(provenance.target) ? provenance.target.slice(0, MAX_PROVENANCE_TARGETS) : [];
  for (const target of targets) {
    const ref = (target as Json | null)?.reference;
    const at = typeof ref === 'string' ? parseReference(ref, base) : null;
    if (at) addTo(byType, at.type, at.id);
  }
  return byType;
}

/** The token's SMART v2 scope filters on reads of `type`, as one condition (ORed alternatives of ANDed conditions). */
function readFilter(access: Access, type: string): Condition | undefined {
  const filters = access.filters?.(type, 'r');
  return filters && { kind: 'or', any: filters.map((all): Condition => ({ kind: 'and', all })) };
}

/**
 * The `Type/id` among `named` that are records of `patient` the request may read: of a type of the
 * Patient compartment the token reads, current, in that patient's compartment, meeting the token's scope
 * filters on reads of that type (one store query per type). `first`: stop at the first found.
 */
async function readableRecords(deps: FhirDeps, req: FhirRequest, named: ByType, patient: string, first: boolean): Promise<Set<string>> {
  const found = new Set<string>();
  for (const [type, ids] of named) {
    if (!patientCompartment().has(type) || !req.access.can(type, 'r')) continue;
    const where: Condition[] = [{ kind: 'id', ids: [...ids] }];
    const filter = readFilter(req.access, type);
    if (filter) where.push(filter);
    const q: SearchQuery = { type, where, compartment: patient, sort: [], count: first ? 1 : ids.size };
    for (const v of await deps.store.resources.search(req.tenant, q)) found.add(`${type}/${v.id}`);
    if (first && found.size) break;
  }
  return found;
}

/**
 * Whether `provenance` names, among its first MAX_PROVENANCE_TARGETS targets, a record of `patient`
 * that the request may read (readableRecords).
 */
export async function provenanceOfReadableRecord(deps: FhirDeps, req: FhirRequest, provenance: Json, patient: string): Promise<boolean> {
  return (await readableRecords(deps, req, targetsOf(provenance, deps.fhirBase?.(req.tenant)), patient, true)).size > 0;
}

/**
 * For a search of Provenance by a token whose searches of it are limited to `patient`, a condition to
 * put in place of the compartment: in the compartment, or targeting one of the records of the patient
 * the token may read that the search's own `target` (or `patient`) parameter names
 * (`Provenance?target=Observation/x`). Undefined when the search names none: the compartment alone.
 * Each top-level `target` condition is ANDed with the search, so one naming records is enough; its
 * references of another type or server, or outside the patient's reach, admit nothing beyond the
 * compartment.
 */
export async function searchedRecords(deps: FhirDeps, req: FhirRequest, where: Condition[], patient: string): Promise<Condition | undefined> {
  const base = deps.fhirBase?.(req.tenant);
  const named: ByType = new Map();
  const condition = where.find((c) => c.kind === 'token' && c.param === 'target' && !c.not);
  if (condition?.kind !== 'token') return undefined;
  for (const v of condition.values) {
    const at = v.system ? { type: v.system, id: v.value } : v.value ? parseReference(v.value, base) : null;
    if (at && at.id) addTo(named, at.type, at.id);
  }
  const records = await readableRecords(deps, req, named, patient, false);
  if (!records.size) return undefined;
  const values = [...records].map((ref) => ({ system: ref.slice(0, ref.indexOf('/')), value: ref.slice(ref.indexOf('/') + 1) }));
  return { kind: 'or', any: [{ kind: 'compartment', patient }, { kind: 'token', param: 'target', values }] };
}

/** Why a Provenance outside the compartment is refused, for the 403. */
export const PROVENANCE_REFUSAL = `is outside the patient compartment the token is limited to, and none of its first ${MAX_PROVENANCE_TARGETS} targets is a record of that patient the token may read`;
