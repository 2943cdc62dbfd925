/**
 * Later pages of a search in `_id` or `_lastUpdated` order, or in a sort on parameters, read as of the first page's time (issue #14): the
 * time its `_cursor` carries (src/fhir/search-time.ts). A resource updated while a client pages no longer moves
 * ahead of the cursor (never read, newest first) or behind it (read twice, oldest first), a deleted one is still
 * read, and one created since is not: every match of the first page's time is on exactly one page, in its place
 * as of then (Blaze pins a search's pages to the database's point in time `__t` the same way).
 *
 * The store reads the resources unchanged since the pin by their index as before (SearchQuery.asOf: one more
 * test on each resource row; in a sort on parameters, the page as now less the resources changed since). Those changed since are few between two pages: the ids and version numbers of
 * their versions written since are read (ResourceRepo.versionsSince, no texts), and each one's version current at the pin (the one before the first
 * written since) is matched against the search in memory (src/fhir/search-match.ts, as bulk export rechecks
 * versions of its snapshot), placed by its own keys and merged into the page.
 */
import type { ResourceVersion, SearchQuery, SortKey, SortPosition } from '../store/types.ts';
import { VREAD_MANY_MAX } from '../store/interface/resources.ts';
import { keysetSort } from '../store/search-sql.ts';
import { boundIndexRows } from '../store/index-limits.ts';
import { issue } from './outcome.ts';
import type { FhirIssue } from '../errors.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import type { PagePin } from './search-time.ts';
import { compartmentsOf, paramEntries } from './indexer.ts';
import { matchConditions, type MatchContext } from './search-match.ts';
import { placeOrder, sortKeysOf } from './search-order.ts';

/**
 * The most versions written since the pin that a pinned page reads to find the resources changed since: past
 * it, the page is read as the data is now (pinnedSearch answers undefined) rather than costing every later page
 * a read of that many versions.
 */
export const PIN_MAX_CHANGES = 1000;

type Json = Record<string, unknown>;

/**
 * The tenant's write mark (ResourceRepo.writeMark), read once for the request (`pin.read`: a page walked to by
 * `_offset` and the carried total read the same), before the first statement that asks for it; `exact` when no
 * write of this process took a timestamp after the pin's time before the read answered (WriteTimes.latestTaken).
 *
 * An equal mark on a later page means no transaction changed the tenant's resources since that read, so the data
 * now is the data the first page's query read (it ran after the mark). That equals the data as of the pin's time
 * only if nothing stamped after the pin's time had committed when the mark was read: the pin's time is the safe
 * time taken before the mark (every version this process stamped at or before it had committed), but a write
 * stamped after it may commit between that time and the mark's read. `exact` rules that out for this process's
 * writes: one stamped after the pin's time that the mark's read could see took its timestamp before the read
 * answered, so the latest timestamp taken, read after, is later than the pin's time. A write committed after the
 * mark's read moves the mark, and the later pages are read as of the pin's time. Only an exact mark is carried.
 */
export function pinMark(deps: FhirDeps, tenant: string, pin: PagePin): Promise<{ mark: string; exact: boolean }> {
  pin.read ??= deps.store.resources.writeMark(tenant).then((mark) => ({ mark, exact: deps.store.writeTimes.latestTaken() <= pin.at }));
  return pin.read;
}

/**
 * Whether a page reads the write mark for its pin: where that costs no round trip, on SQLite (a read of at most
 * sixteen rows in-process) or where the request read it already (a carried `_total`, search-total.ts). On
 * PostgreSQL the mark is a statement of its own that the page's read must wait for, which cost a later page more
 * than the two statements it spares, run beside each other (docs/PERFORMANCE.md, fifty-seventh session).
 */
export function marksPin(deps: FhirDeps, pin: PagePin): boolean {
  return deps.store.kind === 'sqlite' || pin.read !== undefined;
}

/** Whether `a` comes before `b` in the keyset order of `query` (`_id`, or `_lastUpdated` then id, either way). */
function comparer(query: SearchQuery): (a: Pick<ResourceVersion, 'id' | 'lastUpdated'>, b: Pick<ResourceVersion, 'id' | 'lastUpdated'>) => number {
  const keyset = keysetSort(query.sort)!;
  const sign = keyset.descending ? -1 : 1;
  const byId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return keyset.by === 'id'
    ? (a, b) => sign * byId(a.id, b.id)
    : (a, b) => sign * (a.lastUpdated - b.lastUpdated || byId(a.id, b.id));
}

/**
 * The resources of `type` changed since `asOf` (updated or deleted, and created since), each with its version current
 * at `asOf` (the one before the first written since: versions are numbered one after another; 0 for one created
 * since); undefined when more than PIN_MAX_CHANGES versions were written since.
 */
async function changedSince(deps: FhirDeps, tenant: string, type: string, asOf: number): Promise<{ id: string; versionId: number }[] | undefined> {
  // Their ids and version numbers only: the texts read are those of the versions current at the pin that fall within the page.
  const since = await deps.store.resources.versionsSince(tenant, type, asOf + 1, PIN_MAX_CHANGES + 1);
  if (since.length > PIN_MAX_CHANGES) return undefined;
  const first = new Map<string, number>();
  for (const v of since) if (v.versionId < (first.get(v.id) ?? Infinity)) first.set(v.id, v.versionId);
  return [...first].map(([id, v]) => ({ id, versionId: v - 1 }));
}

/** The live versions among `asked` (each id's version), read VREAD_MANY_MAX at a time; one expunged since reads as none. */
async function versions(deps: FhirDeps, tenant: string, type: string, asked: { id: string; versionId: number }[], asOf: number): Promise<ResourceVersion[]> {
  const out: ResourceVersion[] = [];
  for (let i = 0; i < asked.length; i += VREAD_MANY_MAX) {
    for (const v of await deps.store.resources.vreadMany(tenant, type, asked.slice(i, i + VREAD_MANY_MAX))) if (!v.deleted && v.lastUpdated <= asOf) out.push(v);
  }
  return out;
}

/** Whether `v` (a version of the type `query` searches) matches the query's conditions and compartment. */
async function matches(deps: FhirDeps, tenant: string, query: SearchQuery, v: ResourceVersion): Promise<boolean> {
  const resource = JSON.parse(v.content) as Json;
  const base = deps.fhirBase?.(tenant);
  if (query.compartment !== undefined && !compartmentsOf(resource, base).includes(query.compartment)) return false;
  const ctx: MatchContext = { exists: async (q) => (await deps.store.resources.search(tenant, { ...q, count: 1 })).length > 0, ...(base !== undefined && { base }) };
  return matchConditions(resource, v.lastUpdated, query.where ?? [], ctx);
}

/**
 * The place of `v` in a sort on parameters (SearchQuery.afterKeys): its keys read from its index rows of the sort's
 * parameters as the store writes them (paramEntries; under the tenant's base; on PostgreSQL with long values in their bounded form, index-limits.ts), so
 * that they compare as the database compares its rows with a cursor's place.
 */
export function sortPlace(deps: FhirDeps, tenant: string, v: ResourceVersion, sort: SortKey[]): SortPosition {
  const rows = () => {
    const params = sort.flatMap((k) => (k.by === 'param' ? [k.param] : []));
    const index = paramEntries(JSON.parse(v.content) as Json, params, deps.fhirBase?.(tenant));
    if (deps.store.kind === 'postgres') boundIndexRows(index);
    return index;
  };
  return { keys: sortKeysOf(v, rows, sort), id: v.id };
}

/**
 * The first `query.count` matches of `query` (a later page: `query.after` in `_id` or `_lastUpdated` order, where a
 * search across types reads a type from its first, or `query.afterKeys` in a sort on parameters) as of `asOf`: the
 * current versions unchanged since, and the versions then current of those changed since. Undefined when too many
 * versions were written since (PIN_MAX_CHANGES): the caller reads the page as the data is now.
 */
export function pinnedSearch(deps: FhirDeps, req: FhirRequest, query: SearchQuery, asOf: number): Promise<ResourceVersion[] | undefined> {
  return query.afterKeys === undefined ? pinnedKeyset(deps, req, query, asOf) : pinnedSorted(deps, req, query, asOf);
}

/**
 * A page in `_id` or `_lastUpdated` order as of `asOf` (pinnedSearch): the store reads the unchanged resources
 * (SearchQuery.asOf). Only the changed resources that fall within the page (after the cursor, before the last
 * unchanged row of a full page) are read and matched: in id order those are known by their ids alone, in
 * `_lastUpdated` order by their versions.
 */
async function pinnedKeyset(deps: FhirDeps, req: FhirRequest, query: SearchQuery, asOf: number): Promise<ResourceVersion[] | undefined> {
  const [changed, unchanged] = await Promise.all([
    changedSince(deps, req.tenant, query.type, asOf),
    deps.store.resources.search(req.tenant, { ...query, asOf }),
  ]);
  if (changed === undefined) return undefined;
  const order = comparer(query);
  const after = query.after;
  // A full page's last row bounds it: a changed resource placed beyond it is not on this page.
  const last = unchanged.length >= query.count ? unchanged[unchanged.length - 1] : undefined;
  const within = (v: Pick<ResourceVersion, 'id' | 'lastUpdated'>) => (after === undefined || order(v, after) > 0) && (last === undefined || order(v, last) < 0);
  const byId = keysetSort(query.sort)!.by === 'id';
  const asked = changed.filter((c) => c.versionId > 0 && (!byId || within({ id: c.id, lastUpdated: 0 })));
  const kept: ResourceVersion[] = [];
  for (const v of (await versions(deps, req.tenant, query.type, asked, asOf)).sort(order)) {
    if (within(v) && (await matches(deps, req.tenant, query, v))) kept.push(v);
  }
  if (kept.length === 0) return unchanged;
  return [...unchanged, ...kept].sort(order).slice(0, query.count);
}

/**
 * A page of a sort on parameters after its place as of `asOf` (pinnedSearch). The store reads the page as the data
 * is now, and the rows of resources changed since are left out (their keys now may not be their keys then): the
 * rest are unchanged since, with the keys they had then, in the database's order. Read beside the changes, a page
 * that loses rows so is read again with as many more as resources changed, which holds every unchanged row the
 * page needs. The versions then current of those changed are matched against the search, placed by their own keys
 * (sortPlace, compared as the database compares them: placeOrder), and those after the place and before the last
 * unchanged row of a full page are merged in.
 */
async function pinnedSorted(deps: FhirDeps, req: FhirRequest, query: SearchQuery, asOf: number): Promise<ResourceVersion[] | undefined> {
  const [changed, now] = await Promise.all([
    changedSince(deps, req.tenant, query.type, asOf),
    deps.store.resources.search(req.tenant, query),
  ]);
  if (changed === undefined) return undefined;
  if (changed.length === 0) return now;
  const since = new Set(changed.map((c) => c.id));
  let unchanged = now.filter((v) => !since.has(v.id));
  if (now.length >= query.count && unchanged.length < query.count) {
    unchanged = (await deps.store.resources.search(req.tenant, { ...query, count: query.count + changed.length })).filter((v) => !since.has(v.id));
  }
  unchanged = unchanged.slice(0, query.count);
  const order = placeOrder(query.sort);
  const placed = (v: ResourceVersion) => ({ v, at: sortPlace(deps, req.tenant, v, query.sort) });
  const last = unchanged.length >= query.count ? sortPlace(deps, req.tenant, unchanged[unchanged.length - 1]!, query.sort) : undefined;
  const kept: { v: ResourceVersion; at: SortPosition }[] = [];
  for (const p of (await versions(deps, req.tenant, query.type, changed.filter((c) => c.versionId > 0), asOf)).map(placed)) {
    if (order(p.at, query.afterKeys!) > 0 && (last === undefined || order(p.at, last) < 0) && (await matches(deps, req.tenant, query, p.v))) kept.push(p);
  }
  if (kept.length === 0) return unchanged;
  // Each kept version goes before the first unchanged row placed after it, found by halving: the places of a few
  // unchanged rows are read, not those of the whole page.
  const places = new Map<number, SortPosition>(last === undefined ? [] : [[unchanged.length - 1, last]]);
  const placeAt = (i: number) => places.get(i) ?? places.set(i, sortPlace(deps, req.tenant, unchanged[i]!, query.sort)).get(i)!;
  const out: ResourceVersion[] = [];
  let from = 0;
  for (const p of kept.sort((a, b) => order(a.at, b.at))) {
    let lo = from;
    for (let hi = unchanged.length; lo < hi; ) {
      const mid = (lo + hi) >> 1;
      if (order(placeAt(mid), p.at) < 0) lo = mid + 1;
      else hi = mid;
    }
    out.push(...unchanged.slice(from, lo), p.v);
    from = lo;
  }
  out.push(...unchanged.slice(from));
  return out.slice(0, query.count);
}

/**
 * The rows of a plain page (one store search: no core resources merged in, no reach judged after reading) of a
 * paged search: a later page given the first page's time (`asOf`; `later`: after a cursor's place, or a type a
 * search across types reads from its first on a later page) read as of it (pinnedSearch), or, where too many
 * versions were written since, as the data is now with a warning naming `_cursor`; any other page as the store
 * answers it. A later page whose cursor carried the write mark read before the first page's query is read as the
 * store answers it while the mark holds (nothing was written since, so the as-of read would answer the same:
 * pinMark), and carries the mark on; a first page reads the mark before its query and carries it where it is
 * exact; both only where the mark costs no round trip (marksPin).
 */
export async function pinnedRows(
  deps: FhirDeps, req: FhirRequest, query: SearchQuery, at: { asOf?: number; pin?: PagePin; later: boolean }, warnings: FhirIssue[],
): Promise<ResourceVersion[]> {
  const { asOf, pin } = at;
  if (pin !== undefined && asOf === undefined && marksPin(deps, pin)) {
    const { mark, exact } = await pinMark(deps, req.tenant, pin);
    if (exact) pin.carry = mark;
  }
  if (asOf !== undefined && at.later) {
    if (pin?.carried !== undefined && marksPin(deps, pin) && (await pinMark(deps, req.tenant, pin)).mark === pin.carried) {
      pin.carry = pin.carried;
      return deps.store.resources.search(req.tenant, query);
    }
    const pinned = await pinnedSearch(deps, req, query, asOf);
    if (pinned !== undefined) return pinned;
    const what = `More than ${PIN_MAX_CHANGES} versions of ${query.type} were written since this search's first page`;
    if (!warnings.some((w) => w.diagnostics?.startsWith(what))) {
      warnings.push(issue('warning', 'too-costly', `${what}: this page is read as the data is now, not as of the first page, and may repeat or leave out resources changed since (search again from the first page for a consistent read)`, ['_cursor']));
    }
  }
  return deps.store.resources.search(req.tenant, query);
}
