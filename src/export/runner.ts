import type { Config } from '../config.ts';
import { runJob, type RunDeps, type RunOutcome, type RunSettings } from './run-job.ts';
import { STORAGE_WAIT_MS } from './storage-outage.ts';

/**
 * Rows per snapshot page: 2,000 halves the round trips of 1,000 (a 1M-resource export from PostgreSQL
 * in 3.6-4.8 s instead of 5.2-6.6 s) while a page stays about 2 MB; see docs/PERFORMANCE.md.
 */
export const PAGE_SIZE = 2000;
/** Claims of a job that ended in an unexpected error before it is marked failed. */
export const MAX_ATTEMPTS = 3;
/** See RunDeps.settleMs. */
export const SETTLE_MS = 1000;

/** The job runner's settings from the configuration (CINDER_EXPORT_LEASE_SECONDS, CINDER_EXPORT_FILE_*). */
export function runSettings(config: Config): RunSettings {
  return {
    leaseMs: config.exportLeaseSeconds * 1000,
    fileMaxBytes: config.exportFileMaxBytes,
    fileTtlMs: config.exportFileTtl * 1000,
    pageSize: PAGE_SIZE,
    maxAttempts: MAX_ATTEMPTS,
    storageWaitMs: STORAGE_WAIT_MS,
    settleMs: SETTLE_MS,
  };
}

/** Claims and runs jobs one after another until none is claimable (the CLI, and tests, run jobs this way). */
export async function drainJobs(deps: RunDeps): Promise<RunOutcome[]> {
  const outcomes: RunOutcome[] = [];
  for (;;) {
    const job = await deps.store.exports.jobs.claim(deps.owner, deps.clock.now(), deps.leaseMs);
    if (!job) return outcomes;
    outcomes.push(await runJob(deps, job));
  }
}
