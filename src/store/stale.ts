/**
 * When a table's planner statistics are stale: once more than STALE_ROWS rows and STALE_SHARE of the rows it held
 * at its last ANALYZE have changed since, PostgreSQL's autovacuum defaults (autovacuum_analyze_threshold,
 * autovacuum_analyze_scale_factor). The statistics watch judges the tables by it (analyze's `onlyStale`), and a bulk
 * writer what it wrote (analyze's `wrote`).
 */
export const STALE_ROWS = 50;
export const STALE_SHARE = 0.1;

/** Whether `changed` rows outgrow the statistics of a table that held `held` at its last ANALYZE (negative: never counted). */
export function outgrown(changed: number, held: number): boolean {
  return changed > STALE_ROWS + STALE_SHARE * Math.max(held, 0);
}
