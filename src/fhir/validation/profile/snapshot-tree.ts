/**
 * A snapshot's elements as a tree, for snapshot generation (snapshot.ts): each element with its children
 * and its slices, paths and ids made again when written out, so that children copied from a datatype's
 * definition or into a slice are named where they now stand (`Quantity.value` below `Observation.value[x]`
 * of the slice `a` is `Observation.component:a.value[x].value`).
 */
type Json = Record<string, unknown>;

export interface Node {
  /** The last step of its path (`value[x]`, `coding`). */
  name: string;
  sliceName?: string;
  /** Its path (no slice names), as it is to be written. */
  path: string;
  /** The element as constrained so far (its id and path are made again when written). */
  ed: Json;
  /** The element as the base had it: what a new slice of it starts from. */
  orig: Json;
  children: Node[];
  slices: Node[];
  /** Whether it comes from the base (else it is a slice the differential made). */
  fromBase: boolean;
  /** A choice's types the differential named it by (`valueQuantity`, `valueString`): the types it is narrowed to. */
  renamed?: string[];
  /** Whether a differential element gave its types (then naming it by a type narrows it no further). */
  typedByDiff?: boolean;
  /**
   * A slice standing in place of its element, which nothing slices (`Composition.date:IssueDate` of
   * HL7's catalog): a child, written with its slice name in its id.
   */
  inPlace?: true;
}

/**
 * A snapshot's elements (in order) as a tree; elements whose owner is not before them are left out, but
 * for a slice standing in place of an element nothing slices (HL7's snapshots write them so), which is that element.
 */
export function buildTree(elements: readonly Json[]): Node {
  const byId = new Map<string, Node>();
  let root: Node | undefined;
  for (const ed of elements) {
    if (ed === null || typeof ed !== 'object') continue;
    const id = typeof ed.id === 'string' ? ed.id : String(ed.path);
    if (root === undefined) {
      root = node(String(ed.path), String(ed.path), undefined, ed);
      byId.set(id, root);
      continue;
    }
    const dot = id.lastIndexOf('.');
    if (dot < 0) continue;
    const last = id.slice(dot + 1);
    const colon = last.indexOf(':');
    const parentId = id.slice(0, dot);
    if (colon < 0) {
      const parent = byId.get(parentId);
      if (parent === undefined) continue;
      const child = node(last, `${parent.path}.${last}`, undefined, ed);
      parent.children.push(child);
      byId.set(id, child);
      continue;
    }
    const sliceName = last.slice(colon + 1);
    const slash = sliceName.lastIndexOf('/');
    const ownerId = slash < 0 ? `${parentId}.${last.slice(0, colon)}` : `${parentId}.${last.slice(0, colon)}:${sliceName.slice(0, slash)}`;
    const owner = byId.get(ownerId);
    if (owner === undefined) {
      const parent = slash < 0 ? byId.get(parentId) : undefined;
      if (parent === undefined) continue;
      const name = last.slice(0, colon);
      const inPlace = node(name, `${parent.path}.${name}`, sliceName, ed);
      inPlace.inPlace = true;
      parent.children.push(inPlace);
      byId.set(id, inPlace);
      continue;
    }
    const slice = node(owner.name, owner.path, sliceName, ed);
    owner.slices.push(slice);
    byId.set(id, slice);
  }
  if (root === undefined) throw new Error('A snapshot without elements');
  return root;
}

function node(name: string, path: string, sliceName: string | undefined, ed: Json): Node {
  const n: Node = { name, path, ed: structuredClone(ed), orig: ed, children: [], slices: [], fromBase: true };
  if (sliceName !== undefined) n.sliceName = sliceName;
  return n;
}

/**
 * A copy of `n` as the base had it (its children and the base's slices below them too), standing at
 * `path`; without `n`'s own slices when `ownSlices` is false (a new slice of `n` has none: copying the
 * hundreds a deep profile chain gave it, to drop them, made each new slice cost as much as all of them).
 */
export function cloneBase(n: Node, path = n.path, ownSlices = true): Node {
  const out: Node = {
    name: n.name, path, ed: structuredClone(n.orig), orig: n.orig, fromBase: true,
    children: n.children.map((c) => cloneBase(c, `${path}.${c.name}`)),
    slices: ownSlices ? n.slices.filter((s) => s.fromBase).map((s) => cloneBase(s, path)) : [],
  };
  if (n.sliceName !== undefined) out.sliceName = n.sliceName;
  if (n.inPlace) out.inPlace = true;
  return out;
}

/** A copy of `n` as constrained so far (a re-slice starts from its slice as the profile made it); without its own slices when `ownSlices` is false. */
export function cloneCurrent(n: Node, ownSlices = true): Node {
  const out: Node = { ...n, ed: structuredClone(n.ed), children: n.children.map((c) => cloneCurrent(c)), slices: ownSlices ? n.slices.map((s) => cloneCurrent(s)) : [] };
  return out;
}

/** The element (not a slice) at `path` (`Questionnaire.item`). */
export function findByPath(root: Node, path: string): Node | undefined {
  const names = path.split('.');
  if (names[0] !== root.name) return undefined;
  let at: Node | undefined = root;
  for (const name of names.slice(1)) {
    at = at.children.find((c) => c.name === name);
    if (at === undefined) return undefined;
  }
  return at;
}

/** The tree's elements in snapshot order: each element, its children, then its slices (each with its own). */
export function writeTree(root: Node): Json[] {
  const out: Json[] = [];
  write(root, root.name, root.name, out);
  return out;
}

function write(n: Node, id: string, elementId: string, out: Json[]): void {
  const { id: _id, path: _path, ...rest } = n.ed;
  out.push({ id, path: n.path, ...rest });
  for (const c of n.children) {
    const at = c.inPlace ? `${id}.${c.name}:${c.sliceName}` : `${id}.${c.name}`;
    write(c, at, `${id}.${c.name}`, out);
  }
  for (const s of n.slices) write(s, `${elementId}:${s.sliceName}`, elementId, out);
}
