/** Bulk import jobs (`$import`, src/import/). */
import type { JobSummary } from './export-jobs.ts';

export type ImportJobState = 'accepted' | 'in-progress' | 'completed' | 'failed' | 'cancelled';

export interface ImportJob {
  id: string;
  tenant: string;
  /** Client that started the import; only it may poll and cancel. */
  clientId: string;
  state: ImportJobState;
  /** The kick-off request URL (the status body's `request`). */
  request: string;
  /** Validated kick-off parameters as JSON text (owned by src/import). */
  spec: string;
  createdAt: number;
  updatedAt: number;
  /** Runner holding an in-progress job, and until when its lease runs, by the database's clock (ExportJob.leaseUntil). */
  leaseOwner: string | null;
  leaseUntil: number | null;
  /** How many times the job was claimed. */
  attempts: number;
  /**
   * The inputs' credential (`storageDetail.credentialHttpBasic`, `user:password`), for the process running the
   * job; null without one, and once the job ended (completed, failed, cancelled: the same statement wipes it).
   */
  credential: string | null;
  /** Results so far as JSON text (owned by src/import). */
  progress: string;
  /**
   * The running input's counts as JSON text (owned by src/import), renewed with the lease apart from `progress`
   * (whose issues make it large); null when no input runs.
   */
  counts: string | null;
  /** Why a failed job failed. */
  error: string | null;
  completedAt: number | null;
}

export type NewImportJob = Pick<ImportJob, 'id' | 'tenant' | 'clientId' | 'request' | 'spec' | 'progress' | 'createdAt'> & {
  credential?: string;
  /** The signed-in user the job runs for (absent: the client's own authority): with the client, whose limit it counts in. */
  ownerUser?: string;
};

/**
 * An import job's lifecycle, claimed with a lease as export jobs are (ExportJobRepo): several processes
 * sharing a database never run one job twice, and a job whose runner died is claimed again.
 */
export interface ImportJobRepo {
  /**
   * Persists an accepted job unless its owner (the client and `ownerUser`, or the client's own authority without one)
   * already has `maxActive` accepted or in-progress ones (atomically); false then.
   */
  create(job: NewImportJob, maxActive: number): Promise<boolean>;
  get(tenant: string, id: string): Promise<ImportJob | null>;
  /**
   * Claims the oldest accepted job, or an in-progress one whose lease ran out by the database's clock: in-progress,
   * leased to `owner` for `leaseMs` from the database's now, attempts + 1 (`now`, the caller's clock, stamps `updatedAt`).
   */
  claim(owner: string, now: number, leaseMs: number): Promise<ImportJob | null>;
  /**
   * Renews the lease and stores `progress` when given (the running input's `counts` then cleared, unless given too),
   * or else `counts` when given; false when the job is no longer in progress under `owner`.
   */
  checkpoint(id: string, owner: string, now: number, leaseMs: number, progress?: string, counts?: string): Promise<boolean>;
  /** in-progress -> completed (under `owner`), the credential wiped; false when the lease was lost or the job cancelled. */
  complete(id: string, owner: string, now: number, progress: string): Promise<boolean>;
  /** in-progress -> failed (under `owner`), the credential wiped. */
  fail(id: string, owner: string, now: number, error: string, progress: string): Promise<boolean>;
  /**
   * Gives an in-progress job back (accepted, no lease) so that any process resumes it at once; `refund`
   * takes back the claim's attempt (the process stopped: nothing went wrong with the job).
   */
  release(id: string, owner: string, now: number, refund?: boolean): Promise<void>;
  /** Cancels a job that is not cancelled yet, its credential wiped; returns its previous state, or null when unknown or already cancelled. */
  cancel(tenant: string, id: string, now: number): Promise<ImportJobState | null>;
  /**
   * Deletes jobs that ended (completed, failed, cancelled and not leased by the database's clock) before `before`;
   * returns them (to remove their files).
   */
  removeEnded(before: number): Promise<{ tenant: string; id: string }[]>;
  /** Counts by state (for metrics). */
  countByState(): Promise<Record<string, number>>;
  /** Every tenant's jobs created at or after `since` (epoch ms), oldest first (`cinder keys review`). */
  createdSince(since: number): Promise<JobSummary[]>;
}
