/**
 * The differences between two resources as a FHIRPath Patch (R4 fhirpatch.html), as HAPI FHIR's
 * `$diff` writes them: applied to `from` by a PATCH (src/fhir/patch/), the patch gives `to`.
 *
 * Elements are compared by name (a choice element's JSON names are one element). A primitive that
 * changed is a `replace` (with `previousValue`); a list is aligned (list-align.ts): items changed in
 * place are compared, then items are `insert`ed and `move`d, then `delete`d, last first, each at the
 * index it finds when it applies; a single element only `to` has is an `add`, one only `from` has a `delete`. Within an element, changes
 * come first, then additions, then deletions, so that no element is left empty (and pruned) between
 * two operations. A primitive's id and extensions (JSON's `_name`) travel in the part's `_value[x]`.
 * A primitive with extensions and no value (`_birthDate` alone, or a list's `null` beside its `_given` item)
 * is an element a path reaches, as in FHIRPath's model: added, inserted, replaced and deleted by its
 * `_value[x]` alone, a list's such items aligned, moved and indexed as any. What no path can reach (only in
 * JSON that is not FHIR's: a list's `null` with nothing beside it) is replaced whole with the nearest element
 * holding it.
 */
import { FhirError } from '../../errors.ts';
import { carryLiterals, cloneExact, literalOf, refreshLiterals, setLiteral } from '../exact-json.ts';
import { typeModel, type Slot } from '../validation/model.ts';
import { Hashes, itemIds, type Item } from './item-ids.ts';
import { align, MAX_ALIGN_CELLS, type AlignBudget } from './list-align.ts';

type Json = Record<string, unknown>;
export type Part = Record<string, unknown>;

export interface DiffOptions {
  /** Whether the resources' `meta` is compared (HAPI FHIR's `includeMeta`; default false). */
  includeMeta?: boolean;
}

/** A change no path can reach: the nearest element that can be replaced whole is. */
class Unreachable extends Error {}

/** The types Parameters.parameter.value[x] can carry (R4's open types): other values go as nested parts. */
const VALUE_TYPES: ReadonlySet<string> = new Set(
  [...(typeModel('Parameters.parameter')?.slots.keys() ?? [])].filter((k) => k.startsWith('value')).map((k) => k.slice('value'.length)),
);

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Whether two JSON values are equal, numbers by their text as written (1.0 is not 1.00), members in any order. */
function same(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    return a.every((x, i) => sameAt(a, b, i, x, b[i]));
  }
  if (Array.isArray(b)) return false;
  const ak = Object.keys(a);
  if (ak.length !== Object.keys(b).length) return false;
  return ak.every((k) => Object.hasOwn(b, k) && sameAt(a, b, k, (a as Json)[k], (b as Json)[k]));
}

function sameAt(ah: object, bh: object, k: string | number, x: unknown, y: unknown): boolean {
  if (typeof x === 'number') return x === y && literalOf(ah, k) === literalOf(bh, k);
  return same(x, y);
}

/** Whether two list items are equal with their companions (`_name`'s items), numbers by their text. */
function sameItem(x: Item, y: Item): boolean {
  const a = x.items[x.i];
  const b = y.items[y.i];
  const values = typeof a === 'number' ? a === b && literalOf(x.items, x.i) === literalOf(y.items, y.i) : same(a, b);
  return values && same(x.exts[x.i] ?? null, y.exts[y.i] ?? null);
}

function slotOf(type: string | undefined, key: string): Slot | undefined {
  return type === undefined ? undefined : typeModel(type)?.slots.get(key);
}

function capital(s: string): string {
  return s[0]!.toUpperCase() + s.slice(1);
}

function operation(parts: Part[]): Part {
  return { name: 'operation', part: parts };
}

function code(name: string, value: string): Part {
  return { name, valueCode: value };
}

function str(name: string, value: string): Part {
  return { name, valueString: value };
}

/** The JSON names of `o`'s elements by element name, in order of first appearance (`_x` belongs to `x`). */
function elements(type: string | undefined, o: Json): Map<string, string> {
  const out = new Map<string, string>();
  for (const key of Object.keys(o)) {
    if (key === 'resourceType' || key === 'fhir_comments') continue;
    const base = key.startsWith('_') ? key.slice(1) : key;
    const name = slotOf(type, base)?.element.name ?? base;
    if (!out.has(name) || !key.startsWith('_')) out.set(name, base);
  }
  return out;
}

/**
 * The values of element `key` of `o` when it is a list, each with its companion (`_key`'s item): the values
 * of a list of primitives may be written as its companion alone (`_given` without `given`), all `null`.
 */
function listOf(o: Json, key: string): { values: unknown[]; exts: unknown[] } | undefined {
  const v = o[key];
  const ext = o['_' + key];
  const exts = Array.isArray(ext) ? ext : [];
  if (Array.isArray(v)) return { values: v, exts };
  return (v === undefined || v === null) && Array.isArray(ext) ? { values: ext.map(() => null), exts } : undefined;
}

/** Whether an item of a list of primitives is neither a value nor a companion: JSON no path reaches. */
function hasHole(values: unknown[], exts: unknown[]): boolean {
  return values.some((v, i) => v === null && !isObject(exts[i]));
}

/** A part named `name` with `fields` (valueFields'), keeping the literal of a decimal among them (a spread alone drops it). */
const named = (name: string, fields: Part): Part => carryLiterals(fields, { name, ...fields });

/** The part fields (value[x], `resource`, or nested parts) carrying `value` of element `key` of a `type`. */
export function valueFields(type: string | undefined, key: string, value: unknown, ext: unknown, literal?: string): Part {
  if (value === null || value === undefined) throw new Unreachable();
  if (isObject(value) && typeof value.resourceType === 'string') return { resource: cloneExact(value) };
  const slot = slotOf(type, key);
  const valueType = slot?.type ?? guessType(value);
  if (!isObject(value)) {
    const suffix = slot?.element.choice ? key.slice(slot.element.name.length) : valueType === 'xhtml' ? 'String' : capital(valueType);
    const out: Part = { ['value' + suffix]: value };
    if (literal !== undefined) setLiteral(out, 'value' + suffix, literal);
    if (isObject(ext)) out['_value' + suffix] = cloneExact(ext);
    return out;
  }
  const suffix = slot?.element.choice ? key.slice(slot.element.name.length) : capital(valueType);
  if (VALUE_TYPES.has(suffix)) return { ['value' + suffix]: cloneExact(value) };
  return { part: nestedParts(slot?.type ?? valueType, value) };
}

/** A value of a type no value[x] carries (a backbone element, Narrative, Extension) as parts, one per element value. */
function nestedParts(type: string, value: Json): Part[] {
  const parts: Part[] = [];
  for (const [name, key] of elements(type, value)) {
    const list = listOf(value, key);
    if (list !== undefined) {
      const { values, exts } = list;
      values.forEach((item, i) => parts.push(named(name, nestedValue(type, key, item, exts[i], literalOf(values, i)))));
    } else parts.push(named(name, nestedValue(type, key, value[key], value['_' + key], literalOf(value, key))));
  }
  return parts;
}

/** A nested part's value: as valueFields, or a primitive with extensions and no value as its `_value[x]` alone. */
function nestedValue(type: string | undefined, key: string, value: unknown, ext: unknown, literal: string | undefined): Part {
  if ((value !== null && value !== undefined) || !isObject(ext)) return valueFields(type, key, value, ext, literal);
  const slot = slotOf(type, key);
  if (slot === undefined) throw new Unreachable();
  return { ['_value' + (slot.element.choice ? key.slice(slot.element.name.length) : capital(slot.type))]: cloneExact(ext) };
}

function guessType(value: unknown): string {
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'decimal';
  return typeof value === 'string' ? 'string' : 'Element';
}

/**
 * The most operations one diff may hold. A diff costs time and memory in proportion to what it writes, and
 * each operation (a path, a value, its previous value) is many times the bytes of the value it changes: two
 * versions of a resource at the body limit differing in every item of a long list would be answered with
 * hundreds of megabytes. Past it the diff is a 422 (too-costly).
 */
export const MAX_DIFF_OPERATIONS = 100_000;

/**
 * What one diff may still write (MAX_DIFF_OPERATIONS) and align (list-align.ts), and the hashes of its values
 * (item-ids.ts, each object's computed once), shared by the Ops of its nested comparisons.
 */
interface Budget extends AlignBudget {
  left: number;
  readonly hashes: Hashes;
}

/** Collects the operations of one comparison, changes first, then additions, then deletions. */
class Ops {
  readonly changes: Part[] = [];
  readonly additions: Part[] = [];
  readonly deletions: Part[] = [];
  constructor(readonly budget: Budget) {}
  change(p: Part): void {
    this.changes.push(this.counted(p));
  }
  addition(p: Part): void {
    this.additions.push(this.counted(p));
  }
  deletion(p: Part): void {
    this.deletions.push(this.counted(p));
  }
  /** The operations of a nested comparison, counted when it made them, as changes here (one by one: a spread of many overflows the stack). */
  take(inner: Ops): void {
    for (const p of inner.all()) this.changes.push(p);
  }
  all(): Part[] {
    return [...this.changes, ...this.additions, ...this.deletions];
  }
  private counted(p: Part): Part {
    if (--this.budget.left < 0) {
      throw new FhirError('unprocessable', `The difference holds more than ${MAX_DIFF_OPERATIONS} operations: compare the versions otherwise (read both)`, { issueCode: 'too-costly' });
    }
    return p;
  }
}

function replace(path: string, type: string | undefined, key: string, holder: Json | unknown[], at: string | number, before: unknown, value: unknown, ext: unknown, previousKey: string, previousLiteral: string | undefined): Part {
  const parts = [code('type', 'replace'), str('path', path), named('value', nestedValue(type, key, value, ext, literalOf(holder, at)))];
  try {
    parts.splice(2, 0, named('previousValue', valueFields(type, previousKey, before, undefined, previousLiteral)));
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err;
  }
  return operation(parts);
}

function remove(path: string, type: string | undefined, key: string, before: unknown, literal: string | undefined): Part {
  const parts: Part[] = [code('type', 'delete'), str('path', path)];
  try {
    parts.push(named('previousValue', valueFields(type, key, before, undefined, literal)));
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err;
  }
  return operation(parts);
}

/** Compares objects `a` and `b` of type `type` at `path`, adding its operations to `ops`. */
function compareObject(ops: Ops, path: string, type: string | undefined, a: Json, b: Json, skip: ReadonlySet<string>): void {
  const as = elements(type, a);
  const bs = elements(type, b);
  for (const name of new Set([...as.keys(), ...bs.keys()])) {
    if (skip.has(name)) continue;
    const ak = as.get(name);
    const bk = bs.get(name);
    const at = `${path}.${name}`;
    if (ak === undefined) add(ops, path, at, type, name, b, bk!);
    else if (bk === undefined) removeAll(ops, at, type, a, ak);
    else compareElement(ops, path, name, type, a, ak, b, bk);
  }
}

function add(ops: Ops, path: string, at: string, type: string | undefined, name: string, b: Json, key: string): void {
  const v = b[key];
  const ext = b['_' + key];
  const list = listOf(b, key);
  if (list !== undefined) {
    const { values, exts } = list;
    if (hasHole(values, exts)) throw new Unreachable();
    values.forEach((item, i) => {
      ops.addition(operation([code('type', 'insert'), str('path', at), { name: 'index', valueInteger: i }, named('value', nestedValue(type, key, item, exts[i], literalOf(values, i)))]));
    });
  } else {
    // A primitive with extensions and no value is added as its `_value[x]` alone.
    ops.addition(operation([code('type', 'add'), str('path', path), str('name', name), named('value', nestedValue(type, key, v, ext, literalOf(b, key)))]));
  }
}

function removeAll(ops: Ops, at: string, type: string | undefined, a: Json, key: string): void {
  const v = a[key];
  const list = listOf(a, key);
  if (list !== undefined) {
    const { values, exts } = list;
    if (hasHole(values, exts)) throw new Unreachable();
    for (let i = values.length - 1; i >= 0; i--) ops.deletion(remove(`${at}[${i}]`, type, key, values[i], literalOf(values, i)));
  } else if (v === null) throw new Unreachable();
  else ops.deletion(remove(at, type, key, v, literalOf(a, key)));
}

function compareElement(ops: Ops, path: string, name: string, type: string | undefined, a: Json, ak: string, b: Json, bk: string): void {
  const at = `${path}.${name}`;
  const av = a[ak];
  const bv = b[bk];
  const ae = a['_' + ak];
  const be = b['_' + bk];
  const al = listOf(a, ak);
  const bl = listOf(b, bk);
  if (al !== undefined || bl !== undefined) {
    if (al === undefined || bl === undefined) throw new Unreachable();
    return compareList(ops, at, type, ak, al.values, al.exts, bl.values, bl.exts);
  }
  if (av === undefined || bv === undefined || av === null || bv === null) {
    if (ak === bk && same(av, bv) && same(ae, be)) return;
    if (av === null || bv === null) throw new Unreachable();
    return compareBare(ops, path, name, type, ak, ae, b, bk, bv, be);
  }
  if (ak !== bk) {
    ops.change(replace(at, type, bk, b, bk, av, bv, be, ak, literalOf(a, ak)));
    return;
  }
  compareValue(ops, at, type, ak, a, ak, av, ae, b, bv, be);
}

/**
 * A single primitive that has extensions and no value on one side at least (`_birthDate` alone), which a
 * path reaches as FHIRPath's model has it: given a value and keeping its extensions, an `add` of the value
 * (which keeps them); otherwise a `replace` of the element whole, by its `_value[x]` alone when the
 * to-version has no value.
 */
function compareBare(ops: Ops, path: string, name: string, type: string | undefined, ak: string, ae: unknown, b: Json, bk: string, bv: unknown, be: unknown): void {
  if (bv !== undefined && ak === bk && same(ae, be) && !Array.isArray(bv)) {
    ops.change(operation([code('type', 'add'), str('path', path), str('name', name), named('value', valueFields(type, bk, bv, undefined, literalOf(b, bk)))]));
    return;
  }
  const value = nestedValue(type, bk, bv, be, literalOf(b, bk));
  ops.change(operation([code('type', 'replace'), str('path', `${path}.${name}`), { name: 'value', ...value }]));
}

/**
 * Two lists of element `key`, aligned (list-align.ts): the items changed in place compared at their
 * from-indexes, then the inserts and moves as they apply in order (additions), then the deletes, last
 * first (deletions), so that the list is never emptied (and pruned) between two operations.
 */
function compareList(ops: Ops, at: string, type: string | undefined, key: string, av: unknown[], ae: unknown[], bv: unknown[], be: unknown[]): void {
  if (hasHole(av, ae) || hasHole(bv, be)) {
    if (same(av, bv) && same(ae, be)) return;
    throw new Unreachable();
  }
  const ids = itemIds(ops.budget.hashes, { items: av, exts: ae }, { items: bv, exts: be }, sameItem);
  const { changed, steps } = align(ids.a, ids.b, ops.budget);
  for (const [i, j] of changed) compareValue(ops, `${at}[${i}]`, type, key, av, i, av[i], ae[i] ?? undefined, bv, bv[j], be[j] ?? undefined, j);
  for (const step of steps) {
    if (step.kind === 'insert') {
      const { j, index } = step;
      ops.addition(operation([code('type', 'insert'), str('path', at), { name: 'index', valueInteger: index }, named('value', nestedValue(type, key, bv[j], be[j] ?? undefined, literalOf(bv, j)))]));
    } else if (step.kind === 'move') {
      ops.addition(operation([code('type', 'move'), str('path', at), { name: 'source', valueInteger: step.source }, { name: 'destination', valueInteger: step.destination }]));
    } else ops.deletion(remove(`${at}[${step.index}]`, type, key, av[step.i], literalOf(av, step.i)));
  }
}

/** One value of element `key` (a list's item, or a single value) in both resources. */
function compareValue(
  ops: Ops, at: string, type: string | undefined, key: string,
  aHolder: Json | unknown[], aAt: string | number, av: unknown, ae: unknown, bHolder: Json | unknown[], bv: unknown, be: unknown,
  bIndex?: number,
): void {
  // Where the to-value sits in its holder: a list's item may stand at another index than the from-value.
  const bAt = bIndex ?? (typeof aAt === 'number' ? aAt : key);
  if (isObject(av) && isObject(bv)) {
    // Unequal hashes: not the same, without walking both (at each level of nested elements, all below it).
    if (ops.budget.hashes.of(av) === ops.budget.hashes.of(bv) && same(av, bv)) return;
    const childType = typeof bv.resourceType === 'string' ? (av.resourceType === bv.resourceType ? bv.resourceType : undefined) : slotOf(type, key)?.type;
    if (childType !== undefined) {
      const inner = new Ops(ops.budget);
      try {
        compareObject(inner, at, childType, av, bv, new Set());
        ops.take(inner);
        return;
      } catch (err) {
        if (!(err instanceof Unreachable)) throw err;
      }
    }
  } else if (av === bv && literalOf(aHolder, aAt) === literalOf(bHolder, bAt) && same(ae ?? null, be ?? null)) return;
  ops.change(replace(at, type, key, bHolder, bAt, av, bv, be, key, literalOf(aHolder, aAt)));
}

/**
 * The FHIRPath Patch Parameters that turns `from` into `to` (two resources of one type); `meta` is
 * compared only with `includeMeta`. A change that no operation can make is a 422: only JSON that is not
 * FHIR's reaches it (a `null` with nothing beside it in a list directly on the resource).
 */
export function diffResources(from: Json, to: Json, options: DiffOptions = {}): Json {
  const type = typeof to.resourceType === 'string' ? to.resourceType : undefined;
  const ops = new Ops({ left: MAX_DIFF_OPERATIONS, cells: MAX_ALIGN_CELLS, hashes: new Hashes() });
  try {
    compareObject(ops, type ?? 'Resource', type, from, to, new Set(options.includeMeta ? [] : ['meta']));
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err;
    throw new FhirError('unprocessable', `The difference between these versions holds a change to an element of ${type} that a FHIRPath Patch cannot address (an item of a list of primitives directly on the resource that is null and has no id or extension)`);
  }
  const parameter = ops.all();
  if (parameter.length === 0) return { resourceType: 'Parameters' };
  const out = { resourceType: 'Parameters', parameter };
  // The parts hold decimals' literals (`1.50`, valueFields); the holders above them are marked so that stringifyExact writes them.
  refreshLiterals(out);
  return out;
}
