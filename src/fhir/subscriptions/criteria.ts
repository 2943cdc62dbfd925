/**
 * A Subscription's `criteria` (R4 subscription.html: "the rules that the server should use to determine
 * when to generate notifications", a search URL relative to the base) compiled by the search engine, as a
 * search of its type by the subscription's owner would be: its conditions, chains and `_has` held to the
 * owner's reach, the owner's SMART v2 scope filters and patient compartment added (for Provenance, the
 * compartment or the patient's records: provenance-reach.ts).
 */
import { FhirError } from '../../errors.ts';
import type { Condition } from '../../store/types.ts';
import type { PendingCondition } from '../search-compile.ts';
import { requireAccess, type Access } from '../access.ts';
import type { FhirDeps } from '../crud.ts';
import { isResourceType } from '../resource-types.ts';
import { reachCondition, widenedPatient } from '../provenance-reach.ts';
import { compileFilter, guardLinked, resolveConditions, scopedQuery } from '../search.ts';

/** A criteria ready to match resources in memory (src/fhir/search-match.ts). */
export interface CompiledCriteria {
  type: string;
  where: Condition[];
}

const AT = 'Subscription.criteria';

/** A 422 naming `Subscription.criteria`. */
function refuse(text: string, cause?: unknown): FhirError {
  return new FhirError('unprocessable', text, { expression: [AT], cause });
}

/** The type and query string of a criteria (`Observation?code=x`, or `Observation` alone), or a 422. */
export function splitCriteria(criteria: unknown): { type: string; query: string } {
  if (typeof criteria !== 'string' || criteria.trim() === '') throw refuse('Subscription.criteria is required: a search such as Observation?code=http://loinc.org|1234-5');
  const at = criteria.indexOf('?');
  const type = at < 0 ? criteria : criteria.slice(0, at);
  const query = at < 0 ? '' : criteria.slice(at + 1);
  if (!isResourceType(type)) throw refuse(`Subscription.criteria '${criteria}' does not start with a resource type Cinder knows ('${type}')`);
  return { type, query };
}

/**
 * A 422 naming `Subscription.criteria` when a parameter of `criteria` has no value (`Observation?code=`, `Observation?code`),
 * checked when a Subscription asks to be activated (create, update). A search ignores it (R4 search.html), so the
 * Subscription would be told of every resource of its type its owner may read, for a client whose value came out empty
 * by mistake (as a `_typeFilter` refuses one). One stored active by an older release keeps notifying as it did: its
 * criteria compile as its search would (compileCriteria), and an update asking to keep it active is held to this.
 */
export function requireCriteriaValues(criteria: unknown): void {
  const { type, query } = splitCriteria(criteria);
  const key = emptyParameter(query);
  if (key !== undefined) throw refuse(`Subscription.criteria '${String(criteria)}': the parameter '${key}' has no value, which a search would ignore, notifying every ${type} the owner may read; give it a value or leave it out`);
}

/** The first parameter of a query string with no value (`code=`, `code`), or undefined. */
export function emptyParameter(query: string): string | undefined {
  return [...new URLSearchParams(query)].find(([, value]) => value === '')?.[0];
}

/**
 * The conditions a write's activations resolved (`:in`, `:not-in`, `:below`, `:above`: ValueSets, code systems
 * and hierarchies read from the store), by what they resolved: filled before the write's transaction begins
 * (activation.ts prepareActivation) and read in it, where a read on another connection of the pool could wait
 * for ever on a pool that concurrent writes fill. One it holds no entry for is resolved then.
 */
export type ResolvedConditions = Map<string, Promise<Condition[]>>;

/** `pending` (of `type`) resolved, once per `resolved` (a rejection is kept as well, and handled). */
export function resolvedOnce(resolved: ResolvedConditions | undefined, type: string, pending: PendingCondition[], resolve: () => Promise<Condition[]>): Promise<Condition[]> {
  if (resolved === undefined) return resolve();
  const key = `${type}\u0000${JSON.stringify(pending)}`;
  let out = resolved.get(key);
  if (out === undefined) {
    out = resolve();
    out.catch(() => undefined);
    resolved.set(key, out);
  }
  return out;
}

/**
 * Compiles `criteria` for `access` in `tenant` (FhirDeps: the terminology service for `:in`, the store for
 * hierarchies). A criteria that does not compile is a 422 naming Subscription.criteria; one that names
 * a type or a linked type the owner may not search is a 403, as that search would be.
 */
export async function compileCriteria(deps: FhirDeps, tenant: string, access: Access, criteria: unknown, now: number, resolved?: ResolvedConditions): Promise<CompiledCriteria> {
  const { type, query } = splitCriteria(criteria);
  requireAccess(access, type, 's');
  let where: Condition[];
  try {
    const pending = compileFilter(type, new URLSearchParams(query), now);
    where = await resolvedOnce(resolved, type, pending, () => resolveConditions({ expandCodes: deps.expandCodes, fhirBase: deps.fhirBase, store: deps.store, access }, tenant, pending));
  } catch (err) {
    if (err instanceof FhirError && err.status < 500) throw refuse(`Subscription.criteria '${String(criteria)}' is not a search Cinder can run: ${err.message}`, err);
    throw err;
  }
  // A patient's Subscription of Provenance is told of those its search finds: of the patient's records too (provenance-reach.ts).
  const patient = widenedPatient({ tenant, access }, type, 's');
  const scoped = scopedQuery({ tenant, access }, type, { type, where: guardLinked(access, where), sort: [], count: 1 }, undefined, patient === undefined ? undefined : reachCondition(access, patient))!;
  const all = [...(scoped.where ?? [])];
  if (scoped.compartment !== undefined) all.push({ kind: 'compartment', patient: scoped.compartment });
  return { type, where: all };
}
