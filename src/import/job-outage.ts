/**
 * An `$import` job across outages that are not its fault, as an export job (src/export/storage-outage.ts): the
 * database gone under a batch, the export storage unreachable as an input's error file is written, the import spool
 * unreachable as an input is downloaded. The job waits for them, then is handed back with its attempt refunded and
 * its next claim resumes at the input it was running. A storage that answers while a write fails (a full disk)
 * is no outage: that failure is the attempt's, as before.
 */
import { awaitDatabase, awaitStorage, OUTAGE_POLL_MS, storageAnswers, storageUnreachable } from '../export/storage-outage.ts';
import { StoreUnavailableError, type ImportJob } from '../store/types.ts';
import { importPrefix } from './error-file.ts';
import type { SpoolError } from './fetch-input.ts';
import type { ImportOutcome, ImportRunDeps } from './run-job.ts';
import { spoolReachable } from './spool.ts';

/**
 * A storage answers again after an outage that cost the running input (the export storage, its error file; the
 * spool, its download): the job is handed back with its attempt refunded, and its next claim reads the input again
 * (storing nothing twice) and writes the whole error file.
 */
export class StorageBack extends Error {
  constructor(cause: unknown) {
    super('a storage answers again after an outage', { cause });
  }
}

/** What one attempt at a job knows of the export storage: whether it waited for it in vain already. */
export interface AttemptState {
  storageGone: boolean;
}

/**
 * An input's error file could not be written (`cause`). When the export storage cannot be reached (an outage, not a
 * full disk, which answers), waits for it, up to `storageWaitMs`, and throws StorageBack once it answers. A storage
 * waited for in vain costs the file, as a full one does, and is not waited for again in this attempt (a bucket that
 * is not there would cost as long once per input). Rethrows the abort of `signal` (the job stopped meanwhile).
 */
export async function awaitErrorStorage(deps: ImportRunDeps, job: ImportJob, state: AttemptState, signal: AbortSignal, cause: unknown): Promise<void> {
  if (deps.storageWaitMs <= 0 || state.storageGone) return;
  // A key no job writes, whose size tells whether the storage answers at all.
  const probe = `${importPrefix(job)}/storage-probe`;
  if (!(await storageUnreachable(deps.sink, probe))) return;
  deps.log.warn('import paused: the export storage cannot be reached', { job: job.id, err: cause });
  const waited = await awaitStorage(storageAnswers(deps.sink, probe), OUTAGE_POLL_MS, deps.storageWaitMs, signal);
  if (waited === 'stopped') throw signal.reason;
  if (waited === 'back') throw new StorageBack(cause);
  state.storageGone = true;
}

/**
 * The spool could not keep an input's download (`cause`, a SpoolError). A spool that cannot be looked at
 * (spoolReachable) is an outage: waits for it, up to `storageWaitMs`, as for the export storage; 'answers' when it
 * answers at once (a full or read-only disk: the failure is the attempt's).
 */
export async function awaitSpool(deps: ImportRunDeps, job: ImportJob, signal: AbortSignal, cause: SpoolError): Promise<'answers' | 'back' | 'stopped' | 'gave-up'> {
  if (deps.storageWaitMs <= 0 || (await spoolReachable(deps.spoolRoot))) return 'answers';
  deps.log.warn('import paused: the import spool cannot be reached', { job: job.id, err: cause });
  return awaitStorage(() => spoolReachable(deps.spoolRoot), OUTAGE_POLL_MS, deps.storageWaitMs, signal);
}

/**
 * Hands the job back with its attempt refunded after an outage that is not its fault (StorageBack, or the database
 * gone: then once it answers again). A runner stopped while the database is away leaves the job to its lease.
 */
export async function pauseForOutage(deps: ImportRunDeps, job: ImportJob, cause: StorageBack | StoreUnavailableError): Promise<ImportOutcome> {
  const handBack = () => deps.store.imports.release(job.id, deps.owner, deps.clock.now(), true);
  try {
    if (cause instanceof StoreUnavailableError) {
      deps.log.warn('import paused: the database is unavailable', { job: job.id, reason: cause.message });
      if ((await awaitDatabase(handBack, OUTAGE_POLL_MS, deps.signal)) === 'stopped') return 'released';
    } else {
      await handBack();
    }
  } catch (err) {
    if (err instanceof StoreUnavailableError && !(cause instanceof StoreUnavailableError)) return pauseForOutage(deps, job, err);
    throw err;
  }
  deps.log.info('import job handed back after the outage', { job: job.id });
  return 'paused';
}
