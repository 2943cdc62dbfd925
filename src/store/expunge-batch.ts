import type { ExpungeBatch, ExpungeBatchResult } from './interface/expunge.ts';

/** Resource rows one batch examines at most: a batch's statements stay short whatever the type's size. */
export const EXPUNGE_SCAN_ROWS = 1000;

/** A resource row as a batch examines it. */
export interface ExpungeCandidate {
  pk: number;
  id: string;
  deleted: boolean;
}

/**
 * The statements of one batch on one adapter, inside its transaction. Each removal also removes the
 * pending Subscription notifications of the versions it removes.
 */
export interface ExpungeStatements {
  /** Resource rows of the type after `after`, in row order, at most `limit` (only `ids`, when given); locked where the database can. */
  candidates(b: ExpungeBatch, limit: number): Promise<ExpungeCandidate[]>;
  /** How many history versions each of these resources has (only `versionId`, when given). */
  historyCounts(b: ExpungeBatch, ids: string[]): Promise<Map<string, number>>;
  /** Removes every history version of these resources (only `versionId`, when given); returns how many. */
  removeHistory(b: ExpungeBatch, ids: string[]): Promise<number>;
  /** Removes the `n` oldest history versions of one resource (only `versionId`, when given); returns how many. */
  removeOldestHistory(b: ExpungeBatch, id: string, n: number): Promise<number>;
  /** Removes these resource rows with every row they own (index, words, compartments, a Subscription's state, outbox and kept events). */
  removeResources(b: ExpungeBatch, rows: ExpungeCandidate[]): Promise<void>;
}

/**
 * One batch (ExpungeRepo.batch) over an adapter's statements: the resources examined are planned in
 * row order, each taken whole (its history, then for modes `deleted` and `all` its current row) while
 * the limit allows, the first that does not fit cut after its oldest versions; then a few statements
 * remove what was planned.
 */
export async function expungeBatch(s: ExpungeStatements, b: ExpungeBatch): Promise<ExpungeBatchResult> {
  const rows = await s.candidates(b, EXPUNGE_SCAN_ROWS);
  const chosen = b.mode === 'deleted' ? rows.filter((r) => r.deleted) : rows;
  const counts = chosen.length ? await s.historyCounts(b, chosen.map((r) => r.id)) : new Map<string, number>();
  const whole: ExpungeCandidate[] = [];
  let budget = b.limit;
  let after = b.after;
  let cut: { id: string; n: number } | undefined;
  for (const row of rows) {
    if (b.mode === 'deleted' && !row.deleted) {
      after = row.pk;
      continue;
    }
    const versions = (counts.get(row.id) ?? 0) + (b.mode === 'previous' ? 0 : 1);
    if (versions > budget) {
      const history = counts.get(row.id) ?? 0;
      if (budget > 0 && history > 0) cut = { id: row.id, n: Math.min(budget, history) };
      break;
    }
    budget -= versions;
    whole.push(row);
    after = row.pk;
  }
  let removed = 0;
  const withHistory = whole.filter((r) => (counts.get(r.id) ?? 0) > 0).map((r) => r.id);
  if (withHistory.length) removed += await s.removeHistory(b, withHistory);
  if (cut) removed += await s.removeOldestHistory(b, cut.id, cut.n);
  if (b.mode !== 'previous' && whole.length) {
    await s.removeResources(b, whole);
    removed += whole.length;
  }
  const finished = rows.length === 0 || after === rows.at(-1)!.pk;
  return { removed, after, done: finished && rows.length < EXPUNGE_SCAN_ROWS };
}
