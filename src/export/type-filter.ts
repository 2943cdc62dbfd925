import { FhirError, type FhirIssue } from '../errors.ts';
import { issue } from '../fhir/outcome.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import type { Access } from '../fhir/access.ts';
import { compileFilter, countTests, countValues, guardLinked, MAX_SEARCH_TESTS, resolveConditions, type ResolveDeps } from '../fhir/search.ts';
import { MAX_SEARCH_VALUES } from '../fhir/search-values.ts';
import { isResourceType } from '../fhir/resource-types.ts';
import { strictQuery } from '../fhir/query-encoding.ts';
import type { Condition } from '../store/types.ts';

/** Search result parameters that Bulk Data 2.0 forbids in `_typeFilter` (and others a filter cannot mean). */
const NOT_FILTERS = new Set(['_include', '_revinclude', '_sort', '_count', '_offset', '_summary', '_total', '_elements', '_contained', '_containedType', '_format', '_pretty', '_cursor']);

export interface TypeFilters {
  filters: Record<string, Condition[][]>;
  issues: FhirIssue[];
}

/** The codes of `:in`, `:not-in`, `:below` and `:above` (the terminology service, as search has them). */
export type ExpandCodes = NonNullable<FhirDeps['expandCodes']>;

/**
 * Parses one `Type?query`; throws a FhirError naming the query when Cinder cannot apply it. A query of a type
 * the export does not hold (`_type` leaves it out, or the token may not read it) is checked as any other but
 * selects nothing (`exported` false): Bulk Data 2.0 `_typeFilter` only filters out resources of its type that
 * would otherwise be returned, and types outside `_type` are not (the IG's later processing model drops them
 * first; the SMART reference server applies a filter only to resources of its type). It is not resolved: its `:in` codes and chained types would cost for nothing,
 * and tell a token of a type it may not search.
 */
async function parseOne(query: string, types: Set<string>, tenant: string, access: Access, resolve: ResolveDeps, now: number, lenient: boolean, issues: FhirIssue[]): Promise<{ type: string; filter: Condition[] | null; exported: boolean }> {
  const q = query.indexOf('?');
  const type = q < 0 ? query : query.slice(0, q);
  const where = { expression: ['_typeFilter'] };
  if (!isResourceType(type)) throw new FhirError('invalid', `_typeFilter '${query}': '${type}' is not a resource type`, where);
  let params: URLSearchParams;
  try {
    // As a search's query: a malformed percent-encoding is refused, not read as the characters written (`%ZZ`) or U+FFFD.
    params = strictQuery(q < 0 ? '' : query.slice(q + 1), '_typeFilter');
  } catch (err) {
    if (err instanceof FhirError) throw new FhirError(err.category, `_typeFilter '${query}': ${err.message}`, { ...where, cause: err });
    throw err;
  }
  for (const key of params.keys()) {
    const name = key.split(':')[0]!;
    if (NOT_FILTERS.has(name)) throw new FhirError('not-supported', `_typeFilter '${query}': ${name} is not allowed in a filter`, where);
  }
  emptyParameters(query, params, lenient, issues);
  const exported = types.has(type);
  let conditions;
  try {
    const compiled = compileFilter(type, params, now);
    if (!exported) return { type, filter: null, exported };
    // `:in` and the others become their codes now, at kick-off: the job keeps them as token conditions.
    // Chains and `_has` reach other types as the kick-off token may search them (guardLinked).
    conditions = guardLinked(access, await resolveConditions({ ...resolve, access }, tenant, compiled));
  } catch (err) {
    if (err instanceof FhirError) throw new FhirError(err.category, `_typeFilter '${query}': ${err.message}`, { ...where, cause: err });
    throw err;
  }
  return { type, filter: conditions.length ? conditions : null, exported };
}

/**
 * A parameter of `query` with no value (`Observation?category=`), which a search ignores (R4 search.html), is a 400
 * naming it: ignored, it would export every resource the parameter was to leave out, for a client whose value came
 * out empty by mistake (as `_typeFilter=` itself is: README "Bulk Data export"). With lenient handling it is left out
 * of the query (as a search leaves it) and a warning says so.
 */
function emptyParameters(query: string, params: URLSearchParams, lenient: boolean, issues: FhirIssue[]): void {
  for (const key of new Set([...params].filter(([, value]) => value === '').map(([key]) => key))) {
    const text = `_typeFilter '${query}': the parameter '${key}' has no value, which a search would ignore and the export would not be filtered by`;
    if (!lenient) throw new FhirError('invalid', text, { expression: ['_typeFilter'] });
    issues.push(issue('warning', 'invalid', `${text}; it was left out of the query`, ['_typeFilter']));
  }
}

/** At most this many alternatives come of one query's `or`s (alternativesOf). */
const MAX_ALTERNATIVES = 32;

/**
 * A query's conditions as ORed alternatives, each ANDed: its `or`s (`_filter`'s `a or (b and c)`)
 * spread over the rest, so that each alternative holding a token of codes is read through those codes'
 * rows (src/store/snapshot-window.ts) instead of every resource of the type. Left whole when that
 * would make more than MAX_ALTERNATIVES.
 */
function alternativesOf(conditions: Condition[]): Condition[][] {
  let out: Condition[][] = [[]];
  for (const c of conditions) {
    if (c.kind !== 'or' || out.length * c.any.length > MAX_ALTERNATIVES) {
      for (const alt of out) alt.push(c);
      continue;
    }
    out = out.flatMap((alt) => c.any.map((x) => [...alt, ...(x.kind === 'and' ? x.all : [x])]));
  }
  return out;
}

/**
 * Queries of one type: its scan tests each row it reads against every one of them (beyond the window of
 * src/store/snapshot-window.ts, which reads at most as many code ranges), so each is one more probe per row.
 */
export const MAX_TYPE_FILTERS = 32;

/**
 * Values of all of a kick-off's queries together (ten searches' worth). Those of one type are searched
 * together, so they are held to one search's MAX_SEARCH_VALUES; the job keeps them all, and the status
 * URL and each download read them again.
 */
export const MAX_TYPE_FILTER_VALUES = 10 * MAX_SEARCH_VALUES;

function tooCostly(text: string): FhirError {
  return new FhirError('invalid', text, { issueCode: 'too-costly', expression: ['_typeFilter'] });
}

/** MAX_TYPE_FILTERS, before any query is parsed. */
function checkQueryCounts(queries: string[]): void {
  const counts = new Map<string, number>();
  for (const query of queries) {
    const type = query.split('?', 1)[0]!;
    const n = (counts.get(type) ?? 0) + 1;
    counts.set(type, n);
    if (n > MAX_TYPE_FILTERS) {
      throw tooCostly(`_typeFilter holds more than ${MAX_TYPE_FILTERS} queries of ${type}; at most ${MAX_TYPE_FILTERS} are supported (alternatives of one parameter go in one query: code=a,b,c)`);
    }
  }
}

/** The values of the queries parsed so far, per type and in all. */
interface ValueCounts {
  ofType: Map<string, number>;
  all: number;
}

/** Adds a parsed query's values to its type's and the kick-off's, within MAX_SEARCH_VALUES and MAX_TYPE_FILTER_VALUES. */
function countQueryValues(counts: ValueCounts, type: string, filter: Condition[] | null): void {
  const n = filter ? countValues(filter) : 0;
  const ofType = (counts.ofType.get(type) ?? 0) + n;
  counts.ofType.set(type, ofType);
  counts.all += n;
  if (ofType > MAX_SEARCH_VALUES) throw tooCostly(`_typeFilter's queries of ${type} hold more than ${MAX_SEARCH_VALUES} values together, which are searched together; at most ${MAX_SEARCH_VALUES} are supported`);
  if (counts.all > MAX_TYPE_FILTER_VALUES) throw tooCostly(`_typeFilter's queries hold more than ${MAX_TYPE_FILTER_VALUES} values; at most ${MAX_TYPE_FILTER_VALUES} are supported`);
}

/**
 * `_typeFilter` (Bulk Data 2.0): FHIR search queries (every parameter the search API takes), ORed per type.
 * A query Cinder cannot apply is a 400; with lenient handling its type is exported unfiltered instead
 * (as a server ignoring it would) and an issue says so. Too many queries of a type, or values, are a 400
 * `too-costly` whatever the handling (MAX_TYPE_FILTERS, MAX_TYPE_FILTER_VALUES), never an export without them.
 */
export async function parseTypeFilters(
  queries: string[], exported: string[], lenient: boolean, tenant: string, access: Access, resolve: ResolveDeps = {}, now = Date.now(),
): Promise<TypeFilters> {
  checkQueryCounts(queries);
  const types = new Set(exported);
  const filters: Record<string, Condition[][]> = {};
  const unfiltered = new Set<string>();
  const issues: FhirIssue[] = [];
  const values: ValueCounts = { ofType: new Map(), all: 0 };
  // The queries of a type are ORed in one statement that tests every resource of the type against
  // each: together they hold no more tests than one search (2,000 held a job, and a database
  // connection, for minutes on 68,000 Observations).
  let tests = 0;
  for (const query of queries) {
    let parsed;
    try {
      parsed = await parseOne(query, types, tenant, access, resolve, now, lenient, issues);
    } catch (err) {
      // Lenient handling tolerates a client's mistake, never the server's state (a 5xx): the filter is not dropped for it.
      if (!lenient || !(err instanceof FhirError) || err.status >= 500) throw err;
      const type = query.split('?')[0]!;
      if (types.has(type)) unfiltered.add(type);
      issues.push(issue('warning', 'not-supported', `${err.message}; the filter was not applied`, ['_typeFilter']));
      continue;
    }
    const { type, filter, exported } = parsed;
    if (!exported) continue;
    countQueryValues(values, type, filter);
    tests += filter === null ? 0 : countTests(filter);
    if (tests > MAX_SEARCH_TESTS) {
      throw new FhirError('invalid', `The _typeFilter queries hold more than ${MAX_SEARCH_TESTS} tests together (parameters, _filter tests, chained steps)`, { issueCode: 'too-costly', expression: ['_typeFilter'] });
    }
    if (filter === null) unfiltered.add(type);
    else (filters[type] ??= []).push(...alternativesOf(filter));
  }
  for (const type of unfiltered) delete filters[type];
  return { filters, issues };
}
