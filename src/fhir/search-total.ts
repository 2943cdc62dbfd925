/**
 * A search's `_total` carried from page to page (issue #14): counted once, then sealed into the `next` link's
 * `_cursor` with the tenant's write mark read before that count (ResourceRepo.writeMark). A later page reads the
 * mark again (one indexed read of at most sixteen rows) and gives the carried total while the mark has not moved:
 * no transaction changed the tenant's resources or index rows since, so a count now would answer the same.
 * Otherwise it counts again, and carries that count on. HAPI FHIR keeps a search's total with its cached result
 * list (which writes since do not change, for the cache's lifetime); Blaze pages every page of a search against the
 * database as of the first (`__t`). Here every page's total is the data's as the page is read, as before.
 *
 * The carried part follows the page's own cursor after a `*` (no cursor holds one; unreserved in a query string's
 * form encoding): `{place}*{sealed}`, the first page's time after a `~` around both (search-time.ts). It is sealed
 * (src/auth/sealed.ts) for the search: the cursor's tenant, type and caller, the token's scopes, the compartment,
 * the `self` link's parameters and the store query without its place, which holds what the page's `now` decides
 * (an `ap` date's range). So a total is given again only to the search that counted it, by a caller who could
 * count it; anything else (altered, another search's, a key since rotated) is counted again, never refused.
 */
import { createHash } from 'node:crypto';
import type { SearchQuery } from '../store/types.ts';
import type { Compartment } from './compartments.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import type { PageLinks } from './search.ts';

const CARRIED = '*';

/** A count and the write mark read before it. */
interface Counted {
  total: number;
  mark: string;
}

/** A page's total and what its next link may carry (none where the count was too costly, or nothing can seal it). */
export interface PageTotal {
  total: number | undefined;
  /** The sealed total for the next link's cursor. */
  carry?: () => Promise<string>;
}

/**
 * The query with its `_cursor` split from the total it carries: the page's own cursor, as compileSearch reads it,
 * and the sealed total (undefined where none is carried).
 */
export function carriedTotal(params: URLSearchParams): { params: URLSearchParams; carried?: string } {
  const raw = params.get('_cursor');
  const at = raw === null ? -1 : raw.indexOf(CARRIED);
  if (at < 0) return { params };
  const own = new URLSearchParams(params);
  own.set('_cursor', raw!.slice(0, at));
  return { params: own, carried: raw!.slice(at + 1) };
}

/** `next` carrying `sealed` (carriedTotal reads it back). */
export function carrying(next: string, sealed: string): string {
  return `${next}${CARRIED}${sealed}`;
}

/** JSON with sets and maps as arrays (a CodeSet's codes), so that the digest tells them apart. */
function stable(_key: string, value: unknown): unknown {
  if (value instanceof Set) return [...value];
  if (value instanceof Map) return [...value.entries()];
  if (typeof value === 'bigint') return value.toString();
  return value;
}

/** A store query without its place or page size: what its count depends on. */
function counted(query: SearchQuery): Omit<SearchQuery, 'after' | 'afterKeys' | 'offset' | 'count'> {
  const { after: _after, afterKeys: _afterKeys, offset: _offset, count: _count, ...rest } = query;
  return rest;
}

/**
 * What a carried total is sealed for: the cursor's binding (`context`: tenant, type or types, caller), the token's
 * scopes, the compartment searched, the `self` parameters and a digest of the store query (a search across types:
 * of each type's, in order) without its place or page size.
 */
export function totalContext(req: FhirRequest, context: string, self: URLSearchParams, query: SearchQuery | readonly SearchQuery[], within: Compartment | undefined): string {
  const queries = Array.isArray(query) ? query.map(counted) : counted(query as SearchQuery);
  const digest = createHash('sha256').update(JSON.stringify(queries, stable)).digest('base64url');
  const scopes = req.access.scopes === undefined ? null : [...req.access.scopes].sort();
  return JSON.stringify(['total', context, scopes, within === undefined ? null : `${within.type}/${within.id}`, self.toString(), digest]);
}

/** The carried count, when it opens for `context` and holds a total and a mark. */
async function opened(deps: FhirDeps, carried: string | undefined, context: string): Promise<Counted | undefined> {
  if (carried === undefined || carried === '' || deps.cursors === undefined) return undefined;
  const text = await deps.cursors.open(carried, context);
  if (text === undefined) return undefined;
  try {
    const v = JSON.parse(text) as { t?: unknown; m?: unknown };
    if (Number.isSafeInteger(v.t) && (v.t as number) >= 0 && typeof v.m === 'string') return { total: v.t as number, mark: v.m };
  } catch {
    // not one this module sealed: counted again
  }
  return undefined;
}

/**
 * A page's `_total` under way: the carried one while the tenant's write mark is the one read before it was
 * counted, else `count()` (undefined: too costly), with the mark read before it. The mark is read first (the carried
 * count opened beside that read, not after it; this resolves once the count has begun, so that the page's read runs
 * beside it), so that a write committed between the mark and the count moves it and the next page counts again.
 * `readMark` reads it: the one read for the request's pinned paging where there is one (pinMark, read once, before
 * this page's and any earlier page's statements, so that it is as safe for the count).
 */
export async function pageTotal(
  deps: FhirDeps, req: FhirRequest, carried: string | undefined, context: string, count: () => Promise<number | undefined>,
  readMark: () => Promise<string> = () => deps.store.resources.writeMark(req.tenant),
): Promise<{ counting: Promise<PageTotal> }> {
  const [mark, earlier] = await Promise.all([readMark(), opened(deps, carried, context)]);
  if (earlier !== undefined && earlier.mark === mark) return { counting: Promise.resolve({ total: earlier.total, carry: sealer(deps, context, earlier) }) };
  return {
    counting: count().then((total) => (total === undefined ? { total } : { total, carry: sealer(deps, context, { total, mark }) })),
  };
}

/**
 * `result`'s links carrying the page's total (`counted`, where it may be carried): its `next`, and the `self` and
 * `previous` cursors of a page asked with one (a `previous` that is the first page, without a cursor, counts anew).
 */
export async function carryLinks(result: { next?: string; page?: PageLinks }, counted: PageTotal | undefined): Promise<void> {
  const page = result.page;
  const linked = result.next !== undefined || page?.cursor !== undefined || typeof page?.previous === 'string';
  if (counted?.carry === undefined || !linked) return;
  const sealed = await counted.carry();
  if (result.next !== undefined) result.next = carrying(result.next, sealed);
  if (page === undefined) return;
  const carried: PageLinks = { ...page };
  if (page.cursor !== undefined) carried.cursor = carrying(page.cursor, sealed);
  if (typeof page.previous === 'string') carried.previous = carrying(page.previous, sealed);
  result.page = carried;
}

/** Seals `c` for the next link (none where the app has no sealer). */
function sealer(deps: FhirDeps, context: string, c: Counted): (() => Promise<string>) | undefined {
  const cursors = deps.cursors;
  return cursors === undefined ? undefined : () => cursors.seal(JSON.stringify({ t: c.total, m: c.mark }), context);
}
