import { CORE_LAST_UPDATED, CORE_TYPES, CORE_VERSION_ID, type CoreBundle, type CoreResource } from '../terminology/core/core-bundle.ts';
import type { Condition, IndexRows, ResourceVersion, TextEntry } from '../store/types.ts';
import { LookupIndex } from './core-index.ts';
import { indexEntries } from './indexer.ts';
import { matchConditions, type MatchContext } from './search-match.ts';
import { textIndexOf } from './text-index.ts';

/** A core resource as a search sees it: the version served and its search index rows. */
export interface CoreHit {
  readonly version: ResourceVersion;
  readonly rows: IndexRows;
  /** Its words for `_text` and `_content`, computed on the first full-text search of its type. */
  words?: TextEntry | undefined;
}

/** Whether resources of `type` may come from the core (CodeSystem, ValueSet); decided without the layer. */
export function hasCoreResources(type: string): boolean {
  return CORE_TYPES.has(type);
}

/**
 * The FHIR R4 core CodeSystems and ValueSets (CoreBundle) as resources of every tenant: read by id,
 * and searched in memory over index rows computed once per type, on its first search: the lookups of
 * LookupIndex narrow the resources, the engine's matcher (src/fhir/search-match.ts) checks the rest of
 * the conditions. A tenant's stored resource of the same id shadows the core one; that is decided by
 * the callers (crud.ts, core-search.ts), which know the tenant.
 */
export class CoreLayer {
  private readonly indexes = new Map<string, LookupIndex<CoreHit> | Promise<LookupIndex<CoreHit>>>();

  constructor(private readonly bundle: CoreBundle) {}

  /** The core resource `type/id` as version 1, or null when the core has none. */
  async read(type: string, id: string): Promise<ResourceVersion | null> {
    if (!hasCoreResources(type)) return null;
    const entry = (await this.bundle.load()).byId(type, id);
    return entry === undefined ? null : versionOf(entry);
  }

  /**
   * The core resources of `type` meeting every condition of `where`, in id order (code points, as the
   * databases order ids). Chains and `_has` inside `where` look their other side up through `ctx`.
   */
  async search(type: string, where: readonly Condition[], ctx: MatchContext): Promise<CoreHit[]> {
    if (!hasCoreResources(type)) return [];
    const { items, rest } = (await this.index(type)).narrow(where);
    if (rest.length === 0) return [...items];
    const out: CoreHit[] = [];
    for (const hit of items) {
      const v = hit.version;
      const words = () => ('words' in hit ? hit.words : (hit.words = textIndexOf(JSON.parse(v.content) as Record<string, unknown>)));
      if (await matchConditions({ resourceType: v.type, id: v.id }, v.lastUpdated, rest, ctx, hit.rows, words)) out.push(hit);
    }
    return out;
  }

  private index(type: string): LookupIndex<CoreHit> | Promise<LookupIndex<CoreHit>> {
    let index = this.indexes.get(type);
    if (index === undefined) {
      const building = Promise.resolve(this.bundle.load()).then((content) => buildIndex(content.all(type)));
      this.indexes.set(type, (index = building));
      void building.then((built) => this.indexes.set(type, built), () => this.indexes.delete(type));
    }
    return index;
  }
}

function versionOf(entry: CoreResource): ResourceVersion {
  return { type: entry.type, id: entry.id, versionId: CORE_VERSION_ID, lastUpdated: CORE_LAST_UPDATED, deleted: false, content: entry.content };
}

function buildIndex(entries: readonly CoreResource[]): LookupIndex<CoreHit> {
  return new LookupIndex(entries.map((entry) => ({ version: versionOf(entry), rows: indexEntries(JSON.parse(entry.content) as Record<string, unknown>, undefined) })));
}
