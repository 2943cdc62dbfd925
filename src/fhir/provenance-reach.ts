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
 * A version-specific target (`Observation/x/_history/1`) names that version: it counts only when that
 * version, as well as the record's current one, is the patient's within the token's filters, as a vread
 * of it would be allowed (namesReadable). Else a record moved from another patient to this one (a
 * misfiled result corrected) would open the Provenance of the other patient's version to this one, and
 * the reverse. The index holds a target without its version, so a `target` search counts only the
 * records no version of which was ever outside the token's reach (searchedRecords), and a
 * `_revinclude` checks the versions its Provenance name after reading them (provenanceRowsInReach).
 * Only records in the compartment count: the Provenance of a shared record (a Practitioner, a
 * Medication) is not the patient's. One naming the patient's record and another patient's too is
 * readable: it is a Provenance of the patient's record, as in IBM's FHIR server (LinuxForHealth/FHIR
 * #1881), and the token learns from it only the other record's reference. A search of Provenance finds,
 * beside the compartment, those targeting the patient's records its `target` parameter names
 * (searchedRecords); compartment searches, `$everything` and bulk exports keep the compartment alone.
 */
import type { Condition, ResourceVersion, SearchQuery } from '../store/types.ts';
import type { Access } from './access.ts';
import { lookups } from './core-search.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { patientCompartment } from './definitions.ts';
import { compartmentsOf } from './indexer.ts';
import { parseReference } from './references.ts';
import { matchConditions } from './search-match.ts';

/** A read of a Provenance checks at most this many of its targets (the first ones). */
export const MAX_PROVENANCE_TARGETS = 100;

/**
 * A `target` search widens only by records whose versions are all the patient's (cleanRecord), which it
 * reads through: at most this many versions in all, of at most MAX_HISTORIES records of more than one
 * version. A record past either bound is not looked through, and gives no reach beyond the compartment.
 */
export const MAX_VERSIONS_CHECKED = 1000;
export const MAX_HISTORIES = 50;

type Json = Record<string, unknown>;

/** The records of the patient followed, by `Type/id`: their current version. */
export type OwnRecords = Map<string, ResourceVersion>;

/**
 * The resources among `rows` that are records of `patient`: of a type of the Patient compartment, and
 * in that patient's compartment, by `Type/id`. `notCurrent`: the `Type/id` of rows that may be an
 * earlier version (a version-specific `_include` read them), which are not.
 */
export function patientRecords(rows: ResourceVersion[], patient: string, base: string | undefined, notCurrent: ReadonlySet<string> = new Set()): OwnRecords {
  const own: OwnRecords = new Map();
  for (const row of rows) {
    const key = `${row.type}/${row.id}`;
    if (row.deleted || !patientCompartment().has(row.type) || notCurrent.has(key)) continue;
    if (compartmentsOf(JSON.parse(row.content) as Json, base).includes(patient)) own.set(key, row);
  }
  return own;
}

/** The versions a Provenance's targets name of each `Type/id` (undefined: the resource, no version). */
type Named = Map<string, Set<string | undefined>>;

/**
 * The resources of this server that `provenance` targets (relative or absolute references of this
 * server; a version-specific one with the version it names), among its first `limit` targets.
 */
function targetsOf(provenance: Json, base: string | undefined, limit = Infinity): Named {
  const named: Named = new Map();
  const targets = Array.isArray(provenance.target) ? provenance.target.slice(0, limit) : [];
  for (const target of targets) {
    const ref = (target as Json | null)?.reference;
    const at = typeof ref === 'string' ? parseReference(ref, base) : null;
    if (at) (named.get(`${at.type}/${at.id}`) ?? named.set(`${at.type}/${at.id}`, new Set()).get(`${at.type}/${at.id}`)!).add(at.version);
  }
  return named;
}

/** The token's SMART v2 scope filters on reads of `type`, as one condition (ORed alternatives of ANDed conditions). */
function readFilter(access: Access, type: string): Condition | undefined {
  const filters = access.filters?.(type, 'r');
  return filters && { kind: 'or', any: filters.map((all): Condition => ({ kind: 'and', all })) };
}

/**
 * The records among `keys` (`Type/id`) of `patient` the request may read: of a type of the Patient
 * compartment the token reads, current, in that patient's compartment, meeting the token's scope filters
 * on reads of that type (one store query per type), by `Type/id`.
 */
async function readableRecords(deps: FhirDeps, req: FhirRequest, keys: Iterable<string>, patient: string): Promise<OwnRecords> {
  const byType = new Map<string, string[]>();
  for (const key of keys) {
    const slash = key.indexOf('/');
    const type = key.slice(0, slash);
    const id = key.slice(slash + 1);
    (byType.get(type) ?? byType.set(type, []).get(type)!).push(id);
  }
  const found: OwnRecords = new Map();
  for (const [type, ids] of byType) {
    if (!patientCompartment().has(type) || !req.access.can(type, 'r')) continue;
    const where: Condition[] = [{ kind: 'id', ids }];
    const filter = readFilter(req.access, type);
    if (filter) where.push(filter);
    const q: SearchQuery = { type, where, compartment: patient, sort: [], count: ids.length };
    for (const v of await deps.store.resources.search(req.tenant, q)) found.set(`${type}/${v.id}`, v);
  }
  return found;
}

/** Whether a version of a record is the patient's and within the token's scope filters, as a vread of it is judged. */
async function versionOfPatient(deps: FhirDeps, req: FhirRequest, v: ResourceVersion, patient: string): Promise<boolean> {
  if (v.deleted) return false;
  const resource = JSON.parse(v.content) as Json;
  if (!compartmentsOf(resource, deps.fhirBase?.(req.tenant)).includes(patient)) return false;
  const filters = req.access.filters?.(v.type, 'r');
  if (!filters) return true;
  const ctx = lookups(deps, req.tenant);
  for (const alternative of filters) if (await matchConditions(resource, v.lastUpdated, alternative, ctx)) return true;
  return false;
}

/**
 * Whether the references `versions` to the patient's readable record `current` name it within reach:
 * the resource itself, its current version, or an earlier version that is the patient's within the
 * token's filters (read, as `checked` remembers, by `Type/id/version`).
 */
async function namesReadable(
  deps: FhirDeps, req: FhirRequest, versions: Set<string | undefined>, current: ResourceVersion, patient: string, checked: Map<string, boolean>,
): Promise<boolean> {
  for (const version of versions) {
    if (version === undefined || version === String(current.versionId)) return true;
  }
  for (const version of versions) {
    const key = `${current.type}/${current.id}/${version}`;
    let ok = checked.get(key);
    if (ok === undefined) {
      const n = /^[1-9][0-9]{0,8}$/.test(version!) ? Number(version) : undefined;
      const v = n === undefined || n > current.versionId ? null : await deps.store.resources.vread(req.tenant, current.type, current.id, n);
      ok = v !== null && (await versionOfPatient(deps, req, v, patient));
      checked.set(key, ok);
    }
    if (ok) return true;
  }
  return false;
}

/**
 * Whether `provenance` names, among its first MAX_PROVENANCE_TARGETS targets, a record of `patient`
 * that the request may read (readableRecords), at a version within reach (namesReadable).
 */
export async function provenanceOfReadableRecord(deps: FhirDeps, req: FhirRequest, provenance: Json, patient: string): Promise<boolean> {
  const named = targetsOf(provenance, deps.fhirBase?.(req.tenant), MAX_PROVENANCE_TARGETS);
  const checked = new Map<string, boolean>();
  for (const [key, current] of await readableRecords(deps, req, named.keys(), patient)) {
    if (await namesReadable(deps, req, named.get(key)!, current, patient, checked)) return true;
  }
  return false;
}

/**
 * The Provenance among `rows` (those a `_revinclude` found referring to `own`, the patient's records
 * it follows) within reach: in the patient's compartment, or naming one of `own` at a version within
 * reach (namesReadable): the index holds a target without its version. Other rows are kept.
 */
export async function provenanceRowsInReach(deps: FhirDeps, req: FhirRequest, rows: ResourceVersion[], own: OwnRecords, patient: string): Promise<ResourceVersion[]> {
  const base = deps.fhirBase?.(req.tenant);
  const checked = new Map<string, boolean>();
  const out: ResourceVersion[] = [];
  for (const row of rows) {
    if (row.type !== 'Provenance' || row.deleted) { out.push(row); continue; }
    const provenance = JSON.parse(row.content) as Json;
    if (compartmentsOf(provenance, base).includes(patient)) { out.push(row); continue; }
    for (const [key, versions] of targetsOf(provenance, base)) {
      const current = own.get(key);
      if (current && (await namesReadable(deps, req, versions, current, patient, checked))) { out.push(row); break; }
    }
  }
  return out;
}

/**
 * Whether every version of the patient's readable record `current` is the patient's within the token's
 * filters (versionOfPatient), so that a Provenance naming any version of it is within reach: a record
 * of one version is; one of more versions than `budget` has left (MAX_VERSIONS_CHECKED,
 * MAX_HISTORIES) is not looked through, and is not.
 */
async function cleanRecord(deps: FhirDeps, req: FhirRequest, current: ResourceVersion, patient: string, budget: { versions: number; histories: number }): Promise<boolean> {
  if (current.versionId === 1) return true;
  // Version ids count from 1 up, a deletion's too: the current one is how many versions there are.
  if (budget.histories <= 0 || current.versionId > budget.versions) return false;
  budget.histories--;
  budget.versions -= current.versionId;
  const versions = await deps.store.resources.history(req.tenant, { type: current.type, id: current.id, count: current.versionId + 1 });
  if (versions.length > current.versionId) return false;
  for (const v of versions) if (!v.deleted && v.versionId !== current.versionId && !(await versionOfPatient(deps, req, v, patient))) return false;
  return true;
}

/**
 * For a search of Provenance by a token whose searches of it are limited to `patient`, a condition to
 * put in place of the compartment: in the compartment, or targeting one of the records of the patient
 * the token may read that the search's own `target` parameter names (`Provenance?target=Observation/x`),
 * none of whose versions was ever outside that reach (cleanRecord: the index holds a target without
 * its version, so a Provenance naming an earlier version of the record another patient's would be
 * found). Undefined when the search names none: the compartment alone.
 * Each top-level `target` condition is ANDed with the search, so one naming records is enough; its
 * references of another type or server, or outside the patient's reach, admit nothing beyond the
 * compartment.
 */
export async function searchedRecords(deps: FhirDeps, req: FhirRequest, where: Condition[], patient: string): Promise<Condition | undefined> {
  const base = deps.fhirBase?.(req.tenant);
  const named = new Set<string>();
  const condition = where.find((c) => c.kind === 'token' && c.param === 'target' && !c.not);
  if (condition?.kind !== 'token') return undefined;
  for (const v of condition.values) {
    const at = v.system ? { type: v.system, id: v.value } : v.value ? parseReference(v.value, base) : null;
    if (at && at.id) named.add(`${at.type}/${at.id}`);
  }
  const values: { system: string; value: string }[] = [];
  const budget = { versions: MAX_VERSIONS_CHECKED, histories: MAX_HISTORIES };
  for (const current of (await readableRecords(deps, req, named, patient)).values()) {
    if (await cleanRecord(deps, req, current, patient, budget)) values.push({ system: current.type, value: current.id });
  }
  if (!values.length) return undefined;
  return { kind: 'or', any: [{ kind: 'compartment', patient }, { kind: 'token', param: 'target', values }] };
}

/** Why a Provenance outside the compartment is refused, for the 403. */
export const PROVENANCE_REFUSAL = `is outside the patient compartment the token is limited to, and none of its first ${MAX_PROVENANCE_TARGETS} targets is a record of that patient the token may read`;
