/**
 * The directives FHIR R4 graphql.html defines on fields, applied to the answer graphql-js computed
 * (they change its shape, which GraphQL execution cannot): `@first` (a list's first item, or null),
 * `@singleton` (a list of at most one item as that item; more is an error) and `@flatten` (the field's
 * own fields put in its parent, as lists when the field is a list or a name is filled twice) and
 * `@slice(path:)` (each item of an element's list names its fields, and theirs, with `.` and the value
 * FHIRPath `path` selects from it, or its index for `$index`: `name @slice(path: "use") @flatten { given }`
 * is `"given.official": [...], "given.usual": [...]`, as HL7's reference engine answers it).
 */
import {
  defaultFieldResolver, DirectiveLocation, GraphQLDirective, GraphQLNonNull, GraphQLString, Kind, type DocumentNode, type FieldNode, type FragmentDefinitionNode,
  type GraphQLFieldResolver, type OperationDefinitionNode, type SelectionSetNode, type StringValueNode, valueFromASTUntyped,
} from 'graphql';
import type { Clock } from '../../clock.ts';
import { compileValues, FhirPathEvaluationError, FhirPathSyntaxError, UnsupportedFhirPath, type CompiledValues } from '../validation/fhirpath-engine.ts';
import { FHIRPATH_TYPES } from '../validation/model.ts';

export const FHIR_DIRECTIVES: readonly GraphQLDirective[] = [
  new GraphQLDirective({ name: 'first', description: 'A list field answers its first item (null for none): graphql.html', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'singleton', description: 'A list field of at most one item answers it (null for none); more is an error: graphql.html', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'flatten', description: "The field's own fields are put in its parent, as lists where the field is a list: graphql.html", locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({
    name: 'slice',
    description: "Each item of an element's list names its fields with '.' and the value the FHIRPath `path` selects from it ($index: its index): graphql.html",
    locations: [DirectiveLocation.FIELD],
    args: { path: { type: new GraphQLNonNull(GraphQLString) } },
  }),
];

/** The most values the `@slice` paths of one request may visit together (FHIRPath's budget). */
const MAX_SLICE_VISITS = 1_000_000;

/** A response path as a key (graphql-js's `info.path`, or the walk's). */
const pathKey = (keys: readonly (string | number)[]) => keys.join('\u0000');

/**
 * The raw values of the fields a query slices, by response path, kept as graphql-js resolves them (the
 * default resolver: the elements of a resource); `@slice`'s path is evaluated on them, not on the answer,
 * which holds only what was selected.
 */
export function sliceSourceResolver(sources: Map<string, unknown>): GraphQLFieldResolver<unknown, unknown> {
  return (source, args, context, info) => {
    const value: unknown = defaultFieldResolver(source, args, context, info);
    if (info.fieldNodes.some((n) => has(n, 'slice'))) {
      const keys: (string | number)[] = [];
      for (let p: typeof info.path | undefined = info.path; p; p = p.prev) keys.push(p.key);
      sources.set(pathKey(keys.reverse()), value);
    }
    return value;
  };
}

type Obj = Record<string, unknown>;

/** A shape error, with the path of the field it concerns. */
export interface ShapeError {
  message: string;
  path: (string | number)[];
}

const has = (f: FieldNode, name: string) => f.directives?.some((d) => d.name.value === name) ?? false;

/** Whether `doc` uses any of the FHIR directives (most queries do not: their answers are left as they are). */
export function usesFhirDirectives(doc: DocumentNode): boolean {
  let found = false;
  const visit = (set: SelectionSetNode | undefined): void => {
    for (const s of set?.selections ?? []) {
      if (found) return;
      if (s.kind === Kind.FIELD && (has(s, 'first') || has(s, 'singleton') || has(s, 'flatten') || has(s, 'slice'))) found = true;
      else if (s.kind !== Kind.FRAGMENT_SPREAD) visit(s.selectionSet);
    }
  };
  for (const d of doc.definitions) if (d.kind === Kind.OPERATION_DEFINITION || d.kind === Kind.FRAGMENT_DEFINITION) visit(d.selectionSet);
  return found;
}

/** Puts `value` under `key` of `into`, making a list when the key is filled already or `many`. */
function put(into: Obj, key: string, value: unknown, many: boolean): void {
  const values = Array.isArray(value) ? value : [value];
  if (!(key in into)) {
    into[key] = many ? [...values] : value;
    return;
  }
  const before = into[key];
  into[key] = [...(Array.isArray(before) ? before : [before]), ...values];
}

/** `@slice`'s path on a field (validation made it a string, literal or variable), or undefined. */
function slicePath(f: FieldNode, variables: Record<string, unknown> | undefined): string | undefined {
  const arg = f.directives?.find((d) => d.name.value === 'slice')?.arguments?.find((a) => a.name.value === 'path');
  if (!arg) return undefined;
  if (arg.value.kind === Kind.VARIABLE) {
    const v = variables?.[arg.value.name.value];
    return typeof v === 'string' ? v : undefined;
  }
  return (arg.value as StringValueNode).value;
}


/** A value `@slice`'s path selected, as text in a field's name. */
const asName = (v: unknown) => (v !== null && typeof v === 'object' ? '' : String(v));

/**
 * Applies the directives of `op` to `data` in place; the errors of `@singleton`s with more than one item
 * and of `@slice`s that cannot be applied. `sources`: the raw values of sliced fields (sliceSourceResolver).
 * `clock`: the time the paths' `now()`, `today()` and `timeOfDay()` read (the app's); the system's when absent.
 */
export function applyFhirDirectives(
  doc: DocumentNode, op: OperationDefinitionNode, data: Obj, sources = new Map<string, unknown>(), variables?: Record<string, unknown>, clock?: Clock,
): ShapeError[] {
  // The request's variables over the operation's defaults (a variable left out takes its default).
  const defaults: Record<string, unknown> = {};
  for (const d of op.variableDefinitions ?? []) if (d.defaultValue) defaults[d.variable.name.value] = valueFromASTUntyped(d.defaultValue);
  variables = { ...defaults, ...variables };
  const compiled = new Map<string, CompiledValues | string>();
  const budget = { left: MAX_SLICE_VISITS, limit: MAX_SLICE_VISITS, what: "a request's @slice paths" };
  // Every path of the request reads one instant (N1 § 5.10.1 has one per evaluation), the app's when given.
  const now = clock?.now() ?? Date.now();
  const ctx = { resource: undefined, rootResource: undefined, budget, clock: { now: () => now } };
  /** The name suffix of each item of a sliced field (`.official`), or an error message. */
  const sliceNames = (f: FieldNode, at: (string | number)[]): string[] | string => {
    const path = slicePath(f, variables);
    if (path === undefined) return '@slice needs a path';
    if (has(f, 'first')) return '@slice cannot be used with @first';
    if (!sources.has(pathKey(at))) return `@slice applies to the elements of a resource: ${f.name.value} is not one`;
    const raw = sources.get(pathKey(at));
    const items = Array.isArray(raw) ? raw : [raw];
    if (path === '$index') return items.map((_, i) => `.${i}`);
    let c = compiled.get(path);
    if (c === undefined) {
      try {
        c = compileValues(path, FHIRPATH_TYPES);
      } catch (err) {
        if (!(err instanceof FhirPathSyntaxError || err instanceof UnsupportedFhirPath)) throw err;
        c = `@slice: the path '${path}' cannot be evaluated: ${err.message}`;
      }
      compiled.set(path, c);
    }
    if (typeof c === 'string') return c;
    const names: string[] = [];
    for (const item of items) {
      try {
        names.push(`.${c(item, undefined, ctx).map(asName).join('')}`);
      } catch (err) {
        if (err instanceof FhirPathEvaluationError) return `@slice: the path '${path}' could not be evaluated: ${err.message}`;
        throw err;
      }
    }
    return names;
  };
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const d of doc.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments.set(d.name.value, d);
  const errors: ShapeError[] = [];
  /** The fields of a selection set, fragments expanded (each fragment once per set: the validator refused cycles). */
  const fieldsOf = (set: SelectionSetNode, out: FieldNode[] = []): FieldNode[] => {
    for (const s of set.selections) {
      if (s.kind === Kind.FIELD) out.push(s);
      else if (s.kind === Kind.INLINE_FRAGMENT) fieldsOf(s.selectionSet, out);
      else {
        const f = fragments.get(s.name.value);
        if (f) fieldsOf(f.selectionSet, out);
      }
    }
    return out;
  };
  /**
   * Shapes the object `value` as `set` asks, its fields first (at `path`, the response path graphql-js
   * answered, for errors and sliced fields), each field's name followed by `suffix` (the slices it is in).
   */
  const shape = (set: SelectionSetNode, value: Obj, path: (string | number)[], suffix: string): void => {
    const done = new Set<string>();
    for (const f of fieldsOf(set)) {
      const key = f.alias?.value ?? f.name.value;
      if (done.has(key) || !(key in value)) continue;
      done.add(key);
      let child = value[key];
      const at = [...path, key];
      let names: string[] | undefined;
      if (has(f, 'slice') && child !== null && child !== undefined) {
        const sliced = sliceNames(f, at);
        if (typeof sliced === 'string') errors.push({ message: sliced, path: at });
        else names = sliced;
      }
      if (f.selectionSet && child !== null && typeof child === 'object') {
        if (Array.isArray(child)) child.forEach((c, i) => c !== null && typeof c === 'object' && shape(f.selectionSet!, c as Obj, [...at, i], suffix + (names?.[i] ?? '')));
        else shape(f.selectionSet, child as Obj, at, suffix + (names?.[0] ?? ''));
      }
      if (Array.isArray(child) && (has(f, 'first') || has(f, 'singleton'))) {
        if (has(f, 'singleton') && child.length > 1) errors.push({ message: `@singleton: ${key} holds ${child.length} items`, path: at });
        child = child[0] ?? null;
      }
      // A value (no fields of its own) has nothing to flatten: an error naming it, the value left in place (it was dropped).
      let flatten = has(f, 'flatten');
      if (flatten && f.selectionSet === undefined) {
        errors.push({ message: `@flatten applies to an element with fields: ${key} is a value`, path: at });
        flatten = false;
      }
      if (flatten) {
        delete value[key];
        const many = Array.isArray(child);
        for (const item of many ? (child as unknown[]) : [child]) {
          // A leaf's value (a decimal answers as raw JSON, an object) has no fields to flatten.
          if (item === null || typeof item !== 'object' || (JSON as unknown as { isRawJSON(v: unknown): boolean }).isRawJSON(item)) continue;
          for (const [k, v] of Object.entries(item as Obj)) if (v !== null && v !== undefined) put(value, k, v, many);
        }
      } else if (suffix) {
        delete value[key];
        value[key + suffix] = child;
      } else value[key] = child;
    }
  };
  shape(op.selectionSet, data, [], '');
  return errors;
}
