/**
 * Compiles a constraining StructureDefinition's snapshot (R4 profiling.html, elementdefinition.html) into
 * a CompiledProfile: the element tree by id (`Observation.component:SystolicBP.code`: the slice
 * `SystolicBP` of `Observation.component`, then its child `code`), each element reduced to what it
 * adds to R4's base definition of the same element (r4-table.json through model.ts).
 */
import { compileExtensionContext, compileInvariant, UnsupportedFhirPath } from '../fhirpath-engine.ts';
import { FhirPathSyntaxError } from '../fhirpath-parse.ts';
import { FHIRPATH_TYPES, pathTypes, typeModel, type ElementModel, type TypeModel } from '../model.ts';
import { R4_RESOURCE_TYPES } from '../../resource-types.ts';
import type { BoundQuantity, CompiledProfile, Constraint, ContextExpression, ElementTypes, ExtensionUse, Discriminator, ProfileElement, Slice, SliceKey, Slicing, TypeRule } from './compiled.ts';
import { splitPath, valuesAt } from './paths.ts';
import { fixedExpression } from './constraint-fixes.ts';

type Json = Record<string, unknown>;

/** Why a StructureDefinition cannot be used as a profile (no snapshot, not a constraint). */
export class ProfileUnusable extends Error {}

const CORE_SD = 'http://hl7.org/fhir/StructureDefinition/';
const RESOURCE_TYPES = new Set<string>(R4_RESOURCE_TYPES);
const CODED = new Set(['code', 'Coding', 'CodeableConcept', 'Quantity', 'string', 'uri']);
const TYPES = FHIRPATH_TYPES;
/** Invariants of Element, Extension, DomainResource and Narrative, which base validation checks natively everywhere. */
const GENERIC_KEYS = ['ele-1', 'ext-1', 'dom-2', 'dom-3', 'dom-4', 'dom-5', 'dom-6', 'txt-1', 'txt-2'];

interface RawNode {
  ed: Json;
  children: RawNode[];
  slices: RawNode[];
}

interface Ctx {
  label: string;
  extensions: Set<string>;
  unsupported: string[];
  through: { targets: readonly string[]; path: string }[];
  /** An R4 4.0.1 vital signs profile, whose component values' binding is taken as extensible (vitalsComponentBinding). */
  vitals: boolean;
}

const VITALS_UNITS = 'http://hl7.org/fhir/ValueSet/ucum-vitals-common|4.0.1';

/**
 * R4's vitalsigns profile binds `Observation.component.value[x]` to its units (ucum-vitals-common) as
 * `required`, whatever the value's type: a component whose value is a CodeableConcept, a string or a
 * Quantity of another unit (an inhaled oxygen flow in L/min) could meet no vital sign profile. HL7's
 * validator loads the 4.0.1 vitalsigns and the core profiles based on it with that binding `extensible`
 * (so a warning), and so are they compiled here. A profile of the tenant's keeps what it says.
 */
function vitalsComponentBinding(ctx: Ctx, ed: Json, strength: 'required' | 'extensible', valueSet: string): 'required' | 'extensible' {
  return ctx.vitals && strength === 'required' && valueSet === VITALS_UNITS && ed.path === 'Observation.component.value[x]' ? 'extensible' : strength;
}

/**
 * The most elements a profile's snapshot may hold to be compiled (R4's largest, ExplanationOfBenefit, has
 * 256): a tenant's profile is compiled again after any change of its StructureDefinitions or terminology,
 * on the write that first claims it, and one of 60,000 elements took 0.25-1 s to compile there.
 */
export const MAX_SNAPSHOT_ELEMENTS = 10_000;

/** The compiled profile of `sd`; throws ProfileUnusable when it has no snapshot or constrains no R4 type. */
export function compileProfile(sd: Json): CompiledProfile {
  const url = typeof sd.url === 'string' ? sd.url : '(no url)';
  const label = typeof sd.version === 'string' ? `${url}|${sd.version}` : url;
  const type = sd.type;
  if (typeof type !== 'string' || typeModel(type) === null) throw new ProfileUnusable(`The profile ${label} constrains no R4 type Cinder knows (type ${JSON.stringify(type)})`);
  if (sd.derivation !== undefined && sd.derivation !== 'constraint') throw new ProfileUnusable(`${label} is no profile (derivation ${JSON.stringify(sd.derivation)}, not constraint)`);
  const elements = (sd.snapshot as Json | undefined)?.element;
  if (!Array.isArray(elements) || elements.length === 0) throw new ProfileUnusable(`The profile ${label} has no snapshot, and no differential to generate one from`);
  if (elements.length > MAX_SNAPSHOT_ELEMENTS) {
    throw new ProfileUnusable(`The profile ${label} has ${elements.length} elements in its snapshot, more than the ${MAX_SNAPSHOT_ELEMENTS} Cinder compiles`);
  }
  const root = tree(elements as Json[], type);
  const vitals = sd.version === '4.0.1' && type === 'Observation' && url.startsWith(CORE_SD) && (url === `${CORE_SD}vitalsigns` || sd.baseDefinition === `${CORE_SD}vitalsigns`);
  const ctx: Ctx = { label, extensions: new Set(), unsupported: [], through: [], vitals };
  const compiled = compileElement(root, typeModel(type), undefined, type, ctx, 'root') ?? { id: type, name: type, choice: false, children: [] };
  const out: CompiledProfile = { url, label, type, root: compiled, extensions: ctx.extensions, unsupported: ctx.unsupported, typesAt: typesAt(elements as Json[], type), through: ctx.through };
  if (type === 'Extension') out.extension = extensionUse(sd, elements[0] as Json);
  return out;
}

/** The types of the elements outside slices that differ from R4's or name profiles, by JSON path (CompiledProfile.typesAt). */
function typesAt(elements: Json[], type: string): Map<string, ElementTypes> {
  const out = new Map<string, ElementTypes>();
  for (const ed of elements) {
    const id = typeof ed.id === 'string' ? ed.id : String(ed.path);
    if (id.includes(':') || !id.startsWith(`${type}.`)) continue;
    const types = typesOf(ed).map((t) => String(t.code));
    const profiles = typesOf(ed).flatMap((t) => (Array.isArray(t.profile) ? (t.profile as unknown[]) : [])).filter((p): p is string => typeof p === 'string').map((p) => p.split('|')[0]!);
    const path = id.slice(type.length + 1).replace(/\[x\]/g, '');
    const base = pathTypes(type, path);
    if (profiles.length > 0 || (types.length > 0 && (types.length !== base.length || types.some((t) => !base.includes(t))))) out.set(path, { types, profiles });
  }
  return out;
}

const FHIR_TYPE_EXTENSION = 'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type';

/**
 * Where an extension definition may be used (its `context`s with a type R4 defines, a `fhirpath` one
 * compiled, and its `contextInvariant`s) and whether it is a modifier.
 */
function extensionUse(sd: Json, root: Json): ExtensionUse {
  const contexts: ExtensionUse['contexts'][number][] = [];
  for (const c of Array.isArray(sd.context) ? (sd.context as Json[]) : []) {
    if (c.type === 'fhirpath' && typeof c.expression === 'string') contexts.push({ type: c.type, ...contextExpression(c.expression, false) });
    else if ((c.type === 'element' || c.type === 'extension') && typeof c.expression === 'string') contexts.push({ type: c.type, expression: c.expression });
  }
  // R4 gives structuredefinition-fhir-type the context ElementDefinition.type.code, but R4's own snapshots (and every
  // tool's after them: the IG Publisher, SUSHI) carry it on ElementDefinition.type, where R4B and R5 define it and HL7's
  // validator accepts it: a StructureDefinition with a snapshot was an error in $validate.
  if (sd.url === FHIR_TYPE_EXTENSION && contexts.some((c) => c.type === 'element' && c.expression === 'ElementDefinition.type.code')) {
    contexts.push({ type: 'element', expression: 'ElementDefinition.type' });
  }
  const invariants = (Array.isArray(sd.contextInvariant) ? (sd.contextInvariant as unknown[]) : []).filter((e): e is string => typeof e === 'string').map((e) => contextExpression(e, true));
  return { modifier: root.isModifier === true, contexts, invariants };
}

/** A `fhirpath` context or a context invariant compiled (a client's FHIRPath: guarded, as a profile's invariants), or why it is not. */
function contextExpression(expression: string, invariant: boolean): ContextExpression {
  try {
    return { expression, fn: compileExtensionContext(expression, TYPES, invariant) };
  } catch (err) {
    if (!(err instanceof UnsupportedFhirPath) && !(err instanceof FhirPathSyntaxError)) throw err;
    return { expression, unsupported: err.message };
  }
}

/** The snapshot's elements as a tree by id: children and slices under the element they belong to. */
function tree(elements: Json[], type: string): RawNode {
  const byId = new Map<string, RawNode>();
  let root: RawNode | undefined;
  for (const ed of elements) {
    const id = typeof ed.id === 'string' ? ed.id : String(ed.path);
    const node: RawNode = { ed, children: [], slices: [] };
    if (root === undefined) {
      root = node;
      byId.set(id, node);
      continue;
    }
    const dot = id.lastIndexOf('.');
    if (dot < 0) continue;
    const last = id.slice(dot + 1);
    const colon = last.indexOf(':');
    // A re-slice (`a:s/r`) is a slice of its slice `a:s`, whose values it divides further.
    const slash = colon >= 0 ? last.lastIndexOf('/') : -1;
    const owner = byId.get(colon < 0 ? id.slice(0, dot) : slash < 0 ? id.slice(0, dot + 1 + colon) : id.slice(0, dot + 1 + slash));
    if (owner === undefined) {
      // A slice standing in place of an element nothing slices (HL7's snapshot of catalog: `Composition.date:IssueDate`, no `Composition.date`) is that element;
      // an extension slice without its `extension` element is a slice of it all the same (sliced by url: implicitSlicing).
      const parent = colon >= 0 && slash < 0 ? byId.get(id.slice(0, dot)) : undefined;
      if (parent === undefined) continue;
      if (isExtension(ed)) {
        const sliced: RawNode = { ed: { id: id.slice(0, dot + 1 + colon), path: ed.path }, children: [], slices: [node] };
        parent.children.push(sliced);
        byId.set(id.slice(0, dot + 1 + colon), sliced);
      } else parent.children.push(node);
      byId.set(id, node);
      continue;
    }
    (colon >= 0 ? owner.slices : owner.children).push(node);
    byId.set(id, node);
  }
  return root ?? { ed: { id: type, path: type }, children: [], slices: [] };
}

/** The base element of `name` (`value` for `value[x]`) in `model`, with its types. */
function baseElement(model: TypeModel | null, name: string): { element: ElementModel; types: string[] } | undefined {
  if (model === null) return undefined;
  let found: ElementModel | undefined;
  const types: string[] = [];
  for (const slot of model.slots.values()) {
    if (slot.element.name !== name) continue;
    found = slot.element;
    types.push(slot.type);
  }
  return found && { element: found, types };
}

function nameOf(ed: Json): string {
  const path = String(ed.path);
  const last = path.slice(path.lastIndexOf('.') + 1);
  return last.endsWith('[x]') ? last.slice(0, -3) : last;
}

function typesOf(ed: Json): Json[] {
  return Array.isArray(ed.type) ? (ed.type as Json[]) : [];
}

/** The single base type of the element's values, for its children (`Observation.component` for a backbone element). */
function valueType(ed: Json, base: { types: string[] } | undefined): string | undefined {
  if (typeof ed.contentReference === 'string') return ed.contentReference.slice(1);
  const codes = typesOf(ed).map((t) => String(t.code));
  if (codes.length !== 1) return base?.types.length === 1 ? base.types[0] : undefined;
  if (codes[0] === 'BackboneElement' || codes[0] === 'Element') return typeModel(String(ed.path)) ? String(ed.path) : base?.types[0];
  return codes[0];
}

function compileElement(raw: RawNode, owner: TypeModel | null, base: ReturnType<typeof baseElement>, forcedType: string | undefined, ctx: Ctx, role: 'root' | 'child' | 'slice'): ProfileElement | null {
  const ed = raw.ed;
  const name = role === 'root' ? String(ed.path) : nameOf(ed);
  const el: ProfileElement = { id: String(ed.id ?? ed.path), name, choice: String(ed.path).endsWith('[x]'), children: [] };
  const vtype = forcedType ?? valueType(ed, base);
  if (vtype !== undefined) el.baseType = vtype;
  let checks = false;
  if (role !== 'root') {
    const min = typeof ed.min === 'number' ? ed.min : 0;
    const max = ed.max === '*' || ed.max === undefined ? Infinity : Number(ed.max);
    if (role === 'slice' || base === undefined ? role === 'slice' || min > 0 || max === 0 : min !== base.element.min || max !== base.element.max) {
      el.card = { min, max };
      checks = true;
    }
    const types = typeRules(ed, base, ctx);
    if (types !== undefined) {
      el.types = types;
      checks = true;
    }
  }
  for (const key in ed) {
    if (key.startsWith('fixed')) (el.fixed = ed[key], (checks = true));
    else if (key.startsWith('pattern')) (el.pattern = ed[key], (checks = true));
    else if (key.startsWith('minValue') && isBound(ed[key])) (el.minValue = ed[key], (checks = true));
    else if (key.startsWith('maxValue') && isBound(ed[key])) (el.maxValue = ed[key], (checks = true));
  }
  if (typeof ed.maxLength === 'number') (el.maxLength = ed.maxLength, (checks = true));
  const binding = ed.binding as Json | undefined;
  if (binding && (binding.strength === 'required' || binding.strength === 'extensible') && typeof binding.valueSet === 'string') {
    const valueSet = binding.valueSet.split('|')[0]!;
    const strength = vitalsComponentBinding(ctx, ed, binding.strength, binding.valueSet);
    const coded = typesOf(ed).some((t) => CODED.has(String(t.code)));
    if (coded && !(strength === 'required' && base?.element.binding?.url === valueSet)) {
      el.binding = { strength, valueSet };
      checks = true;
    }
  }
  const constraints = compileConstraints(ed, el.id, ctx, baseKeys(owner, vtype));
  if (constraints.length > 0) (el.constraints = constraints, (checks = true));
  const childModel = vtype === undefined ? null : typeModel(vtype);
  for (const child of raw.children) {
    const childBase = baseElement(childModel, nameOf(child.ed));
    const c = compileElement(implicitSlicing(child), childModel, childBase, undefined, ctx, 'child');
    if (c !== null) el.children.push(c);
    if (child.ed.slicing !== undefined || isExtension(child.ed)) continue;
    // Slices of an element nothing slices: HL7's validator, with no slicing to divide the values, matches
    // each such element by name, so its rules hold for every value of the element (catalog's `Composition.date:IssueDate` min 1).
    for (const s of child.slices) {
      const u = compileElement(s, childModel, childBase, undefined, ctx, 'child');
      if (u !== null) el.children.push(u);
    }
  }
  const slicing = ed.slicing as Json | undefined;
  if (slicing !== undefined && (raw.slices.length > 0 || slicing.rules === 'closed')) {
    el.slicing = compileSlicing(slicing, raw, owner, base, vtype, ctx);
    checks = true;
  }
  return checks || el.children.length > 0 ? el : null;
}

function isExtension(ed: Json): boolean {
  const path = String(ed.path);
  return path.endsWith('.extension') || path.endsWith('.modifierExtension');
}

/** An extension or modifierExtension with slices and no slicing: sliced by `url`, as R4 slices them (profiling.html, "Extensions"). */
function implicitSlicing(raw: RawNode): RawNode {
  if (raw.ed.slicing !== undefined || raw.slices.length === 0 || !isExtension(raw.ed)) return raw;
  return { ...raw, ed: { ...raw.ed, slicing: { discriminator: [{ type: 'value', path: 'url' }], ordered: false, rules: 'open' } } };
}

/** The element's types when the profile narrows the base's (a choice's types, a Reference's targets), and the extension definitions named. */
function typeRules(ed: Json, base: ReturnType<typeof baseElement>, ctx: Ctx): TypeRule[] | undefined {
  const types = typesOf(ed).filter((t) => typeof t.code === 'string' && !String(t.code).startsWith('http://hl7.org/fhirpath/'));
  if (types.length === 0) return undefined;
  let narrowed = base !== undefined && base.types.length > types.length;
  const rules = types.map((t): TypeRule => {
    const rule: TypeRule = { code: String(t.code) };
    if (t.code === 'Reference' && Array.isArray(t.targetProfile) && t.targetProfile.length > 0) {
      const names = (t.targetProfile as unknown[]).map((p) => (typeof p === 'string' && p.startsWith(CORE_SD) ? p.slice(CORE_SD.length) : ''));
      if (names.every((n) => RESOURCE_TYPES.has(n)) && !names.includes('Resource')) {
        const baseTargets = base?.element.targets;
        if (baseTargets === undefined || baseTargets.size !== names.length || names.some((n) => !baseTargets.has(n))) {
          rule.targets = new Set(names);
          narrowed = true;
        }
      } else {
        // Targets that are profiles: a target the request holds (contained, in the Bundle) must conform to one (run.ts); loaded with the profile.
        const urls = (t.targetProfile as unknown[]).filter((p): p is string => typeof p === 'string').map((p) => p.split('|')[0]!);
        const profiles = urls.filter((u) => !(u.startsWith(CORE_SD) && (RESOURCE_TYPES.has(u.slice(CORE_SD.length)) || u === `${CORE_SD}Resource`)));
        if (profiles.length > 0) {
          const types = urls.filter((u) => !profiles.includes(u)).map((u) => u.slice(CORE_SD.length));
          rule.targetProfiles = { types: new Set(types), profiles };
          if (base?.element.targets !== undefined) rule.targetProfiles.base = base.element.targets;
          for (const p of profiles) ctx.extensions.add(p);
          narrowed = true;
        }
      }
    }
    if (t.code === 'Extension' && Array.isArray(t.profile) && t.profile.length > 0) {
      rule.profiles = (t.profile as unknown[]).filter((p): p is string => typeof p === 'string');
      for (const p of rule.profiles) ctx.extensions.add(p.split('|')[0]!);
      narrowed = true;
    }
    return rule;
  });
  return narrowed ? rules : undefined;
}

/**
 * The keys of the base invariants that hold where an element sits: those of the type that owns it and
 * of its own type (base validation checks them), and the ones every element or resource has.
 */
function baseKeys(owner: TypeModel | null, vtype: string | undefined): ReadonlySet<string> {
  const keys = new Set(GENERIC_KEYS);
  for (const m of [owner, vtype === undefined ? null : typeModel(vtype)]) for (const inv of m?.invariants ?? []) keys.add(inv.key);
  return keys;
}

function compileConstraints(ed: Json, id: string, ctx: Ctx, known: ReadonlySet<string>): Constraint[] {
  const out: Constraint[] = [];
  for (const c of Array.isArray(ed.constraint) ? (ed.constraint as Json[]) : []) {
    if (typeof c.key !== 'string' || known.has(c.key) || typeof c.expression !== 'string') continue;
    try {
      // A profile's invariants are its author's: held to the regex guard and the check's budget (run.ts). One
      // holds when its expression is true: an empty result fails, as it does for R4's own (HL7's validator
      // reads every invariant so), the published expressions HL7's validator rewrites evaluated rewritten.
      const fn = compileInvariant(fixedExpression(c.expression), TYPES, true, true);
      out.push({ key: c.key, severity: c.severity === 'warning' ? 'warning' : 'error', human: String(c.human ?? c.key), fn });
    } catch (err) {
      if (!(err instanceof UnsupportedFhirPath) && !(err instanceof FhirPathSyntaxError)) throw err;
      ctx.unsupported.push(`The invariant ${c.key} on ${id} is not checked: ${err.message}`);
    }
  }
  return out;
}

function compileSlicing(slicing: Json, sliced: RawNode, owner: TypeModel | null, base: ReturnType<typeof baseElement>, vtype: string | undefined, ctx: Ctx): Slicing {
  const discriminators: Discriminator[] = (Array.isArray(slicing.discriminator) ? (slicing.discriminator as Json[]) : []).map((d) => ({
    type: (['value', 'pattern', 'type', 'exists', 'profile'].includes(String(d.type)) ? d.type : 'value') as Discriminator['type'],
    path: d.path === '$this' || d.path === undefined ? [] : splitPath(String(d.path)),
  }));
  const id = String(sliced.ed.id ?? sliced.ed.path);
  const rawSlices = sliced.slices;
  const slices: Slice[] = [];
  for (const raw of rawSlices) {
    // A slice re-sliced without a slicing of its own divides its values by the discriminators of the slicing it belongs to.
    const s = raw.slices.length > 0 && raw.ed.slicing === undefined ? { ...raw, ed: { ...raw.ed, slicing: { discriminator: slicing.discriminator, rules: 'open' } } } : raw;
    const element = compileElement(s, owner, base, vtype, ctx, 'slice');
    if (element === null) continue;
    const sliceName = String(s.ed.sliceName ?? s.ed.id);
    const keys = discriminators.map((d) => sliceKey(s, d));
    for (const k of keys) if (k?.kind === 'through' && k.discriminator === 'profile') ctx.through.push({ targets: k.targets, path: k.path });
    for (const k of keys) for (const p of k?.kind === 'profile' || k?.kind === 'types' ? (k.profiles ?? []) : k?.kind === 'through' ? k.targets.filter((u) => coreType(u) === undefined) : []) ctx.extensions.add(p);
    slices.push({ name: sliceName, element, keys });
  }
  // A profile discriminator whose path Cinder cannot follow (`resolve()`) or whose slices name no profile.
  for (const [i, d] of discriminators.entries()) {
    if (d.type === 'profile' && slices.every((s) => s.keys[i] === null)) ctx.unsupported.push(`The slicing of ${id} by profile at ${d.path.join('.') || '$this'} is not evaluated (no slice names a profile Cinder can reach there)`);
  }
  const rules = slicing.rules === 'closed' || slicing.rules === 'openAtEnd' ? slicing.rules : 'open';
  return { discriminators, rules, ordered: slicing.ordered === true, slices };
}

/** What a value must be at the discriminator's path to belong to the slice `raw`; null when the slice does not say. */
function sliceKey(raw: RawNode, d: Discriminator): SliceKey | null {
  return keyAt(raw, raw, d, 0);
}

/**
 * The key at step `i` of the discriminator's path from `node`: a fixed or pattern value on the way
 * (the rest of the path applied to it), else what the element the path ends at says. The path may go
 * through the slices of an element it reaches (`code.coding.code` into the slice `SBPCode` of `coding`).
 */
function keyAt(slice: RawNode, node: RawNode, d: Discriminator, i: number): SliceKey | null {
  const ed = node.ed;
  if (d.type === 'value' || d.type === 'pattern') {
    const fixedKey = Object.keys(ed).find((k) => k.startsWith('fixed'));
    const patternKey = Object.keys(ed).find((k) => k.startsWith('pattern'));
    if (fixedKey || patternKey) {
      const values = valuesAt([{ value: ed[(fixedKey ?? patternKey)!] }], d.path.slice(i)).map((v) => v.value);
      return values.length === 0 ? null : { kind: fixedKey ? 'fixed' : 'pattern', values };
    }
  }
  if (i === d.path.length) return endKey(ed, d);
  const step = d.path[i]!;
  if (step.startsWith('ofType(')) return keyAt(slice, node, d, i + 1);
  // `resolve()` at the end of the path: the Reference's target must conform to a `targetProfile` (profile), or be of its type (type).
  if (step === 'resolve()') return i !== d.path.length - 1 ? throughKey(ed, d, i) : d.type === 'profile' ? targetProfileKey(ed) : d.type === 'type' ? targetTypeKey(ed) : null;
  // A slice's own re-slices do not say what the slice's values are.
  for (const at of node === slice ? [node] : [node, ...node.slices]) {
    const child = at.children.find((c) => nameOf(c.ed) === step);
    if (child === undefined) continue;
    const key = keyAt(slice, child, d, i + 1);
    if (key !== null) return key;
  }
  // An extension's url, when the slice gives only the extension's definition (`type.profile`).
  if (step === 'url' && i === d.path.length - 1 && node === slice) {
    const profile = typesOf(slice.ed).find((t) => t.code === 'Extension' && Array.isArray(t.profile))?.profile as string[] | undefined;
    return profile?.[0] === undefined ? null : { kind: 'fixed', values: [profile[0].split('|')[0]] };
  }
  return null;
}

/** The resource type a core type's canonical names (`http://hl7.org/fhir/StructureDefinition/Observation`), else undefined. */
export function coreType(url: string): string | undefined {
  const name = url.startsWith(CORE_SD) ? url.slice(CORE_SD.length) : undefined;
  return name !== undefined && RESOURCE_TYPES.has(name) ? name : undefined;
}

/** A `type` or `profile` discriminator going on after `resolve()` (`resolve().value`): judged by the element there in the slice's target profiles. */
function throughKey(ed: Json, d: Discriminator, i: number): SliceKey | null {
  if (d.type !== 'type' && d.type !== 'profile') return null;
  const rest = d.path.slice(i + 1).filter((s) => !s.startsWith('ofType('));
  const targets = targetProfileKey(ed);
  if (targets?.kind !== 'profile' || rest.length === 0 || rest.some((s) => !/^[a-z][A-Za-z]*$/.test(s))) return null;
  return { kind: 'through', discriminator: d.type, targets: targets.profiles, path: rest.join('.') };
}

function targetProfileKey(ed: Json): SliceKey | null {
  const profiles = typesOf(ed).flatMap((t) => (t.code === 'Reference' && Array.isArray(t.targetProfile) ? (t.targetProfile as unknown[]) : [])).filter((p): p is string => typeof p === 'string').map((p) => p.split('|')[0]!);
  return profiles.length === 0 ? null : { kind: 'profile', profiles };
}

/** The types of a Reference's targets: a core type's name, or the type of a profile, found when the check looks it up. */
function targetTypeKey(ed: Json): SliceKey | null {
  const key = targetProfileKey(ed);
  if (key?.kind !== 'profile') return null;
  const core = key.profiles.filter((u) => u.startsWith(CORE_SD) && RESOURCE_TYPES.has(u.slice(CORE_SD.length)));
  const profiles = key.profiles.filter((u) => !core.includes(u));
  const types = new Set(core.map((u) => u.slice(CORE_SD.length)));
  return profiles.length === 0 ? { kind: 'types', types } : { kind: 'types', types, profiles };
}

function endKey(ed: Json, d: Discriminator): SliceKey | null {
  if (d.type === 'exists') {
    if (typeof ed.min === 'number' && ed.min > 0) return { kind: 'exists', exists: true };
    return ed.max === '0' ? { kind: 'exists', exists: false } : null;
  }
  if (d.type === 'type') {
    const codes = typesOf(ed).map((t) => String(t.code));
    return codes.length === 0 ? null : { kind: 'types', types: new Set(codes) };
  }
  if (d.type === 'profile') {
    const profiles = typesOf(ed).flatMap((t) => (Array.isArray(t.profile) ? (t.profile as unknown[]) : [])).filter((p): p is string => typeof p === 'string').map((p) => p.split('|')[0]!);
    return profiles.length === 0 ? null : { kind: 'profile', profiles };
  }
  return null;
}

/** A minValue[x] or maxValue[x]: a number, a date, dateTime, instant or time, or a Quantity with a numeric value. */
function isBound(v: unknown): v is number | string | BoundQuantity {
  return typeof v === 'number' || typeof v === 'string' || (typeof v === 'object' && v !== null && typeof (v as Json).value === 'number');
}
