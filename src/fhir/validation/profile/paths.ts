/**
 * The restricted FHIRPath of slicing discriminators (R4 profiling.html, "Discriminator"): element names,
 * `ofType(T)`, `extension('url')` and `$this`, evaluated on JSON, each value with its FHIR type where
 * the JSON name tells it (`valueQuantity`: Quantity).
 */
import { PRIMITIVES } from '../primitives.ts';

type Json = Record<string, unknown>;

export interface Located {
  value: unknown;
  /** The FHIR type, when known. */
  type?: string;
}

/** `coding.code` -> ['coding', 'code']; dots inside `extension('...')` are kept. */
export function splitPath(path: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < path.length; i++) {
    const ch = path[i];
    if (ch === "'") quoted = !quoted;
    else if (!quoted && ch === '(') depth++;
    else if (!quoted && ch === ')') depth--;
    else if (!quoted && depth === 0 && ch === '.') {
      out.push(path.slice(start, i));
      start = i + 1;
    }
  }
  out.push(path.slice(start));
  return out.filter((s) => s !== '$this');
}

/** The FHIR type a choice element's JSON name gives (`Quantity` of `valueQuantity`, `string` of `valueString`). */
export function typeOfSuffix(suffix: string): string {
  const lower = suffix[0]!.toLowerCase() + suffix.slice(1);
  return PRIMITIVES.has(lower) ? lower : suffix;
}

/** The key of choice element `name` in `obj` (`valueQuantity` for `value`), if any. */
export function choiceKey(obj: Json, name: string): string | undefined {
  for (const key in obj) if (key.length > name.length && key.startsWith(name) && /[A-Z]/.test(key[name.length]!)) return key;
  return undefined;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The values `path` reaches from each of `from`; an unsupported step (`resolve()`) reaches nothing. */
export function valuesAt(from: Located[], path: readonly string[]): Located[] {
  let at = from;
  for (const step of path) {
    const next: Located[] = [];
    const ofType = /^ofType\((\w+)\)$/.exec(step);
    const ext = /^extension\('([^']*)'\)$/.exec(step);
    for (const { value, type } of at) {
      if (ofType) {
        if (type === ofType[1]) next.push({ value, type });
        continue;
      }
      if (!isObject(value)) continue;
      if (ext) {
        const list = Array.isArray(value.extension) ? value.extension : [];
        for (const e of list) if (isObject(e) && e.url === ext[1]) next.push({ value: e, type: 'Extension' });
        continue;
      }
      if (/\(/.test(step)) continue;
      let key: string | undefined = step in value ? step : undefined;
      let t: string | undefined;
      if (key === undefined) {
        key = choiceKey(value, step);
        if (key !== undefined) t = typeOfSuffix(key.slice(step.length));
      }
      if (key === undefined) continue;
      const v = value[key];
      for (const item of Array.isArray(v) ? v : [v]) {
        if (item === null || item === undefined) continue;
        // A resource (`Bundle.entry.resource`, `contained`) has its type in itself.
        const type = t ?? (isObject(item) && typeof item.resourceType === 'string' ? item.resourceType : undefined);
        next.push(type === undefined ? { value: item } : { value: item, type });
      }
    }
    at = next;
  }
  return at;
}

/** R4 ElementDefinition.pattern[x]: every property of the pattern is in the value with a matching value; each item of a pattern array matches some item of the value's. */
export function matchesPattern(value: unknown, pattern: unknown): boolean {
  if (Array.isArray(pattern)) {
    const items = Array.isArray(value) ? value : [value];
    return pattern.every((p) => items.some((v) => matchesPattern(v, p)));
  }
  if (isObject(pattern)) {
    if (!isObject(value)) return false;
    for (const key in pattern) if (!matchesPattern(value[key], pattern[key])) return false;
    return true;
  }
  return value === pattern;
}

/** R4 ElementDefinition.fixed[x]: the value is exactly the fixed one (every property, nothing more). */
export function equalsFixed(value: unknown, fixed: unknown): boolean {
  if (Array.isArray(fixed)) return Array.isArray(value) && value.length === fixed.length && fixed.every((f, i) => equalsFixed(value[i], f));
  if (isObject(fixed)) {
    if (!isObject(value)) return false;
    const keys = Object.keys(fixed);
    if (Object.keys(value).length !== keys.length) return false;
    return keys.every((k) => equalsFixed(value[k], fixed[k]));
  }
  return value === fixed;
}
