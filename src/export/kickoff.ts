import type { Clock } from '../clock.ts';
import { FhirError, type FhirIssue } from '../errors.ts';
import { requireAccess, type Access } from '../fhir/access.ts';
import { requireCompartment, requireFilter } from '../fhir/crud.ts';
import type { Resource } from '../fhir/resource.ts';
import { issue } from '../fhir/outcome.ts';
import { parseReference } from '../fhir/references.ts';
import { ID_PATTERN, R4_RESOURCE_TYPES } from '../fhir/resource-types.ts';
import type { Condition, ExportPatient, ResourceVersion, SearchQuery, Store } from '../store/types.ts';
import { parseElements } from './elements.ts';
import { exportAccess } from './export-access.ts';
import { EXPUNGED, groupMemberIds, groupPatients, patientsAsOf, patientsKnown, readAsOf, type GroupReadable } from './group.ts';
import type { ExportInput } from './kickoff-input.ts';
import { patientBound, requireMember, requireOwnPatient, withinCompartment, type PatientBound } from './patient-bound.ts';
import { parseSince } from './since.ts';
import { initialProgress, type ExportLevel, type ExportSpec } from './spec.ts';
import { encodeProgress, encodeSpec } from './job-data.ts';
import { parseTypeFilters, type ExpandCodes } from './type-filter.ts';
import { scopeFilters, selectTypes, withScopeFilters } from './types-param.ts';

export interface KickoffDeps {
  store: Store;
  clock: Clock;
  /** Accepted or in-progress exports one client may have at a time. */
  maxJobsPerClient: number;
  /** The terminology service's codes for `:in`, `:not-in`, `:below` and `:above` in `_typeFilter`. */
  expandCodes?: ExpandCodes;
  /**
   * How long a kick-off waits before it reads a Group's members or the Patients `patient` names (as of
   * transactionTime), as a job waits before its first page (RunSettings.settleMs): the safe time holds this
   * process's writes alone, and another process sharing the database may still be committing a member it
   * stamped before transactionTime.
   */
  settleMs: number;
}

export interface KickoffRequest {
  tenant: string;
  access: Access;
  level: ExportLevel;
  groupId?: string;
  input: ExportInput;
  /** `Prefer: handling=lenient`. */
  lenient: boolean;
  /** The kick-off URL (the manifest's `request`; without parameters for POST). */
  requestUrl: string;
  /** The tenant's FHIR base: absolute references under it are the tenant's (FhirDeps.fhirBase). */
  fhirBase?: string;
  /** Create the job already claimed by this runner (the CLI runs its export itself). */
  claim?: { owner: string; leaseMs: number };
  /**
   * Aborted when the client goes away (the HTTP request's signal): the settle wait ends at once and no job is
   * created, since nobody would learn its status URL while it counted against the limit of jobs in progress.
   */
  signal?: AbortSignal;
}

const NDJSON_FORMATS = ['application/fhir+ndjson', 'application/ndjson', 'ndjson'];

function single(values: string[], name: string): string | undefined {
  if (values.length > 1) throw new FhirError('invalid', `${name} may be given once`, { expression: [name] });
  return values[0];
}

/**
 * `_outputFormat` (Bulk Data 2.0): the full content type or its abbreviations, in any case. A space stands
 * for the `+` of an unencoded `application/fhir+ndjson` that form decoding turned into one (as for
 * `_since`). Media type parameters (RFC 9110 5.6.6: `; name=value`, the name in any case, the value
 * perhaps quoted) are accepted where they change nothing: `charset=utf-8`, which NDJSON is written in.
 */
function checkOutputFormat(values: string[]): void {
  const format = single(values, '_outputFormat');
  if (format === undefined) return;
  const [essence, ...parameters] = format.split(';');
  if (!NDJSON_FORMATS.includes(essence!.trim().toLowerCase().replace(/ /g, '+'))) {
    throw new FhirError('invalid', `_outputFormat '${format}' is not supported: use application/fhir+ndjson, application/ndjson or ndjson`, {
      expression: ['_outputFormat'],
    });
  }
  for (const raw of parameters) {
    const parameter = raw.trim();
    const eq = parameter.indexOf('=');
    const name = parameter.slice(0, eq < 0 ? undefined : eq).trim().toLowerCase();
    const value = eq < 0 ? '' : parameter.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1').toLowerCase();
    if (parameter === '' || (name === 'charset' && value === 'utf-8')) continue;
    throw new FhirError('not-supported', `_outputFormat parameter '${parameter}' is not supported: the files are NDJSON in UTF-8, and charset=utf-8 is the only parameter accepted`, {
      expression: ['_outputFormat'],
    });
  }
}

/** Problems that lenient handling turns into manifest issues and strict handling into a 400. */
function tolerate(lenient: boolean, issues: FhirIssue[], text: string, expression: string): void {
  if (!lenient) throw new FhirError('invalid', text, { expression: [expression] });
  issues.push(issue('warning', 'not-supported', `${text}; it was ignored`, [expression]));
}

function patientIds(refs: string[], base: string | undefined): string[] {
  return refs.map((ref) => {
    const parsed = parseReference(ref, base);
    const id = parsed?.type === 'Patient' ? parsed.id : !ref.includes('/') && ID_PATTERN.test(ref) ? ref : null;
    if (!id) throw new FhirError('invalid', `patient '${ref}' is not a reference to a Patient`, { expression: ['patient'] });
    return id;
  });
}

/**
 * Whether the export may tell `access` which Patients exist (an unknown `patient` a 400, a Group member
 * naming no Patient a line of the error file): only when it reads every Patient. To any other token a
 * Patient it may not read would answer otherwise than one that does not exist, which its Patient read
 * or search would not tell it; the compartments named are exported as they stand, perhaps empty.
 */
function readsEveryPatient(access: Access): boolean {
  return access.can('Patient', 'r') && access.patientLimit('Patient', 'r') === undefined && access.filters?.('Patient', 'r') === undefined;
}

/** Waits `ms`, or until `signal` aborts; then throws if it has (requireClient). */
async function settle(ms: number, signal: AbortSignal | undefined): Promise<void> {
  requireClient(signal);
  if (!signal) return Bun.sleep(ms);
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAbort: (() => void) | undefined;
  await new Promise<void>((resolve) => {
    timer = setTimeout(resolve, ms);
    onAbort = resolve;
    signal.addEventListener('abort', onAbort, { once: true });
  });
  clearTimeout(timer);
  signal.removeEventListener('abort', onAbort!);
  requireClient(signal);
}

/** A kick-off whose client went away starts nothing (KickoffRequest.signal). */
function requireClient(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new FhirError('invalid', 'The client closed the kick-off request before it was answered: no export was started');
}

/**
 * Which patients a Patient or Group export covers: stored with the job, or `any` compartment. A token
 * whose `patient/` scopes bind every exported type covers its patient alone (patient-bound.ts).
 */
async function resolvePatients(deps: KickoffDeps, req: KickoffRequest, at: number, since: number | undefined, issues: FhirIssue[], bound: PatientBound | undefined, groupAccess: Access) {
  const wanted = [...new Set(patientIds(req.input.patients, req.fhirBase))];
  requireOwnPatient(bound, wanted);
  // A token that may not read Groups is refused before the wait, as one at its limits is.
  if (req.level === 'group') requireAccess(groupAccess, 'Group', 'r');
  // Read as of transactionTime once the writes other processes stamped before it have committed (KickoffDeps.settleMs).
  if ((req.level === 'group' || wanted.length) && deps.settleMs > 0) await settle(deps.settleMs, req.signal);
  let members: Set<string> | undefined;
  let readable: GroupReadable | undefined;
  if (req.level === 'group') {
    const read = await readAsOf(deps.store, req.tenant, 'Group', req.groupId!, at);
    if (read === EXPUNGED) {
      throw new FhirError('conflict', `Group/${req.groupId}: its version as of transactionTime was expunged before the export could read it; kick off again to export the Group as it is now`);
    }
    if (!read) throw new FhirError('not-found', `Group/${req.groupId} is not known`);
    const match = { exists: async (query: SearchQuery) => (await deps.store.resources.search(req.tenant, query)).length > 0 };
    // A patient-context token reads a Group in its patient's compartment alone, as a REST read does;
    // a nested Group is followed only when the token may read it so too.
    const requireReadable = async (v: ResourceVersion) => {
      const resource = JSON.parse(v.content) as Resource;
      requireCompartment(groupAccess, resource, req.fhirBase, 'r');
      await requireFilter(groupAccess, 'r', resource, v.lastUpdated, match);
    };
    await requireReadable(read);
    const limited = groupAccess.patientLimit('Group', 'r') !== undefined || groupAccess.filters?.('Group', 'r') !== undefined;
    readable = limited ? (v) => requireReadable(v).then(() => true, (err: unknown) => (err instanceof FhirError && err.category === 'forbidden' ? false : Promise.reject(err))) : undefined;
    const group = await groupPatients(deps.store, req.tenant, req.groupId!, at, req.fhirBase, readsEveryPatient(req.access), readable, since);
    members = group.patients;
    requireMember(bound, members, req.groupId!);
    // Members that resolve to no Patient go to the manifest's error file, unless `patient` (or the token) picks others.
    if (!wanted.length && !bound?.whole) issues.push(...group.issues);
  }
  let chosen = members ? [...members] : undefined;
  if (!wanted.length && bound?.whole) chosen = [bound.patient];
  if (wanted.length) {
    chosen = [];
    // Those that existed at transactionTime (or, with `_since`, were deleted since: their deletion is reported),
    // a chunk of ids at a time (a read each held the request for seconds).
    const existing = members ?? (readsEveryPatient(req.access) ? await patientsKnown(deps.store, req.tenant, wanted, at, since) : undefined);
    for (const id of wanted) {
      if (!existing || existing.has(id)) chosen.push(id);
      else tolerate(req.lenient, issues, members ? `Patient/${id} is not a member of Group/${req.groupId}` : `Patient/${id} is not known`, 'patient');
    }
  }
  if (!chosen) return { compartment: 'any' as const, patients: [] as ExportPatient[], joinedSince: false };
  const before = since !== undefined && req.level === 'group' ? await membersAt(deps, req, since, readable) : undefined;
  const patients = chosen.map((id): ExportPatient => ({ id, joined: before !== undefined && !before.has(id) }));
  // Only when one joined: the scans then take no joined compartment into account, and the plan has no step for their Provenance.
  return { compartment: 'job' as const, patients, joinedSince: patients.some((p) => p.joined) };
}

/**
 * The members a Group export at `since` held (an earlier export's, whose transactionTime the client sends
 * as `_since`): those named then and, for a token told which Patients exist, whose Patient existed then.
 * A member whose Patient came after was left out of that export (an error line), so it joined since and
 * comes with all its data: its records written before its Patient were never exported otherwise.
 */
async function membersAt(deps: KickoffDeps, req: KickoffRequest, since: number, readable: GroupReadable | undefined): Promise<Set<string>> {
  const named = await groupMemberIds(deps.store, req.tenant, req.groupId!, since, req.fhirBase, readable);
  return readsEveryPatient(req.access) ? patientsAsOf(deps.store, req.tenant, [...named], since) : named;
}

/**
 * The types a Binary's securityContext may name for `access` to export it (ExportSpec.binaryContexts):
 * those it reads unfiltered; undefined when that is every type. A type read through a SMART v2 filter is
 * left out, since the export cannot hold each Binary's context to the filter as a read does.
 */
function binaryContexts(access: Access): string[] | undefined {
  const readable = R4_RESOURCE_TYPES.filter((t) => access.can(t, 'r') && access.filters?.(t, 'r') === undefined);
  return readable.length === R4_RESOURCE_TYPES.length ? undefined : readable;
}

/** Builds the job spec from validated parameters (Bulk Data 2.0 kick-off request). */
async function buildSpec(deps: KickoffDeps, req: KickoffRequest, at: number, now: number, groupAccess: Access) {
  const { input, lenient, level } = req;
  checkOutputFormat(input.outputFormat);
  const sinceRaw = single(input.since, '_since');
  const since = sinceRaw === undefined ? undefined : parseSince(sinceRaw);
  // Against the clock, or the safe time where a write stamped just after an earlier one put it a millisecond ahead.
  if (since !== undefined && since > Math.max(now, at)) throw futureSince(sinceRaw!, Math.max(now, at));
  const issues: FhirIssue[] = [];
  for (const name of new Set(input.unknown)) tolerate(lenient, issues, `Parameter '${name}' is not supported by $export`, name);
  // Read as absent, an empty `_type` or `_typeFilter` would export more than a client that meant to name some asked for.
  for (const name of input.empty) tolerate(lenient, issues, `${name} is given but names nothing: name at least one value, or leave ${name} out`, name);
  if (input.patients.length && input.method === 'GET') throw new FhirError('invalid', 'patient is accepted only in the Parameters body of a POST kick-off (Bulk Data 2.0), not in a URL', { expression: ['patient'] });
  if (input.patients.length && level === 'system') tolerate(lenient, issues, 'patient does not apply to a system-level export', 'patient');
  const selection = selectTypes(level, input.types, input.includeAssociatedData, req.access, lenient);
  issues.push(...selection.issues);
  // Provenance found by its targets is exported too: `_typeFilter` and `_elements` apply to it as to a scanned type.
  const withProvenance = selection.provenance === 'none' ? selection.types : [...selection.types, 'Provenance'];
  const { filters, issues: filterIssues } = await parseTypeFilters(input.typeFilters, withProvenance, lenient, req.tenant, req.access, { expandCodes: deps.expandCodes, store: deps.store, asOf: at, ...(req.fhirBase !== undefined && { fhirBase: () => req.fhirBase! }) });
  const { elements, issues: elementIssues } = parseElements(input.elements, withProvenance, lenient);
  issues.push(...filterIssues, ...elementIssues);
  // A SMART v2 scope filter narrows its type's export as `_typeFilter` does, ANDed with it.
  const scoped = scopeFilters(req.access, selection.types);
  const bound = patientBound(selection);
  // Bound types beside lifted ones: each within the patient's compartment (otherwise the job's patients are).
  const narrow = (f: Record<string, Condition[][]>, types: string[]) => (bound && !bound.whole ? withinCompartment(f, types, bound) : f);
  const spec: ExportSpec = { level, types: selection.types, filters: narrow(withScopeFilters(filters, scoped), selection.types), joinedSince: false, provenance: selection.provenance, issues };
  if (req.fhirBase !== undefined) spec.fhirBase = req.fhirBase;
  if (Object.keys(scoped).length) spec.scopeFilters = scoped;
  if (bound) spec.bound = { patient: bound.patient, types: bound.types };
  if (req.access.patient !== undefined) spec.ownerPatient = req.access.patient;
  if (req.access.user !== undefined) spec.ownerUser = req.access.user.id;
  const contexts = selection.types.includes('Binary') ? binaryContexts(req.access) : undefined;
  if (contexts) spec.binaryContexts = contexts;
  if (selection.provenance === 'compartment') {
    const targetScopes = scopeFilters(req.access, selection.provenanceTargets);
    const targets = Object.fromEntries(selection.provenanceTargets.map((t) => [t, targetScopes[t] ?? []]));
    spec.provenanceTargets = narrow(targets, selection.provenanceTargets);
  }
  if (since !== undefined) spec.since = since;
  if (Object.keys(elements).length) spec.elements = elements;
  if (level === 'system') return { spec, patients: [] as ExportPatient[] };
  spec.groupId = req.groupId;
  if (level === 'patient') delete spec.groupId;
  const resolved = await resolvePatients(deps, req, at, since, issues, bound, groupAccess);
  spec.compartment = resolved.compartment;
  spec.joinedSince = resolved.joinedSince;
  return { spec, patients: resolved.patients };
}

/**
 * Bulk Data 2.0 kick-off: validates the request, persists an accepted job (with the patients of a
 * Patient or Group export) and returns its id. The work happens later in a worker.
 */
export async function kickOff(deps: KickoffDeps, request: KickoffRequest): Promise<string> {
  const req = { ...request, access: exportAccess(request.access) };
  // The Group named (and the nested ones followed) are read by id, as a REST read of them is: read access to them suffices.
  const groupAccess = request.access;
  // A client at its limit is refused before its parameters cost anything (a Group's members, `_typeFilter`'s
  // codes); `create` decides atomically for kick-offs that race past this.
  const ownerUser = req.access.user?.id;
  if ((await deps.store.exports.jobs.activeCount(req.tenant, req.access.clientId, ownerUser)) >= deps.maxJobsPerClient) throw tooMany(deps.maxJobsPerClient, ownerUser);
  // Bulk Data 2.0.0: the export holds every resource modified up to and including transactionTime, so it is
  // the safe time (store/write-times.ts), before which every write has committed, not the clock's now.
  const now = deps.clock.now();
  const transactionTime = deps.store.writeTimes.safeTime(now);
  const { spec, patients } = await buildSpec(deps, req, transactionTime, now, groupAccess);
  requireClient(req.signal);
  const id = crypto.randomUUID();
  const created = await deps.store.exports.jobs.create(
    {
      id, tenant: req.tenant, clientId: req.access.clientId, request: req.requestUrl, spec: encodeSpec(spec),
      transactionTime, progress: encodeProgress(initialProgress()), createdAt: now, ...(ownerUser === undefined ? {} : { ownerUser }),
      ...(req.claim ? { claim: { owner: req.claim.owner, leaseMs: req.claim.leaseMs } } : {}),
    },
    patients,
    deps.maxJobsPerClient,
  );
  if (!created) throw tooMany(deps.maxJobsPerClient, ownerUser);
  return id;
}

/**
 * A `_since` after the server's time at kick-off (the SMART Bulk Data Tester's "Rejects _since={future
 * date}"): nothing in the snapshot can have changed after it, so the export would be empty, and a
 * client whose clock runs ahead would not learn why. A `_since` taken from an earlier manifest's
 * transactionTime (this server's clock) is never later, so that use is untouched.
 */
function futureSince(raw: string, at: number): FhirError {
  return new FhirError('invalid', `_since '${raw}' is later than this server's time (${new Date(at).toISOString()}): nothing can have changed since then; use an instant in the past, such as an earlier export's transactionTime`, {
    expression: ['_since'],
  });
}

/**
 * Bulk Data 2.0: a server that holds a client to its running exports "SHOULD respond with a 429 ... and a Retry-After
 * header". The limit is the owner's: a signed-in user's with this client, or the client's own (no user).
 */
function tooMany(max: number, user: string | undefined): FhirError {
  const who = user === undefined ? 'This client' : 'This user of this client';
  return new FhirError('too-many', `${who} already has ${max} export(s) in progress; wait for one to finish or cancel it`, { headers: { 'Retry-After': '30' } });
}
