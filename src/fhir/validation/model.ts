import rawTable from './r4-table.json' with { type: 'json' };
import { PRIMITIVES } from './primitives.ts';
import type { TableElement, TableInvariant, TableType, TableValueSet, ValidationTable } from './table.ts';

const table = rawTable as unknown as ValidationTable;

/** An element of a type: what every JSON name of it (one, or one per type of a choice) shares. */
export interface ElementModel {
  /** The element's name (`value` for `value[x]`). */
  name: string;
  min: number;
  max: number;
  choice: boolean;
  /** Its JSON names. */
  names: string[];
  /** A required binding. */
  binding?: BindingModel;
  /** The resource types a Reference may point at (absent: any). */
  targets?: ReadonlySet<string>;
  /** Whether its values are primitives (of every type, for a choice: then `_name` siblings may hold their extensions). */
  primitive: boolean;
  /** Whether its values have no id and no extensions, so no `_name` (Resource.id, Element.id, Extension.url, Narrative.div). */
  bare: boolean;
  /** Whether R4 defines its values as absolute URIs (a canonical resource's `url`, a ValueSet's include system). */
  absolute: boolean;
}

/** One JSON name of a type's element: `birthDate`, or `valueQuantity` of `value[x]`. */
export interface Slot {
  element: ElementModel;
  /** The type of values under this name. */
  type: string;
  primitive: boolean;
  /** The FHIRPath location step: `birthDate`, or `value.ofType(Quantity)`. */
  step: string;
}

export interface InvariantModel {
  key: string;
  severity: 'error' | 'warning';
  human: string;
  expression: string;
  /** The element it sits on; absent for the type itself. */
  element?: string;
}

export interface TypeModel {
  name: string;
  kind: TableType['kind'];
  slots: ReadonlyMap<string, Slot>;
  /** Elements with min >= 1 or max 0. */
  bounded: readonly ElementModel[];
  /** The type's own invariants and those on its elements. */
  invariants: readonly InvariantModel[];
}

export type BindingModel =
  | { url: string; kind: 'codes'; codes: ReadonlySet<string>; systemCodes: ReadonlySet<string> }
  | { url: string; kind: 'syntax'; syntax: 'mime-type' | 'ucum' | 'language' | 'currency' }
  | { url: string; kind: 'unchecked'; reason: string };

const types = new Map<string, TypeModel | null>();
const bindings = new Map<string, BindingModel>();
/** R4's own code systems by URL: their codes as listed, made a set on first use. */
let codeSystems: Map<string, ReadonlySet<string> | readonly string[]> | undefined;

/** The version of R4's own code systems (every `http://hl7.org/fhir/...` one the table holds). */
export const CORE_CODE_SYSTEM_VERSION = '4.0.1';

/** The codes of one of R4's own code systems (`http://hl7.org/fhir/...`, content complete); undefined for any other system. */
export function coreCodeSystem(url: string): ReadonlySet<string> | undefined {
  codeSystems ??= new Map(Object.entries(table.codeSystems));
  const codes = codeSystems.get(url);
  if (codes === undefined || !Array.isArray(codes)) return codes as ReadonlySet<string> | undefined;
  const set = new Set(codes);
  codeSystems.set(url, set);
  return set;
}

/** `valueQuantity` of `value[x]` and `Quantity`; a profile of a type takes its base type's name. */
function suffix(type: string): string {
  const base = ofTypeName(type);
  return base[0]!.toUpperCase() + base.slice(1);
}

/**
 * The type name a choice element's location gives in `ofType(T)`: the FHIR type as FHIRPath and HL7's
 * validator name it, primitives in lower case (`value.ofType(dateTime)`), complex types capitalised
 * (`value.ofType(Quantity)`); a profile of a type (SimpleQuantity) by its base type.
 */
export function ofTypeName(type: string): string {
  return type === 'SimpleQuantity' || type === 'MoneyQuantity' ? 'Quantity' : type;
}

function binding(url: string): BindingModel {
  let b = bindings.get(url);
  if (b) return b;
  const vs = table.valueSets[url] as TableValueSet;
  if ('codes' in vs) {
    b = { url, kind: 'codes', systemCodes: new Set(vs.codes), codes: new Set(vs.codes.map((c) => c.slice(c.lastIndexOf('|') + 1))) };
  } else if ('syntax' in vs) b = { url, kind: 'syntax', syntax: vs.syntax };
  else b = { url, kind: 'unchecked', reason: vs.unchecked };
  bindings.set(url, b);
  return b;
}

function compileType(name: string, def: TableType): TypeModel {
  const slots = new Map<string, Slot>();
  const bounded: ElementModel[] = [];
  for (const [elementName, e] of Object.entries(def.e) as [string, TableElement][]) {
    const typeNames = Array.isArray(e.t) ? e.t : [e.t];
    const choice = Array.isArray(e.t);
    const element: ElementModel = {
      name: elementName,
      min: e.min ?? 0,
      max: e.max === undefined ? 1 : e.max === '*' ? Infinity : e.max,
      choice,
      names: [],
      primitive: typeNames.every((t) => PRIMITIVES.has(t)),
      bare: e.bare === true,
      absolute: e.abs === true,
    };
    if (e.vs !== undefined) element.binding = binding(e.vs);
    if (e.to !== undefined) element.targets = new Set(e.to);
    for (const t of typeNames) {
      const json = choice ? elementName + suffix(t) : elementName;
      element.names.push(json);
      slots.set(json, { element, type: t, primitive: PRIMITIVES.has(t), step: choice ? `${elementName}.ofType(${ofTypeName(t)})` : elementName });
    }
    if (element.min > 0 || element.max === 0) bounded.push(element);
  }
  const invariants = (def.inv ?? []).map(([key, severity, human, expression, element]: TableInvariant): InvariantModel => {
    const m: InvariantModel = { key, severity, human, expression };
    if (element !== undefined) m.element = element;
    return m;
  });
  return { name, kind: def.kind, slots, bounded, invariants };
}

/** Whether R4 has a type (resource, data type, data type profile or backbone element) of this name, without remembering a name it has not. */
export function hasType(name: string): boolean {
  return Object.hasOwn(table.types, name);
}

/** The compiled model of a resource, data type or backbone element type; null when R4 has none. */
export function typeModel(name: string): TypeModel | null {
  let m = types.get(name);
  if (m !== undefined) return m;
  // A name R4 has no type of is not remembered: clients name any (a contained resource's resourceType
  // walked before validation refuses it), and each would stay in the cache for the life of the process.
  if (!Object.hasOwn(table.types, name)) return null;
  m = compileType(name, table.types[name]!);
  types.set(name, m);
  return m;
}

/**
 * The types of the elements a plain path (`a.b.c`, JSON names) reaches from `type`; a last step naming
 * a choice element (`value`) reaches each of its types. None when the path is not plain or not in the model.
 */
export function pathTypes(type: string, key: string): string[] {
  if (!/^[a-z][A-Za-z]*(\.[a-z][A-Za-z]*)*$/.test(key)) return [];
  const steps = key.split('.');
  let at: string | undefined = type;
  for (const [i, step] of steps.entries()) {
    const model: TypeModel | null = at === undefined ? null : typeModel(at);
    if (!model) return [];
    const slot: Slot | undefined = model.slots.get(step);
    if (slot) {
      at = slot.type;
      continue;
    }
    if (i < steps.length - 1) return [];
    return [...model.slots.values()].filter((s) => s.element.choice && s.element.name === step).map((s) => s.type);
  }
  return at === undefined ? [] : [at];
}

/** The FHIR type of JSON element `name` of a value of type `owner` (for FHIRPath); undefined for a choice element's base name. */
export function elementType(owner: string, name: string): string | undefined {
  return typeModel(owner)?.slots.get(name)?.type;
}

/** The base table's codes of a ValueSet (canonical URL without version), when R4 binds it `required` somewhere; undefined otherwise. */
export function tableValueSet(url: string): BindingModel | undefined {
  return Object.hasOwn(table.valueSets, url) ? binding(url) : undefined;
}

/** One element of a type as FHIRPath's reflection lists it: its name (`value` for `value[x]`), its types, whether it repeats. */
export interface TypeElement {
  name: string;
  types: readonly string[];
  many: boolean;
}

/** R4's abstract bases, which the table has no entry of: their elements, as a concrete type of each base carries them. */
const ABSTRACT_BASES: Record<string, [from: string, names: string[]]> = {
  Element: ['Coding', ['id', 'extension']],
  BackboneElement: ['Patient.contact', ['id', 'extension', 'modifierExtension']],
  Resource: ['Binary', ['id', 'meta', 'implicitRules', 'language']],
  DomainResource: ['Patient', ['id', 'meta', 'implicitRules', 'language', 'text', 'contained', 'extension', 'modifierExtension']],
};

const typeElementCache = new Map<string, readonly TypeElement[] | null>();

/**
 * Every element of a resource, data type, backbone element or abstract base (Element, BackboneElement, Resource,
 * DomainResource), inherited ones included, in R4's order; undefined for a primitive or a name R4 has no type of.
 */
export function typeElements(type: string): readonly TypeElement[] | undefined {
  const known = typeElementCache.get(type);
  if (known !== undefined) return known ?? undefined;
  let out: TypeElement[] | null = null;
  const abstract = Object.hasOwn(ABSTRACT_BASES, type) ? ABSTRACT_BASES[type]! : undefined;
  const def = Object.hasOwn(table.types, abstract?.[0] ?? type) ? table.types[abstract?.[0] ?? type]! : undefined;
  if (def !== undefined && !PRIMITIVES.has(type)) {
    out = [];
    for (const [name, e] of Object.entries(def.e) as [string, TableElement][]) {
      if (abstract !== undefined && !abstract[1].includes(name)) continue;
      out.push({ name, types: Array.isArray(e.t) ? e.t : [e.t], many: e.max === '*' || (typeof e.max === 'number' && e.max > 1) });
    }
  }
  if (Object.hasOwn(table.types, type) || abstract !== undefined) typeElementCache.set(type, out);
  return out ?? undefined;
}

/** The R4 model as the FHIRPath engine reads it (FhirPathTypes): element types for navigation, elements for type()'s ClassInfo. */
export const FHIRPATH_TYPES = { elementType, typeElements };
