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
  add(code: 'structure' | 'value', expression: string, text: string, severity?: 'error' | 'warning'): void;
  /** The resource being walked, and the one that contains it (itself unless it is contained). */
  readonly resource: Json;
  readonly rootResource: Json;
  /** A cache of the walk's: each `contained` array by id, made when a `#id` reference first needs it. */
  readonly containedById: Map<unknown[], Map<string, Json>>;
  /**
   * Whether the walk is in a Bundle entry that has a fullUrl (the nearest entry, for a Bundle inside an
   * entry's resource), against which relative references are resolved.
   */
  readonly inEntryWithFullUrl: boolean;
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

/** Whitespace as Java's `\S` (HL7's validator's test of a reference): space, tab, LF, VT, FF, CR. */
const WHITESPACE = /[ \t\n\x0B\f\r]/;
/** A URI with a scheme (`http:`, `urn:`, `https:`...): no relative reference. */
const ABSOLUTE = /^[A-Za-z][A-Za-z0-9+.-]*:/;
/** R4's id (datatypes.html#id). */
const ID = /^[A-Za-z0-9\-.]{1,64}$/;

/**
 * The reference's text as references.html writes a literal reference. HL7's validator refuses one with
 * whitespace (REFERENCE_REF_INVALID_REF, an error wherever it is), and warns about a relative reference
 * that is not `Type/id` or `Type/id/_history/vid` of a known type with valid ids (REFERENCE_REF_SUSPICIOUS,
 * the warning it gives when REST references are taken as they read, as a server does): `Patient/`,
 * `/Patient/1`, `Patient/1/_history`, `Foo/1`. In a Bundle entry with a fullUrl, where a relative
 * reference is resolved against it, one of other than 1 or 3 slashes is an error (REFERENCE_REF_FORMAT2).
 * A `#id`, an absolute URI (`urn:uuid:`, `http:`...) and a conditional reference `Type?query` to a known
 * type (transactions resolve them; HL7's validator allows them there, REFERENCE_REF_FORMAT1) are left alone.
 */
function checkReferenceText(scope: ReferenceScope, reference: string, path: string): void {
  const at = `${path}.reference`;
  // A conditional reference is a search, resolved before it is stored: its values may hold spaces, as a query's may.
  const conditional = CONDITIONAL_TYPE.exec(reference);
  if (conditional !== null && RESOURCE_TYPES.has(conditional[1]!)) return;
  if (WHITESPACE.test(reference)) {
    scope.add('value', at, `The reference ${JSON.stringify(reference)} is not a valid reference: a reference holds no whitespace`);
    return;
  }
  if (reference.charCodeAt(0) === 35 || ABSOLUTE.test(reference)) return;
  const parts = reference.split('/');
  const restful = RESOURCE_TYPES.has(parts[0]!) && ID.test(parts[1] ?? '') && (parts.length === 2 || (parts.length === 4 && parts[2] === '_history' && ID.test(parts[3]!)));
  if (restful) return;
  if (scope.inEntryWithFullUrl && parts.length !== 2 && parts.length !== 4) {
    scope.add('value', at, `The reference ${JSON.stringify(reference)} is not a valid relative reference: relative references must be of the form [ResourceType]/[id] (or [ResourceType]/[id]/_history/[vid])`);
    return;
  }
  const why = !RESOURCE_TYPES.has(parts[0]!) && parts.length >= 2 && parts[0] !== '' ? `${JSON.stringify(parts[0])} is no R4 resource type` : 'a relative reference is [ResourceType]/[id] or [ResourceType]/[id]/_history/[vid]';
  scope.add('structure', at, `The syntax of the reference ${JSON.stringify(reference)} looks incorrect, and it should be checked: ${why}`, 'warning');
}

/** A Reference's text, its target types: allowed by the element, and `type` consistent with `reference`. */
export function checkReference(scope: ReferenceScope, ref: Json, element: ElementModel, path: string): void {
  if (typeof ref.reference === 'string' && ref.reference.length > 0) checkReferenceText(scope, ref.reference, path);
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
