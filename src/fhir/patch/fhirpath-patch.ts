/**
 * FHIRPath Patch (FHIR R4 fhirpatch.html): a Parameters resource whose `operation` parameters add,
 * insert, delete, replace or move elements found by FHIRPath paths. A Parameters that is not a patch is
 * a 400 `structure`; an operation that cannot be applied is a 400 `processing`; both name the
 * parameter (`Parameters.parameter[1]`).
 */
import type { Clock } from '../../clock.ts';
import { FhirError } from '../../errors.ts';
import { cloneExact, setLiteral, spliceExact } from '../exact-json.ts';
import { elementType, typeModel } from '../validation/model.ts';
import { children, companionOf, compilePath, ELEMENT_MODEL, PatchPathError, type CompiledPath, type Json, type Located } from './patch-path.ts';
import { jsonNameFor, partValue, PatchValueError, putExt, repeats, valueMember, valuePartProblem } from './patch-value.ts';
import { createListState, moveBoth, prune, spliceBoth, valuesOf, type ListState } from './primitive-lists.ts';

export type FhirPathPatchOperation =
  | { type: 'add'; path: CompiledPath; name: string; value: Json }
  | { type: 'insert'; path: CompiledPath; value: Json; index: number }
  | { type: 'delete'; path: CompiledPath }
  | { type: 'replace'; path: CompiledPath; value: Json }
  | { type: 'move'; path: CompiledPath; source: number; destination: number };

const TYPES = ['add', 'insert', 'delete', 'replace', 'move'];
const PARTS: Record<string, string[]> = {
  add: ['type', 'path', 'name', 'value'],
  insert: ['type', 'path', 'value', 'index'],
  delete: ['type', 'path'],
  replace: ['type', 'path', 'value'],
  move: ['type', 'path', 'source', 'destination'],
};
/**
 * Parts an operation may carry that do not change what it does: `previousValue`, the value a
 * replace or delete changes, as `$diff` (src/fhir/diff/) and HAPI FHIR's diff write it.
 */
const INFORMATIONAL: Record<string, string[]> = { replace: ['previousValue'], delete: ['previousValue'] };

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function at(index: number): string {
  return `Parameters.parameter[${index}]`;
}

function malformed(index: number, message: string): never {
  throw new FhirError('structure', `${at(index)}: ${message}`, { expression: [at(index)] });
}

/** Checks that `body` is a FHIRPath Patch Parameters and returns its operations (paths compiled). */
export function parseFhirPathPatch(body: Json): FhirPathPatchOperation[] {
  const params = body.parameter ?? [];
  if (!Array.isArray(params)) throw new FhirError('structure', 'Parameters.parameter must be a list', { expression: ['Parameters.parameter'] });
  return params.map((raw, i) => parseOperation(raw, i));
}

function parseOperation(raw: unknown, i: number): FhirPathPatchOperation {
  if (!isObject(raw) || raw.name !== 'operation') malformed(i, "each parameter of a FHIRPath Patch must be named 'operation'");
  if (!Array.isArray(raw.part)) malformed(i, "an 'operation' needs its parts (type, path, ...)");
  const parts = new Map<string, Json>();
  for (const p of raw.part) {
    if (!isObject(p) || typeof p.name !== 'string') malformed(i, 'a part has no name');
    if (parts.has(p.name)) malformed(i, `part '${p.name}' is given twice`);
    parts.set(p.name, p);
  }
  const type = primitive(parts, 'type', i);
  if (typeof type !== 'string' || !TYPES.includes(type)) malformed(i, `type must be one of ${TYPES.join(', ')}; got ${JSON.stringify(type)}`);
  const allowed = PARTS[type]!;
  const optional = INFORMATIONAL[type] ?? [];
  for (const name of parts.keys()) if (!allowed.includes(name) && !optional.includes(name)) malformed(i, `'${name}' is not a part of a ${type} operation (${[...allowed, ...optional].join(', ')})`);
  for (const name of allowed) if (!parts.has(name)) malformed(i, `a ${type} operation needs '${name}'`);
  const pathText = primitive(parts, 'path', i);
  if (typeof pathText !== 'string' || pathText.trim() === '') malformed(i, 'path must be a non-empty string');
  let path: CompiledPath;
  try {
    path = compilePath(pathText);
  } catch (err) {
    if (!(err instanceof PatchPathError)) throw err;
    throw new FhirError('not-supported', `${at(i)}: path '${pathText}' cannot be used: ${err.message}`, { expression: [at(i)] });
  }
  if (parts.has('value')) checkValuePart(parts.get('value')!, i);
  switch (type) {
    case 'add': {
      const name = primitive(parts, 'name', i);
      if (typeof name !== 'string' || name === '') malformed(i, 'name must be a non-empty string');
      return { type, path, name, value: parts.get('value')! };
    }
    case 'insert':
      return { type, path, value: parts.get('value')!, index: integer(parts, 'index', i) };
    case 'delete':
      return { type, path };
    case 'replace':
      return { type, path, value: parts.get('value')! };
    default:
      return { type: 'move', path, source: integer(parts, 'source', i), destination: integer(parts, 'destination', i) };
  }
}

/**
 * A `value` part must be FHIR JSON (json.html): no `null` for a property, no empty object or array, no array
 * of `null`s alone, and a `_value[x]` an object holding an id or extensions. What a patch would otherwise do
 * with such a value (an item that is pruned away, `valueString: null` deleting the element it replaces) is
 * no meaning fhirpatch.html gives it, so it is refused as a malformed part, naming the parameter.
 */
function checkValuePart(part: Json, i: number): void {
  const problem = valuePartProblem(part, 'value');
  if (problem !== undefined) malformed(i, `part ${problem}; FHIR JSON has no null properties, empty objects or empty lists (leave it out, or use delete)`);
}

/** The primitive value[x] of part `name`. */
function primitive(parts: Map<string, Json>, name: string, i: number): unknown {
  const p = parts.get(name);
  if (p === undefined) malformed(i, `'${name}' is required`);
  try {
    return valueMember(p)?.value;
  } catch (err) {
    if (err instanceof PatchValueError) malformed(i, `part '${name}' ${err.message}`);
    throw err;
  }
}

function integer(parts: Map<string, Json>, name: string, i: number): number {
  const v = primitive(parts, name, i);
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) malformed(i, `${name} must be a non-negative integer`);
  return v;
}

/** An operation that cannot be applied to this resource. */
class Failure extends Error {}

function one(items: Located[], op: FhirPathPatchOperation, what: string): Located {
  if (items.length === 0) throw new Failure(`no content found at ${op.path.expression} when ${what}`);
  if (items.length > 1) throw new Failure(`${op.path.expression} selects ${items.length} elements; ${what} needs exactly one`);
  return items[0]!;
}

/**
 * The value of an operation's `value` part. One with only `_value[x]` (a primitive's id or extensions and no
 * value) makes such a primitive, a single element or a list item (JSON's `null` beside its `_name` entry),
 * which paths select as FHIRPath's model has it.
 */
function valueFor(op: { value: Json }, type: string | undefined) {
  try {
    const value = partValue(op.value, type);
    // Only a primitive has a value besides its id and extensions: a complex type's are its elements.
    if (value.json === null && type !== undefined && typeModel(type) !== null) throw new PatchValueError(`has only _value[x], but a ${type} is not a primitive`);
    return value;
  } catch (err) {
    if (err instanceof PatchValueError) throw new Failure(`the value ${err.message}`);
    throw err;
  }
}

function nameFor(owner: string | undefined, name: string, suffix: string | undefined): string {
  try {
    return jsonNameFor(owner, name, suffix);
  } catch (err) {
    if (err instanceof PatchValueError) throw new Failure(err.message);
    throw err;
  }
}

/**
 * The object that holds the children of `target` (an element, or a primitive's companion for its `id` and
 * `extension`, made when `name` is one of those and it has none yet) and that object's model type.
 */
function holderOf(state: ListState, target: Located, name: string, op: FhirPathPatchOperation): { holder: Json; type: string | undefined } {
  if (isObject(target.value)) return { holder: target.value, type: target.type };
  if ((name !== 'extension' && name !== 'id') || target.parent === undefined || target.key === undefined) {
    throw new Failure(`${op.path.expression} is a primitive value, whose only children are its id and extension`);
  }
  let holder = companionOf(target);
  if (holder === undefined) {
    holder = {};
    if (target.index === undefined) target.parent['_' + target.key] = holder;
    else {
      valuesOf(state, target.parent, target.key);
      putExt(target.parent, target.key, target.index, holder);
    }
  }
  return { holder, type: ELEMENT_MODEL };
}

/** The list a path names (insert, move): its last step must be an element name, whose holder must be one element. */
function list(state: ListState, op: FhirPathPatchOperation, resource: Json): { holder: Json; type: string | undefined; key: string; items: unknown[] } {
  const { last } = op.path;
  if (last === undefined) throw new Failure(`${op.path.expression} must end with the name of a list element (e.g. Patient.identifier)`);
  const target = one(last.holders(resource), op, `${op.type === 'insert' ? 'inserting into' : 'moving in'} a list`);
  const { holder, type } = holderOf(state, target, last.name, op);
  const found = children([{ value: holder, type }], last.name);
  const key = found[0]?.key ?? nameFor(type, last.name, undefined);
  const current = holder[key] === undefined ? valuesOf(state, holder, key) : holder[key];
  if (current !== undefined && !Array.isArray(current)) throw new Failure(`${op.path.expression} is not a list`);
  if (!repeats(type, key, current)) throw new Failure(`${op.path.expression} does not repeat, so it is not a list`);
  return { holder, type, key, items: (current as unknown[] | undefined) ?? [] };
}

function removeAt(state: ListState, target: Located): void {
  const { parent, key, index } = target;
  if (parent === undefined || key === undefined) throw new Failure('the resource itself cannot be deleted by a patch');
  if (index !== undefined) {
    valuesOf(state, parent, key);
    spliceBoth(parent, key, index, 1);
    if ((parent[key] as unknown[]).length === 0) delete parent[key];
  } else {
    delete parent[key];
    setLiteral(parent, key, undefined);
  }
  if (index === undefined || parent[key] === undefined) delete parent['_' + key];
}

function add(state: ListState, op: Extract<FhirPathPatchOperation, { type: 'add' }>, resource: Json): void {
  const target = one(op.path.select(resource), op, 'adding');
  // Onto a primitive, `id` and `extension` go into its companion (`_birthDate`, or its item of `_given`).
  const { holder, type } = holderOf(state, target, op.name, op);
  const probe = valueMemberSuffix(op.value);
  const key = nameFor(type, op.name, probe);
  const childType = elementTypeOf(type, key);
  const several = repeats(type, key, holder[key] ?? valuesOf(state, holder, key));
  const { json, literal, ext } = valueFor(op, childType);
  if (several) {
    const items = (valuesOf(state, holder, key) ?? (holder[key] = [])) as unknown[];
    spliceExact(items, items.length, 0, [json], [literal]);
    if (ext !== undefined || Array.isArray(holder['_' + key])) putExt(holder, key, items.length - 1, ext);
  } else if (holder[key] !== undefined) {
    throw new Failure(`${op.path.expression}.${op.name} already has a value and does not repeat; use replace`);
  } else {
    if (json !== null) holder[key] = json;
    setLiteral(holder, key, literal);
    if (ext !== undefined) putExt(holder, key, undefined, joined(holder['_' + key], ext, `${op.path.expression}.${op.name}`));
  }
}

/**
 * The id and extensions of a primitive that had extensions and no value (`_birthDate` alone) once an
 * `add` gives it its value with `ext` (the part's `_value[x]`): the element is there already in FHIRPath's
 * model, and `add` puts content into it ("appended", fhirpatch.html), so its extensions stay and the
 * part's follow them. Two different ids cannot both be kept: changing one is a `replace`.
 */
function joined(existing: unknown, ext: unknown, where: string): unknown {
  if (!isObject(existing) || !isObject(ext)) return ext;
  if (existing.id !== undefined && ext.id !== undefined && existing.id !== ext.id) {
    throw new Failure(`${where} already has id ${JSON.stringify(existing.id)}, which an add cannot change to ${JSON.stringify(ext.id)}; use replace`);
  }
  const extension = [...(Array.isArray(existing.extension) ? existing.extension : []), ...(Array.isArray(ext.extension) ? ext.extension : [])];
  return { ...existing, ...ext, ...(extension.length > 0 && { extension }) };
}

/** The type suffix a value part names, by its `value[x]` or, a primitive's id and extensions alone, its `_value[x]`. */
function partSuffix(part: Json): string | undefined {
  return valueMemberSuffix(part) ?? Object.keys(part).find((k) => /^_value[A-Z]/.test(k))?.slice('_value'.length);
}

function valueMemberSuffix(part: Json): string | undefined {
  try {
    return valueMember(part)?.name.slice('value'.length);
  } catch (err) {
    if (err instanceof PatchValueError) throw new Failure(`the value ${err.message}`);
    throw err;
  }
}

/** The type of values under JSON name `key` of a value of type `owner` (what nested parts build). */
function elementTypeOf(owner: string | undefined, key: string): string | undefined {
  return owner === undefined ? undefined : elementType(owner, key);
}

function insert(state: ListState, op: Extract<FhirPathPatchOperation, { type: 'insert' }>, resource: Json): void {
  const { holder, type, key, items } = list(state, op, resource);
  if (op.index > items.length) throw new Failure(`index ${op.index} is past the end of ${op.path.expression} (${items.length} elements)`);
  const { json, literal, ext } = valueFor(op, elementTypeOf(type, key));
  holder[key] = items;
  spliceBoth(holder, key, op.index, 0, [json], literal);
  if (ext !== undefined) putExt(holder, key, op.index, ext);
}

/**
 * Renames member `from` of `obj` to `to` where it stands (a choice element taking another type,
 * `valueString` to `valueQuantity`), so that the others keep their order around it.
 */
function renameInPlace(obj: Json, from: string, to: string): void {
  const entries = Object.entries(obj);
  for (const [k] of entries) delete obj[k];
  for (const [k, v] of entries) obj[k === from ? to : k] = v;
}

function replace(state: ListState, op: Extract<FhirPathPatchOperation, { type: 'replace' }>, resource: Json): void {
  const target = one(op.path.select(resource), op, 'replacing');
  const { parent, key, index } = target;
  if (parent === undefined || key === undefined) throw new Failure('the resource itself cannot be replaced by a patch; use update');
  // A choice element takes the name of the new value's type (valueString -> valueQuantity), and that type.
  const element = target.owner === undefined ? undefined : typeModel(target.owner)?.slots.get(key)?.element;
  const suffix = partSuffix(op.value);
  const newKey = element?.choice && suffix !== undefined ? nameFor(target.owner, element.name, suffix) : key;
  const { json, literal, ext } = valueFor(op, newKey === key ? target.type : elementTypeOf(target.owner, newKey));
  // The element is replaced whole: a primitive keeps no id or extension of the value it replaces,
  // and takes those the part's `_value[x]` gives (all it has, when the part has no value).
  if (index !== undefined) {
    valuesOf(state, parent, key)![index] = json;
    setLiteral(parent[key] as unknown[], index, literal);
    putExt(parent, key, index, ext);
    return;
  }
  if (newKey !== key && json !== null) renameInPlace(parent, key, newKey);
  else if (json === null) delete parent[key];
  if (newKey !== key || json === null) setLiteral(parent, key, undefined);
  if (newKey !== key) delete parent['_' + key];
  if (json !== null) parent[newKey] = json;
  setLiteral(parent, newKey, literal);
  putExt(parent, newKey, undefined, ext);
}


function move(state: ListState, op: Extract<FhirPathPatchOperation, { type: 'move' }>, resource: Json): void {
  const { holder, key, items } = list(state, op, resource);
  for (const [name, n] of [['source', op.source], ['destination', op.destination]] as const) {
    if (n >= items.length) throw new Failure(`${name} ${n} is not an index of ${op.path.expression} (${items.length} elements)`);
  }
  moveBoth(holder, key, op.source, op.destination);
}

function applyOne(state: ListState, op: FhirPathPatchOperation, resource: Json): void {
  switch (op.type) {
    case 'add':
      return add(state, op, resource);
    case 'insert':
      return insert(state, op, resource);
    case 'delete': {
      const targets = op.path.select(resource);
      if (targets.length === 0) return;
      return removeAt(state, one(targets, op, 'deleting'));
    }
    case 'replace':
      return replace(state, op, resource);
    case 'move':
      return move(state, op, resource);
  }
}

/** `path` evaluated with `clock` (its criteria's `now()`, `today()`, `timeOfDay()`). */
function withClock(path: CompiledPath, clock: Clock): CompiledPath {
  const { last } = path;
  return {
    expression: path.expression,
    select: (resource) => path.select(resource, clock),
    ...(last === undefined ? {} : { last: { name: last.name, holders: (resource: Json) => last.holders(resource, clock) } }),
  };
}

/**
 * Applies `operations` in order to a copy of `resource` and returns it; `resource` is never changed. The
 * first operation that cannot be applied is a 400 naming its parameter, and nothing applies. Numbers
 * keep their literals (exact-json.ts) where they move, and take the values' own. `clock`: the time the
 * paths' `now()`, `today()` and `timeOfDay()` read (the app's), one instant for the whole patch as N1
 * § 5.10.1 has it for one evaluation; the system's when absent.
 */
export function applyFhirPathPatch(resource: Json, operations: readonly FhirPathPatchOperation[], clock?: Clock): Json {
  const out = cloneExact(resource);
  const state = createListState();
  const instant = clock?.now();
  const fixed: Clock | undefined = instant === undefined ? undefined : { now: () => instant };
  operations.forEach((op, i) => {
    try {
      if (fixed !== undefined) op = { ...op, path: withClock(op.path, fixed) };
      applyOne(state, op, out);
      prune(out, state);
    } catch (err) {
      if (!(err instanceof Failure || err instanceof PatchPathError)) throw err;
      throw new FhirError('invalid', `${at(i)} (${op.type} at ${op.path.expression}) cannot be applied: ${err.message}`, {
        issueCode: 'processing', expression: [at(i)],
      });
    }
  });
  return out;
}
