/**
 * Conditional writes and conditional references inside one transaction (FHIR R4 http 3.1.0.11.2):
 * entries that create through the same condition write one resource, and a conditional reference
 * finds the resources the transaction writes as well as the stored ones (as HAPI FHIR does).
 */
import { isDeepStrictEqual } from 'node:util';
import { FhirError } from '../errors.ts';
import type { Condition, IndexRows, ResourceVersion, SearchQuery } from '../store/types.ts';
import { entryPath, located, type Entry } from './bundle-entries.ts';
import type { Planned } from './bundle-ops.ts';
import { besideCount, conditionKey, conditionParams, parseCondition, searchBeside, showCondition, type ConditionAnswers } from './conditional.ts';
import { findResources, lookups } from './core-search.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import type { Resource } from './resource.ts';
import { hasEndpoint, isResourceType } from './resource-types.ts';
import { withEntryIds } from './bundle-match-urls.ts';
import { LeftState } from './bundle-left-state.ts';
import { walkReferences } from './references.ts';
import { compileSearch, storeQuery } from './search.ts';
import { matchConditions, type MatchContext } from './search-match.ts';
import { indexEntries } from './indexer.ts';
import { textKey } from './search-order.ts';
import type { HeldSearches } from './bundle-held-searches.ts';

/**
 * The entries that share another entry's write (follower → leader). Of the `ifNoneExist` POSTs and
 * conditional PUTs of one condition (conditionKey: the same criteria in any order), the first PUT, or
 * without one the first POST, writes; the others follow it and write nothing. A following POST is a
 * conditional create that finds that resource (200); a following PUT must carry the same content (follow).
 */
export function sharedWrites(entries: Entry[]): Map<Entry, Entry> {
  const groups = new Map<string, Entry[]>();
  for (const e of entries) {
    if (!e.condition || (e.method !== 'POST' && e.method !== 'PUT')) continue;
    const key = conditionKey(e.type, e.condition);
    const group = groups.get(key);
    if (group) group.push(e);
    else groups.set(key, [e]);
  }
  const out = new Map<Entry, Entry>();
  for (const group of groups.values()) {
    if (group.length < 2) continue;
    const leader = group.find((e) => e.method === 'PUT') ?? group[0]!;
    for (const e of group) if (e !== leader) out.set(e, leader);
  }
  return out;
}

/**
 * A follower's plan: its leader's resource, written once. A PUT whose content (but for an absent `id`)
 * differs from its leader's is a 400: two updates of one resource in one transaction (FHIR R4 http
 * 3.1.0.11.2: no two entries may act on one resource).
 */
export function follow(entry: Entry, leader: Planned): Planned {
  if (entry.method === 'PUT') {
    const { id, ...mine } = entry.resource!;
    const { id: _, ...theirs } = leader.entry.resource!;
    if ((id !== undefined && id !== leader.id) || !isDeepStrictEqual(mine, theirs)) {
      const condition = showCondition(entry.type, entry.condition!);
      throw new FhirError('invalid', `${entryPath(entry)}: conditional update '${condition}' names the resource ${entryPath(leader.entry)} writes, with other content: two entries may not change one resource`, {
        expression: [entryPath(entry)],
      });
    }
  }
  return { entry, id: leader.id!, follows: leader };
}

/** A conditional reference (`Type?query`) met in an entry's resource. */
export interface ConditionalReference {
  holder: { reference: string };
  /** The entry's place in the Bundle (`Bundle.entry[n]`). */
  where: string;
  /** The reference's element, for errors (`Bundle.entry[n].resource.subject`). */
  element(): string;
}

/** A resource a transaction writes or deletes (`resource` undefined); `stored`: it may exist already (an update, patch or delete). */
export interface TransactionWrite {
  type: string;
  id: string;
  resource?: Resource;
  stored: boolean;
}

/** A conditional reference that matches nothing: 412. An import retries its Bundle at the end of the run. */
export class UnmatchedConditionalReference extends FhirError {
  constructor(message: string, expression: string) {
    super('precondition', message, { expression: [expression] });
  }
}

/**
 * Resolves conditional references (FHIR R4 http 3.1.0.11.2) against the stored resources as the
 * transaction leaves them and the resources it writes: a stored match the transaction updates or
 * deletes counts by its new content, or not at all. Exactly one match in total replaces the reference
 * by its `Type/id`; none or several are 412. References of one condition are resolved once. A value
 * naming an entry's fullUrl (`Observation?subject=urn:uuid:X`: `lookup` gives its `Type/id`) is searched
 * as that resource, as the entries' own conditions are (bundle-match-urls.ts; HAPI FHIR does the same). One whose chain
 * or `_has` reads what the transaction writes (linkedWrites) is resolved after the others, in that state (resolveInOrder).
 * A transaction's searches are recorded in `held`, to be searched again at its commit (HeldSearches), and read ahead by
 * `answers` first, those of one type and shape together (bundle-condition-answers.ts): one by one, 1,000 references by
 * identifier were 1,000 statements.
 */
export async function resolveConditionalReferences(
  deps: FhirDeps, req: FhirRequest, refs: ConditionalReference[], writes: TransactionWrite[], lookup: (fullUrl: string) => string | undefined, held?: HeldSearches,
  answers?: AheadAnswers,
): Promise<void> {
  const found = new Map<string, string>();
  const writtenResources = new WrittenResources(writes, lookups(deps, req.tenant), (q) => findResources(deps, req.tenant, q));
  const conditionOf = (ref: ConditionalReference): { type: string; query: URLSearchParams } => {
    const written = ref.holder.reference;
    const type = written.slice(0, written.indexOf('?'));
    if (!isResourceType(type)) throw new FhirError('invalid', `${ref.where}: conditional reference '${written}' does not name a known resource type`);
    if (!hasEndpoint(type)) throw new FhirError('invalid', `${ref.where}: conditional reference '${written}' names ${type}, which has no RESTful endpoint and is never stored`);
    // Values naming an entry's fullUrl are searched as its `Type/id`; others (a token's `urn:oid:` system too) as written.
    return { type, query: withEntryIds(parseCondition(written, type, ref.where), lookup, () => false)! };
  };
  if (answers !== undefined) await answers.ahead(referenceSearches(refs, conditionOf, writtenResources));
  // Each reference with its condition, marked where its chains or `_has` read what the transaction writes.
  const all: OrderedReference[] = [];
  const linkedKeys = new Map<string, boolean>();
  for (const ref of refs) {
    try {
      const { type, query } = conditionOf(ref);
      const key = conditionKey(type, query);
      let linked = linkedKeys.get(key);
      if (linked === undefined) linkedKeys.set(key, (linked = (await linkedWrites(deps, req, type, query, writtenResources)).length > 0));
      all.push({ ref, type, query, key, linked });
    } catch (err) {
      throw err instanceof FhirError ? located(err, ref.element()) : err;
    }
  }
  // The types of the written resources holding a linked reference: a condition reading one waits for it (resolveInOrder).
  const blocked = typesHolding(writes, new Set(all.flatMap((l) => (l.linked ? [l.ref.holder] : []))));
  const later: OrderedReference[] = [];
  for (const l of all) {
    try {
      if (l.linked || (await waits(deps, req, l, blocked))) {
        later.push(l);
        continue;
      }
      let target = found.get(l.key);
      if (target === undefined) found.set(l.key, (target = await resolveOne(deps, req, l.type, l.query, l.ref, writtenResources, held, answers)));
      l.ref.holder.reference = target;
    } catch (err) {
      throw err instanceof FhirError ? located(err, l.ref.element()) : err;
    }
  }
  if (later.length > 0) await resolveInOrder(deps, req, later, writes, held);
}

/** A conditional reference with its condition; `linked`: its chains or `_has` read what the transaction writes (linkedWrites). */
interface OrderedReference {
  ref: ConditionalReference;
  type: string;
  query: URLSearchParams;
  key: string;
  linked: boolean;
}

/** The types of the written resources holding one of `holders`. */
function typesHolding(writes: TransactionWrite[], holders: ReadonlySet<object>): Set<string> {
  const out = new Set<string>();
  if (holders.size === 0) return out;
  for (const w of writes) {
    if (w.resource === undefined || out.has(w.type)) continue;
    walkReferences(w.resource, (holder) => {
      if (holders.has(holder)) out.add(w.type);
    });
  }
  return out;
}

/** Whether a reference's condition reads (at its top, or through a chain or `_has`) one of the `blocked` types. */
async function waits(deps: FhirDeps, req: FhirRequest, l: OrderedReference, blocked: ReadonlySet<string>): Promise<boolean> {
  if (blocked.size === 0) return false;
  if (blocked.has(l.type)) return true;
  if (!mayLink(l.query)) return false;
  const search = await storeQuery(deps, req, l.type, compileSearch(l.type, l.query, true, deps.clock.now()));
  return search !== undefined && links(search.where ?? []).some((x) => blocked.has(x.type));
}

/**
 * Resolves the conditional references whose chains or `_has` read what the transaction writes, and those whose
 * conditions read the written resources holding such a reference, once every other one is resolved (the written
 * resources then refer by id), against the state the transaction leaves (LeftState): the stored resources it keeps and
 * those it writes, each link read in that state. One match is the target; none or several are a 412, as for any
 * conditional reference. A reference whose condition reads a type of which the transaction writes a resource still
 * holding another of these waits until that one is resolved, whatever their order in the Bundle; those that wait for one
 * another (an Observation's subject `Patient?_has:Condition:...` beside a Condition's `Patient?_has:Observation:...`)
 * would each have the answer the one resolved first gives them, an order FHIR does not define: a 400 naming both. Each is
 * matched against the writes as the references resolved before it left them (a WrittenResources of its own: index rows
 * made earlier would hold the conditions, not the ids).
 */
async function resolveInOrder(deps: FhirDeps, req: FhirRequest, refs: OrderedReference[], writes: TransactionWrite[], held: HeldSearches | undefined): Promise<void> {
  const pending = new Map(refs.map((l) => [l.ref.holder, l] as const));
  const found = new Map<string, string>();
  let left = refs;
  while (left.length > 0) {
    const waiting: { l: OrderedReference; on: OrderedReference }[] = [];
    for (const l of left) {
      try {
        let target = found.get(l.key);
        if (target === undefined) {
          const result = await resolveInLeftState(deps, req, l, new WrittenResources(writes, lookups(deps, req.tenant)), pending, held);
          if (typeof result !== 'string') {
            waiting.push({ l, on: result.on });
            continue;
          }
          found.set(l.key, (target = result));
        }
        l.ref.holder.reference = target;
        pending.delete(l.ref.holder);
      } catch (err) {
        throw err instanceof FhirError ? located(err, l.ref.element()) : err;
      }
    }
    if (waiting.length === left.length) throw circular(waiting[0]!.l, waiting[0]!.on);
    left = waiting.map((x) => x.l);
  }
}

/** The target of `l` in the state the transaction leaves, or the reference it waits for (`on`). */
async function resolveInLeftState(
  deps: FhirDeps, req: FhirRequest, l: OrderedReference, written: WrittenResources, pending: ReadonlyMap<object, OrderedReference>, held: HeldSearches | undefined,
): Promise<string | { on: OrderedReference }> {
  const { ref, type, query } = l;
  const now = deps.clock.now();
  const search = await storeQuery(deps, req, type, compileSearch(type, query, true, now));
  const ids = new Set<string>();
  if (search === undefined) held?.add(type, query, ref.where, 2, { rows: [], query: undefined });
  else {
    const on = blocker(l, search, written, pending);
    if (on !== undefined) return { on };
    const state = new LeftState(deps, req, written, now);
    const stored = await state.stored(search, 2);
    // Searched again at the commit (HeldSearches), as rewritten: a stored match deleted or created meanwhile runs the Bundle again.
    held?.add(type, query, ref.where, 2, stored, true);
    for (const v of stored.rows) ids.add(v.id);
    const where: Condition[] = [...(search.where ?? []), ...(search.compartment === undefined ? [] : [{ kind: 'compartment', patient: search.compartment } as const])];
    for (const w of await state.meeting(type, where)) ids.add(w.id);
  }
  const shown = `${ref.where}: conditional reference '${showCondition(type, query)}'`;
  if (ids.size === 0) throw new UnmatchedConditionalReference(`${shown} matches nothing`, ref.element());
  if (ids.size > 1) throw new FhirError('precondition', `${shown} matches more than one resource`, { expression: [ref.element()] });
  return `${type}/${[...ids][0]}`;
}

/**
 * Another reference not resolved yet (of another condition) that a written resource of a type `l`'s condition reads
 * holds: `l` waits for it.
 */
function blocker(l: OrderedReference, search: SearchQuery, written: WrittenResources, pending: ReadonlyMap<object, OrderedReference>): OrderedReference | undefined {
  const types = new Set([l.type, ...links(search.where ?? []).map((x) => x.type)]);
  let found: OrderedReference | undefined;
  for (const type of types) {
    for (const w of written.of(type)) {
      walkReferences(w.resource, (holder) => {
        const other = pending.get(holder);
        if (found === undefined && other !== undefined && other.key !== l.key) found = other;
      });
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

/** Two references that each wait for the other (resolveInOrder): a 400 naming both. */
function circular(l: OrderedReference, on: OrderedReference): FhirError {
  return new FhirError('invalid', `${l.ref.where}: conditional reference '${showCondition(l.type, l.query)}' reads a resource the transaction writes whose ${on.ref.element()} is the conditional reference '${showCondition(on.type, on.query)}', which cannot be resolved before this one either (through a chain or _has, each reads what the other's resource holds): each answer depends on which is resolved first, an order FHIR does not define. Refer to one of them by id or by its entry's fullUrl`, {
    expression: [l.ref.element()],
  });
}

/** Condition searches answered ahead (GroupedConditionAnswers): `ahead` reads them, searchBeside takes them. */
export interface AheadAnswers extends ConditionAnswers {
  ahead(searches: { type: string; params: URLSearchParams }[]): Promise<void>;
}

/**
 * The searches of the distinct conditions of `refs` as resolveOne runs them (searchBeside's count beside the stored
 * resources the transaction replaces); one that fails to parse or compile is left out, to fail at its reference.
 */
function referenceSearches(
  refs: ConditionalReference[], conditionOf: (ref: ConditionalReference) => { type: string; query: URLSearchParams }, written: WrittenResources,
): { type: string; params: URLSearchParams }[] {
  const seen = new Set<string>();
  const out: { type: string; params: URLSearchParams }[] = [];
  for (const ref of refs) {
    try {
      const { type, query } = conditionOf(ref);
      const key = conditionKey(type, query);
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ type, params: conditionParams(type, query, ref.where, besideCount(2, written.replaced(type))) });
    } catch {
      // Refused as its reference is resolved.
    }
  }
  return out;
}

async function resolveOne(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, ref: ConditionalReference, written: WrittenResources, held: HeldSearches | undefined,
  answers: ConditionAnswers | undefined,
): Promise<string> {
  const replaced = written.replaced(type);
  // Searched again at the commit (HeldSearches): a target deleted or a second match created meanwhile runs the Bundle again.
  const stored = await searchBeside(deps, req, type, query, ref.where, replaced, 2, held, ref.element(), answers);
  const ids = new Set(stored.map((v) => v.id));
  for (const id of await writtenMatches(deps, req, type, query, written)) ids.add(id);
  const shown = `${ref.where}: conditional reference '${showCondition(type, query)}'`;
  if (ids.size === 0) throw new UnmatchedConditionalReference(`${shown} matches nothing`, ref.element());
  if (ids.size > 1) throw new FhirError('precondition', `${shown} matches more than one resource`, { expression: [ref.element()] });
  return `${type}/${[...ids][0]}`;
}

/** Whether a condition's parameters may hold a chain or `_has` (`_has:`, `_list`, `_filter`, a dotted name): else nothing is compiled to tell. */
export const mayLink = (query: URLSearchParams) => [...query.keys()].some((k) => k.startsWith('_has') || k === '_list' || k === '_filter' || k.includes('.'));

/** The chains and `_has` of `conditions`, at any depth: the type each reads, and what its resources must meet there. */
function links(conditions: readonly Condition[], out: { type: string; where: Condition[]; chain?: true }[] = []): { type: string; where: Condition[]; chain?: true }[] {
  for (const c of conditions) {
    switch (c.kind) {
      case 'chain': out.push({ type: c.targetType, where: c.where, chain: true }), links(c.where, out); break;
      case 'has': out.push({ type: c.type, where: c.where }), links(c.where, out); break;
      case 'or': links(c.any, out); break;
      case 'and': links(c.all, out); break;
      case 'not': links([c.condition], out); break;
      default: break;
    }
  }
  return out;
}

/**
 * The types the chains and `_has` of the condition `type?query` read (at any depth) of which `written` holds a
 * resource meeting the link's own conditions, or replaces a stored one that met them (WrittenResources.touches): where
 * the store's answer to the link, which holds none of the transaction's writes, is not the one those writes give.
 * `storedOnly`: the condition is searched among stored resources alone (a conditional entry's), which cannot refer to
 * a resource the transaction creates with a new id, so a chain's is not changed by one. `except`: a resource whose
 * write and stored version do not count (the entry's own).
 */
export async function linkedWrites(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, written: WrittenResources | (() => WrittenResources), storedOnly = false, except?: { type: string; id: string },
): Promise<string[]> {
  if (!mayLink(query)) return [];
  const now = deps.clock.now();
  const search = await storeQuery(deps, req, type, compileSearch(type, query, true, now));
  if (search === undefined) return [];
  const found = links(search.where ?? []);
  if (found.length === 0) return [];
  if (typeof written === 'function') written = written();
  const clash = new Set<string>();
  for (const link of found) {
    if (clash.has(link.type) || !written.writes(link.type)) continue;
    if (await written.touches(link.type, link.where, now, (ids) => storedVersions(deps, req, link.type, ids), !(storedOnly && link.chain), except?.type === link.type ? except.id : undefined)) clash.add(link.type);
  }
  return [...clash];
}

/** The stored current versions of `type` among `ids`, 1,000 a read. */
async function storedVersions(deps: FhirDeps, req: FhirRequest, type: string, ids: string[]): Promise<ResourceVersion[]> {
  const out: ResourceVersion[] = [];
  for (let k = 0; k < ids.length; k += 1000) {
    const some = ids.slice(k, k + 1000);
    out.push(...(await findResources(deps, req.tenant, { type, where: [{ kind: 'id', ids: some }], sort: [], count: some.length })));
  }
  return out;
}

/** The ids of the written resources (of the query's type) the query selects, evaluated in memory as the store would (search-match.ts). */
async function writtenMatches(deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, written: WrittenResources): Promise<string[]> {
  if (written.of(type).length === 0) return [];
  const now = deps.clock.now();
  // As the token may search: its scope filter and patient compartment apply (storeQuery).
  const search = await storeQuery(deps, req, type, compileSearch(type, query, true, now));
  if (search === undefined) return [];
  const where: Condition[] = [...(search.where ?? []), ...(search.compartment === undefined ? [] : [{ kind: 'compartment', patient: search.compartment } as const])];
  const out: string[] = [];
  for (const w of await written.candidates(type, where)) {
    if (await matchConditions({ ...w.resource!, id: w.id }, now, where, written.ctx, written.rows(w))) out.push(w.id);
  }
  return out;
}

/**
 * The resources a transaction writes, for its conditional references to match: by type, each with its
 * index rows (made once), and its token values by parameter, so that a condition with a token (the
 * common `identifier=system|value`) is matched only against the resources holding one of its values. A
 * transaction of N conditional references to N written resources matched every pair (N = 5,000: 112 s).
 */
export class WrittenResources {
  /** What the transaction writes, by type (a resource: created, updated or patched). */
  private readonly byType = new Map<string, TransactionWrite[]>();
  /** The ids of the stored resources it replaces (updates, patches, deletes), by type. */
  private readonly replacedIds = new Map<string, Set<string>>();
  private readonly indexRows = new Map<TransactionWrite, IndexRows>();
  /** By `Type\0param`: the written resources holding each token value of the parameter (made when a condition first asks). */
  private readonly byToken = new Map<string, Map<string, TransactionWrite[]>>();
  /** By `Type\0param`: the parameter's normalised string values of the written resources as textKey, in code point order (made alike). */
  private readonly byString = new Map<string, { value: string; w: TransactionWrite }[]>();
  /** By type: the stored versions of the resources the transaction replaces, as read for touches(), with their lastUpdated. */
  private readonly storedBefore = new Map<string, Promise<{ resources: WrittenResources; at: Map<string, number> }>>();

  constructor(
    writes: TransactionWrite[],
    readonly ctx: MatchContext,
    /** The current resources a query finds, as ctx.exists looks them up (findResources): a chain's targets, to narrow by. */
    private readonly find?: (query: SearchQuery) => Promise<ResourceVersion[]>,
  ) {
    // Once for the transaction: each reference reads them, and filtering per reference was N × N again.
    for (const w of writes) {
      if (w.resource !== undefined) (this.byType.get(w.type) ?? this.byType.set(w.type, []).get(w.type)!).push(w);
      if (w.stored) (this.replacedIds.get(w.type) ?? this.replacedIds.set(w.type, new Set()).get(w.type)!).add(w.id);
    }
  }

  /** One more resource the transaction writes (its references as the Bundle resolves them), kept in the token and string lists already made. */
  add(w: TransactionWrite): void {
    if (w.resource === undefined) return;
    (this.byType.get(w.type) ?? this.byType.set(w.type, []).get(w.type)!).push(w);
    const prefix = `${w.type}\u0000`;
    for (const [key, values] of this.byToken) {
      if (!key.startsWith(prefix)) continue;
      const param = key.slice(prefix.length);
      for (const e of this.rows(w).tokens) if (e.param === param) (values.get(e.value) ?? values.set(e.value, []).get(e.value)!).push(w);
    }
    for (const [key, sorted] of this.byString) {
      if (!key.startsWith(prefix)) continue;
      const param = key.slice(prefix.length);
      for (const e of this.rows(w).strings) if (e.param === param) sorted.splice(firstAtLeast(sorted, textKey(e.value)), 0, { value: textKey(e.value), w });
    }
  }

  /** What the transaction writes of `type` (a resource: created, updated or patched; none: deleted). */
  of(type: string): readonly TransactionWrite[] {
    return this.byType.get(type) ?? [];
  }

  /** Whether the transaction writes or deletes a resource of `type`. */
  writes(type: string): boolean {
    return this.of(type).length > 0 || this.replaced(type).size > 0;
  }

  /**
   * Whether a resource of `type` the transaction writes meets `where`, or a stored one it replaces (updates, patches,
   * deletes) met it (`stored` reads their current versions, once a type for the transaction, kept as resources of
   * their own to narrow by): where a chain or `_has` reads `type`, those are what the store's answer misses or still
   * counts (linkedWrites). `now`: the written ones' lastUpdated. Without `fresh`, the resources it creates with
   * new ids (POSTs) are left out: only its own entries can refer to them. `except`: the id of one whose write and
   * stored version are left out.
   */
  async touches(type: string, where: Condition[], now: number, stored: (ids: string[]) => Promise<ResourceVersion[]>, fresh = true, except?: string): Promise<boolean> {
    if (await this.anyMeets(type, where, () => now, fresh, except)) return true;
    const replaced = [...this.replaced(type)];
    if (replaced.length === 0) return false;
    let before = this.storedBefore.get(type);
    if (before === undefined) {
      before = stored(replaced).then((versions) => {
        const at = new Map(versions.map((v) => [v.id, v.lastUpdated]));
        const as = versions.map((v): TransactionWrite => ({ type, id: v.id, resource: { ...(JSON.parse(v.content) as Resource), id: v.id }, stored: false }));
        return { resources: new WrittenResources(as, this.ctx, this.find), at };
      });
      this.storedBefore.set(type, before);
    }
    const { resources, at } = await before;
    return resources.anyMeets(type, where, (w) => at.get(w.id)!, true, except);
  }

  /** Whether one of the resources of `type` held here meets `where` (`at`: its lastUpdated). */
  private async anyMeets(type: string, where: Condition[], at: (w: TransactionWrite) => number, fresh = true, except?: string): Promise<boolean> {
    for (const w of await this.candidates(type, where)) {
      if ((!fresh && !w.stored) || w.id === except) continue;
      if (await matchConditions({ ...w.resource!, id: w.id }, at(w), where, this.ctx, this.rows(w))) return true;
    }
    return false;
  }

  /** The ids of the stored resources of `type` the transaction replaces (updates, patches, deletes). */
  replaced(type: string): ReadonlySet<string> {
    return this.replacedIds.get(type) ?? new Set();
  }

  rows(w: TransactionWrite): IndexRows {
    let rows = this.indexRows.get(w);
    if (rows === undefined) this.indexRows.set(w, (rows = indexEntries({ ...w.resource!, id: w.id }, this.ctx.base)));
    return rows;
  }

  /**
   * The written resources of `type` that may meet `where`: those the fewest of which its plain conditions admit (each
   * ANDed at the top, so every match meets it): a token condition (no `:not`, `ne` or folded case, each value with a
   * code), by the resources holding one of its values; a string condition matching from the start (`family=Sm`, `eq`),
   * by those holding a value in its range; failing those, a chain (`subject:Patient.identifier=x`), by those referring
   * to one of the few current resources its target meets, and `_has`, by those the few current resources it names
   * refer to (each looked up once, as matchConditions looks them up for each resource). Else all
   * of them. The first token alone was read: `code=x&identifier=y`, its code shared by every entry, matched every pair,
   * and a chain looked its target up for every pair (2,000 conditional creates of `code=x&subject:Patient.identifier=y`
   * in one transaction: minutes).
   */
  async candidates(type: string, where: Condition[]): Promise<readonly TransactionWrite[]> {
    const all = this.of(type);
    if (all.length < NARROWED_FROM) return all;
    let best: readonly TransactionWrite[] = all;
    // The conditions whose rows are fewest first, counted before any is gathered: the first condition's were gathered
    // for every entry, the family's of `family=F&given=G` (a ninth of the entries) before the given name's one.
    const size = new Map(where.map((c) => [c, this.rowsOf(type, c)]));
    const ordered = [...where].sort((a, b) => size.get(a)! - size.get(b)!);
    // Without a lookup first; a chain's targets are looked up only when that leaves many.
    for (const lookUp of [false, true]) {
      for (const c of ordered) {
        if (best.length < NARROWED_FROM) return best;
        const some = await this.narrowed(type, c, lookUp, best.length);
        if (some !== undefined && some.length < best.length) best = some;
      }
    }
    return best;
  }

  /** How many rows of the written resources of `type` narrowed() would gather for `c` without a lookup (Infinity: it gathers none). */
  private rowsOf(type: string, c: Condition): number {
    switch (c.kind) {
      case 'token': return tokensNarrow(c) ? c.values.reduce((n, v) => n + (this.tokenIndex(type, c.param).get(v.value!)?.length ?? 0), 0) : Infinity;
      case 'string': return stringsNarrow(c) ? this.stringRanges(type, c).reduce((n, [from, to]) => n + to - from, 0) : Infinity;
      case 'or': return c.any.reduce((n, x) => n + this.rowsOf(type, x), 0);
      default: return Infinity;
    }
  }

  /**
   * The written resources of `type` that may meet `c` (undefined: any may, or `fewer` or more of them, which are not
   * gathered: gathering a common value's every time made the Bundle's conditional creates cost its size squared), its
   * chains narrowed by their targets when `lookUp`.
   */
  private async narrowed(type: string, c: Condition, lookUp: boolean, fewer: number): Promise<TransactionWrite[] | undefined> {
    switch (c.kind) {
      case 'token': return this.holdingTokens(type, c, fewer);
      case 'string': return this.holdingStrings(type, c, fewer);
      case 'chain': {
        if (!lookUp || c.canonical || this.find === undefined) return undefined;
        const targets = await this.find({ type: c.targetType, where: c.where, sort: [], count: CHAIN_TARGETS + 1 });
        return targets.length > CHAIN_TARGETS ? undefined : this.holding(type, c.param, targets.map((v) => v.id), fewer);
      }
      // `_has:Observation:subject:code=x`: the resources the few current referrers refer to through the parameter.
      case 'has': {
        if (!lookUp || c.canonical || this.find === undefined) return undefined;
        const referrers = await this.find({ type: c.type, where: c.where, sort: [], count: CHAIN_TARGETS + 1 });
        if (referrers.length > CHAIN_TARGETS) return undefined;
        const ids = new Set<string>();
        for (const v of referrers) {
          for (const e of indexEntries(JSON.parse(v.content) as Resource, this.ctx.base).tokens) if (e.param === c.param && e.system === type) ids.add(e.value);
        }
        return this.of(type).filter((w) => ids.has(w.id));
      }
      // `subject:Patient.identifier=x`: the chain, or the rows of a contained Patient.
      case 'or': {
        const out = new Set<TransactionWrite>();
        for (const x of c.any) {
          const some = await this.narrowed(type, x, lookUp, fewer - out.size);
          if (some === undefined) return undefined;
          for (const w of some) out.add(w);
          if (out.size >= fewer) return undefined;
        }
        return [...out];
      }
      default: return undefined;
    }
  }

  private holdingTokens(type: string, c: Extract<Condition, { kind: 'token' }>, fewer: number): TransactionWrite[] | undefined {
    if (!tokensNarrow(c)) return undefined;
    return this.holding(type, c.param, c.values.map((v) => v.value!), fewer);
  }

  /**
   * The written resources of `type` holding a token row of `param` whose value (whatever its system) is one of `values`;
   * undefined where their rows are `fewer` or more (narrowed).
   */
  private holding(type: string, param: string, values: string[], fewer: number): TransactionWrite[] | undefined {
    const found = this.tokenIndex(type, param);
    let rows = 0;
    for (const v of values) rows += found.get(v)?.length ?? 0;
    if (rows >= fewer) return undefined;
    return [...new Set(values.flatMap((v) => found.get(v) ?? []))];
  }

  /** By token value, the written resources of `type` holding a token row of `param` (made when a condition first asks). */
  private tokenIndex(type: string, param: string): Map<string, TransactionWrite[]> {
    const key = `${type}\u0000${param}`;
    let byValue = this.byToken.get(key);
    if (byValue === undefined) {
      byValue = new Map();
      for (const w of this.of(type)) {
        for (const e of this.rows(w).tokens) if (e.param === param) (byValue.get(e.value) ?? byValue.set(e.value, []).get(e.value)!).push(w);
      }
      this.byToken.set(key, byValue);
    }
    return byValue;
  }

  /** The written resources of `type` holding a string of `c`'s parameter in one of its ranges; undefined where their rows are `fewer` or more (narrowed). */
  private holdingStrings(type: string, c: Extract<Condition, { kind: 'string' }>, fewer: number): TransactionWrite[] | undefined {
    if (!stringsNarrow(c)) return undefined;
    const ranges = this.stringRanges(type, c);
    if (ranges.reduce((n, [from, to]) => n + to - from, 0) >= fewer) return undefined;
    const sorted = this.byString.get(`${type}\u0000${c.param}`)!;
    const out = new Set<TransactionWrite>();
    for (const [from, to] of ranges) for (let i = from; i < to; i++) out.add(sorted[i]!.w);
    return [...out];
  }

  /** The ranges of the parameter's sorted strings (byString) that `c`'s values admit, as [from, to) indexes. */
  private stringRanges(type: string, c: Extract<Condition, { kind: 'string' }>): (readonly [number, number])[] {
    const key = `${type}\u0000${c.param}`;
    let sorted = this.byString.get(key);
    if (sorted === undefined) {
      sorted = [];
      for (const w of this.of(type)) for (const e of this.rows(w).strings) if (e.param === c.param) sorted.push({ value: textKey(e.value), w });
      sorted.sort((a, b) => (a.value < b.value ? -1 : a.value > b.value ? 1 : 0));
      this.byString.set(key, sorted);
    }
    // As prefixOf (search-match.ts): from the value up to the value followed by the highest code point, in code point
    // order (textKey): by UTF-16 units, `annｶ` (U+FF76) sorted past `ann` + U+10FFFF (a surrogate pair) and was missed.
    const found = sorted;
    return c.values.map((v) => [firstAtLeast(found, textKey(v.value)), firstAtLeast(found, textKey(v.value + '\u{10FFFF}'))] as const);
  }
}

/** Whether a token condition narrows the written resources by its values (WrittenResources.candidates): no `:not`, `ne` or folded case, each value with a code. */
function tokensNarrow(c: Extract<Condition, { kind: 'token' }>): boolean {
  return !c.not && !c.unequal && !c.fold && c.values.every((v) => v.value !== undefined);
}

/** Whether a string condition narrows them: each value matched from its start. */
function stringsNarrow(c: Extract<Condition, { kind: 'string' }>): boolean {
  return c.values.every((v) => v.match === 'prefix' || v.match === 'equal');
}

/** Fewer written resources of a type are matched one by one (WrittenResources.candidates). */
const NARROWED_FROM = 8;
/** The most targets of a chain WrittenResources.candidates narrows by: past them, it does not. */
const CHAIN_TARGETS = 100;

/** The index of the first entry of `sorted` (its values textKeys, in code unit order) whose value is at least `value` (a textKey). */
function firstAtLeast(sorted: readonly { value: string }[], value: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]!.value < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
