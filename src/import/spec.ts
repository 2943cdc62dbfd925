import type { FhirIssue } from '../errors.ts';
import type { ImportJob } from '../store/types.ts';

/** One input of an `$import`: the type of every resource in it, and where it is fetched from. */
export interface ImportInput {
  type: string;
  url: string;
}

/** A validated `$import` request, as the job keeps it. */
export interface ImportSpec {
  inputs: ImportInput[];
  /** The `inputSource` the client named (informational: the server the data came from). */
  inputSource?: string;
  /** `storageDetail.maxBatchResourceCount`: resources per write transaction. */
  batchSize?: number;
  /**
   * The signed-in user of the kick-off token (Access.user), when it came from a sign-in: the job belongs to its
   * client and this user, so that one app's users never see, read the errors of or cancel each other's imports (as
   * ExportSpec.ownerUser). Absent: a client's own authority, whose jobs no user's token sees.
   */
  ownerUser?: string;
}

/** What became of one input. */
export interface InputResult {
  type: string;
  url: string;
  /** Resources stored or found already stored (as `cinder import` counts them). */
  imported: number;
  /** Of `imported`, those equal to their current version (no version written). */
  unchanged: number;
  /** Lines that could not be imported. */
  failed: number;
  /** The failures, each with its line (the first MAX_ISSUES), and the input's own failure (not fetched, too large...). */
  issues: FhirIssue[];
  /** Failures beyond MAX_ISSUES, counted only. */
  omitted: number;
  /** The file of every failed line (error-file.ts), when there was one. */
  errors?: { key: string; bytes: number };
}

/** A job's results so far: the finished inputs in order (the next one to run is `done.length`), and counts of the running one. */
export interface ImportProgress {
  done: InputResult[];
  current?: { imported: number; failed: number };
  /**
   * The job's types its client's registered scopes no longer let it import (narrowed by `cinder client update` while
   * the job waited or ran): their inputs are stopped, or never started, each with its error entry.
   */
  refused?: string[];
}

/** Failures listed per input in the status; the rest are counted. */
export const MAX_ISSUES = 1000;
/** Failures listed in a whole job (its progress is stored as the job runs, so it stays small). */
export const MAX_JOB_ISSUES = 10_000;

export class ImportDataError extends Error {
  override name = 'ImportDataError';
}

function parse<T>(text: string, what: string): T {
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new ImportDataError(`the import job's ${what} is not readable`, { cause: err });
  }
}

export const encodeSpec = (spec: ImportSpec): string => JSON.stringify(spec);
export const encodeProgress = (p: ImportProgress): string => JSON.stringify(p);

export function readSpec(job: ImportJob): ImportSpec {
  const spec = parse<ImportSpec>(job.spec, 'parameters');
  if (!Array.isArray(spec?.inputs)) throw new ImportDataError("the import job's parameters are not readable");
  return spec;
}

export const encodeCounts = (c: NonNullable<ImportProgress['current']>): string => JSON.stringify({ imported: c.imported, failed: c.failed });

/**
 * A job's progress, with the running input's counts as last renewed (ImportJob.counts, stored apart from the
 * progress so that a renewal does not rewrite its issues) over any the progress holds (a release before them wrote them there).
 */
export function readProgress(job: Pick<ImportJob, 'progress' | 'counts'>): ImportProgress {
  const p = parse<ImportProgress>(job.progress, 'progress');
  if (!Array.isArray(p?.done)) throw new ImportDataError("the import job's progress is not readable");
  if (job.counts) {
    const c = parse<{ imported?: unknown; failed?: unknown }>(job.counts, 'progress');
    if (typeof c?.imported === 'number' && typeof c.failed === 'number') p.current = { imported: c.imported, failed: c.failed };
  }
  return p;
}
