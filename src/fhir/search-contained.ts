/**
 * `_contained` and `_containedType` (FHIR R4 search.html, "Contained Resources"): a search of a type
 * that finds the resources of that type which other resources contain. `_contained=true` searches those
 * alone, `both` the type's own resources too; `_containedType=container` (the default) returns the
 * resources that contain the matches, `contained` the contained matches themselves, each with the
 * fullUrl `[base]/<Container>/<id>#<local id>`.
 *
 * The contained resources searched are those a container refers to through one of its stored
 * reference parameters (`MedicationRequest.medication`, `Observation.subject`...): the index holds their
 * rows under the parameter's prefix (src/fhir/indexer.ts containedRows), and `containedKeys` names the
 * prefixes a tenant has. Each container type is searched with the conditions renamed under each of its
 * prefixes (ORed), and the types' pages are merged as a search across types (pageAcross). As for chains
 * into contained resources, the contained resources one prefix names are searched as one; returning the
 * contained resources, each is tested on its own (src/fhir/search-match.ts) and only those that match
 * are returned.
 */
import { FhirError } from '../errors.ts';
import type { Condition, ResourceVersion, SearchQuery } from '../store/types.ts';
import { requireAccess } from './access.ts';
import type { FhirDeps, FhirRequest } from './crud.ts';
import { parseExact, stringifyExact } from './exact-json.ts';
import { containedIdParam } from './indexer.ts';
import { onContainedRows } from './search-compile.ts';
import { matchConditions } from './search-match.ts';
import { compileSearch, guardLinked, queryRows, resolveConditions, scopedQuery, scopeFilter, type SearchResult } from './search.ts';
import { pageAcross, type TypeSearch } from './search-system.ts';
import { membership, patientOf, type Compartment } from './compartments.ts';

type Json = Record<string, unknown>;

/** What `_contained` and `_containedType` ask for: undefined for `_contained=false` (or none). */
export interface ContainedMode {
  /** `both`: the type's own resources as well as those contained in others. */
  both: boolean;
  /** What is returned for a contained match: its container, or the contained resource itself. */
  as: 'container' | 'contained';
}

/** `_contained` and `_containedType` of a query; a value other than R4's is a 400 naming its parameter. */
export function containedMode(params: URLSearchParams): ContainedMode | undefined {
  const raw = params.get('_contained');
  const as = params.get('_containedType');
  if (as !== null && as !== 'container' && as !== 'contained') {
    throw new FhirError('invalid', `Invalid _containedType '${as}': expected container or contained`, { expression: ['_containedType'] });
  }
  if (raw === null || raw === 'false') return undefined;
  if (raw !== 'true' && raw !== 'both') throw new FhirError('invalid', `Invalid _contained '${raw}': expected true, false or both`, { expression: ['_contained'] });
  return { both: raw === 'both', as: as ?? 'container' };
}

/** The parameter a condition that contained resources have no rows for stands for, for its error. */
function nameOf(c: Condition): string {
  switch (c.kind) {
    case 'lastUpdated': return '_lastUpdated';
    case 'has': return '_has';
    case 'text': return c.field === 'narrative' ? '_text' : '_content';
    case 'compartment': return 'the patient compartment';
    default: return '_filter';
  }
}

/**
 * `c` on the rows of the resources contained under `prefix`: `_id` is their local id (the row of
 * containedIdParam), the rest as chains into contained resources rename it (onContainedRows).
 */
function underPrefix(c: Condition, prefix: string): Condition {
  if (c.kind === 'id') {
    const values = c.ids.map((id) => ({ system: '', value: id }));
    return c.not ? { kind: 'token', param: containedIdParam(prefix), values, not: true } : { kind: 'token', param: containedIdParam(prefix), values };
  }
  const renamed = onContainedRows(c, prefix);
  if (renamed === undefined) {
    const name = nameOf(c);
    throw new FhirError('not-supported', `${name} cannot be searched in contained resources (_contained)`, { expression: [name.startsWith('_') ? name : '_contained'] });
  }
  return renamed;
}

/** The conditions of one of a type's alternatives (ANDed), ORed with its others; none: every resource. */
function whereOf(alternatives: Condition[][]): Condition[] {
  if (alternatives.some((a) => a.length === 0)) return [];
  if (alternatives.length === 1) return alternatives[0]!;
  return [{ kind: 'or', any: alternatives.map((a): Condition => (a.length === 1 ? a[0]! : { kind: 'and', all: a })) }];
}

/**
 * A type-level (or compartment) search of `type` with `_contained=true|both`: see the module comment.
 * The types searched are the containers' (those the token may search; never Bundle, which contains
 * nothing, though its inline resources have rows of their own) and, for `both`, `type` itself.
 * `_sort`, `_include` and `_revinclude` are not supported with it (a 400).
 */
export async function searchContained(
  deps: FhirDeps, req: FhirRequest, type: string, params: URLSearchParams, strict: boolean, mode: ContainedMode, within?: Compartment,
): Promise<SearchResult> {
  requireAccess(req.access, type, 's');
  const own = new URLSearchParams();
  for (const [key, value] of params) {
    const name = key.split(':', 1)[0]!;
    if ((name === '_sort' && value !== '') || name === '_include' || name === '_revinclude') {
      throw new FhirError('not-supported', `${name} cannot be used with _contained`, { expression: [key] });
    }
    // The page position is pageAcross's (a type and an id), not a type-level search's cursor.
    if (key !== '_cursor') own.append(key, value);
  }
  const compiled = compileSearch(type, own, strict, deps.clock.now());
  const conditions = guardLinked(req.access, await resolveConditions({ expandCodes: deps.expandCodes, fhirBase: deps.fhirBase, store: deps.store, access: req.access }, req.tenant, compiled.pending));
  // The type's scope filter holds for its contained resources as for its own.
  const filter = scopeFilter(req, type, 's');
  if (filter) conditions.push(filter);
  const alternatives = new Map<string, Condition[][]>();
  const add = (t: string, all: Condition[]) => (alternatives.get(t) ?? alternatives.set(t, []).get(t)!).push(all);
  if (mode.both) add(type, conditions);
  for (const key of await deps.store.resources.containedKeys(req.tenant, type)) {
    if (key.type === 'Bundle' || !req.access.can(key.type, 's')) continue;
    const prefix = key.param.slice(0, -'_id'.length);
    add(key.type, [{ kind: 'missing', table: 'search_index', params: [key.param], missing: false }, ...conditions.map((c) => underPrefix(c, prefix))]);
  }
  // The type itself first (`both`), then its containers by name.
  const types = [...alternatives.keys()].sort((a, b) => (a === type ? -1 : b === type ? 1 : a < b ? -1 : a > b ? 1 : 0));
  const searches: TypeSearch[] = [];
  for (const t of types) {
    // In a compartment other than a Patient's, the container is a member of it (compartments.ts).
    const where = within === undefined || within.type === 'Patient' ? whereOf(alternatives.get(t)!) : [membership(within, t), ...whereOf(alternatives.get(t)!)];
    const query = scopedQuery(req, t, { type: t, where, sort: [], count: compiled.query.count }, patientOf(within));
    if (query !== undefined) searches.push({ type: t, query });
  }
  const result = await pageAcross(deps, req, params, types, searches, {
    limit: compiled.query.count, summary: compiled.summary, elements: compiled.elements, warnings: compiled.warnings, includes: [], revincludes: [], self: compiled.self,
  });
  if (mode.as === 'container' || compiled.summary === 'count' || compiled.query.count === 0) return result;
  const first = params.get('_cursor') === null;
  result.rows = await containedMatches(deps, req, type, result.rows, conditions, mode.both);
  // The store counted containers; the resources returned are known exactly when this page is all of them.
  if (first && !result.next && result.total !== undefined) result.total = result.rows.length;
  return result;
}

/** A search result row that is a contained resource: its container's identity gives its fullUrl. */
export type ContainedRow = ResourceVersion & { fullUrl: string };

/**
 * The contained resources of `type` in `rows` (containers) that meet `conditions`, each tested on its
 * own, as rows of their own with the fullUrl `<Container>/<id>#<local id>`; with `both`, a row of
 * `type` that meets them itself is kept as it is.
 */
async function containedMatches(
  deps: FhirDeps, req: FhirRequest, type: string, rows: ResourceVersion[], conditions: Condition[], both: boolean,
): Promise<ResourceVersion[]> {
  const ctx = { exists: async (q: SearchQuery) => (await queryRows(deps, req.tenant, { ...q, count: 1 })).length > 0 };
  const out: ResourceVersion[] = [];
  for (const row of rows) {
    const resource = parseExact(row.content) as Json;
    if (both && row.type === type && (await matchConditions(resource, row.lastUpdated, conditions, ctx))) out.push(row);
    if (!Array.isArray(resource.contained)) continue;
    for (const c of resource.contained as Json[]) {
      if (c === null || typeof c !== 'object' || c.resourceType !== type || typeof c.id !== 'string') continue;
      if (!(await matchConditions(c, row.lastUpdated, conditions, ctx))) continue;
      const match: ContainedRow = {
        type, id: c.id, versionId: row.versionId, lastUpdated: row.lastUpdated, deleted: false, content: stringifyExact(c), fullUrl: `${row.type}/${row.id}#${c.id}`,
      };
      out.push(match);
    }
  }
  return out;
}
