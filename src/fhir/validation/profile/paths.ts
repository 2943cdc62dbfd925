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
  let type = suffixTypes.get(suffix);
  if (type === undefined) {
    const lower = suffix[0]!.toLowerCase() + suffix.slice(1);
    type = PRIMITIVES.has(lower) ? lower : suffix;
    // Suffixes are R4's type names where the JSON is valid; a client's odd ones are not kept without end.
    if (suffixTypes.size < 1_000) suffixTypes.set(suffix, type);
  }
  return type;
}
const suffixTypes = new Map<string, string>();

/** The key of choice element `name` in `obj` (`valueQuantity` for `value`), if any. */
export function choiceKey(obj: Json, name: string): string | undefined {
  for (const key in obj) {
    if (key.length <= name.length || !key.startsWith(name)) continue;
    const c = key.charCodeAt(name.length);
    if (c >= 65 && c <= 90) return key;
  }
  return undefined;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** A step of a discriminator's path, parsed once: `ofType(T)`, `extension('url')`, an element name, `resolve()`, or one Cinder cannot follow. */
export type Step = { kind: 'ofType' | 'extension' | 'name'; arg: string } | { kind: 'resolve' } | { kind: 'unsupported' };

/** A Reference's target, when the check can resolve it (targets.ts); undefined otherwise. */
export type Resolve = (reference: string) => Json | undefined;

export function compileSteps(path: readonly string[]): Step[] {
  return path.map((step): Step => {
    const ofType = /^ofType\((\w+)\)$/.exec(step);
    if (ofType) return { kind: 'ofType', arg: ofType[1]! };
    const ext = /^extension\('([^']*)'\)$/.exec(step);
    if (ext) return { kind: 'extension', arg: ext[1]! };
    if (step === 'resolve()') return { kind: 'resolve' };
    return /\(/.test(step) ? { kind: 'unsupported' } : { kind: 'name', arg: step };
  });
}

/** The values `path` reaches from each of `from`; an unsupported step (`resolve()`) reaches nothing. */
export function valuesAt(from: Located[], path: readonly string[]): Located[] {
  return walkSteps(from, compileSteps(path));
}

/** valuesAt with the path's steps parsed; `resolve()` reaches a Reference's target through `resolve` (nothing without it). */
export function walkSteps(from: Located[], steps: readonly Step[], resolve?: Resolve): Located[] {
  let at = from;
  for (const step of steps) {
    const next: Located[] = [];
    for (let i = 0; i < at.length; i++) {
      const { value, type } = at[i]!;
      if (step.kind === 'ofType') {
        if (type === step.arg) next.push({ value, type });
        continue;
      }
      if (!isObject(value)) continue;
      if (step.kind === 'extension') {
        const list = Array.isArray(value.extension) ? value.extension : [];
        for (const e of list) if (isObject(e) && e.url === step.arg) next.push({ value: e, type: 'Extension' });
        continue;
      }
      if (step.kind === 'unsupported') continue;
      if (step.kind === 'resolve') {
        const target = typeof value.reference === 'string' ? resolve?.(value.reference) : undefined;
        if (target !== undefined) push(next, target, undefined);
        continue;
      }
      const name = step.arg;
      let key: string | undefined = name in value ? name : undefined;
      let t: string | undefined;
      if (key === undefined) {
        key = choiceKey(value, name);
        if (key !== undefined) t = typeOfSuffix(key.slice(name.length));
      }
      if (key === undefined) continue;
      const v = value[key];
      if (Array.isArray(v)) for (const item of v) push(next, item, t);
      else push(next, v, t);
    }
    at = next;
  }
  return at;
}

function push(next: Located[], item: unknown, t: string | undefined): void {
  if (item === null || item === undefined) return;
  // A resource (`Bundle.entry.resource`, `contained`) has its type in itself.
  const type = t ?? (isObject(item) && typeof item.resourceType === 'string' ? item.resourceType : undefined);
  next.push(type === undefined ? { value: item } : { value: item, type });
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
