import { FhirError } from '../errors.ts';
import { StoreTimeoutError, StoreUnavailableError } from '../store/types.ts';
import type { ByteRange, ExportSink } from './sink.ts';
import type { FileRecord } from './spec.ts';
import { readPlan, readProgress } from './job-data.ts';
import { exportRequest, readableData, visibleJob, type StatusDeps, type StatusRequest } from './status.ts';
import { mayDownload } from './types-param.ts';

/** How long a started download keeps its files from being collected; renewed while it streams. */
export const DOWNLOAD_LEASE_MS = 60_000;

export interface Download {
  file: FileRecord;
  /** Strong validator: files never change once written. */
  etag: string;
  size: number;
  read(range?: ByteRange): ReadableStream<Uint8Array>;
  /** Extends the download's hold on the files (call while streaming). */
  keepAlive(): Promise<void>;
  /** Ends the hold (the download finished or was abandoned). */
  release(): Promise<void>;
}

/** Seconds a client is asked to wait when the export storage could not be reached. */
const STORAGE_RETRY_AFTER = '5';

/**
 * A file's first bytes that could not be read, as the client is answered: a failure of the store (the database's
 * connection lost: StoreUnavailableError, 503 with Retry-After) as the store said it, any other (S3 unreachable, a disk
 * error) as storedSize says it: a 503 with Retry-After, the file being there.
 */
export function readFailure(err: unknown): unknown {
  if (err instanceof StoreUnavailableError || err instanceof StoreTimeoutError || err instanceof FhirError) return err;
  return new FhirError('unavailable', 'The export storage could not be reached; retry shortly', { headers: { 'Retry-After': STORAGE_RETRY_AFTER }, cause: err });
}

/**
 * The stored size of a file, null when it is not stored; a storage that cannot tell (S3 unreachable or
 * answering 5xx, a disk error) is a 503 with Retry-After, not the 410 of a file removed for good, which
 * tells a client to start its export again.
 */
export async function storedSize(sink: Pick<ExportSink, 'size'>, key: string): Promise<number | null> {
  try {
    return await sink.size(key);
  } catch (err) {
    throw new FhirError('unavailable', 'The export storage could not be reached; retry shortly', { headers: { 'Retry-After': STORAGE_RETRY_AFTER }, cause: err });
  }
}

/**
 * Bulk Data 2.0 output file request: the file of a completed job, for the client that started it, with
 * a token that may still read the file's resource type (under the scope filter it was exported with,
 * if any). Starting the download takes a lease on the files so that garbage collection waits for it.
 */
export async function openDownload(deps: StatusDeps, request: StatusRequest, id: string, name: string): Promise<Download> {
  const req = exportRequest(request);
  const job = await visibleJob(deps, req, id);
  if (job.state !== 'completed') throw new FhirError('not-found', `Export job '${id}' has no files yet`);
  const file = readableData(() => readProgress(job)).files.find((f) => f.name === name);
  if (!file) throw new FhirError('not-found', `Export job '${id}' has no file '${name}'`);
  if (file.kind !== 'error' && !mayDownload(req.access, file.subject, readableData(() => readPlan(job)).spec)) {
    throw new FhirError('forbidden', `The access token's scopes do not allow reading and searching ${file.subject} resources, which their export file needs`);
  }
  const download = crypto.randomUUID();
  const lease = (starting: boolean) =>
    deps.store.exports.downloads.holdFiles(req.tenant, id, download, deps.clock.now(), DOWNLOAD_LEASE_MS, starting);
  if (!(await lease(true))) throw new FhirError('not-found', `The files of export job '${id}' have expired`);
  const stored = await storedSize(deps.sink, file.key).catch(async (err: unknown) => {
    await deps.store.exports.downloads.releaseFiles(id, download);
    throw err;
  });
  if (stored === null) {
    await deps.store.exports.downloads.releaseFiles(id, download);
    throw new FhirError('gone', `The file '${name}' of export job '${id}' is no longer in the export storage (removed, or kept on another server's disk); start a new export`);
  }
  return {
    file,
    etag: `"${job.id}.${file.name}.${file.bytes}"`,
    size: file.bytes,
    read: (range) => deps.sink.read(file.key, range),
    keepAlive: async () => void (await lease(false)),
    release: () => deps.store.exports.downloads.releaseFiles(id, download),
  };
}
