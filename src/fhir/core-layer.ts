import { CORE_LAST_UPDATED, CORE_TYPES, CORE_VERSION_ID, type CoreBundle, type CoreResource } from '../terminology/core/core-bundle.ts';
import type { Condition, IndexRows, ResourceVersion } from '../store/types.ts';
import { indexEntries } from './indexer.ts';
import { matchConditions, type MatchContext } from './search-match.ts';

/** A core resource as a search sees it: the version served and its search index rows. */
export interface CoreHit {
  readonly version: ResourceVersion;
  readonly rows: IndexRows;
}

/** One type's core resources with their index rows, and token values -> resources for picking candidates. */
interface TypeIndex {
  readonly hits: readonly CoreHit[];
  readonly byId: ReadonlyMap<string, CoreHit>;
  /** `param` NUL `value` -> the resources with that token value (any system). */
  readonly tokens: ReadonlyMap<string, CoreHit[]>;
}

/** Whether resources of `type` may come from the core (CodeSystem, ValueSet); decided without the layer. */
export function hasCoreResources(type: string): boolean {
  return CORE_TYPES.has(type);
}

/**
 * The FHIR R4 core CodeSystems and ValueSets (CoreBundle) as resources of every tenant: read by id,
 * and searched in memory with the engine's matcher (src/fhir/search-match.ts) over index rows
 * computed once per type, on the first search. A tenant's stored resource of the same id shadows the
 * core one; that is decided by the callers (crud.ts, core-search.ts), which know the tenant.
 */
export class CoreLayer {
  private readonly indexes = new Map<string, TypeIndex | Promise<TypeIndex>>();

  constructor(private readonly bundle: CoreBundle) {}

  /** The core resource `type/id` as version 1, or null when the core has none. */
  async read(type: string, id: string): Promise<ResourceVersion | null> {
    if (!hasCoreResources(type)) return null;
    const entry = (await this.bundle.load()).byId(type, id);
    return entry === undefined ? null : versionOf(entry);
  }

  /**
   * The core resources of `type` meeting every condition of `where`, in no particular order. Chains and
   * `_has` inside `where` look their other side up through `ctx`.
   */
  async search(type: string, where: readonly Condition[], ctx: MatchContext): Promise<CoreHit[]> {
    if (!hasCoreResources(type)) return [];
    const index = await this.index(type);
    const out: CoreHit[] = [];
    for (const hit of candidates(index, where)) {
      const v = hit.version;
      if (await matchConditions({ resourceType: v.type, id: v.id }, v.lastUpdated, where as Condition[], ctx, hit.rows)) out.push(hit);
    }
    return out;
  }

  private index(type: string): TypeIndex | Promise<TypeIndex> {
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

function buildIndex(entries: readonly CoreResource[]): TypeIndex {
  const hits: CoreHit[] = [];
  const byId = new Map<string, CoreHit>();
  const tokens = new Map<string, CoreHit[]>();
  for (const entry of entries) {
    const hit = { version: versionOf(entry), rows: indexEntries(JSON.parse(entry.content) as Record<string, unknown>) };
    hits.push(hit);
    byId.set(entry.id, hit);
    const seen = new Set<string>();
    for (const t of hit.rows.tokens) {
      const key = `${t.param}\u0000${t.value}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const list = tokens.get(key);
      if (list === undefined) tokens.set(key, [hit]);
      else list.push(hit);
    }
  }
  return { hits, byId, tokens };
}

/**
 * The resources worth matching: those a positive `_id` or token condition with values (a `url`, a
 * `status`, a `code`) names, the fewest of them; every resource of the type when no condition does.
 */
function candidates(index: TypeIndex, where: readonly Condition[]): readonly CoreHit[] {
  let best: readonly CoreHit[] = index.hits;
  for (const c of where) {
    let named: CoreHit[] | undefined;
    if (c.kind === 'id' && !c.not) named = [...new Set(c.ids.flatMap((id) => index.byId.get(id) ?? []))];
    if (c.kind === 'token' && !c.not && c.values.every((v) => v.value !== undefined)) {
      const found = new Set<CoreHit>();
      for (const v of c.values) for (const hit of index.tokens.get(`${c.param}\u0000${v.value}`) ?? []) found.add(hit);
      named = [...found];
    }
    if (named !== undefined && named.length < best.length) best = named;
  }
  return best;
}
