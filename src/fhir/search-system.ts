/**
 * Searches across types (FHIR R4 search.html: a search of all resource types, and compartment
 * search with `*`): `GET [base]?[params]`, `POST [base]/_search`, `GET Patient/{id}/*?[params]`. The
 * types are `_type`'s (in its order), or every type the token may search (a compartment's types for
 * `*`); each is searched with the same compiled engine as a type-level search, and the pages are
 * merged: by type and then id by default, by `_lastUpdated` (either direction, ties by type and id)
 * when sorted so. Parameters must mean something on every type searched (R4 requires them common to
 * the types); `_sort` by any other key is not supported across types. Later pages are read as of the first
 * page's time, each type's rows as its own search's are (src/fhir/search-pin.ts).
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import type { ResourceVersion, SearchCursor, SearchQuery } from '../store/types.ts';
import { requireAccess } from './access.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { hasCoreResources } from './core-layer.ts';
import { compartmentMembers, patientOf, type Compartment } from './compartments.ts';
import { ID_PATTERN, REST_RESOURCE_TYPES, hasEndpoint, isResourceType } from './resource-types.ts';
import {
  addIncludes, checkControlModifier, compileLinked, compileSearch, CONTROL, cursorContext, parseCount, parseInclude, possibleInclude, countInReach, queryRows, requiredCount, requireFewIncludes, storeQuery,
  keptInReach, rowsFilled, withinCompartment, withoutEmptyResultParams,
  type CompiledSearch, type Include, type SearchResult,
} from './search.ts';
import { isSearchParam } from './search-compile.ts';
import { checkOffset, searchAtOffset } from './search-offset.ts';
import { containedMode } from './search-contained.ts';
import { foreignInclude, ignoredInclude, unreachableRevinclude } from './revinclude-reach.ts';
import { includedSubset, shaper } from './subset.ts';
import { issue } from './outcome.ts';
import { carriedTotal, carryLinks, pageTotal, totalContext } from './search-total.ts';
import { searchesCore } from './core-search.ts';
import { pinMark, pinnedRows } from './search-pin.ts';
import type { PagePin } from './search-time.ts';

/** Where a page starts: after the resource of type index `t` with id `i` (and `_lastUpdated` `u` when sorted by it). */
interface Position {
  t: number;
  i: string;
  u?: number;
}

function decodePosition(raw: string, types: number): Position {
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Position;
    // Only what encodePosition writes, within what the databases take (a time past a bigint was a 500 on PostgreSQL).
    if (v !== null && Number.isSafeInteger(v.t) && v.t >= 0 && v.t < types && typeof v.i === 'string' && ID_PATTERN.test(v.i) && (v.u === undefined || Number.isSafeInteger(v.u))) return v;
  } catch {
    // fall through
  }
  throw new FhirError('invalid', 'Invalid _cursor: it is none this server gives; search again from the first page (without _cursor)', { expression: ['_cursor'] });
}

const encodePosition = (p: Position) => Buffer.from(JSON.stringify(p)).toString('base64url');

/** The resource types a `_type` value names (comma-separated, each once); another name is a 400. */
export function typeList(raw: string): string[] {
  const types = [...new Set(raw.split(',').map((t) => t.trim()).filter(Boolean))];
  for (const t of types) {
    if (!isResourceType(t)) throw new FhirError('invalid', `_type: '${t}' is not a resource type`, { expression: ['_type'] });
    if (!hasEndpoint(t)) throw new FhirError('invalid', `_type: ${t} has no RESTful endpoint and is not searched`, { expression: ['_type'] });
  }
  return types;
}

/** The types searched: `_type`'s (each must be searchable: 403 otherwise), or every one the token may search among `all`. */
function typesOf(req: FhirRequest, all: readonly string[], raw: string | null): string[] {
  if (raw === null) {
    const types = all.filter((t) => req.access.can(t, 's'));
    if (types.length === 0) throw new FhirError('forbidden', 'The access token allows searching no resource type');
    return types;
  }
  const wanted = typeList(raw);
  if (wanted.length === 0) throw new FhirError('invalid', '_type names no resource type', { expression: ['_type'] });
  for (const t of wanted) {
    if (!all.includes(t)) throw new FhirError('invalid', `_type: ${t} is not in the compartment searched`, { expression: ['_type'] });
    requireAccess(req.access, t, 's');
  }
  return wanted;
}

/** The name of a parameter key as the types define it (`subject` of `subject:Patient.name`, `name` of `name:exact`). */
const nameOf = (key: string) => key.split(/[:.]/, 1)[0]!;

/** Names that are not a type's own parameters but apply to every type (their values are checked per type). */
const ANY_TYPE = new Set(['_has', '_filter']);

/**
 * A parameter that some of the types searched have and others not is a 400: searched on those alone,
 * the others would come back unfiltered. (One none of them has is unknown, as for a type-level search.)
 */
function checkCommon(types: string[], params: URLSearchParams): void {
  for (const key of new Set(params.keys())) {
    const name = nameOf(key);
    if (CONTROL.has(name) || ANY_TYPE.has(name)) continue;
    const lacking = types.filter((t) => !isSearchParam(t, name));
    if (lacking.length > 0 && lacking.length < types.length) {
      const shown = lacking.length > 5 ? `${lacking.slice(0, 5).join(', ')} and ${lacking.length - 5} more` : lacking.join(', ');
      throw new FhirError('invalid', `Search parameter '${key}' is not defined for every type searched (not for ${shown}); name the types with _type`, { expression: [key] });
    }
  }
}

/** `_sort` across types: none (by type, then id) or `_lastUpdated` either way. */
function sortOf(raw: string | null): { descending: boolean } | undefined {
  if (raw === null || raw === '') return undefined;
  if (raw === '_lastUpdated' || raw === '-_lastUpdated') return { descending: raw.startsWith('-') };
  throw new FhirError('not-supported', `Across several types, _sort takes only _lastUpdated or -_lastUpdated (not '${raw}')`, { expression: ['_sort'] });
}

/**
 * A type's keyset position for a `_lastUpdated` page of the merged order (last updated, then type
 * index, then id; reversed when descending) that follows `p`: types before p's continue strictly
 * after its instant, p's own type after its row, types after p's from its instant on. Instants are
 * whole milliseconds, so "after `u`" is "from `u` + 1".
 */
function afterIn(t: number, p: Position): SearchCursor {
  if (t === p.t) return { lastUpdated: p.u!, id: p.i };
  // Ascending, (u + 1, '') is "from u + 1" and (u, '') "from u"; descending, "up to u" and "before u".
  return { lastUpdated: t < p.t ? p.u! + 1 : p.u!, id: '' };
}

/** Type queries in flight at once (PostgreSQL answers them on several connections; SQLite's reader in turn). */
const AT_ONCE = 8;

/** `fn` of each item, at most `n` at a time, the results in the items' order. */
export async function eachAtOnce<T, R>(items: readonly T[], n: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  }));
  return out;
}

export interface TypeSearch {
  type: string;
  query: SearchQuery;
}

/**
 * Searches `types` (undefined: every type the token may search; `compartment`: its member types,
 * `{type}/{id}/*`) with one query string, as one paged result; a later page as of `asOf`, the first page's time
 * its cursor carried, as a type's search reads one (src/fhir/search-pin.ts).
 */
export async function searchTypes(
  deps: FhirDeps, req: FhirRequest, given: URLSearchParams, strict: boolean, compartment?: Compartment, asOf?: number, pin?: PagePin,
): Promise<SearchResult> {
  return searchAtOffset(withoutEmptyResultParams(given), strict, (params) => pageTypes(deps, req, params, strict, compartment, asOf, pin));
}

/** A page of a search across types, from its start or its `_cursor` (searchTypes). */
async function pageTypes(
  deps: FhirDeps, req: FhirRequest, params: URLSearchParams, strict: boolean, compartment?: Compartment, asOf?: number, pin?: PagePin,
): Promise<SearchResult> {
  const { types, own, sort, limit, includes, revincludes, ignored, taken } = prepareAcross(req, params, strict, compartment);
  // Each type the tenant holds resources of (or the core has some: CodeSystem, ValueSet) is searched
  // with the same parameters, compiled and checked for that type; the first type is compiled in any
  // case, for the result parameters and the errors of a search that finds no type to run on.
  const held = new Set(await deps.store.resources.types(req.tenant));
  const warnings = new Map<string, FhirIssue>(ignored.map((w) => [w.diagnostics ?? JSON.stringify(w), w]));
  const searches: TypeSearch[] = [];
  let first: CompiledSearch | undefined;
  for (const type of types) {
    const runs = held.has(type) || (deps.core !== undefined && hasCoreResources(type));
    if (!runs && first !== undefined) continue;
    const compiled = await compileLinked(deps, req, type, own, strict);
    first ??= compiled;
    for (const w of compiled.warnings) warnings.set(w.diagnostics ?? JSON.stringify(w), w);
    if (!runs) continue;
    const query = await storeQuery(deps, req, type, withinCompartment(compiled, compartment), patientOf(compartment));
    if (query !== undefined) searches.push({ type, query });
  }
  const { summary, elements } = first!;
  const self = usedAcross(params, first!.self, limit, taken, strict, warnings);
  return pageAcross(deps, req, params, types, searches, {
    sort, limit, summary, elements, warnings: [...warnings.values()], includes, revincludes, self, ...(pin !== undefined && { pin }), ...(asOf !== undefined && { asOf }),
  });
}

/**
 * What a search across types checks before it reads (a transaction's GET entries, before they commit):
 * access, the types, the result parameters and each type's parameters, as searchTypes would find them.
 * Every type searched is compiled (searchTypes compiles those the tenant holds, which a transaction may
 * still change).
 */
export function checkSearchTypes(req: FhirRequest, given: URLSearchParams, compartment?: Compartment, now = Date.now()): void {
  const params = withoutEmptyResultParams(given);
  const { types, own } = prepareAcross(req, params, false, compartment);
  const cursor = params.get('_cursor');
  if (cursor !== null) decodePosition(cursor, types.length);
  for (const type of types) compileSearch(type, own, false, now);
}

/** The parts of a search across types read from its parameters alone: its types, own parameters, order, count and includes. */
function prepareAcross(req: FhirRequest, params: URLSearchParams, strict: boolean, compartment?: Compartment) {
  if (containedMode(params)) throw new FhirError('not-supported', '_contained searches one type (GET [base]/[type]?_contained=true)', { expression: ['_contained'] });
  const types = typesOf(req, compartment === undefined ? REST_RESOURCE_TYPES : [...compartmentMembers(compartment.type).keys()], params.get('_type'));
  checkOffset(params, strict);
  const own = new URLSearchParams();
  for (const [key, value] of params) {
    // `_type` takes no modifier; the result parameters' are checked as a type-level search checks them (compileSearch).
    if (key.startsWith('_type:')) checkControlModifier(key, '_type');
    if (key === '_type' || key === '_cursor' || key === '_sort' || key === '_count' || key.startsWith('_include') || key.startsWith('_revinclude')) continue;
    // Checked on the whole query (with its `_cursor`), which searchAtOffset reads it from.
    if (key.split(':', 1)[0] === '_offset') continue;
    own.append(key, value);
  }
  checkCommon(types, own);
  const sort = sortOf(params.get('_sort'));
  const limit = parseCount(params.get('_count'));
  const includes: Include[] = [];
  const revincludes: Include[] = [];
  const ignored: FhirIssue[] = [];
  /** The `_include` and `_revinclude` values taken (`key=value`), for the self link. */
  const taken: string[] = [];
  requireFewIncludes(params);
  for (const [key, raw] of params) {
    const name = key.split(':', 1)[0];
    if (name !== '_include' && name !== '_revinclude') continue;
    taken.push(`${key}=${raw}`);
    const reverse = name === '_revinclude';
    const iterate = key.endsWith(':iterate') || key.endsWith(':recurse');
    if (raw === '*') {
      // Every reference of the matches (of each type searched), or every one that refers to them;
      // iterated, one include of every type.
      if (reverse || iterate) (reverse ? revincludes : includes).push(parseInclude(types[0]!, key, raw, reverse));
      else includes.push(...types.map((t) => parseInclude(t, key, raw, false)));
      continue;
    }
    const source = raw.split(':', 1)[0]!;
    const foreign = foreignInclude(types, key, raw);
    if (foreign !== undefined) {
      ignoredInclude(foreign, key, strict, ignored);
      taken.pop();
      continue;
    }
    let inc = possibleInclude(parseInclude(reverse || iterate ? types[0]! : source, key, raw, reverse), key, raw, strict, ignored);
    // A `_revinclude` that can refer to none of the types searched adds nothing (as on one type: reachingRevinclude).
    if (inc && reverse) {
      const whys = types.map((t) => unreachableRevinclude(t, inc!));
      if (whys.every((w) => w !== undefined)) {
        const searched = types.length > 5 ? `the ${types.length} types searched` : types.join(', ');
        inc = ignoredInclude(`${key} '${raw}' cannot include anything on ${searched}: ${types.length > 1 ? `on ${types[0]}, ` : ''}${whys[0]}`, key, strict, ignored);
      }
    }
    if (inc) (reverse ? revincludes : includes).push(inc);
    else taken.pop();
  }
  return { types, own, sort, limit, includes, revincludes, ignored, taken };
}

/**
 * The self link of a search across types: "the parameters that were actually used to process a search"
 * (R4 search.html), in the order given: `_type`, the first `_sort` and `_count` (as applied: at most
 * MAX_COUNT; a repeat is a warning, or a 400 when `strict`), the includes `taken`, and the parameters the
 * types' searches used (`used`, a type-level search's self link: no ignored parameter).
 */
function usedAcross(params: URLSearchParams, used: URLSearchParams, limit: number, taken: string[], strict: boolean, warnings: Map<string, FhirIssue>): URLSearchParams {
  const rest = [...used].map(([k, v]) => `${k}=${v}`);
  const self = new URLSearchParams();
  const once = new Set<string>();
  for (const [key, value] of params) {
    if (key === '_sort' || key === '_count') {
      if (once.has(key)) {
        const text = `'${key}' is given more than once: its first value '${params.get(key)}' is used, not '${value}'`;
        if (strict) throw new FhirError('invalid', text, { expression: [key] });
        warnings.set(text, issue('warning', 'not-supported', text, [key]));
        continue;
      }
      once.add(key);
      self.append(key, key === '_count' ? String(limit) : value);
      continue;
    }
    if (key === '_type') self.append(key, value);
    // One taken include (or parameter used) stands for one occurrence of it.
    const from = key.startsWith('_include') || key.startsWith('_revinclude') ? taken : rest;
    const at = from.indexOf(`${key}=${value}`);
    if (at >= 0) {
      from.splice(at, 1);
      self.append(key, value);
    }
  }
  return self;
}

/** What pageAcross pages besides the searches: the result parameters, as the caller parsed them. */
export interface AcrossOptions {
  /** `_lastUpdated` order (either way); none: type by type, each by id. */
  sort?: { descending: boolean };
  limit: number;
  summary: CompiledSearch['summary'];
  elements?: CompiledSearch['elements'];
  warnings: FhirIssue[];
  includes: Include[];
  revincludes: Include[];
  /** The parameters used (the self link; the next link adds its `_cursor`). */
  self: URLSearchParams;
  /**
   * The paging's pin (pagedAt): with it, each type's rows of a later page are read as of the first page's time
   * (`asOf`) where a type's search reads them so (pinnedRows); without it, as the data is now.
   */
  pin?: PagePin;
  asOf?: number;
}

/**
 * One page of several searches (each of one of `types`, in their order; a type searched once): merged
 * as searchTypes describes, with `_cursor` a position among `types`, `_total`, includes and the shape of
 * `_summary` and `_elements`.
 */
export async function pageAcross(
  deps: FhirDeps, req: FhirRequest, given: URLSearchParams, types: string[], searches: TypeSearch[], opts: AcrossOptions,
): Promise<SearchResult> {
  const { sort, limit, summary, elements, includes, revincludes } = opts;
  const { params, carried } = carriedTotal(given);
  const self = opts.self;
  const result: SearchResult = { rows: [], included: [], warnings: opts.warnings, self };
  const total = params.get('_total');
  // Undefined when a type's count is too costly (countInReach: Binaries the token reaches in part).
  const countAll = async (counter = countInReach) => {
    const counts = await eachAtOnce(searches, AT_ONCE, (s) => counter(deps, req, s.query));
    return counts.includes(undefined) ? undefined : counts.reduce((a: number, b) => a + b!, 0);
  };
  if (summary === 'count' || limit === 0) return { ...result, total: (await countAll(requiredCount))! };
  const cursor = params.get('_cursor');
  const at = cursor === null ? undefined : decodePosition(cursor, types.length);
  if (at !== undefined && (at.u === undefined) !== (sort === undefined)) throw new FhirError('invalid', "Invalid _cursor: it is not a place in this search's order", { expression: ['_cursor'] });
  // `_total` is counted beside the page's reads, or carried from the page before while the tenant's data is
  // unchanged (search-total.ts), sealed for the types searched and each one's query; a failed page leaves the
  // count's outcome unread, so it is caught here.
  const context = () => totalContext(req, cursorContext(req, types.join(',')), self, searches.map((s) => s.query), undefined);
  const pin = opts.pin;
  const mark = pin === undefined ? undefined : () => pinMark(deps, req.tenant, pin).then((m) => m.mark);
  const counting = total === 'accurate' || total === 'estimate' ? (await pageTotal(deps, req, carried, context(), () => countAll(), mark)).counting : undefined;
  counting?.catch(() => undefined);
  const index = new Map(types.map((t, i) => [t, i]));
  // Binaries whose securityContext the request may not read, and Provenance the index found by a target
  // naming a version outside a patient's token's reach, are read past (keptInReach, rowsFilled), so that
  // the page and its `next` link tell nothing of them.
  // A type's rows on a later page are read as of the first page's time (pinnedRows: every type's, from its own
  // position or its first), but for those merged with the core resources or kept in reach, as a type's search pages them.
  const rowsOf = async (query: SearchQuery) => {
    const keep = keptInReach(deps, req, query.type, query.compartment);
    if (keep !== undefined) return (await rowsFilled(deps, req, query, keep)).map((k) => k.row);
    if (pin === undefined || searchesCore(deps, query)) return queryRows(deps, req.tenant, query);
    return pinnedRows(deps, req, query, { pin, ...(opts.asOf !== undefined && { asOf: opts.asOf }), later: at !== undefined }, result.warnings);
  };
  /** A row of the merged page: its type's index and its place among its type's rows (their store order). */
  const page: { row: ResourceVersion; t: number; n: number }[] = [];
  if (sort === undefined) {
    // Type by type, each in id order, until the page and one more are found: one type first, then
    // twice as many at once each round (up to AT_ONCE), so that a page the first type fills reads no
    // other, and a sparse compartment's many empty types are read several at a time.
    const rest = searches.filter((s) => at === undefined || index.get(s.type)! >= at.t);
    for (let from = 0, width = 1; from < rest.length && page.length <= limit; from += width, width = Math.min(2 * width, AT_ONCE)) {
      const need = limit + 1 - page.length;
      const found = await eachAtOnce(rest.slice(from, from + width), AT_ONCE, (s) => {
        const t = index.get(s.type)!;
        const after = at !== undefined && t === at.t ? { lastUpdated: 0, id: at.i } : undefined;
        return rowsOf({ ...s.query, sort: [], count: need, ...(after ? { after } : {}) });
      });
      found.forEach((rows, k) => rows.forEach((row, n) => page.push({ row, t: index.get(rest[from + k]!.type)!, n })));
    }
  } else {
    // Every type's first rows after the position, merged by (last updated, type, id).
    const key = { by: 'lastUpdated' as const, descending: sort.descending };
    const found = await eachAtOnce(searches, AT_ONCE, (s) =>
      rowsOf({ ...s.query, sort: [key], count: limit + 1, ...(at ? { after: afterIn(index.get(s.type)!, at) } : {}) }));
    found.forEach((rows, k) => rows.forEach((row, n) => page.push({ row, t: index.get(searches[k]!.type)!, n })));
    // A type's rows keep the store's order (its keyset continues from the last one kept).
    const sign = sort.descending ? -1 : 1;
    page.sort((a, b) => sign * (a.row.lastUpdated - b.row.lastUpdated || a.t - b.t) || a.n - b.n);
  }
  const kept = page.slice(0, limit);
  if (page.length > limit) {
    const last = kept[kept.length - 1]!;
    result.next = encodePosition({ t: last.t, i: last.row.id, ...(sort ? { u: last.row.lastUpdated } : {}) });
  }
  const rows = kept.map((x) => x.row);
  result.rows = rows;
  // A page after the first links itself with its cursor, and the first page, as a type's search does.
  if (cursor !== null) result.page = { cursor };
  const counted = await counting;
  if (counted?.total !== undefined) result.total = counted.total;
  else if (total !== 'none' && at === undefined && !result.next) result.total = rows.length;
  await carryLinks(result, counted);
  if (includes.length || revincludes.length) {
    const inc = await addIncludes(deps, req, { includes, revincludes }, rows);
    result.included = inc.included;
    result.warnings = [...result.warnings, ...inc.warnings];
  }
  const shape = shaper({ summary, elements });
  if (shape) result.shape = shape;
  const includedShape = result.included.length ? shaper(includedSubset({ summary, elements })) : undefined;
  if (includedShape) result.includedShape = includedShape;
  return result;
}
