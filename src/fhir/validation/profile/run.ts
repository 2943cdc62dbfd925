/**
 * Checks a resource against a CompiledProfile (R4 profiling.html): cardinality, types and Reference
 * targets, fixed and pattern values, maxLength, minValue/maxValue, invariants and slicing, each problem
 * at its FHIRPath location in the base validator's style (`Observation.category[0]`,
 * `Observation.value.ofType(Quantity)`). Bindings are collected, to be decided by the terminology
 * (profile-check.ts), since a profile may bind value sets the base table does not hold.
 */
import { FhirPathTooCostly } from '../fhirpath-engine.ts';
import type { ValidationIssue } from '../validate.ts';
import type { CompiledProfile, ProfileElement, Slice, SliceKey } from './compiled.ts';
import { choiceKey, equalsFixed, matchesPattern, typeOfSuffix, valuesAt, type Located } from './paths.ts';

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
}

export function profileCost(limit = PROFILE_VISITS): ProfileCost {
  return { budget: { left: limit, limit, what: "the profile invariants of one write or $validate" } };
}

/** A profile (or extension definition) by canonical URL, as loaded for this check; undefined when unknown. */
export type ProfileLookup = (url: string) => CompiledProfile | undefined;

interface Item {
  /** The value (a primitive's value, or the object). */
  value: unknown;
  /** The object holding its children: the value itself, or a primitive's `_name` object. */
  sub: Json | undefined;
  type: string | undefined;
  path: string;
}

class Run {
  readonly issues: ValidationIssue[] = [];
  readonly bindings: PendingBinding[] = [];
  readonly memo = new Map<object, unknown>();
  /** Whether a value conforms to a profile, once per value and profile (a `profile` discriminator asks for each slice). */
  readonly conformance = new WeakMap<object, Map<string, boolean>>();
  constructor(readonly resource: Json, readonly lookup: ProfileLookup, readonly cost: ProfileCost) {}
  add(severity: 'error' | 'warning', code: ValidationIssue['code'], expression: string, text: string): void {
    this.issues.push({ severity, code, expression, text });
  }
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The problems of `resource` (at `path`, its FHIRPath: `Bundle.entry[0].resource` or its type) against `profile`. */
export function checkProfile(resource: Json, profile: CompiledProfile, lookup: ProfileLookup, path = profile.type, cost = profileCost()): ProfileResult {
  const run = new Run(resource, lookup, cost);
  const item: Item = { value: resource, sub: resource, type: profile.type, path };
  checkItem(run, profile, profile.root, item);
  return { issues: run.issues, bindings: run.bindings };
}

/** The values of `el` in `obj`, each with its location. */
function itemsOf(obj: Json, el: ProfileElement, path: string): Item[] {
  let key: string | undefined = el.name;
  let type = el.baseType;
  let step = el.name;
  if (el.choice) {
    key = choiceKey(obj, el.name);
    if (key === undefined) return [];
    type = typeOfSuffix(key.slice(el.name.length));
    step = `${el.name}.ofType(${type[0]!.toUpperCase()}${type.slice(1)})`;
  }
  const v = obj[key];
  const ext = obj[`_${key}`];
  if (v === undefined && ext === undefined) return [];
  const at = `${path}.${step}`;
  if (Array.isArray(v) || (v === undefined && Array.isArray(ext))) {
    const n = Math.max(Array.isArray(v) ? v.length : 0, Array.isArray(ext) ? ext.length : 0);
    const out: Item[] = [];
    for (let i = 0; i < n; i++) {
      const value = Array.isArray(v) ? v[i] : undefined;
      const e = Array.isArray(ext) ? ext[i] : undefined;
      out.push({ value, sub: isObject(value) ? value : isObject(e) ? e : undefined, type, path: `${at}[${i}]` });
    }
    return out;
  }
  return [{ value: v, sub: isObject(v) ? v : isObject(ext) ? ext : undefined, type, path: at }];
}

function checkElement(run: Run, profile: CompiledProfile, el: ProfileElement, obj: Json, path: string): void {
  const items = itemsOf(obj, el, path);
  if (el.card) checkCount(run, profile, el, items.length, `${path}.${el.name}`, el.id);
  for (const item of items) checkItem(run, profile, el, item);
  if (el.slicing) checkSlicing(run, profile, el, items, `${path}.${el.name}`);
}

/** An invariant that cannot be evaluated is an error: the write is refused rather than taken as conforming. */
function tooCostly(run: Run, expression: string, text: string): void {
  run.cost.refused = text;
  run.add('error', 'too-costly', expression, text);
}

function checkCount(run: Run, profile: CompiledProfile, el: ProfileElement, n: number, expression: string, what: string): void {
  const { min, max } = el.card!;
  if (n < min) run.add('error', 'required', expression, `${what}: at least ${min} required by the profile ${profile.label}, found ${n}`);
  else if (n > max) run.add('error', 'structure', expression, max === 0 ? `${what}: not allowed by the profile ${profile.label}` : `${what}: at most ${max} allowed by the profile ${profile.label}, found ${n}`);
}

function checkItem(run: Run, profile: CompiledProfile, el: ProfileElement, item: Item): void {
  const where = `${el.id} (profile ${profile.label})`;
  if (el.types && item.type !== undefined && el.choice && !el.types.some((t) => t.code === item.type)) {
    run.add('error', 'structure', item.path, `${where}: type ${item.type} is not allowed; expected ${el.types.map((t) => t.code).join(', ')}`);
  }
  if (el.types && isObject(item.value)) checkTargets(run, el, item, where);
  if (el.fixed !== undefined && !equalsFixed(item.value, el.fixed)) run.add('error', 'value', item.path, `${where}: the value must be exactly ${JSON.stringify(el.fixed)}`);
  if (el.pattern !== undefined && !matchesPattern(item.value, el.pattern)) run.add('error', 'value', item.path, `${where}: the value must match the pattern ${JSON.stringify(el.pattern)}`);
  if (el.maxLength !== undefined && typeof item.value === 'string' && [...item.value].length > el.maxLength) run.add('error', 'value', item.path, `${where}: longer than ${el.maxLength} characters`);
  checkBounds(run, el, item, where);
  if (el.binding) collectBinding(run, el, item, where);
  // Once an invariant proved too costly (one error says so), the others of the write are not evaluated.
  if (el.constraints && run.cost.refused === undefined) {
    const ctx = { resource: run.resource, rootResource: run.resource, memo: run.memo, budget: run.cost.budget };
    for (const c of el.constraints) {
      let holds: boolean;
      try {
        holds = c.fn(item.value, item.type, ctx);
      } catch (err) {
        if (!(err instanceof FhirPathTooCostly)) throw err;
        tooCostly(run, item.path, `${where}: the invariant ${c.key} cannot be evaluated: ${err.message}`);
        break;
      }
      if (!holds) run.add(c.severity, 'invariant', item.path, `${where}: ${c.human} (${c.key})`);
    }
  }
  if (item.sub !== undefined) for (const child of el.children) checkElement(run, profile, child, item.sub, item.path);
}

/** A Reference's target type, where the reference is literal (`Type/id`, a URL ending so, or `#id` of a contained resource). */
function checkTargets(run: Run, el: ProfileElement, item: Item, where: string): void {
  const rule = el.types!.find((t) => t.code === 'Reference' && t.targets);
  if (rule === undefined || (item.type !== undefined && item.type !== 'Reference')) return;
  const ref = (item.value as Json).reference;
  if (typeof ref !== 'string') return;
  let type: string | undefined;
  if (ref.startsWith('#')) {
    const found = (Array.isArray(run.resource.contained) ? run.resource.contained : []).find((c) => isObject(c) && c.id === ref.slice(1)) as Json | undefined;
    type = typeof found?.resourceType === 'string' ? found.resourceType : undefined;
  } else {
    const m = /(?:^|\/)([A-Z][A-Za-z]+)\/[A-Za-z0-9\-.]{1,64}(\/_history\/[A-Za-z0-9\-.]{1,64})?$/.exec(ref);
    type = m?.[1];
  }
  if (type !== undefined && !rule.targets!.has(type)) {
    run.add('error', 'structure', `${item.path}.reference`, `${where}: a reference to ${type} is not allowed; expected ${[...rule.targets!].join(', ')}`);
  }
}

function checkBounds(run: Run, el: ProfileElement, item: Item, where: string): void {
  const v = isObject(item.value) && 'value' in item.value ? item.value.value : item.value;
  if (el.minValue !== undefined && typeof v === typeof el.minValue && (v as number | string) < el.minValue) run.add('error', 'value', item.path, `${where}: below the minimum ${el.minValue}`);
  if (el.maxValue !== undefined && typeof v === typeof el.maxValue && (v as number | string) > el.maxValue) run.add('error', 'value', item.path, `${where}: above the maximum ${el.maxValue}`);
}

function collectBinding(run: Run, el: ProfileElement, item: Item, where: string): void {
  const b = el.binding!;
  const v = item.value;
  let codings: { system?: string; code: string }[];
  const type = item.type ?? el.baseType;
  if (typeof v === 'string') codings = [{ code: v }];
  else if (!isObject(v)) return;
  else if (type === 'Coding') codings = typeof v.code === 'string' ? [{ system: v.system as string, code: v.code }] : [];
  else if (type === 'CodeableConcept') codings = (Array.isArray(v.coding) ? v.coding : []).filter((c): c is Json => isObject(c) && typeof c.code === 'string').map((c) => ({ system: c.system as string, code: c.code as string }));
  else if (type === 'Quantity') {
    if (typeof v.code !== 'string') return;
    codings = [{ system: v.system as string, code: v.code }];
  } else return;
  run.bindings.push({ expression: item.path, strength: b.strength, valueSet: b.valueSet, codings, where });
}

/** Assigns each value to its slice, then checks each slice's count and content, closed and ordered slicing. */
function checkSlicing(run: Run, profile: CompiledProfile, el: ProfileElement, items: Item[], at: string): void {
  const slicing = el.slicing!;
  // Each value is tested against the slices in turn: values x slices tests, counted against the write's
  // budget (a tenant's snapshot of 30,000 slices and a resource of 3,000 values: 90,000,000).
  if (run.cost.refused !== undefined) return;
  const tests = items.length * slicing.slices.length;
  if ((run.cost.budget.left -= tests) < 0) {
    tooCostly(run, at, `${el.id} (profile ${profile.label}): ${items.length} values sliced among ${slicing.slices.length} slices is too costly to check (${tests} tests, past the most ${run.cost.budget.what} may visit, ${run.cost.budget.limit})`);
    return;
  }
  const paths = slicing.discriminators.map((d) => d.path);
  const assigned = items.map((item) => slicing.slices.findIndex((s) => inSlice(run, item, s, paths)));
  const members: Item[][] = slicing.slices.map(() => []);
  for (const [j, item] of items.entries()) if (assigned[j]! >= 0) members[assigned[j]!]!.push(item);
  for (const [i, slice] of slicing.slices.entries()) {
    if (slice.element.card) checkCount(run, profile, slice.element, members[i]!.length, at, `${el.id}:${slice.name}`);
    for (const item of members[i]!) {
      checkItem(run, profile, slice.element, item);
      checkExtension(run, slice, item);
    }
  }
  let last = -1;
  let unmatchedSeen = false;
  let names: string | undefined;
  for (const [j, item] of items.entries()) {
    const s = assigned[j]!;
    if (s < 0) {
      names ??= sliceNames(slicing.slices);
      if (slicing.rules === 'closed') run.add('error', 'structure', item.path, `${el.id} (profile ${profile.label}): the value matches none of the slices (${names}) and the slicing is closed`);
      unmatchedSeen = true;
      continue;
    }
    if (slicing.rules === 'openAtEnd' && unmatchedSeen) run.add('error', 'structure', item.path, `${el.id} (profile ${profile.label}): values of no slice must come after those of slice ${slicing.slices[s]!.name} (openAtEnd)`);
    if (slicing.ordered && s < last) run.add('error', 'structure', item.path, `${el.id} (profile ${profile.label}): slice ${slicing.slices[s]!.name} is out of order (the slicing is ordered)`);
    last = Math.max(last, s);
  }
}

/** The slices' names for a message, the first MAX_NAMED of them. */
const MAX_NAMED = 20;
function sliceNames(slices: readonly Slice[]): string {
  const named = slices.slice(0, MAX_NAMED).map((x) => x.name).join(', ');
  return slices.length > MAX_NAMED ? `${named} and ${slices.length - MAX_NAMED} more` : named;
}

function inSlice(run: Run, item: Item, slice: Slice, paths: (readonly string[])[]): boolean {
  let said = false;
  for (const [i, key] of slice.keys.entries()) {
    if (key === null) continue;
    said = true;
    if (!keyHolds(run, item, valuesAt([{ value: item.value, ...(item.type ? { type: item.type } : {}) }], paths[i]!), key)) return false;
  }
  return said;
}

function keyHolds(run: Run, item: Item, values: Located[], key: SliceKey): boolean {
  switch (key.kind) {
    case 'profile':
      return values.some((v) => key.profiles.some((url) => conforms(run, item, v.value, url)));
    case 'fixed':
      return key.values.every((k) => values.some((v) => equalsFixed(v.value, k)));
    case 'pattern':
      return key.values.every((k) => values.some((v) => matchesPattern(v.value, k)));
    case 'exists':
      return values.length > 0 === key.exists;
    case 'types':
      return values.some((v) => v.type !== undefined && key.types.has(v.type));
  }
}

/**
 * Whether `value` conforms to the profile `url` (a `profile` discriminator, R4 profiling.html): no error
 * against its compiled rules. Its bindings are left out, as they wait for the terminology; a profile
 * Cinder does not have admits nothing, and `$validate` says so.
 */
function conforms(run: Run, item: Item, value: unknown, url: string): boolean {
  const profile = run.lookup(url);
  if (profile === undefined) {
    run.add('warning', 'not-supported', item.path, `The profile ${url}, which chooses a slice here, is not known to Cinder: no value is taken to conform to it`);
    return false;
  }
  if (!isObject(value) || (typeof value.resourceType === 'string' && value.resourceType !== profile.type)) return false;
  let memo = run.conformance.get(value);
  if (memo === undefined) run.conformance.set(value, (memo = new Map()));
  let ok = memo.get(url);
  if (ok === undefined) {
    const before = run.cost.refused;
    ok = checkProfile(value, profile, run.lookup, item.path, run.cost).issues.every((i) => i.severity !== 'error');
    memo.set(url, ok);
    // The candidate's issues are dropped; an invariant too costly to decide refuses the resource itself.
    if (before === undefined && run.cost.refused !== undefined) run.add('error', 'too-costly', item.path, run.cost.refused);
  }
  return ok;
}

/** An extension of a slice whose definition Cinder has: checked against it (url, value[x] types and binding, nested extensions). */
function checkExtension(run: Run, slice: Slice, item: Item): void {
  const urls = slice.element.types?.flatMap((t) => t.profiles ?? []) ?? [];
  for (const url of urls) {
    const ext = run.lookup(url.split('|')[0]!);
    if (ext === undefined) continue;
    checkItem(run, ext, ext.root, { ...item, type: 'Extension' });
    return;
  }
}
