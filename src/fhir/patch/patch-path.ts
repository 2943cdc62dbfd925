/**
 * The paths of FHIRPath Patch (fhirpatch.html): a FHIRPath expression evaluated to the elements it
 * selects, each with where it sits (its parent object, JSON name and list position), so that an
 * operation can change it. Navigation (`a.b`, `[n]`, `first()`, `last()`, `tail()`, `skip()`,
 * `take()`, `single()`, `ofType()`/`as`, `extension(url)`, `$this`) is evaluated here; the criteria of
 * `where()` run through the validator's FHIRPath engine, so any expression it evaluates may be used
 * there. Anything else in a path is refused as unsupported, never guessed.
 */
import { compileCriterion, FhirPathEvaluationError, type CompiledCriterion } from '../validation/fhirpath-engine.ts';
import { FhirPathSyntaxError, parseFhirPath, UnsupportedFhirPath, type Ast } from '../validation/fhirpath-parse.ts';
import { elementType, FHIRPATH_TYPES, typeModel } from '../validation/model.ts';
import type { Clock } from '../../clock.ts';

export type Json = Record<string, unknown>;

/** One selected element and where it sits. */
export interface Located {
  /** null for a primitive that has an id or extensions and no value (FHIR JSON's `_name` alone, or a list's `null` beside one). */
  value: unknown;
  /** Its FHIR type (`HumanName`, `Patient.contact`, `date`); undefined when unknown. */
  type: string | undefined;
  /** The object holding it (none for the resource itself). */
  parent?: Json;
  /** Its JSON name in `parent` (`valueQuantity` for `value[x]`). */
  key?: string;
  /** Its position when `parent[key]` is a list. */
  index?: number;
  /** The FHIR type of `parent` (whose model tells what `key` is), when known. */
  owner?: string;
}

/** A path that cannot be evaluated: not FHIRPath, a construct a patch path does not support, or an evaluation error. */
export class PatchPathError extends Error {}

/**
 * The most values one `where()` of a patch path may visit on all the items it filters (navigations and
 * function results, counted by the FHIRPath engine): a criterion comparing each item with every other
 * (`where(%resource.telecom.where(value = %context.value).count() > 1)`) took 60 s on 20,000 telecoms.
 * Enough for a criterion of a few dozen steps on each of 100,000 items.
 */
export const MAX_WHERE_VISITS = 5_000_000;

const TYPES = FHIRPATH_TYPES;

/**
 * A compiled patch path. `clock`: the time `now()`, `today()` and `timeOfDay()` read in its `where()`
 * criteria (the app's, held at one instant for a whole patch); the system's when absent.
 */
export interface CompiledPath {
  expression: string;
  select(resource: Json, clock?: Clock): Located[];
  /** For a path ending in an element name (`Patient.identifier`): that name and what holds it (`Patient`). */
  last?: { name: string; holders(resource: Json, clock?: Clock): Located[] };
}

/** The root of one evaluation: the resource, and the clock its criteria read. */
interface Root extends Located {
  clock?: Clock | undefined;
}

function isObject(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** The FHIR type of `value` under JSON name `key` of a value of type `owner` (a contained resource tells its own). */
function childType(owner: string | undefined, key: string, value: unknown): string | undefined {
  if (isObject(value) && typeof value.resourceType === 'string') return value.resourceType;
  return owner === undefined ? undefined : elementType(owner, key);
}

/** The JSON names under which element `name` of a value of type `owner` may appear (`value` -> `valueQuantity`, ...). */
export function jsonNames(owner: string | undefined, name: string, value: Json): string[] {
  const model = owner === undefined ? null : typeModel(owner);
  const slot = model?.slots.get(name);
  if (slot !== undefined) return [name];
  if (model) {
    for (const s of model.slots.values()) if (s.element.name === name) return s.element.names;
    return [];
  }
  return Object.hasOwn(value, name) ? [name] : [];
}

/**
 * The object holding the id and extensions of primitive `item` (FHIR JSON's `_name` beside its value, or the
 * item at its index of a list's `_name`), when it has one.
 */
export function companionOf(item: Located): Json | undefined {
  const { parent, key, index } = item;
  if (parent === undefined || key === undefined) return undefined;
  const ext = parent['_' + key];
  const found = index === undefined ? ext : Array.isArray(ext) ? ext[index] : undefined;
  return isObject(found) ? found : undefined;
}

/**
 * The type whose model gives an Element's own children, `id` and `extension`, which a primitive holds in
 * its companion (R4's model has no entry for Element itself; every complex type repeats its two).
 */
export const ELEMENT_MODEL = 'Extension';

/**
 * The children named `name` of a primitive (`id`, `extension`: FHIRPath's model makes a primitive's
 * extensions its children, `Patient.birthDate.extension`), found in its companion.
 */
function primitiveChildren(item: Located, name: string, out: Located[]): void {
  if (name !== 'extension' && name !== 'id') return;
  const companion = companionOf(item);
  const v = companion?.[name];
  if (companion === undefined || v === undefined || v === null) return;
  const type = elementType(ELEMENT_MODEL, name);
  if (Array.isArray(v)) {
    v.forEach((x, index) => {
      if (x !== null) out.push({ value: x, type, parent: companion, key: name, index, owner: ELEMENT_MODEL });
    });
  } else out.push({ value: v, type, parent: companion, key: name, owner: ELEMENT_MODEL });
}

/**
 * The children named `name` of each item, in order. A primitive with an id or extensions and no value
 * (`_birthDate` alone; in a list, JSON's `null` beside an object of `_given`) is an element in FHIRPath's
 * model, as the validator's engine has it: selected with value null, indexed in its list.
 */
export function children(items: readonly Located[], name: string): Located[] {
  const out: Located[] = [];
  for (const item of items) {
    const parent = item.value;
    if (!isObject(parent)) {
      primitiveChildren(item, name, out);
      continue;
    }
    const owner = item.type;
    for (const key of jsonNames(owner, name, parent)) {
      const v = parent[key];
      const ext = parent['_' + key];
      if (Array.isArray(v) || ((v === undefined || v === null) && Array.isArray(ext))) {
        const values = Array.isArray(v) ? v : [];
        const exts = Array.isArray(ext) ? ext : [];
        for (let index = 0; index < Math.max(values.length, exts.length); index++) {
          const x = values[index] ?? null;
          if (x !== null) out.push({ value: x, type: childType(owner, key, x), parent, key, index, owner });
          else if (isObject(exts[index])) out.push({ value: null, type: childType(owner, key, undefined), parent, key, index, owner });
        }
      } else if (v === undefined || v === null) {
        if (isObject(ext)) out.push({ value: null, type: childType(owner, key, undefined), parent, key, owner });
      } else out.push({ value: v, type: childType(owner, key, v), parent, key, owner });
    }
  }
  return out;
}

function integerLiteral(ast: Ast, expression: string, what: string): number {
  if (ast.kind === 'literal' && ast.literal.kind === 'number' && ast.literal.integer) return ast.literal.value;
  throw new UnsupportedFhirPath(expression, ast.at, `${what} other than an integer literal`);
}

function stringLiteral(ast: Ast, expression: string, what: string): string {
  if (ast.kind === 'literal' && ast.literal.kind === 'string') return ast.literal.value;
  throw new UnsupportedFhirPath(expression, ast.at, `${what} other than a string literal`);
}

/** Whether an item of type `type` is of type `wanted` (its name, with or without `FHIR.`; a profile of Quantity is a Quantity). */
function isOfType(type: string | undefined, wanted: string): boolean {
  if (type === undefined) return false;
  if (type === wanted) return true;
  return wanted === 'Quantity' && ['Age', 'Count', 'Distance', 'Duration', 'MoneyQuantity', 'SimpleQuantity'].includes(type);
}

type Step = (input: readonly Located[], root: Root) => Located[];

function arity(ast: Extract<Ast, { kind: 'call' }>, expression: string, n: number): void {
  if (ast.args.length !== n) throw new UnsupportedFhirPath(expression, ast.at, `${ast.name}() with ${ast.args.length} arguments`);
}

function compileCall(ast: Extract<Ast, { kind: 'call' }>, expression: string): Step {
  const input = ast.target === undefined ? (c: readonly Located[]) => [...c] : compileStep(ast.target, expression);
  const on = (f: (items: Located[], root: Root) => Located[]): Step => (c, root) => f(input(c, root), root);
  switch (ast.name) {
    case 'first':
      arity(ast, expression, 0);
      return on((items) => items.slice(0, 1));
    case 'last':
      arity(ast, expression, 0);
      return on((items) => items.slice(-1));
    case 'tail':
      arity(ast, expression, 0);
      return on((items) => items.slice(1));
    case 'single':
      arity(ast, expression, 0);
      return on((items) => {
        if (items.length > 1) throw new PatchPathError(`single() found ${items.length} elements`);
        return items;
      });
    case 'skip':
    case 'take': {
      arity(ast, expression, 1);
      const n = integerLiteral(ast.args[0]!, expression, `the argument of ${ast.name}()`);
      return on((items) => (ast.name === 'skip' ? items.slice(Math.max(n, 0)) : items.slice(0, Math.max(n, 0))));
    }
    case 'ofType': {
      arity(ast, expression, 1);
      const t = ast.args[0]!;
      if (t.kind !== 'member' || t.target !== undefined) throw new UnsupportedFhirPath(expression, t.at, 'ofType() of something other than a type name');
      return on((items) => items.filter((i) => isOfType(i.type, t.name)));
    }
    case 'extension': {
      arity(ast, expression, 1);
      const url = stringLiteral(ast.args[0]!, expression, 'the argument of extension()');
      return on((items) => children(items, 'extension').filter((e) => isObject(e.value) && e.value.url === url));
    }
    case 'where': {
      arity(ast, expression, 1);
      const criterion: CompiledCriterion = compileCriterion(ast.args[0]!, expression, TYPES);
      return on((items, root) => {
        // One memo and one budget for the criterion's evaluations on every item.
        const ctx = { resource: root.value, rootResource: root.value, memo: new Map<object, unknown>(), budget: { left: MAX_WHERE_VISITS, limit: MAX_WHERE_VISITS }, clock: root.clock };
        return items.filter((item, i) => {
          try {
            // A primitive's id and extensions are its children (`given.where(extension(url).exists())`), and one
            // with those alone is an item like the others.
            const ext = isObject(item.value) ? undefined : companionOf(item);
            if (item.value === null && ext === undefined) return false;
            return criterion(item.value, item.type, i, ctx, ext) === true;
          } catch (err) {
            if (err instanceof FhirPathEvaluationError) throw new PatchPathError(`where() could not be evaluated: ${err.message}`);
            throw err;
          }
        });
      });
    }
    default:
      throw new UnsupportedFhirPath(expression, ast.at, `${ast.name}() in a patch path`);
  }
}

function compileStep(ast: Ast, expression: string): Step {
  switch (ast.kind) {
    case 'this':
      return (c) => [...c];
    case 'member': {
      const { name } = ast;
      if (ast.target === undefined) {
        // The first step: the resource's type name, or an element of the resource.
        return (c, root) => (/^[A-Z]/.test(name) && c.length === 1 && c[0] === root ? (root.type === name || name === 'Resource' || name === 'DomainResource' ? [root] : []) : children(c, name));
      }
      const target = compileStep(ast.target, expression);
      return (c, root) => children(target(c, root), name);
    }
    case 'indexer': {
      const target = compileStep(ast.target, expression);
      const n = integerLiteral(ast.index, expression, 'an index');
      return (c, root) => {
        const items = target(c, root);
        return n >= 0 && n < items.length ? [items[n]!] : [];
      };
    }
    case 'call':
      return compileCall(ast, expression);
    case 'type':
      if (ast.op === 'as') {
        const operand = compileStep(ast.operand, expression);
        const wanted = ast.type.name;
        return (c, root) => operand(c, root).filter((i) => isOfType(i.type, wanted));
      }
      throw new UnsupportedFhirPath(expression, ast.at, "'is' in a patch path");
    default:
      throw new UnsupportedFhirPath(expression, ast.at, `${ast.kind === 'binary' ? `'${ast.op}'` : ast.kind} in a patch path`);
  }
}

/** Compiles a patch path; PatchPathError when it is not FHIRPath or uses what a patch path does not support. */
export function compilePath(expression: string): CompiledPath {
  try {
    const ast = parseFhirPath(expression);
    const run = (step: Step) => (resource: Json, clock?: Clock) => {
      const root: Root = { value: resource, type: typeof resource.resourceType === 'string' ? resource.resourceType : undefined, clock };
      return step([root], root);
    };
    const path: CompiledPath = { expression, select: run(compileStep(ast, expression)) };
    if (ast.kind === 'member' && ast.target !== undefined) path.last = { name: ast.name, holders: run(compileStep(ast.target, expression)) };
    return path;
  } catch (err) {
    if (err instanceof FhirPathSyntaxError || err instanceof UnsupportedFhirPath) throw new PatchPathError(err.message);
    throw err;
  }
}
