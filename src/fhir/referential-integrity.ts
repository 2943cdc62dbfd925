/**
 * Referential integrity of REST writes (`CINDER_REFERENTIAL_INTEGRITY=on`): a create, update or
 * transaction/batch entry whose literal local references point at no resource of the tenant is
 * refused with 422, as HAPI FHIR does. Off by default, as in Medplum: data arrives out of order
 * from apps and partial loads, and a reference to a resource that comes later is not an error there.
 * Deletes are never checked, in either mode: deleting a resource that others refer to is allowed.
 */
import { FhirError, type FhirIssue } from '../errors.ts';
import type { CurrentVersion, ResourceWriter } from '../store/types.ts';
import { hasCoreResources } from './core-layer.ts';
import type { FhirDeps } from './crud.ts';
import { issue } from './outcome.ts';
import { ID_PATTERN, isResourceType } from './resource-types.ts';
import type { Resource } from './resource.ts';

/** What the check needs to know of the server: its FHIR base per tenant (absolute references under it are local). */
export interface ReferentialIntegrity {
  fhirBase(tenant: string): string;
}

/**
 * Which reference targets the writing token may read, where it reads their type only in part (a
 * patient's compartment, a SMART v2 scope filter): for such a type a target out of its reach is
 * reported as one that does not exist, with the same words, so that a write cannot tell a token which
 * of another patient's resources exist (Medplum refuses references its user cannot read too).
 */
export interface ReferenceReach {
  /** Whether the token reads `type` only in part (its targets are judged by `holds`). */
  limited(type: string): boolean;
  /**
   * Whether the token may read this current version, as its read judges it, every read of that judgement made
   * through the write's transaction `w` (a Binary's securityContext, the records and versions a Provenance
   * targets, the chains of scope filters).
   */
  holds(type: string, v: CurrentVersion, w: Pick<ResourceWriter, 'current' | 'search' | 'vread' | 'present'>): Promise<boolean>;
  /**
   * Of a type `limited` reports, the patient whose compartment alone decides the token's reach (a patient-context
   * token without a scope filter of the type, not a Binary): a target in it is held, told by the compartment index
   * without reading its text; undefined when the judgement needs the target's content (`holds`).
   */
  compartmentOf?(type: string): string | undefined;
}

/** A resource about to be written, with the FHIRPath of where it sits (`Observation`, `Bundle.entry[2].resource`). */
export interface WrittenResource {
  resource: Resource;
  path: string;
}

/** A literal local reference of a resource: its target and the element that holds it. */
export interface LocalReference {
  type: string;
  id: string;
  reference: string;
  expression: string;
}

const RELATIVE = /^([A-Z][A-Za-z]+)\/([^/]+)(?:\/_history\/[^/]+)?$/;

/**
 * The target of a literal local reference: `Type/id`, `Type/id/_history/n`, or either under this
 * server's FHIR base. Contained (`#id`), `urn:`, conditional and other servers' references give null,
 * as do strings that are not references at all (the structural validator's business).
 */
export function localTarget(reference: string, fhirBase: string): { type: string; id: string } | null {
  const rel = reference.startsWith(fhirBase + '/') ? reference.slice(fhirBase.length + 1) : reference;
  const m = RELATIVE.exec(rel);
  if (!m || !isResourceType(m[1]!) || !ID_PATTERN.test(m[2]!)) return null;
  return { type: m[1]!, id: m[2]! };
}

/**
 * Every literal local reference in `node` with its FHIRPath (`Observation.performer[0].reference`).
 * A Bundle (stored as a resource, or nested in one) is not followed: its entries refer to each other
 * by fullUrl, not to this server.
 */
export function localReferences(node: unknown, path: string, fhirBase: string, out: LocalReference[] = []): LocalReference[] {
  if (Array.isArray(node)) {
    node.forEach((item, i) => localReferences(item, `${path}[${i}]`, fhirBase, out));
    return out;
  }
  if (node === null || typeof node !== 'object') return out;
  const obj = node as Record<string, unknown>;
  if (obj.resourceType === 'Bundle') return out;
  if (typeof obj.reference === 'string') {
    const target = localTarget(obj.reference, fhirBase);
    if (target) out.push({ ...target, reference: obj.reference, expression: `${path}.reference` });
  }
  for (const key in obj) {
    const value = obj[key];
    if (value !== null && typeof value === 'object') localReferences(value, `${path}.${key}`, fhirBase, out);
  }
  return out;
}

/** A core CodeSystem or ValueSet the tenant has no resource of that id for (a deleted one hides it). */
async function isCoreTarget(deps: FhirDeps, w: ResourceWriter, type: string, id: string): Promise<boolean> {
  if (deps.core === undefined || !hasCoreResources(type) || (await deps.core.read(type, id)) === null) return false;
  return (await w.measured(type, id)) === null;
}

/**
 * Of live targets of types the token reads in part, those out of its reach (`Type/id`). Where its patient's compartment
 * alone decides (ReferenceReach.compartmentOf), the compartment index answers for each type at once, and only a
 * Provenance outside the compartment is read (it may name a record of the patient's); the others are read and judged
 * as the token's read would judge them.
 */
async function outOfReach(w: ResourceWriter, reach: ReferenceReach, targets: { type: string; id: string }[]): Promise<string[]> {
  const out: string[] = [];
  const judged = async (type: string, id: string) => {
    const v = await w.current(type, id);
    return !!v && !v.deleted && (await reach.holds(type, v, w));
  };
  const indexed = new Map<string, string[]>();
  for (const { type, id } of targets) {
    if (reach.compartmentOf?.(type) !== undefined) (indexed.get(type) ?? indexed.set(type, []).get(type)!).push(id);
    else if (!(await judged(type, id))) out.push(`${type}/${id}`);
  }
  for (const [type, ids] of indexed) {
    const patient = reach.compartmentOf!(type);
    const held = new Set((await w.compartmentPatients(type, ids)).filter((r) => r.patient === patient).map((r) => r.id));
    for (const id of ids) if (!held.has(id) && !(type === 'Provenance' && (await judged(type, id)))) out.push(`${type}/${id}`);
  }
  return out;
}

/**
 * With referential integrity on, throws 422 (issue code `not-found`, one issue per dangling reference,
 * each with its `expression`) unless every literal local reference of `written` names a current
 * resource of the tenant. Called inside the write transaction `w` after the request's writes (and
 * after their access checks, so a client that may not write learns nothing of what exists): what the
 * request itself wrote counts, a resource may refer to itself, and a target the same transaction
 * deleted does not; a core CodeSystem or ValueSet counts as the tenant's. Every target is looked up at
 * once; with `reach`, a target of a type the token reads in part counts only when it may read it.
 * Does nothing when the setting is off.
 */
export async function requireReferences(deps: FhirDeps, w: ResourceWriter, tenant: string, written: WrittenResource[], reach?: ReferenceReach): Promise<void> {
  const integrity = deps.referentialIntegrity;
  if (!integrity) return;
  const base = integrity.fhirBase(tenant);
  const refs = written.flatMap((r) => localReferences(r.resource, r.path, base));
  if (!refs.length) return;
  const keys = [...new Map(refs.map((r) => [`${r.type}/${r.id}`, { type: r.type, id: r.id }])).values()];
  const found = await w.existing(keys);
  const missing = new Set<string>();
  const limited: { type: string; id: string }[] = [];
  for (const [i, k] of keys.entries()) {
    if (!found[i]) {
      if (!(await isCoreTarget(deps, w, k.type, k.id))) missing.add(`${k.type}/${k.id}`);
    } else if (reach?.limited(k.type)) limited.push(k);
  }
  if (reach) for (const key of await outOfReach(w, reach, limited)) missing.add(key);
  const what = (type: string) => (reach?.limited(type) ? 'which does not exist or is outside what the access token may read' : 'which does not exist');
  const issues: FhirIssue[] = refs
    .filter((r) => missing.has(`${r.type}/${r.id}`))
    .map((r) => issue('error', 'not-found', `${r.expression}: '${r.reference}' refers to ${r.type}/${r.id}, ${what(r.type)}`, [r.expression]));
  if (!issues.length) return;
  const [first, ...rest] = issues;
  throw new FhirError('unprocessable', first!.diagnostics!, { issueCode: 'not-found', expression: first!.expression!, issues: rest });
}
