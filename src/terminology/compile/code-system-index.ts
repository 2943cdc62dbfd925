import type { CodeSystem, CodeSystemContent, ConceptDefinition } from '../model/code-system.ts';
import { INACTIVE_STATUSES, type PropertyRole, propertyRoles, propertyValueText } from './concept-roles.ts';

/** One concept of an indexed CodeSystem with its resolved hierarchy and status flags. */
export interface ConceptEntry {
  readonly code: string;
  readonly definition: ConceptDefinition;
  /** Codes of the direct parents (nested `concept`, `parent` and inverted `child` properties). */
  readonly parents: readonly string[];
  readonly children: readonly string[];
  /** Inactive: `inactive` property true, or `status` retired / deprecated. */
  readonly inactive: boolean;
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
  inactive: boolean;
  status: string | undefined;
  abstract: boolean;
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
  readonly content: CodeSystemContent;
  readonly caseSensitive: boolean;
  /** Property codes declared by the CodeSystem or used by one of its concepts. */
  readonly propertyCodes: ReadonlySet<string>;
  readonly roles: ReadonlyMap<string, PropertyRole>;
  private readonly byCode = new Map<string, MutableEntry>();
  private readonly byLowerCode: Map<string, MutableEntry> | undefined;

  constructor(readonly resource: CodeSystem & { url: string }) {
    this.url = resource.url;
    this.version = resource.version;
    this.name = resource.name ?? resource.title;
    this.content = resource.content;
    // R4 leaves an absent caseSensitive unspecified; only an explicit false relaxes matching.
    this.caseSensitive = resource.caseSensitive !== false;
    this.roles = propertyRoles(resource.property ?? []);
    const used = new Set((resource.property ?? []).map((p) => p.code));
    this.addConcepts(resource.concept ?? [], undefined, used);
    this.propertyCodes = used;
    this.linkProperties();
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
    let entry = this.byCode.get(code);
    // Fast path for tree-shaped hierarchies: follow the single parent without allocating.
    for (let steps = 0; entry !== undefined && entry.parents.length === 1; steps++) {
      const parent = entry.parents[0] as string;
      if (parent === ancestor) return true;
      if (steps > this.byCode.size) return false; // a cycle in bad data
      entry = this.byCode.get(parent);
    }
    return entry !== undefined && entry.parents.length > 1 && this.searchUp(entry, ancestor);
  }

  private searchUp(from: MutableEntry, ancestor: string): boolean {
    const stack = [...from.parents];
    const seen = new Set<string>();
    for (let code = stack.pop(); code !== undefined; code = stack.pop()) {
      if (code === ancestor) return true;
      if (seen.has(code)) continue;
      seen.add(code);
      const entry = this.byCode.get(code);
      if (entry !== undefined) stack.push(...entry.parents);
    }
    return false;
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
      inactive: false,
      status: undefined,
      abstract: false,
    };
    for (const p of definition.property ?? []) {
      const role = this.roles.get(p.code);
      if (role === 'inactive') entry.inactive ||= p.valueBoolean === true;
      else if (role === 'notSelectable') entry.abstract ||= p.valueBoolean === true;
      else if (role === 'status') entry.status = propertyValueText(p);
    }
    if (entry.status !== undefined && INACTIVE_STATUSES.has(entry.status)) entry.inactive = true;
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
      for (const parent of entry.parents) this.byCode.get(parent)?.children.push(entry.code);
    }
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

function addUnique(list: string[], value: string): void {
  if (!list.includes(value)) list.push(value);
}
