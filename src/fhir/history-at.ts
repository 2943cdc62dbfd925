import type { HistoryQuery, ResourceRepo, ResourceVersion } from '../store/types.ts';

/**
 * Whether the version after `v` (a version older than its resource's current one) is still stored. Version ids
 * are consecutive, so where it is not, it was expunged ($expunge of one version): `v` is then the version as of a
 * time only if that one was written after the time, which nothing stored tells. A reader as of a time (bulk
 * export) takes `v` as the version current then only when this holds.
 */
export async function followedByStored(repo: Pick<ResourceRepo, 'vread'>, tenant: string, v: ResourceVersion): Promise<boolean> {
  return (await repo.vread(tenant, v.type, v.id, v.versionId + 1)) !== null;
}

/** How many raw batches one `_at` page may scan before it returns a short page with a `next` link. */
const MAX_BATCHES = 20;

export type HistoryCursor = NonNullable<HistoryQuery['before']>;

export interface HistoryPage {
  rows: ResourceVersion[];
  /** Keyset position to continue from, when there may be more. */
  next?: HistoryCursor;
}

/** The keyset position of a version in history order (newest first). */
export function cursorOf(v: ResourceVersion): HistoryCursor {
  return { lastUpdated: v.lastUpdated, type: v.type, id: v.id, versionId: v.versionId };
}

/** A plain page: the store's order, `count + 1` rows fetched to know whether more follow. */
export async function historyPage(repo: ResourceRepo, tenant: string, query: HistoryQuery): Promise<HistoryPage> {
  const raw = await repo.history(tenant, { ...query, count: query.count + 1 });
  const rows = raw.slice(0, query.count);
  return raw.length > query.count && query.count > 0 ? { rows, next: cursorOf(rows[rows.length - 1]!) } : { rows };
}

/**
 * A page of the versions `keep` admits, in history order: raw batches are read until the page is full,
 * at most MAX_BATCHES of them, after which a short page comes back with a `next` link (so a request
 * never reads the whole history for a few matches).
 */
export async function keptPage(repo: ResourceRepo, tenant: string, query: HistoryQuery, keep: (v: ResourceVersion) => boolean | Promise<boolean>): Promise<HistoryPage> {
  const kept: ResourceVersion[] = [];
  let before = query.before;
  for (let batch = 0; batch < MAX_BATCHES && query.count > 0; batch++) {
    const raw = await repo.history(tenant, { ...query, ...(before ? { before } : {}), count: query.count + 1 });
    for (const v of raw) {
      if (!(await keep(v))) continue;
      kept.push(v);
      if (kept.length > query.count) {
        const rows = kept.slice(0, query.count);
        return { rows, next: cursorOf(rows[rows.length - 1]!) };
      }
    }
    if (raw.length <= query.count) return { rows: kept };
    before = cursorOf(raw[raw.length - 1]!);
  }
  return query.count > 0 && before ? { rows: kept, next: before } : { rows: kept };
}

/**
 * The versions of `_at` history (FHIR R4 http 3.1.0.11): those current at some point in [low, high).
 * The store gives the versions written before `high` (`query.at`). A version is current from its own
 * time until the next version's: one replaced at or before `low` is dropped. A deletion is no version
 * current at any time (the resource is gone until it is written again): it is kept only when it was made
 * within the period, where it ends the currency of the version before it; one made before `low` is dropped.
 * Version ids are consecutive, so the replacement of v is v + 1.
 */
export function currentSince(repo: ResourceRepo, tenant: string, low: number): (v: ResourceVersion) => Promise<boolean> {
  const seen = new Map<string, number>();
  const replacedAt = async (v: ResourceVersion): Promise<number | undefined> => {
    const key = `${v.type}/${v.id}/${v.versionId + 1}`;
    if (seen.has(key)) return seen.get(key);
    const next = await repo.vread(tenant, v.type, v.id, v.versionId + 1);
    // v + 1 expunged ($expunge of one version): the version after it that is left replaced v by then.
    return next ? next.lastUpdated : firstAfter(repo, tenant, v);
  };
  return async (v) => {
    seen.set(`${v.type}/${v.id}/${v.versionId}`, v.lastUpdated);
    if (v.deleted) return v.lastUpdated >= low;
    const replaced = await replacedAt(v);
    return replaced === undefined || replaced > low;
  };
}

/** Versions of one resource read a statement while looking for the first one left after an expunged version. */
const AFTER_BATCH = 100;

/**
 * The time of the oldest version of `v`'s resource after `v` (none: undefined), read newest first from the versions
 * written since `v`: where `v + 1` was expunged, the resource was replaced no later than that.
 */
async function firstAfter(repo: ResourceRepo, tenant: string, v: ResourceVersion): Promise<number | undefined> {
  let oldest: ResourceVersion | undefined;
  let before: HistoryCursor | undefined;
  for (;;) {
    const rows = await repo.history(tenant, { type: v.type, id: v.id, since: v.lastUpdated, count: AFTER_BATCH, ...(before && { before }) });
    for (const r of rows) if (r.versionId > v.versionId) oldest = r;
    if (rows.length < AFTER_BATCH || rows[rows.length - 1]!.versionId <= v.versionId) return oldest?.lastUpdated;
    before = cursorOf(rows[rows.length - 1]!);
  }
}

/** Versions one statement of reachedPage reads at most (its first reads the page and one more, each next twice as many). */
const READ_BATCH = 1000;

/**
 * A page of the versions within reach (`reach`: of a batch of versions, those the token may see) that
 * `keep` admits (`_at`, the types served), in history order. It reads on past the versions out of reach,
 * so that the page is what the token would get were they not there: neither its length nor its `next`
 * link tells of one (a `next` link to a page of nothing told that a hidden version came after). `keep`
 * is bounded as keptPage bounds it, counting the versions within reach alone: past MAX_BATCHES pages and
 * one more of them, a short page with a `next` link. Reading past more than `bound` versions out of reach
 * before the page is full is a 400 (`tooCostly`).
 */
export async function reachedPage(
  repo: ResourceRepo, tenant: string, query: HistoryQuery, reach: (rows: ResourceVersion[]) => Promise<ResourceVersion[]>,
  keep: ((v: ResourceVersion) => boolean | Promise<boolean>) | undefined, bound: number, tooCostly: () => Error,
): Promise<HistoryPage> {
  if (query.count === 0) return { rows: [] };
  const kept: ResourceVersion[] = [];
  const asked = MAX_BATCHES * (query.count + 1);
  let before = query.before;
  let scanned: ResourceVersion | undefined;
  let judged = 0;
  let outOfReach = 0;
  for (let size = query.count + 1; ; size = Math.max(size, Math.min(2 * size, READ_BATCH))) {
    const raw = await repo.history(tenant, { ...query, ...(before ? { before } : {}), count: size });
    const within = new Set(await reach(raw));
    for (const v of raw) {
      if (!within.has(v)) {
        if (++outOfReach > bound) throw tooCostly();
        continue;
      }
      if (keep && judged >= asked) return { rows: kept, next: cursorOf(scanned!) };
      judged++;
      scanned = v;
      if (keep && !(await keep(v))) continue;
      kept.push(v);
      if (kept.length > query.count) {
        const rows = kept.slice(0, query.count);
        return { rows, next: cursorOf(rows[rows.length - 1]!) };
      }
    }
    if (raw.length < size) return { rows: kept };
    before = cursorOf(raw[raw.length - 1]!);
  }
}
