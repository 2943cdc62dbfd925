/**
 * The profiles a tenant's CapabilityStatement lists in each type's `supportedProfile` (R4
 * capabilitystatement.html: "Profiles for use cases supported"): the canonical URLs of its stored
 * StructureDefinitions that constrain a resource type, which a write claiming one is checked against
 * (registry.ts), read from the store and kept until its change token of StructureDefinition moves
 * (TenantReads).
 */
import type { Clock } from '../../../clock.ts';
import type { Logger } from '../../../log.ts';
import type { Condition } from '../../../store/interface/search.ts';
import type { Store } from '../../../store/types.ts';
import { REST_RESOURCE_TYPES } from '../../resource-types.ts';
import { compileFilter } from '../../search.ts';
import { CHECK_INTERVAL_MS } from '../../subscriptions/hub.ts';
import { TenantReads } from '../../tenant-reads.ts';

type Json = Record<string, unknown>;

/** The canonical URLs of a tenant's profiles, by the resource type each constrains, each list sorted. */
export type SupportedProfiles = ReadonlyMap<string, readonly string[]>;

/** The most StructureDefinitions read for one tenant's lists (past it, those of the highest ids are not listed). */
export const MAX_SUPPORTED_PROFILES = 2_000;

/** Rows read at a time: a US Core profile with its snapshot is some 100 KB of text. */
const PAGE = 50;

const REST_TYPES: ReadonlySet<string> = new Set(REST_RESOURCE_TYPES);

/**
 * The `url` a StructureDefinition is listed by, when it is a profile of a resource type with an endpoint
 * (`derivation` constraint, `kind` resource) that is not `retired`: a draft is enforced on a write that
 * claims it as an active one is, so it is listed too. A url holding a `|` cannot be a canonical without a
 * version (references.html#canonical), and is left out.
 */
function listedUrl(sd: Json): { type: string; url: string } | undefined {
  const { url, type } = sd;
  if (sd.derivation !== 'constraint' || sd.kind !== 'resource' || sd.status === 'retired') return undefined;
  if (typeof url !== 'string' || url === '' || url.includes('|') || typeof type !== 'string' || !REST_TYPES.has(type)) return undefined;
  return { type, url };
}

/**
 * The tenant's profiles by type: its current StructureDefinitions that the search
 * `derivation=constraint&kind=resource&status:not=retired` finds (so no other is read), PAGE at a time in id
 * order, at most MAX_SUPPORTED_PROFILES; several versions of one url are listed once, by the url.
 */
export async function tenantSupportedProfiles(store: Store, tenant: string, now: number, log: Logger): Promise<Map<string, string[]>> {
  const where = compileFilter('StructureDefinition', new URLSearchParams('derivation=constraint&kind=resource&status:not=retired'), now) as Condition[];
  const byType = new Map<string, Set<string>>();
  let read = 0;
  for (let after: { lastUpdated: number; id: string } | undefined; ;) {
    const rows = await store.resources.search(tenant, { type: 'StructureDefinition', where, sort: [], count: Math.min(PAGE, MAX_SUPPORTED_PROFILES - read), ...(after ? { after } : {}) });
    for (const row of rows) {
      let listed: ReturnType<typeof listedUrl>;
      try {
        listed = listedUrl(JSON.parse(row.content) as Json);
      } catch {
        continue;
      }
      if (listed === undefined) continue;
      const urls = byType.get(listed.type) ?? new Set<string>();
      urls.add(listed.url);
      byType.set(listed.type, urls);
    }
    read += rows.length;
    const last = rows.at(-1);
    if (read >= MAX_SUPPORTED_PROFILES) {
      log.warn(`the CapabilityStatement lists the profiles of the tenant's first ${MAX_SUPPORTED_PROFILES} StructureDefinitions by id, and no more`, { tenant });
      break;
    }
    if (rows.length < PAGE || last === undefined) break;
    after = { lastUpdated: last.lastUpdated, id: last.id };
  }
  return new Map([...byType].map(([type, urls]) => [type, [...urls].sort()]));
}

/**
 * Each tenant's supported profiles (TenantReads), read again when the store's change token of
 * StructureDefinition moves: at once after a write of this process (`markChanged`), within CHECK_INTERVAL_MS
 * (250 ms) after another's, as the SubscriptionTopics listed beside them (topic-canonicals.ts).
 */
export function supportedProfiles(options: { store: Store; clock: Clock; log: Logger }): TenantReads<SupportedProfiles> {
  return new TenantReads<SupportedProfiles>({
    ...options,
    types: ['StructureDefinition'],
    checkIntervalMs: CHECK_INTERVAL_MS,
    load: (tenant) => tenantSupportedProfiles(options.store, tenant, options.clock.now(), options.log),
    empty: new Map(),
    failure: 'the profiles of a tenant could not be read: the CapabilityStatement lists the last ones read',
  });
}
