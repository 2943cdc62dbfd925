import { FhirError, type FhirIssue } from '../errors.ts';
import { indexEntries } from '../fhir/indexer.ts';
import { issue } from '../fhir/outcome.ts';
import { parseSearch } from '../fhir/search.ts';
import { isResourceType } from '../fhir/resource-types.ts';
import type { SnapshotFilter, TimeCriterion } from '../store/types.ts';

/** Search result parameters that Bulk Data 2.0 forbids in `_typeFilter` (and others a filter cannot mean). */
const NOT_FILTERS = new Set(['_include', '_revinclude', '_sort', '_count', '_summary', '_total', '_elements', '_contained', '_containedType', '_format', '_pretty', '_cursor']);

export interface TypeFilters {
  filters: Record<string, SnapshotFilter[]>;
  issues: FhirIssue[];
}

/** Parses one `Type?query`; throws a FhirError naming the query when Cinder cannot apply it. */
function parseOne(query: string, types: Set<string>): { type: string; filter: SnapshotFilter | null } {
  const q = query.indexOf('?');
  const type = q < 0 ? query : query.slice(0, q);
  const where = { expression: ['_typeFilter'] };
  if (!isResourceType(type)) throw new FhirError('invalid', `_typeFilter '${query}': '${type}' is not a resource type`, where);
  if (!types.has(type)) throw new FhirError('invalid', `_typeFilter '${query}': ${type} is not part of this export`, where);
  const params = new URLSearchParams(q < 0 ? '' : query.slice(q + 1));
  for (const key of params.keys()) {
    const name = key.split(':')[0]!;
    if (NOT_FILTERS.has(name)) throw new FhirError('not-supported', `_typeFilter '${query}': ${name} is not allowed in a filter`, where);
    if (name.includes('.') || name === '_has') throw new FhirError('not-supported', `_typeFilter '${query}': chained parameters are not supported`, where);
  }
  let parsed;
  try {
    parsed = parseSearch(type, params, true).query;
  } catch (err) {
    if (err instanceof FhirError) throw new FhirError(err.category, `_typeFilter '${query}': ${err.message}`, { ...where, cause: err });
    throw err;
  }
  const filter: SnapshotFilter = {};
  if (parsed.ids) filter.ids = parsed.ids;
  if (parsed.lastUpdated) filter.lastUpdated = parsed.lastUpdated;
  if (parsed.params) filter.params = parsed.params;
  return { type, filter: Object.keys(filter).length ? filter : null };
}

/**
 * `_typeFilter` (Bulk Data 2.0): FHIR search queries over the parameters Cinder indexes, ORed per type.
 * A query Cinder cannot apply is a 400; with lenient handling its type is exported unfiltered instead
 * (as a server ignoring it would) and an issue says so.
 */
export function parseTypeFilters(queries: string[], exported: string[], lenient: boolean): TypeFilters {
  const types = new Set(exported);
  const filters: Record<string, SnapshotFilter[]> = {};
  const unfiltered = new Set<string>();
  const issues: FhirIssue[] = [];
  for (const query of queries) {
    try {
      const { type, filter } = parseOne(query, types);
      if (filter === null) unfiltered.add(type);
      else (filters[type] ??= []).push(filter);
    } catch (err) {
      if (!lenient || !(err instanceof FhirError)) throw err;
      const type = query.split('?')[0]!;
      if (types.has(type)) unfiltered.add(type);
      issues.push(issue('warning', 'not-supported', `${err.message}; the filter was not applied`, ['_typeFilter']));
    }
  }
  for (const type of unfiltered) delete filters[type];
  return { filters, issues };
}

function timeMatches(t: TimeCriterion, at: number): boolean {
  switch (t.op) {
    case 'eq': return at >= t.low && at < t.high;
    case 'ne': return at < t.low || at >= t.high;
    case 'gt': return at >= t.high;
    case 'ge': return at >= t.low;
    case 'lt': return at < t.low;
    case 'le': return at < t.high;
  }
}

/** Whether a resource version passes one of the filters (the same meaning as the adapters' SQL). */
export function matchesFilters(resource: Record<string, unknown>, lastUpdated: number, filters: SnapshotFilter[]): boolean {
  let entries: ReturnType<typeof indexEntries> | undefined;
  return filters.some((f) => {
    if (f.ids && !f.ids.includes(resource.id as string)) return false;
    if (f.lastUpdated && !f.lastUpdated.every((t) => timeMatches(t, lastUpdated))) return false;
    if (!f.params) return true;
    entries ??= indexEntries(resource);
    return f.params.every((p) =>
      entries!.some(
        (e) =>
          e.param === p.param &&
          p.values.some((v) =>
            v.system === undefined ? e.value === v.value : v.value === undefined ? e.system === v.system : e.value === v.value && e.system === v.system,
          ),
      ),
    );
  });
}
