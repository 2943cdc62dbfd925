/**
 * Validation of a resource against the R4 base StructureDefinitions (compiled into r4-table.json):
 * JSON shape, unknown elements, cardinality, choice elements, primitive formats, primitive
 * extensions, element ids unique within a resource, the inherited invariants checked natively (ele-1, ext-1, dom-2..dom-5; the narrative's
 * XML and txt-1/txt-2 in xhtml.ts; Reference targets and contained ids in references.ts; a Bundle
 * entry's fullUrl against its resource in full-url.ts), required
 * bindings, the codes of R4's own code systems, SNOMED CT's concept ids and Attachment sizes (codings.ts), the rules of
 * single types that R4 states outside its invariants (conformance.ts), and the types' own invariants through the compiled FHIRPath engine. One walk collects
 * every problem found.
 */
import { literalOf } from '../exact-json.ts';
import { R4_RESOURCE_TYPES } from '../resource-types.ts';
import { typeModel, type BindingModel, type ElementModel, type Slot, type TypeModel } from './model.ts';
import { checkPrimitive, describe } from './primitives.ts';
import { checkNarrative } from './xhtml.ts';
import { checkInvariants, type IssueSink } from './invariants.ts';
import { checkContainedIds, checkReference } from './references.ts';
import { checkFullUrl } from './full-url.ts';
import { checkConformance } from './conformance.ts';
import { checkAbsolute, checkAttachment, checkCoding, checkIdentifier, checkQuantity, unitProblem } from './codings.ts';

/** How much is checked: everything, the structure only (no bindings, no invariants), or nothing. */
export type ValidationLevel = 'strict' | 'structural' | 'off';

export interface ValidationIssue {
  /** `information` only in `$validate` (an extension Cinder has no definition of). */
  severity: 'error' | 'warning' | 'information';
  /** The OperationOutcome issue code: structure, required, value, code-invalid, invariant (too-costly: a profile's invariant that cannot be evaluated; informational: a note). */
  code: 'structure' | 'required' | 'value' | 'code-invalid' | 'invariant' | 'not-supported' | 'too-costly' | 'informational';
  /** The FHIRPath location: `Patient.name[0].given[1]`. */
  expression: string;
  text: string;
  /** The invariant broken (`bdl-3`), for an `invariant` issue of a type's own invariants. */
  invariant?: string;
}

export interface ValidateOptions {
  /**
   * Whether the resources of a Bundle's entries are walked (default). Without them, only the Bundle
   * itself is checked (its entries' resources must be JSON objects of a known type; the Bundle's
   * invariants still see them), for a transaction or batch whose entries' resources are validated apart.
   */
  entryResources?: boolean;
  /**
   * Whether the resource is a Bundle entry's that has a fullUrl (a transaction's or batch's, validated
   * apart from its Bundle): its relative references are held to the shape they have there (references.ts).
   */
  inEntryWithFullUrl?: boolean;
  /** Every issue, not capped at MAX_ISSUES: for a caller that validates a Bundle in parts and caps the whole (capped). */
  uncapped?: boolean;
  /**
   * For a caller that validates a Bundle in parts (a chunk of its entries standing for all of them): the index of
   * the chunk's first entry in the whole Bundle, which its entries' paths count from (`Bundle.entry[1000]`).
   */
  entryOffset?: number;
  /**
   * The element ids of the resource's earlier parts, each with its element's path: its element ids are checked as
   * unique against them, and added to them (the same Map, shared by the parts' validations).
   */
  elementIds?: Map<string, string>;
  /**
   * For a caller that validates a large resource in parts (parts.ts): the resource given is `of` with its array
   * `member` holding a slice of `of`'s items, the first at `offset`, which its items' paths count from; `%resource`
   * and `%rootResource` are `of`.
   */
  part?: { member: string; offset: number; of: Json };
  /**
   * Which checks of the resource run (default all): `walk`, its elements alone (without the resource's own
   * invariants and rules); `invariants`, the resource's own invariants alone; `rules`, the resource's own rules
   * alone (conformance.ts, and dom-3 and the ids of its contained resources). All three, in this order, are all.
   */
  checks?: 'all' | 'walk' | 'invariants' | 'rules';
}

/** More issues than this about one resource are summarised in one last issue. */
export const MAX_ISSUES = 100;

const RESOURCE_TYPES = new Set(R4_RESOURCE_TYPES);
const MIME = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(\s*;.*)?$/;
/** R4 allows `xml`, `json` and `ttl` for a format (CapabilityStatement.format), and its TestScripts use them for content types. */
const MIME_SHORTHANDS = new Set(['xml', 'json', 'ttl']);
/** BCP 47's syntax (RFC 5646 2.1): subtags of letters and digits, the first a language, or `x` (private use) or `i` (grandfathered). */
const LANGUAGE = /^([A-Za-z]{2,8}|[xXiI])(-[A-Za-z0-9]{1,8})*$/;
const CURRENCY = /^[A-Z]{3}$/;
const UCUM_SYSTEM = 'http://unitsofmeasure.org';
/** Quantity and the types and profiles of it R4 uses, whose UCUM code is a unit (codings.ts checkQuantity). */
const QUANTITIES: ReadonlySet<string> = new Set(['Quantity', 'Age', 'Count', 'Distance', 'Duration', 'SimpleQuantity', 'MoneyQuantity']);
/** RFC 3986's scheme, which an absolute URI starts with. */
const ABSOLUTE_URL = /^[A-Za-z][A-Za-z0-9+.-]*:/;

type Json = Record<string, unknown>;

class Walk implements IssueSink {
  readonly issues: ValidationIssue[] = [];
  /**
   * The resource being walked (`%resource`), and the resource that contains it (`%rootResource`: itself,
   * unless it is a contained resource; a Bundle entry's resource is a root of its own).
   */
  resource: Json;
  rootResource: Json;
  /** The element ids (Element.id) of the resource being walked, each with the element that has it. */
  elementIds: Map<string, string> | undefined;
  /** What the invariants' evaluations share within this walk (InvariantContext.memo). */
  readonly memo = new Map<object, unknown>();
  /** Each `contained` array met, by id (ReferenceScope.containedById). */
  readonly containedById = new Map<unknown[], Map<string, Json>>();
  /** ReferenceScope.inEntryWithFullUrl. */
  inEntryWithFullUrl = false;
  /** ValidateOptions.entryOffset, added to the indexes of the validated Bundle's own entries. */
  entryOffset = 0;
  /** ValidateOptions.elementIds: the id scope of the resource validated, taken by the first scope opened. */
  seedIds: Map<string, string> | undefined;
  /** The resource validated. */
  readonly top: Json;
  /** What the resource validated stands for (ValidateOptions.part): `%resource` at the top. */
  whole: Json;
  /** ValidateOptions.part's member and offset. */
  part: { member: string; offset: number } | undefined;
  /** ValidateOptions.checks. */
  checks: 'all' | 'walk' | 'invariants' | 'rules' = 'all';

  constructor(root: Json, readonly level: 'strict' | 'structural', readonly entryResources = true) {
    this.resource = root;
    this.rootResource = root;
    this.top = root;
    this.whole = root;
  }

  add(code: ValidationIssue['code'], expression: string, text: string, severity: ValidationIssue['severity'] = 'error', invariant?: string): void {
    this.issues.push(invariant === undefined ? { severity, code, expression, text } : { severity, code, expression, text, invariant });
  }
}

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * Validates `resource` (already known to be an object with a known `resourceType`) at `level`; returns
 * every problem, errors and warnings, each at its FHIRPath location under `at` (default: the type).
 */
export function validateResource(resource: Json, level: 'strict' | 'structural', at?: string, options: ValidateOptions = {}): ValidationIssue[] {
  const walk = new Walk(resource, level, options.entryResources ?? true);
  walk.inEntryWithFullUrl = options.inEntryWithFullUrl ?? false;
  walk.entryOffset = options.entryOffset ?? 0;
  walk.seedIds = options.elementIds;
  if (options.part) {
    walk.whole = options.part.of;
    walk.part = options.part;
  }
  walk.checks = options.checks ?? 'all';
  visitResource(walk, resource, at ?? String(resource.resourceType), false);
  return options.uncapped ? walk.issues : capped(walk.issues);
}

/** At most MAX_ISSUES issues, errors first, and one more saying how many were left out. */
export function capped(issues: ValidationIssue[]): ValidationIssue[] {
  if (issues.length <= MAX_ISSUES) return issues;
  const errors = issues.filter((i) => i.severity === 'error');
  const kept = [...errors, ...issues.filter((i) => i.severity !== 'error')].slice(0, MAX_ISSUES);
  const droppedErrors = errors.length - Math.min(errors.length, MAX_ISSUES);
  const text = `... and ${issues.length - MAX_ISSUES} more problems${droppedErrors ? ` (${droppedErrors} of them errors)` : ''}`;
  kept.push({ severity: droppedErrors ? 'error' : 'warning', code: kept[0]!.code, expression: kept[0]!.expression, text });
  return kept;
}

function visitResource(walk: Walk, r: Json, path: string, contained: boolean): void {
  const type = r.resourceType;
  if (typeof type !== 'string' || !RESOURCE_TYPES.has(type)) {
    walk.add('structure', path, type === undefined ? 'A resource must have a resourceType' : `Unknown resourceType ${describe(type)}`);
    return;
  }
  const model = typeModel(type)!;
  const outer = walk.resource;
  const outerRoot = walk.rootResource;
  // The resource validated may be a part of a larger one (ValidateOptions.part): its invariants see the whole.
  const top = r === walk.top;
  const self = top ? walk.whole : r;
  walk.resource = self;
  if (!contained) walk.rootResource = self;
  const checks = top ? walk.checks : 'all';
  // Each resource, a contained one too, is a scope of element ids of its own, as HL7's validator has it.
  if (checks === 'all' || checks === 'walk') inIdScope(walk, () => visitObject(walk, r, model, path));
  if (walk.level === 'strict') {
    if (checks === 'all' || checks === 'invariants') checkInvariants(walk, model, r, path, walk.resource, walk.rootResource, walk.memo);
    if (checks === 'all' || checks === 'rules') checkConformance(walk, r, path);
  }
  walk.resource = outer;
  walk.rootResource = outerRoot;
  if (contained) checkContained(walk, r, path);
  else if (Array.isArray(r.contained) && (checks === 'all' || checks === 'rules')) {
    checkContainedReferenced(walk, r, model, path);
    checkContainedIds(walk, r.contained, path);
  }
}

/** dom-2, dom-4, dom-5: a contained resource holds no resources of its own, no version, no security labels. */
function checkContained(walk: Walk, r: Json, path: string): void {
  if (r.contained !== undefined) walk.add('invariant', `${path}.contained`, 'A contained resource may not contain resources (dom-2)');
  const meta = r.meta;
  if (isObject(meta)) {
    if (meta.versionId !== undefined || meta.lastUpdated !== undefined) {
      walk.add('invariant', `${path}.meta`, 'A contained resource may not have meta.versionId or meta.lastUpdated (dom-4)');
    }
    if (meta.security !== undefined) walk.add('invariant', `${path}.meta.security`, 'A contained resource may not have security labels (dom-5)');
  }
  if (r.id === undefined) walk.add('required', `${path}.id`, 'A contained resource must have an id, for references to it (#id)');
}

/**
 * dom-3: each contained resource is referred to (`#id`) from elsewhere in the resource, or refers to it
 * (`#`). R4 counts references, canonicals, uris and urls: `%resource.descendants().reference |
 * %resource.descendants().as(canonical) | ...as(uri) | ...as(url)`, and `reference = '#'` or
 * `as(canonical) = '#'` inside the contained resource; a narrative or a note saying `#id` is no reference.
 */
function checkContainedReferenced(walk: Walk, r: Json, model: TypeModel, path: string): void {
  const refs = new Set<string>();
  eachReference(r, model, (value) => {
    if (value.charCodeAt(0) === 35) refs.add(value);
  });
  (r.contained as unknown[]).forEach((c, i) => {
    if (!isObject(c) || typeof c.id !== 'string' || !RESOURCE_TYPES.has(c.resourceType as string)) return;
    if (!refs.has('#' + c.id) && !refersToContainer(c)) {
      walk.add('invariant', `${path}.contained[${i}]`, `Contained ${String(c.resourceType)} '${c.id}' is not referred to from the resource (#${c.id}) (dom-3)`);
    }
  });
}

function refersToContainer(c: Json): boolean {
  let found = false;
  eachReference(c, typeModel(c.resourceType as string)!, (value, type) => {
    if (value === '#' && (type === 'Reference' || type === 'canonical')) found = true;
  });
  return found;
}

/** The types whose values dom-3 counts, besides Reference.reference. */
const URI_TYPES = new Set(['canonical', 'uri', 'url']);

/**
 * Calls `visit` with each Reference.reference (type `Reference`) and each canonical, uri and url value
 * in `obj`, a value of `model`: nested, in primitives' extensions and in the resources inside.
 */
function eachReference(obj: Json, model: TypeModel, visit: (value: string, type: string) => void): void {
  for (const key in obj) {
    const value = obj[key];
    const slot = model.slots.get(key);
    if (slot === undefined) {
      if (key.charCodeAt(0) === 95 && model.slots.get(key.slice(1))?.primitive) {
        for (const item of Array.isArray(value) ? value : [value]) if (isObject(item)) eachReference(item, PRIMITIVE_ELEMENT, visit);
      }
      continue;
    }
    const reference = slot.type === 'string' && key === 'reference' && model.name === 'Reference';
    for (const item of Array.isArray(value) ? value : [value]) {
      if (slot.primitive) {
        if (typeof item === 'string' && (reference || URI_TYPES.has(slot.type))) visit(item, reference ? 'Reference' : slot.type);
      } else if (isObject(item)) {
        const inner = slot.type === 'Resource' ? (RESOURCE_TYPES.has(item.resourceType as string) ? typeModel(item.resourceType as string) : null) : typeModel(slot.type);
        if (inner !== null) eachReference(item, inner, visit);
      }
    }
  }
}

/** Walks `visit` with a scope of element ids of its own. */
function inIdScope(walk: Walk, visit: () => void): void {
  const outer = walk.elementIds;
  // Made on the first element id met: most resources have none. The first scope, the resource validated's, may be its earlier parts'.
  walk.elementIds = walk.seedIds;
  walk.seedIds = undefined;
  visit();
  walk.elementIds = outer;
}

/** Element.id: "Unique id for the element within a resource" (R4 element.html). */
function checkElementId(walk: Walk, id: string, path: string): void {
  const ids = (walk.elementIds ??= new Map());
  const first = ids.get(id);
  if (first === undefined) ids.set(id, path);
  else walk.add('value', `${path}.id`, `Element ids must be unique within a resource: '${id}' is also the id of ${first}`);
}

/**
 * `valued`: `obj` is the `_name` object of a primitive that has a value. ele-1 is `hasValue() or
 * (children().count() > id.count())`, so such a primitive element is valid with only an id there.
 */
function visitObject(walk: Walk, obj: Json, model: TypeModel, path: string, valued = false): void {
  if (model.kind !== 'resource' && typeof obj.id === 'string') checkElementId(walk, obj.id, path);
  let children = 0;
  let choices: Map<ElementModel, string | null> | undefined;
  for (const key in obj) {
    const value = obj[key];
    let slot = model.slots.get(key);
    if (slot === undefined) {
      if (key === 'resourceType' && model.kind === 'resource') continue;
      // A bare element (Resource.id, Element.id, Extension.url, Narrative.div) has no `_name`: that is unknown.
      if (key.charCodeAt(0) === 95 && (slot = model.slots.get(key.slice(1))) !== undefined && slot.primitive && !slot.element.bare) {
        children++;
        if (slot.element.choice) choices = chooseType(walk, obj, model, slot.element, key.slice(1), choices, path);
        visitPrimitiveElements(walk, obj, key.slice(1), slot, value, path);
        continue;
      }
      const bare = slot?.element.bare ? `: ${model.name}.${key.slice(1)} takes no id or extensions` : '';
      walk.add('structure', `${path}.${key}`, `Unknown element '${key}' in ${model.name}${bare}`);
      children++;
      continue;
    }
    if (key !== 'id') children++;
    if (!walk.entryResources && key === 'resource' && model.name === 'Bundle.entry') {
      checkEntryResource(walk, value, `${path}.resource`);
      continue;
    }
    const element = slot.element;
    if (element.choice) choices = chooseType(walk, obj, model, element, key, choices, path);
    const at = `${path}.${slot.step}`;
    if (Array.isArray(value)) {
      if (element.max <= 1) walk.add('structure', at, `${model.name}.${element.name} takes a single value, not an array`);
      else if (value.length === 0) walk.add('structure', at, 'Arrays may not be empty (leave the element out)');
      else {
        if (value.length > element.max) walk.add('structure', at, `${model.name}.${element.name} takes at most ${element.max} values, not ${value.length}`);
        const extensions = slot.primitive ? obj['_' + key] : undefined;
        const offset = obj === walk.top ? partOffset(walk, key, slot) : 0;
        for (let i = 0; i < value.length; i++) {
          const item = value[i];
          if (item === null && slot.primitive && Array.isArray(extensions) && isObject(extensions[i])) continue;
          visitValue(walk, item, slot, `${at}[${i + offset}]`, typeof item === 'number' ? literalOf(value, i) : undefined);
        }
      }
    } else if (element.max > 1) {
      walk.add('structure', at, `${model.name}.${element.name} repeats, so it must be an array`);
    } else visitValue(walk, value, slot, at, typeof value === 'number' ? literalOf(obj, key) : undefined);
  }
  // ele-1 is about elements: a resource (a contained one with only an id) is not one. An empty object is
  // no JSON FHIR allows, even beside a value.
  if (children === 0 && model.kind !== 'resource' && (!valued || obj.id === undefined)) walk.add('structure', path, obj.id === undefined ? 'Empty objects are not allowed (ele-1)' : 'An element must have a value or children other than id (ele-1)');
  for (const element of model.bounded) checkBounds(walk, obj, model, element, path);
}

/**
 * Where the items of the validated resource's array `key` are counted from: the entries of a Bundle validated in
 * chunks from the chunk's first (ValidateOptions.entryOffset), the items of a resource validated in parts from the
 * part's first (ValidateOptions.part).
 */
function partOffset(walk: Walk, key: string, slot: Slot): number {
  if (walk.part !== undefined && key === walk.part.member) return walk.part.offset;
  return walk.entryOffset !== 0 && slot.type === 'Bundle.entry' ? walk.entryOffset : 0;
}

/** A Bundle entry's resource left to be validated apart: a JSON object of a known resource type. */
function checkEntryResource(walk: Walk, value: unknown, path: string): void {
  if (!isObject(value)) walk.add('structure', path, `Resource must be a JSON object, not ${describe(value)}`);
  else if (typeof value.resourceType !== 'string' || !RESOURCE_TYPES.has(value.resourceType)) {
    walk.add('structure', path, value.resourceType === undefined ? 'A resource must have a resourceType' : `Unknown resourceType ${describe(value.resourceType)}`);
  }
}

/**
 * A choice element holds one type, whether a type is given by its value (`deceasedDateTime`) or by its
 * id and extensions alone (`_deceasedBoolean`). `choices` holds the JSON name each choice element took
 * in `obj` (null once its problem is reported).
 */
function chooseType(walk: Walk, obj: Json, model: TypeModel, element: ElementModel, name: string, choices: Map<ElementModel, string | null> | undefined, path: string): Map<ElementModel, string | null> {
  choices ??= new Map();
  const taken = choices.get(element);
  if (taken === undefined) choices.set(element, name);
  else if (taken !== null && taken !== name) {
    const given = element.names.filter((n) => obj[n] !== undefined || obj['_' + n] !== undefined);
    walk.add('structure', `${path}.${element.name}`, `${model.name}.${element.name}[x] may hold one type only, but ${given.join(' and ')} are given`);
    choices.set(element, null);
  }
  return choices;
}

/** min >= 1 (present, and enough values) and max 0 (absent). */
function checkBounds(walk: Walk, obj: Json, model: TypeModel, element: ElementModel, path: string): void {
  let count = 0;
  for (const name of element.names) {
    const v = obj[name] ?? (element.primitive && !element.bare ? obj['_' + name] : undefined);
    if (v !== undefined && v !== null) count = Math.max(count, Array.isArray(v) ? v.length : 1);
  }
  if (element.max === 0 && count > 0) {
    walk.add('structure', `${path}.${element.name}`, `${element.name} is not allowed in a ${model.name}`);
  } else if (count < element.min) {
    const what = element.choice ? `${element.name}[x]` : element.name;
    walk.add('required', `${path}.${element.name}`, element.min === 1 ? `${model.name}.${what} is required` : `${model.name}.${what} needs at least ${element.min} values`);
  }
}

/** `literal`: a number's text as written, when it is not String(v) (exact-json.ts). */
function visitValue(walk: Walk, v: unknown, slot: Slot, path: string, literal?: string): void {
  if (slot.primitive) {
    visitPrimitive(walk, v, slot, path, literal);
    return;
  }
  if (!isObject(v)) {
    walk.add('structure', path, `${slot.type} must be a JSON object, not ${describe(v)}`);
    return;
  }
  if (slot.type === 'Resource') {
    visitResource(walk, v, path, slot.element.name === 'contained');
    return;
  }
  const model = typeModel(slot.type);
  if (model === null) return;
  // A StructureDefinition repeats its differential's ElementDefinition ids in its snapshot (R4 requires
  // both to be path-based): HL7's validator takes the snapshot as a scope of its own, and so does Cinder.
  if (slot.type === 'StructureDefinition.snapshot') inIdScope(walk, () => visitObject(walk, v, model, path));
  else if (slot.type === 'Bundle.entry') {
    // Relative references in the entry's resource are resolved against its fullUrl (references.ts).
    const outer = walk.inEntryWithFullUrl;
    walk.inEntryWithFullUrl = typeof v.fullUrl === 'string';
    visitObject(walk, v, model, path);
    walk.inEntryWithFullUrl = outer;
  } else visitObject(walk, v, model, path);
  if (slot.type === 'Extension') checkExtension(walk, v, path, slot === NESTED_EXTENSION);
  else if (slot.type === 'Reference') checkReference(walk, v, slot.element, path);
  else if (slot.type === 'Bundle.entry') checkFullUrl(walk, v, path);
  if (walk.level === 'strict') {
    if (slot.element.binding && slot.type === 'CodeableConcept') checkConcept(walk, v, slot.element.binding, path);
    else if (slot.type === 'Coding') checkCoding(walk, v, path);
    else if (slot.type === 'Identifier') checkIdentifier(walk, v, path);
    else if (slot.type === 'Attachment') checkAttachment(walk, v, path);
    else if (QUANTITIES.has(slot.type)) checkQuantity(walk, v, path);
    if (model.invariants.length) checkInvariants(walk, model, v, path, walk.resource, walk.rootResource, walk.memo);
  }
}

function visitPrimitive(walk: Walk, v: unknown, slot: Slot, path: string, literal: string | undefined): void {
  const problem = checkPrimitive(slot.type, v, literal);
  if (problem !== undefined) {
    // The wrong JSON type is a structure problem; a string, number or boolean out of the rules a value problem.
    walk.add(typeof v === jsonKind(slot.type) ? 'value' : 'structure', path, problem);
    return;
  }
  if (slot.type === 'xhtml') for (const p of checkNarrative(v as string)) walk.add(p.rule === 'xml' ? 'value' : 'invariant', path, p.text);
  else if (slot.type === 'string' || slot.type === 'markdown') checkWhitespace(walk, v as string, slot.type, path);
  if (slot.type !== 'xhtml' && walk.level === 'strict') {
    if (slot.element.binding && slot.type === 'code') checkCode(walk, v as string, slot.element.binding, path);
    else if (slot.element.absolute) checkAbsolute(walk, v as string, path);
  }
}

/**
 * A string "SHOULD NOT" be whitespace alone, nor start or end with whitespace (R4 datatypes.html#string:
 * "strings SHOULD always contain non-whitespace content"; HL7's validator warns about both,
 * TYPE_SPECIFIC_CHECKS_DT_STRING_WS_ALL and _WS). A markdown is warned about when it is whitespace alone
 * (TYPE_SPECIFIC_CHECKS_DT_PRIMITIVE_WS): its leading spaces are indentation. Warnings, as in the
 * reference: the value is valid. The other types' patterns refuse whitespace where they do (primitives.ts).
 */
function checkWhitespace(walk: Walk, v: string, type: 'string' | 'markdown', path: string): void {
  if (v.length === 0) return;
  const first = isWhitespace(v.charCodeAt(0));
  if (!first && (type === 'markdown' || !isWhitespace(v.charCodeAt(v.length - 1)))) return;
  let all = first;
  for (let i = 1; all && i < v.length; i++) all = isWhitespace(v.charCodeAt(i));
  if (all) walk.add('value', path, `${type === 'string' ? 'A string' : 'A markdown'} should not be whitespace alone: leave the element out, or give it content`, 'warning');
  else if (type === 'string') walk.add('value', path, `A string should not start or end with whitespace: ${JSON.stringify(v.length > 60 ? v.slice(0, 57) + '...' : v)}`, 'warning');
}

/** Unicode's whitespace (the characters of White_Space), as HL7's validator counts it (Utilities.isWhitespace). */
function isWhitespace(c: number): boolean {
  if (c < 0x80) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  return c === 0x85 || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000;
}

function jsonKind(primitive: string): 'boolean' | 'number' | 'string' {
  if (primitive === 'boolean') return 'boolean';
  return primitive === 'decimal' || primitive === 'integer' || primitive === 'positiveInt' || primitive === 'unsignedInt' ? 'number' : 'string';
}

/**
 * `_name`: the id and extensions of a primitive element (json.html#primitive): an object, or for a
 * repeating element an array aligned with the values, `null` where a value has none. R4 writes `_name`
 * only when there is an id or extension to carry ("if present, contains the value's id and/or
 * extensions"; arrays are never empty): one holding nothing but `null`s, or nothing, is refused at
 * `owner._name`, as HL7's serializers never write it. `owner`: the path of `obj`.
 */
function visitPrimitiveElements(walk: Walk, obj: Json, name: string, slot: Slot, ext: unknown, owner: string): void {
  const values = obj[name];
  const path = `${owner}.${slot.step}`;
  if (Array.isArray(ext) && slot.element.max > 1 && !Array.isArray(values)) {
    if (ext.length === 0) walk.add('structure', `${owner}._${name}`, 'Arrays may not be empty (leave the element out)');
  } else if (Array.isArray(ext) && Array.isArray(values) && ext.length > 0 && values.length === ext.length && ext.every((e) => e === null) && values.every((v) => v !== null)) {
    // A null value beside a null here is reported once, with the values.
    walk.add('structure', `${owner}._${name}`, `_${name} holds no id or extensions for any value of ${name}: leave it out`);
    return;
  }
  if (Array.isArray(ext)) {
    if (slot.element.max <= 1) {
      walk.add('structure', path, `_${name} must be an object, as ${name} takes a single value`);
      return;
    }
    if (values !== undefined && (!Array.isArray(values) || values.length !== ext.length)) {
      walk.add('structure', path, `_${name} must have one entry per value of ${name} (null where a value has no extensions)`);
      return;
    }
    for (let i = 0; i < ext.length; i++) {
      const item = ext[i];
      if (item === null) {
        // A null value with a null here is reported once, with the values.
        if (values === undefined) walk.add('structure', `${path}[${i}]`, `${name}[${i}] has neither a value nor extensions`);
        continue;
      }
      const valued = Array.isArray(values) && values[i] !== null && values[i] !== undefined;
      visitPrimitiveElement(walk, item, `${path}[${i}]`, valued);
      if (!valued) checkCodeless(walk, item, slot, `${path}[${i}]`);
    }
  } else {
    if (slot.element.max > 1 && values !== undefined) walk.add('structure', path, `_${name} must be an array aligned with the values of ${name}`);
    else {
      visitPrimitiveElement(walk, ext, path, values !== undefined && values !== null);
      if (values === undefined || values === null) checkCodeless(walk, ext, slot, path);
    }
  }
}

/** R4's data-absent-reason extension: why a value is missing. */
const DATA_ABSENT_REASON = 'http://hl7.org/fhir/StructureDefinition/data-absent-reason';

/** The url of an extension that carries an element of another FHIR version (`http://hl7.org/fhir/5.0/StructureDefinition/extension-...`). */
const CROSS_VERSION = /^http:\/\/hl7\.org\/fhir\/[0-9]+\.[0-9]+\/StructureDefinition\/extension-/;

/**
 * A code bound `required` given by its extensions alone, without a value (`_category` holding a
 * data-absent-reason): the element is there, so R4's binding asks for a code from its value set, and
 * an extension is no code (HL7's validator: "No code provided, and a code is required from the value
 * set", an error, at `strict`; a warning when a cross-version extension carries the code). The language
 * binding (preferred, with a maxValueSet) asks for nothing.
 */
function checkCodeless(walk: Walk, ext: unknown, slot: Slot, path: string): void {
  const b = slot.element.binding;
  if (walk.level !== 'strict' || b === undefined || slot.type !== 'code' || !isObject(ext) || (b.kind === 'syntax' && b.syntax === 'language')) return;
  const extensions = Array.isArray(ext.extension) ? ext.extension : [];
  // Without extensions (an id alone) it is no element at all: ele-1 says so.
  if (extensions.length === 0) return;
  const crossVersion = extensions.find((e): e is Json => isObject(e) && typeof e.url === 'string' && CROSS_VERSION.test(e.url));
  if (crossVersion !== undefined) {
    walk.add('code-invalid', path, `No code is given, and R4 requires one from the value set ${b.url}: the code of another FHIR version (${String(crossVersion.url)}) is no R4 code`, 'warning');
  } else if (extensions.some((e) => isObject(e) && e.url === DATA_ABSENT_REASON)) {
    // Only a data-absent-reason says the code is missing: other extensions on a primitive without a value carry
    // something of their own (the Subscriptions backport's payload content on a websocket's channel.payload, whose
    // Bundles need no MIME type), which an implementation guide defines and R4 lets stand.
    walk.add('code-invalid', path, `No code is given, and R4 requires one from the value set ${b.url}: extensions alone (a data-absent-reason) are no code; leave the element out when the code is not known`);
  }
}

/** `Extension.extension`: where an extension is part of the extension holding it, and its url may be relative. */
const NESTED_EXTENSION = typeModel('Extension')!.slots.get('extension')!;

/** The `_name` object of a primitive: its id and extensions (the Element part of every primitive type). */
const PRIMITIVE_ELEMENT: TypeModel = (() => {
  const extension = typeModel('Extension')!;
  return {
    name: 'Element', kind: 'complex', bounded: [], invariants: [],
    // A slot of its own: a primitive's extensions are no parts of an extension (NESTED_EXTENSION).
    slots: new Map([['id', extension.slots.get('id')!], ['extension', { ...NESTED_EXTENSION }]]),
  };
})();

/** `valued`: the primitive has a value beside this object (ele-1 then holds with an id alone). */
function visitPrimitiveElement(walk: Walk, v: unknown, path: string, valued: boolean): void {
  if (isObject(v)) visitObject(walk, v, PRIMITIVE_ELEMENT, path, valued);
  else walk.add('structure', path, `The id and extensions of a primitive must be a JSON object, not ${describe(v)}`);
}

/**
 * ext-1: an extension has a value or nested extensions, not both. At `strict`, an extension that is not
 * part of another (`part`) names its definition by an absolute URL: only a complex extension's parts
 * have relative urls (R4 extensibility.html; HL7's validator: "Extension.url must be an absolute URL").
 */
function checkExtension(walk: Walk, ext: Json, path: string, part: boolean): void {
  if (!part && walk.level === 'strict' && typeof ext.url === 'string' && !ABSOLUTE_URL.test(ext.url)) {
    walk.add('value', `${path}.url`, `The extension url ${JSON.stringify(ext.url)} is not an absolute URL: only the parts of a complex extension (its nested extensions) have relative urls`);
  }
  let value = false;
  // A primitive value with extensions only (`_valueString`) is a value too.
  for (const key in ext) if (key.startsWith('value') || key.startsWith('_value')) value = true;
  const nested = ext.extension !== undefined;
  if (value === nested) {
    walk.add('invariant', path, value ? 'An extension may have a value or nested extensions, not both (ext-1)' : 'An extension must have a value or nested extensions (ext-1)');
  }
}

function checkCode(walk: Walk, code: string, b: BindingModel, path: string): void {
  if (b.kind === 'codes') {
    if (!b.codes.has(code)) walk.add('code-invalid', path, `${JSON.stringify(code)} is not in the required value set ${b.url}${listCodes(b)}`);
  } else if (b.kind === 'syntax' && !syntaxOk(b.syntax, code)) {
    walk.add('code-invalid', path, `${JSON.stringify(code)} is not a valid ${b.syntax} code, so it is not in ${b.url}, the value set R4 holds this element's codes to`);
  }
}

/** The first few codes, so that a developer can see what was expected. */
function listCodes(b: Extract<BindingModel, { kind: 'codes' }>): string {
  if (b.codes.size > 12) return '';
  return ` (${[...b.codes].join(', ')})`;
}

function syntaxOk(syntax: 'mime-type' | 'ucum' | 'language' | 'currency', code: string): boolean {
  switch (syntax) {
    case 'mime-type':
      return MIME.test(code) || MIME_SHORTHANDS.has(code);
    case 'language':
      return LANGUAGE.test(code);
    case 'currency':
      return CURRENCY.test(code);
    case 'ucum':
      return unitProblem(code) === undefined;
  }
}

/** A CodeableConcept bound `required`: one of its codings must be in the value set. */
function checkConcept(walk: Walk, cc: Json, b: BindingModel, path: string): void {
  if (b.kind === 'unchecked') return;
  const codings = Array.isArray(cc.coding) ? (cc.coding as unknown[]).filter(isObject) : [];
  if (codings.length === 0) {
    walk.add('code-invalid', path, `A coding from the required value set ${b.url} is needed (text alone is not enough)`);
    return;
  }
  for (const c of codings) {
    if (typeof c.code !== 'string') continue;
    if (b.kind === 'codes' ? b.systemCodes.has(`${String(c.system)}|${c.code}`) : b.syntax === 'ucum' ? c.system === UCUM_SYSTEM && syntaxOk('ucum', c.code) : syntaxOk(b.syntax, c.code)) return;
  }
  const given = codings.map((c) => `${String(c.system ?? '(no system)')}|${String(c.code ?? '(no code)')}`).join(', ');
  walk.add('code-invalid', path, `None of the codings (${given}) is in the required value set ${b.url}`);
}
