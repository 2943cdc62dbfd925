/**
 * The directives FHIR R4 graphql.html defines on fields, applied to the answer graphql-js computed
 * (they change its shape, which GraphQL execution cannot): `@first` (a list's first item, or null),
 * `@singleton` (a list of at most one item as that item; more is an error) and `@flatten` (the field's
 * own fields put in its parent, as lists when the field is a list or a name is filled twice). `@slice`
 * is not supported (an unknown directive is a validation error).
 */
import { DirectiveLocation, GraphQLDirective, Kind, type DocumentNode, type FieldNode, type FragmentDefinitionNode, type OperationDefinitionNode, type SelectionSetNode } from 'graphql';

export const FHIR_DIRECTIVES: readonly GraphQLDirective[] = [
  new GraphQLDirective({ name: 'first', description: 'A list field answers its first item (null for none): graphql.html', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'singleton', description: 'A list field of at most one item answers it (null for none); more is an error: graphql.html', locations: [DirectiveLocation.FIELD] }),
  new GraphQLDirective({ name: 'flatten', description: "The field's own fields are put in its parent, as lists where the field is a list: graphql.html", locations: [DirectiveLocation.FIELD] }),
];

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
      if (s.kind === Kind.FIELD && (has(s, 'first') || has(s, 'singleton') || has(s, 'flatten'))) found = true;
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

/** Applies the directives of `op` to `data` in place; the errors of `@singleton`s with more than one item. */
export function applyFhirDirectives(doc: DocumentNode, op: OperationDefinitionNode, data: Obj): ShapeError[] {
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
  /** Shapes the object `value` as `set` asks, its fields first (at `path`, for errors). */
  const shape = (set: SelectionSetNode, value: Obj, path: (string | number)[]): void => {
    const done = new Set<string>();
    for (const f of fieldsOf(set)) {
      const key = f.alias?.value ?? f.name.value;
      if (done.has(key) || !(key in value)) continue;
      done.add(key);
      let child = value[key];
      const at = [...path, key];
      if (f.selectionSet && child !== null && typeof child === 'object') {
        if (Array.isArray(child)) child.forEach((c, i) => c !== null && typeof c === 'object' && shape(f.selectionSet!, c as Obj, [...at, i]));
        else shape(f.selectionSet, child as Obj, at);
      }
      if (Array.isArray(child) && (has(f, 'first') || has(f, 'singleton'))) {
        if (has(f, 'singleton') && child.length > 1) errors.push({ message: `@singleton: ${key} holds ${child.length} items`, path: at });
        child = child[0] ?? null;
      }
      value[key] = child;
      if (has(f, 'flatten')) {
        delete value[key];
        const many = Array.isArray(child);
        for (const item of many ? (child as unknown[]) : [child]) {
          if (item === null || typeof item !== 'object') continue;
          for (const [k, v] of Object.entries(item as Obj)) if (v !== null && v !== undefined) put(value, k, v, many);
        }
      }
    }
  };
  shape(op.selectionSet, data, []);
  return errors;
}
