import type { ConceptMap, MapElement, MapGroup, MapTarget } from '../model/concept-map.ts';
import { splitCanonical } from '../version.ts';

/** One mapping of a group: an element and one of its targets. */
export interface Mapping {
  readonly element: MapElement;
  readonly target: MapTarget;
}

/** A ConceptMap group with its elements looked up by source code, and its targets by target code. */
export interface CompiledGroup {
  readonly map: ConceptMapIndex;
  readonly group: MapGroup;
  /** Elements by source code (an element may be listed twice in a group: both count). */
  readonly bySource: ReadonlyMap<string, readonly MapElement[]>;
  /** Mappings by target code, for `reverse`. */
  readonly byTarget: ReadonlyMap<string, readonly Mapping[]>;
}

/**
 * A ConceptMap compiled for $translate: its groups' elements in maps by code both ways, so a
 * translation costs a lookup per group whatever the map's size. Built once per parsed resource
 * (`conceptMapIndex`): the sources hand out the same object for the same stored version.
 */
export class ConceptMapIndex {
  readonly url: string | undefined;
  readonly version: string | undefined;
  /** The source and target value sets (`source[x]`, `target[x]`) as canonical URLs without a version. */
  readonly sourceScope: string | undefined;
  readonly targetScope: string | undefined;
  readonly groups: readonly CompiledGroup[];

  constructor(readonly resource: ConceptMap) {
    this.url = resource.url;
    this.version = resource.version;
    this.sourceScope = scope(resource.sourceUri ?? resource.sourceCanonical);
    this.targetScope = scope(resource.targetUri ?? resource.targetCanonical);
    this.groups = (resource.group ?? []).map((group) => compileGroup(this, group));
  }

  /** `url|version` as the `source` of a match names the map (the url alone when it has no version). */
  get canonical(): string | undefined {
    return this.url === undefined ? undefined : this.version === undefined ? this.url : `${this.url}|${this.version}`;
  }
}

const scope = (canonical: string | undefined) => (canonical === undefined ? undefined : splitCanonical(canonical).url);

function compileGroup(map: ConceptMapIndex, group: MapGroup): CompiledGroup {
  const bySource = new Map<string, MapElement[]>();
  const byTarget = new Map<string, Mapping[]>();
  for (const element of group.element ?? []) {
    if (element.code !== undefined) push(bySource, element.code, element);
    for (const target of element.target ?? []) if (target.code !== undefined) push(byTarget, target.code, { element, target });
  }
  return { map, group, bySource, byTarget };
}

function push<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

const INDEXES = new WeakMap<ConceptMap, ConceptMapIndex>();

/** The index of a parsed ConceptMap, built once per object (so once per stored version). */
export function conceptMapIndex(cm: ConceptMap): ConceptMapIndex {
  let index = INDEXES.get(cm);
  if (index === undefined) INDEXES.set(cm, (index = new ConceptMapIndex(cm)));
  return index;
}
