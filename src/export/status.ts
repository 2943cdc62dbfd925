import type { Clock } from '../clock.ts';
import { FhirError } from '../errors.ts';
import type { Access } from '../fhir/access.ts';
import type { ExportJob, WithExports } from '../store/types.ts';
import { jobPrefix } from './run-job.ts';
import type { ExportSink } from './sink.ts';
import type { ExportSpec, FileRecord, Step } from './spec.ts';
import { exportAccess } from './export-access.ts';
import { JobDataError, ownersOf, readPlan, readProgress, unreadableReason } from './job-data.ts';
import { mayDownload } from './types-param.ts';

export interface StatusDeps {
  /** Status reads and cancels jobs; a cancel removes their files at once; downloads hold them. */
  store: WithExports<'jobs' | 'cleanup' | 'downloads'>;
  clock: Clock;
  sink: ExportSink;
  /** Presigned S3 URLs in the manifest (and `requiresAccessToken: false`). */
  signedUrls: boolean;
}

/** Who asks: the tenant of the URL and the token's access (its client owns jobs). */
export interface StatusRequest {
  tenant: string;
  access: Access;
  fhirBase: string;
}

export type StatusResult =
  | { kind: 'running'; progress: string }
  | { kind: 'completed'; manifest: Record<string, unknown>; expiresAt: number }
  | { kind: 'failed'; reason: string };

/** The request with what its token may export (exportAccess): status, cancel and files are held to it as the kick-off was. */
export function exportRequest(req: StatusRequest): StatusRequest {
  return { ...req, access: exportAccess(req.access) };
}

/** Download URL of a job file (served by the FHIR API with a bearer token). */
export function fileUrl(fhirBase: string, jobId: string, name: string): string {
  return `${fhirBase}/$export-file/${encodeURIComponent(jobId)}/${encodeURIComponent(name)}`;
}

/**
 * The job behind a status URL, if the caller may see it: same tenant, same client, same patient in
 * context and same signed-in user (none, or the ones the kick-off token named), not cancelled, files not
 * expired. Anyone else gets the same 404 as for an unknown job and learns nothing.
 */
export async function visibleJob(deps: StatusDeps, req: StatusRequest, id: string): Promise<ExportJob> {
  const job = await deps.store.exports.jobs.get(req.tenant, id);
  const owners = job && ownersOf(job);
  if (!job || job.clientId !== req.access.clientId || owners!.patient !== req.access.patient || owners!.user !== req.access.user?.id) {
    throw new FhirError('not-found', `No export job '${id}'`);
  }
  if (job.state === 'cancelled') throw new FhirError('not-found', `Export job '${id}' was cancelled`);
  if (job.purged || (job.expiresAt !== null && job.expiresAt <= deps.clock.now())) {
    throw new FhirError('not-found', `The files of export job '${id}' have expired`);
  }
  return job;
}

/** Reads job data for a response; data this release cannot read is a clean OperationOutcome, not a 500 of unknown cause. */
export function readableData<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof JobDataError) throw new FhirError('exception', unreadableReason(err), { cause: err });
    throw err;
  }
}

function progressText(job: ExportJob, steps: Step[]): string {
  if (job.state === 'accepted') return 'queued';
  const p = readableData(() => readProgress(job, steps));
  const step = steps[Math.min(p.step, steps.length - 1)]!;
  const label = step.kind === 'type' ? step.type : step.kind === 'errors' ? 'finishing' : 'Provenance';
  return `step ${Math.min(p.step + 1, steps.length)} of ${steps.length} (${label}), ${p.exported} resources written`;
}

function entries(deps: StatusDeps, req: StatusRequest, job: ExportJob, files: FileRecord[], kind: FileRecord['kind']) {
  const seconds = Math.max(1, Math.min(604800, Math.floor(((job.expiresAt ?? 0) - deps.clock.now()) / 1000)));
  return files
    .filter((f) => f.kind === kind)
    .map((f) => ({
      type: f.type,
      url: deps.signedUrls && deps.sink.presign ? deps.sink.presign(f.key, seconds) : fileUrl(req.fhirBase, job.id, f.name),
      count: f.count,
    }));
}

/**
 * Bulk Data 2.0 (Privacy and Security Considerations): a status request is protected as the kick-off
 * was, "including an access token with scopes that cover all resources being exported". A token of the
 * job's client whose scopes no longer cover an exported type (as its download of that type would be
 * refused: mayDownload) gets 403, whatever the job's state.
 */
function requireCoverage(access: Access, spec: ExportSpec): void {
  const types = new Set(spec.provenance === 'none' ? spec.types : [...spec.types, 'Provenance']);
  const uncovered = [...types].filter((type) => !mayDownload(access, type, spec));
  if (uncovered.length) {
    throw new FhirError('forbidden', `The access token's scopes do not cover every type this export holds (${uncovered.join(', ')}), as the kick-off token's did`);
  }
}

/**
 * Bulk Data 2.0 status request: still running, the complete-status manifest, or why the job failed. The
 * job's spec is read once (its `_typeFilter` conditions may run to a megabyte: MAX_TYPE_FILTER_VALUES).
 */
export async function exportStatus(deps: StatusDeps, request: StatusRequest, id: string): Promise<StatusResult> {
  const req = exportRequest(request);
  const job = await visibleJob(deps, req, id);
  const { spec, steps } = readableData(() => readPlan(job));
  requireCoverage(req.access, spec);
  if (job.state === 'accepted' || job.state === 'in-progress') return { kind: 'running', progress: progressText(job, steps) };
  if (job.state === 'failed') return { kind: 'failed', reason: job.error ?? 'The export failed' };
  const { files } = readableData(() => readProgress(job));
  const manifest: Record<string, unknown> = {
    transactionTime: new Date(job.transactionTime).toISOString(),
    request: job.request,
    requiresAccessToken: !(deps.signedUrls && deps.sink.presign),
    output: entries(deps, req, job, files, 'output'),
  };
  if (spec.since !== undefined) manifest.deleted = entries(deps, req, job, files, 'deleted');
  manifest.error = entries(deps, req, job, files, 'error');
  return { kind: 'completed', manifest, expiresAt: job.expiresAt! };
}

/**
 * Bulk Data 2.0 delete request: cancels the job and removes its files (a running worker removes what it
 * wrote when it notices; garbage collection catches the rest). Later polls get 404. It acts on the status
 * URL, so it needs what a status request there needs (requireCoverage): a token that may not read the
 * job's status may not end the job and remove its files either.
 */
export async function cancelExport(deps: StatusDeps, request: StatusRequest, id: string): Promise<void> {
  const req = exportRequest(request);
  const job = await visibleJob(deps, req, id);
  requireCoverage(req.access, readableData(() => readPlan(job)).spec);
  const now = deps.clock.now();
  const previous = await deps.store.exports.jobs.cancel(req.tenant, id, now);
  if (previous === null) throw new FhirError('not-found', `Export job '${id}' was cancelled`);
  if (previous !== 'in-progress' && (await deps.store.exports.cleanup.markPurged(id, now))) {
    await deps.sink.removePrefix(jobPrefix({ tenant: req.tenant, id }));
  }
}
