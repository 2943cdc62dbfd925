import { typeModel, type ElementModel, type Slot, type TypeModel } from '../validation/model.ts';

/** The FHIR namespace every FHIR XML element is in (R4 xml.html). */
export const FHIR_NS = 'http://hl7.org/fhir';
/** The XHTML namespace of the narrative's `div`. */
export const XHTML_NS = 'http://www.w3.org/1999/xhtml';

/** A type's elements in the order R4 defines them (the order FHIR XML writes them in), from the validator's model. */
export interface XmlTypeModel {
  model: TypeModel;
  /** Its elements in definition order. */
  elements: readonly ElementModel[];
  /** Each element's place in `elements`. */
  order: ReadonlyMap<ElementModel, number>;
  /** Whether the type is a resource (whose `id` is an element; a data type's is an attribute). */
  resource: boolean;
  /** What reading an element named so finds, by its name: its slot, its element's place in `elements`, and whether XML writes it as an attribute. */
  named: ReadonlyMap<string, NamedSlot>;
}

/** An element name of a type as the XML reader meets it (one lookup a child element). */
export interface NamedSlot {
  slot: Slot;
  place: number;
  attribute: boolean;
  /** `_name`: the JSON member of a primitive's id and extensions. */
  underscored: string;
}

const cache = new Map<string, XmlTypeModel | null>();

/** The XML view of a type's model (src/fhir/validation/model.ts), or null when R4 has no such type. */
export function xmlTypeModel(type: string): XmlTypeModel | null {
  let m = cache.get(type);
  if (m !== undefined) return m;
  const model = typeModel(type);
  // A name R4 has no type of is not remembered (typeModel's reason: a stored contained resource's type may be anything).
  if (model === null) return null;
  const elements: ElementModel[] = [];
  for (const slot of model.slots.values()) if (!elements.includes(slot.element)) elements.push(slot.element);
  const order = new Map(elements.map((e, i) => [e, i]));
  const named = new Map<string, NamedSlot>();
  m = { model, elements, order, resource: model.kind === 'resource', named };
  for (const [name, slot] of model.slots) named.set(name, { slot, place: order.get(slot.element)!, attribute: isAttributeElement(m, slot.element, type), underscored: `_${name}` });
  cache.set(type, m);
  return m;
}

/**
 * Whether an element of `type` is written as an XML attribute rather than as a child element (R4
 * xml.html): `id` of a data type or backbone element (not of a resource) and `url` of an Extension.
 */
export function isAttributeElement(m: XmlTypeModel, e: ElementModel, type: string): boolean {
  if (e.name === 'id') return !m.resource;
  return e.name === 'url' && type === 'Extension';
}

/** The FHIR types whose JSON value is a number (the rest but boolean are strings). */
export const NUMBER_TYPES: ReadonlySet<string> = new Set(['decimal', 'integer', 'positiveInt', 'unsignedInt', 'integer64']);
