import type { FhirIssue } from '../errors.ts';
import { dateRange } from '../fhir/dates.ts';
import { issue } from '../fhir/outcome.ts';
import { followedByStored } from '../fhir/history-at.ts';
import { parseReference } from '../fhir/references.ts';
import type { Condition, ResourceVersion, Store } from '../store/types.ts';

type Json = Record<string, unknown>;

/**
 * The version of `type/id` as of `at` (current or from history), or null when it did not exist then; EXPUNGED when
 * the version after the last one stored at or before `at` is gone (followedByStored): the one current at `at` may
 * have been expunged, and the one before it is not read in its place (its content was replaced).
 */
export async function readAsOf(store: Store, tenant: string, type: string, id: string, at: number): Promise<ResourceVersion | null | typeof EXPUNGED> {
  const current = await store.resources.read(tenant, type, id);
  if (!current) return null;
  if (current.lastUpdated <= at) return current.deleted ? null : current;
  const [v] = await store.resources.history(tenant, { type, id, at, count: 1 });
  if (!v) return null;
  if (v.versionId + 1 !== current.versionId && !(await followedByStored(store.resources, tenant, v))) return EXPUNGED;
  return v.deleted ? null : v;
}

/** What readAsOf answers for a resource whose version as of the time may have been expunged. */
export const EXPUNGED = 'expunged';

/** Whether a Group.member counts at `at`: not inactive, and `at` within its period (bounds at their precision). */
function memberAt(member: Json, at: number): boolean {
  if (member.inactive === true) return false;
  const period = member.period as { start?: string; end?: string } | undefined;
  const start = period?.start ? dateRange(period.start) : null;
  const end = period?.end ? dateRange(period.end) : null;
  if (start && start.low > at) return false;
  if (end && end.high <= at) return false;
  return true;
}

/** Where a member sits: `Group.member[index].entity` of Group `group`, and its reference as written. */
interface MemberAt {
  group: string;
  index: number;
  reference: string;
}

/** A member entity that does not resolve to a Patient, as a manifest error naming it. */
function memberIssue(m: { group: string; index: number; reference?: string }, code: string, problem: string): FhirIssue {
  const expression = `Group.member[${m.index}].entity`;
  const what = m.reference === undefined ? 'has no literal reference' : `'${m.reference}' ${problem}`;
  return issue('error', code, `Group/${m.group}: ${expression} ${what}; the member is not exported`, [expression]);
}

/**
 * Walks Group `id` as of `at` (FHIR R4 Group.member: `entity`, `inactive`, `period`): members that are
 * Groups are followed, cycles ignored. Returns the Patient ids it names, each with where it was met,
 * and issues for the members that name no Patient (no literal reference, `urn:` and other
 * unresolvable references, other types, Groups that do not exist).
 */
async function walk(store: Store, tenant: string, id: string, at: number, base: string | undefined, readable?: GroupReadable): Promise<{ named: Map<string, MemberAt[]>; issues: FhirIssue[] }> {
  const named = new Map<string, MemberAt[]>();
  const issues: FhirIssue[] = [];
  const seen = new Set<string>();
  const pending: { id: string; from?: MemberAt }[] = [{ id }];
  while (pending.length) {
    const next = pending.pop()!;
    if (seen.has(next.id)) continue;
    seen.add(next.id);
    const v = await readAsOf(store, tenant, 'Group', next.id, at);
    if (v === EXPUNGED) {
      if (next.from) issues.push(memberIssue(next.from, 'deleted', 'refers to a Group whose version as of transactionTime was expunged'));
      continue;
    }
    if (!v) {
      if (next.from) issues.push(memberIssue(next.from, 'not-found', 'refers to a Group that does not exist'));
      continue;
    }
    if (next.from && readable && !(await readable(v))) {
      issues.push(memberIssue(next.from, 'forbidden', 'refers to a Group the access token may not read'));
      continue;
    }
    const group = JSON.parse(v.content) as Json;
    ((Array.isArray(group.member) ? group.member : []) as Json[]).forEach((member, index) => {
      if (!memberAt(member, at)) return;
      const ref = (member.entity as Json | undefined)?.reference;
      if (typeof ref !== 'string') return void issues.push(memberIssue({ group: next.id, index }, 'not-found', ''));
      const where: MemberAt = { group: next.id, index, reference: ref };
      const parsed = parseReference(ref, base);
      if (!parsed) issues.push(memberIssue(where, 'not-found', 'does not resolve to a stored resource'));
      else if (parsed.type === 'Patient') named.set(parsed.id, [...(named.get(parsed.id) ?? []), where]);
      else if (parsed.type === 'Group') pending.push({ id: parsed.id, from: where });
      else issues.push(memberIssue(where, 'not-supported', `refers to a ${parsed.type}, not a Patient`));
    });
  }
  return { named, issues };
}

/**
 * Whether the kick-off's token may read a nested Group's version (its compartment and scope filters, as
 * a REST read judges them): the members of one it may not read are not followed, or an export would
 * tell them. Absent when the token reads every Group.
 */
export type GroupReadable = (v: ResourceVersion) => Promise<boolean>;

/** Patient ids looked up per query. */
const CHUNK = 500;

/**
 * Which of the Patient `ids` existed at `at`: counted per chunk; a chunk with some missing is looked at closer
 * (a Group's members, and a Patient export's `patient` parameter).
 */
export async function patientsAsOf(store: Store, tenant: string, ids: string[], at: number): Promise<Set<string>> {
  const found = new Set<string>();
  for (let i = 0; i < ids.length; i += CHUNK) {
    const chunk = ids.slice(i, i + CHUNK);
    // Current, live and unchanged since `at`: existed then. The common case is one count per chunk.
    const where: Condition[] = [{ kind: 'id', ids: chunk }, { kind: 'lastUpdated', tests: [{ op: 'lt', low: at + 1, high: at + 1 }] }];
    if ((await store.resources.count(tenant, { type: 'Patient', where, sort: [], count: 0 })) === chunk.length) {
      for (const id of chunk) found.add(id);
      continue;
    }
    const settled = new Set((await store.resources.search(tenant, { type: 'Patient', where, sort: [], count: chunk.length })).map((v) => v.id));
    for (const id of chunk) if (settled.has(id) || (await readAsOf(store, tenant, 'Patient', id, at))) found.add(id);
  }
  return found;
}

/**
 * Which of the Patient `ids` (none of which existed at `at`) were deleted after `since`, at or before `at`:
 * a `_since` export reports their deletion, and those of their compartments, in its `deleted` files
 * (Bulk Data 2.0), as it does for a Patient export. One read per id: only the absent ones are asked.
 */
async function deletedSince(store: Store, tenant: string, ids: string[], since: number, at: number): Promise<Set<string>> {
  const out = new Set<string>();
  for (const id of ids) {
    const current = await store.resources.read(tenant, 'Patient', id);
    if (!current) continue;
    const v = current.lastUpdated <= at ? current : (await store.resources.history(tenant, { type: 'Patient', id, at, count: 1 }))[0];
    if (v?.deleted && v.lastUpdated > since) out.add(id);
  }
  return out;
}

/**
 * The Patients of `ids` an export names: those that existed at `at` (patientsAsOf) and, with `_since`,
 * those deleted since then, whose deletion the export reports (without them a client kept a Patient
 * deleted since its last export, and its compartment's deletions, for good).
 */
export async function patientsKnown(store: Store, tenant: string, ids: string[], at: number, since: number | undefined): Promise<Set<string>> {
  const found = await patientsAsOf(store, tenant, ids, at);
  if (since === undefined || found.size === ids.length) return found;
  for (const id of await deletedSince(store, tenant, ids.filter((i) => !found.has(i)), since, at)) found.add(id);
  return found;
}

/** At most this many member issues per export; the rest are counted in one more. */
export const MAX_MEMBER_ISSUES = 1000;

/** What a Group's members resolve to at a time. */
export interface GroupPatients {
  /** Ids of the member Patients that existed then. */
  patients: Set<string>;
  /** One per member that does not resolve to a stored Patient (for the manifest's `error` files), bounded. */
  issues: FhirIssue[];
}

/**
 * The patients that are members of Group `id` at time `at` (FHIR R4 Group.member: `entity`,
 * `inactive`, `period`); members that are Groups are followed, cycles ignored. Members whose entity
 * does not resolve to a Patient stored at `at` are left out, each reported (Bulk Data 2.0 asks
 * problems to be reported in the manifest's `error` files rather than silently dropped).
 */
export async function groupPatients(store: Store, tenant: string, id: string, at: number, base: string | undefined, checkPatients = true, readable?: GroupReadable, since?: number): Promise<GroupPatients> {
  const { named, issues } = await walk(store, tenant, id, at, base, readable);
  // Unchecked (for a token that may not be told which Patients exist): every Patient named is a member.
  if (!checkPatients) return { patients: new Set(named.keys()), issues: bounded(issues, id) };
  // With `_since`, a member deleted since then stays one: its deletion is reported (patientsKnown).
  const patients = await patientsKnown(store, tenant, [...named.keys()], at, since);
  for (const [pid, places] of named) {
    if (!patients.has(pid)) for (const where of places) issues.push(memberIssue(where, 'not-found', 'refers to a Patient that does not exist'));
  }
  return { patients, issues: bounded(issues, id) };
}

/** At most MAX_MEMBER_ISSUES of Group `id`'s member issues, and one saying how many more there were. */
function bounded(issues: FhirIssue[], id: string): FhirIssue[] {
  if (issues.length > MAX_MEMBER_ISSUES) {
    const more = issues.length - MAX_MEMBER_ISSUES;
    issues.splice(MAX_MEMBER_ISSUES, more, issue('error', 'too-costly', `Group/${id}: ${more} more members do not resolve to a Patient and are not listed`));
  }
  return issues;
}

/** The ids of the Patients Group `id` names as members at `at`, without checking they exist. */
export async function groupMemberIds(store: Store, tenant: string, id: string, at: number, base: string | undefined, readable?: GroupReadable): Promise<Set<string>> {
  return new Set((await walk(store, tenant, id, at, base, readable)).named.keys());
}
