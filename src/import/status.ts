import type { Clock } from '../clock.ts';
import { FhirError } from '../errors.ts';
import type { Access } from '../fhir/access.ts';
import { operationOutcome } from '../fhir/outcome.ts';
import type { ImportJob, Store } from '../store/types.ts';
import { requireImportAccess } from './kickoff.ts';
import { ImportDataError, readProgress, readSpec, type ImportProgress, type ImportSpec, type InputResult } from './spec.ts';

export interface ImportStatusDeps {
  store: Pick<Store, 'imports'>;
  clock: Clock;
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
 * The job behind a status URL, if the caller may see it: same tenant and client, not cancelled, and a token
 * that may still import what it imports (requireImportAccess). Anyone else gets the 404 of an unknown job.
 */
async function visibleJob(deps: ImportStatusDeps, req: ImportStatusRequest, id: string): Promise<{ job: ImportJob; spec: ImportSpec }> {
  const job = await deps.store.imports.get(req.tenant, id);
  if (!job || job.clientId !== req.access.clientId) throw new FhirError('not-found', `No import job '${id}'`);
  if (job.state === 'cancelled') throw new FhirError('not-found', `Import job '${id}' was cancelled`);
  const spec = readable(() => readSpec(job));
  requireImportAccess(req.access, spec.inputs.map((i) => i.type));
  return { job, spec };
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
  if (r.omitted > 0) issues.push({ severity: 'information', code: 'informational', details: { text: `${r.omitted} more failures are not listed` } });
  return operationOutcome(issues);
}

/**
 * The status of an `$import`: running (with a progress text), or its result: per input the resources
 * imported (`count`, of which `unchanged`), and for each input with failures an OperationOutcome listing
 * them with their lines (`error`), as the Bulk Data import proposal's status body pairs outputs and errors.
 */
export async function importStatus(deps: ImportStatusDeps, req: ImportStatusRequest, id: string): Promise<ImportStatus> {
  const { job, spec } = await visibleJob(deps, req, id);
  const p = readable(() => readProgress(job));
  if (job.state === 'accepted' || job.state === 'in-progress') return { kind: 'running', progress: progressText(job, spec, p) };
  if (job.state === 'failed') return { kind: 'failed', reason: job.error ?? 'The import failed' };
  const body: Record<string, unknown> = {
    transactionTime: new Date(job.createdAt).toISOString(),
    request: job.request,
    ...(spec.inputSource === undefined ? {} : { inputSource: spec.inputSource }),
    output: p.done.map((r) => ({ type: r.type, inputUrl: r.url, count: r.imported, unchanged: r.unchanged })),
    error: p.done.filter((r) => r.issues.length > 0 || r.failed > 0).map((r) => ({ type: 'OperationOutcome', inputUrl: r.url, count: r.failed, outcome: outcomeOf(r) })),
  };
  return { kind: 'completed', body };
}

/**
 * Cancels an import (DELETE on its status URL): a running job stops at its next chunk. What it wrote
 * stays (each batch was committed as `cinder import` commits it); later polls get 404.
 */
export async function cancelImport(deps: ImportStatusDeps, req: ImportStatusRequest, id: string): Promise<void> {
  await visibleJob(deps, req, id);
  if ((await deps.store.imports.cancel(req.tenant, id, deps.clock.now())) === null) throw new FhirError('not-found', `Import job '${id}' was cancelled`);
}
