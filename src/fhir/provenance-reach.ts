/**
 * A Provenance of a patient's record is within that patient's token's reach. R4's Patient
 * CompartmentDefinition puts a Provenance in a patient's compartment only when a `target` is the Patient
 * itself, but a Provenance is written for a record (`target` = `Observation/x`), and US Core requires
 * `_revinclude=Provenance:target` of every profile's search, which ONC's single-patient API tests run
 * with a patient launch's token. So, for a token whose access to Provenance is limited to a patient, a
 * Provenance is within reach when it is in the compartment, or when one of its targets (any of them,
 * however many) is a record of that patient (a resource of this server of a Patient compartment type,
 * in the patient's compartment, its current version) that the token may read: its type's scope, and
 * its SMART v2 filters on reads. Every way of asking answers the same: read, vread, instance history,
 * searches of Provenance (`_id`, `target`, none at all, across types), `_include` and `_revinclude`
 * landing on one, references to one a write makes under referential integrity.
 * A version-specific target (`Observation/x/_history/1`) names that version: it counts only when that
 * version, as well as the record's current one, is the patient's within the token's filters, as a vread
 * of it would be allowed (namesReadable). Else a record moved from another patient to this one (a
 * misfiled result corrected) would open the Provenance of the other patient's version to this one, and
 * the reverse.
 * A search finds them by the store's index (reachCondition: the compartment, or a `target` row naming
 * one of the patient's records of each type the token reads, a chain bounded by the compartment's rows),
 * never by reading the tenant's Provenance. The index holds a target without its version, so the rows
 * a search found that are outside the compartment and name a version are checked after they are read
 * (provenanceRowsInReach), as a read checks them; those naming none are exactly what the index says.
 * Only records in the compartment count: the Provenance of a shared record (a Practitioner, a
 * Medication) is not the patient's. One naming the patient's record and another patient's too is
 * readable: it is a Provenance of the patient's record, as in IBM's FHIR server (LinuxForHealth/FHIR
 * #1881), and the token learns from it only the other record's reference. Compartment searches,
 * `$everything` and bulk exports keep the compartment alone.
 */
import { FhirError } from '../errors.ts';
import type { Condition, ResourceVersion, ResourceWriter, SearchQuery } from '../store/types.ts';
import type { Access } from './access.ts';
import { lookups } from './core-search.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { inPatientCompartment, patientCompartment } from './definitions.ts';
import { compartmentsOf } from './indexer.ts';
import { parseReference } from './references.ts';
import { matchConditions, type MatchContext } from './search-match.ts';

/** The ids of one type a query reads at most when the targets of Provenance are looked up (readableRecords). */
export const IDS_PER_QUERY = 500;

type Json = Record<string, unknown>;

/** The records of the patient found, by `Type/id`: their current version. */
type OwnRecords = Map<string, ResourceVersion>;

/**
 * How the targets are read: the store's search and vread, or inside a write's transaction its writer's
 * search alone (`vread` undefined: an earlier version named is not read, and gives no reach), or its
 * writer's search and vread (writerTargetReads), which judge as the store's do.
 */
export interface TargetReads {
  search(query: SearchQuery): Promise<ResourceVersion[]>;
  vread?(type: string, id: string, versionId: number): Promise<ResourceVersion | null>;
  /** The chains and `_has` of a scope filter an earlier version is matched against (default: searched on the pool). */
  lookups?: MatchContext;
}

/**
 * The targets read through a write's transaction `w` (its search, vread and present, for the chains of scope
 * filters too): judged as on the pool, without waiting for another connection of it while the transaction holds one.
 */
export function writerTargetReads(deps: FhirDeps, tenant: string, w: Pick<ResourceWriter, 'search' | 'vread' | 'present'>): TargetReads {
  const search = (q: SearchQuery) => w.search(q);
  return { search, vread: (type, id, versionId) => w.vread(type, id, versionId), lookups: lookups(deps, tenant, { search, present: (type, ids) => w.present(type, ids) }) };
}

const storeReads = (deps: FhirDeps, req: FhirRequest): TargetReads => ({
  search: (q) => deps.store.resources.search(req.tenant, q),
  vread: (type, id, versionId) => deps.store.resources.vread(req.tenant, type, id, versionId),
});

/** The versions a Provenance's targets name of each `Type/id` (undefined: the resource, no version). */
type Named = Map<string, Set<string | undefined>>;

/** The resources of this server that `provenance` targets (relative or absolute references of this server; a version-specific one with the version it names). */
function targetsOf(provenance: Json, base: string | undefined): Named {
  const named: Named = new Map();
  const targets = Array.isArray(provenance.target) ? provenance.target : [];
  for (const target of targets) {
    const ref = (target as Json | null)?.reference;
    const at = typeof ref === 'string' ? parseReference(ref, base) : null;
    if (at) (named.get(`${at.type}/${at.id}`) ?? named.set(`${at.type}/${at.id}`, new Set()).get(`${at.type}/${at.id}`)!).add(at.version);
  }
  return named;
}

/**
 * Throws 403 unless every target of `provenance` of a Patient compartment type is a record of `patient` alone: its
 * current version, read through the write's transaction `w`, is live and in that patient's compartment alone, and so
 * is the version a version-specific target names. A token whose writes of Provenance are bound to `patient` wrote one
 * targeting its Patient and another patient's Observation: in its own compartment by the first, it was the other
 * patient's to read by the second (provenancesInReach), an assertion about their record that their app and their
 * clinicians' `_revinclude` showed. A target that is no record yet (a deleted one, an id or a version never written)
 * is refused too: whoever writes it later (an operator's `Observation/future` of another patient, a record restored
 * for them, the next version of a record moved to them) would bring this Provenance within their reach. A
 * transaction's targets are judged once its entries are written (PutOptions.deferTargets), so a record the Bundle
 * writes counts whatever the order of its entries. Every refusal says the same words, whether the target is another
 * patient's or nothing, so that the answer tells the token nothing of which ids another patient's records have.
 */
export async function requireOwnTargets(w: Pick<ResourceWriter, 'search' | 'vread'>, provenance: Json, patient: string, base: string | undefined): Promise<void> {
  const targets: { at: number; type: string; id: string; version: string | undefined; reference: string }[] = [];
  const ids = new Map<string, Set<string>>();
  (Array.isArray(provenance.target) ? provenance.target : []).forEach((target: unknown, at: number) => {
    const reference = (target as Json | null)?.reference;
    const named = typeof reference === 'string' ? parseReference(reference, base) : null;
    if (!named || !inPatientCompartment(named.type)) return;
    targets.push({ at, type: named.type, id: named.id, version: named.version, reference: reference as string });
    (ids.get(named.type) ?? ids.set(named.type, new Set()).get(named.type)!).add(named.id);
  });
  const current = new Map<string, ResourceVersion>();
  for (const [type, of] of ids) {
    const all = [...of];
    for (let i = 0; i < all.length; i += IDS_PER_QUERY) {
      const chunk = all.slice(i, i + IDS_PER_QUERY);
      for (const v of await w.search({ type, where: [{ kind: 'id', ids: chunk }], sort: [], count: chunk.length })) current.set(`${type}/${v.id}`, v);
    }
  }
  const onlyOf = (v: ResourceVersion | null | undefined) => !!v && !v.deleted && compartmentsOf(JSON.parse(v.content) as Json, base).every((p) => p === patient);
  for (const t of targets) {
    const now = current.get(`${t.type}/${t.id}`);
    let own = onlyOf(now);
    if (own && t.version !== undefined && t.version !== String(now!.versionId)) {
      const n = /^[1-9][0-9]{0,8}$/.test(t.version) ? Number(t.version) : undefined;
      own = n !== undefined && n < now!.versionId && onlyOf(await w.vread(t.type, t.id, n));
    }
    if (own) continue;
    throw new FhirError('forbidden', `Provenance.target[${t.at}]: '${t.reference}' is not a record of the patient the token is limited to, or does not exist: a patient-context token writes the Provenance of its own patient's records alone`, {
      expression: [`Provenance.target[${t.at}].reference`],
    });
  }
}

/** Whether a target of `provenance` names a version (`Observation/x/_history/1`), which the index does not hold. */
function namesVersion(provenance: Json, base: string | undefined): boolean {
  for (const versions of targetsOf(provenance, base).values()) for (const v of versions) if (v !== undefined) return true;
  return false;
}

/** The token's SMART v2 scope filters on reads of `type`, as one condition (ORed alternatives of ANDed conditions). */
function readFilter(access: Access, type: string): Condition | undefined {
  const filters = access.filters?.(type, 'r');
  return filters && { kind: 'or', any: filters.map((all): Condition => ({ kind: 'and', all })) };
}

/**
 * The condition a search of Provenance by a token limited to `patient` takes in place of the compartment:
 * a `target` is the Patient (the compartment: R4's `patient` parameter), or names a resource of a
 * Patient compartment type the token reads, in that patient's compartment and within the token's read
 * filters on its type (a chain per type, bounded by the compartment's rows of that type; the store drops
 * those of types no Provenance ever targeted). Every alternative is read by an index, so a search
 * driven by it reads the patient's records' Provenance alone.
 */
export function reachCondition(access: Access, patient: string): Condition {
  const any: Condition[] = [{ kind: 'token', param: 'target', values: [{ system: 'Patient', value: patient }], reference: true }];
  for (const type of patientCompartment().keys()) {
    if (!access.can(type, 'r')) continue;
    const where: Condition[] = [{ kind: 'compartment', patient }];
    const filter = readFilter(access, type);
    if (filter) where.push(filter);
    any.push({ kind: 'chain', param: 'target', targetType: type, where });
  }
  return { kind: 'or', any };
}

/**
 * The `Type/id` of the resources among `rows` that are records of `patient` the request may read, where a
 * search or an include within the token's reach found them: of a type of the Patient compartment the
 * token reads, live, in that patient's compartment, within the token's read filters on its type (as
 * readableRecords finds them for a read: a search's matches meet its search filters, which may be wider,
 * `patient/Observation.s` beside `patient/Observation.r?category=laboratory`). `notCurrent`: the `Type/id`
 * of rows that may be an earlier version (a version-specific `_include` read them), which are not. A
 * Provenance naming one is found by its `target` alone, without reachCondition (a `_revinclude` of the
 * patient's records, the common case, reads no more).
 */
export async function patientRecords(deps: FhirDeps, req: FhirRequest, rows: ResourceVersion[], patient: string, notCurrent: ReadonlySet<string>): Promise<Set<string>> {
  const own = new Set<string>();
  for (const row of rows) {
    const key = `${row.type}/${row.id}`;
    if (row.deleted || !inPatientCompartment(row.type) || notCurrent.has(key) || !req.access.can(row.type, 'r')) continue;
    if (await versionOfPatient(deps, req, row, patient)) own.add(key);
  }
  return own;
}

/**
 * The records among `keys` (`Type/id`) of `patient` the request may read: of a type of the Patient
 * compartment the token reads, current, in that patient's compartment, meeting the token's scope filters
 * on reads of that type (one store query per type and IDS_PER_QUERY ids), by `Type/id`.
 */
async function readableRecords(req: FhirRequest, reads: TargetReads, keys: Iterable<string>, patient: string): Promise<OwnRecords> {
  const byType = new Map<string, string[]>();
  for (const key of keys) {
    const slash = key.indexOf('/');
    const type = key.slice(0, slash);
    (byType.get(type) ?? byType.set(type, []).get(type)!).push(key.slice(slash + 1));
  }
  const found: OwnRecords = new Map();
  for (const [type, all] of byType) {
    if (!inPatientCompartment(type) || !req.access.can(type, 'r')) continue;
    const filter = readFilter(req.access, type);
    for (let i = 0; i < all.length; i += IDS_PER_QUERY) {
      const ids = all.slice(i, i + IDS_PER_QUERY);
      const where: Condition[] = [{ kind: 'id', ids }];
      if (filter) where.push(filter);
      for (const v of await reads.search({ type, where, compartment: patient, sort: [], count: ids.length })) found.set(`${type}/${v.id}`, v);
    }
  }
  return found;
}

/** Whether a version of a record is the patient's and within the token's scope filters, as a vread of it is judged. */
async function versionOfPatient(deps: FhirDeps, req: FhirRequest, v: ResourceVersion, patient: string, ctx?: MatchContext): Promise<boolean> {
  if (v.deleted) return false;
  const resource = JSON.parse(v.content) as Json;
  if (!compartmentsOf(resource, deps.fhirBase?.(req.tenant)).includes(patient)) return false;
  const filters = req.access.filters?.(v.type, 'r');
  if (!filters) return true;
  const within = ctx ?? lookups(deps, req.tenant);
  for (const alternative of filters) if (await matchConditions(resource, v.lastUpdated, alternative, within)) return true;
  return false;
}

/**
 * Whether the references `versions` to the patient's readable record `current` name it within reach:
 * the resource itself, its current version, or an earlier version that is the patient's within the
 * token's filters (read, as `checked` remembers, by `Type/id/version`; never without `reads.vread`).
 */
async function namesReadable(
  deps: FhirDeps, req: FhirRequest, reads: TargetReads, versions: Set<string | undefined>, current: ResourceVersion, patient: string, checked: Map<string, boolean>,
): Promise<boolean> {
  for (const version of versions) {
    if (version === undefined || version === String(current.versionId)) return true;
  }
  if (!reads.vread) return false;
  for (const version of versions) {
    const key = `${current.type}/${current.id}/${version}`;
    let ok = checked.get(key);
    if (ok === undefined) {
      const n = /^[1-9][0-9]{0,8}$/.test(version!) ? Number(version) : undefined;
      const v = n === undefined || n > current.versionId ? null : await reads.vread(current.type, current.id, n);
      ok = v !== null && (await versionOfPatient(deps, req, v, patient, reads.lookups));
      checked.set(key, ok);
    }
    if (ok) return true;
  }
  return false;
}

/**
 * Whether each of `provenances` (their contents: several versions of one, or several found by a search)
 * is within the reach of `patient`'s token: in the compartment, or naming among all its targets a record
 * of the patient the request may read (readableRecords, one lookup of the targets of them all) at a
 * version within reach (namesReadable).
 */
export async function provenancesInReach(deps: FhirDeps, req: FhirRequest, provenances: Json[], patient: string, reads = storeReads(deps, req)): Promise<boolean[]> {
  const base = deps.fhirBase?.(req.tenant);
  const named = provenances.map((p) => (compartmentsOf(p, base).includes(patient) ? undefined : targetsOf(p, base)));
  const keys = new Set<string>();
  for (const n of named) for (const key of n?.keys() ?? []) keys.add(key);
  const own = keys.size ? await readableRecords(req, reads, keys, patient) : new Map<string, ResourceVersion>();
  const checked = new Map<string, boolean>();
  const out: boolean[] = [];
  for (const n of named) {
    let ok = n === undefined;
    for (const [key, versions] of n ?? []) {
      const current = own.get(key);
      if (current && (await namesReadable(deps, req, reads, versions, current, patient, checked))) {
        ok = true;
        break;
      }
    }
    out.push(ok);
  }
  return out;
}

/** provenancesInReach for one Provenance (a read, a vread, a reference a write makes). */
export async function provenanceOfReadableRecord(deps: FhirDeps, req: FhirRequest, provenance: Json, patient: string, reads?: TargetReads): Promise<boolean> {
  return (await provenancesInReach(deps, req, [provenance], patient, reads))[0]!;
}

/**
 * The rows among `rows` within reach, where a search by reachCondition found them: a Provenance outside
 * the compartment that names a version is judged as a read judges it (provenancesInReach, the rows of a
 * page at once), the index having found it by a target without its version; the others are kept (those
 * naming no version, found by a target that is a readable record of the patient, are within reach).
 */
export async function provenanceRowsInReach(deps: FhirDeps, req: FhirRequest, rows: ResourceVersion[], patient: string, reads?: TargetReads): Promise<ResourceVersion[]> {
  const base = deps.fhirBase?.(req.tenant);
  const judged: { row: ResourceVersion; resource: Json }[] = [];
  for (const row of rows) {
    if (row.type !== 'Provenance' || row.deleted) continue;
    const resource = JSON.parse(row.content) as Json;
    if (!compartmentsOf(resource, base).includes(patient) && namesVersion(resource, base)) judged.push({ row, resource });
  }
  if (!judged.length) return rows;
  const ok = await provenancesInReach(deps, req, judged.map((j) => j.resource), patient, reads);
  const out = new Set(judged.filter((_, i) => !ok[i]).map((j) => j.row));
  return rows.filter((row) => !out.has(row));
}

/**
 * The patient whose reach a search of Provenance by `req` (`perm`: 's' for a search, 'r' for the reads of
 * `_include`) takes in place of the compartment (reachCondition), or undefined: another type, a token not
 * limited to a patient, or a compartment search (`Patient/x/Provenance`), which keeps the compartment.
 */
export function widenedPatient(req: FhirRequest, type: string, perm: 'r' | 's', compartment?: string): string | undefined {
  return type === 'Provenance' && compartment === undefined ? req.access.patientLimit(type, perm) : undefined;
}

/**
 * Whether `provenance`, which the criteria of a Subscription of `req`'s owner matched in memory (their
 * reachCondition reads a target without its version, as the index does), is within the owner's reach:
 * judged as provenanceRowsInReach judges a search's rows, its targets and the earlier versions it names read by
 * `reads` (the write's transaction).
 */
export async function provenanceMatchInReach(deps: FhirDeps, req: FhirRequest, provenance: Json, reads: TargetReads): Promise<boolean> {
  const patient = widenedPatient(req, 'Provenance', 's');
  const base = deps.fhirBase?.(req.tenant);
  if (patient === undefined || compartmentsOf(provenance, base).includes(patient) || !namesVersion(provenance, base)) return true;
  return provenanceOfReadableRecord(deps, req, provenance, patient, reads);
}

/** Why a Provenance outside the compartment is refused, for the 403. */
export const PROVENANCE_REFUSAL = 'is outside the patient compartment the token is limited to, and none of its targets is a record of that patient the token may read';
