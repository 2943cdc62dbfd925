import type { CodeSystem, CodeSystemContent, ConceptDefinition } from '../model/code-system.ts';
import { standardsStatus } from '../model/datatypes.ts';
import { INACTIVE_STATUSES, type PropertyRole, propertyRoles, propertyValueText } from './concept-roles.ts';

/** One concept of an indexed CodeSystem with its resolved hierarchy and status flags. */
export interface ConceptEntry {
  readonly code: string;
  readonly definition: ConceptDefinition;
  /** Codes of the direct parents (nested `concept`, `parent` and inverted `child` properties). */
  readonly parents: readonly string[];
  readonly children: readonly string[];
  /** The parents that are concepts of this CodeSystem, for walking up without lookups. */
  readonly parentEntries: readonly ConceptEntry[];
  /**
   * Inactive: `inactive` property true, `status` retired (or inactive), or a standards-status `withdrawn`, as
   * the reference servers read a concept (a `deprecated` one stays active).
   */
  readonly inactive: boolean;
  /** Deprecated (still active): `status` deprecated, or the concept's standards-status `deprecated`. */
  readonly deprecated: boolean;
  /** The `status` property value, if any (e.g. `retired`). */
  readonly status: string | undefined;
  /** `notSelectable` (or HL7 v3 `abstract`) is true. */
  readonly abstract: boolean;
}

interface MutableEntry {
  code: string;
  definition: ConceptDefinition;
  parents: string[];
  children: string[];
  parentEntries: MutableEntry[];
  inactive: boolean;
  deprecated: boolean;
  status: string | undefined;
  abstract: boolean;
  /** Pre-order number in a tree-shaped hierarchy, and the last number of its subtree (-1: not numbered). */
  enter: number;
  exit: number;
}

/**
 * A CodeSystem compiled for lookups: codes by value (and lower-cased when the system is not
 * case sensitive), the is-a hierarchy as parent links, property roles. Built once per resource
 * version and shared by every compiled ValueSet that uses it (FHIR R4 CodeSystem, 4.8).
 */
export class CodeSystemIndex {
  readonly url: string;
  readonly version: string | undefined;
  readonly name: string | undefined;
  /** The language of the concepts' displays (CodeSystem.language). */
  readonly language: string | undefined;
  readonly content: CodeSystemContent;
  readonly caseSensitive: boolean;
  /** Property codes declared by the CodeSystem or used by one of its concepts. */
  readonly propertyCodes: ReadonlySet<string>;
  readonly roles: ReadonlyMap<string, PropertyRole>;
  private readonly byCode = new Map<string, MutableEntry>();
  private readonly byLowerCode: Map<string, MutableEntry> | undefined;
  /** True when every concept has at most one parent and no cycle: is-a is then an interval test. */
  private readonly tree: boolean;

  constructor(readonly resource: CodeSystem & { url: string }) {
    this.url = resource.url;
    this.version = resource.version;
    this.name = resource.name ?? resource.title;
    this.language = resource.language;
    this.content = resource.content;
    // R4 leaves an absent caseSensitive unspecified; only an explicit false relaxes matching.
    this.caseSensitive = resource.caseSensitive !== false;
    this.roles = propertyRoles(resource.property ?? []);
    const used = new Set((resource.property ?? []).map((p) => p.code));
    this.addConcepts(resource.concept ?? [], undefined, used);
    this.propertyCodes = used;
    this.linkProperties();
    this.tree = this.numberTree();
    this.byLowerCode = this.caseSensitive ? undefined : this.lowerCaseIndex();
  }


  get size(): number {
    return this.byCode.size;
  }

  /** The concept with this code, honouring `caseSensitive`. */
  find(code: string): ConceptEntry | undefined {
    return this.byCode.get(code) ?? this.byLowerCode?.get(code.toLowerCase());
  }

  /** Every concept, in definition order (depth first). */
  entries(): IterableIterator<ConceptEntry> {
    return this.byCode.values();
  }

  /** True when `code` is `ancestor` or one of its descendants (is-a, subsumption). */
  subsumes(ancestor: string, code: string): boolean {
    if (code === ancestor) return true;
    const entry = this.byCode.get(code);
    const target = this.byCode.get(ancestor);
    return entry !== undefined && target !== undefined && this.isA(entry, target);
  }

  /**
   * True when `entry` is `ancestor` or one of its descendants (both concepts of this index). In a tree
   * the descendants of a concept are the numbers of its subtree (a nested-set interval); otherwise
   * this walks parent links.
   */
  isA(entry: ConceptEntry, ancestor: ConceptEntry): boolean {
    if (this.tree) {
      const at = (entry as MutableEntry).enter;
      return (ancestor as MutableEntry).enter <= at && at <= (ancestor as MutableEntry).exit;
    }
    let current: ConceptEntry | undefined = entry;
    // Fast path for tree-shaped hierarchies: follow the single parent without allocating.
    for (let steps = 0; current !== undefined && steps <= this.byCode.size; steps++) {
      if (current === ancestor) return true;
      if (current.parentEntries.length !== 1) break;
      current = current.parentEntries[0];
    }
    return current !== undefined && current.parentEntries.length > 1 && searchUp(current, ancestor);
  }

  /**
   * `isA(e, ancestor)` for every `e` to come, decided once: in a tree the interval test; otherwise the
   * set of `ancestor`'s descendants, found once down the child links (a filter tests every concept,
   * and walking up from each took the product of the concepts and the depth: 15 s for 60,000 in a chain).
   */
  isAOf(ancestor: ConceptEntry): (entry: ConceptEntry) => boolean {
    if (this.tree) return (entry) => this.isA(entry, ancestor);
    const below = reach(ancestor, (e) => e.children.map((code) => this.byCode.get(code)!).filter((c) => c !== undefined));
    return (entry) => below.has(entry);
  }

  /** `isA(entry, e)` for every `e` to come: `entry`'s ancestors (and itself), found once up the parent links. */
  ancestorsOf(entry: ConceptEntry): (ancestor: ConceptEntry) => boolean {
    if (this.tree) return (ancestor) => this.isA(entry, ancestor);
    const above = reach(entry, (e) => e.parentEntries);
    return (ancestor) => above.has(ancestor);
  }

  private addConcepts(concepts: readonly ConceptDefinition[], parent: string | undefined, used: Set<string>): void {
    for (const definition of concepts) {
      let entry = this.byCode.get(definition.code);
      if (entry === undefined) {
        entry = this.newEntry(definition);
        this.byCode.set(definition.code, entry);
        for (const p of definition.property ?? []) used.add(p.code);
      }
      if (parent !== undefined) addUnique(entry.parents, parent);
      if (definition.concept !== undefined) this.addConcepts(definition.concept, definition.code, used);
    }
  }

  private newEntry(definition: ConceptDefinition): MutableEntry {
    const entry: MutableEntry = {
      code: definition.code,
      definition,
      parents: [],
      children: [],
      parentEntries: [],
      inactive: false,
      deprecated: false,
      status: undefined,
      abstract: false,
      enter: -1,
      exit: -1,
    };
    for (const p of definition.property ?? []) {
      const role = this.roles.get(p.code);
      // A boolean property; R5 content written as a code (`true`) is read the same way.
      if (role === 'inactive') entry.inactive ||= p.valueBoolean === true || p.valueCode === 'true';
      else if (role === 'notSelectable') entry.abstract ||= p.valueBoolean === true;
      else if (role === 'status') entry.status = propertyValueText(p);
    }
    if (entry.status !== undefined && INACTIVE_STATUSES.has(entry.status)) entry.inactive = true;
    // The extension's code, in any case: the reference servers compare it so.
    const standards = standardsStatus(definition.extension)?.toLowerCase();
    if (standards === 'withdrawn') entry.inactive = true;
    entry.deprecated = entry.status === 'deprecated' || standards === 'deprecated';
    return entry;
  }

  /** Adds the links of `parent`/`child` properties and fills every entry's children list. */
  private linkProperties(): void {
    for (const entry of this.byCode.values()) {
      for (const p of entry.definition.property ?? []) {
        const role = this.roles.get(p.code);
        const target = role === 'parent' || role === 'child' ? propertyValueText(p) : undefined;
        if (target === undefined || target === entry.code) continue;
        if (role === 'parent') addUnique(entry.parents, target);
        else {
          const child = this.byCode.get(target);
          if (child !== undefined) addUnique(child.parents, entry.code);
        }
      }
    }
    // Parents are unique per entry, so each (parent, child) pair is pushed once.
    for (const entry of this.byCode.values()) {
      for (const code of entry.parents) {
        const parent = this.byCode.get(code);
        if (parent === undefined) continue;
        parent.children.push(entry.code);
        entry.parentEntries.push(parent);
      }
    }
  }

  /**
   * Numbers a tree-shaped hierarchy depth first: each concept gets its pre-order number (`enter`) and
   * the last number of its subtree (`exit`). False, leaving the numbers unused, when a concept has
   * several parents or some concepts are only reachable through a cycle.
   */
  private numberTree(): boolean {
    for (const entry of this.byCode.values()) if (entry.parentEntries.length > 1) return false;
    const childrenOf = (e: MutableEntry) => e.children.map((code) => this.byCode.get(code)!);
    let next = 0;
    const frames: { entry: MutableEntry; kids: MutableEntry[]; i: number }[] = [];
    for (const root of this.byCode.values()) {
      if (root.parentEntries.length !== 0) continue;
      root.enter = next++;
      frames.push({ entry: root, kids: childrenOf(root), i: 0 });
      while (frames.length > 0) {
        const top = frames[frames.length - 1]!;
        if (top.i < top.kids.length) {
          const kid = top.kids[top.i++]!;
          kid.enter = next++;
          frames.push({ entry: kid, kids: childrenOf(kid), i: 0 });
        } else {
          top.entry.exit = next - 1;
          frames.pop();
        }
      }
    }
    return next === this.byCode.size;
  }

  private lowerCaseIndex(): Map<string, MutableEntry> {
    const lower = new Map<string, MutableEntry>();
    for (const entry of this.byCode.values()) {
      const key = entry.code.toLowerCase();
      if (!lower.has(key)) lower.set(key, entry);
    }
    return lower;
  }
}

/** Depth-first search up a multi-parent hierarchy (a DAG, or a cycle in bad data). */
function searchUp(from: ConceptEntry, ancestor: ConceptEntry): boolean {
  const stack = [...from.parentEntries];
  const seen = new Set<ConceptEntry>();
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    if (entry === ancestor) return true;
    if (seen.has(entry)) continue;
    seen.add(entry);
    stack.push(...entry.parentEntries);
  }
  return false;
}

/** `from` and every concept reachable from it by `next` (each once, whatever cycles the links make). */
function reach(from: ConceptEntry, next: (e: ConceptEntry) => readonly ConceptEntry[]): Set<ConceptEntry> {
  const seen = new Set<ConceptEntry>([from]);
  const stack = [from];
  for (let e = stack.pop(); e !== undefined; e = stack.pop()) {
    for (const n of next(e)) {
      if (seen.has(n)) continue;
      seen.add(n);
      stack.push(n);
    }
  }
  return seen;
}

/** The values of the longer lists pushed through addUnique, for testing membership without a scan. */
const LIST_VALUES = new WeakMap<string[], Set<string>>();

/** Pushes `value` unless `list` holds it (a concept named the child of 60,000 others scanned its list for each: 3 s). */
function addUnique(list: string[], value: string): void {
  if (list.length < 16) {
    if (!list.includes(value)) list.push(value);
    return;
  }
  let values = LIST_VALUES.get(list);
  if (values === undefined) LIST_VALUES.set(list, (values = new Set(list)));
  if (values.has(value)) return;
  values.add(value);
  list.push(value);
}
