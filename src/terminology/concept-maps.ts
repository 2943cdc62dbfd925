import { type CompiledGroup, conceptMapIndex, type ConceptMapIndex } from './compile/concept-map-index.ts';
import type { ConceptMap } from './model/concept-map.ts';
import { pickVersion } from './version.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';

/** Where ConceptMaps come from for one tenant (its store) or for every tenant (the R4 core). */
export interface ConceptMapSource {
  /** Every current ConceptMap, parsed (the same object for the same stored version). */
  all(): Promise<readonly ConceptMap[]>;
  /** The ConceptMap with this logical id (instance-level $translate). */
  byId(id: string): Promise<ConceptMap | null>;
  /** Changes whenever a ConceptMap changes (also through another process sharing the database); see TerminologySource. */
  changeToken(): SyncOrAsync<string>;
}

/**
 * The ConceptMaps one tenant's $translate reads: its own in front of the R4 core ones (by url, and
 * by url and version), with their groups found by source and target code system.
 */
export class ConceptMapCatalog {
  private readonly byUrlTenant = new Map<string, ConceptMap[]>();
  private readonly byUrlCore = new Map<string, ConceptMap[]>();
  private readonly from = new Map<string, CompiledGroup[]>();
  private readonly to = new Map<string, CompiledGroup[]>();
  /** Groups without a source or target system: candidates for any system. */
  private readonly anyFrom: CompiledGroup[] = [];
  private readonly anyTo: CompiledGroup[] = [];

  constructor(tenant: readonly ConceptMap[], core: readonly ConceptMap[]) {
    for (const cm of tenant) addUrl(this.byUrlTenant, cm);
    for (const cm of core) addUrl(this.byUrlCore, cm);
    const current: ConceptMapIndex[] = tenant.filter((cm) => cm.url === undefined).map(conceptMapIndex);
    for (const url of new Set([...this.byUrlTenant.keys(), ...this.byUrlCore.keys()])) {
      const latest = this.byUrl(url);
      if (latest !== null) current.push(latest);
    }
    for (const map of current) {
      for (const g of map.groups) {
        if (g.group.source === undefined) this.anyFrom.push(g);
        else append(this.from, g.group.source, g);
        if (g.group.target === undefined) this.anyTo.push(g);
        else append(this.to, g.group.target, g);
      }
    }
  }

  /** The map of this url (and version; else the latest): the tenant's first, else the core's. */
  byUrl(url: string, version?: string): ConceptMapIndex | null {
    const picked = pickVersion(this.byUrlTenant.get(url) ?? [], version) ?? pickVersion(this.byUrlCore.get(url) ?? [], version);
    return picked === null ? null : conceptMapIndex(picked);
  }

  /** The groups of the latest version of every map that map from `system` (or name no source system). */
  groupsFrom(system: string): readonly CompiledGroup[] {
    return [...(this.from.get(system) ?? []), ...this.anyFrom];
  }

  /** The groups of the latest version of every map that map to `system` (or name no target system). */
  groupsTo(system: string): readonly CompiledGroup[] {
    return [...(this.to.get(system) ?? []), ...this.anyTo];
  }
}

function addUrl(map: Map<string, ConceptMap[]>, cm: ConceptMap): void {
  if (cm.url !== undefined) append(map, cm.url, cm);
}

function append<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

/**
 * A tenant's ConceptMapCatalog, rebuilt when the tenant's ConceptMap change token moves (the maps of
 * unchanged versions keep their compiled indexes); concurrent first calls share one build.
 */
export class CachedConceptMaps {
  private token: string | undefined;
  private catalog: ConceptMapCatalog | Promise<ConceptMapCatalog> | undefined;

  constructor(
    private readonly tenant: ConceptMapSource,
    private readonly core: ConceptMapSource,
  ) {}

  /** The catalog: at once when the token needs no read and nothing changed, else as a promise. */
  current(): SyncOrAsync<ConceptMapCatalog> {
    const token = this.tenant.changeToken();
    return token instanceof Promise ? token.then((t) => this.at(t)) : this.at(token);
  }

  /** The tenant's own ConceptMap of this id (instance level; the core ones are not the tenant's resources). */
  byId(id: string): Promise<ConceptMap | null> {
    return this.tenant.byId(id);
  }

  private at(token: string): SyncOrAsync<ConceptMapCatalog> {
    if (token !== this.token || this.catalog === undefined) {
      this.token = token;
      const building = Promise.all([this.tenant.all(), this.core.all()]).then(([own, core]) => new ConceptMapCatalog(own, core));
      this.catalog = building;
      building.then(
        (built) => {
          if (this.catalog === building) this.catalog = built;
        },
        () => {
          if (this.catalog === building) this.catalog = undefined;
        },
      );
    }
    return this.catalog;
  }
}
