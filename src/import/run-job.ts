import type { Clock } from '../clock.ts';
import { accessFromScopes } from '../auth/scopes.ts';
import { FhirError, type FhirIssue } from '../errors.ts';
import type { Access } from '../fhir/access.ts';
import type { FhirDeps } from '../fhir/crud.ts';
import { createImporter, type ImportIssue } from '../fhir/import/importer.ts';
import { lineIds } from '../fhir/import/line-ids.ts';
import type { Logger } from '../log.ts';
import { StoreUnavailableError, type Client, type ImportJob, type Store } from '../store/types.ts';
import { fhirBaseOf } from '../config.ts';
import { withRegexAccounts } from '../regex-guard.ts';
import { attemptToken, downloadInput, downloadName, InputError, removeLeftDownloads, SpoolError, type FetchInputDeps } from './fetch-input.ts';
import { awaitErrorStorage, awaitSpool, pauseForOutage, StorageBack, type AttemptState } from './job-outage.ts';
import { importPrefix, openErrorFile } from './error-file.ts';
import type { ExportSink } from '../export/sink.ts';
import { operationOutcome } from '../fhir/outcome.ts';
import { requireImportAccess } from './kickoff.ts';
import { encodeCounts, encodeProgress, ImportDataError, MAX_ISSUES, MAX_JOB_ISSUES, readProgress, readSpec, type ImportInput, type ImportProgress, type ImportSpec, type InputResult } from './spec.ts';

export interface ImportRunDeps {
  /** What `cinder import` writes with: validation level, profiles, the core layer. */
  fhir: FhirDeps;
  store: Pick<Store, 'imports'>;
  clock: Clock;
  log: Logger;
  baseUrl: string;
  input: FetchInputDeps;
  /** The import spool (spool.ts), whose runners' directories may hold the downloads of the job's earlier attempts. */
  spoolRoot: string;
  /** The export storage, where each input's error file is written (error-file.ts). */
  sink: Pick<ExportSink, 'open' | 'size'>;
  /** How long a job whose export storage or spool cannot be reached waits for it (STORAGE_WAIT_MS; 0: not at all). */
  storageWaitMs: number;
  leaseMs: number;
  /** Claims of a job that ended in an unexpected error before it is marked failed. */
  maxAttempts: number;
  owner: string;
  /** Aborted when the process stops: the job is handed back (released) for any process to resume. */
  signal?: AbortSignal;
  /**
   * The client that started a job, as the token endpoint reads it (its cache: a change is seen within
   * CLIENT_CACHE_TTL_MS): a job of a client disabled or deleted (`cinder client disable|delete`) is cancelled,
   * and one whose registered scopes no longer let it import a type (`cinder client update --scope`) stops
   * writing that type (refusedTypes).
   */
  client?: (clientId: string) => Promise<Client | null>;
}

/** `paused`: handed back after an outage (of the database, the export storage or the spool) with its attempt refunded (job-outage.ts). */
export type ImportOutcome = 'completed' | 'failed' | 'cancelled' | 'lost' | 'released' | 'paused';

/** Why a job stops before its end. */
class Interrupted extends Error {
  constructor(readonly outcome: 'cancelled' | 'lost' | 'released') {
    super(`import job ${outcome}`);
  }
}

/** One failed line as OperationOutcome issues: its problems (an invalid resource), each located at its line. */
function lineIssues(i: ImportIssue): FhirIssue[] {
  const where = i.line === undefined ? [] : [`Line[${i.line}]`];
  const at = i.line === undefined ? '' : `line ${i.line}: `;
  const problems: FhirIssue[] = i.issues?.length ? i.issues : [{ severity: 'error', code: 'invalid', details: { text: i.message } }];
  return problems.map((p) => {
    const text = p.details?.text ?? p.diagnostics ?? i.message;
    // A line kept unchanged though the rules now refuse it (ImportIssue.severity): its issues as they are, information and warnings.
    const out: FhirIssue = { severity: i.severity === 'warning' ? p.severity : 'error', code: p.code, details: { text: `${at}${text}` }, diagnostics: `${at}${text}` };
    if (where.length) out.location = where;
    if (p.expression) out.expression = p.expression;
    return out;
  });
}

function newResult(input: ImportInput): InputResult {
  return { type: input.type, url: input.url, imported: 0, unchanged: 0, failed: 0, issues: [], omitted: 0 };
}

/** Lists `issues` in `result` while there is room (MAX_ISSUES for the input, MAX_JOB_ISSUES with the `listed` of the inputs before), counts the rest. */
function note(result: InputResult, issues: FhirIssue[], listed: number): void {
  const room = Math.max(0, Math.min(MAX_ISSUES, MAX_JOB_ISSUES - listed) - result.issues.length);
  result.issues.push(...issues.slice(0, room));
  result.omitted += Math.max(0, issues.length - room);
}

/** Whether `client`, which started a job, is disabled or deleted (a client no longer registered, which only a test's crafted token names, is not). */
function cutOff(client: Client | null): boolean {
  return !!client && (client.disabled || client.deletedAt !== null);
}

/**
 * Of `types`, those `client`'s registered scopes no longer let it import as the kick-off requires of a token
 * (requireImportAccess: create and update, unfiltered, no patient): its registration bounds every token it holds,
 * so a narrowed one bounds a job it started too.
 */
export function refusedTypes(client: Client, types: Iterable<string>): string[] {
  const access = accessFromScopes(client.scopes, client.clientId);
  return [...new Set(types)].filter((type) => {
    try {
      requireImportAccess(access, [type]);
      return false;
    } catch (err) {
      if (err instanceof FhirError && err.status === 403) return true;
      throw err;
    }
  });
}

/**
 * After a job that wrote much (more than a tenth of the resources the planner's statistics counted: analyze's
 * `wrote`), the statistics and the types' measured sizes, as `cinder import` and a reindex refresh them, before the
 * job reads as completed: the searches its client runs next are planned by what it wrote. A failure is logged, the
 * import stands (the statistics watch comes by later).
 */
async function refreshStatistics(deps: ImportRunDeps, job: ImportJob, progress: ImportProgress): Promise<void> {
  const wrote = progress.done.reduce((n, r) => n + r.imported - r.unchanged, 0);
  if (wrote === 0) return;
  try {
    const analysed = await deps.fhir.store.resources.indexing.analyze({ wrote });
    if (analysed.length) deps.log.info('import job refreshed the planner statistics', { job: job.id, wrote, tables: analysed.length });
  } catch (err) {
    deps.log.warn('import job could not refresh the planner statistics', { job: job.id, wrote, err });
  }
}

/** Why an input of `type` was stopped (after `imported` resources) or never started (undefined): its error entry's issue. */
function refusalIssue(type: string, index: number, imported: number | undefined): FhirIssue {
  const text = `The client's registered scopes no longer allow it to create and update ${type} (narrowed ${imported === undefined
    ? 'after the import was requested): the input was not imported'
    : `while the import ran): the input was stopped after ${imported} resources, and the rest of it was not imported`}`;
  return { severity: 'error', code: 'forbidden', details: { text }, diagnostics: text, expression: [`input[${index}].type`] };
}

/**
 * A lease held on a timer: renews it, and aborts the work when the job is no longer ours; `onClient` is given the
 * job's client as read at each renewal while it may go on. A timer's renewal stores the running input's counts
 * (ImportJob.counts, a few bytes), and the whole progress only when its types refused changed since it was last
 * stored: the progress holds the inputs' issues, up to MAX_JOB_ISSUES (3.3 MB measured with 10,000 validation
 * failures), which every renewal rewrote into the job's row only for the counts to move. `renew()` (as an input
 * ends) stores the whole progress.
 */
function holdLease(deps: ImportRunDeps, job: ImportJob, progress: () => ImportProgress, onClient: (client: Client) => void) {
  const controller = new AbortController();
  let reason: Interrupted | undefined;
  const stop = (why: Interrupted) => {
    reason ??= why;
    controller.abort(reason);
  };
  const onStop = () => stop(new Interrupted('released'));
  deps.signal?.addEventListener('abort', onStop);
  if (deps.signal?.aborted) onStop();
  /** The refused types of the progress last stored (`refused` joined). */
  let storedRefused = (progress().refused ?? []).join();
  const renew = async (store: boolean | 'counts' = true) => {
    const client = deps.client ? await deps.client(job.clientId) : null;
    if (client && !cutOff(client)) onClient(client);
    let whole: string | undefined;
    let counts: string | undefined;
    if (store !== false) {
      const p = progress();
      const refused = (p.refused ?? []).join();
      if (store === true || refused !== storedRefused) {
        whole = encodeProgress(p);
        storedRefused = refused;
      }
      if (p.current) counts = encodeCounts(p.current);
    }
    const ok = await deps.store.imports.checkpoint(job.id, deps.owner, deps.clock.now(), deps.leaseMs, whole, counts);
    if (ok && cutOff(client)) {
      // Cut off while the job runs (a leaked secret's import must not go on writing): cancelled as a DELETE would.
      await deps.store.imports.cancel(job.tenant, job.id, deps.clock.now());
      stop(new Interrupted('cancelled'));
      return;
    }
    if (ok) return;
    const now = await deps.store.imports.get(job.tenant, job.id);
    stop(new Interrupted(!now || now.state === 'cancelled' ? 'cancelled' : 'lost'));
  };
  const timer = setInterval(() => void renew('counts').catch(() => undefined), Math.max(250, Math.floor(deps.leaseMs / 3)));
  return {
    signal: controller.signal,
    renew,
    interrupted: () => reason,
    end() {
      clearInterval(timer);
      deps.signal?.removeEventListener('abort', onStop);
    },
  };
}

/** Fetches one input and imports it as `cinder import` imports an NDJSON file; an input that cannot be fetched is its result's issue. */
async function runInput(
  deps: ImportRunDeps, job: ImportJob, attempt: string, state: AttemptState, spec: ImportSpec, done: InputResult[], result: InputResult,
  signal: AbortSignal, access: Access,
): Promise<void> {
  const index = done.length;
  const input = spec.inputs[index]!;
  const listed = done.reduce((n, r) => n + r.issues.length, 0);
  let file;
  try {
    file = await downloadInput(deps.input, input.url, downloadName(job.id, attempt, index), signal, job.credential ?? undefined);
  } catch (err) {
    if (!(err instanceof InputError)) throw err;
    // Listed whatever the caps: one per input at most, and the only word on why the input imported nothing.
    result.issues.push({ severity: 'error', code: 'processing', details: { text: err.message }, diagnostics: err.message });
    return;
  }
  const fhirBase = fhirBaseOf(deps.baseUrl, job.tenant);
  // Every failure, where the status lists the first ones; a file of its own per attempt (an attempt that lost its lease may still be writing its own).
  const errors = openErrorFile(deps.sink, `${importPrefix(job)}/${index}-${crypto.randomUUID().slice(0, 8)}/errors.ndjson`);
  let written = false;
  try {
    const importer = createImporter(deps.fhir, {
      tenant: job.tenant, fhirBase, signal, auditAppendOnly: true, access,
      // Each batch commits only while this claim still holds the job: one that lost it (it stalled past its lease and
      // another runner claimed the job, or the job was cancelled) rolls back and the input stops, whatever its timer knows.
      fence: async (w) => {
        if (!(await w.holdImportLease(job.id, deps.owner, deps.clock.now(), deps.leaseMs))) throw new Interrupted('lost');
      },
      ...(spec.batchSize === undefined ? {} : { batchSize: spec.batchSize }),
      onIssue: (issue) => {
        const issues = lineIssues(issue);
        note(result, issues, listed);
        errors.add(operationOutcome(issues));
      },
      onProgress: (p) => Object.assign(result, { imported: p.imported, unchanged: p.unchanged, failed: p.failed }),
    });
    try {
      // Id-less lines get their line's id: an input read again after an interruption stores none twice.
      const ids = lineIds(job.id, index, job.createdAt);
      await importer.add([{ name: input.url, blob: Bun.file(file.path), format: 'ndjson', type: input.type, ids }]);
    } finally {
      // Commits what is queued, also when interrupted: nothing is left in flight once the job is given back.
      await importer.finish();
    }
    written = true;
    try {
      const record = await errors.finish();
      if (record) result.errors = record;
    } catch (err) {
      // The lines are imported and the first failures listed: a storage that cannot take the file (full, or away
      // longer than the wait) costs the file, not the input (another attempt would import it again for the same end).
      await awaitErrorStorage(deps, job, state, signal, err);
      deps.log.warn('import error file not written', { job: job.id, input: index, err });
      const text = `The error file of this input could not be written to the export storage (the server's log holds why, under job ${job.id}): only the failures listed here are reported`;
      result.issues.push({ severity: 'warning', code: 'exception', details: { text }, diagnostics: text });
    }
  } finally {
    if (!written) await errors.abort();
    await file.remove();
  }
}

/**
 * Runs an import job under its lease: each input in turn (fetched, then imported as `cinder import` does),
 * its result stored once it is done. A job claimed again (its process stopped or died) starts at the
 * first input not done. An outage of the database or the export storage hands the job back with its attempt refunded
 * once they answer (pauseForOutage); an unexpected error hands it back for another attempt, up to `maxAttempts`.
 */
export function runImportJob(deps: ImportRunDeps, job: ImportJob): Promise<ImportOutcome> {
  // With the tenant's regex accounts, as its requests are (src/regex-guard.ts).
  return withRegexAccounts(job.tenant, () => runJob(deps, job));
}

async function runJob(deps: ImportRunDeps, job: ImportJob): Promise<ImportOutcome> {
  let spec: ImportSpec;
  let progress: ImportProgress;
  try {
    spec = readSpec(job);
    progress = readProgress(job);
  } catch (err) {
    if (!(err instanceof ImportDataError)) throw err;
    await deps.store.imports.fail(job.id, deps.owner, deps.clock.now(), err.message, job.progress);
    return 'failed';
  }
  // What an attempt whose process died left on this machine's disk (the input it was reading) goes, beside this
  // attempt (awaited as it ends).
  const attempt = attemptToken();
  const state: AttemptState = { storageGone: false };
  const cleaned = removeLeftDownloads(deps.spoolRoot, job.id, attempt).then(
    (files) => void (files > 0 && deps.log.info('import downloads left by an earlier attempt removed', { job: job.id, files })),
    (err: unknown) => deps.log.warn('import downloads left not removed', { job: job.id, err }),
  );
  // Each claim counts an attempt; a stop hands it back and an error this code catches is retried or fails
  // below. A claim past `maxAttempts` therefore follows attempts that ended their process (a crash, a kill,
  // a lease lost): a job that keeps doing that is not tried again.
  if (job.attempts > deps.maxAttempts) {
    const reason = `The import's process ended ${job.attempts - 1} times while running it (a crash, a kill, or a lost lease); it is not tried again`;
    deps.log.error('import job given up', { job: job.id, attempts: job.attempts });
    await deps.store.imports.fail(job.id, deps.owner, deps.clock.now(), reason, job.progress);
    await cleaned;
    return 'failed';
  }
  let current: InputResult | undefined;
  // The types the client may no longer import (sticky: a job never takes one up again), and the running input's stop.
  const refused = new Set(progress.refused);
  let stopInput: AbortController | undefined;
  const snapshot = (): ImportProgress => ({
    done: progress.done, ...(current && { current: { imported: current.imported, failed: current.failed } }), ...(refused.size > 0 && { refused: [...refused] }),
  });
  // What the issues may tell the client: its registered scopes as last read (none for a client no longer known).
  let access = accessFromScopes([], job.clientId);
  const lease = holdLease(deps, job, snapshot, (client) => {
    access = accessFromScopes(client.scopes, client.clientId);
    for (const type of refusedTypes(client, spec.inputs.map((i) => i.type))) refused.add(type);
    if (current && refused.has(current.type)) stopInput?.abort();
  });
  try {
    // A job queued before its client was cut off never starts (nor an input of a type its client was narrowed out of).
    await lease.renew(false);
    if (lease.interrupted()) throw lease.interrupted();
    for (let i = progress.done.length; i < spec.inputs.length; i++) {
      current = newResult(spec.inputs[i]!);
      if (refused.has(current.type)) {
        current.issues.push(refusalIssue(current.type, i, undefined));
      } else {
        stopInput = new AbortController();
        try {
          await runInput(deps, job, attempt, state, spec, progress.done, current, AbortSignal.any([lease.signal, stopInput.signal]), access);
        } catch (err) {
          if (!stopInput.signal.aborted || lease.interrupted()) throw err;
          // Stopped: what it committed stays, and its entry says where it stopped (one that ended first stands whole).
          current.issues.push(refusalIssue(current.type, i, current.imported));
        }
      }
      if (lease.interrupted()) throw lease.interrupted();
      progress = { done: [...progress.done, current], ...(refused.size > 0 && { refused: [...refused] }) };
      current = undefined;
      await lease.renew();
      if (lease.interrupted()) throw lease.interrupted();
    }
    await refreshStatistics(deps, job, progress);
    const ok = await deps.store.imports.complete(job.id, deps.owner, deps.clock.now(), encodeProgress(progress));
    if (!ok) await lease.renew(false).catch(() => undefined);
    return ok ? 'completed' : (lease.interrupted()?.outcome ?? 'lost');
  } catch (err) {
    // A batch the lease fence rolled back (runInput): the job is someone else's, or cancelled, which the lease tells.
    if (err instanceof Interrupted && !lease.interrupted()) await lease.renew(false).catch(() => undefined);
    // A spool waited for in vain is not tried again at once: another attempt would wait as long.
    const spool = err instanceof SpoolError ? await awaitSpool(deps, job, lease.signal, err) : 'answers';
    if (spool === 'back') return await pauseForOutage(deps, job, new StorageBack(err));
    const why = lease.interrupted() ?? (err instanceof Interrupted ? err : undefined);
    if (why) {
      if (why.outcome === 'released') await deps.store.imports.release(job.id, deps.owner, deps.clock.now(), true);
      deps.log.info('import job interrupted', { job: job.id, outcome: why.outcome, input: progress.done.length });
      return why.outcome;
    }
    if (err instanceof StorageBack || err instanceof StoreUnavailableError) return await pauseForOutage(deps, job, err);
    deps.log.error('import job attempt failed', { job: job.id, attempt: job.attempts, err });
    if (job.attempts < deps.maxAttempts && spool !== 'gave-up') {
      await deps.store.imports.release(job.id, deps.owner, deps.clock.now());
      return 'released';
    }
    // The client is told what failed and whether to try again; the cause (a path, a driver's message) is the operator's.
    // An input that could not be fetched is no failure of the job: its entry names it (runInput).
    deps.log.error('import job failed', { job: job.id, attempts: job.attempts, err });
    const reason = `The import failed on the server after ${job.attempts} attempts (job ${job.id}), not because of its inputs: what it imported stays imported, and importing them again may succeed. The server's log holds the cause under this job id.`;
    await deps.store.imports.fail(job.id, deps.owner, deps.clock.now(), reason, encodeProgress(progress));
    return 'failed';
  } finally {
    lease.end();
    await cleaned;
  }
}
