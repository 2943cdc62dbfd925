/**
 * A reference `:below` / `:above` walked as of a time T (an export's transactionTime), not as the data is
 * when the walk runs: a kick-off takes T (the safe time) first and walks after it, and a write in between
 * (stamped after T) would move a branch in or out of an export that promises the data as of T. Each step
 * reads the resources unchanged since T from the current index, and judges in code the version as of T of
 * each resource of the walked type changed since.
 */
import { FhirError } from '../errors.ts';
import type { Condition, ResourceRepo, SearchQuery } from '../store/types.ts';
import { cursorOf, followedByStored, type HistoryCursor } from './history-at.ts';
import { compartmentsOf } from './indexer.ts';
import { matchConditions } from './search-match.ts';

type Json = Record<string, unknown>;

/** Versions of the walked type written after T read at most (a kick-off walks moments after T). */
export const HIERARCHY_CHANGED_MAX = 10_000;

const HISTORY_PAGE = 1000;

/** A resource of the walked type changed after T, as it was at T (null: it did not exist then). */
export interface ChangedAsOf {
  id: string;
  resource: Json | null;
  lastUpdated: number;
}

/**
 * The condition on a resource last updated at or before `at`, written as "not after `at`": a negation never drives a
 * statement (SqlBuilder.driverRows), so a step or chain whose own conditions cannot drive is not read from every
 * resource unchanged since `at` (nearly all of them) by the last_updated index.
 */
export const unchangedSince = (at: number): Condition => ({ kind: 'not', condition: { kind: 'lastUpdated', tests: [{ op: 'gt', low: at + 1, high: at + 1 }] } });

/**
 * The resources of `type` changed after `at`, each with its version as of `at`. One whose version after the last
 * stored at or before `at` was expunged counts as absent then (its content as of `at` is gone: followedByStored).
 */
export async function changedAsOf(repo: Pick<ResourceRepo, 'history' | 'vread'>, tenant: string, type: string, at: number): Promise<ChangedAsOf[]> {
  const ids = new Set<string>();
  let before: HistoryCursor | undefined;
  for (let read = 0; ; read += HISTORY_PAGE) {
    if (read >= HIERARCHY_CHANGED_MAX) {
      throw new FhirError('unavailable', `More than ${HIERARCHY_CHANGED_MAX} versions of ${type} were written since the export's transactionTime while its hierarchy was read; kick off again`);
    }
    const rows = await repo.history(tenant, { type, since: at + 1, count: HISTORY_PAGE, ...(before && { before }) });
    for (const v of rows) ids.add(v.id);
    if (rows.length < HISTORY_PAGE) break;
    before = cursorOf(rows[rows.length - 1]!);
  }
  const out: ChangedAsOf[] = [];
  for (const id of ids) {
    const [v] = await repo.history(tenant, { type, id, at, count: 1 });
    const live = v && !v.deleted && (await followedByStored(repo, tenant, v));
    out.push({ id, resource: live ? (JSON.parse(v.content) as Json) : null, lastUpdated: v?.lastUpdated ?? 0 });
  }
  return out;
}

/**
 * One step of the walk as of `at`: `step` read on the resources unchanged since `at`, and judged in code on the
 * versions as of `at` of those changed since (within `compartment`, a patient's, when the step is bound to it).
 * Those are read after the step's statement, so that one changed while it ran is in them.
 */
export async function stepAsOf(
  repo: Pick<ResourceRepo, 'history' | 'vread'>, tenant: string, search: (q: SearchQuery) => Promise<{ id: string; content: string }[]>,
  step: SearchQuery, at: number, base: string | undefined,
): Promise<Json[]> {
  const where = step.where ?? [];
  const stable = await search({ ...step, where: [...where, unchangedSince(at)] });
  const changed = await changedAsOf(repo, tenant, step.type, at);
  const out = stable.map((r) => JSON.parse(r.content) as Json);
  const match = { exists: async (q: SearchQuery) => (await search(q)).length > 0, ...(base !== undefined && { base }) };
  for (const c of changed) {
    if (!c.resource) continue;
    if (step.compartment !== undefined && !compartmentsOf(c.resource, base).includes(step.compartment)) continue;
    if (await matchConditions(c.resource, c.lastUpdated, where, match)) out.push(c.resource);
  }
  return out;
}
