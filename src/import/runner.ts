import { hostname } from 'node:os';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import { systemResolve, type ResolveHost } from '../fhir/subscriptions/endpoint.ts';
import type { Logger } from '../log.ts';
import { StoreUnavailableError, type Store } from '../store/types.ts';
import { runImportJob, type ImportOutcome, type ImportRunDeps } from './run-job.ts';
import { importPrefix } from './error-file.ts';
import type { ExportSink } from '../export/sink.ts';
import { STORAGE_WAIT_MS } from '../export/storage-outage.ts';
import { openSpool, SPOOL_DIR, sweepSpool, SWEEP_MS, type Spool } from './spool.ts';
import { join } from 'node:path';

/** Claims of a job that ended in an unexpected error before it is marked failed (as export's). */
export const MAX_ATTEMPTS = 3;
/** How long the status of an ended import stays readable. */
export const RESULT_RETENTION_MS = 7 * 24 * 3600 * 1000;
const POLL_MS = 500;
const CLEANUP_EVERY_MS = 10 * 60 * 1000;
/** How often a spool that stays unusable is logged again (it is tried at every poll: twice a second). */
export const SPOOL_FAILURE_LOG_MS = 10 * 60 * 1000;

export interface ImportRunnerOptions {
  config: Config;
  fhir: FhirDeps;
  store: Store;
  clock: Clock;
  log: Logger;
  /** The export storage, which holds the inputs' error files (removed with their job). */
  sink: Pick<ExportSink, 'open' | 'removePrefix' | 'size'>;
  /** How long a job whose export storage or spool cannot be reached waits for it (ImportRunDeps.storageWaitMs); STORAGE_WAIT_MS by default. */
  storageWaitMs?: number;
  fetch?: typeof fetch;
  resolve?: ResolveHost;
  /** The client that started a job (ImportRunDeps.client). */
  client?: ImportRunDeps['client'];
}

/**
 * Runs `$import` jobs in this process: up to CINDER_IMPORT_JOBS at a time, claimed with a lease from the
 * database (so several processes share the work and a job survives a restart), on the main thread as
 * `cinder import` runs (each import prepares its lines on a Worker thread of its own). `serve` starts its
 * loop; tests run jobs with `runOnce`.
 */
export function createImportRunner(o: ImportRunnerOptions) {
  const processId = `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  const log = o.log.child({ component: 'import' });
  let stopping = new AbortController();
  const running = new Map<string, Promise<ImportOutcome>>();
  let timer: ReturnType<typeof setInterval> | undefined;
  let claiming = false;
  let cleaned = 0;
  /** When the spool was last swept of ended runners' directories (openSpool sweeps it first). */
  let swept = 0;
  let slot = 0;
  let spool: Promise<Spool> | undefined;
  /** While the spool is unusable: when that was last logged, and the tries since. */
  let spoolFailing: { loggedAt: number; tries: number } | undefined;

  /**
   * Tells the operator that the spool is unusable, so that no job is claimed (each poll tries again): at once, then
   * every SPOOL_FAILURE_LOG_MS while it lasts (a read-only or full data directory would otherwise log twice a second).
   */
  function spoolFailed(err: unknown): void {
    const now = o.clock.now();
    if (spoolFailing && now - spoolFailing.loggedAt < SPOOL_FAILURE_LOG_MS) {
      spoolFailing.tries++;
      return;
    }
    const tries = spoolFailing ? spoolFailing.tries + 1 : 1;
    spoolFailing = { loggedAt: now, tries: 0 };
    log.error('import spool not usable: no import job is claimed until it is (tried again every poll)', { spool: join(o.config.dataDir, SPOOL_DIR), tries, err });
  }

  /** This runner's spool directory (spool.ts), prepared once, as the first job is claimed or the runner starts; tried again after a failure. */
  function spoolOf(): Promise<Spool> {
    spool ??= openSpool(o.config.dataDir).then(
      (s) => {
        if (spoolFailing) log.info('import spool usable again: import jobs are claimed', { spool: s.root });
        spoolFailing = undefined;
        if (s.removed > 0) log.info('import spool: the directories of ended processes removed', { spool: s.root, removed: s.removed });
        return s;
      },
      (err: unknown) => {
        spool = undefined;
        throw err;
      },
    );
    return spool;
  }

  const deps = (owner: string, s: Spool): ImportRunDeps => ({
    fhir: o.fhir, store: o.store, clock: o.clock, log, sink: o.sink, storageWaitMs: o.storageWaitMs ?? STORAGE_WAIT_MS, baseUrl: o.config.baseUrl, owner, signal: stopping.signal,
    leaseMs: o.config.exportLeaseSeconds * 1000, maxAttempts: MAX_ATTEMPTS, spoolRoot: s.root, ...(o.client ? { client: o.client } : {}),
    input: {
      fetch: o.fetch ?? fetch, resolve: o.resolve ?? systemResolve, allowPrivate: o.config.importAllowPrivate === 'true',
      maxBytes: o.config.importMaxInputBytes, timeoutMs: o.config.importFetchTimeout * 1000, spoolDir: s.dir,
    },
  });

  /** Deletes the jobs that ended before `before`, then their error files (a file left by a crash in between is only disk). */
  async function removeEnded(before: number): Promise<void> {
    for (const job of await o.store.imports.removeEnded(before)) {
      await o.sink.removePrefix(importPrefix(job)).catch((err: unknown) => log.warn('import error files not removed', { job: job.id, err }));
    }
  }

  /** Claims one job for `owner` and runs it; false when none was claimable, or the job was handed back as the runner stops. */
  async function runOne(owner: string): Promise<boolean> {
    const s = await spoolOf();
    const job = await o.store.imports.claim(owner, o.clock.now(), o.config.exportLeaseSeconds * 1000);
    if (!job) return false;
    log.info('import job claimed', { job: job.id, owner, attempt: job.attempts });
    const outcome = await runImportJob(deps(owner, s), job);
    log.info('import job ended', { job: job.id, outcome });
    return !(outcome === 'released' && stopping.signal.aborted);
  }

  async function fill(): Promise<void> {
    if (claiming || stopping.signal.aborted) return;
    claiming = true;
    try {
      if (o.clock.now() - cleaned > CLEANUP_EVERY_MS) {
        cleaned = o.clock.now();
        await removeEnded(cleaned - RESULT_RETENTION_MS);
      }
      let s: Spool;
      try {
        s = await spoolOf();
      } catch (err) {
        // No job is claimed that could not be downloaded; the next poll tries again.
        spoolFailed(err);
        return;
      }
      if (swept === 0) swept = o.clock.now();
      else if (o.clock.now() - swept > SWEEP_MS) {
        // A runner that ended just before this one started was still fresh then (spool.ts STALE_MS): its directory goes now.
        swept = o.clock.now();
        const removed = await sweepSpool(s.root).catch((err: unknown) => (log.warn('import spool not swept', { spool: s.root, err }), 0));
        if (removed > 0) log.info('import spool: the directories of ended processes removed', { spool: s.root, removed });
      }
      while (running.size < o.config.importJobs && !stopping.signal.aborted) {
        const owner = `${processId}/i${slot++}`;
        const job = await o.store.imports.claim(owner, o.clock.now(), o.config.exportLeaseSeconds * 1000);
        if (!job) break;
        log.info('import job claimed', { job: job.id, owner, attempt: job.attempts });
        const run = runImportJob(deps(owner, s), job)
          .then((outcome) => (log.info('import job ended', { job: job.id, outcome }), outcome))
          .catch((err: unknown) => (log.error('import job crashed', { job: job.id, err }), 'released' as const))
          .finally(() => running.delete(owner));
        running.set(owner, run);
      }
    } catch (err) {
      if (err instanceof StoreUnavailableError) log.debug('import claim skipped: database unavailable');
      else log.error('import claim failed', { err });
    } finally {
      claiming = false;
    }
  }

  return {
    /** Starts claiming jobs (CINDER_IMPORT_JOBS of them at a time; none when 0). */
    start(): void {
      if (stopping.signal.aborted) stopping = new AbortController();
      if (o.config.importJobs > 0) {
        // The spool is prepared now, so that what ended processes left goes at start, not at the first import.
        spoolOf().catch(spoolFailed);
        timer = setInterval(() => void fill(), POLL_MS);
      }
    },
    /** Stops claiming and hands the running jobs back at their next chunk (another process, or this one after a restart, resumes them). */
    async stop(): Promise<void> {
      clearInterval(timer);
      stopping.abort();
      await Promise.allSettled(running.values());
    },
    /** Claims and runs jobs one after another until none is claimable; returns how many ran. */
    async runOnce(): Promise<number> {
      if (stopping.signal.aborted) stopping = new AbortController();
      let n = 0;
      // An owner per claim: it is the claim's fencing token (ResourceWriter.holdImportLease), which a claim of the same
      // job by this process after its lease ran out must not share.
      while (await runOne(`${processId}/o${slot++}`)) n++;
      return n;
    },
    busy: () => running.size,
  };
}

export type ImportRunner = ReturnType<typeof createImportRunner>;
