import { FhirError, type FhirIssue } from '../errors.ts';
import type { Condition, ResourceVersion, ResourceWriter, SearchCursor, SearchQuery, SortKey, SortPosition, TextQuery } from '../store/types.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { binaryReachLimited, listsUnfiled, rowsInReach, vreadResource, writerContextReads } from './crud.ts';
import { enumerationAccess, requireAccess, type Access } from './access.ts';
import { inPatientCompartment, paramOf, paramsOf, referrersOf, type ParamDefinition } from './definitions.ts';
import { evaluatePath } from './fhirpath.ts';
import { indexEntries, referenceValues } from './indexer.ts';
import { isAbsoluteReference, parseReference } from './references.ts';
import { issue } from './outcome.ts';
import { patientRecords, provenanceRowsInReach, reachCondition, widenedPatient, writerTargetReads } from './provenance-reach.ts';
import { foreignInclude, ignoredInclude, reachingRevinclude } from './revinclude-reach.ts';
import { hasPending, hierarchyParam, parameterCondition, parseSort, referenceTargets, UnknownParameterError, type CodeSet, type HierarchyCondition, type PendingCondition } from './search-compile.ts';
import { canonicalCondition, isCanonicalType, namingCanonicals } from './search-canonical.ts';
import { containedMode, searchContained } from './search-contained.ts';
import { membership, patientOf, type Compartment } from './compartments.ts';
import { filterCondition } from './search-filter.ts';
import { EmptyValue, MAX_SEARCH_VALUES } from './search-values.ts';
import { ID_PATTERN, isResourceType } from './resource-types.ts';
import { checkRestType } from './resource.ts';
import { includedSubset, parseSubset, shaper, type ElementNames, type Shape, type SummaryMode } from './subset.ts';
import { keysetSort, withImpliedDrivers } from '../store/search-sql.ts';
import { countWithCore, findResources, searchesCore, searchWithCore } from './core-search.ts';
import { hasCoreResources } from './core-layer.ts';
import { CONTROL_CHARACTER } from './validation/primitives.ts';
import { TEXT_MAX_QUERY_WORDS } from './text-index.ts';
import { checkOffset, MAX_OFFSET, parseOffset, searchAtOffset } from './search-offset.ts';
import { carriedTotal, carryLinks, pageTotal, totalContext } from './search-total.ts';
import { stepAsOf } from './hierarchy-as-of.ts';
import { pinMark, pinnedRows, sortPlace } from './search-pin.ts';
import type { PagePin } from './search-time.ts';

export const DEFAULT_COUNT = 50;
export const MAX_COUNT = 1000;
/** At most this many resources are added by `_include` and `_revinclude` to one page. */
export const MAX_INCLUDES = 1000;
/**
 * `:iterate` follows includes until a round adds nothing (search.html: "iterate until no more"), this many
 * rounds past the first at most; each adds one included resource at least, of MAX_INCLUDES. Past it, a
 * warning says that resources further along may be left out, when one more round (read, not added) finds some.
 */
export const MAX_ITERATIONS = 100;
/**
 * The most `_include` and `_revinclude` parameters one search takes (`Type:*` and `*` name many
 * references at once): each is followed from every resource of a page, at every round.
 */
export const MAX_INCLUDE_PARAMETERS = 64;

/** A 400 (`too-costly`) for a query of more than MAX_INCLUDE_PARAMETERS `_include` and `_revinclude` parameters. */
export function requireFewIncludes(params: URLSearchParams): void {
  let n = 0;
  for (const key of params.keys()) {
    const name = key.split(':', 1)[0];
    if (name === '_include' || name === '_revinclude') n++;
  }
  if (n > MAX_INCLUDE_PARAMETERS) {
    throw new FhirError('invalid', `The search has ${n} _include and _revinclude parameters; at most ${MAX_INCLUDE_PARAMETERS} are supported`, { issueCode: 'too-costly', expression: ['_include'] });
  }
}

/** Result parameters (search.html 3.1.1.6); they select and shape results rather than filter them. */
export const CONTROL = new Set(['_count', '_offset', '_sort', '_cursor', '_total', '_format', '_pretty', '_summary', '_elements', '_include', '_revinclude', '_contained', '_containedType']);
/** Result parameters read once (their first occurrence): a repeat is not applied, so not in the `self` link. */
const SINGLE = new Set(['_count', '_offset', '_sort', '_total', '_format', '_pretty', '_summary', '_contained', '_containedType']);
/** The result parameters that take a modifier: `:iterate` (and R3's `:recurse`), which parseInclude reads. */
const MODIFIED_CONTROL = new Set(['_include', '_revinclude']);

/**
 * A result parameter `key` (its name `name`) with a modifier it does not take (`_sort:desc`, `_count:x`)
 * is a 400 naming it as written: read by its bare name, it would be dropped without a word.
 */
export function checkControlModifier(key: string, name: string): void {
  if (key === name || MODIFIED_CONTROL.has(name)) return;
  throw new FhirError('invalid', `Unknown modifier '${key.slice(name.length)}' for '${name}', which takes none ('${key}')`, { expression: [key] });
}
/** Parameters defined for all resources that Cinder does not search. */
const UNSUPPORTED = new Set(['_query']);

export interface Include {
  /** The type whose reference parameter is followed (`*`: any). */
  source: string;
  param: string;
  target?: string;
  iterate: boolean;
}

export interface CompiledSearch {
  query: SearchQuery;
  pending: PendingCondition[];
  warnings: FhirIssue[];
  /** The query string that reproduces this page (for the `self` link). */
  self: URLSearchParams;
  /** Where this page starts among the core matches, for sorts paged by offset (core-search.ts). */
  coreOffset?: number;
  /**
   * Where this page starts among the matches, for a sort on parameters paged by its keys (SortPosition):
   * as many as the pages before held, for its `previous` link (an offset, which writes since may shift).
   */
  sortedOffset?: number;
  /**
   * Where this page starts among the matches, for a search paged by its last row's keys (`_id`,
   * `_lastUpdated`) whose cursor carries the matches before it, for its `previous` link (by `_offset`).
   */
  keysetOffset?: number;
  /** The `_cursor` this page was asked with. */
  cursor?: string;
  total: string | null;
  summary: SummaryMode | null;
  elements?: ElementNames;
  includes: Include[];
  revincludes: Include[];
}

export interface SearchResult {
  rows: ResourceVersion[];
  /** Resources added by `_include` / `_revinclude` (search mode `include`). */
  included: ResourceVersion[];
  /** Cursor for the next page, when there may be one. */
  next?: string;
  total?: number;
  /** Issues about ignored parameters (lenient handling). */
  warnings: FhirIssue[];
  self: URLSearchParams;
  /**
   * A page after the first: its own cursor (in the `self` link, with a `first` link without it), and,
   * paged by offset, the previous page's (null: the first page, which has none).
   */
  page?: PageLinks;
  /** Rewrites each match's JSON for `_summary` / `_elements`, when asked for. */
  shape?: Shape;
  /** Rewrites each included resource's JSON: `_summary`, and `_elements` by its type-prefixed names alone (includedSubset). */
  includedShape?: Shape;
  /** The store query the page's matches were read by (none when the token sees none of the type), for a transaction to search again (HeldSearches). */
  query?: SearchQuery;
}

/** A page's start: a keyset position, or for other sorts an offset (with the core matches' own, see core-search.ts). */
export type Cursor = { kind: 'keyset'; at: SearchCursor; before?: number } | { kind: 'offset'; offset: number; core?: number } | { kind: 'sorted'; at: SortPosition; offset: number };

/** A position in a sort on parameters, with the matches before it (the next page's offset, for its `previous` link). */
export type SortedCursor = SortPosition & { offset: number };

/** The links of a page asked with a cursor (SearchResult.page). */
export interface PageLinks {
  /** The page's own cursor (its `self` link's). */
  cursor?: string;
  /** The previous page's cursor; null for the first page; absent where it is not known (keyset paging, core matches). */
  previous?: string | null;
  /**
   * A page paged by its last row's keys: the previous page by `_offset` (the matches before it, which its
   * cursor carries, less a page; null: the first page). Absent where not known or past MAX_OFFSET.
   */
  previousOffset?: number | null;
  /**
   * A page asked by `_offset` (src/fhir/search-offset.ts): its `self` link carries `_offset` (`at`), its
   * `previous` link the offset a page before (null: the first page; absent for the first page itself).
   */
  offset?: { at: number; previous?: number | null };
}

/**
 * A page's own cursor, and the previous page's where the pages go by offset: `count` before it, or the
 * first page. Keyset pages (`_sort` on `_id` or `_lastUpdated`) name only the last row before them.
 */
function pageLinks(compiled: CompiledSearch): PageLinks {
  const { query } = compiled;
  const page: PageLinks = { cursor: compiled.cursor! };
  const at = compiled.sortedOffset ?? (compiled.coreOffset === undefined ? query.offset : undefined);
  // The first page itself (a cursor of offset 0, as a GraphQL Connection's `previous` gives) has none.
  if (at !== undefined && at > 0) {
    const before = Math.max(0, at - query.count);
    page.previous = before === 0 ? null : encodeCursor({ offset: before });
  }
  // A keyset page has no offset cursor (its order is read from a row's keys), but `_offset` reaches the page before.
  const keyed = compiled.keysetOffset;
  if (keyed !== undefined && keyed > 0 && keyed - query.count <= MAX_OFFSET) page.previousOffset = keyed <= query.count ? null : keyed - query.count;
  return page;
}

/**
 * Encodes a keyset position (`_sort` on `_id` or `_lastUpdated`: a time and an id, and the matches before
 * the next page where known, for its `previous` link) or an offset as a `_cursor` value: base64url JSON,
 * which tells nothing the page does not. A place in a sort on parameters holds the last match's values,
 * and is sealed instead (sortedCursor).
 */
export function encodeCursor(c: (SearchCursor & { before?: number }) | { offset: number; core?: number }): string {
  const value = 'offset' in c
    ? (c.core === undefined ? { o: c.offset } : { o: c.offset, c: c.core })
    : c.before === undefined ? [c.lastUpdated, c.id] : [c.lastUpdated, c.id, c.before];
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

const isCount = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= 0;

/** A `_cursor` that does not open (sealedCursor): its text says nothing of what it held, nor echoes it. */
const unopened = () => new FhirError('invalid',
  'The _cursor was not given by this server for a search of this type by this client (its tenant, user and patient), or was given under a signing key since rotated: search again from the first page (without _cursor)',
  { expression: ['_cursor'] });

/** A keyset position or an offset (encodeCursor); a sealed place (a dot, which no base64url holds) is opened by openCursor. */
function decodeCursor(raw: string): Cursor {
  if (raw.includes('.')) throw unopened();
  try {
    const v = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
    // Only what encodeCursor writes, within what the databases take (an offset of 1e300 was a 500).
    // The matches before the page (a third member) are in the cursors given since; earlier ones had none.
    if (Array.isArray(v) && (v.length === 2 || (v.length === 3 && isCount(v[2]))) && Number.isSafeInteger(v[0]) && typeof v[1] === 'string' && ID_PATTERN.test(v[1])) {
      return v.length === 3 ? { kind: 'keyset', at: { lastUpdated: v[0], id: v[1] }, before: v[2] } : { kind: 'keyset', at: { lastUpdated: v[0], id: v[1] } };
    }
    if (v && isCount(v.o) && v.c === undefined && v.k === undefined) return { kind: 'offset', offset: v.o };
    if (v && isCount(v.o) && isCount(v.c)) return { kind: 'offset', offset: v.o, core: v.c };
  } catch {
    // fall through to the error below
  }
  throw new FhirError('invalid', 'Invalid _cursor: it is none this server gives; search again from the first page (without _cursor)', { expression: ['_cursor'] });
}

/** The sealed text of a place in a sort on parameters: an open range's end (a key of ±Infinity) as a string, JSON having no infinities. */
function sortedText(c: SortedCursor): string {
  return JSON.stringify({ k: c.keys.map((v) => (v === Infinity ? 'inf' : v === -Infinity ? '-inf' : v)), i: c.id, o: c.offset });
}

/** The place sortedText wrote, or undefined for any other text. */
function sortedPlace(text: string): Cursor | undefined {
  try {
    const v = JSON.parse(text);
    if (v && isCount(v.o) && Array.isArray(v.k) && typeof v.i === 'string' && ID_PATTERN.test(v.i)) {
      const keys = (v.k as unknown[]).map((x) => (x === 'inf' ? Infinity : x === '-inf' ? -Infinity : x));
      if (keys.every((x) => x === null || typeof x === 'string' || (typeof x === 'number' && !Number.isNaN(x)))) {
        return { kind: 'sorted', at: { keys: keys as SortPosition['keys'], id: v.i }, offset: v.o };
      }
    }
  } catch {
    // fall through
  }
  return undefined;
}

/**
 * What a sealed `_cursor` is bound to (authenticated with it): the tenant, the type searched and who searched it (the
 * client, the signed-in user, the patient in context). The place it holds is a match's values: opened in a search
 * of another type, or by another caller over resources of its own choosing, the page it starts would tell where
 * those values fall among known ones (written at will, a bisection recovers them).
 */
export function cursorContext(req: FhirRequest, type: string): string {
  return JSON.stringify([req.tenant, type, req.access.clientId, req.access.user?.id ?? null, req.access.patient ?? null]);
}

/**
 * The place in a sort on parameters a sealed `_cursor` holds (sortedCursor), opened with its binding (cursorContext);
 * undefined for no `_cursor` or a plain one (compileSearch decodes it). One that does not open is a 400.
 */
export async function openCursor(deps: FhirDeps, req: FhirRequest, type: string, raw: string | null): Promise<Cursor | undefined> {
  if (raw === null || !raw.includes('.')) return undefined;
  const text = deps.cursors === undefined ? undefined : await deps.cursors.open(raw, cursorContext(req, type));
  const place = text === undefined ? undefined : sortedPlace(text);
  if (place === undefined) throw unopened();
  return place;
}

/** Whether a cursor's keys fit `sort`: one per key, a number (or none) for a range's, a string (or none) for the others'. */
function fitsSort(at: SortPosition, sort: SortKey[]): boolean {
  if (keysetSort(sort) !== undefined || at.keys.length !== sort.length) return false;
  return sort.every((k, i) => {
    const v = at.keys[i];
    if (k.by === 'id') return typeof v === 'string';
    if (k.by === 'lastUpdated') return Number.isSafeInteger(v);
    return v === null || (k.table === 'search_range' ? typeof v === 'number' : typeof v === 'string');
  });
}

/**
 * The place of `row`, a page's last match, in the page's sort on parameters: the next page's cursor. The
 * keys are read from the resource's index rows as the store wrote them (under the tenant's base; on
 * PostgreSQL a long string in its bounded form, as its index holds it).
 */
function sortedCursor(deps: FhirDeps, req: FhirRequest, type: string, row: ResourceVersion, sort: SortKey[], offset: number): string | Promise<string> {
  // The keys are the match's values (PHI: names, birth dates, codes), never to be read in a URL: sealed for this search's type and caller.
  if (deps.cursors === undefined) return encodeCursor({ offset });
  return deps.cursors.seal(sortedText({ ...sortPlace(deps, req.tenant, row, sort), offset }), cursorContext(req, type));
}

export function parseCount(raw: string | null): number {
  if (raw === null) return DEFAULT_COUNT;
  if (!/^\d+$/.test(raw)) throw new FhirError('invalid', `Invalid _count '${raw}': expected a non-negative integer`, { expression: ['_count'] });
  // More than the most a page holds is that most (search.html: the server may return fewer).
  return raw.length > 6 ? MAX_COUNT : Math.min(Number(raw), MAX_COUNT);
}

/** `_include=Source:param[:Target]` or `*`, with `:iterate` on the key. */
export function parseInclude(type: string, key: string, raw: string, reverse: boolean): Include {
  const where = { expression: [key] };
  const modifier = key.includes(':') ? key.slice(key.indexOf(':') + 1) : undefined;
  if (modifier !== undefined && modifier !== 'iterate' && modifier !== 'recurse') {
    throw new FhirError('invalid', `Unknown modifier ':${modifier}' for '${key.split(':', 1)[0]}': expected :iterate (or R3's :recurse)`, where);
  }
  const iterate = modifier !== undefined;
  // `*`: every reference parameter of the matches (`_include`), or that refers to them (`_revinclude`);
  // iterated, of the resources included too, whatever their type.
  if (raw === '*') return { source: reverse || iterate ? '*' : type, param: '*', iterate };
  const parts = raw.split(':');
  const [source, param, target] = parts;
  if (parts.length > 3 || !source || !param || !isResourceType(source)) throw new FhirError('invalid', `Invalid ${key} '${raw}': expected Type:parameter[:TargetType]`, where);
  if (!reverse && !iterate && source !== type) throw new FhirError('invalid', `${key} '${raw}': ${source} is not the type searched (${type}); add :iterate`, where);
  // `Type:*`: every reference parameter of that type (search.html, "Including other resources").
  const def = param === '*' ? undefined : paramOf(source, param);
  if (param !== '*' && def?.type !== 'reference') throw new FhirError('invalid', `${key} '${raw}': '${param}' is not a reference parameter of ${source}`, where);
  if (target !== undefined && !isResourceType(target)) throw new FhirError('invalid', `${key} '${raw}': '${target}' is not a resource type`, where);
  return target ? { source, param, target, iterate } : { source, param, iterate };
}

/**
 * `inc` (`key=raw`) unless its `:Type` is one its parameter cannot refer to (`Observation:subject:Practitioner`,
 * `Patient:*:Observation`), which would include nothing: then a 400 naming `key` when `strict`, else a
 * warning in `warnings` and nothing, as for other parameters ignored.
 */
export function possibleInclude(inc: Include, key: string, raw: string, strict: boolean, warnings: FhirIssue[]): Include | undefined {
  const target = inc.target;
  if (target === undefined) return inc;
  const defs = inc.param === '*' ? referenceParamsOf(inc.source) : [paramOf(inc.source, inc.param)!];
  const targets = defs.map(referenceTargets);
  if (targets.some((t) => t.length === 0 || t.includes(target))) return inc;
  const why = inc.param === '*'
    ? `no reference parameter of ${inc.source} refers to ${target}`
    : `'${inc.param}' of ${inc.source} does not refer to ${target} (its targets: ${targets[0]!.join(', ')})`;
  return ignoredInclude(`${key} '${raw}': ${why}`, key, strict, warnings);
}

/**
 * The most tests one search holds (each parameter, each test of a `_filter`, each step of a chain or
 * `_has`; a parameter's `,` values are one test): each is a subquery of the statement, and SQLite
 * refuses a statement of about 500 (with their values, PostgreSQL planned one of 990 for 9 s).
 */
export const MAX_SEARCH_TESTS = 100;

/**
 * `leaf` summed over a search's conditions, through `or`, `and` and `not`, and through the conditions of
 * each chain or `_has` step, which itself counts `step`.
 */
function sumOver(conditions: PendingCondition[], leaf: (c: PendingCondition) => number, step: number): number {
  let n = 0;
  for (const c of conditions) {
    switch (c.kind) {
      case 'chain': case 'has': n += sumOver(c.where, leaf, step) + step; break;
      case 'or': n += sumOver(c.any, leaf, step); break;
      case 'not': n += sumOver([c.condition], leaf, step); break;
      case 'and': n += sumOver(c.all, leaf, step); break;
      default: n += leaf(c);
    }
  }
  return n;
}

/** A search of more than MAX_SEARCH_TESTS tests (a 400 `too-costly`), with its conditions (presentLinks). */
export class TooManyTests extends FhirError {
  constructor(message: string, readonly pending: PendingCondition[]) {
    super('invalid', message, { issueCode: 'too-costly' });
  }
}

/**
 * What the tenant holds that chains and `_has` can reach: the types of which it holds resources, and
 * the keys (`type|param`) under which resources hold contained ones (`subject:Patient._id` of
 * Observation). A chain through a reference that may name many types (`focus`, `Reference(Any)`:
 * every type with the chained parameter) is an alternative per type, each a chain and its contained
 * twin; those that can match nothing in the tenant's data are left out before the tests are counted.
 */
export interface PresentLinks {
  types: ReadonlySet<string>;
  contained: ReadonlySet<string>;
}

/** PresentLinks for the chains and `_has` of `pending` (a search of `type`), read from the store. */
export async function presentLinks(deps: FhirDeps, tenant: string, pending: PendingCondition[]): Promise<PresentLinks> {
  const containedTypes = new Set<string>();
  const walk = (c: PendingCondition): void => {
    if (c.kind === 'or') {
      // `<param>:<Type>._id`: the contained resources' type is the key's last step.
      if (c.contained !== undefined) containedTypes.add(c.contained.slice(c.contained.lastIndexOf(':') + 1, -'._id'.length));
      c.any.forEach(walk);
    } else if (c.kind === 'chain' || c.kind === 'has') c.where.forEach(walk);
    else if (c.kind === 'and') c.all.forEach(walk);
  };
  pending.forEach(walk);
  const [types, keys] = await Promise.all([
    deps.store.resources.types(tenant),
    Promise.all([...containedTypes].map((t) => deps.store.resources.containedKeys(tenant, t))),
  ]);
  return { types: new Set(types), contained: new Set(keys.flat().map((k) => `${k.type}|${k.param}`)) };
}

/**
 * `c`, a condition on resources of `type`, without the alternatives that can match nothing in the
 * tenant's data (PresentLinks): a chain to a type or a `_has` of a type it holds no resource of, and
 * the contained twin of a chain where no resource of `type` contains one under its key (as the store's
 * withoutAbsentKeys leaves them out). A condition left with no alternative matches nothing.
 */
function linkedPresent(c: PendingCondition, type: string, present: PresentLinks): PendingCondition {
  const nothing: PendingCondition = { kind: 'or', any: [] };
  const none = (x: PendingCondition) => x.kind === 'or' && x.any.length === 0;
  switch (c.kind) {
    case 'chain': case 'has': {
      const target = c.kind === 'chain' ? c.targetType : c.type;
      if (!present.types.has(target)) return nothing;
      const where = c.where.map((x) => linkedPresent(x, target, present) as Condition);
      return where.some(none) ? nothing : { ...c, where };
    }
    case 'or': {
      if (c.contained !== undefined && !present.contained.has(`${type}|${c.contained}`)) return linkedPresent(c.any[0]!, type, present);
      const any = c.any.map((x) => linkedPresent(x, type, present) as Condition).filter((x) => !none(x));
      return any.length === 0 ? nothing : { ...c, any };
    }
    case 'and': {
      const all = c.all.map((x) => linkedPresent(x, type, present) as Condition);
      return all.some(none) ? nothing : { ...c, all };
    }
    default: return c;
  }
}

/** The tests of `conditions` as MAX_SEARCH_TESTS counts them. */
export function countTests(conditions: PendingCondition[]): number {
  return sumOver(conditions, () => 1, 1);
}

/** The words of a full-text query (each read from the full-text index once). */
const textWords = (q: TextQuery): number => ('word' in q ? 1 : ('all' in q ? q.all : q.any).reduce((n, p) => n + textWords(p), 0));

/** The words of a search's `_text` and `_content` tests together. */
function countTextWords(conditions: PendingCondition[]): number {
  return sumOver(conditions, (c) => (c.kind !== 'text' ? 0 : c.query ? textWords(c.query) : c.values.reduce((m, v) => m + v.length, 0)), 0);
}

/** The values a search's conditions carry (each a bound SQL parameter; MAX_SEARCH_VALUES bounds them). */
export function countValues(conditions: PendingCondition[]): number {
  return sumOver(conditions, (c) => {
    switch (c.kind) {
      case 'id': return c.ids.length;
      case 'lastUpdated': case 'date': case 'number': case 'composite': return c.tests.length;
      case 'token': case 'string': case 'uri-prefix': case 'text': return c.values.length;
      case 'near': return c.points.length;
      default: return 1;
    }
  }, 1);
}

/**
 * Compiles a FHIR search query string (FHIR R4 search.html). Unknown parameters become warnings, or a
 * 400 when `strict` (`Prefer: handling=strict`); malformed values are always a 400 naming the parameter.
 * `opened` is the place a sealed `_cursor` holds (openCursor); a plain one is decoded here.
 */
export function compileSearch(type: string, given: URLSearchParams, strict: boolean, now = Date.now(), present?: PresentLinks, opened?: Cursor): CompiledSearch {
  // Wherever the search comes from (a Bundle's GET entry checked before its writes, a conditional reference), as the REST search reads it.
  const params = withoutEmptyResultParams(given);
  requireFewIncludes(params);
  const query: SearchQuery = { type, where: [], sort: parseSort(type, params.get('_sort')), count: parseCount(params.get('_count')) };
  const pending: PendingCondition[] = [];
  const warnings: FhirIssue[] = [];
  const self = new URLSearchParams();
  const includes: Include[] = [];
  const revincludes: Include[] = [];
  const once = new Set<string>();
  for (const [key, raw] of params) {
    const name = key.split(':', 1)[0]!;
    if (CONTROL.has(name)) {
      checkControlModifier(key, name);
      if (SINGLE.has(name)) {
        // search.html: the self link holds "the parameters that were actually used to process a search".
        if (once.has(name)) {
          const text = `'${name}' is given more than once: its first value '${params.get(name)}' is used, not '${raw}'`;
          if (strict) throw new FhirError('invalid', text, { expression: [name] });
          warnings.push(issue('warning', 'not-supported', text, [name]));
          continue;
        }
        once.add(name);
      }
      if (name === '_include' || name === '_revinclude') {
        const foreign = foreignInclude([type], key, raw);
        if (foreign !== undefined) {
          ignoredInclude(foreign, key, strict, warnings);
          continue;
        }
        const parsed = possibleInclude(parseInclude(type, key, raw, name === '_revinclude'), key, raw, strict, warnings);
        // A `_revinclude` whose parameter (or `:Type`) cannot refer to the type searched: the same.
        const inc = parsed && name === '_revinclude' ? reachingRevinclude(type, parsed, key, raw, strict, warnings) : parsed;
        if (!inc) continue;
        (name === '_include' ? includes : revincludes).push(inc);
      }
      // `_offset` is checked here (a Bundle's GET entry before a transaction's writes); searchAtOffset
      // applies it and puts it in the self link.
      if (name === '_offset') {
        parseOffset(raw);
        continue;
      }
      // The self link says what was done: `_count` as applied (at most MAX_COUNT).
      if (name !== '_cursor') self.append(key, name === '_count' ? String(query.count) : raw);
      continue;
    }
    try {
      if (UNSUPPORTED.has(name)) {
        throw new UnknownParameterError('not-supported', `Search parameter '${key}' is not supported`, { expression: [key] });
      }
      const c = name === '_filter' ? filterParameter(type, key, raw, now) : parameterCondition(type, key, raw, now);
      // No FHIR string holds one (datatypes.html#string), so no value could match; PostgreSQL could not even compare U+0000.
      if (CONTROL_CHARACTER.test(raw)) {
        throw new FhirError('invalid', `The value of '${key}' holds a control character (below U+0020 other than tab, CR, LF), which no FHIR value holds`, { expression: [key] });
      }
      // A parameter searched as others ANDed (`code-value-quantity` as `code` and `value-quantity`) is
      // those conditions, each of which can then drive the search as it would on its own.
      if (c.kind === 'and') pending.push(...c.all);
      else pending.push(c);
    } catch (err) {
      // R4 search.html: "Empty parameters are not an error - they are just ignored by the server" (`name=`,
      // `_id=`, `subject:Patient.name=`), in the self link neither; a bad name or modifier is still its error.
      if (err instanceof EmptyValue && raw === '') continue;
      if (!(err instanceof UnknownParameterError) || strict) throw err;
      warnings.push(issue('warning', 'not-supported', `${err.message} and was ignored`, [key]));
      continue;
    }
    self.append(key, raw);
  }
  const values = countValues(pending);
  if (values > MAX_SEARCH_VALUES) {
    throw new FhirError('invalid', `The search has ${values} values; at most ${MAX_SEARCH_VALUES} are supported`, {
      issueCode: 'too-costly', expression: [...new Set([...self.keys()].filter((k) => !CONTROL.has(k.split(':', 1)[0]!)))],
    });
  }
  // A value may hold TEXT_MAX_QUERY_WORDS; so may the whole search (each word read is a scan of the
  // index entries of every word it matches: `a*` reads those of every word starting with a).
  const words = countTextWords(pending);
  if (words > TEXT_MAX_QUERY_WORDS) {
    throw new FhirError('invalid', `The search's _text and _content values hold ${words} words together; at most ${TEXT_MAX_QUERY_WORDS} are supported`, { issueCode: 'too-costly' });
  }
  if (present !== undefined) pending.splice(0, pending.length, ...pending.map((c) => linkedPresent(c, type, present)));
  const tests = countTests(pending);
  if (tests > MAX_SEARCH_TESTS) {
    throw new TooManyTests(`The search has ${tests} tests (parameters, _filter tests, chained steps); at most ${MAX_SEARCH_TESTS} are supported`, pending);
  }
  if (params.has('_offset')) checkOffset(params, strict);
  const cursor = params.get('_cursor');
  let coreOffset: number | undefined;
  let sortedOffset: number | undefined;
  let keysetOffset: number | undefined;
  if (cursor !== null) {
    const c = opened ?? decodeCursor(cursor);
    if (c.kind === 'keyset') {
      query.after = c.at;
      keysetOffset = c.before;
    } else if (c.kind === 'sorted') {
      if (!fitsSort(c.at, query.sort)) throw new FhirError('invalid', "Invalid _cursor: it is not a place in this search's order", { expression: ['_cursor'] });
      query.afterKeys = c.at;
      sortedOffset = c.offset;
    } else if (keysetSort(query.sort) !== undefined && (c.offset > 0 || (c.core ?? 0) > 0)) {
      // Pages in `_id` or `_lastUpdated` order go on from the last row's keys, never from an offset (the
      // store reads none in that order): skipped silently, the first page came back for any later one.
      throw new FhirError('invalid', "Invalid _cursor: this search pages by its last row's keys (its order is _id or _lastUpdated), not by an offset", { expression: ['_cursor'] });
    } else query.offset = c.offset;
    if (c.kind === 'offset' && c.core !== undefined) coreOffset = c.core;
  }
  const total = params.get('_total');
  if (total !== null && !['none', 'estimate', 'accurate'].includes(total)) {
    throw new FhirError('invalid', `Invalid _total '${total}': expected none, estimate or accurate`, { expression: ['_total'] });
  }
  const { summary, elements } = parseSubset(params, strict, warnings);
  const compiled: CompiledSearch = { query, pending, warnings, self, total, summary, includes, revincludes };
  if (coreOffset !== undefined) compiled.coreOffset = coreOffset;
  if (keysetOffset !== undefined) compiled.keysetOffset = keysetOffset;
  if (sortedOffset !== undefined) compiled.sortedOffset = sortedOffset;
  if (cursor !== null) compiled.cursor = cursor;
  if (elements !== undefined) compiled.elements = elements;
  return compiled;
}

/** The conditions of a query string alone (for `_typeFilter`, scopes): strict, no result parameters. */
export function compileFilter(type: string, params: URLSearchParams, now = Date.now()): PendingCondition[] {
  for (const key of params.keys()) {
    const name = key.split(':', 1)[0]!;
    if (CONTROL.has(name)) throw new FhirError('invalid', `${name} is not allowed in a filter`, { expression: [key] });
  }
  return compileSearch(type, params, true, now).pending;
}

/** `_filter` (src/fhir/search-filter.ts): takes no modifier, and is never ignored, even when lenient. */
function filterParameter(type: string, key: string, raw: string, now: number): PendingCondition {
  if (key !== '_filter') throw new FhirError('invalid', `'_filter' takes no modifier ('${key}')`, { expression: [key] });
  if (raw === '') throw new EmptyValue('invalid', "Empty value in search parameter '_filter'", { expression: [key] });
  return filterCondition(type, raw, now);
}

/** What completing pending conditions reads: the terminology service, the store (hierarchies), and the token's access to them. */
export interface ResolveDeps {
  expandCodes?: FhirDeps['expandCodes'];
  fhirBase?: FhirDeps['fhirBase'];
  store?: FhirDeps['store'];
  /** How a hierarchy is walked in the store: through a write's writer inside its transaction (StoredReads), else the pool. */
  search?: (query: SearchQuery) => Promise<ResourceVersion[]>;
  access?: Access;
  /** A hierarchy walked as of this time (an export's transactionTime: hierarchy-as-of.ts), not as the data is now. */
  asOf?: number;
}

/**
 * Completes conditions that need the terminology service (token `:in`, `:not-in`, `:below`, `:above`):
 * the codes of the ValueSet, or of the code system's subsumption, become token values. Without a
 * terminology service, or for a ValueSet or code system it does not know, the search is a 400. And
 * those of a reference `:below` / `:above` (HierarchyCondition), whose hierarchy is walked in the store.
 */
export async function resolveConditions(deps: ResolveDeps, tenant: string, pending: PendingCondition[]): Promise<Condition[]> {
  const base = deps.fhirBase?.(tenant);
  const out: Condition[] = [];
  for (const p of pending) {
    const c = base === undefined ? p : localReferences(p, base);
    out.push(hasPending(c) ? await resolveCondition(deps, tenant, c) : (c as Condition));
  }
  return out;
}

/**
 * A condition with each absolute URL under the tenant's FHIR base `base` among its reference values
 * (compiled as written: referenceValues in search-compile.ts) as the `Type/id` it names, which is how
 * such a reference is stored (search.html: a relative reference and the absolute URL it resolves to are
 * the same); URLs of other servers stay as written. In `and`, `or`, `not`, chains and `_has` too.
 */
function localReferences(c: PendingCondition, base: string): PendingCondition {
  switch (c.kind) {
    case 'token': {
      if (c.reference !== true || !c.values.some((v) => v.system === '' && v.value?.startsWith(`${base}/`))) return c;
      return { ...c, values: c.values.map((v) => {
        const local = v.system === '' && v.value !== undefined ? parseReference(v.value, base) : null;
        return local ? { system: local.type, value: local.id } : v;
      }) };
    }
    // Their members may be pending (a `_filter`'s, a chain's `:in`): the types of the members are loose.
    case 'and': return { ...c, all: c.all.map((x) => localReferences(x, base) as Condition) };
    case 'or': return { ...c, any: c.any.map((x) => localReferences(x, base) as Condition) };
    case 'not': return { ...c, condition: localReferences(c.condition, base) as Condition };
    case 'chain': case 'has': {
      const type = c.kind === 'chain' ? c.targetType : c.type;
      return { ...c, where: c.where.map((x) => (x.kind === 'id' ? localIds(x, type, base) : localReferences(x, base) as Condition)) };
    }
    default: return c;
  }
}

/**
 * An `id` condition on resources of `type` with each absolute URL among its ids (`_list`'s List,
 * listCondition in search-compile.ts) as the id it names under the tenant's FHIR base `base`; one that
 * names another server's or another type's resource, or a version, is dropped (it names none here).
 */
function localIds(c: Extract<Condition, { kind: 'id' }>, type: string, base: string): Condition {
  if (!c.ids.some(isAbsoluteReference)) return c;
  const ids = c.ids.flatMap((id) => {
    if (!isAbsoluteReference(id)) return [id];
    const local = parseReference(id, base);
    return local?.type === type && local.version === undefined ? [local.id] : [];
  });
  return { ...c, ids };
}

/**
 * One condition with its ValueSet conditions completed, those nested in `and`, `or` and `not`
 * (`_filter`), chains and `_has` too (an `or` keeps its contained-resource key).
 */
async function resolveCondition(deps: ResolveDeps, tenant: string, c: PendingCondition): Promise<Condition> {
  switch (c.kind) {
    case 'and': return { ...c, all: await resolveConditions(deps, tenant, c.all) };
    case 'or': return { ...c, any: await resolveConditions(deps, tenant, c.any) };
    case 'not': return { ...c, condition: await resolveCondition(deps, tenant, c.condition) };
    case 'chain': case 'has': return { ...c, where: await resolveConditions(deps, tenant, c.where) };
    case 'hierarchy': return resolveHierarchy(deps, tenant, c);
    case 'value-set': break;
    default: return c;
  }
  const written = `${c.param}:${c.modifier}`;
  const where = { expression: [c.within ?? written] };
  const label = c.within ? `${c.within}: '${written}'` : written;
  if (!deps.expandCodes) throw new FhirError('not-supported', `${c.within ? `${label}: ` : ''}':${c.modifier}' needs the terminology service`, where);
  // Several ValueSets (`:in=a,b`): their codes together, each code once, within the one bound.
  const sets = [c.codes, ...(c.more ?? [])];
  const codes: { system: string; code: string }[] = [];
  const had = new Set<string>();
  for (const set of sets) {
    // A code subsumes itself (`:below`, `:above`), named by its system whether or not the code system defines it:
    // `code:below=system|ZZ` finds what is coded `system|ZZ`, as `code=system|ZZ` does.
    if (set.kind === 'subsumption') {
      for (const x of set.codes) {
        if (!had.has(`${x.system}|${x.code}`)) codes.push(x);
        had.add(`${x.system}|${x.code}`);
      }
    }
    let some;
    try {
      some = await deps.expandCodes(tenant, set.kind === 'value-set' ? valueSetLocation(set, deps.fhirBase?.(tenant)) : set);
    } catch (err) {
      // Its issue code too (`too-costly` for a ValueSet whose codes cost too much to list).
      if (err instanceof FhirError && err.status < 500) throw new FhirError(err.category, `${label}: ${err.message}`, { ...where, cause: err, issueCode: err.issues[0]?.code });
      throw err;
    }
    for (const x of some) {
      const key = `${x.system}|${x.code}`;
      if (had.has(key)) continue;
      had.add(key);
      codes.push(x);
    }
  }
  if (codes.length > MAX_SEARCH_VALUES) {
    const names = sets.map((set) => (set.kind === 'value-set' ? `'${set.canonical}'` : '')).join(', ');
    const what = c.codes.kind !== 'value-set' ? `'${label}' selects` : sets.length > 1 ? `ValueSets ${names} have` : `ValueSet ${names} has`;
    throw new FhirError('invalid', `${what} more than ${MAX_SEARCH_VALUES} codes${sets.length > 1 ? ' together' : ''}; ':${c.modifier}' takes at most ${MAX_SEARCH_VALUES}`, { ...where, issueCode: 'too-costly' });
  }
  // A `code` element (Patient.gender) is indexed without a system, its system being the binding's: a code
  // of that system also matches there. A Coding without a system matches no other code (search.html, token).
  const values = codes.map((x) => ({ system: x.system, value: x.code }));
  const implied = new Set(c.implied);
  for (const code of new Set(codes.filter((x) => implied.has(`${x.system}|${x.code}`)).map((x) => x.code))) values.push({ system: '', value: code });
  return c.not ? { kind: 'token', param: c.param, values, not: true } : { kind: 'token', param: c.param, values };
}

/**
 * A ValueSet named by `:in` / `:not-in` with the id of the tenant's ValueSet its value locates, if it
 * does: `ValueSet/<id>`, or `{base}/ValueSet/<id>` under the tenant's FHIR base `base` (another
 * server's or tenant's URL locates none here, and a version, `/_history/n`, is not read by id).
 */
function valueSetLocation(codes: CodeSet & { kind: 'value-set' }, base: string | undefined): CodeSet {
  const at = parseReference(codes.canonical, base);
  return at?.type === 'ValueSet' && at.version === undefined ? { ...codes, id: at.id } : codes;
}

/**
 * A hierarchy condition as a reference to each resource of the walk: from its resources, those whose
 * part-of (parent) parameter names one found (`below`), or those one found names so (`above`), round
 * after round until no new one comes, at most MAX_SEARCH_VALUES in all (more is a 400). The walk reads
 * the type as the token may search it (403 otherwise; its scope filter and a patient-context token's
 * compartment apply).
 */
async function resolveHierarchy(deps: ResolveDeps, tenant: string, c: HierarchyCondition): Promise<Condition> {
  const written = `${c.param}:${c.modifier}`;
  const where = { expression: [c.within ?? written] };
  if (!deps.store) throw new FhirError('not-supported', `':${c.modifier}' on a reference needs the store`, where);
  if (deps.access) requireAccess(deps.access, c.target, 's');
  const filter = deps.access ? accessFilter(deps.access, c.target, 's') : undefined;
  // A patient-context token walks its patient's compartment alone, as a chain does (guardLinked).
  const patient = deps.access?.patientLimit(c.target, 's');
  const bound = patient !== undefined && inPatientCompartment(c.target) ? { compartment: patient } : {};
  const via = hierarchyParam(c.target)!.code;
  const found = new Set(c.ids);
  let frontier = [...found];
  const search = (q: SearchQuery) => (deps.search ? deps.search(q) : deps.store!.resources.search(tenant, q));
  const base = deps.fhirBase?.(tenant);
  while (frontier.length > 0) {
    const condition: Condition = c.direction === 'below'
      ? { kind: 'token', param: via, values: frontier.map((id) => ({ system: c.target, value: id })), reference: true }
      : { kind: 'id', ids: frontier };
    const step: SearchQuery = { type: c.target, where: filter ? [condition, filter] : [condition], sort: [], count: MAX_SEARCH_VALUES + 1, ...bound };
    const parents = (r: Json) => indexEntries(r, base).tokens.filter((e) => e.param === via && e.system === c.target).map((e) => e.value);
    let next: string[];
    if (deps.asOf !== undefined) {
      const rows = await stepAsOf(deps.store.resources, tenant, search, step, deps.asOf, base);
      next = c.direction === 'below' ? rows.map((r) => r.id as string) : rows.flatMap(parents);
    } else {
      const rows = await search(step);
      next = c.direction === 'below' ? rows.map((r) => r.id) : rows.flatMap((r) => parents(JSON.parse(r.content) as Json));
    }
    frontier = [...new Set(next)].filter((id) => !found.has(id));
    for (const id of frontier) found.add(id);
    if (found.size > MAX_SEARCH_VALUES) {
      const label = c.within ? `${c.within}: '${written}'` : written;
      throw new FhirError('invalid', `'${label}' reaches more than ${MAX_SEARCH_VALUES} ${c.target} resources`, { ...where, issueCode: 'too-costly' });
    }
  }
  return { kind: 'token', param: c.param, values: [...found].map((id) => ({ system: c.target, value: id })), reference: true };
}

type Json = Record<string, unknown>;

/** What the `_include` parameters reach from a page: literal references by type, canonical URLs by target type. */
interface IncludeTargets {
  /** `Type` → ids of literal references (`Type/id`, absolute ones included). */
  ids: Map<string, Set<string>>;
  /** Version-specific literal references (`Type/id/_history/n`), by `Type/id/n`. */
  versions: Map<string, { type: string; id: string; version: string }>;
  /** Target type → canonical references (`url` or `url|version`) of canonical parameters. */
  canonicals: Map<string, Set<string>>;
}

/** References from `rows` through the `_include` parameters. */
function includeTargets(rows: ResourceVersion[], includes: Include[], base: string | undefined): IncludeTargets {
  const ids = new Map<string, Set<string>>();
  const versions: IncludeTargets['versions'] = new Map();
  const canonicals = new Map<string, Set<string>>();
  const add = (into: Map<string, Set<string>>, type: string, value: string) => {
    let values = into.get(type);
    if (!values) into.set(type, (values = new Set()));
    values.add(value);
  };
  for (const row of rows) {
    // A row no `_include` starts from is not parsed (an included Patient under `_include=Observation:subject`).
    const from = includes.filter((inc) => inc.source === '*' || inc.source === row.type);
    if (!from.length) continue;
    const resource = JSON.parse(row.content) as Json;
    for (const inc of from) {
      const defs = inc.param === '*' ? referenceParamsOf(row.type) : [paramOf(row.type, inc.param)!];
      for (const def of defs) {
        for (const path of def.paths) {
          const refs: { system: string; value: string }[] = [];
          for (const v of evaluatePath(resource, path)) {
            // A canonical (a string, `url|version`): a resource of a target type whose `url` it names.
            if (typeof v === 'string') {
              for (const type of inc.target ? [inc.target] : def.targets) if (isCanonicalType(type)) add(canonicals, type, v);
              continue;
            }
            // A version-specific reference names that version (versionedReference).
            const at = versionedReference(v, base);
            if (at) {
              if ((!path.targetType || at.type === path.targetType) && (!inc.target || at.type === inc.target)) versions.set(`${at.type}/${at.id}/${at.version}`, at);
              continue;
            }
            referenceValues(v, path.targetType, refs, base);
          }
          for (const r of refs) if (r.system && (!inc.target || r.system === inc.target)) add(ids, r.system, r.value);
        }
      }
    }
  }
  return { ids, versions, canonicals };
}

/**
 * What `_include=*` reaches from one row, as addIncludes reads it: `[type, key]` for each resource a literal
 * reference names (`Type/id`), each version a version-specific one names (`Type/id/_history/n`) and each
 * canonical (`Type|url`). $everything counts them to keep a page's includes within MAX_INCLUDES.
 */
export function includeKeysOf(row: ResourceVersion, base: string | undefined): [type: string, key: string][] {
  const { ids, versions, canonicals } = includeTargets([row], [{ source: row.type, param: '*', iterate: false }], base);
  const out: [string, string][] = [];
  for (const [type, of] of ids) for (const id of of) out.push([type, `${type}/${id}`]);
  for (const v of versions.values()) out.push([v.type, `${v.type}/${v.id}/_history/${v.version}`]);
  for (const [type, of] of canonicals) for (const url of of) out.push([type, `${type}|${url}`]);
  return out;
}

/** The resource and version a Reference names when it is version-specific and of this tenant (`Patient/1/_history/2`). */
function versionedReference(v: unknown, base: string | undefined): { type: string; id: string; version: string } | undefined {
  const ref = v !== null && typeof v === 'object' ? (v as Json).reference : undefined;
  const at = typeof ref === 'string' ? parseReference(ref, base) : null;
  return at?.version === undefined ? undefined : { type: at.type, id: at.id, version: at.version };
}

/** The `url` (and `version`, if any) of each canonical resource of `rows` that has one. */
function canonicalUrls(rows: ResourceVersion[]): { type: string; url: string; version?: string }[] {
  const out: { type: string; url: string; version?: string }[] = [];
  for (const row of rows) {
    if (!isCanonicalType(row.type)) continue;
    const { url, version } = JSON.parse(row.content) as Json;
    if (typeof url === 'string' && url) out.push({ type: row.type, url, ...(typeof version === 'string' && version ? { version } : {}) });
  }
  return out;
}

/**
 * What names the canonical resources of `named` (url → their versions) in reference parameter `param`:
 * `url|version` of one of them, or `url` alone (namingCanonicals), as chains and `_has` read canonicals.
 */
function namingAny(param: string, named: Map<string, Set<string>>): Condition[] {
  return named.size ? [namingCanonicals(param, named)] : [];
}

/** The reference parameters of `type` that keep rows (`_include=Type:*`). */
function referenceParamsOf(type: string): ParamDefinition[] {
  return paramsOf(type).filter((d) => d.type === 'reference' && !d.storedAs);
}

/** How the rows of one statement of `addIncludes` are kept: those within the request's reach (undefined: all, as the index found them). */
type KeepRows = ((rows: ResourceVersion[]) => Promise<ResourceVersion[]>) | undefined;

/**
 * Adds `_include` and `_revinclude` resources (deduplicated, never a match again), at most MAX_INCLUDES;
 * `leaveOut`: types whose referenced resources are not included. Each statement reads MAX_INCLUDES and
 * one more; where some of its rows are left out (out of the token's reach: a Binary whose securityContext
 * it may not read, a Provenance naming a version out of reach; or included already), it reads on past
 * them, so that what is included, and the `too-costly` warning, are what the token would get were the
 * rows out of its reach not there: the warning when rows within reach were left out, and only then.
 * Reading on past more than PAGE_READ_IN_REACH rows out of reach, or references (ids, canonicals) read to no
 * purpose (to resources not held, out of reach or included already), is a 400 (`too-costly`) naming `_include`;
 * with `pastReach` (`$everything`, which takes no `_include`) it is no error: past the bound, reading stops before
 * the next statement, and the warning `pastReach` gives for the references of the round not read ends the includes.
 */
export async function addIncludes(
  deps: FhirDeps, req: FhirRequest, compiled: Pick<CompiledSearch, 'includes' | 'revincludes'>, rows: ResourceVersion[],
  leaveOut?: (type: string) => boolean, rowsNotCurrent: readonly string[] = [], pastReach?: (unread: number) => FhirIssue,
): Promise<{ included: ResourceVersion[]; warnings: FhirIssue[] }> {
  const seen = new Set(rows.map((r) => `${r.type}/${r.id}`));
  const included: ResourceVersion[] = [];
  const warnings: FhirIssue[] = [];
  const find = (q: SearchQuery) => findResources(deps, req.tenant, q);
  const add = (vs: ResourceVersion[]) => {
    const fresh: ResourceVersion[] = [];
    for (const v of vs) {
      const key = `${v.type}/${v.id}`;
      if (seen.has(key)) continue;
      if (included.length >= MAX_INCLUDES) {
        if (!warnings.length) warnings.push(issue('warning', 'too-costly', `Only the first ${MAX_INCLUDES} included resources are returned`));
        break;
      }
      seen.add(key);
      included.push(v);
      fresh.push(v);
    }
    return fresh;
  };
  const visible = (type: string) => req.access.can(type, 'r');
  // A `_revinclude` lists the resources that refer to the page's, unknown ids included, as a search of their type
  // would: it reads them with read and search (enumerationAccess), where an `_include` reads the ids a reference names.
  const listing: FhirRequest = { ...req, access: enumerationAccess(req.access) };
  const binaries = (on: FhirRequest): KeepRows => (binaryReachLimited(on.access) ? (rows) => rowsInReach(deps, on, rows) : undefined);
  let outOfReach = 0;
  /** The references (ids, canonicals) of the round's `_include` statements not read yet. */
  let unread = 0;
  /** With `pastReach`: whether reading stops here, past PAGE_READ_IN_REACH read to no purpose (its warning given once). */
  const stopHere = () => {
    if (!pastReach || outOfReach <= PAGE_READ_IN_REACH) return false;
    if (!warnings.length) warnings.push(pastReach(unread));
    return true;
  };
  /**
   * Adds the rows of `q` (its count MAX_INCLUDES + 1, sorted by id) that `keep` keeps, and returns those
   * added: one statement when it holds fewer rows, or when they fill the included (the warning), else read
   * on after its last row (the store's own rows; the core CodeSystems and ValueSets merged in are one
   * statement). Past PAGE_READ_IN_REACH rows out of reach (of the whole search, in order, before the
   * included are full) it is a 400.
   */
  const addAll = async (q: SearchQuery, keep: KeepRows): Promise<ResourceVersion[]> => {
    const fresh: ResourceVersion[] = [];
    for (let batch = await find(q); ; batch = await deps.store.resources.search(req.tenant, { ...q, after: { lastUpdated: 0, id: batch[batch.length - 1]!.id } })) {
      const within = keep ? new Set(await keep(batch)) : undefined;
      for (const row of batch) {
        if (warnings.length) return fresh;
        if (!within || within.has(row)) fresh.push(...add([row]));
        else if (++outOfReach > PAGE_READ_IN_REACH && !pastReach) {
          const why = q.type === 'Binary' ? 'their securityContext is' : 'the versions their targets name are';
          throw new FhirError('invalid', `The included resources of this search take reading more than ${PAGE_READ_IN_REACH} ${q.type} resources out of this token's reach (${why} in no index): narrow the search or its _include and _revinclude`, { issueCode: 'too-costly', expression: ['_include'] });
        }
      }
      if (batch.length < q.count || warnings.length || searchesCore(deps, q) || stopHere()) return fresh;
    }
  };
  /**
   * Adds the rows of `q` (of a type the request reads, with its read filter) within the patient's compartment
   * when the token's reads of the type are limited to one; a Provenance's, the patient's records' too, as
   * its read finds them (provenance-reach.ts); Binaries whose securityContext the request may read (rowsInReach).
   */
  const addInReach = async (q: SearchQuery, on: FhirRequest = req): Promise<ResourceVersion[]> => {
    const patient = on.access.patientLimit(q.type, 'r');
    if (patient === undefined || !inPatientCompartment(q.type)) return addAll(q, q.type === 'Binary' ? binaries(on) : undefined);
    const widened = widenedPatient(on, q.type, 'r');
    if (widened === undefined) return addAll({ ...q, compartment: patient }, undefined);
    return addAll({ ...q, where: [...(q.where ?? []), reachCondition(on.access, widened)] }, (rows) => provenanceRowsInReach(deps, on, rows, widened));
  };
  let frontier = rows;
  // The `Type/id` of rows that may be an earlier version than the record's current one (the page's, when the caller
  // says so: a notification's focus version; a version-specific `_include`'s): not the patient's records by that alone.
  const notCurrent = new Set<string>(rowsNotCurrent);
  /** The canonicals already read, by target type: each is followed once, in the first round that names it. */
  const followed = new Map<string, Set<string>>();
  const iterated = compiled.includes.some((i) => i.iterate) ? '_include:iterate' : compiled.revincludes.some((i) => i.iterate) ? '_revinclude:iterate' : undefined;
  for (let round = 0; round <= MAX_ITERATIONS + 1 && frontier.length; round++) {
    // The round past the last is read only to tell whether resources are left out (the warning), and adds none:
    // a hierarchy that ends at the last round has nothing further along, and no warning.
    const probe = round > MAX_ITERATIONS;
    const kept = included.length;
    const warned = warnings.length;
    const incs = compiled.includes.filter((i) => round === 0 || i.iterate);
    const revs = compiled.revincludes.filter((i) => round === 0 || i.iterate);
    // Without `:iterate` the included are not read again (each would be parsed for no `_include`).
    if (!incs.length && !revs.length) break;
    const next: ResourceVersion[] = [];
    const reached = includeTargets(frontier, incs, deps.fhirBase?.(req.tenant));
    /**
     * The readable resources of `type` that `where` selects, as a search of that type would find them; one
     * more than MAX_INCLUDES, so that a page the first search fills knows there are more, warns, and reads no further.
     */
    const reach = async (type: string, where: Condition, named: number) => {
      if (!visible(type) || leaveOut?.(type) || warnings.length || stopHere()) return;
      const q: SearchQuery = { type, where: [where], sort: [], count: MAX_INCLUDES + 1 };
      const filter = scopeFilter(req, type, 'r');
      if (filter) q.where!.push(filter);
      const before = outOfReach;
      const fresh = await addInReach(q);
      next.push(...fresh);
      if (warnings.length) return;
      // The references read to no purpose (not held, out of reach, included already) count as rows out of reach do:
      // a page naming tens of thousands of them is as costly, and was read on without bound.
      outOfReach = Math.max(outOfReach, before + named - fresh.length);
      unread -= named;
      if (outOfReach > PAGE_READ_IN_REACH && !pastReach) {
        throw new FhirError('invalid', `The included resources of this search take reading more than ${PAGE_READ_IN_REACH} references to ${type} resources that are not held, out of this token's reach or included already: narrow the search or its _include and _revinclude`, { issueCode: 'too-costly', expression: ['_include'] });
      }
    };
    // MAX_INCLUDES ids a statement, until the included are full: those out of reach or not held take no room, and past
    // PAGE_READ_IN_REACH of them (with the rows out of reach) it is a 400, as canonicals are.
    const statements: { type: string; where: Condition; named: number }[] = [];
    for (const [type, ids] of reached.ids) {
      const list = [...ids].filter((id) => !seen.has(`${type}/${id}`));
      for (let i = 0; i < list.length; i += MAX_INCLUDES) {
        const ids = list.slice(i, i + MAX_INCLUDES);
        statements.push({ type, where: { kind: 'id', ids }, named: ids.length });
      }
    }
    // MAX_SEARCH_VALUES canonicals a statement, as many as the included take: a page may name thousands.
    // A canonical followed in an earlier round is not read again (as an id already included is not): what
    // it names was added then, or is not held or out of reach, and read again each round it counted
    // toward PAGE_READ_IN_REACH each time (a chain of a hundred rounds whose resources each name the same
    // two hundred was a 400).
    for (const [type, canonicals] of reached.canonicals) {
      const done = followed.get(type) ?? followed.set(type, new Set()).get(type)!;
      const list = [...canonicals].filter((c) => !done.has(c));
      for (const c of list) done.add(c);
      for (let i = 0; i < list.length; i += MAX_SEARCH_VALUES) {
        const urls = list.slice(i, i + MAX_SEARCH_VALUES);
        statements.push({ type, where: canonicalCondition(urls), named: urls.length });
      }
    }
    // A version-specific reference includes the version it names, read as a vread reads it (the
    // token's access, compartment and scope filters): a deletion, or a version not held, is left out, and is
    // read to no purpose as an id not held is (tens of thousands of them were each a read, without bound).
    // Past MAX_INCLUDES, the first one within reach gives the warning.
    const versions = [...reached.versions.values()].filter(({ type, id }) => visible(type) && !leaveOut?.(type) && !seen.has(`${type}/${id}`));
    unread = versions.length + statements.reduce((n, s) => n + (visible(s.type) && !leaveOut?.(s.type) ? s.named : 0), 0);
    for (const { type, id, version } of versions) {
      if (warnings.length || stopHere()) break;
      unread--;
      if (seen.has(`${type}/${id}`)) continue;
      const v = await vreadResource(deps, req, type, id, version).catch((err: unknown) => {
        if (err instanceof FhirError && err.status < 500) return undefined;
        throw err;
      });
      if (v) next.push(...add([v]));
      // The version it names may be an earlier one: not the record as it is now (provenance-reach.ts patientRecords).
      if (v) notCurrent.add(`${type}/${id}`);
      else if (++outOfReach > PAGE_READ_IN_REACH && !pastReach) {
        throw new FhirError('invalid', `The included resources of this search take reading more than ${PAGE_READ_IN_REACH} versions of ${type} resources that are not held or out of this token's reach, with the references read to no purpose: narrow the search or its _include and _revinclude`, { issueCode: 'too-costly', expression: ['_include'] });
      }
    }
    for (const { type, where, named } of statements) {
      if (warnings.length) break;
      await reach(type, where, named);
    }
    const values = frontier.map((r) => ({ system: r.type, value: r.id }));
    // A canonical resource is also referred to by its `url` (canonical rows have no type), alone or with
    // its own version (`url|version`; another version names another resource), as `_has` reads them.
    const urls = revs.length ? canonicalUrls(frontier) : [];
    const canonicalsBySource = new Map<string, Map<string, Map<string, Set<string>>>>();
    // The reference parameters to follow backwards, by source type: `*` is every one that may refer to a
    // type of the frontier and whose rows exist in the tenant (its search key; the core CodeSystems and
    // ValueSets have no rows); a source's several parameters are one search (their conditions ORed).
    const bySource = new Map<string, Map<string, Map<string, { system: string; value: string }>>>();
    const frontierTypes = [...new Set(frontier.map((r) => r.type))];
    const held = revs.some((r) => r.param === '*')
      ? new Set((await deps.store.resources.referrers(req.tenant, urls.length ? [...frontierTypes, ''] : frontierTypes)).map((k) => `${k.type}/${k.param}`))
      : undefined;
    const wildcard = () => frontierTypes.flatMap(referrersOf).filter(({ source, param }) => {
      const def = paramOf(source, param)!;
      return hasCoreResources(source) || held!.has(`${source}/${def.storedAs?.param ?? def.code}`);
    });
    for (const rev of revs) {
      const pairs = rev.param === '*' ? wildcard().filter((p) => rev.source === '*' || p.source === rev.source) : [{ source: rev.source, param: rev.param }];
      for (const { source, param } of pairs) {
        if (!listing.access.can(source, 'r')) continue;
        const def = paramOf(source, param)!;
        const stored = def.storedAs;
        // Parameters stored as one (`patient` in `subject`'s rows) read that one, for the targets they name;
        // `:Type` keeps the references to that type (search.html: "[targetType] is a specific resource type").
        const column = stored?.param ?? def.code;
        const type = (t: string) => (!stored?.target || t === stored.target) && (!rev.target || t === rev.target);
        const byColumn = bySource.get(source) ?? bySource.set(source, new Map()).get(source)!;
        const seen = byColumn.get(column) ?? byColumn.set(column, new Map()).get(column)!;
        for (const v of values) if (type(v.system)) seen.set(`${v.system}/${v.value}`, v);
        const named = urls.filter((u) => def.targets.includes(u.type) && type(u.type));
        if (!named.length) continue;
        const byUrl = canonicalsBySource.get(source) ?? canonicalsBySource.set(source, new Map()).get(source)!;
        const versions = byUrl.get(column) ?? byUrl.set(column, new Map()).get(column)!;
        for (const u of named) {
          const of = versions.get(u.url) ?? versions.set(u.url, new Set()).get(u.url)!;
          if (u.version !== undefined) of.add(u.version);
        }
      }
    }
    for (const [source, byColumn] of bySource) {
      // Past MAX_INCLUDES (the warning given) nothing more is added: no more reading.
      if (warnings.length) break;
      const filter = scopeFilter(listing, source, 'r');
      const canonicals = [...(canonicalsBySource.get(source) ?? [])].flatMap(([param, named]) => namingAny(param, named));
      const referring = async (columns: [string, { system: string; value: string }[]][]) => {
        const any = columns.filter(([, vs]) => vs.length).map(([param, vs]): Condition => ({ kind: 'token', param, values: vs }));
        any.push(...canonicals);
        if (!any.length) return;
        const q: SearchQuery = { type: source, where: [any.length === 1 ? any[0]! : { kind: 'or', any }], sort: [], count: MAX_INCLUDES + 1 };
        if (filter) q.where!.push(filter);
        next.push(...(await addInReach(q, listing)));
      };
      const patient = widenedPatient(listing, source, 'r');
      if (patient === undefined) {
        await referring([...byColumn].map(([param, vs]) => [param, [...vs.values()]]));
        continue;
      }
      // The Provenance naming the patient's records followed are within reach by that alone (but for the
      // version they name): found by `target` without reachCondition, and the other references with it.
      const own = await patientRecords(deps, req, frontier, patient, notCurrent);
      const targets = [...(byColumn.get('target') ?? new Map<string, { system: string; value: string }>())];
      const named = targets.filter(([key]) => own.has(key)).map(([, v]) => v);
      if (named.length) {
        const q: SearchQuery = { type: source, where: [{ kind: 'token', param: 'target', values: named }], sort: [], count: MAX_INCLUDES + 1 };
        if (filter) q.where!.push(filter);
        next.push(...(await addAll(q, (rows) => provenanceRowsInReach(deps, listing, rows, patient))));
      }
      await referring([...byColumn].map(([param, vs]) => [param, param === 'target' ? targets.filter(([key]) => !own.has(key)).map(([, v]) => v) : [...vs.values()]]));
    }
    if (probe) {
      const more = included.length > kept || warnings.length > warned;
      included.length = kept;
      warnings.length = warned;
      if (more && iterated) warnings.push(issue('warning', 'too-costly', `${iterated} was followed ${MAX_ITERATIONS} rounds past the first: resources further along may be left out`, [iterated]));
      break;
    }
    frontier = next;
  }
  return { included, warnings };
}

/** The SMART v2 scope filters on `perm` of `type` as one condition (ORed alternatives of ANDed conditions), if any. */
export function scopeFilter(req: FhirRequest, type: string, perm: 'r' | 's'): Condition | undefined {
  return accessFilter(req.access, type, perm);
}

function accessFilter(access: Access, type: string, perm: 'r' | 's'): Condition | undefined {
  const filters = access.filters?.(type, perm);
  if (!filters) return undefined;
  return { kind: 'or', any: filters.map((all): Condition => ({ kind: 'and', all })) };
}

/**
 * Chains and `_has` read resources of other types, so the token must be allowed to search those types,
 * and reaches only what it could find there: their SMART v2 scope filters and, for a patient-context
 * token, the patient's compartment narrow the chain's targets and the `_has` referrers, as they narrow
 * a search of those types. Without this a token allowed only Observations could learn which patients
 * have a name or a Condition by the Observations a chain or `_has` selects.
 */
export function guardLinked(access: Access, conditions: Condition[]): Condition[] {
  const guard = (c: Condition): Condition => {
    switch (c.kind) {
      case 'chain': case 'has': {
        const type = c.kind === 'chain' ? c.targetType : c.type;
        requireAccess(access, type, 's');
        const where = c.where.map(guard);
        const filter = accessFilter(access, type, 's');
        if (filter) where.push(filter);
        const patient = access.patientLimit(type, 's');
        if (patient !== undefined && inPatientCompartment(type)) where.push({ kind: 'compartment', patient });
        return { ...c, where };
      }
      case 'or': return { ...c, any: c.any.map(guard) };
      case 'and': return { ...c, all: c.all.map(guard) };
      case 'not': return { ...c, condition: guard(c.condition) };
      default: return c;
    }
  };
  return conditions.map(guard);
}

/**
 * The conditions of a conditional write's criteria `query` alone, completed as storeQuery completes a search's
 * (value sets and hierarchies resolved, chains and `_has` guarded), without the token's scope filter and
 * compartment: what a resource must meet for the condition to find it (requireFoundByCondition). Read on the pool.
 */
export async function criteriaOf(deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, now: number): Promise<Condition[]> {
  const compiled = compileSearch(type, query, true, now);
  const resolve: ResolveDeps = { expandCodes: deps.expandCodes, fhirBase: deps.fhirBase, store: deps.store, access: req.access };
  return guardLinked(req.access, await resolveConditions(resolve, req.tenant, compiled.pending));
}

/**
 * Completes a compiled search of `type` for the store: its pending conditions resolved, chains and
 * `_has` guarded, the token's scope filter and patient compartment applied (or `compartment`, a
 * compartment search's; of another patient than the token's, what is in the token's patient's too).
 * `search`: how a hierarchy is walked (ResolveDeps.search), by default on the pool.
 */
export async function storeQuery(
  deps: FhirDeps, req: FhirRequest, type: string, compiled: CompiledSearch, compartment?: string, search?: ResolveDeps['search'],
): Promise<SearchQuery | undefined> {
  const query = compiled.query;
  const resolve: ResolveDeps = { expandCodes: deps.expandCodes, fhirBase: deps.fhirBase, store: deps.store, access: req.access, ...(search ? { search } : {}) };
  query.where = guardLinked(req.access, await resolveConditions(resolve, req.tenant, compiled.pending));
  // A search of Provenance by a patient's token finds the Provenance of the patient's records too (provenance-reach.ts).
  const patient = widenedPatient(req, type, 's', compartment);
  return scopedQuery(req, type, query, compartment, patient === undefined ? undefined : reachCondition(req.access, patient));
}

/**
 * `query` of `type` (its conditions complete) as the token may run it: its scope filter added, and
 * its patient compartment applied (or `compartment`, a compartment search's; or `inCompartment`, a
 * condition admitting more than the patient's compartment, in its place): another patient's compartment holds,
 * for the token, what is in its patient's too.
 */
export function scopedQuery(req: FhirRequest, type: string, query: SearchQuery, compartment?: string, inCompartment?: Condition): SearchQuery | undefined {
  const filter = scopeFilter(req, type, 's');
  if (filter) query.where = [...(query.where ?? []), filter];
  const patient = req.access.patientLimit(type, 's');
  if (compartment !== undefined) {
    query.compartment = compartment;
    // Another patient's compartment holds, for this token, what is in its patient's too (an Observation of the other's
    // whose performer is the token's patient), as a read of it and `$everything` judge (everything-rows.ts guardOf).
    if (patient !== undefined && patient !== compartment && inPatientCompartment(type)) query.where = [...(query.where ?? []), { kind: 'compartment', patient }];
  } else if (patient !== undefined && inPatientCompartment(type)) {
    // Types outside the Patient compartment (Medication, Practitioner...) are not patient-bound;
    // `inCompartment`, when given, takes the compartment's place (reachCondition).
    if (inCompartment) query.where = [...(query.where ?? []), inCompartment];
    else query.compartment = patient;
  }
  query.where = withImpliedDrivers(query.where ?? []);
  return query;
}

/** The rows of a store query (CodeSystem and ValueSet searches merge the core resources in; no other search reads them). */
export async function queryRows(deps: FhirDeps, tenant: string, query: SearchQuery): Promise<ResourceVersion[]> {
  return searchesCore(deps, query) ? (await searchWithCore(deps, tenant, query)).rows : deps.store.resources.search(tenant, query);
}

/** How many resources a store query selects (the core resources too, as queryRows). */
export function queryCount(deps: FhirDeps, tenant: string, query: SearchQuery): Promise<number> {
  return searchesCore(deps, query) ? countWithCore(deps, tenant, query) : deps.store.resources.count(tenant, query);
}

/** Binaries (or Provenance) read per batch, and the most batches one count reads (countInReach). */
const COUNT_BATCH = 1000;
const COUNT_BATCHES = 20;

/**
 * How many of a store query's resources the request may see (`_summary=count`, `_total`): queryCount,
 * but for Binaries when the token's reach through their securityContext is limited (binaryReachLimited),
 * which no index holds: those are read in batches and counted as a page keeps them (rowsInReach), so
 * that a count says nothing of Binaries the token may not read; and so are the Provenance of a search
 * by a patient's token widened past its compartment, whose targets' versions no index holds
 * (provenanceRowsInReach). Past COUNT_BATCHES batches (COUNT_BATCH * COUNT_BATCHES matches are counted, one
 * more is not) the count is too costly: undefined (a page leaves its total out, `_summary=count` is a 400).
 */
export async function countInReach(deps: FhirDeps, req: FhirRequest, query: SearchQuery): Promise<number | undefined> {
  const inReach = keptInReach(deps, req, query.type, query.compartment);
  if (inReach === undefined) return queryCount(deps, req.tenant, query);
  let counted = 0;
  let after: SearchCursor | undefined;
  for (let batch = 0; batch < COUNT_BATCHES; batch++) {
    // The last batch reads one row more, so that as many matches as the bound are counted and one more is too costly.
    const size = batch === COUNT_BATCHES - 1 ? COUNT_BATCH + 1 : COUNT_BATCH;
    const rows = await deps.store.resources.search(req.tenant, { type: query.type, where: query.where ?? [], sort: [], count: size, ...(query.compartment === undefined ? {} : { compartment: query.compartment }), ...(after ? { after } : {}) });
    if (rows.length > COUNT_BATCH) return undefined;
    counted += (await inReach(rows)).length;
    if (rows.length < size) return counted;
    after = { lastUpdated: 0, id: rows[rows.length - 1]!.id };
  }
  return undefined;
}

/** countInReach where a count must be given (`_summary=count`, `_count=0`): too costly is a 400. */
export async function requiredCount(deps: FhirDeps, req: FhirRequest, query: SearchQuery): Promise<number> {
  const n = await countInReach(deps, req, query);
  if (n === undefined) {
    throw new FhirError('invalid', `Counting ${query.type} resources this token may read takes reading more than ${COUNT_BATCH * COUNT_BATCHES} of them (${query.type === 'Binary' ? 'their securityContext is' : 'the versions their targets name are'} in no index): narrow the search (by _lastUpdated, say)`, { issueCode: 'too-costly', expression: NARROWED_BY });
  }
  return n;
}

/**
 * The query without its result parameters given no value (`_count=`, `_sort=`, `_elements=`, `_include=`):
 * R4 search.html, "Empty parameters are not an error - they are just ignored by the server", as a
 * criterion with no value is (compileSearch), and left out of the self link alike; the same object when
 * there is none.
 */
export function withoutEmptyResultParams(params: URLSearchParams): URLSearchParams {
  const emptyResult = ([key, value]: [string, string]) => value === '' && CONTROL.has(key.split(':', 1)[0]!);
  for (const entry of params) {
    if (emptyResult(entry)) return new URLSearchParams([...params].filter((e) => !emptyResult(e)));
  }
  return params;
}

/**
 * Runs a type-level search with paging, or a compartment search (`compartment`: `{type}/{id}/{type}`,
 * src/fhir/compartments.ts); patient-context tokens see only their compartment.
 */
export async function searchResources(
  deps: FhirDeps, req: FhirRequest, type: string, given: URLSearchParams, strict: boolean, within?: Compartment, asOf?: number, pin?: PagePin,
): Promise<SearchResult> {
  const compartment = patientOf(within);
  return searchAtOffset(withoutEmptyResultParams(given), strict, (params) => searchPage(deps, req, type, params, strict, within, asOf, pin), (params, offset) => {
    // Paged by offset (a sort on a parameter), the page's cursor is the offset itself, unless the core
    // resources are merged in (their cursor holds two offsets) or contained resources are searched, or
    // some matches may be out of reach (keptInReach): walked, counting those within.
    if (containedMode(params) || (deps.core !== undefined && hasCoreResources(type)) || keptInReach(deps, req, type, compartment) !== undefined) return undefined;
    return keysetSort(parseSort(type, params.get('_sort'))) ? undefined : encodeCursor({ offset });
  });
}

/**
 * How the matches of a search of `type` by `req` that no index can judge are kept, or undefined when
 * the store's are all within reach: Binaries whose securityContext the token may not read, when its
 * reach through them is limited (binaryReachLimited, rowsInReach), and the Provenance a search by a
 * patient's token widened past its compartment found by a target naming a version out of reach
 * (provenanceRowsInReach).
 */
export function keptInReach(
  deps: FhirDeps, req: FhirRequest, type: string, compartment?: string, w?: Pick<ResourceWriter, 'search' | 'vread' | 'present'>,
): ((rows: ResourceVersion[]) => Promise<ResourceVersion[]>) | undefined {
  const widened = widenedPatient(req, type, 's', compartment);
  if (widened !== undefined) return (rows) => provenanceRowsInReach(deps, req, rows, widened, w && writerTargetReads(deps, req.tenant, w));
  if (type === 'Binary' && (binaryReachLimited(req.access) || !listsUnfiled(req.access))) {
    return (rows) => rowsInReach(deps, req, rows, w && writerContextReads(deps, req.tenant, w), true);
  }
  return undefined;
}

/** The most matches out of reach one page of a search reads past (rowsFilled); history pages and a search's includes take the same bound. */
export const PAGE_READ_IN_REACH = 20_000;
/**
 * The expression of a search's `too-costly` for reading past too many matches out of reach (a page, a count): the
 * parameter that narrows any search, of every type, in its index (as a history page's names `_since` and `_at`).
 */
const NARROWED_BY = ['_lastUpdated'];
const READ_BATCH = 1000;

/**
 * The first `query.count` matches of `query` that `keep` keeps (keptInReach), each with its place among
 * the store's matches (`at`, from the query's start): read on past those it leaves out, so that neither
 * a page's length nor its `next` link tells of one (a short page with a `next` link, or a `next` link
 * to nothing, told that a resource out of reach matched, and `_filter` could ask that of any of its
 * elements). Reading past more than PAGE_READ_IN_REACH matches out of reach before the page is full
 * (counted in the page's order) is a 400.
 */
export async function rowsFilled(
  deps: FhirDeps, req: FhirRequest, query: SearchQuery, keep: (rows: ResourceVersion[]) => Promise<ResourceVersion[]>,
  search: (query: SearchQuery) => Promise<ResourceVersion[]> = (q) => deps.store.resources.search(req.tenant, q),
): Promise<{ row: ResourceVersion; at: number }[]> {
  const start = query.offset ?? 0;
  const keyset = keysetSort(query.sort) !== undefined;
  const kept: { row: ResourceVersion; at: number }[] = [];
  let read = 0;
  let outOfReach = 0;
  let after = query.after;
  // The page's own count first (nothing left out: one statement, as before), then twice as many each time, up to READ_BATCH.
  for (let size = query.count; kept.length < query.count; size = Math.max(size, Math.min(2 * size, READ_BATCH))) {
    const batch = await search({ ...query, count: size, ...(keyset ? (after ? { after } : {}) : { offset: start + read }) });
    const within = new Set(await keep(batch));
    for (const [i, row] of batch.entries()) {
      if (kept.length >= query.count) break;
      if (within.has(row)) kept.push({ row, at: read + i });
      else if (++outOfReach > PAGE_READ_IN_REACH) {
        const why = query.type === 'Binary' ? 'their securityContext is' : 'the versions their targets name are';
        throw new FhirError('invalid', `A page of this search takes reading more than ${PAGE_READ_IN_REACH} ${query.type} resources out of this token's reach (${why} in no index): narrow the search (by _lastUpdated, say)`, { issueCode: 'too-costly', expression: NARROWED_BY });
      }
    }
    read += batch.length;
    if (batch.length < size) break;
    const last = batch[batch.length - 1]!;
    after = { lastUpdated: last.lastUpdated, id: last.id };
  }
  return kept;
}

/** A page of rowsFilled: the page and one more within reach; `offsets(n)`, the store offset past its n-th row. */
async function pageFilled(deps: FhirDeps, req: FhirRequest, query: SearchQuery, keep: (rows: ResourceVersion[]) => Promise<ResourceVersion[]>): Promise<{ rows: ResourceVersion[]; offsets(n: number): { store: number } }> {
  const kept = await rowsFilled(deps, req, { ...query, count: query.count + 1 }, keep);
  return { rows: kept.map((k) => k.row), offsets: (n) => ({ store: (query.offset ?? 0) + kept[n - 1]!.at + 1 }) };
}

/**
 * compileSearch, and where the search holds more than MAX_SEARCH_TESTS tests, compiled again without
 * the chain and `_has` alternatives that can match nothing in the tenant's data (presentLinks): a chain
 * through a reference to any type (`Observation?focus.status=active`) names every type with the
 * parameter, of which a tenant holds few.
 */
export async function compileLinked(deps: FhirDeps, req: FhirRequest, type: string, params: URLSearchParams, strict: boolean): Promise<CompiledSearch> {
  const tenant = req.tenant;
  const now = deps.clock.now();
  const opened = await openCursor(deps, req, type, params.get('_cursor'));
  try {
    return compileSearch(type, params, strict, now, undefined, opened);
  } catch (err) {
    if (!(err instanceof TooManyTests)) throw err;
    return compileSearch(type, params, strict, now, await presentLinks(deps, tenant, err.pending), opened);
  }
}

/** `compiled` bound to the members of `within` when it is not a Patient's compartment (whose index the store query names). */
export function withinCompartment(compiled: CompiledSearch, within: Compartment | undefined): CompiledSearch {
  if (within !== undefined && within.type !== 'Patient') compiled.pending.push(membership(within, compiled.query.type));
  return compiled;
}

/** A page's search compiled and completed for the store (storeQuery: undefined when the token sees none of it). */
async function pageQuery(
  deps: FhirDeps, req: FhirRequest, type: string, params: URLSearchParams, strict: boolean, within?: Compartment,
): Promise<{ compiled: CompiledSearch; query: SearchQuery | undefined }> {
  const compiled = withinCompartment(await compileLinked(deps, req, type, params, strict), within);
  return { compiled, query: await storeQuery(deps, req, type, compiled, patientOf(within)) };
}

/**
 * The store query of a type-level search whose page is one plain store search, its first `_count` rows (searchPage's
 * last way: no core resources merged in, no matches kept in reach by reads of their own, no parameter but criteria and
 * `_count`), as searchResources would run it and return it as its `query`: `{ query: undefined }` where the token sees
 * none of the type. Undefined for any other search, which searchResources alone answers. Errors are searchResources'.
 */
export async function plainPageQuery(deps: FhirDeps, req: FhirRequest, type: string, params: URLSearchParams): Promise<{ query: SearchQuery | undefined } | undefined> {
  if ([...params.keys()].some((k) => k !== '_count' && CONTROL.has(k.split(':', 1)[0]!))) return undefined;
  checkRestType(type);
  requireAccess(req.access, type, 's');
  const { compiled, query } = await pageQuery(deps, req, type, params, true);
  if (query === undefined) return { query };
  if (compiled.summary === 'count' || query.count === 0 || searchesCore(deps, query) || keptInReach(deps, req, type) !== undefined) return undefined;
  return { query };
}

/**
 * A page of a type-level search, from its start or its `_cursor` (searchResources); a later page in `_id` or
 * `_lastUpdated` order as of `asOf`, the first page's time its cursor carried (src/fhir/search-pin.ts), unless
 * the write mark `pin` carried still holds (pinMark).
 */
async function searchPage(
  deps: FhirDeps, req: FhirRequest, type: string, given: URLSearchParams, strict: boolean, within?: Compartment, asOf?: number, pin?: PagePin,
): Promise<SearchResult> {
  checkRestType(type);
  requireAccess(req.access, type, 's');
  const { params, carried } = carriedTotal(given);
  const contained = containedMode(params);
  if (contained) return searchContained(deps, req, type, params, strict, contained, within);
  const compartment = patientOf(within);
  const { compiled, query } = await pageQuery(deps, req, type, params, strict, within);
  const { warnings, self, total } = compiled;
  if (query === undefined) return { rows: [], included: [], total: 0, warnings, self };
  const repo = deps.store.resources;
  const core = searchesCore(deps, query);
  const count = () => countInReach(deps, req, query);
  if (compiled.summary === 'count' || query.count === 0) {
    return { rows: [], included: [], total: await requiredCount(deps, req, query), warnings, self };
  }
  // `_total` is counted while the page is read (on PostgreSQL on a connection of its own), or carried from
  // the page before while the tenant's data is unchanged (search-total.ts); a failed page leaves the count's
  // outcome unread, so it is caught here.
  const counting = total === 'accurate' || total === 'estimate'
    ? (await pageTotal(deps, req, carried, totalContext(req, cursorContext(req, type), self, query, within), count, pin === undefined ? undefined : () => pinMark(deps, req.tenant, pin).then((m) => m.mark))).counting
    : undefined;
  counting?.catch(() => undefined);
  const keep = keptInReach(deps, req, type, compartment);
  // A place in a sort on parameters is a cursor of a plain page (below): the core matches and those
  // kept in reach are paged by offset.
  if (query.afterKeys !== undefined && (core || keep !== undefined)) {
    throw new FhirError('invalid', "Invalid _cursor: it is not a place in this search's order", { expression: ['_cursor'] });
  }
  const page: { rows: ResourceVersion[]; offsets(n: number): { store: number; core?: number } } = core
    ? await searchWithCore(deps, req.tenant, { ...query, count: query.count + 1 }, compiled.coreOffset)
    : keep !== undefined
      ? await pageFilled(deps, req, query, keep)
      : { rows: await pinnedRows(deps, req, { ...query, count: query.count + 1 }, { asOf, pin, later: query.after !== undefined || query.afterKeys !== undefined }, warnings), offsets: (n) => ({ store: (query.offset ?? 0) + n }) };
  const rows = page.rows;
  const result: SearchResult = { rows: rows.slice(0, query.count), included: [], warnings, self, query };
  if (rows.length > query.count) {
    const last = result.rows[result.rows.length - 1]!;
    const at = page.offsets(query.count);
    // A sort on parameters pages on from the last match's keys (SearchQuery.afterKeys): by offset, a
    // match written or deleted before the place meanwhile made the next page repeat or skip others.
    // A keyset cursor carries the matches before the next page where this page's are known (the first
    // page, or a cursor that carried them), for that page's `previous` link.
    const before = query.after === undefined ? 0 : compiled.keysetOffset;
    result.next = keysetSort(query.sort)
      ? encodeCursor({ lastUpdated: last.lastUpdated, id: last.id, ...(before === undefined ? {} : { before: before + result.rows.length }) })
      : !core && keep === undefined
        ? await sortedCursor(deps, req, type, last, query.sort, (compiled.sortedOffset ?? query.offset ?? 0) + query.count)
        : encodeCursor(at.core === undefined ? { offset: at.store } : { offset: at.store, core: at.core });
  }
  if (compiled.cursor !== undefined) result.page = pageLinks(compiled);
  const first = !query.after && !query.afterKeys && !query.offset && !compiled.coreOffset;
  const counted = await counting;
  if (counted?.total !== undefined) result.total = counted.total;
  else if (total !== 'none' && first && !result.next) result.total = result.rows.length;
  await carryLinks(result, counted);
  if (compiled.includes.length || compiled.revincludes.length) {
    const inc = await addIncludes(deps, req, compiled, result.rows);
    result.included = inc.included;
    result.warnings = [...warnings, ...inc.warnings];
  }
  const shape = shaper(compiled);
  if (shape) result.shape = shape;
  const includedShape = result.included.length ? shaper(includedSubset(compiled)) : undefined;
  if (includedShape) result.includedShape = includedShape;
  return result;
}
