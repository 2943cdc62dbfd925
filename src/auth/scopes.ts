import { FhirError } from '../errors.ts';
import type { Access, Permission } from '../fhir/access.ts';
import { compileFilter } from '../fhir/search.ts';
import { hasPending, type PendingCondition } from '../fhir/search-compile.ts';
import type { Condition } from '../store/types.ts';
import { isResourceType } from '../fhir/resource-types.ts';
import { strictQuery } from '../fhir/query-encoding.ts';

export type ScopeContext = 'system' | 'user' | 'patient';

/**
 * One SMART resource scope, v1 (`read`/`write`/`*`) or v2 (`cruds` letters) normalised to permissions;
 * a v2 scope may carry a search filter (`patient/Observation.rs?category=laboratory`).
 */
export interface ResourceScope {
  context: ScopeContext;
  type: string;
  perms: Set<Permission>;
  /** The filter's query string, for a v2 scope on one type. */
  query?: string;
}

const SCOPE = /^(system|user|patient)\/(\*|[A-Z][A-Za-z]+)\.(\*|read|write|c?r?u?d?s?)(?:\?(.+))?$/;
const V1: Record<string, Permission[]> = { read: ['r', 's'], write: ['c', 'u', 'd'], '*': ['c', 'r', 'u', 'd', 's'] };

/**
 * Parses a SMART App Launch 2.x resource scope (`system/Patient.rs`, `user/*.read`, `patient/*.cruds`,
 * `patient/Observation.rs?category=laboratory`). Returns null for anything else (OpenID scopes, custom
 * scopes, a filter on a v1 scope or on `*`, or a filter that is not a valid search of its type).
 */
export function parseResourceScope(scope: string): ResourceScope | null {
  const m = SCOPE.exec(scope);
  if (!m || m[3] === '') return null;
  const [, context, type, perm, query] = m as unknown as [string, ScopeContext, string, string, string | undefined];
  if (type !== '*' && !isResourceType(type)) return null;
  const parsed: ResourceScope = { context, type, perms: new Set(V1[perm] ?? (perm.split('') as Permission[])) };
  if (query === undefined) return parsed;
  if (type === '*' || V1[perm] || compileScopeFilter(type, query) === null) return null;
  return { ...parsed, query };
}

/**
 * A scope filter's conditions (the search engine's, strict), or null when the query is not a valid
 * search of `type`, or names a parameter with no value (`?category=`): a search ignores it (R4
 * search.html), which in a grant would widen it to what the parameter was to narrow. Some may need
 * completing (`:in`, a reference `:below`: hasPending), which ScopedAccess.complete does once per token.
 */
export function compileScopeFilter(type: string, query: string): PendingCondition[] | null {
  try {
    // As a search's query: a malformed percent-encoding (`%ZZ`) is refused, not read as the characters written.
    const params = strictQuery(query);
    if (params.size === 0 || [...params.values()].includes('')) return null;
    return compileFilter(type, params);
  } catch {
    return null;
  }
}

/**
 * Why `scope`, shaped as a SMART resource scope (`system/`, `user/` or `patient/` then a type), is not one that
 * grants anything (parseResourceScope's null: a filter the search engine cannot apply, `_has:Flag:subject:status`
 * when Flag has no `status`, a result parameter such as `_count`, an empty value, a filter on a v1 scope or on `*`),
 * or null when it is one, or is no such scope at all (an OpenID, launch or custom scope). A client registered with
 * such a scope would get tokens that carry it and read nothing by it: registration and token requests refuse it.
 */
export function resourceScopeProblem(scope: string): string | null {
  if (!/^(system|user|patient)\//.test(scope) || parseResourceScope(scope) !== null) return null;
  const m = SCOPE.exec(scope);
  if (!m || m[3] === '') return 'not a SMART resource scope: use {system|user|patient}/{Type|*}.{cruds letters|read|write|*}';
  const [, , type, perm, query] = m;
  if (type !== '*' && !isResourceType(type!)) return `'${type}' is not an R4 resource type`;
  if (type === '*') return 'a filter needs one resource type, not *';
  if (V1[perm!]) return 'a filter needs v2 permissions (letters of cruds), not .read, .write or .*';
  try {
    strictQuery(query!);
  } catch (err) {
    return `the filter is not a search of ${type} the server can apply: ${err instanceof Error ? err.message : String(err)}`;
  }
  const params = new URLSearchParams(query);
  if (params.size === 0) return `the filter names no parameter ('?${query}')`;
  const empty = [...params].find(([, v]) => v === '');
  if (empty) return `the filter's parameter '${empty[0]}' has no value, which a search would ignore`;
  try {
    compileFilter(type!, params);
  } catch (err) {
    return `the filter is not a search of ${type} the server can apply: ${err instanceof Error ? err.message : String(err)}`;
  }
  return 'not a valid SMART resource scope';
}

/**
 * resourceScopeProblem for a scope an app asks for: only a filter (`?...`) the engine cannot apply is refused, as a
 * filter left out would widen or empty what the app expects without its knowing; a resource scope of a type R4 does
 * not have, or otherwise not granted, is left out of the grant as any scope the server does not grant is (RFC 6749
 * 3.3: apps written for other FHIR versions ask for such types).
 */
export function requestedScopeProblem(scope: string): string | null {
  return scope.includes('?') ? resourceScopeProblem(scope) : null;
}

/** Whether `scope` is a well-formed SMART resource scope. */
export function isResourceScope(scope: string): boolean {
  return parseResourceScope(scope) !== null;
}

/**
 * Whether a client registered with `registered` may be granted `requested` (SMART App Launch 2.x,
 * scopes v1 and v2 are equivalent: `.read` = `.rs`, `.write` = `.cud`, `.*` = `.cruds`): the same
 * string, or a resource scope of the same context whose type and permissions a registered one covers
 * (`system/*.read` covers `system/Observation.rs`). A filtered registered scope covers only its own filter,
 * judged by meaning (sameFilter: its pairs in any order, repeated, or percent-encoded otherwise), never one
 * with more pairs or another. An unfiltered one covers a filter of what it covers, one reading other resources (a
 * chain, `_has`, `_list`, a reference `:below`/`:above`) only where the registered scopes search each type it reads
 * whole (linkedReadable): a scope filter reads them unbounded by the token's scopes, so `system/Observation.rs`
 * asking `system/Observation.rs?patient._has:Condition:patient:code=x` learnt which patients have a diagnosis it
 * may not read. A context never implies another.
 */
export function isImpliedBy(requested: string, registered: readonly string[]): boolean {
  if (registered.includes(requested)) return true;
  const want = parseResourceScope(requested);
  if (!want) return false;
  let readable: boolean | undefined;
  return registered.some((r) => {
    const have = parseResourceScope(r);
    // An unfiltered registered scope implies a filter of what it covers; a filtered one its own filter alone.
    return have !== null && have.context === want.context && (have.type === '*' || have.type === want.type) &&
      [...want.perms].every((p) => have.perms.has(p)) &&
      (have.query === undefined ? (readable ??= linkedReadable(want, registered)) : want.query !== undefined && sameFilter(have.query, want.query));
  });
}

/**
 * Whether `registered` search every type `scope`'s filter reads beyond the resource it filters (linkedTypes) whole:
 * unfiltered and bound to no patient (a `patient/` scope, with no patient at registration, binds to none and grants
 * nothing), so the filter tells nothing a search of theirs could not.
 */
function linkedReadable(scope: ResourceScope, registered: readonly string[]): boolean {
  const compiled = scope.query === undefined ? [] : compileScopeFilter(scope.type, scope.query) ?? [];
  const types = new Set(compiled.flatMap(linkedTypes));
  if (types.size === 0) return true;
  const access = accessFromScopes([...registered], '');
  return [...types].every((type) => access.can(type, 's') && access.filters?.(type, 's') === undefined && access.patientLimit(type, 's') === undefined);
}

/** The types a condition reads beyond the resource it tests: a chain's targets, `_has`' referrers (`_list`'s List), a hierarchy walked. */
function linkedTypes(c: PendingCondition): string[] {
  switch (c.kind) {
    case 'chain': return [c.targetType, ...c.where.flatMap(linkedTypes)];
    case 'has': return [c.type, ...c.where.flatMap(linkedTypes)];
    case 'hierarchy': return [c.target];
    case 'and': return c.all.flatMap(linkedTypes);
    case 'or': return c.any.flatMap(linkedTypes);
    case 'not': return linkedTypes(c.condition);
    default: return [];
  }
}

/**
 * The resource scopes of `recorded` whose reads and searches a token of `granted` may not make as a token of
 * `recorded` did (the two tokens having the same patient in context, or none): none when a token of `granted`
 * reads and searches whatever one of `recorded` did. Each of a recorded scope's `r` and `s` must be implied by
 * one granted scope (permissionImpliedBy), and a type and permission that `recorded` reads beyond the patient in
 * context must not be bound to it by `granted` (a `patient/` scope beside filtered `user/` ones binds them:
 * accessFromScopes). Scopes that grant neither (`.cud`, `openid`) do not count.
 */
export function readsNotImplied(recorded: readonly string[], granted: readonly string[]): string[] {
  const grants = granted.map(parseResourceScope).filter((s): s is ResourceScope => s !== null);
  // The same patient for both (the caller checks it): without one, neither holds a `patient/` scope, which binds nothing.
  const bound = (scopes: readonly string[]) => accessFromScopes([...scopes], '', 'in-context').patientLimit;
  const [recordedBound, grantedBound] = [bound(recorded), bound(granted)];
  return recorded.filter((scope) => {
    const want = parseResourceScope(scope);
    const reads = want ? (['r', 's'] as const).filter((p) => want.perms.has(p)) : [];
    return reads.some((p) => !permissionImpliedBy(want!, p, grants, true) ||
      (want!.type !== '*' && recordedBound(want!.type, p) === undefined && grantedBound(want!.type, p) !== undefined));
  });
}

/**
 * Whether one of `granted` gives `perm` of what `want` gives it of: its context, or (`userForPatient`) `user/`
 * for `patient/` (a user's `user/` scopes reach what the user can access, their patients' records included, and
 * a user who acts for patients holds them in their `patient/` form: scopesForUser); `*` or its type; and no
 * filter, or one whose parameter/value pairs are all in `want`'s (the pairs are ANDed, in any order).
 */
function permissionImpliedBy(want: ResourceScope, perm: Permission, granted: readonly ResourceScope[], userForPatient: boolean): boolean {
  return granted.some((have) => (have.context === want.context || (userForPatient && have.context === 'user' && want.context === 'patient')) &&
    (have.type === '*' || have.type === want.type) && have.perms.has(perm) &&
    (have.query === undefined || (want.query !== undefined && filterWithin(have.query, want.query))));
}

/**
 * The scopes of `requested` that a grant of `granted` does not imply by meaning, for a refresh that narrows its
 * grant (RFC 6749 6; SMART App Launch 2.2, "equal to or a subset of the scopes granted"): none when each is
 * granted as it is, or is a resource scope each of whose permissions one granted scope gives of what it gives
 * it of (permissionImpliedBy: `patient/*.read` implies `patient/Patient.read`, `patient/*.rs` and
 * `patient/Observation.rs?category=laboratory`; `patient/*.read` with `patient/Observation.write`,
 * `patient/Observation.cruds`; `user/Observation.rs?category=laboratory` implies the same filter with more
 * conditions, never another filter or none). A `user/` scope implies its `patient/` form only beside a patient
 * in context (`withPatient`): without one a `patient/` scope reads nothing, so the token could not carry it.
 * A pair a filter adds must read nothing but the resource filtered (linkingPairs), unless the implying scope's
 * filter holds it. OpenID, launch and custom scopes are implied by themselves alone.
 */
export function scopesNotImplied(requested: readonly string[], granted: readonly string[], withPatient: boolean): string[] {
  const grants = granted.map(parseResourceScope).filter((s): s is ResourceScope => s !== null);
  return requested.filter((scope) => {
    if (granted.includes(scope)) return false;
    const want = parseResourceScope(scope);
    if (want === null) return true;
    // A filter's pairs that read other resources (a chain, `_has`, `_list`, a reference `:below`/`:above`) are
    // applied unguarded (the token's own scopes never bound them, as they bound a search's: guardLinked), so
    // one added to a granted filter would answer what those resources hold, which the grant may not read; unless the
    // grant searches each type they read whole (linkedReadable), as a sign-in is granted them (isImpliedBy).
    const linked = linkingPairs(want);
    const keeps = linked.length === 0 || linkedReadable(want, granted) ? grants : grants.filter((have) => have.query !== undefined && filterWithin(pairsQuery(linked), have.query));
    return ![...want.perms].every((p) => permissionImpliedBy(want, p, keeps, withPatient));
  });
}

/** The parameter/value pairs of `scope`'s filter whose conditions read resources other than the one filtered (linksResources). */
export function linkingPairs(scope: ResourceScope | null): [string, string][] {
  if (scope?.query === undefined) return [];
  return [...new URLSearchParams(scope.query)].filter((pair) => {
    const compiled = compileScopeFilter(scope.type, pairsQuery([pair]));
    return compiled === null || compiled.some(linksResources);
  });
}

/** Whether a condition reads other resources: a chain, `_has` (`_list` is one), a reference hierarchy walk. */
function linksResources(c: PendingCondition): boolean {
  switch (c.kind) {
    case 'chain': case 'has': case 'hierarchy': return true;
    case 'and': return c.all.some(linksResources);
    case 'or': return c.any.some(linksResources);
    case 'not': return linksResources(c.condition);
    default: return false;
  }
}

const pairsQuery = (pairs: readonly [string, string][]) => new URLSearchParams(pairs as [string, string][]).toString();

/**
 * The resource scopes of `requested` that would reach beyond the patient in context where `granted` keeps it
 * there: a token of `granted` has a type and permission bound to the patient (a `patient/` scope beside only
 * filtered `user/` ones: accessFromScopes' patientLimit) that a token of `requested` alone would not bind, so a
 * refresh asking it (`user/Observation.rs?category=vital-signs` without the `patient/Observation.rs` beside it)
 * would read other patients' records the grant's tokens never could. Each type a scope names is checked, and
 * one named by neither for the wildcards (every type unnamed is bound alike).
 */
export function patientBoundsLifted(requested: readonly string[], granted: readonly string[]): string[] {
  const bound = (scopes: readonly string[]) => accessFromScopes([...scopes], '', 'in-context').patientLimit;
  const [requestedBound, grantedBound] = [bound(requested), bound(granted)];
  const named = [...requested, ...granted].map(parseResourceScope).filter((s): s is ResourceScope => s !== null && s.type !== '*').map((s) => s.type);
  const types = [...new Set(named), '\u0000unnamed'];
  return requested.filter((scope) => {
    const want = parseResourceScope(scope);
    if (want === null || want.context === 'patient') return false;
    const reached = want.type === '*' ? types : [want.type];
    return [...want.perms].some((p) => reached.some((type) => requestedBound(type, p) === undefined && grantedBound(type, p) !== undefined));
  });
}

/** Whether every parameter/value pair of scope filter `query` is one of `within`'s (decoded, in any order, repeats alike). */
function filterWithin(query: string, within: string): boolean {
  const pairs = (q: string) => [...new URLSearchParams(q)].map((pair) => JSON.stringify(pair));
  const outer = new Set(pairs(within));
  return pairs(query).every((pair) => outer.has(pair));
}

/**
 * Whether two scope filters mean the same search: the same parameter/value pairs, decoded (`%3D`, `+`), in any
 * order, a repeated pair alike (the pairs are ANDed, so `category=a&category=a` is `category=a`).
 */
function sameFilter(a: string, b: string): boolean {
  return filterWithin(a, b) && filterWithin(b, a);
}

/**
 * The scopes with each `user/` and `system/` resource scope in its `patient/` form: the same type,
 * permissions and v2 filter (`user/Observation.rs?category=laboratory` ->
 * `patient/Observation.rs?category=laboratory`), duplicates dropped. What a user who acts for patients
 * holds of such scopes (scopesForUser): neither may reach past the patients the user acts for.
 */
export function scopesAsPatient(scopes: string[]): string[] {
  return [...new Set(scopes.map((s) => {
    const context = parseResourceScope(s)?.context;
    return context === 'user' || context === 'system' ? `patient/${s.slice(context.length + 1)}` : s;
  }))];
}

/**
 * The scopes a token carries with no patient in context (a grant stored before the login page inferred
 * `launch/patient`, or whose user is no longer a Patient): none that needs one (needsPatientContext: SMART App
 * Launch 2.2 grants a `patient/` scope only with a patient in context), and of every other resource scope only
 * the permissions no such scope kept to the patient in context. A `patient/` scope beside a filtered `user/`
 * (or `system/`) one keeps that one within the patient's compartment (accessFromScopes' patientLimit): without
 * a patient it reads nothing, and carried alone it would read every patient's records. So
 * `patient/Observation.rs user/Observation.rs?category=laboratory` leaves nothing of Observation, and
 * `patient/Observation.r user/Observation.rs?category=laboratory` leaves `user/Observation.s?category=laboratory`
 * (the grant never kept its searches to the patient). Unfiltered scopes are never bound, and stay.
 */
export function scopesWithoutPatient(scopes: readonly string[]): string[] {
  const bound = accessFromScopes([...scopes], '', 'in-context').patientLimit;
  return scopes.flatMap((s) => {
    if (needsPatientContext(s)) return [];
    const scope = parseResourceScope(s);
    if (scope === null || scope.query === undefined) return [s];
    // A filtered scope names one type, and is v2: its permissions are letters.
    const kept = V1['*']!.filter((p) => scope.perms.has(p) && bound(scope.type, p) === undefined);
    if (kept.length === scope.perms.size) return [s];
    return kept.length === 0 ? [] : [`${scope.context}/${scope.type}.${kept.join('')}?${scope.query}`];
  });
}

/**
 * Whether a scope needs a patient in context: a `patient/` resource scope, `launch/patient`, or `launch`
 * (granted only with an EHR launch, which always names a patient: src/auth/launch.ts). SMART App Launch
 * 2.2 (Scopes and Launch Context): "If an application requests a FHIR Resource scope which is
 * restricted to a single patient (e.g., patient/*.rs), and the authorization results in the EHR granting
 * that scope, the EHR SHALL establish a patient in context."
 */
export function needsPatientContext(scope: string): boolean {
  return scope === 'launch/patient' || scope === 'launch' || scope.startsWith('patient/');
}

/**
 * Whether a granted scope releases the encounter in context (SMART App Launch 2.2, launch context):
 * `launch` (an EHR launch's own context) or `launch/encounter`. Cinder has encounters in context only
 * from an EHR launch; they narrow no access (SMART 2.2 defines no encounter-bound scopes).
 */
export function releasesEncounter(scope: string): boolean {
  return scope === 'launch' || scope === 'launch/encounter';
}

/** Splits a space-delimited scope string (RFC 6749 3.3), dropping empties and duplicates. */
export function splitScopes(scope: string | undefined | null): string[] {
  return [...new Set((scope ?? '').split(' ').filter(Boolean))];
}

/** Completes a scope filter's pending conditions (`:in` and the other terminology modifiers, a reference `:below`) in `tenant`. */
export type CompleteConditions = (tenant: string, pending: PendingCondition[]) => Promise<Condition[]>;

/** The access of a token's scopes, and the completion of its scope filters that need the server's data. */
export interface ScopedAccess extends Access {
  /** Whether a scope filter waits for `complete` (until then such a scope grants nothing). */
  readonly incomplete: boolean;
  /**
   * Completes every such filter (their ValueSets expanded, their hierarchies walked), once for the
   * token: its filters then stay as they were completed. A filter that cannot be completed (an unknown
   * ValueSet) grants nothing.
   */
  complete(tenant: string, completeConditions: CompleteConditions): Promise<void>;
}

/**
 * Types that patient-context scopes never grant, `patient/*.rs` included: not a patient's record nor a
 * record shared with every patient (as a Practitioner or a Medication is). A Subscription is another app's
 * set-up: it holds its app's endpoint, the credentials in its `channel.header`, and its id is all a
 * websocket client needs to bind to its notifications. A stored Bundle (a document `$document?persist=true`
 * wrote, a collection) is copies of other resources whole, any patient's, in no compartment: granted as a
 * shared record, one patient's token read every other patient's persisted documents. A user/ or system/
 * scope grants them.
 */
const NOT_A_PATIENTS = new Set(['Subscription', 'Bundle']);

/**
 * Types a patient-context scope reaches only where they name no other patient: an AuditEvent (the server's own
 * record of who touched what) is in the compartment of every patient it names, and one naming several (a search of
 * `patient=pa,pb`, a transaction writing both patients' records) tells of the others, their records' ids and the
 * query that was searched, base64 in `entity.query` (`Observation?patient=pa,pb&code=...`). Kept to those whose every
 * `patient` is the patient in context, by the search engine (`_filter=not (patient ne Patient/{id})`), as a scope
 * filter is, so reads, searches, includes, history, `$everything` and exports agree.
 */
const ONE_PATIENTS = new Set(['AuditEvent']);

/** The condition that `type`'s resources name no patient but `patient` (ONE_PATIENTS), compiled once per token. */
function onlyPatient(type: string, patient: string): Condition[] {
  const compiled = compileScopeFilter(type, new URLSearchParams({ _filter: `not (patient ne Patient/${patient})` }).toString());
  return compiled === null || compiled.some(hasPending) ? [{ kind: 'id', ids: [] }] : (compiled as Condition[]);
}

/**
 * The FHIR access a set of granted scopes gives. Patient-context scopes limit a type to the compartment
 * of `patient`, for each permission, unless a system/user scope grants that permission on the type
 * without a filter; without a patient they grant nothing, and what they would have kept to the patient's
 * compartment the filtered system/user scopes beside them grant nothing of either.
 */
export function accessFromScopes(scopes: string[], clientId: string, patient?: string, user?: Access['user']): ScopedAccess {
  const parsed = scopes.map(parseResourceScope).filter((s): s is ResourceScope => s !== null);
  // Each filter's conditions, compiled once; those holding pending ones wait for `complete`.
  const conditions = new Map<ResourceScope, Condition[]>();
  const waiting = new Map<ResourceScope, PendingCondition[]>();
  for (const scope of parsed) {
    if (scope.query === undefined) continue;
    const compiled = compileScopeFilter(scope.type, scope.query)!;
    if (compiled.some(hasPending)) waiting.set(scope, compiled);
    else conditions.set(scope, compiled as Condition[]);
  }
  const nothing: Condition[] = [{ kind: 'id', ids: [] }];
  const wide = parsed.filter((s) => s.context !== 'patient');
  const binding = parsed.filter((s) => s.context === 'patient');
  const narrow = patient ? binding : [];
  const covering = (list: ResourceScope[], type: string, perm?: Permission) =>
    list !== wide && NOT_A_PATIENTS.has(type) ? [] : list.filter((s) => (s.type === '*' || s.type === type) && (perm === undefined || s.perms.has(perm)));
  const covers = (list: ResourceScope[], type: string, perm?: Permission) => covering(list, type, perm).length > 0;
  // Without a patient a `patient/` scope binds to no one, and what it keeps to the patient's compartment (a type and
  // permission no unfiltered system/user scope grants) is kept to nothing: the filtered system/user scopes beside it
  // grant none of it, or they would read every patient's records (scopesWithoutPatient says so of a token's scopes).
  const unbound = (type: string, perm: Permission) => !patient && covers(binding, type, perm) && !covering(wide, type, perm).some((s) => s.query === undefined);
  const widening = (type: string, perm: Permission) => (unbound(type, perm) ? [] : covering(wide, type, perm));
  // A system/user scope lifts the bound only for what it grants itself: the same permission on the
  // type, unfiltered (`user/Observation.c` does not widen reads; a filtered one is no wider than
  // the patient's compartment can be kept to, so the bound stays).
  const patientLimit = (type: string, perm: Permission) =>
    (patient && !covering(wide, type, perm).some((s) => s.query === undefined) && covers(narrow, type, perm) ? patient : undefined);
  const filters = new Map<string, Condition[][] | undefined>();
  return {
    get incomplete() {
      return waiting.size > 0;
    },
    async complete(tenant, completeConditions) {
      for (const [scope, pending] of waiting) {
        let done: Condition[];
        try {
          done = await completeConditions(tenant, pending);
        } catch (err) {
          if (!(err instanceof FhirError) || err.status >= 500) throw err;
          done = nothing;
        }
        conditions.set(scope, done);
        waiting.delete(scope);
      }
      filters.clear();
    },
    clientId,
    scopes,
    ...(patient !== undefined && { patient }),
    ...(user !== undefined && { user }),
    can: (type, perm) => widening(type, perm).length > 0 || covers(narrow, type, perm),
    patientLimit,
    filters(type, perm) {
      const key = `${type}.${perm}`;
      if (filters.has(key)) return filters.get(key);
      const scopes = [...widening(type, perm), ...covering(narrow, type, perm)];
      // Any unfiltered scope for the type and permission: no filter.
      let result = scopes.length === 0 || scopes.some((s) => s.query === undefined)
        ? undefined
        : scopes.map((s) => conditions.get(s) ?? nothing);
      // Bound to the patient, a type that may name other patients too is kept to what names this one alone.
      const bound = patientLimit(type, perm);
      if (bound !== undefined && ONE_PATIENTS.has(type)) {
        const only = onlyPatient(type, bound);
        result = result === undefined ? [only] : result.map((all) => [...all, ...only]);
      }
      filters.set(key, result);
      return result;
    },
  };
}
