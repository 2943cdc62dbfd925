/**
 * Every extension and modifierExtension of a resource with where it is used: the FHIRPath of the
 * extension and what R4 StructureDefinition.context (type `element` or `extension`) may name of the
 * element holding it: its path from the resource (`Patient.contact`), from the data type it is in
 * (`Address.line`), its type (`Address`, `Questionnaire.item`), and the generic ones (`Element`,
 * `Resource`, `BackboneElement`); or, in an extension, that extension's url. For `fhirpath` contexts and
 * context invariants, the element holding it by place, and the resource it is in with that resource's
 * root. Contained resources, a Bundle's entries and a Parameters' resources are walked as resources of
 * their own.
 */
import { typeModel, type Slot } from '../model.ts';

type Json = Record<string, unknown>;

export interface ExtensionSite {
  extension: Json;
  /** Found under `modifierExtension`. */
  modifier: boolean;
  /** The extension's FHIRPath (`Patient.contact[0].extension[1]`). */
  path: string;
  /** The names an `element` context may use for the element holding it. */
  names: ReadonlySet<string>;
  /** The FHIRPath of the element holding it, for messages. */
  host: string;
  /** The url of the extension holding it, when it is nested. */
  inExtension?: string;
  /** The resource it is in and that resource's root (`%resource`, `%rootResource`), for `fhirpath` contexts and context invariants. */
  resource: Json;
  root: Json;
  /** The element holding it, by place: its object, or a primitive's `_name` object; its FHIR type, and a primitive's value. */
  holder: Holder;
}

export interface Holder {
  node: Json;
  type: string;
  value: unknown;
}

/** The resource being walked and its root (a contained resource's container; a Bundle's or Parameters' resource is a root of its own). */
interface Within {
  resource: Json;
  root: Json;
}

/** Data types that are profiles of Quantity: a context `Quantity` admits them. */
const QUANTITIES = new Set(['Age', 'Count', 'Distance', 'Duration', 'MoneyQuantity', 'SimpleQuantity']);
const NOT_DOMAIN = new Set(['Bundle', 'Binary', 'Parameters']);

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The extensions of `resource` (at FHIRPath `at`, its type by default), in document order. */
export function extensionSites(resource: Json, at = String(resource.resourceType)): ExtensionSite[] {
  const out: ExtensionSite[] = [];
  const type = String(resource.resourceType);
  walk(out, resource, resource, type, [type], at, resourceNames(type), { resource, root: resource });
  return out;
}

function resourceNames(type: string): string[] {
  return NOT_DOMAIN.has(type) ? ['Resource'] : ['Resource', 'DomainResource'];
}

function walk(out: ExtensionSite[], obj: Json, value: unknown, type: string, paths: string[], at: string, generic: string[], within: Within): void {
  const names = new Set([...paths, type, 'Element', ...generic]);
  if (QUANTITIES.has(type)) names.add('Quantity');
  for (const key of ['extension', 'modifierExtension']) {
    const list = obj[key];
    if (!Array.isArray(list)) continue;
    for (const [i, ext] of list.entries()) {
      if (!isObject(ext)) continue;
      const site: ExtensionSite = { extension: ext, modifier: key === 'modifierExtension', path: `${at}.${key}[${i}]`, names, host: at, ...within, holder: { node: obj, type, value } };
      if (type === 'Extension' && typeof obj.url === 'string') site.inExtension = obj.url;
      out.push(site);
      walk(out, ext, ext, 'Extension', ['Extension'], site.path, [], within);
    }
  }
  const model = typeModel(type);
  if (model === null) return;
  for (const key in obj) {
    if (key === 'extension' || key === 'modifierExtension' || key === 'resourceType') continue;
    const primitiveExt = key.startsWith('_');
    const slot = model.slots.get(primitiveExt ? key.slice(1) : key);
    if (slot === undefined || (slot.primitive && !primitiveExt)) continue;
    const value = obj[key];
    const items = Array.isArray(value) ? value : [value];
    // A primitive's `_name` object holds its extensions; its value is the sibling without the underscore.
    const values = primitiveExt ? obj[key.slice(1)] : undefined;
    for (const [i, item] of items.entries()) {
      if (!isObject(item)) continue;
      const step = `${at}.${slot.step}${Array.isArray(value) ? `[${i}]` : ''}`;
      child(out, item, primitiveExt ? (Array.isArray(values) ? values[i] : values) : item, slot, paths, step, within, key !== 'contained');
    }
  }
}

function child(out: ExtensionSite[], item: Json, value: unknown, slot: Slot, paths: string[], at: string, within: Within, ownRoot: boolean): void {
  if (slot.type === 'Resource' && typeof item.resourceType === 'string') {
    // A contained resource's root is its container's root; a Bundle's or Parameters' resource (any other) is a root of its own.
    walk(out, item, item, item.resourceType, [item.resourceType], at, resourceNames(item.resourceType), { resource: item, root: ownRoot ? item : within.root });
    return;
  }
  const name = slot.element.name;
  const next = paths.flatMap((p) => (slot.element.choice ? [`${p}.${name}`, `${p}.${name}[x]`] : [`${p}.${name}`]));
  // A backbone element's type is its path (`Questionnaire.item`); a data type starts paths of its own (`Address.line`).
  const backbone = slot.type.includes('.');
  if (!backbone && !slot.primitive) next.push(slot.type);
  walk(out, item, value, slot.type, next, at, backbone ? ['BackboneElement'] : [], within);
}
