/**
 * `$meta`, `$meta-add` and `$meta-delete` (R4 OperationDefinitions Resource-meta, Resource-meta-add,
 * Resource-meta-delete). Each answers a Parameters whose `return` is a Meta.
 *
 * - `$meta` on an instance (or a version, `_history/{vid}/$meta`) is that version's meta, read as a read
 *   (or vread) is; on a type or the system it is the union of the tags, security labels and profiles the
 *   current resources carry, read from the search index (src/store: `metaInUse`), not from the resources.
 * - `$meta-add` / `$meta-delete` change the current version's meta through the write path of a patch
 *   (src/fhir/patch.ts): update permission, scope filters and patient context as for a PATCH, validation
 *   (a profile added is checked), index rows (`_tag`, `_security`, `_profile`), history, and a write
 *   against the version read, retried when another write came in between. They make a new version:
 *   R4 (4.0.1) dropped the earlier drafts' note that these operations change meta in place without one,
 *   and a version that changed under its ETag would break `If-Match`, `If-None-Match` and exports. A
 *   change that adds or removes nothing writes nothing. On `_history/{vid}` they need `vid` to be the
 *   current version (409 otherwise): stored versions are never rewritten.
 */
import { FhirError } from '../errors.ts';
import { carryLiterals } from './exact-json.ts';
import type { ResourceVersion } from '../store/types.ts';
import { enumerationAccess, requireAccess } from './access.ts';
import type { CapabilityContribution } from './capability.ts';
import { binaryReachLimited, readResource, vreadResource, type FhirDeps, type FhirRequest, type WriteResult } from './crud.ts';
import { storedMeta } from './meta-head.ts';
import { patchResource } from './patch.ts';
import { ifMatchFailed, type IfMatch } from './if-match.ts';
import { isResourceType, REST_RESOURCE_TYPES } from './resource-types.ts';
import { checkTypeAndId, type Resource } from './resource.ts';

const OD = 'http://hl7.org/fhir/OperationDefinition/';

/** The three operations in the CapabilityStatement: `$meta` at the system level and on every type, the others on every type (instance level). */
export const metaCapability: CapabilityContribution = {
  operations: [
    { name: 'meta', definition: `${OD}Resource-meta` },
    { name: 'meta', definition: `${OD}Resource-meta`, types: [...REST_RESOURCE_TYPES] },
    { name: 'meta-add', definition: `${OD}Resource-meta-add`, types: [...REST_RESOURCE_TYPES] },
    { name: 'meta-delete', definition: `${OD}Resource-meta-delete`, types: [...REST_RESOURCE_TYPES] },
  ],
};

interface Coding {
  system?: string;
  version?: string;
  code?: string;
  display?: string;
  userSelected?: boolean;
}

/** The parts of Meta these operations read and write. */
export interface MetaSets {
  profile?: string[];
  security?: Coding[];
  tag?: Coding[];
}

/** Most distinct values of each of tag, security and profile that a type- or system-level `$meta` lists. */
export const META_IN_USE_CAP = 1000;

/** A Parameters holding `meta` as its `return`. */
export function metaParameters(meta: Record<string, unknown>): Record<string, unknown> {
  return { resourceType: 'Parameters', parameter: [{ name: 'return', valueMeta: meta }] };
}

/** The meta of a stored version (its content's, with versionId and lastUpdated as stored). */
function metaOfVersion(v: ResourceVersion): Record<string, unknown> {
  const content = JSON.parse(v.content) as { meta?: Record<string, unknown> };
  return content.meta ?? {};
}

/** `[type]/[id]/$meta` and `[type]/[id]/_history/[vid]/$meta`: the meta of the version a read (vread) gives. */
export async function instanceMeta(deps: FhirDeps, req: FhirRequest, type: string, id: string, vid?: string): Promise<Record<string, unknown>> {
  // The start of the stored text where it holds the meta and the read's reach needs no more (meta-head.ts).
  const meta = await storedMeta(deps, req, type, id, vid);
  if (meta !== undefined) return meta;
  const v = vid === undefined ? await readResource(deps, req, type, id) : await vreadResource(deps, req, type, id, vid);
  return metaOfVersion(v);
}

/**
 * `[base]/$meta` and `[type]/$meta`: the tags, security labels and profiles in use on current resources
 * of `type` (every type the token reads and searches without limit, at the system level). A type-level call
 * needs read and search of every resource of the type (a token that reads by id alone is refused): a patient-context or filtered token is refused (403), as the
 * index holds no owner of a value and the union would tell what other patients' records carry; at the
 * system level such types are left out. Binary is read in part by a token that may not read every
 * resource a securityContext can name (binaryReachLimited): the same. At most META_IN_USE_CAP of each (then 422: too costly to list).
 */
export async function metaInUse(deps: FhirDeps, req: FhirRequest, type?: string): Promise<Record<string, unknown>> {
  // What every resource of a type carries is told of the type whole, as a search of it lists it: read and search (enumerationAccess).
  const listed = enumerationAccess(req.access);
  const unlimited = (t: string) => listed.can(t, 'r') && listed.patientLimit(t, 'r') === undefined && listed.filters?.(t, 'r') === undefined &&
    (t !== 'Binary' || !binaryReachLimited(req.access));
  let types: string[];
  if (type !== undefined) {
    checkTypeAndId(type);
    requireAccess(req.access, type, 'r');
    requireAccess(req.access, type, 's');
    if (!unlimited(type)) throw new FhirError('forbidden', `$meta on ${type} lists what every ${type} carries: the access token's scopes limit the ${type} resources it reads`);
    types = [type];
  } else {
    types = (await deps.store.resources.types(req.tenant)).filter((t) => isResourceType(t) && unlimited(t));
  }
  const rows = types.length ? await deps.store.resources.metaInUse(req.tenant, types, META_IN_USE_CAP + 1) : [];
  const meta: MetaSets = {};
  const tags = new Map<string, Coding>();
  const security = new Map<string, Coding>();
  const profiles = new Set<string>();
  for (const r of rows) {
    // A tag of a system alone (index model 19: a row of its system with an empty value) is listed as its system.
    const coding: Coding = { ...(r.system ? { system: r.system } : {}), ...(r.value !== '' && { code: r.value }) };
    if (r.param === '_profile') profiles.add(r.value);
    else (r.param === '_tag' ? tags : security).set(`${r.system}|${r.value}`, coding);
  }
  for (const [name, size] of [['tag', tags.size], ['security', security.size], ['profile', profiles.size]] as const) {
    if (size > META_IN_USE_CAP) throw new FhirError('unprocessable', `More than ${META_IN_USE_CAP} distinct values of meta.${name} are in use: too many to list`, { issueCode: 'too-costly', expression: [`Meta.${name}`] });
  }
  const key = (c: Coding) => [c.system ?? '', c.code ?? ''];
  const bySystemCode = (a: Coding, b: Coding) => {
    const [x, y] = [key(a), key(b)];
    return x[0]! < y[0]! ? -1 : x[0]! > y[0]! ? 1 : x[1]! < y[1]! ? -1 : 1;
  };
  if (profiles.size) meta.profile = [...profiles].sort();
  if (security.size) meta.security = [...security.values()].sort(bySystemCode);
  if (tags.size) meta.tag = [...tags.values()].sort(bySystemCode);
  return meta as Record<string, unknown>;
}

const same = (a: Coding, b: Coding) => (a.system ?? '') === (b.system ?? '') && (a.code ?? '') === (b.code ?? '');

/**
 * The `meta` input of `$meta-add` / `$meta-delete` (a Parameters with one `meta` parameter holding a
 * valueMeta): its profiles, security labels and tags; 400 naming the element otherwise.
 */
export function metaInput(body: unknown, op: string): MetaSets {
  const p = body as { resourceType?: unknown; parameter?: unknown };
  if (p === null || typeof p !== 'object' || p.resourceType !== 'Parameters') {
    throw new FhirError('invalid', `The body of $${op} is a Parameters resource`, { expression: ['resourceType'] });
  }
  const params = Array.isArray(p.parameter) ? (p.parameter as Record<string, unknown>[]) : [];
  params.forEach((x, i) => {
    if (x?.name !== 'meta') throw new FhirError('invalid', `$${op} takes one parameter, 'meta', not ${JSON.stringify(x?.name)}`, { expression: [`Parameters.parameter[${i}].name`] });
  });
  if (params.length !== 1) throw new FhirError('required', `$${op} takes exactly one 'meta' parameter (a valueMeta)`, { expression: ['Parameters.parameter'] });
  const at = 'Parameters.parameter[0].valueMeta';
  const meta = params[0]!.valueMeta as Record<string, unknown> | undefined;
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta)) throw new FhirError('required', `$${op}: 'meta' must hold a valueMeta`, { expression: [at] });
  const out: MetaSets = {};
  if (meta.profile !== undefined) {
    if (!Array.isArray(meta.profile) || meta.profile.some((x) => typeof x !== 'string' || x === '')) throw new FhirError('invalid', 'meta.profile must be an array of canonical URLs', { expression: [`${at}.profile`] });
    out.profile = meta.profile as string[];
  }
  for (const name of ['security', 'tag'] as const) {
    const list = meta[name];
    if (list === undefined) continue;
    if (!Array.isArray(list)) throw new FhirError('invalid', `meta.${name} must be an array of Codings`, { expression: [`${at}.${name}`] });
    list.forEach((c, j) => {
      const ok = c !== null && typeof c === 'object' && !Array.isArray(c) && ['system', 'code'].every((k) => c[k] === undefined || (typeof c[k] === 'string' && c[k] !== '')) && (c.code !== undefined || c.system !== undefined);
      if (!ok) throw new FhirError('invalid', `meta.${name}[${j}] must be a Coding with a system and/or code`, { expression: [`${at}.${name}[${j}]`] });
    });
    out[name] = list as Coding[];
  }
  return out;
}

/** `current` with `input`'s profiles, security labels and tags added (those it lacks) or removed. */
export function changedMeta(current: Resource, input: MetaSets, mode: 'add' | 'delete'): Resource {
  const meta = { ...((current.meta as Record<string, unknown> | undefined) ?? {}) };
  const profiles = (meta.profile as string[] | undefined) ?? [];
  const wanted = input.profile ?? [];
  meta.profile = mode === 'add' ? [...profiles, ...wanted.filter((u, i) => !profiles.includes(u) && wanted.indexOf(u) === i)] : profiles.filter((u) => !wanted.includes(u));
  for (const name of ['security', 'tag'] as const) {
    const have = (meta[name] as Coding[] | undefined) ?? [];
    const given = input[name] ?? [];
    if (mode === 'add') {
      const added: Coding[] = [];
      for (const c of given) if (!have.some((h) => same(h, c)) && !added.some((h) => same(h, c))) added.push(c);
      meta[name] = [...have, ...added];
    } else {
      meta[name] = have.filter((h) => !given.some((c) => same(h, c)));
    }
  }
  // R4 JSON has no empty arrays (json.html); a meta left with nothing goes (the write sets versionId and lastUpdated).
  for (const name of ['profile', 'security', 'tag']) if ((meta[name] as unknown[]).length === 0) delete meta[name];
  // The copy keeps the literals of the resource's own numbers (a decimal's `1.50`: exact-json.ts).
  return carryLiterals(current, { ...current, meta } as Resource);
}

/**
 * `$meta-add` / `$meta-delete` on `type/id` (with `vid`: on that version, which must be the current one),
 * under the client's `If-Match` if any (412 when it does not hold, as for a PATCH). Returns the write
 * (its version's meta is the operation's `return`).
 */
export async function changeMeta(
  deps: FhirDeps, req: FhirRequest, type: string, id: string, body: unknown, mode: 'add' | 'delete', vid?: string, clientIfMatch?: IfMatch,
): Promise<WriteResult> {
  checkTypeAndId(type, id);
  const input = metaInput(body, mode === 'add' ? 'meta-add' : 'meta-delete');
  let ifMatch = clientIfMatch;
  if (vid !== undefined) {
    const v = await vreadResource(deps, req, type, id, vid);
    const current = await readResource(deps, req, type, id);
    if (current.versionId !== v.versionId) {
      throw new FhirError('conflict', `Version ${v.versionId} of ${type}/${id} is not its current version (${current.versionId}): stored versions are not changed`, { expression: ['meta.versionId'] });
    }
    if (ifMatch !== undefined && ifMatch !== '*' && !ifMatch.includes(v.versionId)) throw ifMatchFailed(ifMatch, `${type}/${id}`, current);
    ifMatch = [v.versionId];
  }
  return patchResource(deps, req, type, id, (current) => changedMeta(current, input, mode), ifMatch);
}
