/**
 * Checks a resource against a CompiledProfile (R4 profiling.html): cardinality, types and Reference
 * targets, fixed and pattern values, maxLength, minValue/maxValue, invariants and slicing, each problem
 * at its FHIRPath location in the base validator's style (`Observation.category[0]`,
 * `Observation.value.ofType(Quantity)`). Bindings are collected, to be decided by the terminology
 * (profile-check.ts), since a profile may bind value sets the base table does not hold.
 */
import type { Clock } from '../../../clock.ts';
import { dateRange } from '../../dates.ts';
import { canonicalUnit, UCUM_SYSTEM } from '../../ucum.ts';
import { EMPTY_RESULT_NOTE, FhirPathEvaluationError, FhirPathTooCostly, type InvariantContext } from '../fhirpath-engine.ts';
import type { ValidationIssue } from '../validate.ts';
import { ofTypeName, pathTypes } from '../model.ts';
import { coreType } from './compile.ts';
import type { BoundQuantity, CompiledProfile, ProfileElement, Slice, SliceKey, Slicing, TypeRule } from './compiled.ts';
import { choiceKey, compileSteps, equalsFixed, matchesPattern, typeOfSuffix, walkSteps, type Located, type Step } from './paths.ts';
import type { TargetScope } from './targets.ts';

type Json = Record<string, unknown>;

/** A coded value whose binding the terminology decides. */
export interface PendingBinding {
  expression: string;
  strength: 'required' | 'extensible';
  valueSet: string;
  /** The codings to test (one must be in the value set); a bare code has no system. */
  codings: { system?: string; code: string }[];
  /** The profile and element, for the message. */
  where: string;
}

export interface ProfileResult {
  issues: ValidationIssue[];
  bindings: PendingBinding[];
}

/**
 * How many values the invariants of the profiles and extension definitions checked for one write (a
 * resource, or a whole transaction) or one `$validate` may visit together. A profile's invariants are
 * its author's FHIRPath, run on every write claiming it: held, as a FHIRPath Patch path is, to a budget
 * (a cross product such as `name.given.select(%resource.name.given)` visits the square of a resource's
 * values) and to the regex guard (src/regex-guard.ts).
 */
export const PROFILE_VISITS = 1_000_000;

/** The budget one write's or `$validate`'s profile checks share; `refused` once an invariant proved too costly. */
export interface ProfileCost {
  readonly budget: { left: number; readonly limit: number; readonly what: string };
  refused?: string;
  /** The time the invariants' `now()` and `today()` read (the app's clock, ProfileValidator's); the system's when absent. */
  clock?: Clock;
}

export function profileCost(limit = PROFILE_VISITS): ProfileCost {
  return { budget: { left: limit, limit, what: "the profile invariants of one write or $validate" } };
}

/** A profile (or extension definition) by canonical URL, as loaded for this check; undefined when unknown. */
export type ProfileLookup = (url: string) => CompiledProfile | undefined;

/**
 * A value being checked. Its FHIRPath location is built only when an issue or a binding names it
 * (pathOf): most values have none, and building `Observation.component[1].code.coding[0]` for each was
 * a fifth of a check's time.
 */
interface Item {
  /** The value (a primitive's value, or the object). */
  value: unknown;
  /** The object holding its children: the value itself, or a primitive's `_name` object. */
  sub: Json | undefined;
  type: string | undefined;
  /** The item holding it (undefined for the resource, whose `path` is given). */
  parent: Item | undefined;
  /** Its element's JSON name (`value` of `valueQuantity`), its index when the element repeats (else -1). */
  name: string;
  index: number;
  /** Its location, once built. */
  path: string | undefined;
  /** A choice element's value: the type its step names (`value.ofType(Quantity)`). */
  choice: boolean;
}

function pathOf(item: Item): string {
  if (item.path !== undefined) return item.path;
  const step = item.choice ? `${item.name}.ofType(${ofTypeName(item.type!)})` : item.name;
  const at = `${pathOf(item.parent!)}.${step}`;
  return (item.path = item.index < 0 ? at : `${at}[${item.index}]`);
}

class Run {
  readonly issues: ValidationIssue[] = [];
  readonly bindings: PendingBinding[] = [];
  readonly memo = new Map<object, unknown>();
  /** What every invariant of this check is evaluated with, made on first use. */
  private ctx: InvariantContext | undefined;
  /** Set when a discriminator's `resolve()` met a reference this check cannot resolve (checkSlicing). */
  unresolved = false;
  /** `resolve()` in a discriminator's path: the target, or nothing (and `unresolved`) when the request does not hold it. */
  readonly resolver = (ref: string): Json | undefined => {
    const target = this.resolve(ref);
    if (target === undefined) this.unresolved = true;
    return target;
  };
  constructor(
    readonly resource: Json, readonly lookup: ProfileLookup, readonly cost: ProfileCost, readonly scope: TargetScope | undefined,
    /** Whether a value conforms to a profile, once per value and profile, shared with the checks of candidates and targets this one starts (a cycle of targets ends). */
    readonly conformance: WeakMap<object, Map<string, boolean>>,
    /** What `%resource` and `%rootResource` name in invariants when `resource` is no resource (an extension: the resource it is in). */
    readonly within?: { resource: Json; root: Json },
  ) {}
  /** The resource `ref` names when the request holds it (targets.ts), else `#id` among this resource's contained ones. */
  resolve(ref: string): Json | undefined {
    if (this.scope !== undefined) return this.scope.resolve(ref, this.resource);
    if (!ref.startsWith('#')) return undefined;
    const list = Array.isArray(this.resource.contained) ? this.resource.contained : [];
    return list.find((c): c is Json => isObject(c) && c.id === ref.slice(1));
  }
  add(severity: 'error' | 'warning', code: ValidationIssue['code'], expression: string, text: string): void {
    this.issues.push({ severity, code, expression, text });
  }
  context(): InvariantContext {
    return (this.ctx ??= { resource: this.within?.resource ?? this.resource, rootResource: this.within?.root ?? this.resource, memo: this.memo, budget: this.cost.budget, clock: this.cost.clock });
  }
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * The problems of `resource` (at `path`, its FHIRPath: `Bundle.entry[0].resource` or its type) against
 * `profile`; `scope` resolves its references to the resources the request holds (targets.ts), for
 * target profiles and `resolve()` discriminators; `within`, for an extension checked against its definition, the
 * resource it is in (what its invariants' `%resource` names).
 */
export function checkProfile(resource: Json, profile: CompiledProfile, lookup: ProfileLookup, path = profile.type, cost = profileCost(), scope?: TargetScope, within?: { resource: Json; root: Json }): ProfileResult {
  return runProfile(new Run(resource, lookup, cost, scope, new WeakMap(), within), profile, path);
}

function runProfile(run: Run, profile: CompiledProfile, path: string): ProfileResult {
  const resource = run.resource;
  const item: Item = { value: resource, sub: resource, type: profile.type, parent: undefined, name: '', index: -1, path, choice: false };
  checkItem(run, profile, profile.root, item);
  return { issues: run.issues, bindings: run.bindings };
}

const NONE: readonly Item[] = [];

/** `_name` of a JSON name, kept (a string made anew for each lookup was a tenth of a check); a client's odd names are not kept without end. */
const underscore = new Map<string, string>();
function underscored(key: string): string {
  let u = underscore.get(key);
  if (u === undefined) {
    u = `_${key}`;
    if (underscore.size < 10_000) underscore.set(key, u);
  }
  return u;
}

/** The values of `el` in `parent`'s object, each with its location. */
function itemsOf(parent: Item, el: ProfileElement): readonly Item[] {
  const obj = parent.sub!;
  let key: string | undefined = el.name;
  let type = el.baseType;
  if (el.choice) {
    key = choiceKey(obj, el.name);
    if (key === undefined) return NONE;
    type = typeOfSuffix(key.slice(el.name.length));
  }
  const v = obj[key];
  const ext = obj[el.choice ? underscored(key) : (el.underscored ??= `_${el.name}`)];
  if (v === undefined && ext === undefined) return NONE;
  const vs = Array.isArray(v);
  const es = Array.isArray(ext);
  if (vs || (v === undefined && es)) {
    const n = Math.max(vs ? v.length : 0, es ? ext.length : 0);
    const out: Item[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const value = vs ? v[i] : undefined;
      const e = es ? ext[i] : undefined;
      out[i] = { value, sub: isObject(value) ? value : isObject(e) ? e : undefined, type, parent, name: el.name, index: i, path: undefined, choice: el.choice };
    }
    return out;
  }
  return [{ value: v, sub: isObject(v) ? v : isObject(ext) ? ext : undefined, type, parent, name: el.name, index: -1, path: undefined, choice: el.choice }];
}

function checkElement(run: Run, profile: CompiledProfile, el: ProfileElement, parent: Item): void {
  const items = itemsOf(parent, el);
  if (el.card) checkCount(run, profile, el, items.length, parent, el.name, el.id);
  for (let i = 0; i < items.length; i++) checkItem(run, profile, el, items[i]!);
  if (el.slicing) checkSlicing(run, profile, el, items, parent);
}

/** An invariant that cannot be evaluated is an error: the write is refused rather than taken as conforming. */
function tooCostly(run: Run, expression: string, text: string): void {
  run.cost.refused = text;
  run.add('error', 'too-costly', expression, text);
}

/** The count of `el`'s values in `parent` (under the JSON name `name`: the expression, built when there is something to say). */
function checkCount(run: Run, profile: CompiledProfile, el: ProfileElement, n: number, parent: Item, name: string, what: string): void {
  const { min, max } = el.card!;
  if (n >= min && n <= max) return;
  const expression = `${pathOf(parent)}.${name}`;
  if (n < min) run.add('error', 'required', expression, `${what}: at least ${min} required by the profile ${profile.label}, found ${n}`);
  else run.add('error', 'structure', expression, max === 0 ? `${what}: not allowed by the profile ${profile.label}` : `${what}: at most ${max} allowed by the profile ${profile.label}, found ${n}`);
}

/** `<element id> (profile <label>)`, which starts each message. */
function whereOf(profile: CompiledProfile, el: ProfileElement): string {
  return `${el.id} (profile ${profile.label})`;
}

/** The Reference rule of an element's types that narrows its targets, once per element (null: none). */
const targetRules = new WeakMap<ProfileElement, TypeRule | null>();
function targetRule(el: ProfileElement): TypeRule | null {
  let rule = targetRules.get(el);
  if (rule === undefined) targetRules.set(el, (rule = el.types!.find((t) => t.code === 'Reference' && (t.targets || t.targetProfiles)) ?? null));
  return rule;
}

function hasType(types: readonly TypeRule[], type: string): boolean {
  for (let i = 0; i < types.length; i++) if (types[i]!.code === type) return true;
  return false;
}

function checkItem(run: Run, profile: CompiledProfile, el: ProfileElement, item: Item): void {
  if (el.types && item.type !== undefined && el.choice && !hasType(el.types, item.type)) {
    run.add('error', 'structure', pathOf(item), `${whereOf(profile, el)}: type ${item.type} is not allowed; expected ${el.types.map((t) => t.code).join(', ')}`);
  }
  if (el.types && isObject(item.value)) checkTargets(run, profile, el, item);
  if (el.fixed !== undefined && !equalsFixed(item.value, el.fixed)) run.add('error', 'value', pathOf(item), `${whereOf(profile, el)}: the value must be exactly ${JSON.stringify(el.fixed)}`);
  if (el.pattern !== undefined && !matchesPattern(item.value, el.pattern)) run.add('error', 'value', pathOf(item), `${whereOf(profile, el)}: the value must match the pattern ${JSON.stringify(el.pattern)}`);
  // A string of no more UTF-16 units than the bound has no more characters either.
  if (el.maxLength !== undefined && typeof item.value === 'string' && item.value.length > el.maxLength && [...item.value].length > el.maxLength) run.add('error', 'value', pathOf(item), `${whereOf(profile, el)}: longer than ${el.maxLength} characters`);
  if (el.minValue !== undefined || el.maxValue !== undefined) checkBounds(run, profile, el, item);
  if (el.binding) collectBinding(run, profile, el, item);
  // Once an invariant proved too costly (one error says so), the others of the write are not evaluated.
  if (el.constraints && run.cost.refused === undefined) {
    const ctx = run.context();
    for (const c of el.constraints) {
      let holds: boolean | undefined;
      try {
        holds = c.fn(item.value, item.type, ctx);
      } catch (err) {
        if (err instanceof FhirPathTooCostly) {
          tooCostly(run, pathOf(item), `${whereOf(profile, el)}: the invariant ${c.key} cannot be evaluated: ${err.message}`);
          break;
        }
        if (!(err instanceof FhirPathEvaluationError)) throw err;
        // An error evaluating it fails the invariant (HL7's validator reports it so, at the invariant's severity).
        run.add(c.severity, 'invariant', pathOf(item), `${whereOf(profile, el)}: ${c.human} (the invariant cannot be evaluated here: ${err.message}) (${c.key})`);
        continue;
      }
      if (holds !== true) run.add(c.severity, 'invariant', pathOf(item), `${whereOf(profile, el)}: ${c.human}${holds === undefined ? ` (${EMPTY_RESULT_NOTE})` : ''} (${c.key})`);
    }
  }
  if (item.sub !== undefined) for (let i = 0; i < el.children.length; i++) checkElement(run, profile, el.children[i]!, item);
}

/**
 * A Reference's target: its type, where the reference is literal (`Type/id`, a URL ending so, or a
 * target the request holds), against the core types `targetProfile` names; and a target the request
 * holds (a contained resource, an entry of the same Bundle) against the profiles it names, one of which
 * it must conform to, as HL7's validator checks it. A target only the store holds is not read (targets.ts).
 */
function checkTargets(run: Run, profile: CompiledProfile, el: ProfileElement, item: Item): void {
  const rule = targetRule(el);
  if (rule === null || (item.type !== undefined && item.type !== 'Reference')) return;
  const ref = (item.value as Json).reference;
  if (typeof ref !== 'string') return;
  // The type read off a literal reference; one that tells none (`urn:uuid:`) is the type of the entry it names, when the request holds it.
  const literal = ref.startsWith('#') ? undefined : /(?:^|\/)([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(\/_history\/[A-Za-z0-9\-.]{1,64})?$/.exec(ref)?.[1];
  const target = ref.startsWith('#') || rule.targetProfiles !== undefined || literal === undefined ? run.resolve(ref) : undefined;
  let type: string | undefined;
  if (target !== undefined) type = typeof target.resourceType === 'string' ? target.resourceType : undefined;
  else type = literal;
  if (rule.targets !== undefined) {
    if (type !== undefined && !rule.targets.has(type)) {
      run.add('error', 'structure', `${pathOf(item)}.reference`, `${whereOf(profile, el)}: a reference to ${type} is not allowed; expected ${[...rule.targets].join(', ')}`);
    }
    return;
  }
  const tp = rule.targetProfiles!;
  if (type === undefined || tp.types.has(type) || tp.types.has('Resource')) return;
  const unknown: string[] = [];
  const ofType: CompiledProfile[] = [];
  const types = new Set(tp.types);
  for (const url of tp.profiles) {
    const p = run.lookup(url);
    if (p === undefined) unknown.push(url);
    else {
      types.add(p.type);
      if (p.type === type) ofType.push(p);
    }
  }
  if (target === undefined) {
    // Not held: its type, read off the reference, is judged where the profiles' types narrow R4's targets (base validation checks those).
    const narrowed = tp.base !== undefined && [...tp.base].some((t) => !types.has(t));
    if (unknown.length === 0 && narrowed && ofType.length === 0) {
      run.add('error', 'structure', `${pathOf(item)}.reference`, `${whereOf(profile, el)}: a reference to ${type} is not allowed; expected ${[...tp.types, ...tp.profiles].join(', ')}`);
    }
    return;
  }
  for (const p of ofType) if (conformsTo(run, item, target, p)) return;
  if (unknown.length > 0) {
    run.add('warning', 'not-supported', pathOf(item), `${whereOf(profile, el)}: the target ${ref} was not checked against ${unknown.join(', ')}, which Cinder does not know`);
    return;
  }
  const expected = [...tp.types, ...tp.profiles].join(', ');
  if (ofType.length === 0) run.add('error', 'structure', `${pathOf(item)}.reference`, `${whereOf(profile, el)}: a reference to ${type} is not allowed; expected ${expected}`);
  else run.add('error', 'structure', pathOf(item), `${whereOf(profile, el)}: the target ${ref} (${type}) conforms to none of the profiles it may have (${ofType.map((p) => p.label).join(', ')})`);
}

function checkBounds(run: Run, profile: CompiledProfile, el: ProfileElement, item: Item): void {
  for (const [bound, sign, word, name] of [[el.minValue, -1, 'below the minimum', 'minimum'], [el.maxValue, 1, 'above the maximum', 'maximum']] as const) {
    if (bound === undefined) continue;
    if (typeof bound === 'object') {
      const o = orderQuantity(item.value, bound);
      if (o === sign) run.add('error', 'value', pathOf(item), `${whereOf(profile, el)}: ${word} ${describeBound(bound)}`);
      else if (typeof o === 'object') run.add(o.severity, 'value', pathOf(item), `${whereOf(profile, el)}: ${o.why}, so the ${name} ${describeBound(bound)} ${o.severity === 'error' ? 'cannot be met' : 'was not checked'}`);
      continue;
    }
    const o = orderValue(isObject(item.value) && 'value' in item.value ? item.value.value : item.value, bound);
    if (o === sign) run.add('error', 'value', pathOf(item), `${whereOf(profile, el)}: ${word} ${describeBound(bound)}`);
  }
}

function describeBound(bound: number | string | BoundQuantity): string {
  if (typeof bound !== 'object') return String(bound);
  const unit = bound.code ?? bound.unit;
  return typeof unit === 'string' ? `${bound.value} ${unit}` : String(bound.value);
}

/**
 * A value against a bound of its kind: -1 before it, 1 after it, 0 otherwise (or undefined: not comparable). Dates,
 * dateTimes and instants by the moments they denote (time zones read, as FHIRPath orders them): before when the
 * value's period ends by the bound's start, after when it starts at or past the bound's end, neither when their
 * precisions let them overlap (`2019` against `2019-06-01`). Numbers and times (`hh:mm:ss`, whose text orders them) as
 * they are.
 */
function orderValue(v: unknown, bound: number | string): number | undefined {
  if (typeof v !== typeof bound) return undefined;
  if (typeof v === 'string' && typeof bound === 'string') {
    const a = dateRange(v);
    const b = dateRange(bound);
    if (a !== null && b !== null) return a.high <= b.low ? -1 : a.low >= b.high ? 1 : 0;
  }
  const x = v as number | string;
  return x < bound ? -1 : x > bound ? 1 : 0;
}

/** Why a Quantity was not compared with a bound: an error when it cannot be (a UCUM unit of another dimension), else a warning. */
interface Uncompared {
  severity: 'error' | 'warning';
  why: string;
}

/**
 * A Quantity against a minValueQuantity or maxValueQuantity: in the bound's unit (one system and code, or one `unit`
 * when neither has a code), or both UCUM units of one dimension, converted to their base units (5400 ug against 5 mg).
 * As HL7's validator (InstanceValidator, checkQuantity): a UCUM unit that cannot be converted to the bound's (another
 * dimension, or no UCUM unit) fails the bound, an error; a Quantity without a value, in another system, or without a
 * code beside a bound with one (or the reverse) is not compared, a warning that says so. A bound whose UCUM unit
 * Cinder cannot read is not compared either (a warning: the profile's unit, not the instance's).
 */
function orderQuantity(q: unknown, bound: BoundQuantity): number | Uncompared | undefined {
  if (!isObject(q)) return undefined;
  if (typeof q.value !== 'number') return { severity: 'warning', why: 'the Quantity has no value' };
  const unitOf = (system: unknown, code: unknown, unit: unknown) => `${typeof code === 'string' ? code : typeof unit === 'string' ? unit : 'no unit'}${typeof system === 'string' ? ` (${system})` : ''}`;
  const unlike = (): Uncompared => ({ severity: 'warning', why: `its unit ${unitOf(q.system, q.code, q.unit)} is not comparable with the bound's ${unitOf(bound.system, bound.code, bound.unit)}` });
  const sameSystem = q.system === bound.system;
  let x = q.value;
  let y = bound.value;
  if (q.code === undefined && bound.code === undefined) {
    if (!sameSystem || q.unit === undefined || q.unit !== bound.unit) return unlike();
  } else if (!(sameSystem && q.code === bound.code)) {
    if (q.system !== UCUM_SYSTEM || bound.system !== UCUM_SYSTEM || typeof q.code !== 'string' || typeof bound.code !== 'string') return unlike();
    const b = canonicalUnit(bound.code);
    if (b === undefined) return { severity: 'warning', why: `the bound's unit ${bound.code} is not a UCUM unit Cinder reads` };
    const a = canonicalUnit(q.code);
    if (a === undefined || a.code !== b.code) return { severity: 'error', why: `its unit ${q.code} cannot be converted to the bound's unit ${bound.code}` };
    x = a.convert(x);
    y = b.convert(y);
  }
  return x < y ? -1 : x > y ? 1 : 0;
}

function collectBinding(run: Run, profile: CompiledProfile, el: ProfileElement, item: Item): void {
  const b = el.binding!;
  const v = item.value;
  let codings: { system?: string; code: string }[];
  const type = item.type ?? el.baseType;
  if (typeof v === 'string') codings = [{ code: v }];
  else if (!isObject(v)) return;
  else if (type === 'Coding') codings = typeof v.code === 'string' ? [{ system: v.system as string, code: v.code }] : [];
  else if (type === 'CodeableConcept') {
    codings = [];
    if (Array.isArray(v.coding)) for (const c of v.coding) if (isObject(c) && typeof c.code === 'string') codings.push({ system: c.system as string, code: c.code });
  } else if (type === 'Quantity') {
    if (typeof v.code !== 'string') return;
    codings = [{ system: v.system as string, code: v.code }];
  } else return;
  run.bindings.push({ expression: pathOf(item), strength: b.strength, valueSet: b.valueSet, codings, where: whereOf(profile, el) });
}

/** The values each discriminator's path reaches from an item, computed on first use and shared by the slices that ask. */
type AtPaths = (Located[] | undefined)[];

/** Assigns each value to its slice, then checks each slice's count and content, closed and ordered slicing. */
function checkSlicing(run: Run, profile: CompiledProfile, el: ProfileElement, items: readonly Item[], parent: Item): void {
  const slicing = el.slicing!;
  const slices = slicing.slices;
  const at = () => `${pathOf(parent)}.${el.name}`;
  // Each value is tested against the slices in turn: values x slices tests, counted against the write's
  // budget (a tenant's snapshot of 30,000 slices and a resource of 3,000 values: 90,000,000).
  if (run.cost.refused !== undefined) return;
  const tests = items.length * slices.length;
  if ((run.cost.budget.left -= tests) < 0) {
    tooCostly(run, at(), `${el.id} (profile ${profile.label}): ${items.length} values sliced among ${slices.length} slices is too costly to check (${tests} tests, past the most ${run.cost.budget.what} may visit, ${run.cost.budget.limit})`);
    return;
  }
  const steps = discriminatorSteps(slicing);
  const assigned: number[] = new Array(items.length);
  // Values whose slice depends on a reference's target the check cannot resolve (a stored resource, targets.ts).
  let undecided = 0;
  for (let j = 0; j < items.length; j++) {
    const item = items[j]!;
    const found: AtPaths = new Array(steps.length);
    let s = 0;
    run.unresolved = false;
    while (s < slices.length && !inSlice(run, item, slices[s]!, steps, found)) s++;
    assigned[j] = s < slices.length ? s : run.unresolved ? UNDECIDED : -1;
    if (assigned[j] === UNDECIDED) undecided++;
  }
  if (undecided > 0) {
    // Counts, closed and ordered slicing cannot be told: they are left out rather than guessed, and $validate says so.
    run.add('warning', 'not-supported', at(), `${el.id} (profile ${profile.label}): the slicing was not evaluated for ${undecided} value(s) whose slice depends on a reference's target Cinder does not resolve (only contained resources and entries of the same Bundle are)`);
  }
  for (let i = 0; i < slices.length; i++) {
    const slice = slices[i]!;
    if (slice.element.card && undecided === 0) {
      let n = 0;
      for (let j = 0; j < items.length; j++) if (assigned[j] === i) n++;
      checkCount(run, profile, slice.element, n, parent, el.name, sliceId(el, slice));
    }
    for (let j = 0; j < items.length; j++) {
      if (assigned[j] !== i) continue;
      checkItem(run, profile, slice.element, items[j]!);
      checkExtension(run, slice, items[j]!);
    }
    // A re-sliced slice (`a:s` with re-slices `a:s/r`): its values are divided among its re-slices, whose counts and closed rules hold within it.
    if (slice.element.slicing) checkSlicing(run, profile, slice.element, items.filter((_, j) => assigned[j] === i), parent);
  }
  if (undecided > 0) return;
  let last = -1;
  let unmatchedSeen = false;
  let names: string | undefined;
  for (let j = 0; j < items.length; j++) {
    const item = items[j]!;
    const s = assigned[j]!;
    if (s < 0) {
      names ??= sliceNames(slices);
      if (slicing.rules === 'closed') run.add('error', 'structure', pathOf(item), `${el.id} (profile ${profile.label}): the value matches none of the slices (${names}) and the slicing is closed`);
      unmatchedSeen = true;
      continue;
    }
    if (slicing.rules === 'openAtEnd' && unmatchedSeen) run.add('error', 'structure', pathOf(item), `${el.id} (profile ${profile.label}): values of no slice must come after those of slice ${slices[s]!.name} (openAtEnd)`);
    if (slicing.ordered && s < last) run.add('error', 'structure', pathOf(item), `${el.id} (profile ${profile.label}): slice ${slices[s]!.name} is out of order (the slicing is ordered)`);
    if (s > last) last = s;
  }
}

/** A slice's element id (`Patient.identifier:mrn`; a re-slice's, `Patient.identifier:mrn/old`). */
function sliceId(el: ProfileElement, slice: Slice): string {
  return slice.name.includes('/') ? `${el.id.slice(0, el.id.lastIndexOf(':'))}:${slice.name}` : `${el.id}:${slice.name}`;
}

/** The slice of a value that depends on a target the check cannot resolve. */
const UNDECIDED = -2;

/** Each discriminator's path compiled to steps, once per slicing. */
const compiledSteps = new WeakMap<Slicing, readonly (readonly Step[])[]>();
function discriminatorSteps(slicing: Slicing): readonly (readonly Step[])[] {
  let steps = compiledSteps.get(slicing);
  if (steps === undefined) compiledSteps.set(slicing, (steps = slicing.discriminators.map((d) => compileSteps(d.path))));
  return steps;
}

/** The slices' names for a message, the first MAX_NAMED of them. */
const MAX_NAMED = 20;
function sliceNames(slices: readonly Slice[]): string {
  const named = slices.slice(0, MAX_NAMED).map((x) => x.name).join(', ');
  return slices.length > MAX_NAMED ? `${named} and ${slices.length - MAX_NAMED} more` : named;
}

function inSlice(run: Run, item: Item, slice: Slice, steps: readonly (readonly Step[])[], found: AtPaths): boolean {
  let said = false;
  const keys = slice.keys;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (key === null) continue;
    said = true;
    const values = (found[i] ??= walkSteps([item.type ? { value: item.value, type: item.type } : { value: item.value }], steps[i]!, run.resolver));
    if (!keyHolds(run, item, values, key)) return false;
  }
  return said;
}

function keyHolds(run: Run, item: Item, values: Located[], key: SliceKey): boolean {
  switch (key.kind) {
    case 'profile':
      return values.some((v) => key.profiles.some((url) => conforms(run, item, v.value, url)));
    case 'fixed':
    case 'pattern': {
      const fixed = key.kind === 'fixed';
      for (const k of key.values) {
        let met = false;
        for (let i = 0; i < values.length && !met; i++) met = fixed ? equalsFixed(values[i]!.value, k) : matchesPattern(values[i]!.value, k);
        if (!met) return false;
      }
      return true;
    }
    case 'exists':
      return values.length > 0 === key.exists;
    case 'types':
      return values.some((v) => v.type !== undefined && (key.types.has(v.type) || (key.profiles?.some((url) => run.lookup(url)?.type === v.type) ?? false)));
    case 'through':
      return throughHolds(run, item, values, key);
  }
}

/**
 * A `type` or `profile` discriminator through `resolve()` and on (`item.resolve().value`), as HL7's validator
 * reads it: the value reached in the held target must have a type (or conform to a profile) that the
 * element at that path has in one of the slice's target profiles (R4's types where the profile leaves
 * them). A value whose JSON name does not tell its type is of its element's one type (only a choice has
 * several). A target profile Cinder does not know admits nothing, with a warning.
 */
function throughHolds(run: Run, item: Item, values: Located[], key: Extract<SliceKey, { kind: 'through' }>): boolean {
  if (values.length === 0) return false;
  for (const url of key.targets) {
    const core = coreType(url);
    const profile = core === undefined ? run.lookup(url) : undefined;
    if (core === undefined && profile === undefined) {
      run.add('warning', 'not-supported', pathOf(item), `The profile ${url}, which chooses a slice here through resolve().${key.path}, is not known to Cinder: no value is taken to conform to it`);
      continue;
    }
    const type = core ?? profile!.type;
    const at = profile?.typesAt.get(key.path);
    if (key.discriminator === 'type') {
      const types = at?.types ?? pathTypes(type, key.path);
      if (values.some((v) => (v.type === undefined ? types.length === 1 : types.includes(v.type)))) return true;
    } else if ((at?.profiles ?? []).some((p) => values.some((v) => conforms(run, item, v.value, p)))) return true;
  }
  return false;
}

/**
 * Whether `value` conforms to the profile `url` (a `profile` discriminator, R4 profiling.html): no error
 * against its compiled rules. Its bindings are left out, as they wait for the terminology; a profile
 * Cinder does not have admits nothing, and `$validate` says so.
 */
function conforms(run: Run, item: Item, value: unknown, url: string): boolean {
  const profile = run.lookup(url);
  if (profile === undefined) {
    run.add('warning', 'not-supported', pathOf(item), `The profile ${url}, which chooses a slice here, is not known to Cinder: no value is taken to conform to it`);
    return false;
  }
  return conformsTo(run, item, value, profile);
}

/**
 * Whether `value` has no error against `profile`'s compiled rules (bindings left out), once per value and
 * profile in a check. A value met again while its own check runs (targets that refer to each other,
 * `Patient.link` both ways) is taken to conform, so that a cycle ends.
 */
function conformsTo(run: Run, item: Item, value: unknown, profile: CompiledProfile): boolean {
  const url = profile.url;
  if (!isObject(value) || (typeof value.resourceType === 'string' && value.resourceType !== profile.type)) return false;
  let memo = run.conformance.get(value);
  if (memo === undefined) run.conformance.set(value, (memo = new Map()));
  let ok = memo.get(url);
  if (ok === undefined) {
    const before = run.cost.refused;
    memo.set(url, true);
    ok = runProfile(new Run(value, run.lookup, run.cost, run.scope, run.conformance), profile, pathOf(item)).issues.every((i) => i.severity !== 'error');
    memo.set(url, ok);
    // The candidate's issues are dropped; an invariant too costly to decide refuses the resource itself.
    if (before === undefined && run.cost.refused !== undefined) run.add('error', 'too-costly', pathOf(item), run.cost.refused);
  }
  return ok;
}

/** The extension definitions a slice's types name, once per slice. */
const sliceExtensions = new WeakMap<Slice, readonly string[]>();

/** An extension of a slice whose definition Cinder has: checked against it (url, value[x] types and binding, nested extensions). */
function checkExtension(run: Run, slice: Slice, item: Item): void {
  let urls = sliceExtensions.get(slice);
  if (urls === undefined) sliceExtensions.set(slice, (urls = (slice.element.types?.flatMap((t) => t.profiles ?? []) ?? []).map((url) => url.split('|')[0]!)));
  for (const url of urls) {
    const ext = run.lookup(url);
    if (ext === undefined) continue;
    checkItem(run, ext, ext.root, { value: item.value, sub: item.sub, type: 'Extension', parent: item.parent, name: item.name, index: item.index, path: item.choice ? pathOf(item) : item.path, choice: item.choice });
    return;
  }
}
