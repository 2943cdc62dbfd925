/**
 * The values of FHIRPath Patch operations (fhirpatch.html): a `value` part holds a `value[x]` (its type
 * told by the suffix: `valueHumanName`), a `resource`, or, for a value of a type no `value[x]` can
 * carry (a backbone element such as `Patient.contact`) or one built element by element, nested parts
 * named by the elements, each holding its own value the same ways.
 */
import { cloneExact, literalOf, setLiteral, spliceExact } from '../exact-json.ts';
import { typeModel } from '../validation/model.ts';
import type { Json } from './patch-path.ts';

/** A value ready to be put in a resource, with the suffix of its type when a `value[x]` told it. */
export interface PatchValue {
  json: unknown;
  /** `Date`, `HumanName`, ... (undefined for a resource or nested parts). */
  suffix?: string;
  /** A number's text as written in the patch, when it is not String(json) (src/fhir/exact-json.ts). */
  literal?: string;
  /** A primitive's id and extensions, from the part's `_value[x]` (FHIR JSON's companion of a primitive). */
  ext?: unknown;
}

/** A value that cannot be built (the message says why; the caller names the operation). */
export class PatchValueError extends Error {}

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** The `value[x]` member of a parameter part: its name and value, or undefined when it has none. */
export function valueMember(part: Json): { name: string; value: unknown } | undefined {
  const names = Object.keys(part).filter((k) => /^value[A-Z]/.test(k));
  if (names.length > 1) throw new PatchValueError(`holds ${names.join(' and ')}: a part has one value[x]`);
  return names.length === 0 ? undefined : { name: names[0]!, value: part[names[0]!] };
}

/**
 * The JSON name under which a value for element `name` of a value of type `owner` goes: the name
 * itself, or for a choice element (`value[x]`) the name with the value's type (`valueQuantity`).
 */
export function jsonNameFor(owner: string | undefined, name: string, suffix: string | undefined): string {
  const model = owner === undefined ? null : typeModel(owner);
  if (!model || model.slots.has(name)) return name;
  for (const slot of model.slots.values()) {
    if (slot.element.name !== name || !slot.element.choice) continue;
    if (suffix === undefined) throw new PatchValueError(`'${name}' is a choice of types (${slot.element.names.join(', ')}): give its value as value[x] so its type is known`);
    const json = name + suffix;
    if (!model.slots.has(json)) throw new PatchValueError(`'${name}' of ${owner} cannot hold a ${suffix} (it takes ${slot.element.names.join(', ')})`);
    return json;
  }
  throw new PatchValueError(`${owner} has no element '${name}'`);
}

/** Whether element `json` of a value of type `owner` repeats (unknown types: whether it holds a list now). */
export function repeats(owner: string | undefined, json: string, current: unknown): boolean {
  const slot = owner === undefined ? undefined : typeModel(owner)?.slots.get(json);
  return slot === undefined ? Array.isArray(current) : slot.element.max > 1;
}

/** The value of a part that carries one: value[x], `resource`, or nested parts building an element of type `type`. */
export function partValue(part: Json, type: string | undefined): PatchValue {
  const member = valueMember(part);
  const nested = part.part;
  const resource = part.resource;
  const kinds = [member !== undefined, resource !== undefined, nested !== undefined].filter(Boolean).length;
  if (kinds === 0) {
    // A primitive with an id or extensions and no value: its `_value[x]` alone.
    const only = Object.keys(part).filter((k) => /^_value[A-Z]/.test(k));
    if (only.length === 1 && isObject(part[only[0]!])) return { json: null, suffix: only[0]!.slice('_value'.length), ext: cloneExact(part[only[0]!]) };
    throw new PatchValueError('has no value (value[x], resource or nested parts)');
  }
  if (kinds > 1) throw new PatchValueError('has more than one of value[x], resource and nested parts');
  if (member !== undefined) {
    const literal = literalOf(part, member.name);
    const ext = part['_' + member.name];
    return {
      json: cloneExact(member.value), suffix: member.name.slice('value'.length),
      ...(literal !== undefined && { literal }), ...(isObject(ext) && { ext: cloneExact(ext) }),
    };
  }
  if (resource !== undefined) {
    if (!isObject(resource) || typeof resource.resourceType !== 'string') throw new PatchValueError("'resource' is not a resource");
    return { json: cloneExact(resource) };
  }
  if (!Array.isArray(nested)) throw new PatchValueError("'part' must be a list");
  return { json: fromParts(nested, type) };
}

/** An element of type `type` built from parts, one per element value (several of one name make a list). */
function fromParts(parts: unknown[], type: string | undefined): Json {
  const out: Json = {};
  for (const raw of parts) {
    if (!isObject(raw) || typeof raw.name !== 'string' || raw.name === '') throw new PatchValueError('a nested part has no name');
    const name = raw.name;
    const member = valueMember(raw);
    const bare = Object.keys(raw).find((k) => /^_value[A-Z]/.test(k));
    const suffix = member?.name.slice('value'.length) ?? bare?.slice('_value'.length);
    const json = jsonNameFor(type, name, suffix);
    const childType = type === undefined ? undefined : typeModel(type)?.slots.get(json)?.type;
    let value: PatchValue;
    try {
      value = partValue(raw, childType);
    } catch (err) {
      if (err instanceof PatchValueError) throw new PatchValueError(`nested part '${name}' ${err.message}`);
      throw err;
    }
    if (repeats(type, json, out[json])) {
      const list = (out[json] ??= []) as unknown[];
      spliceExact(list, list.length, 0, [value.json], [value.literal]);
      putExt(out, json, list.length - 1, value.ext);
    } else if (Object.hasOwn(out, json)) throw new PatchValueError(`nested part '${name}' is given twice, but ${type ?? 'the element'}.${name} does not repeat`);
    else {
      if (value.json !== null) out[json] = value.json;
      setLiteral(out, json, value.literal);
      putExt(out, json, undefined, value.ext);
    }
  }
  return out;
}

/** Where a part (or nested part) `at` holds JSON that FHIR JSON does not allow, and what; undefined when none. */
export function valuePartProblem(part: Json, at: string): string | undefined {
  for (const key of Object.keys(part)) {
    const v = part[key];
    if (key === 'part') {
      if (!Array.isArray(v) || v.length === 0) return `'${at}': part is ${Array.isArray(v) ? 'an empty list' : 'not a list'}`;
      for (const nested of v) {
        if (!isObject(nested)) continue;
        const problem = valuePartProblem(nested, `${at}.${typeof nested.name === 'string' ? nested.name : 'part'}`);
        if (problem !== undefined) return problem;
      }
    } else if (/^_value[A-Z]/.test(key) && !isObject(v)) {
      return `'${at}': ${key} is ${describeJson(v)}, not an object holding an id or extensions`;
    } else if (/^value[A-Z]/.test(key) || /^_value[A-Z]/.test(key) || key === 'resource') {
      const where = jsonProblem(v, key);
      if (where !== undefined) return `'${at}': ${where}`;
    }
  }
  return undefined;
}

/** The first `null` property, empty object or array, or array of `null`s alone in `v` (at `path`), described. */
function jsonProblem(v: unknown, path: string): string | undefined {
  if (v === null) return `${path} is null`;
  if (Array.isArray(v)) {
    if (v.every((item) => item === null)) return `${path} ${v.length === 0 ? 'is an empty list' : 'holds only nulls'}`;
    for (let n = 0; n < v.length; n++) {
      const problem = v[n] === null ? undefined : jsonProblem(v[n], `${path}[${n}]`);
      if (problem !== undefined) return problem;
    }
    return undefined;
  }
  if (!isObject(v)) return undefined;
  const keys = Object.keys(v);
  if (keys.length === 0) return `${path} is an empty object`;
  for (const key of keys) {
    const problem = jsonProblem(v[key], `${path}.${key}`);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

function describeJson(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'a list' : JSON.stringify(v);
}

/**
 * Sets (or, `ext` undefined, removes) the id and extensions of the primitive at `holder[key]` (at
 * `index` of its list): FHIR JSON's `_key` companion, a list kept aligned with its values (null where
 * a value has none) and dropped when it holds none.
 */
export function putExt(holder: Json, key: string, index: number | undefined, ext: unknown): void {
  const name = '_' + key;
  if (index === undefined) {
    if (ext === undefined) delete holder[name];
    else holder[name] = ext;
    return;
  }
  const values = holder[key];
  const length = Array.isArray(values) ? values.length : index + 1;
  let list = holder[name];
  if (!Array.isArray(list)) {
    if (ext === undefined) return;
    list = holder[name] = [];
  }
  const exts = list as unknown[];
  while (exts.length < length) exts.push(null);
  exts[index] = ext ?? null;
  if (exts.every((e) => e === null)) delete holder[name];
}
