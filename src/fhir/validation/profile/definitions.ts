/**
 * The tenant's StructureDefinitions, as the profile registry (registry.ts) finds them: in the store, as
 * they stand at each write, or as a snapshot read once (an import, whose preparation threads have no
 * store, checks every resource against the definitions stored when it started).
 */
import type { Store } from '../../../store/types.ts';
import { canonicalCondition } from '../../search-canonical.ts';
import { PROFILE_TYPES } from './registry.ts';

type Json = Record<string, unknown>;

/** A tenant's StructureDefinitions by canonical, and a token that changes when they (or its terminology) may have. */
export interface ProfileSource {
  changeToken(tenant: string): Promise<string>;
  /** The live StructureDefinition `canonical` (`url` or `url|version`) names; the latest written when several do. */
  find(tenant: string, canonical: string): Promise<Json | undefined>;
  /** Which of `urls` (no `|version`) the tenant has live StructureDefinitions for; undefined when that cannot be told at once. */
  stored(tenant: string, urls: readonly string[]): Promise<ReadonlySet<string> | undefined>;
}

/** The most rows one `stored` search reads: past it, which urls have none is not known. */
const STORED_ROWS = 1_000;

/** The tenant's StructureDefinitions as stored now. */
export function storeProfiles(store: Store): ProfileSource {
  return {
    changeToken: (tenant) => store.resources.changeToken(tenant, PROFILE_TYPES),
    async find(tenant, canonical) {
      const rows = await store.resources.search(tenant, { type: 'StructureDefinition', where: [canonicalCondition([canonical])], sort: [], count: 20 });
      const live = rows.filter((r) => !r.deleted).sort((a, b) => b.lastUpdated - a.lastUpdated);
      return live.length > 0 ? (JSON.parse(live[0]!.content) as Json) : undefined;
    },
    async stored(tenant, urls) {
      const rows = await store.resources.search(tenant, { type: 'StructureDefinition', where: [canonicalCondition([...urls])], sort: [], count: STORED_ROWS });
      if (rows.length >= STORED_ROWS) return undefined;
      return new Set(rows.filter((r) => !r.deleted).map((r) => (JSON.parse(r.content) as Json).url as string));
    },
  };
}

const PAGE = 1000;

/** Every current StructureDefinition of the tenant as of `at` (epoch ms), raw, to be handed to another thread. */
export async function readDefinitions(store: Store, tenant: string, at: number): Promise<Json[]> {
  const out: Json[] = [];
  const decoder = new TextDecoder();
  let after: number | undefined;
  for (;;) {
    const page = await store.resources.snapshot(tenant, { type: 'StructureDefinition', at, limit: PAGE, ...(after === undefined ? {} : { after }) });
    for (const line of decoder.decode(page.lines).split('\n')) if (line !== '') out.push(JSON.parse(line) as Json);
    for (const row of page.recheck) if (!row.deleted) out.push(JSON.parse(row.content) as Json);
    if (page.next === null) return out;
    after = page.next;
  }
}

/**
 * Definitions read once (readDefinitions), whatever tenant asks: they never change, so profiles compiled
 * from them are kept for the source's life. A canonical finds them as the store's search would: by `url`,
 * and `version` too when it names one.
 */
export function snapshotProfiles(definitions: readonly Json[]): ProfileSource {
  const byUrl = new Map<string, Json[]>();
  for (const sd of definitions) {
    if (typeof sd.url !== 'string') continue;
    const list = byUrl.get(sd.url) ?? [];
    list.push(sd);
    byUrl.set(sd.url, list);
  }
  const updated = (sd: Json) => String((sd.meta as Json | undefined)?.lastUpdated ?? '');
  for (const list of byUrl.values()) list.sort((a, b) => (updated(a) < updated(b) ? 1 : updated(a) > updated(b) ? -1 : 0));
  return {
    changeToken: async () => 'snapshot',
    async find(_tenant, canonical) {
      const bar = canonical.indexOf('|');
      const list = byUrl.get(bar < 0 ? canonical : canonical.slice(0, bar));
      return bar < 0 ? list?.[0] : list?.find((sd) => sd.version === canonical.slice(bar + 1));
    },
    stored: async (_tenant, urls) => new Set(urls.filter((u) => byUrl.has(u))),
  };
}
