import { BoundedCache } from './compile/bounded-cache.ts';
import type { CodeSystemIndex } from './compile/code-system-index.ts';
import { compileValueSet, type ImportResolver } from './compile/compile-value-set.ts';
import type { CompiledValueSet } from './compile/compiled-value-set.ts';
import type { IndexCache } from './compile/index-cache.ts';
import type { CodeSystemLookup } from './compile/membership.ts';
import { invalid } from './errors.ts';
import type { DatePeriod } from './model/date-time.ts';
import type { ValueSet } from './model/value-set.ts';
import type { TerminologySource } from './source.ts';
import { splitCanonical } from './version.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';

/** What the terminology operations need: cached, compiled CodeSystems and ValueSets of a tenant. */
export interface TerminologyContext extends CodeSystemLookup {
  /**
   * What of the tenant's terminology this context may read, when not all of it (code-system-reach.ts): an answer
   * computed through it is kept apart from those computed with the whole, so that no answer it would refuse is
   * given from what another request was told (validate-value-set-code.ts's ANSWERS). Undefined: all of it.
   */
  readonly reach?: string;
  /** The compiled ValueSet (null: there is none): at once when it is loaded, else as a promise. */
  valueSet(url: string, version?: string): SyncOrAsync<CompiledValueSet | null>;
  valueSetById(id: string): Promise<CompiledValueSet | null>;
  codeSystemById(id: string): Promise<CodeSystemIndex | null>;
  /** Compiles a ValueSet supplied with the request (not cached; its imports are). */
  compile(vs: ValueSet): Promise<CompiledValueSet>;
  /**
   * The same terminology as it was at `date` (the R4 `date` input): every CodeSystem and
   * ValueSet not named with an explicit version is chosen among the versions in effect then
   * (see pickVersion); undefined gives the current terminology.
   */
  at(date: DatePeriod | undefined): TerminologyContext;
}

type Pending<T> = Promise<T | null>;

const dateKey = (asOf: DatePeriod | undefined): string => (asOf === undefined ? '' : String(asOf.end));
/**
 * The cache key of a canonical reference. The common one, the latest version now, is the URL itself:
 * the same string on every request (a compiled ValueSet's system URLs), so the map finds its hash
 * cached instead of hashing a newly built key. Every other key starts with NUL, which no plain key
 * does, so the two forms never meet.
 */
const canonicalKey = (url: string, version: string | undefined, asOf: DatePeriod | undefined): string =>
  version === undefined && asOf === undefined && !url.startsWith('\0') ? url : `\0${url}|${version ?? ''}|${dateKey(asOf)}`;

/**
 * The per-tenant cache of compiled terminology. Every cached value is dropped when the source's
 * change token moves; concurrent first requests share one load. Imports are compiled without
 * waiting on other requests' in-flight loads, so an import cycle cannot deadlock. Values chosen
 * for a `date` are cached under that date beside the current ones.
 */
export class CachedTerminology {
  private token: string | undefined;
  private generation = 0;
  private readonly codeSystems: BoundedCache<string, Pending<CodeSystemIndex>>;
  /** The settled values of `codeSystems`, given at once (without a promise). */
  private readonly loadedCodeSystems: BoundedCache<string, CodeSystemIndex | null>;
  private readonly codeSystemsById: BoundedCache<string, Pending<CodeSystemIndex>>;
  private readonly valueSets: BoundedCache<string, Pending<CompiledValueSet>>;
  private readonly byId: BoundedCache<string, Pending<CompiledValueSet>>;
  private readonly settled: BoundedCache<string, CompiledValueSet | null>;
  /** The versions of each code system asked for (codeSystemVersions). */
  private readonly versions: BoundedCache<string, Promise<readonly string[] | undefined>>;

  constructor(
    private readonly source: TerminologySource,
    private readonly indexes: IndexCache,
    capacity = 10_000,
  ) {
    this.codeSystems = new BoundedCache(capacity);
    this.loadedCodeSystems = new BoundedCache(capacity);
    this.codeSystemsById = new BoundedCache(capacity);
    this.valueSets = new BoundedCache(capacity);
    this.byId = new BoundedCache(capacity);
    this.settled = new BoundedCache(capacity);
    this.versions = new BoundedCache(capacity);
  }

  /**
   * Checks the change token once per operation and drops every cached value when it moved: at once
   * when the source has the token now (the steady state), else once it is read.
   */
  refresh(): SyncOrAsync<void> {
    const token = this.source.changeToken();
    return token instanceof Promise ? token.then((t) => this.update(t)) : this.update(token);
  }

  private update(token: string): void {
    if (token === this.token) return;
    this.token = token;
    this.generation++;
    for (const cache of [this.codeSystems, this.loadedCodeSystems, this.codeSystemsById, this.valueSets, this.byId, this.settled, this.versions]) cache.clear();
  }

  /** The tenant's terminology as of `asOf` (the current one when undefined). */
  view(asOf?: DatePeriod): TerminologyView {
    return new TerminologyView(this, asOf);
  }

  codeSystem(url: string, version: string | undefined, asOf: DatePeriod | undefined): SyncOrAsync<CodeSystemIndex | null> {
    const when = version === undefined ? asOf : undefined;
    const key = canonicalKey(url, version, when);
    const loaded = this.loadedCodeSystems.get(key);
    if (loaded !== undefined) return loaded;
    return this.shared(this.codeSystems, key, async () => {
      const generation = this.generation;
      const cs = await this.source.codeSystem(url, version, when);
      const index = cs === null ? null : this.indexes.indexOf(cs);
      if (generation === this.generation) this.loadedCodeSystems.set(key, index);
      return index;
    });
  }

  /**
   * Asked on the way to an answer about a version the server does not have, and cached as the code systems are:
   * the source reads every stored version of the code system, whole, which a request naming other codes (no kept
   * answer) would otherwise repeat each time.
   */
  codeSystemVersions(url: string): Promise<readonly string[] | undefined> {
    const list = this.source.codeSystemVersions;
    if (list === undefined) return Promise.resolve(undefined);
    const cached = this.versions.get(url);
    if (cached !== undefined) return cached;
    // Dropped with the rest when the change token moves (update).
    const pending = list.call(this.source, url);
    this.versions.set(url, pending);
    pending.catch(() => this.versions.deleteIf(url, pending));
    return pending;
  }

  codeSystemById(id: string): Pending<CodeSystemIndex> {
    return this.shared(this.codeSystemsById, id, async () => {
      const cs = await this.source.codeSystemById(id);
      if (cs === null) return null;
      const index = this.indexes.indexOf(cs);
      if (index === null) throw invalid(`CodeSystem/${id} has no url, so its codes cannot be referenced`);
      return index;
    });
  }

  valueSet(url: string, version: string | undefined, asOf: DatePeriod | undefined): SyncOrAsync<CompiledValueSet | null> {
    const key = canonicalKey(url, version, asOf);
    const settled = this.settled.get(key);
    if (settled !== undefined) return settled;
    return this.shared(this.valueSets, key, () => this.load(url, version, asOf, []));
  }

  valueSetById(id: string, asOf: DatePeriod | undefined): Pending<CompiledValueSet> {
    return this.shared(this.byId, `${id}|${dateKey(asOf)}`, async () => {
      const vs = await this.source.valueSetById(id);
      return vs === null ? null : compileValueSet(vs, this.view(asOf));
    });
  }

  async importValueSet(canonical: string, stack: readonly string[], asOf: DatePeriod | undefined): Pending<CompiledValueSet> {
    const { url, version } = splitCanonical(canonical);
    const key = canonicalKey(url, version, asOf);
    const done = this.settled.get(key);
    return done !== undefined || this.settled.has(key) ? (done ?? null) : this.load(url, version, asOf, stack);
  }

  private async load(url: string, version: string | undefined, asOf: DatePeriod | undefined, stack: readonly string[]): Pending<CompiledValueSet> {
    const generation = this.generation;
    const vs = await this.source.valueSet(url, version, version === undefined ? asOf : undefined);
    const compiled = vs === null ? null : await compileValueSet(vs, this.view(asOf), stack);
    if (generation === this.generation) this.settled.set(canonicalKey(url, version, asOf), compiled);
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

/** The cached terminology of a tenant seen at one date (or now); cheap to create per request. */
class TerminologyView implements TerminologyContext, ImportResolver {
  /**
   * The last CodeSystem this view answered at once: one request asks for the coding's system several
   * times (membership, the display, status checks), and the answer cannot change within a view.
   */
  private last: { url: string; version: string | undefined; index: CodeSystemIndex | null } | undefined;

  constructor(
    private readonly cache: CachedTerminology,
    readonly asOf: DatePeriod | undefined,
  ) {}

  codeSystem(url: string, version?: string): SyncOrAsync<CodeSystemIndex | null> {
    const last = this.last;
    if (last !== undefined && last.url === url && last.version === version) return last.index;
    const index = this.cache.codeSystem(url, version, this.asOf);
    if (!(index instanceof Promise)) this.last = { url, version, index };
    return index;
  }

  codeSystemById(id: string): Pending<CodeSystemIndex> {
    return this.cache.codeSystemById(id);
  }

  codeSystemVersions(url: string): Promise<readonly string[] | undefined> {
    return this.cache.codeSystemVersions(url);
  }

  valueSet(url: string, version?: string): SyncOrAsync<CompiledValueSet | null> {
    return this.cache.valueSet(url, version, this.asOf);
  }

  valueSetById(id: string): Pending<CompiledValueSet> {
    return this.cache.valueSetById(id, this.asOf);
  }

  compile(vs: ValueSet): Promise<CompiledValueSet> {
    return compileValueSet(vs, this, [], undefined, true);
  }

  importValueSet(canonical: string, stack: readonly string[]): Pending<CompiledValueSet> {
    return this.cache.importValueSet(canonical, stack, this.asOf);
  }

  asOfDate(date: DatePeriod): TerminologyView {
    return this.cache.view(date);
  }

  at(date: DatePeriod | undefined): TerminologyContext {
    return date === this.asOf ? this : this.cache.view(date);
  }
}
