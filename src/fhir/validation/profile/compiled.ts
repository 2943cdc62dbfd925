/**
 * A constraining StructureDefinition (R4 profiling.html) compiled once from its snapshot into the rules
 * the base definitions do not already check: only elements whose cardinality, types, Reference targets,
 * fixed or pattern value, length, bounds, binding or invariants differ from R4's base, and the slicing
 * of repeating elements, are kept. A resource is then checked against this tree, never the snapshot.
 */
import type { CompiledExtensionContext, CompiledInvariant } from '../fhirpath-engine.ts';

export interface CompiledProfile {
  url: string;
  /** `url|version` when the profile has a version, for messages. */
  label: string;
  /** The type it constrains (`Observation`, `Extension`). */
  type: string;
  root: ProfileElement;
  /**
   * Profiles it names, loaded with it: extension definitions its extension slices name
   * (`Extension.type.profile`), checked on the matching extensions, and the profiles a `profile`
   * discriminator's slices name, which choose an item's slice.
   */
  extensions: ReadonlySet<string>;
  /** Problems of the profile itself that make it unusable in part (a discriminator Cinder cannot evaluate), reported once per check. */
  unsupported: readonly string[];
  /**
   * The types (and the profiles they name) of its elements outside slices, by JSON path from the root
   * (`value`, `component.code`), where they differ from R4's or name profiles: what a `type` or `profile`
   * discriminator through `resolve()` (`item.resolve().value`) expects of a target conforming to it.
   */
  typesAt: ReadonlyMap<string, ElementTypes>;
  /**
   * Its `profile` discriminators through `resolve()` and on: the profiles that the element at `path` of
   * each target profile names are loaded with it too (they choose the slice).
   */
  through: readonly { targets: readonly string[]; path: string }[];
  /** For an extension definition: whether it is a modifier, and where it may be used (R4 StructureDefinition.context). */
  extension?: ExtensionUse;
}

export interface ElementTypes {
  types: readonly string[];
  profiles: readonly string[];
}

export interface ExtensionUse {
  /** The root element's `isModifier`: such an extension goes in `modifierExtension`, any other in `extension`. */
  modifier: boolean;
  contexts: readonly ExtensionContext[];
  /** R4 StructureDefinition.contextInvariant: FHIRPath on the element holding the extension, each of which must hold. */
  invariants: readonly ContextExpression[];
}

export interface ExtensionContext extends Partial<ContextExpression> {
  type: 'element' | 'extension' | 'fhirpath';
  expression: string;
}

/** A `fhirpath` context or a context invariant: compiled, or why the engine cannot evaluate it. */
export interface ContextExpression {
  expression: string;
  fn?: CompiledExtensionContext;
  unsupported?: string;
}

export interface TypeRule {
  /** The FHIR type (`Quantity`, `string`, `Reference`). */
  code: string;
  /** Resource types a Reference may target, when the profile narrows them (from `targetProfile`). */
  targets?: ReadonlySet<string>;
  /**
   * When `targetProfile` names profiles rather than core types only: the core types it names (any of
   * them is a target; `Resource`, any type) and the profiles, one of which a target the request holds
   * (contained, in the Bundle: targets.ts) must conform to.
   */
  targetProfiles?: {
    types: ReadonlySet<string>;
    profiles: readonly string[];
    /** R4's targets of the element, when it has them: a target's type is judged by its reference only where the profiles narrow them. */
    base?: ReadonlySet<string>;
  };
  /** Extension definitions (`type.profile`) for an Extension. */
  profiles?: readonly string[];
}

export interface Constraint {
  key: string;
  severity: 'error' | 'warning';
  human: string;
  fn: CompiledInvariant;
}

export interface ProfileBinding {
  strength: 'required' | 'extensible';
  /** The ValueSet's canonical URL, version dropped. */
  valueSet: string;
}

export interface Discriminator {
  type: 'value' | 'pattern' | 'type' | 'exists' | 'profile';
  /** The discriminator's path, split at dots (`$this` is none). */
  path: readonly string[];
}

export interface Slicing {
  discriminators: readonly Discriminator[];
  rules: 'closed' | 'open' | 'openAtEnd';
  ordered: boolean;
  slices: readonly Slice[];
}

export interface Slice {
  name: string;
  element: ProfileElement;
  /** For each discriminator, what a value must be to belong here (null: the slice does not say, so it does not discriminate). */
  keys: readonly (SliceKey | null)[];
}

export type SliceKey =
  /** The values the slice's fixed (equal) or pattern (contained) value has at the path: each must be met. */
  | { kind: 'fixed' | 'pattern'; values: readonly unknown[] }
  /** A `type` discriminator: the value's type is one of `types`, or (through `resolve()`) of a target profile's, loaded with the profile. */
  | { kind: 'types'; types: ReadonlySet<string>; profiles?: readonly string[] }
  | { kind: 'exists'; exists: boolean }
  /** A `profile` discriminator: the value at the path conforms to one of these profiles (canonical URLs). */
  | { kind: 'profile'; profiles: readonly string[] }
  /**
   * A `type` or `profile` discriminator whose path goes on after `resolve()` (`item.resolve().value`): the
   * types or profiles are those of the element at `path` (JSON names) in the slice's target profiles
   * (`targets`: profiles loaded with this one, or core resource types' urls), found when the check runs.
   */
  | { kind: 'through'; discriminator: 'type' | 'profile'; targets: readonly string[]; path: string };

export interface ProfileElement {
  /** The ElementDefinition's id (`Observation.component:SystolicBP.code`), for messages. */
  id: string;
  /** The JSON name (`value` for `value[x]`). */
  name: string;
  choice: boolean;
  /** The base type of its values when it has one type (`CodeableConcept`, `Observation.component`). */
  baseType?: string;
  /** Checked only when the profile changes the base's cardinality, and for every slice. */
  card?: { min: number; max: number };
  types?: readonly TypeRule[];
  fixed?: unknown;
  pattern?: unknown;
  maxLength?: number;
  minValue?: number | string | BoundQuantity;
  maxValue?: number | string | BoundQuantity;
  binding?: ProfileBinding;
  constraints?: readonly Constraint[];
  children: ProfileElement[];
  slicing?: Slicing;
  /** `_name`, the key of a primitive's extensions: made on first use by run.ts (not for a choice element, whose key varies). */
  underscored?: string;
}

/** A minValueQuantity or maxValueQuantity: its value, and its unit by `system` and `code` (or `unit` alone). */
export interface BoundQuantity {
  value: number;
  system?: unknown;
  code?: unknown;
  unit?: unknown;
}
