import { withRegexAccounts } from '../regex-guard.ts';
import type { Clock } from '../clock.ts';
import type { Logger } from '../log.ts';
import { StoreUnavailableError, type ExportJob, type Store } from '../store/types.ts';
import { JobControl, JobInterrupted } from './job-control.ts';
import type { ExportSink } from './sink.ts';
import type { JobProgress } from './spec.ts';
import { encodeProgress, JobDataError, readPlan, readProgress, unreadableReason } from './job-data.ts';
import type { StepContext } from './step-context.ts';
import { runStep } from './steps.ts';
import { awaitDatabase, awaitStorage, OUTAGE_POLL_MS, storageAnswers, storageUnreachable } from './storage-outage.ts';

/** The plain settings a job runner takes from the configuration (workers get them as data). */
export interface RunSettings {
  leaseMs: number;
  fileMaxBytes: number;
  /** How long finished files stay available. */
  fileTtlMs: number;
  pageSize: number;
  /** Claims of a job that ended in an unexpected error before it is marked failed. */
  maxAttempts: number;
  /**
   * How long a job whose export storage cannot be reached waits for it before the failure counts as an
   * attempt (pauseForStorage).
   */
  storageWaitMs: number;
  /**
   * Waits until the kick-off's time (createdAt) + settleMs before reading, so that writes stamped at or
   * before transactionTime but still committing in another process are visible.
   */
  settleMs: number;
}

/** What running a job needs; the settings plus a store and a sink the caller opened (a worker opens its own). */
export interface RunDeps extends RunSettings {
  store: Store;
  sink: ExportSink;
  clock: Clock;
  log: Logger;
  /** This worker's lease owner name (unique per worker and process). */
  owner: string;
  /** Storage key prefix of a job attempt's files; default `tenant/job/a<attempt>`. */
  keyPrefix?: (job: ExportJob) => string;
  onProgress?: (exported: number, label: string) => void;
  /** Aborted when the worker is stopping: the job is handed back at the next page boundary. */
  signal?: AbortSignal;
}

export type RunOutcome = 'completed' | 'failed' | 'cancelled' | 'lost' | 'stopped' | 'retry' | 'paused';

/** How a `cinder export` process's runner names itself (`cli:<pid>:<random>`): it runs the job it made. */
export const CLI_OWNER_PREFIX = 'cli:';

export const jobPrefix = (job: Pick<ExportJob, 'tenant' | 'id'>) => `${job.tenant}/${job.id}`;

async function settle(deps: RunDeps, job: ExportJob, control: JobControl): Promise<void> {
  for (;;) {
    await control.check();
    // From the kick-off's time by the clock (createdAt): transactionTime, the safe time, may be a millisecond past it.
    const wait = job.createdAt + deps.settleMs - deps.clock.now();
    if (wait <= 0) return;
    await Bun.sleep(Math.min(wait, 200));
  }
}

async function runSteps(deps: RunDeps, job: ExportJob, control: JobControl): Promise<JobProgress> {
  const { spec, steps } = readPlan(job);
  const progress = readProgress(job, steps);
  const ctx: StepContext = {
    store: deps.store, tenant: job.tenant, jobId: job.id, transactionTime: job.transactionTime, spec, sink: deps.sink, control,
    progress, fileMaxBytes: deps.fileMaxBytes, pageSize: deps.pageSize,
    keyPrefix: deps.keyPrefix ? deps.keyPrefix(job) : `${jobPrefix(job)}/a${job.attempts}`,
    validate: (await deps.store.tenants.validationDebt(job.tenant)) !== null,
  };
  if (deps.onProgress) ctx.onProgress = deps.onProgress;
  await settle(deps, job, control);
  while (progress.step < steps.length) {
    await control.check();
    await runStep(ctx, steps[progress.step]!);
  }
  return progress;
}

async function interrupted(deps: RunDeps, job: ExportJob, err: JobInterrupted): Promise<RunOutcome> {
  if (err.reason === 'cancelled') await deps.sink.removePrefix(jobPrefix(job));
  // A stop (a restart, a deployment) is not the job's fault: its attempt is handed back too.
  if (err.reason === 'stopped') await deps.store.exports.jobs.release(job.id, deps.owner, deps.clock.now(), { refundAttempt: true });
  return err.reason;
}

/**
 * The database went away under a running job. It is not the job's fault, so it must not count towards
 * its failure: wait until the database answers, then hand the job back with this attempt refunded; the
 * next claim resumes it from its last checkpoint. A worker told to stop meanwhile leaves the job to its
 * lease, which another process takes over once it runs out.
 */
async function pauseForOutage(deps: RunDeps, job: ExportJob, log: RunDeps['log'], cause: StoreUnavailableError): Promise<RunOutcome> {
  log.warn('export paused: the database is unavailable', { reason: cause.message });
  const handBack = () => deps.store.exports.jobs.release(job.id, deps.owner, deps.clock.now(), { refundAttempt: true });
  if ((await awaitDatabase(handBack, OUTAGE_POLL_MS, deps.signal)) === 'stopped') return 'stopped';
  log.info('export handed back after the database outage');
  return 'paused';
}

/** A key no job writes, whose size tells whether the export storage answers at all. */
const probeKey = (job: ExportJob) => `${jobPrefix(job)}/storage-probe`;

/**
 * The export storage could not be reached when the attempt failed (an S3 outage, a disk that cannot be
 * read): not the job's fault either. Wait for the storage (up to `storageWaitMs`), then hand the job back
 * with this attempt refunded, so that the next claim resumes it from its last checkpoint instead of a
 * burst of immediate retries failing it; a worker told to stop hands it back at once. Undefined when the
 * storage stays away that long: the job then fails, as another attempt would only wait as long again.
 */
async function pauseForStorage(deps: RunDeps, job: ExportJob, log: RunDeps['log'], cause: unknown): Promise<RunOutcome | undefined> {
  log.warn('export paused: the export storage cannot be reached', { err: cause });
  const state = await awaitStorage(storageAnswers(deps.sink, probeKey(job)), OUTAGE_POLL_MS, deps.storageWaitMs, deps.signal);
  if (state === 'gave-up') return undefined;
  await deps.store.exports.jobs.release(job.id, deps.owner, deps.clock.now(), { refundAttempt: true });
  if (state === 'back') log.info('export handed back after the storage outage');
  return state === 'back' ? 'paused' : 'stopped';
}

/**
 * Runs (or resumes) a claimed job to its end: streams every step, checkpointing at file boundaries, then
 * completes it. A cancelled job's files are removed; a stopping worker hands the job back; a database
 * outage pauses it (pauseForOutage), as does an export storage that cannot be reached (pauseForStorage); an unexpected error is retried by a later claim until
 * `maxAttempts`, then the job fails with a message for the client (what failed, that it may be tried again) and
 * the cause in the log, under the job's id.
 */
export function runJob(deps: RunDeps, job: ExportJob): Promise<RunOutcome> {
  // With the tenant's regex accounts, as its requests and imports are (src/regex-guard.ts): the patterns its steps ran
  // were kept in the one account every tenant's exports shared, so one tenant's refusal refused them to all.
  return withRegexAccounts(job.tenant, () => runClaimed(deps, job));
}

async function runClaimed(deps: RunDeps, job: ExportJob): Promise<RunOutcome> {
  // Each claim counts an attempt; a stop or an outage hands it back and an error caught below is retried or
  // fails the job. A claim past `maxAttempts` therefore follows attempts that ended their process (a crash,
  // a kill, a lost lease): a job that keeps doing that is not tried again.
  if (job.attempts > deps.maxAttempts) {
    const now = deps.clock.now();
    const reason = `The export's process ended ${job.attempts - 1} times while running it (a crash, a kill, or a lost lease); it is not tried again`;
    deps.log.error('export job given up', { job: job.id, attempts: job.attempts });
    await deps.store.exports.jobs.fail(job.id, deps.owner, now, reason, now + deps.fileTtlMs);
    return 'failed';
  }
  // A job `cinder export` made for its own directory (its request is the command line, not the kick-off's URL)
  // reaches another runner only when that process ended without removing it (killed outright): its files would
  // go where nobody looks for them, after a whole export's work. It is failed, saying so.
  if (!deps.owner.startsWith(CLI_OWNER_PREFIX) && !/^https?:\/\//i.test(job.request)) {
    const now = deps.clock.now();
    deps.log.warn('export job of an ended cinder export given up', { job: job.id, request: job.request });
    await deps.store.exports.jobs.fail(job.id, deps.owner, now, `The ${job.request} process that ran this export ended before it finished; run it again`, now + deps.fileTtlMs);
    return 'failed';
  }
  const control = new JobControl(deps.store, deps.clock, job, deps.owner, deps.leaseMs, deps.signal);
  control.start();
  const log = deps.log.child({ job: job.id, tenant: job.tenant, attempt: job.attempts });
  try {
    const progress = await runSteps(deps, job, control);
    const now = deps.clock.now();
    if (await deps.store.exports.jobs.complete(job.id, deps.owner, now, encodeProgress(progress), now + deps.fileTtlMs)) {
      log.info('export completed', { resources: progress.exported, files: progress.files.length });
      return 'completed';
    }
    await control.checkpoint(progress);
    return 'lost';
  } catch (err) {
    if (err instanceof JobInterrupted) return await interrupted(deps, job, err);
    if (err instanceof StoreUnavailableError) return await pauseForOutage(deps, job, log, err);
    const now = deps.clock.now();
    if (err instanceof JobDataError) {
      // Another attempt by this release would read the same data: fail now, with the reason.
      log.error('export job data unreadable', { reason: err.message });
      await deps.store.exports.jobs.fail(job.id, deps.owner, now, unreadableReason(err), now + deps.fileTtlMs);
      return 'failed';
    }
    // A storage waited for in vain is not tried again at once: another attempt would wait as long (a bucket that is not there).
    let waited = false;
    if (deps.storageWaitMs > 0 && (await storageUnreachable(deps.sink, probeKey(job)))) {
      const paused = await pauseForStorage(deps, job, log, err);
      if (paused !== undefined) return paused;
      waited = true;
    }
    log.error('export attempt failed', { err });
    if (job.attempts < deps.maxAttempts && !waited) {
      await deps.store.exports.jobs.release(job.id, deps.owner, now);
      return 'retry';
    }
    // The client is told what failed and whether to try again; the cause (a path, a driver's message) is the operator's.
    log.error('export job failed', { attempts: job.attempts, err });
    const reason = `The export failed on the server after ${job.attempts} attempts (job ${job.id}), not because of its request: starting it again may succeed. The server's log holds the cause under this job id.`;
    await deps.store.exports.jobs.fail(job.id, deps.owner, now, reason, now + deps.fileTtlMs);
    return 'failed';
  } finally {
    control.stop();
  }
}
