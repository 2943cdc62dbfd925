/**
 * What a Reference points at (R4 references.html, Reference): its target type must be one the element
 * allows, whether given by `reference` (`Type/id`, an absolute URL ending so, `Type?query`, or `#id`
 * of a contained resource) or by `type`; and when both are given they agree. Contained resources have
 * distinct ids, so that `#id` names one.
 */
import { R4_RESOURCE_TYPES } from '../resource-types.ts';
import type { ElementModel } from './model.ts';

type Json = Record<string, unknown>;

/** The walk's state these checks need. */
export interface ReferenceScope {
  add(code: 'structure' | 'value', expression: string, text: string): void;
  /** The resource being walked, and the one that contains it (itself unless it is contained). */
  readonly resource: Json;
  readonly rootResource: Json;
  /** A cache of the walk's: each `contained` array by id, made when a `#id` reference first needs it. */
  readonly containedById: Map<unknown[], Map<string, Json>>;
}

const RESOURCE_TYPES: ReadonlySet<string> = new Set(R4_RESOURCE_TYPES);
/** `Type/id`, `Type/id/_history/n`, an absolute URL ending so: the type. */
const REFERENCE_TYPE = /(?:^|\/)([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;
const CONDITIONAL_TYPE = /^([A-Z][A-Za-z]+)\?/;
/** Reference.type is a type name, "relative to" this base (an absolute URL for a core type says the same). */
const TYPE_BASE = 'http://hl7.org/fhir/StructureDefinition/';

/** The resource type a reference's text names (with the contained resource it names, for messages), or undefined. */
function referencedType(scope: ReferenceScope, reference: string): { type: string; contained?: string } | undefined {
  if (reference.charCodeAt(0) === 35) {
    if (reference === '#') {
      // A contained resource referring to the resource that contains it.
      return scope.resource === scope.rootResource ? undefined : known(scope.rootResource.resourceType, 'the containing resource');
    }
    const contained = scope.rootResource.contained;
    if (!Array.isArray(contained)) return undefined;
    const c = containedById(scope, contained).get(reference.slice(1));
    return c === undefined ? undefined : known(c.resourceType, `the contained resource ${reference}`);
  }
  const m = CONDITIONAL_TYPE.exec(reference) ?? REFERENCE_TYPE.exec(reference);
  return m ? known(m[1]) : undefined;
}

/** The contained resources by id (the first of an id used twice), once per walk: a resource may hold thousands, each referred to. */
function containedById(scope: ReferenceScope, contained: unknown[]): Map<string, Json> {
  let byId = scope.containedById.get(contained);
  if (byId === undefined) {
    byId = new Map();
    for (const c of contained) {
      if (c !== null && typeof c === 'object' && typeof (c as Json).id === 'string' && !byId.has((c as Json).id as string)) byId.set((c as Json).id as string, c as Json);
    }
    scope.containedById.set(contained, byId);
  }
  return byId;
}

function known(type: unknown, contained?: string): { type: string; contained?: string } | undefined {
  return typeof type === 'string' && RESOURCE_TYPES.has(type) ? { type, contained } : undefined;
}

/** A Reference's target types: allowed by the element, and `type` consistent with `reference`. */
export function checkReference(scope: ReferenceScope, ref: Json, element: ElementModel, path: string): void {
  const targets = element.targets;
  const named = typeof ref.reference === 'string' ? referencedType(scope, ref.reference) : undefined;
  if (named !== undefined && targets !== undefined && !targets.has(named.type)) {
    const what = named.contained === undefined ? named.type : `${named.type} (${named.contained})`;
    scope.add('structure', `${path}.reference`, `${what} is not a valid target of this reference (expected ${[...targets].join(', ')})`);
  }
  if (typeof ref.type !== 'string') return;
  if (targets !== undefined && RESOURCE_TYPES.has(ref.type) && !targets.has(ref.type)) {
    scope.add('structure', `${path}.type`, `${ref.type} is not a valid target of this reference (expected ${[...targets].join(', ')})`);
  }
  const type = ref.type.startsWith(TYPE_BASE) ? ref.type.slice(TYPE_BASE.length) : ref.type;
  if (named !== undefined && type !== named.type) {
    scope.add('value', path, `Reference.type ${ref.type} does not agree with the reference ${JSON.stringify(ref.reference)}, which is to ${named.contained ?? 'a ' + named.type}${named.contained ? ` (a ${named.type})` : ''}`);
  }
}

/** Contained resources have distinct ids: a `#id` reference names one resource. */
export function checkContainedIds(scope: ReferenceScope, contained: unknown[], path: string): void {
  if (contained.length < 2) return;
  const first = new Map<string, number>();
  contained.forEach((c, i) => {
    if (c === null || typeof c !== 'object' || typeof (c as Json).id !== 'string') return;
    const id = (c as Json).id as string;
    const earlier = first.get(id);
    if (earlier === undefined) first.set(id, i);
    else scope.add('value', `${path}.contained[${i}].id`, `Contained resources must have distinct ids: '${id}' is also the id of contained[${earlier}], so #${id} would be ambiguous`);
  });
}
