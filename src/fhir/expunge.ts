/**
 * `$expunge` (HAPI FHIR's operation, which R4 does not define) and `cinder expunge`: the physical
 * removal of stored versions, which a DELETE never does. Off unless the operator sets
 * `CINDER_EXPUNGE=on`. What goes, by HAPI's parameters:
 * - `expungeDeletedResources`: every version of each resource whose current version is a deletion;
 *   the resource is then unknown (404, its id free for a new resource from version 1);
 * - `expungePreviousVersions`: every version but the current one, of live and deleted resources;
 * - `expungeEverything` (system level only): every resource, live ones too.
 * A live resource's current version goes only with `expungeEverything`, which takes every resource of
 * the tenant, so that no remaining resource can refer to one expunged: a resource that others refer to
 * must be deleted first (then it already reads as missing, to `CINDER_REFERENTIAL_INTEGRITY` too).
 * AuditEvents are never expunged (append-only): `cinder audit prune` alone removes them.
 * The removal runs in batches of at most EXPUNGE_BATCH versions, each one transaction.
 */
import { FhirError } from '../errors.ts';
import type { ExpungeMode, Store } from '../store/types.ts';
import type { Access } from './access.ts';
import { checkTypeAndId } from './resource.ts';
import { REST_RESOURCE_TYPES, versionNumber } from './resource-types.ts';
import type { CapabilityContribution } from './capability.ts';

/** Versions removed per transaction: short locks whatever the total. */
export const EXPUNGE_BATCH = 500;

/**
 * One event-loop turn, taken between batches. On SQLite a batch's statements run synchronously and its promises
 * are settled when awaited, so without it a whole `$expunge` ran in one stretch of the thread: 3 s for 50,000
 * versions, every other request of the server waiting (docs/PERFORMANCE.md). With it, the longest wait is a batch.
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** The type `$expunge` never touches: AuditEvents go by `cinder audit prune` alone. */
export const AUDIT_TYPE = 'AuditEvent';

export interface ExpungeOptions {
  deletedResources: boolean;
  previousVersions: boolean;
  everything: boolean;
  /** Versions removed at most; absent: no limit. */
  limit?: number;
}

/** What to expunge: every type (none named), types, one resource (one type and `id`) or one of its versions. */
export interface ExpungeTarget {
  types?: string[];
  id?: string;
  versionId?: string;
}

export interface ExpungeProgress {
  /** Versions removed so far. */
  removed: number;
  /** The type being expunged. */
  type: string;
}

/**
 * Refuses access that may not expunge: only a token whose system/ or user/ scopes grant delete,
 * unfiltered, on every type it touches (`*` at the system level); patient-context scopes and SMART v2
 * scope filters never do, as an expunge is no search and takes whole types.
 */
export function requireExpungeAccess(access: Access, types: readonly string[] | undefined): void {
  for (const type of types ?? ['*']) {
    if (access.can(type, 'd') && access.patientLimit(type, 'd') === undefined && access.filters?.(type, 'd') === undefined) continue;
    const what = type === '*' ? 'every type (system/*.d or user/*.d)' : `${type} (system/${type}.d or user/${type}.d, without a filter)`;
    throw new FhirError('forbidden', `$expunge needs delete permission on ${what}; patient-context and filtered scopes never grant it`);
  }
}

/** Checks the combination of target and options; throws a 400 (or 405 for AuditEvent) naming what is wrong. */
export function checkExpunge(target: ExpungeTarget, o: ExpungeOptions): void {
  for (const type of target.types ?? []) {
    checkTypeAndId(type, target.id);
    if (type === AUDIT_TYPE) {
      throw new FhirError('method-not-allowed', 'AuditEvents cannot be expunged: the audit trail is append-only (`cinder audit prune` removes old ones)');
    }
  }
  if (o.everything && target.types !== undefined) {
    throw new FhirError('invalid', 'expungeEverything is taken at the system level only', { expression: ['expungeEverything'] });
  }
  if (!o.everything && !o.deletedResources && !o.previousVersions) {
    throw new FhirError('invalid', 'Nothing to expunge: set expungeDeletedResources, expungePreviousVersions or (system level) expungeEverything to true', {
      expression: ['expungeDeletedResources'],
    });
  }
  if (o.limit !== undefined && (!Number.isInteger(o.limit) || o.limit < 1)) {
    throw new FhirError('invalid', 'limit must be a positive integer', { expression: ['limit'] });
  }
}

/**
 * Expunges what `target` and `o` select in `tenant` and returns how many versions were removed (each
 * removed version counts one, a resource's current version included). Checks the target first: an
 * unknown resource or version is a 404, the current version named at the version level a 409.
 */
export async function expunge(
  store: Store, tenant: string, target: ExpungeTarget, o: ExpungeOptions, onProgress?: (p: ExpungeProgress) => void,
): Promise<number> {
  checkExpunge(target, o);
  const plan = await planOf(store, tenant, target, o);
  let removed = 0;
  const left = () => (o.limit === undefined ? EXPUNGE_BATCH : Math.min(EXPUNGE_BATCH, o.limit - removed));
  for (const type of plan.types) {
    for (const mode of plan.modes) {
      for (let after = 0, done = false; !done && left() > 0; ) {
        const r = await store.expunge.batch({ tenant, type, mode, after, limit: left(), ...plan.only });
        removed += r.removed;
        ({ after, done } = r);
        onProgress?.({ removed, type });
        await nextTurn();
      }
    }
  }
  return removed;
}

interface Plan {
  types: string[];
  modes: ExpungeMode[];
  only: { ids?: string[]; versionId?: number };
}

async function planOf(store: Store, tenant: string, target: ExpungeTarget, o: ExpungeOptions): Promise<Plan> {
  const types = target.types ?? (await store.resources.types(tenant)).filter((t) => t !== AUDIT_TYPE).sort();
  // Deleted resources first (whole), then the previous versions of those left.
  const modes: ExpungeMode[] = o.everything ? ['all'] : [...(o.deletedResources ? ['deleted' as const] : []), ...(o.previousVersions ? ['previous' as const] : [])];
  if (target.id === undefined) return { types, modes, only: {} };
  const type = types[0]!;
  const current = await store.resources.read(tenant, type, target.id);
  if (!current) throw new FhirError('not-found', `${type}/${target.id} is not known`);
  if (target.versionId === undefined) return { types, modes, only: { ids: [target.id] } };
  const n = versionNumber(target.versionId);
  if (n === undefined || n > current.versionId || (n < current.versionId && !(await store.resources.vread(tenant, type, target.id, n)))) {
    throw new FhirError('not-found', `${type}/${target.id} has no version ${target.versionId}`);
  }
  if (n === current.versionId) {
    throw new FhirError('conflict', `Version ${n} is the current version of ${type}/${target.id}: ${current.deleted
      ? 'a deleted resource goes whole, at the instance level with expungeDeletedResources'
      : 'the current version of a live resource is never expunged'}`);
  }
  // A previous version goes with expungePreviousVersions, or with expungeDeletedResources when its resource is deleted.
  const goes = o.previousVersions || (o.deletedResources && current.deleted);
  return { types, modes: goes ? ['previous'] : [], only: { ids: [target.id], versionId: n } };
}

const FLAGS = { expungeDeletedResources: 'deletedResources', expungePreviousVersions: 'previousVersions', expungeEverything: 'everything' } as const;

/**
 * The options of an `$expunge` request from its parameters (a Parameters body's, then the URL's):
 * `limit` (a positive integer) and HAPI's three booleans. Any other parameter, or one given twice, is a 400.
 */
export function expungeOptions(params: URLSearchParams): ExpungeOptions {
  const o: ExpungeOptions = { deletedResources: false, previousVersions: false, everything: false };
  const seen = new Set<string>();
  for (const [name, value] of params) {
    if (name === '_format' || name === '_pretty') continue;
    if (seen.has(name)) throw new FhirError('invalid', `${name} is given more than once`, { expression: [name] });
    seen.add(name);
    if (name === 'limit') {
      if (!/^[1-9][0-9]{0,9}$/.test(value)) throw new FhirError('invalid', `limit must be a positive integer, not '${value}'`, { expression: ['limit'] });
      o.limit = Number(value);
    } else if (name in FLAGS) {
      if (value !== 'true' && value !== 'false') throw new FhirError('invalid', `${name} must be true or false, not '${value}'`, { expression: [name] });
      o[FLAGS[name as keyof typeof FLAGS]] = value === 'true';
    } else {
      throw new FhirError('invalid', `'${name}' is not a parameter of $expunge (limit, expungeDeletedResources, expungePreviousVersions, expungeEverything)`, { expression: [name] });
    }
  }
  return o;
}

/** HAPI's default `limit` of a request (versions removed at most); the CLI has none. */
export const DEFAULT_HTTP_LIMIT = 1000;

/** The `$expunge` answer: a Parameters with `count`, the versions removed (HAPI's shape). */
export function expungeParameters(count: number): { resourceType: 'Parameters'; parameter: { name: string; valueInteger: number }[] } {
  return { resourceType: 'Parameters', parameter: [{ name: 'count', valueInteger: count }] };
}

/**
 * The CapabilityStatement's `$expunge` (listed only with CINDER_EXPUNGE=on): at the system level and on
 * every type but AuditEvent. R4 defines no such operation; the definition names Cinder's (HAPI FHIR's
 * parameters, documented in the README).
 */
export const EXPUNGE_DEFINITION = 'urn:cinder:OperationDefinition:expunge';

export const expungeCapability: CapabilityContribution = {
  operations: [
    { name: 'expunge', definition: EXPUNGE_DEFINITION },
    { name: 'expunge', definition: EXPUNGE_DEFINITION, types: REST_RESOURCE_TYPES.filter((t) => t !== AUDIT_TYPE) },
  ],
};
