import { BoundedCache } from './compile/bounded-cache.ts';
import type { CodeSystemIndex } from './compile/code-system-index.ts';
import { compileValueSet, type ImportResolver } from './compile/compile-value-set.ts';
import type { CompiledValueSet } from './compile/compiled-value-set.ts';
import type { IndexCache } from './compile/index-cache.ts';
import type { CodeSystemLookup } from './compile/membership.ts';
import type { ValueSet } from './model/value-set.ts';
import type { TerminologySource } from './source.ts';
import { splitCanonical } from './version.ts';

/** What the terminology operations need: cached, compiled CodeSystems and ValueSets of a tenant. */
export interface TerminologyContext extends CodeSystemLookup {
  valueSet(url: string, version?: string): Promise<CompiledValueSet | null>;
  valueSetById(id: string): Promise<CompiledValueSet | null>;
  /** Compiles a ValueSet supplied with the request (not cached; its imports are). */
  compile(vs: ValueSet): Promise<CompiledValueSet>;
}

type Pending<T> = Promise<T | null>;

/**
 * The per-tenant cache of compiled terminology. Every cached value is dropped when the source's
 * change token moves; concurrent first requests share one load. Imports are compiled without
 * waiting on other requests' in-flight loads, so an import cycle cannot deadlock.
 */
export class CachedTerminology implements TerminologyContext, ImportResolver {
  private token: string | undefined;
  private generation = 0;
  private readonly codeSystems: BoundedCache<string, Pending<CodeSystemIndex>>;
  private readonly valueSets: BoundedCache<string, Pending<CompiledValueSet>>;
  private readonly byId: BoundedCache<string, Pending<CompiledValueSet>>;
  private readonly settled: BoundedCache<string, CompiledValueSet | null>;

  constructor(
    private readonly source: TerminologySource,
    private readonly indexes: IndexCache,
    capacity = 10_000,
  ) {
    this.codeSystems = new BoundedCache(capacity);
    this.valueSets = new BoundedCache(capacity);
    this.byId = new BoundedCache(capacity);
    this.settled = new BoundedCache(capacity);
  }

  /** Checks the change token once per operation and drops every cached value when it moved. */
  async refresh(): Promise<void> {
    const token = await this.source.changeToken();
    if (token === this.token) return;
    this.token = token;
    this.generation++;
    this.codeSystems.clear();
    this.valueSets.clear();
    this.byId.clear();
    this.settled.clear();
  }

  codeSystem(url: string, version?: string): Promise<CodeSystemIndex | null> {
    return this.shared(this.codeSystems, `${url}|${version ?? ''}`, async () => {
      const cs = await this.source.codeSystem(url, version);
      return cs === null ? null : this.indexes.indexOf(cs);
    });
  }

  valueSet(url: string, version?: string): Promise<CompiledValueSet | null> {
    return this.shared(this.valueSets, `${url}|${version ?? ''}`, () => this.load(url, version, []));
  }

  valueSetById(id: string): Promise<CompiledValueSet | null> {
    return this.shared(this.byId, id, async () => {
      const vs = await this.source.valueSetById(id);
      return vs === null ? null : compileValueSet(vs, this);
    });
  }

  compile(vs: ValueSet): Promise<CompiledValueSet> {
    return compileValueSet(vs, this);
  }

  async importValueSet(canonical: string, stack: readonly string[]): Promise<CompiledValueSet | null> {
    const { url, version } = splitCanonical(canonical);
    const key = `${url}|${version ?? ''}`;
    const done = this.settled.get(key);
    return done !== undefined || this.settled.has(key) ? (done ?? null) : this.load(url, version, stack);
  }

  private async load(url: string, version: string | undefined, stack: readonly string[]): Promise<CompiledValueSet | null> {
    const generation = this.generation;
    const vs = await this.source.valueSet(url, version);
    const compiled = vs === null ? null : await compileValueSet(vs, this, stack);
    if (generation === this.generation) this.settled.set(`${url}|${version ?? ''}`, compiled);
    return compiled;
  }

  /** One load per key at a time; a failed load is forgotten so that it is retried. */
  private shared<T>(cache: BoundedCache<string, Pending<T>>, key: string, load: () => Pending<T>): Pending<T> {
    const cached = cache.get(key);
    if (cached !== undefined) return cached;
    const pending = load();
    cache.set(key, pending);
    pending.catch(() => cache.deleteIf(key, pending));
    return pending;
  }
}
