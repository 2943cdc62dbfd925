import { IndexCache } from './compile/index-cache.ts';
import { CachedConceptMaps, type ConceptMapSource } from './concept-maps.ts';
import { CachedTerminology, type TerminologyContext } from './context.ts';
import { layeredSource } from './layered-source.ts';
import type { TerminologySource } from './source.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import { writtenSource, type WrittenTerminology } from './written-source.ts';

/** Entries per cache of a context over a transaction's own writes (contextWith): it lives for one request. */
const WRITTEN_CONTEXT_ENTRIES = 100;

export interface TerminologyServiceOptions {
  /** The shared, read-only FHIR R4 core terminology. */
  readonly core: TerminologySource;
  /** The terminology a tenant stored itself. */
  readonly sourceFor: (tenant: string) => TerminologySource;
  /** The shared, read-only FHIR R4 core ConceptMaps (none by default). */
  readonly coreConceptMaps?: ConceptMapSource;
  /** The ConceptMaps a tenant stored itself (none by default). */
  readonly conceptMapsFor?: (tenant: string) => ConceptMapSource;
  /** Entries per cache and tenant (compiled ValueSets, indexed CodeSystems). */
  readonly cacheEntries?: number;
}

/**
 * Entry point of the terminology engine, created once in the composition root: hands out the
 * cached context of a tenant, refreshed against the tenant's change token.
 */
export class TerminologyService {
  private readonly tenants = new Map<string, CachedTerminology>();
  private readonly maps = new Map<string, CachedConceptMaps>();
  private readonly indexes = new IndexCache();

  constructor(private readonly options: TerminologyServiceOptions) {
    if (options.cacheEntries !== undefined && options.cacheEntries < 1) throw new RangeError('cacheEntries must be at least 1');
  }

  /**
   * The tenant's terminology, with caches dropped if its CodeSystems or ValueSets changed: at once when
   * the tenant's change token needs no read now (the steady state between writes), else as a promise.
   */
  context(tenant: string): SyncOrAsync<TerminologyContext> {
    const cached = this.cached(tenant);
    const refreshed = cached.refresh();
    return refreshed instanceof Promise ? refreshed.then(() => cached.view()) : cached.view();
  }

  /**
   * The tenant's terminology as a transaction writing `written` would leave it (its CodeSystems and ValueSets in front
   * of the stored ones: written-source.ts), for what that transaction must resolve before it runs (a Subscription's
   * `:in` naming a ValueSet it writes). Built for the one request and not cached: what it compiles of the written
   * resources is theirs alone, while the stored ones' indexes are shared with every context (IndexCache).
   */
  async contextWith(tenant: string, written: WrittenTerminology): Promise<TerminologyContext> {
    const source = layeredSource(writtenSource(written, this.options.sourceFor(tenant)), this.options.core);
    const cached = new CachedTerminology(source, this.indexes, WRITTEN_CONTEXT_ENTRIES);
    await cached.refresh();
    return cached.view();
  }

  /** Whether the tenant stores a CodeSystem of this canonical url itself (any version), rather than R4 core alone having one. */
  async ownsCodeSystem(tenant: string, url: string): Promise<boolean> {
    return (await this.options.sourceFor(tenant).codeSystem(url)) !== null;
  }

  /** The tenant's ConceptMaps ($translate), rebuilt when its ConceptMap change token moves. */
  conceptMaps(tenant: string): CachedConceptMaps {
    let cached = this.maps.get(tenant);
    if (cached === undefined) {
      cached = new CachedConceptMaps(this.options.conceptMapsFor?.(tenant) ?? NO_MAPS, this.options.coreConceptMaps ?? NO_MAPS);
      this.maps.set(tenant, cached);
    }
    return cached;
  }

  private cached(tenant: string): CachedTerminology {
    let cached = this.tenants.get(tenant);
    if (cached === undefined) {
      const source = layeredSource(this.options.sourceFor(tenant), this.options.core);
      cached = new CachedTerminology(source, this.indexes, this.options.cacheEntries);
      this.tenants.set(tenant, cached);
    }
    return cached;
  }
}

const NO_MAPS: ConceptMapSource = { all: async () => [], byId: async () => null, changeToken: () => 'none' };
