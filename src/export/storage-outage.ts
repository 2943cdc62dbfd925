import type { ExportSink } from './sink.ts';

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

/**
 * Waits until the storage answers again, asking every `pollMs` for at most `maxMs` (real time: a frozen
 * test clock must not hold it): 'back' when it answers, 'stopped' when `signal` aborts first,
 * 'gave-up' when the time runs out.
 */
export async function awaitStorage(
  sink: Pick<ExportSink, 'size'>, key: string, pollMs: number, maxMs: number, signal?: AbortSignal,
): Promise<'back' | 'stopped' | 'gave-up'> {
  const until = performance.now() + maxMs;
  while (performance.now() < until) {
    if (signal?.aborted) return 'stopped';
    await Bun.sleep(Math.min(pollMs, Math.max(0, until - performance.now())));
    if (!(await storageUnreachable(sink, key))) return 'back';
  }
  return signal?.aborted ? 'stopped' : 'gave-up';
}
