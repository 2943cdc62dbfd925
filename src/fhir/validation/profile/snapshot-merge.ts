/**
 * How a differential element narrows its base element in a generated snapshot (R4 profiling.html,
 * "Constraining elements"; elementdefinition.html): cardinality within the base's, types among the base's,
 * a binding no weaker than a required one, fixed and pattern values replaced, constraints and mappings
 * appended, everything else replaced. A differential that breaks one of these is a SnapshotError naming
 * its element.
 */
import { matchesPattern } from './paths.ts';
import type { Node } from './snapshot-tree.ts';

type Json = Record<string, unknown>;

const CORE = 'http://hl7.org/fhir/StructureDefinition/';
const RESOURCE_BASES = new Set(['Resource', 'DomainResource']);

/** Why no snapshot can be generated; `element` is the differential element's id, when one is to blame. */
export class SnapshotError extends Error {
  constructor(message: string, readonly element?: string) {
    super(message);
  }
}

export function typesOf(ed: Json): Json[] {
  return Array.isArray(ed.type) ? (ed.type as Json[]) : [];
}

/** Whether the base's `max` allows `max`. */
function maxWithin(max: string, base: unknown): boolean {
  if (base === undefined || base === '*') return true;
  if (max === '*') return false;
  return Number(max) <= Number(base);
}

/** Narrows `node` by the differential element `diff` (its id `id`; `newSlice`: a slice it makes): R4 profiling.html's rules for what a constraint may change. */
export function merge(node: Node, diff: Json, id: string, newSlice: boolean, source: string | undefined): void {
  const base = node.ed;
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(diff)) {
    if (key === 'id' || key === 'path' || key === 'base') continue;
    if (key === 'min') {
      if (typeof value !== 'number') continue;
      if (!newSlice && typeof base.min === 'number' && value < base.min) throw new SnapshotError(`${id}: min ${value} is below the base's min ${base.min}`, id);
      if (typeof base.max === 'string' && base.max !== '*' && value > Number(base.max)) throw new SnapshotError(`${id}: min ${value} is above the base's max ${base.max}`, id);
    } else if (key === 'max') {
      if (typeof value !== 'string' || (value !== '*' && !/^[0-9]+$/.test(value))) throw new SnapshotError(`${id}: max ${JSON.stringify(value)} is neither a number nor *`, id);
      if (!maxWithin(value, base.max)) throw new SnapshotError(`${id}: max ${value} is above the base's max ${String(base.max)}`, id);
    } else if (key === 'type') {
      out.type = narrowTypes(typesOf(base), Array.isArray(value) ? (value as Json[]) : [], id);
      node.typedByDiff = true;
      continue;
    } else if (key === 'binding') {
      out.binding = mergeBinding(base.binding as Json | undefined, value as Json, id);
      continue;
    } else if (key === 'constraint' && Array.isArray(value)) {
      const own = Array.isArray(base.constraint) ? (base.constraint as Json[]) : [];
      // A constraint the profile adds names it as its source (as HAPI's snapshots do).
      const added = (value as Json[]).filter((c) => !own.some((o) => o.key === c.key)).map((c) => (c.source === undefined && source !== undefined ? { ...c, source } : c));
      out.constraint = [...own.map((o) => (value as Json[]).find((c) => c.key === o.key) ?? o), ...added];
      continue;
    } else if (key === 'mapping' && Array.isArray(value)) {
      const own = Array.isArray(base.mapping) ? (base.mapping as Json[]) : [];
      out.mapping = [...own, ...(value as Json[]).filter((m) => !own.some((o) => o.identity === m.identity && o.map === m.map))];
      continue;
    } else if (key === 'isModifier') {
      // Whether an element is a modifier is the base's to say; only an extension definition says it of its root (a modifier extension).
      if (typeof value === 'boolean' && value !== (base.isModifier === true) && node.path !== 'Extension') {
        throw new SnapshotError(`${id}: isModifier ${value} changes the base's ${base.isModifier === true}: a constraint may not change whether an element is a modifier`, id);
      }
    } else if (key.startsWith('fixed') && base[key] !== undefined && JSON.stringify(base[key]) !== JSON.stringify(value)) {
      throw new SnapshotError(`${id}: the base fixes ${key} to ${JSON.stringify(base[key])}, the differential to ${JSON.stringify(value)}`, id);
    } else if (key.startsWith('fixed') || key.startsWith('pattern')) {
      if (!agreesWithBase(base, key, value, id)) continue;
      for (const k of Object.keys(out)) if ((k.startsWith('fixed') || k.startsWith('pattern')) && k !== key) delete out[k];
    }
    out[key] = value;
  }
  const min = out.min;
  if (typeof min === 'number' && typeof out.max === 'string' && out.max !== '*' && min > Number(out.max)) throw new SnapshotError(`${id}: min ${min} is above max ${out.max}`, id);
  node.ed = out;
}

/**
 * Whether the differential's `fixed[x]`/`pattern[x]` is to replace the base's (false: it says what the
 * base says, and the base's stays); throws when it contradicts or loosens the base's (R4 profiling.html: a
 * constraint only narrows). A pattern must include the base's pattern; a fixed value must match the base's
 * pattern; a pattern over a fixed value would loosen it, unless it is that same value (then the fixed one stays).
 */
function agreesWithBase(base: Json, key: string, value: unknown, id: string): boolean {
  const fixedKey = Object.keys(base).find((k) => k.startsWith('fixed'));
  const patternKey = Object.keys(base).find((k) => k.startsWith('pattern'));
  const type = (k: string) => k.slice(k.startsWith('fixed') ? 5 : 7);
  if (key.startsWith('pattern') && fixedKey !== undefined) {
    if (type(fixedKey) === type(key) && JSON.stringify(base[fixedKey]) === JSON.stringify(value)) return false;
    throw new SnapshotError(`${id}: the base fixes ${fixedKey} to ${JSON.stringify(base[fixedKey])}; ${key} ${JSON.stringify(value)} would loosen or contradict it`, id);
  }
  if (patternKey !== undefined && (type(patternKey) !== type(key) || !matchesPattern(value, base[patternKey]))) {
    throw new SnapshotError(`${id}: ${key} ${JSON.stringify(value)} does not agree with the base's ${patternKey} ${JSON.stringify(base[patternKey])} (it must include it)`, id);
  }
  return true;
}

/** The differential's types, each one the base allows (its code, or a resource type where the base has Resource), keeping the base's profiles where it names none. */
function narrowTypes(base: Json[], diff: Json[], id: string): Json[] {
  if (diff.length === 0) return base;
  const codes = new Set(base.map((t) => String(t.code)));
  return diff.map((t) => {
    const code = String(t.code);
    const same = base.find((b) => b.code === code);
    if (same === undefined) {
      if (base.length === 0 || [...codes].some((c) => RESOURCE_BASES.has(c)) || base.some((b) => fhirType(b) === code)) return t;
      throw new SnapshotError(`${id}: the type ${code} is not one the base allows (${[...codes].join(', ')})`, id);
    }
    const out: Json = { ...same, ...t };
    if (t.targetProfile === undefined && same.targetProfile !== undefined) out.targetProfile = same.targetProfile;
    return out;
  });
}

/** The FHIR type a FHIRPath system type stands for (`Extension.url`'s System.String is a uri). */
function fhirType(t: Json): string | undefined {
  const ext = Array.isArray(t.extension) ? (t.extension as Json[]).find((e) => e.url === 'http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type') : undefined;
  return typeof ext?.valueUrl === 'string' ? ext.valueUrl : undefined;
}

const STRENGTHS = ['required', 'extensible', 'preferred', 'example'];

/** The differential's binding over the base's; a required binding may not be weakened. */
function mergeBinding(base: Json | undefined, diff: Json, id: string): Json {
  if (base?.strength === 'required' && typeof diff.strength === 'string' && STRENGTHS.indexOf(diff.strength) > 0) {
    throw new SnapshotError(`${id}: the base's binding is required, the differential weakens it to ${diff.strength}`, id);
  }
  return { ...(base ?? {}), ...diff };
}
