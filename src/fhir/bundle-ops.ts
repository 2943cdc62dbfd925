import { STATUS_CODES } from 'node:http';
import { FhirError, type FhirIssue } from '../errors.ts';
import { requireAccess } from './access.ts';
import type { Condition, ResourceVersion, ResourceWriter, SearchQuery } from '../store/types.ts';
import { entryPath, located, type Entry } from './bundle-entries.ts';
import { follow, resolveConditionalReferences, sharedWrites, WrittenResources, type ConditionalReference, type TransactionWrite } from './bundle-conditional.ts';
import { etag } from './bundle.ts';
import { conditionElement, withEntryIds } from './bundle-match-urls.ts';
import { splitVersion, versionBeforeWrite, type PendingVersion } from './bundle-versions.ts';
import { cloneExact, parseExact } from './exact-json.ts';
import { besideCount, ConditionRaced, conditionKey, conditionParams, heldToMatch, requireFoundByCondition, resolveCondition, showCondition, storedMatch, type ConditionAnswers } from './conditional.ts';
import { GroupedConditionAnswers, type AheadSearch } from './bundle-condition-answers.ts';
import { deleteVersion, deletionRead, putVersion, validationLevel, reachJudged, refusedNoOp, requireStoredInReach, requireWritableContext, stillJudged, type ContextReads, type FhirDeps, type FhirRequest, type PutOptions } from './crud.ts';
import { securityContextTarget } from './binary.ts';
import { findResources, lookups } from './core-search.ts';
import { operationOutcome, unchangedOutcome } from './outcome.ts';
import { matchConditions, type MatchContext } from './search-match.ts';
import { criteriaOf } from './search.ts';
import type { WrittenResource } from './referential-integrity.ts';
import { isAbsoluteReference, isIdentity, isUrnReference, parseReference, pathTo, replaceLinks, walkReferences } from './references.ts';
import { NoneMatchFailed, parseIfMatch, parseIfNoneMatch, requireIfMatch, VersionConflict, type IfMatch } from './if-match.ts';
import { patchCurrent, patchRace, type Patched } from './patch.ts';
import { newId, type Resource } from './resource.ts';
import { invalidResource, validationErrors } from './validation/check.ts';
import { readsProfiles } from './validation/profile/profile-check.ts';
import { typeModel } from './validation/model.ts';
import { pacedTurns } from './turns.ts';
import type { HeldSearches } from './bundle-held-searches.ts';
import type { ValidationIssue, ValidationLevel } from './validation/validate.ts';

export type Json = Record<string, unknown>;

/** An entry with its target resolved. */
export interface Planned {
  entry: Entry;
  /** Resolved target id (new for POST). */
  id?: string;
  /** POST matched by ifNoneExist: nothing is written. */
  existing?: ResourceVersion;
  /**
   * `existing` is a stored version (storedMatch), which the Bundle's references to the entry were pointed at:
   * it must still be current when the Bundle commits (requireExistingCurrent), as a conditional update holds to its match.
   */
  holdsExisting?: boolean;
  /** The resource its condition found (its id), as the plan resolved it: by a search, or as settleLinkedConditions forced it. */
  found?: string;
  /** PATCH: the patch applied to the current version, written in its place. */
  patched?: Patched;
  /** A conditional POST or PUT whose condition matched nothing: the condition (conditionKey) its write settles. */
  settles?: string;
  /** With `settles`: the condition (its fullUrls replaced by ids) and its criteria, which the resource it creates must meet (requireFoundByCondition). */
  creates?: { condition: string; criteria: Condition[] };
  /** A conditional PUT that matched nothing, with an id in its body: it may only create (PutOptions.createOnly). */
  createOnly?: boolean;
  /** A conditional PATCH that matched no stored resource: its condition and criteria, for plan to judge against the earlier entries (unmatchedPatch). */
  unmatched?: { condition: string; criteria: Condition[] };
  /** Another entry of the same condition writes the resource, and this one writes nothing (sharedWrites). */
  follows?: Planned;
  /** A conditional PUT or DELETE that matched a resource: the version it matched, which its write holds to (heldToMatch). */
  matched?: ResourceVersion;
  /** A PUT or DELETE whose reach requireStoredInReach judged on the stored version: that version (0: none), which its write holds to (requireJudgedEntries). */
  judged?: number;
}

/** The conditions the planned entries' writes settle (Settle), for their transaction to claim first. */
export function settledConditions(planned: Planned[]): string[] {
  return planned.flatMap((p) => (p.settles === undefined ? [] : [p.settles]));
}

/**
 * The entries for each attempt of a conditional write (exclusively): rewriteReferences writes the
 * references of the entries' resources in place, so an attempt after the first starts from copies of
 * the resources as they came. `conditional`: the Bundle may run again (its conditional entries and
 * references are searched again at its commit, or its reach is judged on what is stored).
 */
export function entriesPerAttempt(entries: Entry[], conditional: boolean): (attempt: number) => Entry[] {
  // A PATCH entry's race runs the Bundle again too (writePatched), and so does a judged reach's (requireJudgedEntries: `conditional`).
  if (!conditional && !entries.some((e) => e.method === 'PATCH')) return () => entries;
  const pristine = entries.map((e) => (e.resource ? cloneExact(e.resource) : undefined));
  return (attempt) => (attempt === 1 ? entries : entries.map((e, i) => (e.resource ? { ...e, resource: cloneExact(pristine[i]!) } : e)));
}

const at = entryPath;

/**
 * Whether an entry's resource holds a conditional reference (`Type?query`, or one under a base): its searches are
 * held to its commit (HeldSearches), so the Bundle may run again (entriesPerAttempt).
 */
export function hasConditionalReferences(entries: Entry[]): boolean {
  let found = false;
  for (const e of entries) {
    if (e.resource) walkReferences(e.resource, (holder) => (found ||= holder.reference.includes('?')));
    if (found) return true;
  }
  return false;
}

/**
 * An entry's target: its id (`id`, known before: a create's new one, the URL's), or what its condition
 * `query` (with the entries' fullUrls replaced by their ids: bundle-match-urls.ts) matches.
 */
async function resolveTarget(
  deps: FhirDeps, req: FhirRequest, entry: Entry, query: URLSearchParams | undefined, id: string | undefined, deleted: ReadonlySet<string>, held: HeldSearches | undefined,
  answers: ConditionAnswers | undefined, forced?: ResourceVersion | null,
): Promise<Planned> {
  const p: Planned = { entry };
  // A conditional create is a create, whether or not a resource matches (as in REST).
  if (entry.method === 'POST') requireAccess(req.access, entry.type, 'c');
  if (!entry.condition || !query) {
    if (id !== undefined) p.id = id;
    return p;
  }
  // A conditional create runs after the transaction's deletes (http.html 3.1.0.11.2): what they delete
  // matches nothing. The targets of updates and patches, matched by content, are left to checkTargets.
  // `forced`: its answer in the state the earlier steps leave, where its chain or `_has` reads their writes (settleLinkedConditions).
  const match = forced !== undefined ? (forced ?? undefined) : await resolveCondition(deps, req, entry.type, query, at(entry), entry.method === 'POST' ? deleted : undefined, held, conditionElement(entry), answers);
  if (match) p.found = match.id;
  if (!match && (entry.method === 'POST' || entry.method === 'PUT')) {
    p.settles = conditionKey(entry.type, entry.condition);
    p.creates = { condition: showCondition(entry.type, query), criteria: await criteriaOf(deps, req, entry.type, query, deps.clock.now()) };
  }
  if (entry.method === 'POST') {
    if (match) p.existing = match;
    if (match && (await storedMatch(deps, req, entry.type, match))) p.holdsExisting = true;
    p.id = match?.id ?? newId();
  } else if (entry.method === 'PUT') {
    const bodyId = entry.resource!.id;
    if (match && bodyId !== undefined && bodyId !== match.id) {
      throw new FhirError('invalid', `${at(entry)}: resource id '${bodyId}' differs from the id '${match.id}' the condition matched`, { expression: [`${at(entry)}.resource.id`] });
    }
    p.id = match?.id ?? bodyId ?? newId();
    if (match && (await storedMatch(deps, req, entry.type, match))) p.matched = match;
    if (!match && bodyId !== undefined) p.createOnly = true;
  } else if (match) {
    p.id = match.id;
    if (entry.method === 'DELETE' && (await storedMatch(deps, req, entry.type, match))) p.matched = match;
  } else if (entry.method === 'PATCH') {
    p.unmatched = { condition: showCondition(entry.type, query), criteria: await criteriaOf(deps, req, entry.type, query, deps.clock.now()) };
  }
  return p;
}

/**
 * An entry's `request.ifMatch`, the value of an If-Match header (bundle.html: "Only perform the operation
 * if the Etag value matches"; http.html "Managing Resource Contention"): `*` or entity tags, as in REST.
 */
function entryIfMatch(entry: Entry): IfMatch | undefined {
  return entry.ifMatch ? parseIfMatch(entry.ifMatch, `${at(entry)}: ifMatch`, `${at(entry)}.request.ifMatch`) : undefined;
}

/** A PUT, PATCH or DELETE entry's `request.ifNoneMatch`, the value of an If-None-Match header: `*` or entity tags, as in REST. */
function entryIfNoneMatch(entry: Entry): IfMatch | undefined {
  return entry.ifNoneMatch ? parseIfNoneMatch(entry.ifNoneMatch, `${at(entry)}: ifNoneMatch`, `${at(entry)}.request.ifNoneMatch`) : undefined;
}

/**
 * Resolves an entry's target; a PUT or DELETE may not reach outside the token's compartment or scope filters (requireStoredInReach).
 * A transaction's condition searches are recorded in `held`, to be searched again at its commit.
 */
async function target(
  deps: FhirDeps, req: FhirRequest, entry: Entry, query: URLSearchParams | undefined, id: string | undefined, deleted: ReadonlySet<string>, held: HeldSearches | undefined,
  answers?: ConditionAnswers, forced?: ResourceVersion | null,
): Promise<Planned> {
  try {
    const p = await resolveTarget(deps, req, entry, query, id, deleted, held, answers, forced);
    if (p.id && (entry.method === 'PUT' || entry.method === 'DELETE')) {
      const judged = await requireStoredInReach(deps, req, entry.type, p.id, entry.method === 'PUT' ? 'u' : 'd');
      if (judged !== undefined) p.judged = judged;
    }
    if (p.id && entry.method === 'PATCH') p.patched = await patchCurrent(deps, req, entry.type, p.id, entry.patch!, entryIfMatch(entry), at(entry), entryIfNoneMatch(entry));
    return p;
  } catch (err) {
    // A problem of its condition's parameters is that of the element holding them.
    throw err instanceof FhirError ? entryError(err, entry, undefined, entry.condition ? conditionElement(entry) : at(entry)) : err;
  }
}

/**
 * In the write's transaction, before its writes: each PUT or DELETE entry whose reach was judged on the stored
 * version (Planned.judged) still finds that version; one another request created or changed meanwhile (out of the
 * token's compartment or filter, maybe) makes the Bundle run again from its planning (ConditionRaced: exclusively),
 * where it is judged again.
 */
export async function requireJudgedEntries(w: ResourceWriter, planned: Planned[]): Promise<void> {
  for (const p of planned) if (p.judged !== undefined && !(await stillJudged(w, p.entry.type, p.id!, p.judged))) throw new ConditionRaced();
}

/**
 * Whether a Bundle's PUT or DELETE entries are judged on what is stored (reachJudged): its planning may run again
 * (requireJudgedEntries), from copies of its resources as they came (entriesPerAttempt).
 */
export function judgesReach(req: FhirRequest, entries: Entry[]): boolean {
  return entries.some((e) => (e.method === 'PUT' || e.method === 'DELETE') && reachJudged(req.access, e.type, e.method === 'PUT' ? 'u' : 'd'));
}

/**
 * After references are rewritten: each written resource must be within the request's reach (a Binary's securityContext).
 * A context another entry writes (a Binary filed under the DocumentReference the same transaction creates, by its
 * fullUrl: the way a patient's app uploads a document) is judged as that entry writes it, which is itself held to the
 * token's compartment and filters when written; read from the store, it did not exist yet and every such upload was 403.
 */
export async function requireEntriesInReach(deps: FhirDeps, req: FhirRequest, planned: Planned[]): Promise<void> {
  const pace = pacedTurns();
  const base = deps.fhirBase?.(req.tenant);
  let written: Map<string, Resource> | undefined;
  for (const p of planned) {
    const r = writtenBy(p);
    if (r) {
      const target = r.resourceType === 'Binary' ? securityContextTarget(r, base) : undefined;
      written ??= target ? entryWrites(planned) : undefined;
      const entry = target ? written?.get(`${target.type}/${target.id}`) : undefined;
      const via = entry && entry !== r ? entryContextReads(deps, req, entry) : undefined;
      try {
        await requireWritableContext(deps, req, r, p.entry.method === 'POST' ? 'c' : 'u', via);
      } catch (err) {
        // Placed in its entry, as the entry's other refusals are (Bundle.entry[n].resource.securityContext).
        throw err instanceof FhirError ? entryError(err, p.entry, `${at(p.entry)}.resource`) : err;
      }
    }
    await pace();
  }
}

/** The resources a Bundle's entries write, by `Type/id`. */
function entryWrites(planned: Planned[]): Map<string, Resource> {
  const out = new Map<string, Resource>();
  for (const p of planned) {
    const r = writtenBy(p);
    if (r && p.id !== undefined) out.set(`${p.entry.type}/${p.id}`, r);
  }
  return out;
}

/** Reads of a securityContext that is `entry`, as another entry of the Bundle writes it (its compartment and filters). */
function entryContextReads(deps: FhirDeps, req: FhirRequest, entry: Resource): ContextReads {
  const now = deps.clock.now();
  return { read: async () => ({ versionId: 1, lastUpdated: now, deleted: false, content: JSON.stringify(entry) }), lookups: lookups(deps, req.tenant) };
}

/**
 * Resolves every entry's target and maps each fullUrl to `Type/id` (FHIR R4 http 3.1.0.11.2). Entries
 * of one condition share one write (sharedWrites): those that follow another are planned after it, and
 * their fullUrls map to its resource. A condition naming entries' fullUrls is searched with their ids
 * (withEntryIds, `known` answering those outside the Bundle): the ids of creates and of updates, patches
 * and deletes by id are known first; a condition naming a conditional entry's fullUrl is searched once
 * that entry's own condition is resolved, and one in a cycle of such is a 400. A transaction's condition
 * searches are recorded in `held`, to be searched again at its commit. `forced`: by entry index, the answers of
 * conditions whose chain or `_has` reads what earlier steps write, as settleLinkedConditions found them.
 */
export async function plan(
  deps: FhirDeps, req: FhirRequest, entries: Entry[], base: string, known?: (url: string) => string | undefined, held?: HeldSearches,
  forced?: ReadonlyMap<number, ResourceVersion | null>,
): Promise<{ planned: Planned[]; ids: Map<string, string> }> {
  const leaders = sharedWrites(entries);
  const byEntry = new Map<Entry, Planned>();
  const preset = new Map(entries.flatMap((e) => (e.condition || e.method === 'GET' ? [] : [[e, e.id ?? newId()] as const])));
  // fullUrl -> Type/id as the entries are resolved; those of conditional entries are awaited.
  const resolved = new Map<string, string>();
  const names = (e: Entry) => e.fullUrl !== undefined && e.method !== 'DELETE' && e.method !== 'GET';
  for (const [e, id] of preset) if (names(e) && !resolved.has(e.fullUrl!)) resolved.set(e.fullUrl!, `${e.type}/${id}`);
  const awaited = new Set(entries.filter((e) => e.condition && names(e)).map((e) => e.fullUrl!));
  const lookup = (item: string) => resolved.get(item) ?? resolved.get(`${base}/${item}`) ?? known?.(item);
  const waiting = (item: string) => (awaited.has(item) || awaited.has(`${base}/${item}`)) && lookup(item) === undefined;
  const followers = new Map<Entry, Entry[]>();
  for (const [f, l] of leaders) followers.set(l, [...(followers.get(l) ?? []), f]);
  const created = new CreatedByEntries(lookups(deps, req.tenant), (q) => findResources(deps, req.tenant, q), lookup, waiting, () => deps.clock.now());
  const conditionallyCreates = entries.some((e) => e.condition !== undefined && e.method !== 'DELETE');
  // Deletes first, as a transaction processes them (http.html 3.1.0.11.2): conditional creates do not find what they delete (`deleted`, of the type's ids).
  let left = [...entries.filter((e) => e.method === 'DELETE'), ...entries.filter((e) => e.method !== 'DELETE' && !leaders.has(e))];
  const deleted = new Map<string, Set<string>>();
  const deletes = (e: Entry, id: string | undefined) => id !== undefined && e.method === 'DELETE' && deleted.set(e.type, (deleted.get(e.type) ?? new Set()).add(id));
  for (const [e, id] of preset) deletes(e, id);
  // Entry by entry, letting other requests run every few ms (most entries' targets need no query: a loop of settled awaits).
  const pace = pacedTurns();
  // A transaction's conditions are searched ahead, those of one shape together (bundle-condition-answers.ts).
  const answers = held === undefined ? undefined : new GroupedConditionAnswers(deps, req);
  const aheadOf = new Set<Entry>();
  while (left.length > 0) {
    const later: Entry[] = [];
    for (const [i, entry] of left.entries()) {
      await pace();
      const query = entry.condition && withEntryIds(entry.condition, lookup, waiting);
      if (entry.condition && !query) {
        later.push(entry);
        continue;
      }
      if (answers !== undefined && query && !aheadOf.has(entry)) {
        await answers.ahead(searchesAhead(left.slice(i), aheadOf, (e) => e.condition && withEntryIds(e.condition, lookup, waiting), (e) => deleted.get(e.type)));
      }
      const found = await target(deps, req, entry, query, preset.get(entry), deleted.get(entry.type) ?? new Set(), held, answers, forced?.get(entry.index));
      if (found.unmatched) await unmatchedPatch(deps, found, created);
      const p = found.creates ? await createdByEarlier(deps, found, created) : found;
      byEntry.set(entry, p);
      // Only a conditional create, update or patch looks for them (createdByEarlier, unmatchedPatch): a Bundle without one notes none.
      if (conditionallyCreates) created.note(p);
      if (entry.condition) deletes(entry, p.id);
      for (const e of [entry, ...(followers.get(entry) ?? [])]) {
        if (p.id && names(e) && !resolved.has(e.fullUrl!)) resolved.set(e.fullUrl!, `${e.type}/${p.id}`);
      }
    }
    if (later.length === left.length) {
      const entry = later[0]!;
      throw new FhirError('invalid', `${at(entry)}: its condition names the fullUrl of an entry whose own condition waits for this one's: the ids they name cannot be resolved`, {
        expression: [conditionElement(entry)],
      });
    }
    left = later;
  }
  for (const [entry, leader] of leaders) {
    const l = byEntry.get(leader)!;
    byEntry.set(entry, follow(entry, l.follows ?? l));
  }
  const ids = new Map<string, string>();
  const planned = entries.map((entry) => {
    const p = byEntry.get(entry)!;
    if (entry.fullUrl && p.id && entry.method !== 'DELETE' && entry.method !== 'GET') {
      if (ids.has(entry.fullUrl)) throw new FhirError('invalid', `${at(entry)}: fullUrl '${entry.fullUrl}' is used twice`, { expression: [`${at(entry)}.fullUrl`] });
      ids.set(entry.fullUrl, `${entry.type}/${p.id}`);
    }
    return p;
  });
  return { planned, ids };
}

/**
 * The condition searches of the entries from `entries[0]` on, up to the first that is not a DELETE if it is one (a
 * transaction's deletes are planned first, and the creates' searches leave their matches out), whose conditions are
 * known now (`query`: none while one names a fullUrl not resolved yet), as searchBeside will run them with the ids
 * `deleted` gives now (a search whose count differs by then is searched alone), each entry noted in `seen`.
 */
function searchesAhead(
  entries: Entry[], seen: Set<Entry>, query: (e: Entry) => URLSearchParams | undefined, deleted: (e: Entry) => ReadonlySet<string> | undefined,
): AheadSearch[] {
  const deletes = entries[0]!.method === 'DELETE';
  const out: AheadSearch[] = [];
  for (const e of entries) {
    if (deletes && e.method !== 'DELETE') break;
    const q = e.condition && e.method !== 'GET' && !seen.has(e) ? query(e) : undefined;
    if (q === undefined) continue;
    seen.add(e);
    const excluded = e.method === 'POST' ? deleted(e) ?? new Set<string>() : new Set<string>();
    try {
      out.push({ type: e.type, params: conditionParams(e.type, q, at(e), besideCount(2, excluded)) });
    } catch {
      // Refused as its entry is planned.
    }
  }
  return out;
}

/**
 * The resources the entries planned so far create (a POST, or a conditional PUT that matched nothing), each as the
 * Bundle will write it: its id, and its references to fullUrls read as the ids they are given. Held with their
 * index rows and token lists (WrittenResources), so that each condition is matched against the few its conditions
 * admit, not against every earlier entry. One referring to the fullUrl of a conditional entry not planned yet (whose
 * id is not known) is held back until that entry is planned: matched with the fullUrl, it was met by no condition
 * naming that entry (its fullUrl read as the id), and a second resource was created where the Bundle sent again
 * found two (412).
 */
class CreatedByEntries {
  private readonly written: WrittenResources;
  private readonly planned = new Map<TransactionWrite, Planned>();
  /** By the fullUrl of a conditional entry not planned yet: the creates referring to it, noted once it is. */
  private readonly held = new Map<string, Planned[]>();

  constructor(
    ctx: MatchContext, find: (query: SearchQuery) => Promise<ResourceVersion[]>,
    private readonly lookup: (item: string) => string | undefined,
    private readonly waiting: (item: string) => boolean,
    /** The clock the written resources' lastUpdated is read from. */
    private readonly now: () => number,
  ) {
    // A chain or `_has` of a condition matched against these reads the store and these alike: `subject:Patient.
    // identifier=x` missed the Observation an earlier entry writes of the Patient another creates, and the Bundle
    // created a second Observation where the same requests one by one find the first.
    const within: MatchContext = { ...ctx, exists: async (q) => (await ctx.exists(q)) || (await this.anyMeets(q)) };
    this.written = new WrittenResources([], within, find);
  }

  /** Whether one of the resources noted so far meets `query` (its type and conditions). */
  private async anyMeets(query: SearchQuery): Promise<boolean> {
    const where = query.where ?? [];
    for (const w of await this.written.candidates(query.type, where)) {
      if (await matchConditions(w.resource!, this.now(), where, this.written.ctx, this.written.rows(w))) return true;
    }
    return false;
  }

  note(p: Planned): void {
    const { entry } = p;
    // A PUT by id writes its content whether or not the resource exists: a conditional create after it that its
    // content meets finds it, as the same requests sent one by one do (it created a second resource meeting it).
    const creates = p.id !== undefined && p.follows === undefined && entry.resource !== undefined &&
      (entry.method === 'POST' ? p.existing === undefined : entry.method === 'PUT' && (p.settles !== undefined || entry.condition === undefined));
    if (creates) this.add(p);
  }

  private add(p: Planned): void {
    const { entry } = p;
    const awaited = this.awaitedBy(entry.resource!);
    if (awaited !== undefined) {
      this.held.set(awaited, [...(this.held.get(awaited) ?? []), p]);
      return;
    }
    const resource = structuredClone({ ...entry.resource!, id: p.id }) as Resource;
    walkReferences(resource, (holder) => {
      const id = this.lookup(holder.reference);
      if (id !== undefined) holder.reference = id;
    });
    const w: TransactionWrite = { type: entry.type, id: p.id!, resource, stored: false };
    this.written.add(w);
    this.planned.set(w, p);
  }

  /** The first fullUrl `resource` refers to whose entry is not planned yet, if any. */
  private awaitedBy(resource: Resource): string | undefined {
    let awaited: string | undefined;
    walkReferences(resource, (holder) => {
      if (awaited === undefined && this.waiting(holder.reference)) awaited = holder.reference;
    });
    return awaited;
  }

  /** Notes the creates held back for entries planned since. */
  private release(): void {
    for (const [fullUrl, ps] of this.held) {
      if (this.waiting(fullUrl)) continue;
      this.held.delete(fullUrl);
      for (const p of ps) this.add(p);
    }
  }

  /** The entries whose resources meet `criteria`. */
  async meeting(type: string, criteria: Condition[], now: number): Promise<Planned[]> {
    this.release();
    const out: Planned[] = [];
    for (const w of await this.written.candidates(type, criteria)) {
      if (await matchConditions(w.resource!, now, criteria, this.written.ctx, this.written.rows(w))) out.push(this.planned.get(w)!);
    }
    return out;
  }
}

/**
 * A conditional POST or PUT `p` that matched no stored resource, as the transaction processes it after the entries
 * planned before it (http.html 3.1.0.11.2: in order, so its search finds what they created): when the resource an
 * earlier entry creates meets its condition, it follows that entry (`follow`: a POST finds it, 200; a PUT must carry
 * its content) instead of creating another, as the same requests sent one by one would. sharedWrites joins only
 * conditions written alike; this finds `identifier=a` and `identifier=urn:s|a`, a condition on another of the
 * resource's identifiers, or a plain POST before it. Two such resources are a 412, as two stored matches are.
 */
async function createdByEarlier(deps: FhirDeps, p: Planned, created: CreatedByEntries): Promise<Planned> {
  const { entry } = p;
  const matches = await created.meeting(entry.type, p.creates!.criteria, deps.clock.now());
  if (matches.length === 0) return p;
  if (matches.length > 1) {
    throw new FhirError('precondition', `${at(entry)}: condition '${p.creates!.condition}' matches the resources of more than one entry the transaction creates`, { expression: [conditionElement(entry)] });
  }
  return follow(entry, matches[0]!);
}

/**
 * A conditional PATCH `p` that matched no stored resource: a 404, unless the resource an entry planned before it writes
 * meets its condition (processed after the Bundle's POSTs and in order, its search finds what they create, as a
 * conditional PUT's does), which is two entries changing one resource (http.html 3.1.0.11.2): a 400, as for a PUT.
 */
async function unmatchedPatch(deps: FhirDeps, p: Planned, created: CreatedByEntries): Promise<never> {
  const { entry } = p;
  const { condition, criteria } = p.unmatched!;
  const earlier = await created.meeting(entry.type, criteria, deps.clock.now());
  if (earlier.length > 0) {
    throw new FhirError('invalid', `${at(entry)}: conditional patch '${condition}' matches the resource ${at(earlier[0]!.entry)} writes: two entries may not change one resource`, {
      expression: [conditionElement(entry)],
    });
  }
  throw new FhirError('not-found', `${at(entry)}: conditional patch '${condition}' matches no resource`, { expression: [conditionElement(entry)] });
}

/**
 * fullUrls known outside the Bundle: `cinder import` resolves references across the Bundles of one run.
 * `get` answers references that match no entry; `written` is told `Type/id` of every entry committed.
 */
export interface FullUrlScope {
  get(fullUrl: string): string | undefined;
  written(fullUrl: string, reference: string): void;
}

/** Where an unresolved `urn:` reference was looked for, for the error message. */
export function unmatchedUrn(scope: FullUrlScope | undefined): string {
  return scope ? 'matches no fullUrl in the Bundle or of an entry written by this import' : 'matches no fullUrl in the Bundle';
}

/**
 * Rewrites the references of the entries' resources to other entries' fullUrls (FHIR R4 http
 * 3.1.0.11.2): `urn:uuid:` / `urn:oid:` ones (with a scope, also to what it knows), and relative ones,
 * which name the entry whose fullUrl they resolve to against their own entry's fullUrl (or, for a
 * `urn:` or no fullUrl, the FHIR base `base`: bundle.html, "Resolving references in Bundles"); then the
 * same fullUrls in uri, url, oid and uuid elements and in narrative links (replaceLinks), but for identities
 * (a canonical resource's `url`, a Coding's system, ...) and a fullUrl that is its entry's canonical URL. Then resolves
 * conditional references, against the store and the resources the entries write (bundle-conditional.ts).
 * A version-specific reference to a fullUrl names the version the transaction leaves its entry's resource
 * at (bundle-versions.ts); those to updates and patches are returned, to be settled in the store transaction.
 * A transaction's conditional reference searches are recorded in `held`, to be searched again at its commit.
 */
export async function rewriteReferences(
  deps: FhirDeps, req: FhirRequest, planned: Planned[], ids: Map<string, string>, base: string, scope?: FullUrlScope, held?: HeldSearches,
): Promise<PendingVersion[]> {
  const known = (url: string) => ids.get(url) ?? scope?.get(url);
  // A fullUrl that is its entry's canonical URL (`url`) names the canonical resource wherever a uri element
  // holds it (a ConceptMap's sourceUri, an ElementDefinition's fixedUri): references to it are rewritten, links not.
  const identities = canonicalFullUrls(planned);
  const linked = (url: string) => (identities.has(url) ? undefined : known(url));
  const conditional: ConditionalReference[] = [];
  const pending: PendingVersion[] = [];
  const owners = new Map(planned.flatMap((p) => (p.entry.fullUrl && ids.has(p.entry.fullUrl) ? [[p.entry.fullUrl, p.follows ?? p] as const] : [])));
  const pace = pacedTurns();
  for (const p of planned) {
    await pace();
    const r = writtenBy(p);
    if (!r) continue;
    const against = entryBase(p.entry.fullUrl) ?? base;
    // The fullUrl a reference names: itself, or a relative one resolved against its entry's fullUrl.
    const fullUrlOf = (ref: string) => (ids.has(ref) ? ref : !isAbsoluteReference(ref) && parseReference(ref) && ids.has(`${against}/${ref}`) ? `${against}/${ref}` : undefined);
    // `{fullUrl}/_history/{vid}`: the entry's resource at the version the transaction leaves it, unless
    // the fullUrl is this server's URL of that resource, whose versions the reference names as they are.
    const versioned = (holder: { reference: string }) => {
      const split = splitVersion(holder.reference);
      const fullUrl = split && fullUrlOf(split.url);
      if (!split || !fullUrl) return undefined;
      const target = ids.get(fullUrl)!;
      if (fullUrl === `${base}/${target}`) return `${target}/_history/${split.version}`;
      const owner = owners.get(fullUrl)!;
      const version = versionBeforeWrite(owner);
      if (version === undefined) pending.push({ holder, target: owner, in: p, reference: target });
      return `${target}/_history/${version ?? split.version}`;
    };
    // A reference's element, for errors: within the entry's resource (a PATCH entry writes another).
    const element = (holder: object) => (p.patched ? at(p.entry) : [`${at(p.entry)}.resource`, pathTo(r, holder)].filter(Boolean).join('.'));
    walkReferences(r, (holder) => {
      const ref = holder.reference;
      const mapped = known(ref) ?? (ids.size > 0 && !isAbsoluteReference(ref) && parseReference(ref) ? ids.get(`${against}/${ref}`) : undefined) ?? (ids.size > 0 ? versioned(holder) : undefined);
      if (mapped) holder.reference = mapped;
      else if (isUrnReference(ref)) {
        throw new FhirError('invalid', `${at(p.entry)}: reference '${ref}' ${unmatchedUrn(scope)}`, { expression: [element(holder)] });
      } else {
        // `Type?query`, or under this server's FHIR base (`{base}/Type?query`, as If-None-Exist takes it): searched here.
        const relative = ref.startsWith(`${base}/`) ? ref.slice(base.length + 1) : ref;
        if (/^[A-Z][A-Za-z]+\?/.test(relative)) {
          holder.reference = relative;
          conditional.push({ holder, where: at(p.entry), element: () => element(holder) });
        }
      }
    });
    if (ids.size > 0 || scope) replaceLinks(r, linked);
  }
  // Once every other reference is rewritten, so that the entries' resources are matched as they will be written.
  if (conditional.length > 0) {
    // A fullUrl in a conditional reference's values (`Observation?subject=urn:uuid:X`) is searched as its entry's `Type/id`.
    const lookup = (item: string) => known(item) ?? ids.get(`${base}/${item}`);
    // A transaction's read ahead, those of one type and shape together, as its conditional entries' are.
    const answers = held === undefined ? undefined : new GroupedConditionAnswers(deps, req);
    await resolveConditionalReferences(deps, req, conditional, transactionWrites(planned), lookup, held, answers);
  }
  return pending;
}

/** The fullUrls that equal the canonical URL (`url`) of their entry's canonical resource, as IG and terminology Bundles write them. */
function canonicalFullUrls(planned: Planned[]): Set<string> {
  const found = new Set<string>();
  for (const p of planned) {
    const fullUrl = p.entry.fullUrl;
    const r = p.patched?.resource ?? p.entry.resource;
    if (fullUrl === undefined || r === undefined || (r as Json).url !== fullUrl) continue;
    const model = typeModel(r.resourceType);
    if (model && isIdentity(model, 'url')) found.add(fullUrl);
  }
  return found;
}

/** What the planned entries write or delete, for conditional references to match. */
export function transactionWrites(planned: Planned[]): TransactionWrite[] {
  return planned.flatMap((p) => {
    if (p.id === undefined || p.existing || p.follows || p.entry.method === 'GET') return [];
    const resource = writtenBy(p);
    return [{ type: p.entry.type, id: p.id, ...(resource ? { resource } : {}), stored: p.entry.method !== 'POST' }];
  });
}

/** The base an absolute `{base}/Type/id` fullUrl's relative references resolve against; undefined for a `urn:` or none. */
function entryBase(fullUrl: string | undefined): string | undefined {
  if (fullUrl === undefined || !/^https?:\/\//.test(fullUrl)) return undefined;
  const m = /^(.*)\/[A-Z][A-Za-z]+\/[A-Za-z0-9\-.]{1,64}$/.exec(fullUrl);
  return m?.[1];
}

/**
 * The resource an entry writes: its own (POST, PUT) or its patch's result (PATCH); none for a
 * conditional create that found its resource or an entry that follows another (sharedWrites).
 */
export function writtenBy(p: Planned): Resource | undefined {
  return p.existing || p.follows ? undefined : (p.patched?.resource ?? p.entry.resource);
}

/** The resources the entries write (POST and PUT not settled by ifNoneExist, PATCH results), where they sit in the Bundle. */
export function entryResources(planned: Planned[]): WrittenResource[] {
  return planned.flatMap((p) => {
    const r = writtenBy(p);
    return r ? [{ resource: r, path: p.patched ? r.resourceType : `${at(p.entry)}.resource` }] : [];
  });
}

/**
 * The results of PATCH entries must be valid: 422 for the first that is not, naming its entry, unless it is the
 * current version again (RefusedNoOps).
 */
export async function requireValidPatched(planned: Planned[], level: ValidationLevel, noOps: RefusedNoOps): Promise<void> {
  for (const p of planned) {
    if (!p.patched) continue;
    const errors = patchedIssues(p, validationErrors(p.patched.resource, level));
    if (errors.length === 0) continue;
    const refusal = invalidResource(errors, `${at(p.entry)}: the patched ${p.entry.type}`);
    if (!(await noOps.excuse(p, refusal))) throw refusal;
  }
}

/**
 * A batch's PATCH entry's result against the profiles it claims, its extensions' definitions and its Questionnaire
 * (at `strict`): a 422 whose issues name the entry (patchedIssues), as requireValidPatched's and a transaction's do.
 */
export async function requireProfiledPatched(deps: FhirDeps, req: FhirRequest, p: Planned): Promise<void> {
  if (!p.patched || validationLevel(deps) !== 'strict') return;
  const resource = p.patched.resource as Json;
  const issues = patchedIssues(p, [
    ...((await deps.profiles?.writeIssues(req.tenant, resource, undefined, true, undefined, undefined, readsProfiles(req.access))) ?? []),
    ...((await deps.questionnaires?.issues(req.tenant, resource, { warnings: false, access: req.access })) ?? []),
  ]);
  if (issues.length > 0) throw invalidResource(issues, `${at(p.entry)}: the patched ${p.entry.type}`);
}

/**
 * The issues of a PATCH entry's result: located in the patched resource (`Patient.gender`), which is in no entry,
 * their text naming the entry (`Bundle.entry[2]: ...`), as a transaction's other refusals are named.
 */
export function patchedIssues(p: Planned, issues: ValidationIssue[]): ValidationIssue[] {
  return issues.map((i) => ({ ...i, text: `${at(p.entry)}: ${i.text}` }));
}

/**
 * The entries validation refused that are updates changing nothing (crud.ts refusedNoOp): a PUT (a conditional
 * one that matched among them) or a PATCH whose resource is the current version again is let through as the no-op
 * it is, as a REST update is, its write refused as it was should it find that it writes (PutOptions.unvalidated).
 */
export class RefusedNoOps {
  private readonly refusals = new Map<Planned, FhirError>();
  private readonly byEntry: Map<Entry, Planned>;

  constructor(private readonly deps: FhirDeps, private readonly req: FhirRequest, planned: Planned[]) {
    this.byEntry = new Map(planned.map((p) => [p.entry, p]));
  }

  /** Whether the write of `of` (a planned entry, or an entry), refused by `refusal`, changes nothing: it is let through then. */
  async excuse(of: Planned | Entry, refusal: FhirError): Promise<boolean> {
    const p = 'entry' in of ? of : this.byEntry.get(of);
    if (p === undefined) return false;
    const earlier = this.refusals.get(p);
    if (earlier !== undefined) {
      // Its profiles' refusal after its base validation's: one refusal listing both.
      this.refusals.set(p, new FhirError(earlier.category, earlier.message, { outcome: [...earlier.issues, ...refusal.issues] }));
      return true;
    }
    const resource = updateWritten(p);
    if (resource === undefined || !(await refusedNoOp(this.deps, this.req, resource, p.id!))) return false;
    this.refusals.set(p, refusal);
    return true;
  }

  /** The options of `p`'s write: those given, or with the refusal it was let through despite. */
  options(p: Planned, opts: PutOptions): PutOptions {
    const refusal = this.refusals.get(p);
    return refusal === undefined ? opts : { ...opts, unvalidated: refusal };
  }
}

/** What an update entry (a PUT, not a create-only one, or a PATCH) writes over a resource that may exist; else undefined. */
function updateWritten(p: Planned): Resource | undefined {
  if (p.id === undefined || p.existing || p.follows || p.createOnly) return undefined;
  if (p.patched) return p.patched.resource;
  return p.entry.method === 'PUT' ? (p.entry.resource as Resource | undefined) : undefined;
}

/** A response entry: status, and location/etag/lastModified of a version. */
export function responseEntry(status: string, v?: ResourceVersion, base?: string): Json {
  const response: Json = { status };
  if (v && base) {
    response.location = `${base}/${v.type}/${v.id}/_history/${v.versionId}`;
    response.etag = etag(v.versionId);
    response.lastModified = new Date(v.lastUpdated).toISOString();
  }
  return { response };
}

/**
 * The response entry of a write that changed nothing (an update, or a patch, whose result is the
 * current version): 200 with the current version's location, etag and lastModified, and an
 * informational outcome saying that no version was added (with, as warnings, what validation refused in it: refused).
 */
function unchangedEntry(v: ResourceVersion, base: string, refused?: FhirIssue[]): Json {
  const entry = responseEntry('200 OK', v, base);
  (entry.response as Json).outcome = unchangedOutcome(v.type, v.id, v.versionId, refused);
  return entry;
}

/**
 * Whether a write entry's response (as processBundle answers it, before `Prefer: return`) is one of a
 * write that changed nothing: the only successful write entries that carry an informational outcome
 * (unchangedEntry; an entry sharing such a write repeats it, having written nothing either).
 */
export function isUnchangedEntry(entry: Json): boolean {
  const response = entry.response as { status?: string; outcome?: { issue?: { severity?: string }[] } } | undefined;
  return response?.status?.startsWith('2') === true && response.outcome?.issue?.[0]?.severity === 'information';
}

/** A response entry for a failed entry: its status with the reason phrase (`422 Unprocessable Entity`), as successes have theirs. */
export function errorEntry(err: FhirError): Json {
  const status = `${err.status} ${STATUS_CODES[err.status] ?? ''}`.trim();
  // A read of a deletion tells its version, as the REST read's 410 does in its headers.
  const deletion = deletionRead(err);
  const version = deletion === undefined ? {} : { etag: `W/"${deletion.versionId}"`, lastModified: new Date(deletion.lastUpdated).toISOString() };
  return { response: { status, ...version, outcome: operationOutcome(err.issues) } };
}

/** The response of an entry that follows another's write (sharedWrites): as a conditional create that finds a match, 200 and the resource. */
export function followerEntry(leader: Json): Json {
  return { ...leader, response: { ...(leader.response as Json), status: '200 OK' } };
}

/** Performs a POST, PUT, PATCH or DELETE entry inside the open store transaction; its errors name the entry. */
export async function writeEntry(w: ResourceWriter, p: Planned, opts: PutOptions, base: string): Promise<Json> {
  let written: Json;
  try {
    written = await writeOne(w, p, opts, base);
  } catch (err) {
    throw err instanceof FhirError ? entryError(err, p.entry, `${at(p.entry)}.resource`) : err;
  }
  const creates = p.creates;
  if (creates !== undefined && p.follows === undefined) {
    // As stored (a Subscription `requested` stored `active`, its meta and defaults), as a REST conditional create judges
    // the version it wrote: the entry's own copy passed a condition the stored resource missed, and a repeat created another.
    // Judged, in a transaction, once every entry is written (a chain may name another's).
    const resource = storedResource(written) ?? ({ ...p.entry.resource!, id: p.id } as Resource);
    const ctx = opts.filterLookups?.(w) ?? { exists: async () => false, ...(opts.base !== undefined && { base: opts.base }) };
    const judge = () => requireFoundByCondition(resource, opts.now, creates.criteria, ctx, creates.condition, conditionElement(p.entry));
    if (opts.deferTargets) {
      // Once all are written, as stored: another entry's resource the planning did not see meet the condition (its Bundle copy
      // did not: a Subscription `requested`, stored `active`) would leave two resources the condition finds. Only the
      // transaction's own entries are looked at: what others wrote is the held searches' to judge (a race runs the Bundle
      // again), and what the token may not read is no match of its condition. The planning matched the others' Bundle
      // copies already: only those stored otherwise are looked at (entryIds, filled once all are written: storedOtherwise).
      opts.deferTargets(async () => {
        await judge();
        const siblings = (opts.entryIds?.get(p.entry.type) ?? []).filter((id) => id !== p.id);
        if (siblings.length === 0) return;
        const others: SearchQuery = { type: p.entry.type, where: [...creates.criteria, { kind: 'id', ids: siblings }], sort: [], count: 1 };
        if (await ctx.exists(others)) {
          throw new FhirError('precondition', `condition '${creates.condition}' matches the resources of more than one entry the transaction creates`, { expression: [conditionElement(p.entry)] });
        }
      });
    } else await judgeEntry(p, judge);
  }
  return written;
}

/**
 * Whether a create entry's resource was stored otherwise than its Bundle copy (a Subscription `requested` stored `active`),
 * its id and meta aside: only then may it meet a condition the planning found its copy did not (writeEntry).
 */
export function storedOtherwise(entry: Resource | undefined, written: Json | undefined): boolean {
  const stored = written === undefined ? undefined : storedResource(written);
  if (entry === undefined || stored === undefined) return false;
  const { id: _a, meta: _b, ...asked } = entry as Resource & { meta?: unknown };
  const { id: _c, meta: _d, ...kept } = stored as Resource & { meta?: unknown };
  return !Bun.deepEquals(asked, kept, true);
}

/** The resource a write entry's response carries: the version it stored (writePlain), not yet shaped by `Prefer: return`. */
function storedResource(written: Json): Resource | undefined {
  const resource = written.resource as Resource | undefined;
  return resource !== undefined && typeof resource === 'object' ? resource : undefined;
}

/**
 * Runs a judgement `p`'s write deferred to the end of the transaction's writes (PutOptions.deferTargets: the targets
 * of a patient's Provenance); its refusal names the entry, as one of the write would.
 */
export async function judgeEntry(p: Planned, judge: () => Promise<void>): Promise<void> {
  try {
    await judge();
  } catch (err) {
    throw err instanceof FhirError ? entryError(err, p.entry, `${at(p.entry)}.resource`) : err;
  }
}

/**
 * An entry's error placed in it (located); an If-Match that does not hold (VersionConflict) is its `request.ifMatch`'s,
 * an If-None-Match that does not (NoneMatchFailed) its `request.ifNoneMatch`'s.
 */
export function entryError(err: FhirError, entry: Entry, resource?: string, element?: string): FhirError {
  if (err instanceof VersionConflict && entry.ifMatch !== undefined) return located(err, `${at(entry)}.request.ifMatch`);
  if (err instanceof NoneMatchFailed && entry.ifNoneMatch !== undefined) return located(err, `${at(entry)}.request.ifNoneMatch`);
  return located(err, at(entry), resource, element);
}

async function writeOne(w: ResourceWriter, p: Planned, opts: PutOptions, base: string): Promise<Json> {
  const { entry } = p;
  const ifMatch = entryIfMatch(entry);
  if ((entry.method === 'PUT' || entry.method === 'DELETE') && entry.ifNoneMatch !== undefined) opts = { ...opts, ifNoneMatch: entryIfNoneMatch(entry) };
  if (p.patched) return writePatched(w, p, p.patched, { ...opts, ifMatch: [p.patched.base] }, base, ifMatch);
  if (p.matched) return heldToMatch(p.matched, ifMatch, `${entry.type}/${p.matched.id}`, (held) => writePlain(w, p, { ...opts, ifMatch: held }, base));
  return writePlain(w, p, ifMatch === undefined ? opts : { ...opts, ifMatch }, base);
}

/**
 * A conditional create's match (FHIR R4 http.html 3.1.0.8.1: nothing is written, and the Bundle's references
 * to the entry name the match) is current as its search found it: a delete or update by another request
 * between that search and the commit (a large Bundle's steps let other requests run) makes the Bundle run
 * again from its planning (ConditionRaced: exclusively), whose search then finds what is there, instead of
 * committing references to a deleted resource and answering 200 for it.
 */
async function requireExistingCurrent(w: ResourceWriter, match: ResourceVersion): Promise<void> {
  const now = await w.measured(match.type, match.id);
  if (now === null || now.deleted || now.versionId !== match.versionId) throw new ConditionRaced();
}

/** Performs a POST, PUT or DELETE entry with `o` (its If-Match among them). */
async function writePlain(w: ResourceWriter, p: Planned, opts: PutOptions, base: string): Promise<Json> {
  const { entry } = p;
  const o: PutOptions = { ...opts };
  if (p.createOnly) o.createOnly = true;
  if (entry.method === 'DELETE') {
    if (!p.id) {
      // A conditional delete that matched nothing: no current version for ifMatch to hold on.
      requireIfMatch(o.ifMatch, showCondition(entry.type, entry.condition!), null);
      return responseEntry('204 No Content');
    }
    const deleted = await deleteVersion(w, entry.type, p.id, o);
    // As a REST delete: nothing to delete is a success (FHIR R4 http 3.1.0.7), and a deletion, written now or before,
    // tells its version (the REST ETag).
    if (deleted === null) return responseEntry('204 No Content');
    return { response: { status: '204 No Content', etag: etag(deleted.versionId), lastModified: new Date(deleted.lastUpdated).toISOString() } };
  }
  if (p.existing) {
    if (p.holdsExisting) await requireExistingCurrent(w, p.existing);
    return { ...responseEntry('200 OK', p.existing, base), resource: parseExact(p.existing.content) };
  }
  const { version, created, unchanged, refused } = await putVersion(w, entry.resource!, p.id!, o, entry.method === 'POST' ? 'POST' : 'PUT');
  const response = unchanged ? unchangedEntry(version, base, refused) : responseEntry(created ? '201 Created' : '200 OK', version, base);
  return { ...response, resource: parseExact(version.content) };
}

/**
 * Writes a PATCH entry's result against the version it patched. A write in between is the client's 412
 * when its ifMatch named no later version; otherwise (none, `*`, which any current version meets, or a list naming a
 * later version) the Bundle is
 * planned and patched again on the new version (ConditionRaced: exclusively runs it again, as REST PATCH reads
 * and applies again), then 409.
 */
async function writePatched(w: ResourceWriter, p: Planned, patched: Patched, opts: PutOptions, base: string, clientIfMatch: IfMatch | undefined): Promise<Json> {
  try {
    const { version, unchanged, refused } = await putVersion(w, patched.resource, p.id!, opts, 'PATCH');
    return { ...(unchanged ? unchangedEntry(version, base, refused) : responseEntry('200 OK', version, base)), resource: parseExact(version.content) };
  } catch (err) {
    // A list naming a later version than the one patched may hold on the version written meanwhile: planned again, its
    // If-Match is checked on that version (a 412 then when it does not hold), as a REST PATCH's is on each attempt.
    const mayHold = clientIfMatch === undefined || clientIfMatch === '*' || clientIfMatch.some((v) => v > patched.base);
    if (mayHold && err instanceof VersionConflict) throw new ConditionRaced();
    throw patchRace(err, p.entry.type, p.id!, clientIfMatch);
  }
}
