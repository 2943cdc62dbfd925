/**
 * Snapshot generation (R4 profiling.html "Snapshot generation", elementdefinition.html): the snapshot of a
 * constraining StructureDefinition from its `differential` and its `baseDefinition`'s snapshot (itself
 * generated when the base has only a differential). Each differential element is found in the base's
 * element tree by its id (or its path and the slices before it), below a complex datatype's element
 * (expanded from that type's definition or the profile it names) or a contentReference, and narrows it:
 * cardinality within the base's, types among the base's, bindings, fixed and pattern values, constraints
 * appended, the rest replaced. Slices are copies of the sliced element as the base had it; `value[x]`
 * constrained as `valueQuantity` keeps its path and narrows its types, as HL7's R4 snapshots do.
 */
import { R4_RESOURCE_TYPES } from '../../resource-types.ts';
import { MAX_SNAPSHOT_ELEMENTS } from './compile.ts';
import { merge, SnapshotError, typesOf } from './snapshot-merge.ts';
import { buildTree, cloneBase, cloneCurrent, findByPath, writeTree, type Node } from './snapshot-tree.ts';

export { SnapshotError } from './snapshot-merge.ts';

type Json = Record<string, unknown>;

/** A StructureDefinition by canonical (`url` or `url|version`): the tenant's, else R4 core's; undefined when unknown. */
export type DefinitionLookup = (canonical: string) => Json | undefined | Promise<Json | undefined>;

/**
 * Whether every code of the value set `narrower` is in `wider` (canonical URLs), as the tenant's
 * terminology tells: R4 lets a profile replace a required binding's value set only by a subset of it.
 */
export type ValueSetSubset = (narrower: string, wider: string) => Promise<{ kind: 'subset' } | { kind: 'not-subset'; code: string } | { kind: 'unknown'; why: string }>;

/** What generation may use besides the definitions, and where it says what it could not decide. */
export interface SnapshotOptions {
  /** Decides a required binding's value set replaced by another; without it, the replacement is a warning. */
  valueSets?: ValueSetSubset;
  /** Warnings: what the generator accepted without being able to check it (`element`: the differential element). */
  warnings?: { element: string; text: string }[];
}

/** How many base definitions a profile may stand on (a profile of a profile of ...), including the datatype profiles it expands. */
export const MAX_DERIVATION_DEPTH = 16;

const CORE = 'http://hl7.org/fhir/StructureDefinition/';
const RESOURCE_TYPES = new Set(R4_RESOURCE_TYPES);

interface Run {
  lookup: DefinitionLookup;
  options: SnapshotOptions;
  /** The urls whose snapshot is being generated, outermost first (a cycle is an error). */
  chain: string[];
  count: number;
  /** The slices this profile's differential made (their `min` may be below the sliced element's). */
  created: WeakSet<Node>;
}

/** `sd` with `snapshot` generated from its differential and its base's snapshot (sd itself is not changed). */
export async function generateSnapshot(sd: Json, lookup: DefinitionLookup, options: SnapshotOptions = {}): Promise<Json> {
  // Each canonical is looked up once per generation (a differential of thousands of elements typed with one profile asks for it thousands of times).
  const found = new Map<string, Json | undefined | Promise<Json | undefined>>();
  const once: DefinitionLookup = (canonical) => {
    if (!found.has(canonical)) found.set(canonical, lookup(canonical));
    return found.get(canonical);
  };
  const elements = await snapshotElements(sd, { lookup: once, options, chain: [], count: 0, created: new WeakSet() });
  return { ...sd, snapshot: { element: elements } };
}

/** The snapshot elements of `sd`: its own when it has a snapshot, else generated. */
async function elementsOf(sd: Json, run: Run): Promise<Json[]> {
  const own = (sd.snapshot as Json | undefined)?.element;
  if (Array.isArray(own) && own.length > 0) return own as Json[];
  return snapshotElements(sd, run);
}

async function snapshotElements(sd: Json, run: Run): Promise<Json[]> {
  const label = labelOf(sd);
  if (run.chain.includes(label)) throw new SnapshotError(`The profile ${run.chain[0]} derives from itself: ${[...run.chain, label].join(' -> ')}`);
  if (run.chain.length >= MAX_DERIVATION_DEPTH) throw new SnapshotError(`The profile ${run.chain[0]} stands on more than ${MAX_DERIVATION_DEPTH} definitions: ${run.chain.join(' -> ')}`);
  if (sd.derivation !== undefined && sd.derivation !== 'constraint') throw new SnapshotError(`${label} is no constraint (derivation ${JSON.stringify(sd.derivation)}): only a profile's snapshot is generated, a base definition's is its own`);
  const diff = (sd.differential as Json | undefined)?.element;
  if (!Array.isArray(diff) || diff.length === 0) throw new SnapshotError(`${label} has neither a snapshot nor a differential`);
  if (diff.length > MAX_SNAPSHOT_ELEMENTS) throw new SnapshotError(`${label} has ${diff.length} differential elements, more than the ${MAX_SNAPSHOT_ELEMENTS} Cinder generates a snapshot from`);
  if (typeof sd.baseDefinition !== 'string') throw new SnapshotError(`${label} has no baseDefinition to generate its snapshot from`);
  const chain = [...run.chain, label];
  const inner: Run = { ...run, chain, count: 0 };
  const base = await run.lookup(sd.baseDefinition);
  if (base === undefined) throw new SnapshotError(`The base definition ${sd.baseDefinition} of ${label} is not known`);
  if (typeof sd.type === 'string' && base.type !== sd.type) throw new SnapshotError(`${label} constrains ${sd.type} but its base ${sd.baseDefinition} defines ${String(base.type)}`);
  const root = buildTree(await elementsOf(base, inner));
  for (const ed of normalizeIds(diff as Json[], root.name)) await apply(root, ed, inner, label);
  checkSliceMins(root, root.name);
  const out = writeTree(root);
  if (out.length > MAX_SNAPSHOT_ELEMENTS) throw new SnapshotError(`The snapshot of ${label} would hold ${out.length} elements, more than the ${MAX_SNAPSHOT_ELEMENTS} Cinder compiles`);
  return out;
}

function labelOf(sd: Json): string {
  const url = typeof sd.url === 'string' ? sd.url : `StructureDefinition/${String(sd.id ?? '(no id)')}`;
  return typeof sd.version === 'string' ? `${url}|${sd.version}` : url;
}

/**
 * The differential's elements with an id each: their own, else made from the path and the slices named
 * before (R4 lets a differential give paths only: `Observation.component` with sliceName `a`, then
 * `Observation.component.code` is within the slice `a`).
 */
function normalizeIds(diff: Json[], rootName: string): Json[] {
  const current = new Map<string, string>();
  return diff.map((ed, i) => {
    if (ed === null || typeof ed !== 'object' || Array.isArray(ed)) throw new SnapshotError(`The differential element ${i} is no ElementDefinition`, `differential.element[${i}]`);
    const path = typeof ed.path === 'string' ? ed.path : undefined;
    if (path === undefined) throw new SnapshotError(`The differential element ${i} has no path`, `differential.element[${i}]`);
    if (path !== rootName && !path.startsWith(`${rootName}.`)) throw new SnapshotError(`The differential element ${String(ed.id ?? path)} is not within ${rootName}`, String(ed.id ?? path));
    let id = typeof ed.id === 'string' ? ed.id : undefined;
    if (id === undefined) {
      const dot = path.lastIndexOf('.');
      const parent = dot < 0 ? '' : (current.get(path.slice(0, dot)) ?? path.slice(0, dot));
      const own = dot < 0 ? path : `${parent}.${path.slice(dot + 1)}`;
      id = typeof ed.sliceName === 'string' ? `${own}:${ed.sliceName}` : own;
    }
    current.set(path, id);
    for (const key of current.keys()) if (key.startsWith(`${path}.`)) current.delete(key);
    return { ...ed, id };
  });
}

/** The steps of an element id: `Observation.component:a.code` is [Observation], [component, a], [code]. */
function steps(id: string): { name: string; slice?: string }[] {
  return id.split('.').map((seg) => {
    const colon = seg.indexOf(':');
    return colon < 0 ? { name: seg } : { name: seg.slice(0, colon), slice: seg.slice(colon + 1) };
  });
}

/** Applies one differential element to the tree. */
async function apply(root: Node, ed: Json, run: Run, label: string): Promise<void> {
  const id = ed.id as string;
  const path = steps(id);
  if (path[0]!.name !== root.name || path[0]!.slice !== undefined) throw new SnapshotError(`The differential element ${id} is not within ${root.name}`, id);
  let node = root;
  let inSlice = false;
  for (let i = 1; i < path.length; i++) {
    const step = path[i]!;
    if (node.children.length === 0) await expand(node, root, run, id);
    const found = findChild(node, step.name);
    if (found === undefined) throw new SnapshotError(`The differential element ${id} names ${step.name}, which ${node.path} does not have in the base ${label} stands on`, id);
    node = found.node;
    const renamed = found.type;
    if (renamed !== undefined) {
      narrowChoice(node, renamed);
      // Outside slices, HL7's R4 snapshots make `valueQuantity` the type slice `value[x]:valueQuantity` of `value[x]`.
      if (!inSlice && step.slice === undefined) {
        node.ed.slicing ??= { discriminator: [{ type: 'type', path: '$this' }], ordered: false, rules: 'closed' };
        node = sliceOf(node, step.name, id, run);
        narrowChoice(node, renamed);
      }
    }
    if (step.slice !== undefined) {
      node = sliceOf(node, step.slice, id, run);
      inSlice = true;
    }
  }
  if (ed.binding !== null && typeof ed.binding === 'object') await checkValueSet(node.ed.binding as Json | undefined, ed.binding as Json, run, id);
  if (Array.isArray(ed.type)) {
    await checkTargets(typesOf(node.ed), ed.type as Json[], run, id);
    await checkProfiles(ed.type as Json[], run, id);
  }
  merge(node, ed, id, run.created.has(node), label.startsWith('StructureDefinition/') ? undefined : label.split('|')[0]);
  if (Array.isArray(ed.type)) await profileConstraints(node, run);
}

/**
 * A Reference's targets narrowed: the resource type each target of the differential names (an R4 type's
 * url, or a profile's, whose `type` says it) must be one the base's targets allow (any, when a base target
 * is Resource or cannot be resolved). A target profile Cinder cannot find is left unchecked.
 */
async function checkTargets(base: Json[], diff: Json[], run: Run, id: string): Promise<void> {
  const typeOf = async (url: unknown): Promise<string | undefined> => {
    if (typeof url !== 'string') return undefined;
    const name = url.startsWith(CORE) ? url.slice(CORE.length).split('|')[0]! : undefined;
    if (name !== undefined && RESOURCE_TYPES.has(name)) return name;
    const sd = await run.lookup(url);
    return typeof sd?.type === 'string' ? sd.type : undefined;
  };
  for (const t of diff) {
    if (t === null || typeof t !== 'object' || !Array.isArray(t.targetProfile)) continue;
    const same = base.find((b) => b.code === t.code);
    if (!Array.isArray(same?.targetProfile) || same.targetProfile.length === 0) continue;
    const allowed = await Promise.all(same.targetProfile.map(typeOf));
    if (allowed.some((a) => a === undefined || a === 'Resource')) continue;
    for (const target of t.targetProfile) {
      const type = await typeOf(target);
      if (type !== undefined && !allowed.includes(type)) throw new SnapshotError(`${id}: the target ${String(target)} (${type}) is not one the base allows (${[...new Set(allowed)].join(', ')})`, id);
    }
  }
}

/**
 * A required binding's value set replaced by another (R4 profiling.html: a constraint may only narrow a
 * required binding's codes): every code of the new value set must be in the base's, decided by the
 * tenant's terminology (an error naming a code that is not); where it cannot be decided (no terminology
 * here, a value set or code system it does not hold, too many codes), a warning.
 */
async function checkValueSet(base: Json | undefined, diff: Json, run: Run, id: string): Promise<void> {
  // A binding weakened is merge's error, asked of no terminology.
  if (base?.strength !== 'required' || typeof base.valueSet !== 'string' || typeof diff.valueSet !== 'string' || (diff.strength !== undefined && diff.strength !== 'required')) return;
  const wider = base.valueSet.split('|')[0]!;
  const narrower = diff.valueSet.split('|')[0]!;
  if (narrower === wider) return;
  const verdict = run.options.valueSets === undefined ? { kind: 'unknown' as const, why: 'no terminology is at hand here' } : await run.options.valueSets(narrower, wider);
  if (verdict.kind === 'subset') return;
  if (verdict.kind === 'not-subset') throw new SnapshotError(`${id}: the base's required binding to ${wider} may be replaced only by a subset of it; ${narrower} has ${verdict.code}, which ${wider} does not`, id);
  run.options.warnings?.push({ element: id, text: `${id}: the base's required binding to ${wider} is replaced by ${narrower}, which must be a subset of it; not checked: ${verdict.why}` });
}

/**
 * Each profile a type names (`type.profile`) must constrain that type: a Quantity profiled as SimpleQuantity,
 * an Extension by an extension definition, a resource type (or Resource) by a profile of a resource. A profile
 * Cinder cannot find is left unchecked.
 */
async function checkProfiles(diff: Json[], run: Run, id: string): Promise<void> {
  for (const t of diff) {
    if (t === null || typeof t !== 'object' || typeof t.code !== 'string' || !Array.isArray(t.profile)) continue;
    for (const url of t.profile) {
      if (typeof url !== 'string') continue;
      const sd = await run.lookup(url);
      const type = sd?.type;
      if (typeof type !== 'string' || type === t.code) continue;
      if ((t.code === 'Resource' || t.code === 'DomainResource') && RESOURCE_TYPES.has(type)) continue;
      throw new SnapshotError(`${id}: the profile ${url} constrains ${type}, not the type ${t.code} it is given for`, id);
    }
  }
}

/**
 * The slices of an element (and the re-slices of a slice) must fit within its `max`: their `min`s summed
 * may not exceed it (R4 profiling.html, Slicing), or no instance could have them all.
 */
function checkSliceMins(node: Node, id: string): void {
  for (const c of node.children) checkSliceMins(c, `${id}.${c.name}`);
  const base = node.sliceName === undefined ? id : id.slice(0, id.lastIndexOf(':'));
  for (const s of node.slices) checkSliceMins(s, `${base}:${s.sliceName}`);
  const max = node.ed.max;
  if (node.slices.length === 0 || typeof max !== 'string' || max === '*') return;
  const sum = node.slices.reduce((n, s) => n + (typeof s.ed.min === 'number' ? s.ed.min : 0), 0);
  if (sum <= Number(max)) return;
  const last = node.slices[node.slices.length - 1]!;
  const at = `${base}:${last.sliceName}`;
  throw new SnapshotError(`${at}: the slices of ${id} need at least ${sum} values (their min summed), above its max ${max}`, at);
}

/** An element whose one type names a datatype profile (`Quantity` as SimpleQuantity) carries that profile's invariants too, as HL7's snapshots do. */
async function profileConstraints(node: Node, run: Run): Promise<void> {
  const types = typesOf(node.ed);
  if (types.length !== 1 || types[0]!.code === 'Extension' || !Array.isArray(types[0]!.profile) || types[0]!.profile.length !== 1) return;
  const sd = await run.lookup(String(types[0]!.profile[0]));
  if (sd === undefined) return;
  const root = (await elementsOf(sd, { ...run, chain: [...run.chain] }))[0];
  const own = Array.isArray(node.ed.constraint) ? (node.ed.constraint as Json[]) : [];
  const added = (Array.isArray(root?.constraint) ? (root.constraint as Json[]) : []).filter((c) => !own.some((o) => o.key === c.key));
  if (added.length > 0) node.ed.constraint = [...own, ...added];
}

/** The child `name` names: itself, or a choice element `value[x]` named for one of its types (`valueQuantity`). */
function findChild(node: Node, name: string): { node: Node; type?: string } | undefined {
  const exact = node.children.find((c) => c.name === name);
  if (exact !== undefined) return { node: exact };
  for (const c of node.children) {
    if (!c.name.endsWith('[x]')) continue;
    const stem = c.name.slice(0, -3);
    if (!name.startsWith(stem) || name.length === stem.length) continue;
    const suffix = name.slice(stem.length).toLowerCase();
    // The types it has now, or had in the base when an earlier name narrowed it to others.
    const codes = [...typesOf(c.ed), ...(c.typedByDiff === true ? [] : typesOf(c.orig))].map((t) => String(t.code));
    const type = codes.find((code) => code.toLowerCase() === suffix);
    if (type !== undefined) return { node: c, type };
  }
  return undefined;
}

/**
 * A choice element named by one of its types (`valueQuantity`) keeps only the types it has been named by
 * (`valueQuantity` and `valueString`: Quantity and string), unless a differential element gave its types.
 */
function narrowChoice(node: Node, type: string): void {
  if (node.typedByDiff === true || node.renamed?.includes(type)) return;
  const named = (list: Json[]) => list.filter((t) => t.code === type);
  if (node.renamed === undefined) {
    node.renamed = [type];
    node.ed.type = named(typesOf(node.ed));
  } else {
    node.renamed.push(type);
    node.ed.type = [...typesOf(node.ed), ...named(typesOf(node.orig))];
  }
}

/** The slice `name` of `node` (`s/r`: the re-slice `r` of its slice `s`), made from the sliced element as the base has it when new. */
function sliceOf(node: Node, name: string, id: string, run: Run): Node {
  if (node.inPlace && node.sliceName === name) return node;
  const slash = name.lastIndexOf('/');
  const owner = slash < 0 ? node : sliceOf(node, name.slice(0, slash), id, run);
  const existing = owner.slices.find((s) => s.sliceName === name);
  if (existing !== undefined) return existing;
  if (owner.ed.slicing === undefined) {
    const isExtension = node.name === 'extension' || node.name === 'modifierExtension';
    if (isExtension) owner.ed.slicing = { discriminator: [{ type: 'value', path: 'url' }], ordered: false, rules: 'open' };
    else if (owner === node && owner.slices.length === 0 && !owner.inPlace) {
      // Elsewhere R4's own profiles name slices of elements nothing slices (catalog's `Composition.date:IssueDate`): HL7's
      // snapshots write such a slice in the element's place, its slice name kept, and so does Cinder (a second name becomes a slice after it).
      owner.inPlace = true;
      owner.sliceName = name;
      owner.ed.sliceName = name;
      return owner;
    }
  }
  // A slice starts from the sliced element as the base has it; a re-slice from its slice as constrained.
  const slice = owner === node ? cloneBase(owner, owner.path, false) : cloneCurrent(owner, false);
  slice.slices = [];
  delete slice.inPlace;
  delete slice.ed.slicing;
  slice.ed.sliceName = name;
  slice.sliceName = name;
  slice.fromBase = false;
  run.created.add(slice);
  count(run, slice, id);
  owner.slices.push(slice);
  return slice;
}

function count(run: Run, node: Node, id: string): void {
  run.count += size(node);
  if (run.count > MAX_SNAPSHOT_ELEMENTS) throw new SnapshotError(`The snapshot would hold more than the ${MAX_SNAPSHOT_ELEMENTS} elements Cinder compiles (at ${id})`, id);
}

function size(node: Node): number {
  let n = 1;
  for (const c of node.children) n += size(c);
  for (const s of node.slices) n += size(s);
  return n;
}

/**
 * Lists the children of an element that has none in the tree: those of the element its contentReference
 * names, else those of its one type's definition (the profile the type names, or the R4 type).
 */
async function expand(node: Node, root: Node, run: Run, id: string): Promise<void> {
  const ref = node.ed.contentReference;
  if (typeof ref === 'string') {
    const target = findByPath(root, ref.slice(ref.indexOf('#') + 1));
    if (target === undefined) throw new SnapshotError(`${node.path} refers to ${ref}, which the base does not have`, id);
    node.children = target.children.map((c) => cloneBase(c, `${node.path}.${c.name}`));
    count(run, node, id);
    return;
  }
  const types = typesOf(node.ed);
  const codes = [...new Set(types.map((t) => String(t.code)))];
  if (codes.length !== 1) {
    const how = node.name.endsWith('[x]') ? ` (name it by its type, as ${node.name.slice(0, -3)}${codes[0]?.replace(/^./, (c) => c.toUpperCase()) ?? 'Quantity'})` : '';
    throw new SnapshotError(`The differential element ${id} is below ${node.path}, whose type is ${codes.length === 0 ? 'not given' : `one of ${codes.join(', ')}`}: constrain it to one type first${how}`, id);
  }
  const profiles = types.flatMap((t) => (Array.isArray(t.profile) ? (t.profile as unknown[]) : [])).filter((p): p is string => typeof p === 'string');
  const url = profiles.length === 1 ? profiles[0]! : codes[0]!.includes(':') ? codes[0]! : CORE + codes[0];
  const sd = await run.lookup(url);
  if (sd === undefined) throw new SnapshotError(`The definition ${url} of ${node.path}'s type is not known, so the differential element ${id} below it cannot be placed`, id);
  await expandFrom(node, sd, run, id);
}

async function expandFrom(node: Node, sd: Json, run: Run, id: string): Promise<void> {
  const typeRoot = buildTree(await elementsOf(sd, { ...run, chain: [...run.chain] }));
  node.children = typeRoot.children.map((c) => cloneBase(c, `${node.path}.${c.name}`));
  count(run, node, id);
}
