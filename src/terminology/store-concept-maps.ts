import type { SyncOrAsync } from '../sync-or-async.ts';
import type { ConceptMapSource } from './concept-maps.ts';
import { type ConceptMap, parseConceptMap } from './model/concept-map.ts';
import type { StoreTerminologyOptions } from './store-source.ts';
import { ChangeWatch, ParsedVersions } from './store-watch.ts';

/** Stored ConceptMaps read per page when the catalog is rebuilt. */
const PAGE = 1000;

/**
 * A tenant's stored ConceptMaps for $translate. They have a change token of their own, so a
 * ConceptMap write does not drop the tenant's compiled ValueSets; parsed versions are kept by version
 * id, so a rebuilt catalog recompiles only the maps that changed.
 */
export class StoreConceptMaps implements ConceptMapSource {
  private readonly watch: ChangeWatch;
  private readonly parsed: ParsedVersions<ConceptMap>;

  constructor(
    private readonly tenant: string,
    private readonly options: StoreTerminologyOptions,
  ) {
    this.watch = new ChangeWatch(tenant, ['ConceptMap'], options);
    this.parsed = new ParsedVersions(parseConceptMap, options.parsedEntries ?? 1000);
  }

  markStale(): void {
    this.watch.markStale();
  }

  changeToken(): SyncOrAsync<string> {
    return this.watch.changeToken();
  }

  /**
   * Every current stored ConceptMap, read a page at a time in id order. One that does not parse (stored
   * before validation, or with validation off) is left out rather than failing every translation.
   */
  async all(): Promise<readonly ConceptMap[]> {
    const out: ConceptMap[] = [];
    let after: { lastUpdated: number; id: string } | undefined;
    for (;;) {
      const page = await this.options.store.resources.search(this.tenant, { type: 'ConceptMap', sort: [], count: PAGE, ...(after ? { after } : {}) });
      for (const v of page) {
        try {
          out.push(this.parsed.of(v));
        } catch {
          // Not a readable ConceptMap: not translated with (a read of it by url answers it is unknown).
        }
      }
      const last = page.at(-1);
      if (page.length < PAGE || last === undefined) return out;
      after = { lastUpdated: last.lastUpdated, id: last.id };
    }
  }

  async byId(id: string): Promise<ConceptMap | null> {
    const v = await this.options.store.resources.read(this.tenant, 'ConceptMap', id);
    return v === null || v.deleted ? null : this.parsed.of(v);
  }
}
