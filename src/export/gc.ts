import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import type { WithExports } from '../store/types.ts';
import { jobPrefix } from './run-job.ts';
import type { ExportSink } from './sink.ts';

export interface GcDeps {
  store: WithExports<'cleanup'>;
  sink: ExportSink;
  clock: Clock;
  log: Logger;
  /** How long the records of removed jobs are kept. */
  retentionMs: number;
}

/**
 * Removes the files of expired, failed-and-expired and cancelled jobs, never while a download holds
 * them (the job is marked removed first, under the same condition, so no download can start after),
 * and later deletes the job records.
 */
export async function collectExports(deps: GcDeps, batch = 100): Promise<{ purged: number; removed: number }> {
  const now = deps.clock.now();
  let purged = 0;
  for (const job of await deps.store.exports.cleanup.purgeable(now, batch)) {
    if (!(await deps.store.exports.cleanup.markPurged(job.id, now))) continue;
    await deps.sink.removePrefix(jobPrefix(job));
    purged++;
  }
  const old = await deps.store.exports.cleanup.purgedBefore(now - deps.retentionMs, batch);
  for (const id of old) await deps.store.exports.cleanup.remove(id);
  if (purged || old.length) deps.log.info('export files collected', { purged, removed: old.length });
  return { purged, removed: old.length };
}

/** Runs collectExports every `intervalMs` until stopped. */
export function scheduleExportGc(deps: GcDeps, intervalMs = 60_000) {
  let running = false;
  const timer = setInterval(async () => {
    if (running) return;
    running = true;
    try {
      await collectExports(deps);
    } catch (err) {
      deps.log.error('export garbage collection failed', { err });
    } finally {
      running = false;
    }
  }, intervalMs);
  return { stop: () => clearInterval(timer) };
}
