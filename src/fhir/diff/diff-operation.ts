/**
 * `$diff` (HAPI FHIR's operation, server_jpa/diff.html): the differences between two versions of a
 * resource, or between two resources of one type, as a FHIRPath Patch Parameters (diff.ts).
 *
 * - Instance level, `[type]/[id]/$diff`: the current version against the one before it, or against
 *   `fromVersion`; a resource of one version (or whose previous version is a deletion) is compared
 *   with an empty resource of its type and id, so the diff adds all it holds.
 * - Server level, `$diff?from=Patient/1&to=Patient/2` (each may name a version,
 *   `Patient/1/_history/2`): `to` against `from`, two resources of one type.
 *
 * Each version is read as a read or vread reads it (scopes, patient compartment, scope filters; 404
 * unknown, 410 deleted). `includeMeta=true` compares `meta` too.
 */
import { FhirError } from '../../errors.ts';
import type { ResourceVersion } from '../../store/types.ts';
import type { CapabilityContribution } from '../capability.ts';
import { readResource, vreadResource, type FhirDeps, type FhirRequest } from '../crud.ts';
import { parseExact } from '../exact-json.ts';
import { REST_RESOURCE_TYPES } from '../resource-types.ts';
import { diffResources } from './diff.ts';

type Json = Record<string, unknown>;

/**
 * `$diff` at the system level and on every type's instances, in the CapabilityStatement. R4 defines no
 * such operation; the definition names Cinder's (HAPI FHIR's parameters, documented in the README), as
 * `$expunge`'s does.
 */
export const DIFF_DEFINITION = 'urn:cinder:OperationDefinition:diff';
const DEFINITION = DIFF_DEFINITION;

/** The operation's CapabilityStatement entries. */
export const diffCapability: CapabilityContribution = {
  operations: [
    { name: 'diff', definition: DEFINITION },
    { name: 'diff', definition: DEFINITION, types: [...REST_RESOURCE_TYPES] },
  ],
};

const INSTANCE_PARAMS = new Set(['fromVersion', 'includeMeta', '_format', '_pretty']);
const SERVER_PARAMS = new Set(['from', 'to', 'includeMeta', '_format', '_pretty']);

function content(v: ResourceVersion): Json {
  return parseExact(v.content) as Json;
}

function includeMeta(params: URLSearchParams): boolean {
  const v = params.get('includeMeta');
  if (v === null) return false;
  if (v !== 'true' && v !== 'false') throw new FhirError('invalid', `includeMeta must be true or false, not '${v}'`, { expression: ['includeMeta'] });
  return v === 'true';
}

function checkParams(params: URLSearchParams, known: ReadonlySet<string>, strict: boolean): void {
  const extra = [...params.keys()].find((k) => !known.has(k));
  if (extra !== undefined && strict) throw new FhirError('not-supported', `'${extra}' is not a parameter of $diff here (it takes ${[...known].filter((k) => !k.startsWith('_')).join(', ')})`, { expression: [extra] });
  for (const name of known) {
    if (params.getAll(name).length > 1) throw new FhirError('invalid', `$diff takes one '${name}'`, { expression: [name] });
  }
}

/** `[type]/[id]/$diff`: the current version against `fromVersion` or the version before it. */
export async function instanceDiff(deps: FhirDeps, req: FhirRequest, type: string, id: string, params: URLSearchParams, strict: boolean): Promise<Json> {
  checkParams(params, INSTANCE_PARAMS, strict);
  const meta = includeMeta(params);
  const current = await readResource(deps, req, type, id);
  const fromVersion = params.get('fromVersion');
  let from: Json;
  if (fromVersion !== null) {
    if (!/^[1-9][0-9]{0,15}$/.test(fromVersion)) throw new FhirError('invalid', `fromVersion must be a version number, not '${fromVersion}'`, { expression: ['fromVersion'] });
    from = content(await vreadResource(deps, req, type, id, fromVersion));
  } else from = await previous(deps, req, current);
  return diffResources(from, content(current), { includeMeta: meta });
}

/** The version before `current`; an empty resource of its type and id when there is none or it is a deletion. */
async function previous(deps: FhirDeps, req: FhirRequest, current: ResourceVersion): Promise<Json> {
  const empty = { resourceType: current.type, id: current.id };
  if (current.versionId <= 1) return empty;
  try {
    return content(await vreadResource(deps, req, current.type, current.id, String(current.versionId - 1)));
  } catch (err) {
    if (err instanceof FhirError && (err.category === 'gone' || err.category === 'not-found')) return empty;
    throw err;
  }
}

/** A `from` or `to` reference: `Type/id` or `Type/id/_history/vid`. */
function reference(params: URLSearchParams, name: 'from' | 'to'): { type: string; id: string; vid?: string } {
  const v = params.get(name);
  if (v === null || v === '') throw new FhirError('required', `$diff needs '${name}', a reference such as Patient/123 or Patient/123/_history/2`, { expression: [name] });
  const m = /^([A-Z][A-Za-z]*)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/([^/]+))?$/.exec(v);
  if (!m) throw new FhirError('invalid', `'${name}' must be a reference Type/id or Type/id/_history/version, not '${v}'`, { expression: [name] });
  return { type: m[1]!, id: m[2]!, ...(m[3] !== undefined && { vid: m[3] }) };
}

/** `$diff?from=...&to=...`: `to` against `from`, two resources of one type. */
export async function serverDiff(deps: FhirDeps, req: FhirRequest, params: URLSearchParams, strict: boolean): Promise<Json> {
  checkParams(params, SERVER_PARAMS, strict);
  const meta = includeMeta(params);
  const from = reference(params, 'from');
  const to = reference(params, 'to');
  if (from.type !== to.type) throw new FhirError('invalid', `$diff compares two resources of one type, not a ${from.type} with a ${to.type}`, { expression: ['to'] });
  const read = (r: { type: string; id: string; vid?: string }) => (r.vid === undefined ? readResource(deps, req, r.type, r.id) : vreadResource(deps, req, r.type, r.id, r.vid));
  const [a, b] = [await read(from), await read(to)];
  return diffResources(content(a), content(b), { includeMeta: meta });
}
