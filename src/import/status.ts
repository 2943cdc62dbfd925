import type { Clock } from '../clock.ts';
import { FhirError } from '../errors.ts';
import type { Access } from '../fhir/access.ts';
import { operationOutcome } from '../fhir/outcome.ts';
import type { ImportJob, Store } from '../store/types.ts';
import { fhirBaseOf } from '../config.ts';
import { storedSize, type Download } from '../export/download.ts';
import type { ExportSink } from '../export/sink.ts';
import { requireImportAccess } from './kickoff.ts';
import { ImportDataError, readProgress, readSpec, type ImportProgress, type ImportSpec, type InputResult } from './spec.ts';

export interface ImportStatusDeps {
  store: Pick<Store, 'imports'>;
  clock: Clock;
  /** The public base URL (the error files' links). */
  baseUrl: string;
  /** The export storage, where the error files are (error-file.ts). */
  sink: Pick<ExportSink, 'size' | 'read'>;
}

export interface ImportStatusRequest {
  tenant: string;
  access: Access;
}

export type ImportStatus =
  | { kind: 'running'; progress: string }
  | { kind: 'completed'; body: Record<string, unknown> }
  | { kind: 'failed'; reason: string };

function readable<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof ImportDataError) throw new FhirError('exception', `${err.message}: it was written by another version of Cinder`, { cause: err });
    throw err;
  }
}

/**
 * The job behind a status URL, if the caller may see it: same tenant, client and signed-in user (none, or the one
 * the kick-off token named: ImportSpec.ownerUser), not cancelled, and a token
 * that may still import what it imports (requireImportAccess), but for the types the job stopped importing as its
 * client's registered scopes were narrowed (ImportProgress.refused): a token of the narrowed client sees why.
 * Anyone else gets the 404 of an unknown job.
 */
async function visibleJob(deps: ImportStatusDeps, req: ImportStatusRequest, id: string): Promise<{ job: ImportJob; spec: ImportSpec; progress: ImportProgress }> {
  const job = await deps.store.imports.get(req.tenant, id);
  if (!job || job.clientId !== req.access.clientId) throw new FhirError('not-found', `No import job '${id}'`);
  const spec = readable(() => readSpec(job));
  if ((typeof spec.ownerUser === 'string' ? spec.ownerUser : undefined) !== req.access.user?.id) throw new FhirError('not-found', `No import job '${id}'`);
  if (job.state === 'cancelled') throw new FhirError('not-found', `Import job '${id}' was cancelled`);
  const progress = readable(() => readProgress(job));
  const refused = new Set(progress.refused);
  requireImportAccess(req.access, spec.inputs.map((i) => i.type).filter((type) => !refused.has(type)));
  return { job, spec, progress };
}

function progressText(job: ImportJob, spec: ImportSpec, p: ImportProgress): string {
  if (job.state === 'accepted' && p.done.length === 0) return 'queued';
  const at = Math.min(p.done.length, spec.inputs.length - 1);
  const imported = p.done.reduce((n, r) => n + r.imported, 0) + (p.current?.imported ?? 0);
  const failed = p.done.reduce((n, r) => n + r.failed, 0) + (p.current?.failed ?? 0);
  return `input ${at + 1} of ${spec.inputs.length} (${spec.inputs[at]!.type}), ${imported} resources imported, ${failed} failed`;
}

/** An input's failures as an OperationOutcome, the ones past MAX_ISSUES counted in a last issue. */
function outcomeOf(r: InputResult): Record<string, unknown> {
  const issues = [...r.issues];
  if (r.omitted > 0) {
    const where = r.errors ? ': the error file (url) lists every failure' : '';
    issues.push({ severity: 'information', code: 'informational', details: { text: `${r.omitted} more failures are not listed${where}` } });
  }
  return operationOutcome(issues);
}

/** The URL of input `index`'s error file, below the job's status URL. */
const errorFileUrl = (deps: ImportStatusDeps, job: ImportJob, index: number) => `${fhirBaseOf(deps.baseUrl, job.tenant)}/$import-status/${job.id}/error-${index}.ndjson`;

/** One `error` entry per input with failures: counted, listed inline (bounded), and every one in its file (`url`) when it has one. */
function errorEntries(deps: ImportStatusDeps, job: ImportJob, done: InputResult[]): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const [i, r] of done.entries()) {
    if (r.issues.length === 0 && r.failed === 0) continue;
    out.push({ type: 'OperationOutcome', inputUrl: r.url, count: r.failed, ...(r.errors ? { url: errorFileUrl(deps, job, i) } : {}), outcome: outcomeOf(r) });
  }
  return out;
}

/**
 * The status of an `$import`: running (with a progress text), or its result: per input the resources
 * imported (`count`, of which `unchanged`), and for each input with failures an OperationOutcome listing
 * them with their lines (`error`), as the Bulk Data import proposal's status body pairs outputs and errors.
 */
export async function importStatus(deps: ImportStatusDeps, req: ImportStatusRequest, id: string): Promise<ImportStatus> {
  const { job, spec, progress: p } = await visibleJob(deps, req, id);
  if (job.state === 'accepted' || job.state === 'in-progress') return { kind: 'running', progress: progressText(job, spec, p) };
  if (job.state === 'failed') return { kind: 'failed', reason: job.error ?? 'The import failed' };
  const body: Record<string, unknown> = {
    transactionTime: new Date(job.createdAt).toISOString(),
    request: job.request,
    ...(spec.inputSource === undefined ? {} : { inputSource: spec.inputSource }),
    // As an export manifest says it: the error files (`error[].url`) are fetched with the job's bearer token.
    requiresAccessToken: true,
    output: p.done.map((r) => ({ type: r.type, inputUrl: r.url, count: r.imported, unchanged: r.unchanged })),
    error: errorEntries(deps, job, p.done),
  };
  return { kind: 'completed', body };
}

/**
 * The error file of input `index` of a completed import (the `url` of its `error` entry): NDJSON, one
 * OperationOutcome per failed line, for whoever may read the job's status. Served as export files are
 * (src/http/export-file.ts); it is removed with the job (RESULT_RETENTION_MS after it ended), so it needs no hold.
 */
export async function openImportErrors(deps: ImportStatusDeps, req: ImportStatusRequest, id: string, index: number): Promise<Omit<Download, 'file'>> {
  const { job } = await visibleJob(deps, req, id);
  if (job.state !== 'completed') throw new FhirError('not-found', `Import job '${id}' has no error files until it completes`);
  const file = readable(() => readProgress(job)).done[index]?.errors;
  if (!file) throw new FhirError('not-found', `Input ${index} of import job '${id}' has no error file`);
  if ((await storedSize(deps.sink, file.key)) === null) {
    throw new FhirError('gone', `The error file of input ${index} of import job '${id}' is no longer in the export storage (removed, or kept on another server's disk)`);
  }
  return {
    etag: `"${job.id}.error-${index}.${file.bytes}"`,
    size: file.bytes,
    read: (range) => deps.sink.read(file.key, range),
    keepAlive: async () => undefined,
    release: async () => undefined,
  };
}

/**
 * Cancels an import (DELETE on its status URL): a running job stops at its next chunk. What it wrote
 * stays (each batch was committed as `cinder import` commits it); later polls get 404.
 */
export async function cancelImport(deps: ImportStatusDeps, req: ImportStatusRequest, id: string): Promise<void> {
  await visibleJob(deps, req, id);
  if ((await deps.store.imports.cancel(req.tenant, id, deps.clock.now())) === null) throw new FhirError('not-found', `Import job '${id}' was cancelled`);
}
