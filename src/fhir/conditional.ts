import { requireAccess } from './access.ts';
import { FhirError } from '../errors.ts';
import { createHash } from 'node:crypto';
import type { Condition, ResourceVersion, ResourceWriter, SearchQuery } from '../store/types.ts';
import { createResource, deleteResource, isRefusal, type Deletion, updateResource, validationLevel, type FhirDeps, type FhirRequest, type UpdatePreconditions, type WriteResult } from './crud.ts';
import { carryLiterals } from './exact-json.ts';
import { asResource, checkTypeAndId, withoutId } from './resource.ts';
import type { HeldSearches } from './bundle-held-searches.ts';
import { requireIfMatch, VersionConflict, type IfMatch } from './if-match.ts';
import { requireValidPaced } from './validation/check.ts';
import { CONTROL, criteriaOf, MAX_COUNT, searchResources } from './search.ts';
import { writerTargetReads } from './provenance-reach.ts';
import { matchConditions, type MatchContext } from './search-match.ts';
import type { Resource } from './resource.ts';
import { containedMode } from './search-contained.ts';
import { hasCoreResources } from './core-layer.ts';
import { strictQuery } from './query-encoding.ts';

/**
 * Whether the query has a parameter that selects resources: any but the result parameters such as
 * `_count`, and but one with no value (`identifier=`), which a search ignores (R4 search.html: "Empty
 * parameters are not an error - they are just ignored"), so that it selects no resource alone.
 */
export function hasCriteria(query: URLSearchParams): boolean {
  for (const [key, value] of query) if (isCriterion(key, value)) return true;
  return false;
}

function isCriterion(key: string, value: string): boolean {
  return value !== '' && !CONTROL.has(key.split(':', 1)[0]!);
}

/**
 * Parses the query of a conditional interaction (`identifier=x`, `?identifier=x`, `Type?identifier=x`, or
 * `{base}/Type?identifier=x` under this server's FHIR base `base`, as HAPI FHIR takes it), as the `If-None-Exist`
 * header and `Bundle.entry.request.ifNoneExist` carry it (FHIR R4 http 3.1.0.8.1: "[base]/[type]?[search
 * parameters]"). Another server's base is an error naming it: a condition searches this one.
 * `expression` names the header or element in errors, where the caller does not place them itself.
 */
export function parseCondition(raw: string, type: string, where: string, expression?: string, base?: string): URLSearchParams {
  const named = expression === undefined ? undefined : { expression: [expression] };
  const rel = relativeCondition(raw, where, named, base);
  const q = rel.indexOf('?');
  if (q > 0 && rel.slice(0, q) !== type) {
    throw new FhirError('invalid', `${where}: condition '${raw}' names type '${rel.slice(0, q)}', expected ${type}`, named);
  }
  const query = strictQuery(q < 0 ? rel : rel.slice(q + 1), expression);
  if (!hasCriteria(query)) throw new FhirError('invalid', `${where}: condition '${raw}' has no search criteria`, named);
  return query;
}

/** `raw` without this server's FHIR base `base` (`{base}/Type?query`, `{base}?query`); an absolute URL under another base is a 400 naming it. */
function relativeCondition(raw: string, where: string, named: { expression: string[] } | undefined, base: string | undefined): string {
  const q = raw.indexOf('?');
  const path = q < 0 ? raw : raw.slice(0, q);
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) return raw;
  if (base !== undefined && path === base) return raw.slice(base.length);
  const namedBase = path.slice(0, path.lastIndexOf('/'));
  if (base !== undefined && namedBase === base) return raw.slice(base.length + 1);
  const ours = base === undefined ? '' : ` (this server's is ${base})`;
  throw new FhirError('invalid', `${where}: condition '${raw}' names another server's base '${namedBase}'${ours}: a condition searches this server`, named);
}

/** A condition as messages show it: `Type?a=b`, its values decoded (`urn:x|1`, not `urn%3Ax%7C1`). */
export function showCondition(type: string, query: URLSearchParams): string {
  return `${type}?${[...query].map(([k, v]) => `${k}=${v}`).join('&')}`;
}

/**
 * The current resources a conditional query selects, at most `count` of them (FHIR R4 conditional
 * interactions): unknown parameters are errors here (a lenient match could select the wrong resource).
 */
export async function conditionMatches(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, where: string, count = 2,
): Promise<ResourceVersion[]> {
  return (await conditionSearch(deps, req, type, query, where, count)).rows;
}

/** What a condition search found: its rows, and the store query it ran (none: the token sees none of the type). */
export interface ConditionFound {
  rows: ResourceVersion[];
  query: SearchQuery | undefined;
}

/** Condition searches answered before they are asked (a transaction's, grouped: bundle-condition-answers.ts), each once. */
export interface ConditionAnswers {
  take(type: string, params: URLSearchParams): ConditionFound | undefined;
}

/**
 * conditionMatches, with the store query it ran, which a transaction searches again at its commit (HeldSearches);
 * answered by `answers` where they hold its answer (the same rows and query).
 */
export async function conditionSearch(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, where: string, count: number, answers?: ConditionAnswers,
): Promise<ConditionFound> {
  const params = conditionParams(type, query, where, count);
  const answered = answers?.take(type, params);
  if (answered !== undefined) return answered;
  const { rows, query: ran } = await searchResources(deps, req, type, params, true);
  return { rows, query: ran };
}

/** The search parameters conditionSearch runs a condition with: its first `count` matches, whatever its result parameters ask. */
export function conditionParams(type: string, query: URLSearchParams, where: string, count: number): URLSearchParams {
  const params = new URLSearchParams(query);
  if (containedMode(params)) throw new FhirError('invalid', `${where}: condition '${showCondition(type, query)}' cannot use _contained (it selects one ${type})`, { expression: ['_contained'] });
  params.set('_count', String(count));
  // A result parameter selects nothing: a condition's matches are all of them, whatever `_offset` or `_cursor` skips, and
  // found as rows, whatever `_summary` or `_elements` shows (`_summary=count` found none: a conditional create wrote a duplicate).
  for (const shaping of ['_offset', '_cursor', '_summary', '_elements']) params.delete(shaping);
  return params;
}

/** The count searchBeside searches with, for `wanted` matches beside those in `excluded`. */
export function besideCount(wanted: number, excluded: ReadonlySet<string>): number {
  return Math.min(wanted + excluded.size, MAX_COUNT);
}

/**
 * Resolves a conditional query to at most one current resource (conditionMatches); two or more matches
 * are 412. The ids in `excluded` (a transaction deletes them) match nothing. A transaction's search is
 * recorded in `held`, to be searched again at its commit (HeldSearches); `expression` names the element (or header) holding its condition,
 * in the 412 and in searchBeside's 400; without it (a REST update, patch or delete by its URL) the 412 names the criteria's parameters. `answers`: the searches a transaction's planning read ahead (conditionSearch).
 */
export async function resolveCondition(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, where: string, excluded: ReadonlySet<string> = new Set(), held?: HeldSearches, expression?: string,
  answers?: ConditionAnswers,
): Promise<ResourceVersion | undefined> {
  const rows = await searchBeside(deps, req, type, query, where, excluded, 2, held, expression, answers);
  if (rows.length > 1) {
    throw new FhirError('precondition', `${where}: condition '${showCondition(type, query)}' matches more than one resource`, {
      expression: expression === undefined ? criteriaNames(query) : [expression],
    });
  }
  return rows[0];
}

/**
 * The search parameters a REST conditional update, patch or delete selects by (its URL's criteria, as written, each
 * once): what its 412 names (and a conditional patch's 404), as a search's error names its parameter, where a Bundle entry's names its `request.url`.
 */
export function criteriaNames(query: URLSearchParams): string[] {
  return [...new Set([...query].filter(([k, v]) => isCriterion(k, v)).map(([k]) => k))];
}

/**
 * The first `wanted` current resources the condition `query` matches but for those in `excluded` (a transaction deletes or
 * replaces them), as conditionSearch finds them, the search recorded in `held` with the count it ran. The excluded are
 * searched with the rest and dropped, all of them within one page (MAX_COUNT) or as many as it holds: a full page with
 * fewer than `wanted` others may hide one past it (a conditional create beside a thousand deletes of its matches created a
 * duplicate, and its search, held to a count no page gives, was found changed at every commit: 409), so it is a 400
 * (`too-costly`) naming the condition, and the element holding it (`expression`), rather than a guess.
 */
export async function searchBeside(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, where: string, excluded: ReadonlySet<string>, wanted: number, held: HeldSearches | undefined,
  expression?: string, answers?: ConditionAnswers,
): Promise<ResourceVersion[]> {
  const count = besideCount(wanted, excluded);
  const found = await conditionSearch(deps, req, type, query, where, count, answers);
  held?.add(type, query, where, count, found);
  const rows = found.rows.filter((v) => !excluded.has(v.id));
  if (rows.length < wanted && found.rows.length >= count && count < wanted + excluded.size) {
    throw new FhirError('invalid', `${where}: condition '${showCondition(type, query)}' matches more than ${MAX_COUNT - wanted} resources the transaction deletes or changes, past which another match cannot be told apart; split the transaction or narrow the condition`, {
      issueCode: 'too-costly',
      ...(expression === undefined ? {} : { expression: [expression] }),
    });
  }
  return rows;
}

/** Per store, the conditions of the conditional writes under way in this process (exclusively). */
const underWay = new WeakMap<object, Map<string, Promise<void>>>();

/** A condition as exclusively takes it: its type and criteria in one order, whatever the query's. */
export function conditionKey(type: string, query: URLSearchParams): string {
  const criteria = [...query].filter(([k, v]) => isCriterion(k, v)).map(([k, v]) => `${k}=${v}`).sort();
  return `${type}?${criteria.join('&')}`;
}

/** The key of a condition's claim in the store (ResourceWriter.claim): fixed in size, whatever the criteria's. */
function claimKey(condition: string): string {
  return createHash('sha256').update(condition).digest('base64url');
}

/**
 * Called inside a conditional write's store transaction, before it writes, with the conditions its
 * write settles (those that matched nothing: it creates their resource). Throws ConditionRaced when
 * another process settled one of them since this write searched.
 */
export type Settle = (w: ResourceWriter, conditions: string[]) => Promise<void>;

/**
 * Another process settled a condition after this write searched, the resource the condition matched
 * changed or went (heldToMatch), or a Bundle's PATCH entry met a write to what it patched: the
 * transaction rolls back and exclusively tries again.
 */
export class ConditionRaced extends Error {}

/**
 * Whether a write may hold to `match` (heldToMatch): a version the tenant stored, not a core CodeSystem
 * or ValueSet it never stored, which has no stored version to hold to (a write makes the tenant's own
 * version 1, as a PUT of that id does).
 */
export async function storedMatch(deps: FhirDeps, req: FhirRequest, type: string, match: ResourceVersion): Promise<boolean> {
  return deps.core === undefined || !hasCoreResources(type) || (await deps.store.resources.read(req.tenant, type, match.id)) !== null;
}

/**
 * A write to the resource a condition matched, held to the version the search found (FHIR R4
 * conditional update, patch and delete act on "the matching resource"): a write or delete by another request
 * between the search and this write would otherwise be overwritten, the update bringing a deleted match
 * back (201, beside another request's new resource of the same condition: two resources matching it
 * from then on) or writing over a resource that no longer matches. The client's If-Match is judged
 * against the matched version; the write then holds to that version, and fails with ConditionRaced
 * when it is no longer current, so that exclusively searches again.
 */
export async function heldToMatch<T>(match: ResourceVersion, ifMatch: IfMatch | undefined, target: string, write: (held: IfMatch) => Promise<T>): Promise<T> {
  requireIfMatch(ifMatch, target, match);
  try {
    return await write([match.versionId]);
  } catch (err) {
    if (err instanceof VersionConflict) throw new ConditionRaced();
    throw err;
  }
}

/**
 * A REST conditional write to `match`: held to the matched version (heldToMatch) where the tenant stored
 * it (storedMatch); a core CodeSystem or ValueSet it never stored is written with the client's If-Match alone.
 */
export async function writeToMatch<T>(
  deps: FhirDeps, req: FhirRequest, type: string, match: ResourceVersion, ifMatch: IfMatch | undefined, write: (ifMatch: IfMatch | undefined) => Promise<T>,
): Promise<T> {
  if (!(await storedMatch(deps, req, type, match))) return write(ifMatch);
  return heldToMatch(match, ifMatch, `${type}/${match.id}`, write);
}

/** Attempts of a conditional write whose conditions other processes keep settling first (each time one of them wrote). */
const ATTEMPTS = 8;

/**
 * Runs `fn` as a conditional write of these conditions (conditionKey) of `tenant`: two conditional creates
 * or updates of the same criteria at once would otherwise each find no match, and each create.
 * - In this process, `fn` waits until no other write of any of these conditions is under way, and holds
 *   them until it settles. Each condition's writes run in their order of arrival; the keys are taken in
 *   sorted order, so Bundles holding several never wait for each other in a cycle.
 * - Between processes sharing the database (CINDER_PROCESSES, instances on one PostgreSQL), each
 *   condition has a claim in the store, read before `fn` searches and moved on by its write (`settle`,
 *   in the write's transaction). A write that finds a claim moved rolls back and `fn` runs again
 *   (`attempt` counts from 1): it searches again and finds the other process's resource.
 */
export async function exclusively<T>(
  deps: FhirDeps, tenant: string, conditions: string[], fn: (settle: Settle, attempt: number) => Promise<T>,
): Promise<T> {
  if (conditions.length === 0) {
    // No condition to hold: still run again when a write finds what it read changed (ConditionRaced).
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn(settleNothing, attempt);
      } catch (err) {
        if (!(err instanceof ConditionRaced)) throw err;
        if (attempt === ATTEMPTS) throw new FhirError('conflict', 'Other requests kept changing the resources this request writes while it ran; retry the request');
      }
      await raceDelay(attempt);
    }
  }
  let locks = underWay.get(deps.store);
  if (!locks) underWay.set(deps.store, (locks = new Map()));
  const releases: (() => void)[] = [];
  const unique = [...new Set(conditions)].sort();
  try {
    for (const condition of unique) {
      const key = `${tenant}\n${condition}`;
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
    const keys = new Map(unique.map((c) => [c, claimKey(c)]));
    for (let attempt = 1; ; attempt++) {
      const counts = await deps.store.resources.claims(tenant, [...keys.values()]);
      const seen = new Map([...keys.values()].map((k, i) => [k, counts[i]!]));
      const settle: Settle = async (w, settled) => {
        if (settled.length === 0) return;
        const claims = [...new Set(settled)].map((c) => {
          const key = keys.get(c);
          if (key === undefined) throw new Error(`condition '${c}' is not among the write's (exclusively)`);
          return { key, seen: seen.get(key)! };
        });
        if (!(await w.claim(claims, deps.clock.now()))) throw new ConditionRaced();
      };
      try {
        return await fn(settle, attempt);
      } catch (err) {
        if (!(err instanceof ConditionRaced)) throw err;
        if (attempt === ATTEMPTS) {
          throw new FhirError('conflict', `Other requests kept writing resources of '${unique.join("', '")}' (or those it patches) while this write searched; retry the request`);
        }
      }
      await raceDelay(attempt);
    }
  } finally {
    for (const release of releases) release();
  }
}

const settleNothing: Settle = async () => {};

/** A random wait before attempt `attempt` + 1, growing with it, so that writes that met once spread out. */
const raceDelay = (attempt: number) => Bun.sleep(Math.random() * 2 ** attempt);

/**
 * The conditions (conditionKey) of the Bundle entries that exclusively runs a write of: those that may
 * create a resource (`ifNoneExist` POSTs, conditional PUTs) and conditional DELETEs, whose writes to
 * a match hold to the matched version (heldToMatch) and search again when it changed.
 */
export function writeConditions(entries: { type: string; method: string; condition?: URLSearchParams }[]): string[] {
  return entries.filter((e) => e.condition && (e.method === 'POST' || e.method === 'PUT' || e.method === 'DELETE')).map((e) => conditionKey(e.type, e.condition!));
}

/**
 * Refuses (400) a conditional create, or a conditional update that creates, whose resource its own condition
 * would not find: the next request of the same condition (a retry, the next run of an import) would find
 * nothing and create another, so the condition protects nothing; it is a client's mistake, such as a wrong
 * identifier system. HAPI FHIR refuses the same (HAPI-0929, "the supplied resource did not satisfy the
 * conditional URL"). `criteria` are the condition's own (criteriaOf), matched against `resource` as written
 * (`id` undefined while the server has not given one: an `_id` criterion is never met by a create) at
 * `lastUpdated`, its chains and `_has` looked up through `ctx`. A transaction judges this once all its
 * entries are written, so that another entry's resource counts.
 */
export async function requireFoundByCondition(
  resource: Resource, lastUpdated: number, criteria: Condition[], ctx: MatchContext, condition: string, expression: string | string[],
): Promise<void> {
  if (await matchConditions(resource, lastUpdated, criteria, ctx)) return;
  // A plus left unencoded (`phone=+1-555`, `email=a+b@x`) is a space, as in any query: the usual cause of a value with one.
  const plus = condition.includes(' ') ? " (a '+' in a query is read as a space, as in a search's URL: a plus is written %2B)" : '';
  throw new FhirError('invalid', `The resource does not meet its own condition '${condition}'${plus}: the condition would not find it once created, so a repeat of this request would create another`, {
    expression: typeof expression === 'string' ? [expression] : expression,
  });
}

/**
 * A REST conditional create's or update's claim of its condition (`settle`), returning requireFoundByCondition
 * for the version it writes, judged in its transaction after the write's other checks (its chains through the
 * writer). The criteria are completed first, on the pool.
 */
async function settledAndFound(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, condition: string, settle: Settle, expression: string | string[],
): Promise<(w: ResourceWriter) => Promise<(written: ResourceVersion) => Promise<void>>> {
  const criteria = await criteriaOf(deps, req, type, query, deps.clock.now());
  return async (w) => {
    await settle(w, [condition]);
    const ctx = writerTargetReads(deps, req.tenant, w).lookups!;
    return (v) => requireFoundByCondition(JSON.parse(v.content) as Resource, v.lastUpdated, criteria, ctx, showCondition(type, query), expression);
  };
}

/**
 * FHIR R4 conditional create (3.1.0.8.1, `If-None-Exist`): no match creates (201), one match returns
 * it without writing (200), several are 412. Creates of the same condition run one after another
 * (exclusively), so that the later ones find the first's resource, in other processes too.
 */
export async function conditionalCreate(
  deps: FhirDeps, req: FhirRequest, type: string, body: unknown, ifNoneExist: string,
): Promise<WriteResult> {
  checkTypeAndId(type);
  // A create, whether or not a resource matches: a token that may not create the type learns nothing by it.
  requireAccess(req.access, type, 'c');
  // Invalid content is refused before the search, whether or not a resource matches.
  const resource = asResource(withoutId(body), type);
  await requireValidPaced(resource, validationLevel(deps));
  const query = parseCondition(ifNoneExist, type, 'If-None-Exist', 'If-None-Exist', deps.fhirBase?.(req.tenant));
  const condition = conditionKey(type, query);
  return exclusively(deps, req.tenant, [condition], async (settle) => {
    const match = await resolveCondition(deps, req, type, query, 'If-None-Exist', undefined, undefined, 'If-None-Exist');
    if (match) return { version: match, created: false, unchanged: false, matched: true };
    return createResource(deps, req, type, resource, await settledAndFound(deps, req, type, query, condition, settle, 'If-None-Exist'));
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
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, body: unknown, pre: UpdatePreconditions = {},
): Promise<WriteResult> {
  const { ifMatch, ifNoneMatch } = pre;
  checkTypeAndId(type);
  const resource = asResource(body, type);
  requireCriteria(query, 'Conditional update');
  // Invalid content is refused before the search, unless it may be the update of its one match that changes nothing
  // (updateResource: a no-op is not refused by rules newer than what it stores again), which the search tells.
  let refused: unknown;
  try {
    await requireValidPaced(resource, validationLevel(deps));
  } catch (err) {
    if (!isRefusal(err)) throw err;
    refused = err;
  }
  // Updates of the same condition run one after another, as creates do (exclusively): two finding no match would each create.
  const condition = conditionKey(type, query);
  return exclusively(deps, req.tenant, [condition], async (settle) => {
    const match = await resolveCondition(deps, req, type, query, 'Conditional update').catch((err: unknown) => Promise.reject(err instanceof FhirError ? refused ?? err : err));
    if (refused !== undefined && (!match || (resource.id !== undefined && resource.id !== match.id))) throw refused;
    if (match) {
      if (resource.id !== undefined && resource.id !== match.id) {
        throw new FhirError('invalid', `Resource id '${resource.id}' differs from the id '${match.id}' the condition matched`, { expression: ['id'] });
      }
      const matched = carryLiterals(resource, { ...resource, id: match.id });
      return writeToMatch(deps, req, type, match, ifMatch, (held) => updateResource(deps, req, type, match.id, matched, { ifMatch: held, ifNoneMatch }));
    }
    // A miss names the criteria, as its 412 does.
    const settles = await settledAndFound(deps, req, type, query, condition, settle, criteriaNames(query));
    if (resource.id !== undefined) return updateResource(deps, req, type, resource.id, resource, pre, settles, true);
    // Nothing matched, so nothing has a current version for If-Match to hold on (RFC 9110 13.1.1).
    requireIfMatch(ifMatch, `${type}?${query}`, null);
    // Still the PUT it was: its history says so, with the id it created.
    return createResource(deps, req, type, resource, settles, 'PUT');
  });
}

/**
 * FHIR R4 conditional delete (3.1.0.7.1, `DELETE [type]?query`), one resource at a time: no match
 * deletes nothing (null), one match is deleted, several are 412. `If-Match` applies to the match; with
 * no match it cannot hold (412). The delete holds to the version the search matched (heldToMatch), and
 * runs beside the condition's other writes as they run beside each other (exclusively).
 */
export async function conditionalDelete(
  deps: FhirDeps, req: FhirRequest, type: string, query: URLSearchParams, ifMatch?: IfMatch, ifNoneMatch?: IfMatch,
): Promise<{ id: string; version: Deletion | null } | null> {
  checkTypeAndId(type);
  requireCriteria(query, 'Conditional delete');
  return exclusively(deps, req.tenant, [conditionKey(type, query)], async () => {
    const match = await resolveCondition(deps, req, type, query, 'Conditional delete');
    if (!match) {
      requireIfMatch(ifMatch, `${type}?${query}`, null);
      return null;
    }
    return { id: match.id, version: await writeToMatch(deps, req, type, match, ifMatch, (held) => deleteResource(deps, req, type, match.id, held, ifNoneMatch)) };
  });
}
