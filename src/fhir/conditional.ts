import { FhirError } from '../errors.ts';
import type { ResourceVersion } from '../store/types.ts';
import { createResource, deleteResource, updateResource, validationLevel, type FhirDeps, type FhirRequest, type WriteResult } from './crud.ts';
import { asResource, checkTypeAndId } from './resource.ts';
import { requireValid } from './validation/check.ts';
import { CONTROL, searchResources } from './search.ts';
import { containedMode } from './search-contained.ts';

/** Whether the query has a parameter that selects resources (any but the result parameters such as `_count`). */
export function hasCriteria(query: URLSearchParams): boolean {
  for (const key of query.keys()) if (!CONTROL.has(key.split(':', 1)[0]!)) return true;
  return false;
}

/**
 * Parses the query of a conditional interaction (`identifier=x`, `?identifier=x` or `Type?identifier=x`),
 * as the `If-None-Exist` header and `Bundle.entry.request.ifNoneExist` carry it (FHIR R4 http 3.1.0.8.1).
 */
export function parseCondition(raw: string, type: string, where: string): URLSearchParams {
  const q = raw.indexOf('?');
  if (q > 0 && raw.slice(0, q) !== type) {
    throw new FhirError('invalid', `${where}: condition '${raw}' names type '${raw.slice(0, q)}', expected ${type}`);
  }
  const query = new URLSearchParams(q < 0 ? raw : raw.slice(q + 1));
  if (!hasCriteria(query)) throw new FhirError('invalid', `${where}: condition '${raw}' has no search criteria`);
  return query;
}

/**
 * Resolves a conditional query to at most one current resource (FHIR R4 conditional interactions):
 * unknown parameters are errors here (a lenient match could select the wrong resource); two or more
 * matches are 412.
 */
export async function resolveCondition(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, where: string,
): Promise<ResourceVersion | undefined> {
  const params = new URLSearchParams(query);
  if (containedMode(params)) throw new FhirError('invalid', `${where}: condition '${type}?${query}' cannot use _contained (it selects one ${type})`, { expression: ['_contained'] });
  params.set('_count', '2');
  const { rows } = await searchResources(deps, req, type, params, true);
  if (rows.length > 1) throw new FhirError('precondition', `${where}: condition '${type}?${query}' matches more than one resource`);
  return rows[0];
}

/** Per store, the conditions of the conditional writes under way in this process (exclusively). */
const underWay = new WeakMap<object, Map<string, Promise<void>>>();

/** A condition as exclusively takes it: its tenant, type and criteria in one order, whatever the query's. */
export function conditionKey(tenant: string, type: string, query: URLSearchParams): string {
  const criteria = [...query].filter(([k]) => !CONTROL.has(k.split(':', 1)[0]!)).map(([k, v]) => `${k}=${v}`).sort();
  return `${tenant}/${type}?${criteria.join('&')}`;
}

/**
 * Runs `fn` once no other conditional write of any of these conditions (conditionKey) is under way in
 * this process, and holds them until it settles: two conditional creates or updates of the same
 * criteria at once would otherwise each find no match, and each create. Each condition's writes run
 * in their order of arrival; the keys are taken in sorted order, so Bundles holding several never wait
 * for each other in a cycle. Processes sharing a database (CINDER_PROCESSES, or instances on one
 * PostgreSQL) do not see each other's.
 */
export async function exclusively<T>(deps: FhirDeps, keys: string[], fn: () => Promise<T>): Promise<T> {
  if (keys.length === 0) return fn();
  let locks = underWay.get(deps.store);
  if (!locks) underWay.set(deps.store, (locks = new Map()));
  const releases: (() => void)[] = [];
  try {
    for (const key of [...new Set(keys)].sort()) {
      const before = locks.get(key);
      let release!: () => void;
      const mine = new Promise<void>((resolve) => (release = resolve));
      locks.set(key, mine);
      releases.push(() => {
        release();
        if (locks.get(key) === mine) locks.delete(key);
      });
      if (before) await before;
    }
    return await fn();
  } finally {
    for (const release of releases) release();
  }
}

/** The conditions (conditionKey) of the Bundle entries that may create a resource: `ifNoneExist` POSTs and conditional PUTs. */
export function creatingConditions(tenant: string, entries: { type: string; method: string; condition?: URLSearchParams }[]): string[] {
  return entries.filter((e) => e.condition && (e.method === 'POST' || e.method === 'PUT')).map((e) => conditionKey(tenant, e.type, e.condition!));
}

/**
 * FHIR R4 conditional create (3.1.0.8.1, `If-None-Exist`): no match creates (201), one match returns
 * it without writing (200), several are 412. Creates of the same condition run one after another
 * (exclusively), so that the later ones find the first's resource.
 */
export async function conditionalCreate(
  deps: FhirDeps, req: FhirRequest, type: string, body: unknown, ifNoneExist: string,
): Promise<WriteResult> {
  checkTypeAndId(type);
  // Invalid content is refused before the search, whether or not a resource matches.
  requireValid(asResource(body, type), validationLevel(deps));
  const query = parseCondition(ifNoneExist, type, 'If-None-Exist');
  return exclusively(deps, [conditionKey(req.tenant, type, query)], async () => {
    const match = await resolveCondition(deps, req, type, query, 'If-None-Exist');
    if (match) return { version: match, created: false };
    return createResource(deps, req, type, body);
  });
}

function requireCriteria(query: URLSearchParams, what: string): void {
  if (!hasCriteria(query)) throw new FhirError('invalid', `${what} needs search criteria in the URL (e.g. ?identifier=...)`);
}

/**
 * FHIR R4 conditional update (3.1.0.4.3, `PUT [type]?query`): no match creates (with the body's id,
 * or a server id), one match is updated (a different body id is 400), several are 412.
 */
export async function conditionalUpdate(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, body: unknown, ifMatch?: number,
): Promise<WriteResult> {
  checkTypeAndId(type);
  const resource = asResource(body, type);
  requireCriteria(query, 'Conditional update');
  requireValid(resource, validationLevel(deps));
  // Updates of the same condition run one after another, as creates do (exclusively): two finding no match would each create.
  return exclusively(deps, [conditionKey(req.tenant, type, query)], async () => {
    const match = await resolveCondition(deps, req, type, query, 'Conditional update');
    if (match) {
      if (resource.id !== undefined && resource.id !== match.id) {
        throw new FhirError('invalid', `Resource id '${resource.id}' differs from the id '${match.id}' the condition matched`, { expression: ['id'] });
      }
      return updateResource(deps, req, type, match.id, { ...resource, id: match.id }, ifMatch);
    }
    if (resource.id !== undefined) return updateResource(deps, req, type, resource.id, resource, ifMatch);
    return createResource(deps, req, type, resource);
  });
}

/**
 * FHIR R4 conditional delete (3.1.0.7.1, `DELETE [type]?query`), one resource at a time: no match
 * deletes nothing (null), one match is deleted, several are 412.
 */
export async function conditionalDelete(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams,
): Promise<{ id: string; version: ResourceVersion | null } | null> {
  checkTypeAndId(type);
  requireCriteria(query, 'Conditional delete');
  const match = await resolveCondition(deps, req, type, query, 'Conditional delete');
  if (!match) return null;
  return { id: match.id, version: await deleteResource(deps, req, type, match.id) };
}
