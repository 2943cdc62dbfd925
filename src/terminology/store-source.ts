import type { Clock } from '../clock.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import type { ResourceVersion, Store } from '../store/types.ts';
import { type CodeSystem, parseCodeSystem } from './model/code-system.ts';
import type { DatePeriod } from './model/date-time.ts';
import { parseValueSet, type ValueSet } from './model/value-set.ts';
import type { TerminologySource } from './source.ts';
import { pickVersion, versionsOf } from './version.ts';
import type { ConceptMapSource } from './concept-maps.ts';
import { StoreConceptMaps } from './store-concept-maps.ts';
import { ChangeWatch, ParsedVersions } from './store-watch.ts';

const TYPES = ['CodeSystem', 'ValueSet'];
/** Versions of one canonical URL looked at when picking the latest. */
const MAX_VERSIONS = 1000;

export interface StoreTerminologyOptions {
  readonly store: Store;
  readonly clock: Clock;
  /**
   * How long a change token read from the store is trusted (ms). Writes made through this
   * process mark the tenant stale at once (see `markChanged`); writes of other processes
   * are seen after at most this long.
   */
  readonly checkIntervalMs: number;
  /** Parsed resources kept per tenant, so unrelated changes do not re-parse large CodeSystems. */
  readonly parsedEntries?: number;
}

/**
 * The CodeSystems and ValueSets tenants stored through the FHIR API, as TerminologySources.
 * Reads search the store by `url`; parsed resources are kept by version id, so an unchanged
 * resource keeps its object identity and its compiled index survives other tenants' writes.
 */
export class StoreTerminology {
  private readonly tenants = new Map<string, TenantStoreSource>();
  private readonly conceptMaps = new Map<string, StoreConceptMaps>();

  constructor(private readonly options: StoreTerminologyOptions) {
    if (!(options.checkIntervalMs >= 0)) throw new RangeError('checkIntervalMs must be a non-negative number');
  }

  /** The tenant's source (one per tenant, created on first use). */
  sourceFor(tenant: string): TerminologySource {
    let source = this.tenants.get(tenant);
    if (source === undefined) {
      source = new TenantStoreSource(tenant, this.options);
      this.tenants.set(tenant, source);
    }
    return source;
  }

  /** The tenant's ConceptMaps (one source per tenant, created on first use), with a change token of their own. */
  conceptMapsFor(tenant: string): ConceptMapSource {
    let source = this.conceptMaps.get(tenant);
    if (source === undefined) {
      source = new StoreConceptMaps(tenant, this.options);
      this.conceptMaps.set(tenant, source);
    }
    return source;
  }

  /** Called after a write in this process: the next operation re-reads the change token. */
  markChanged(tenant: string): void {
    this.tenants.get(tenant)?.markStale();
    this.conceptMaps.get(tenant)?.markStale();
  }
}

class TenantStoreSource implements TerminologySource {
  private readonly watch: ChangeWatch;
  private readonly codeSystems: ParsedVersions<CodeSystem>;
  private readonly valueSets: ParsedVersions<ValueSet>;

  constructor(
    private readonly tenant: string,
    private readonly options: StoreTerminologyOptions,
  ) {
    this.codeSystems = new ParsedVersions(parseCodeSystem, options.parsedEntries ?? 1000);
    this.valueSets = new ParsedVersions(parseValueSet, options.parsedEntries ?? 1000);
    this.watch = new ChangeWatch(tenant, TYPES, options);
  }

  markStale(): void {
    this.watch.markStale();
  }

  /** The store's change token for CodeSystem and ValueSet, re-read at most every checkIntervalMs; at once once read. */
  changeToken(): SyncOrAsync<string> {
    return this.watch.changeToken();
  }

  async codeSystem(url: string, version?: string, asOf?: DatePeriod): Promise<CodeSystem | null> {
    const all = (await this.byUrl('CodeSystem', url)).map((v) => this.codeSystems.of(v));
    return pickVersion(all, version, asOf);
  }

  async codeSystemVersions(url: string): Promise<readonly string[]> {
    return versionsOf((await this.byUrl('CodeSystem', url)).map((v) => this.codeSystems.of(v)));
  }

  async valueSet(url: string, version?: string, asOf?: DatePeriod): Promise<ValueSet | null> {
    const all = (await this.byUrl('ValueSet', url)).map((v) => this.valueSets.of(v));
    return pickVersion(all, version, asOf);
  }

  async codeSystemById(id: string): Promise<CodeSystem | null> {
    const v = await this.options.store.resources.read(this.tenant, 'CodeSystem', id);
    return v === null || v.deleted ? null : this.codeSystems.of(v);
  }

  async holds(type: 'CodeSystem' | 'ValueSet', id: string): Promise<boolean> {
    return (await this.options.store.resources.read(this.tenant, type, id)) !== null;
  }

  async valueSetById(id: string): Promise<ValueSet | null> {
    const v = await this.options.store.resources.read(this.tenant, 'ValueSet', id);
    return v === null || v.deleted ? null : this.valueSets.of(v);
  }

  private byUrl(type: string, url: string): Promise<ResourceVersion[]> {
    return this.options.store.resources.search(this.tenant, {
      type,
      where: [{ kind: 'token', param: 'url', values: [{ value: url }] }],
      sort: [],
      count: MAX_VERSIONS,
    });
  }
}
