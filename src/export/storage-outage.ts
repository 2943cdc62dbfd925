/**
 * What a durable job (an export, an `$import`) does when the database or the export storage goes away under
 * it: neither is the job's fault, so neither may count towards its failure. Both job runners wait here, then
 * hand the job back with its attempt refunded, and its next claim resumes it from its last checkpoint.
 */
import type { ExportSink } from './sink.ts';
import { StoreUnavailableError } from '../store/types.ts';

/** How often a paused job asks whether the database or the storage answers again. */
export const OUTAGE_POLL_MS = 500;
/** How long a job waits for an export storage that cannot be reached: an S3 outage of a few minutes fails no job. */
export const STORAGE_WAIT_MS = 10 * 60_000;

/**
 * Whether the export storage cannot be reached (S3 unreachable or answering 5xx, a disk that cannot be
 * read): asked for the size of `key`, a file no job writes, it throws rather than answering
 * (ExportSink.size). A storage that answers while a write fails (a full disk, a refused key) is reachable:
 * that failure is the attempt's.
 */
export async function storageUnreachable(sink: Pick<ExportSink, 'size'>, key: string): Promise<boolean> {
  try {
    await sink.size(key);
    return false;
  } catch {
    return true;
  }
}

/** Whether the export storage answers (storageUnreachable's negation), as awaitStorage asks it. */
export const storageAnswers = (sink: Pick<ExportSink, 'size'>, key: string) => async (): Promise<boolean> => !(await storageUnreachable(sink, key));

/**
 * Waits until a storage answers again (`reachable`: storageAnswers for the export storage, a look
 * at its directory for the import spool), asking every `pollMs` for at most `maxMs` (real time: a frozen test
 * clock must not hold it): 'back' when it answers, 'stopped' when `signal` aborts first, 'gave-up' when the time
 * runs out.
 */
export async function awaitStorage(
  reachable: () => Promise<boolean>, pollMs: number, maxMs: number, signal?: AbortSignal,
): Promise<'back' | 'stopped' | 'gave-up'> {
  const until = performance.now() + maxMs;
  while (performance.now() < until) {
    if (signal?.aborted) return 'stopped';
    await Bun.sleep(Math.min(pollMs, Math.max(0, until - performance.now())));
    if (await reachable()) return 'back';
  }
  return signal?.aborted ? 'stopped' : 'gave-up';
}

/**
 * Hands a job back once the database answers again: calls `handBack` (a release with the attempt refunded)
 * every `pollMs` until it no longer meets the outage. 'back' once it went through; 'stopped' when `signal`
 * aborts first, which leaves the job to its lease (another process takes it over once it runs out).
 */
export async function awaitDatabase(handBack: () => Promise<void>, pollMs: number, signal?: AbortSignal): Promise<'back' | 'stopped'> {
  for (;;) {
    if (signal?.aborted) return 'stopped';
    await Bun.sleep(pollMs);
    try {
      await handBack();
      return 'back';
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) throw err;
    }
  }
}
