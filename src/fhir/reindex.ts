import type { Store } from '../store/types.ts';
import { compartmentsOf, storedIndex } from './indexer.ts';

/**
 * The index model this release writes: which search parameters get rows and in what form. A database
 * whose `index_state.model` is lower holds rows of an older model and is reindexed before serving
 * (`cinder serve` runs it at start; `cinder reindex` on demand). Raise it with any change to the rows
 * the indexer writes for stored content. Model 2 added the words of `_text` and `_content` (`search_text`).
 */
export const INDEX_MODEL = 2;

/** Resources per reindex transaction. */
const BATCH = 500;

export interface ReindexProgress {
  /** Resources reindexed so far in this run. */
  done: number;
  /** The last resource row done (the run resumes after it). */
  after: number;
}

/**
 * Rebuilds the search index rows of every current resource, in resource-row order, one transaction per
 * batch, recording its position after each: an interrupted run resumes where it stopped. Does nothing
 * when the database already follows INDEX_MODEL, unless `force` (which starts from the first row).
 */
export async function reindex(
  store: Store, opts: { force?: boolean; onProgress?: (p: ReindexProgress) => void } = {},
): Promise<{ ran: boolean; done: number }> {
  const indexing = store.resources.indexing;
  const state = await indexing.state();
  if (!opts.force && state.model >= INDEX_MODEL) return { ran: false, done: 0 };
  let after = opts.force ? 0 : state.after;
  let done = 0;
  for (;;) {
    const page = await indexing.page(after, BATCH);
    if (page.length === 0) break;
    const byTenant = new Map<string, { type: string; id: string; index: ReturnType<typeof storedIndex>; compartments: string[] }[]>();
    for (const row of page) {
      const resource = JSON.parse(row.content) as Record<string, unknown>;
      const item = { type: row.type, id: row.id, index: storedIndex(resource), compartments: compartmentsOf(resource) };
      (byTenant.get(row.tenant) ?? byTenant.set(row.tenant, []).get(row.tenant)!).push(item);
    }
    for (const [tenant, items] of byTenant) await store.resources.write(tenant, (w) => w.replaceIndex(items));
    after = page[page.length - 1]!.pk;
    done += page.length;
    await indexing.setState({ model: state.model, after });
    opts.onProgress?.({ done, after });
  }
  await indexing.setState({ model: INDEX_MODEL, after: 0 });
  // Every index row was replaced: the planner's statistics of them are stale.
  await indexing.analyze();
  return { ran: true, done };
}
