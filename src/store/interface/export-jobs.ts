/** Bulk data export jobs (migration 3). */

export type ExportJobState = 'accepted' | 'in-progress' | 'completed' | 'failed' | 'cancelled';

/**
 * A job as `cinder keys review` lists it (export or import): who started it and when, never its parameters or
 * credential.
 */
export interface JobSummary {
  tenant: string;
  id: string;
  clientId: string;
  /** The signed-in user it runs for; null for the client's own authority. */
  ownerUser: string | null;
  state: ExportJobState;
  request: string;
  createdAt: number;
}

export interface ExportJob {
  id: string;
  tenant: string;
  /** Client that started the export; only it may poll, cancel and download. */
  clientId: string;
  state: ExportJobState;
  /** The kick-off request URL (the manifest's `request`). */
  request: string;
  /** Validated kick-off parameters as JSON text (owned by src/export). */
  spec: string;
  transactionTime: number;
  createdAt: number;
  updatedAt: number;
  /**
   * Worker holding an in-progress job, and until when its lease runs, by the database's clock (epoch ms): the
   * processes sharing the database (other machines, a `cinder export` command) judge leases by it, never by
   * their own clocks, whose skew would have them take a live job for an abandoned one.
   */
  leaseOwner: string | null;
  leaseUntil: number | null;
  /** How many times the job was claimed. */
  attempts: number;
  /** Checkpoint as JSON text (owned by src/export). */
  progress: string;
  /** Why a failed job failed. */
  error: string | null;
  completedAt: number | null;
  /** When the files of a completed or failed job expire. */
  expiresAt: number | null;
  /** The files were removed (expired or cancelled). */
  purged: boolean;
}

export type NewExportJob = Pick<ExportJob, 'id' | 'tenant' | 'clientId' | 'request' | 'spec' | 'transactionTime' | 'progress'> & {
  createdAt: number;
  /** The signed-in user the job runs for (absent: the client's own authority): with the client, whose limit it counts in. */
  ownerUser?: string;
  /** Creates the job already claimed (in-progress, first attempt) by this owner for `leaseMs` from the database's now. */
  claim?: { owner: string; leaseMs: number };
};

export interface ExportPatient {
  id: string;
  /** Joined the group after the export's `_since` (its resources match whatever their time). */
  joined: boolean;
}

/** An export job's lifecycle: kick-off, status reads, claims and leases, its end states. */
export interface ExportJobRepo {
  /**
   * Persists an accepted job and its patients, unless its owner (the client and `ownerUser`, or the client's own
   * authority without one) already has `maxActive` accepted or in-progress jobs (checked and inserted atomically);
   * returns false then. One user of an app cannot fill the limit for its other users.
   */
  create(job: NewExportJob, patients: ExportPatient[], maxActive: number): Promise<boolean>;
  /** The owner's accepted and in-progress jobs (a kick-off over the limit is refused before any work; `create` decides). */
  activeCount(tenant: string, clientId: string, ownerUser?: string): Promise<number>;
  get(tenant: string, id: string): Promise<ExportJob | null>;
  /**
   * Claims one job (the oldest accepted one, or an in-progress one whose lease ran out by the database's
   * clock; only `id` when given): in-progress, leased to `owner` for `leaseMs` from the database's now,
   * attempts + 1. `now` (the caller's clock) only stamps `updatedAt`.
   */
  claim(owner: string, now: number, leaseMs: number, id?: string): Promise<ExportJob | null>;
  /**
   * Renews the lease (`leaseMs` from the database's now) and stores `progress` when given; false when the job
   * is no longer in progress under `owner`.
   */
  checkpoint(id: string, owner: string, now: number, leaseMs: number, progress?: string): Promise<boolean>;
  /** in-progress -> completed (under `owner`); false when the lease was lost or the job cancelled. */
  complete(id: string, owner: string, now: number, progress: string, expiresAt: number): Promise<boolean>;
  /** in-progress -> failed (under `owner`). */
  fail(id: string, owner: string, now: number, error: string, expiresAt: number): Promise<boolean>;
  /** Gives an in-progress job back (accepted, no lease) so that any process resumes it at once. */
  release(id: string, owner: string, now: number, options?: ReleaseOptions): Promise<void>;
  /** Cancels a job that is not cancelled yet; returns its previous state, or null when unknown or already cancelled. */
  cancel(tenant: string, id: string, now: number): Promise<ExportJobState | null>;
  /** Counts by state (for metrics). */
  countByState(): Promise<Record<string, number>>;
  /** Every tenant's jobs created at or after `since` (epoch ms), oldest first (`cinder keys review`). */
  createdSince(since: number): Promise<JobSummary[]>;
}

/** Data a job keeps while it runs: its patients (stored at kick-off) and the Provenance it found. */
export interface ExportScratchRepo {
  /** The job's patients among `candidates`. */
  patientsIn(jobId: string, candidates: string[]): Promise<ExportPatient[]>;
  /** Notes Provenance `provenance` (ranked by `rank`) as a candidate latest Provenance of `target`; keeps the highest rank per target. */
  noteProvenance(jobId: string, rows: { target: string; provenance: string; rank: string }[]): Promise<void>;
  /** Distinct winning Provenance ids of the job, in id order after `after`. */
  latestProvenance(jobId: string, after: string, limit: number): Promise<string[]>;
}

/** Holds that keep a completed job's files while downloads stream them. */
export interface ExportDownloadRepo {
  /**
   * Keeps the files of a completed job from removal for `holdMs` from the database's clock (not the caller's:
   * a clean-up process whose clock runs ahead must not purge them mid-download) while download `download`
   * streams. A download `starting` needs files unexpired at `now`; one under way only needs them not removed.
   * False otherwise.
   */
  holdFiles(tenant: string, id: string, download: string, now: number, holdMs: number, starting: boolean): Promise<boolean>;
  /** Ends a download's hold on the files. */
  releaseFiles(id: string, download: string): Promise<void>;
}

/** Clean-up: removing the files of expired and cancelled jobs, then the jobs themselves. */
export interface ExportCleanupRepo {
  /**
   * Jobs whose files may be removed at `now`: completed or failed and expired, or cancelled; never
   * while a worker lease (by the database's clock) or a download runs.
   */
  purgeable(now: number, limit: number): Promise<ExportJob[]>;
  /**
   * Marks the files removed unless a download or worker lease started meanwhile (false then), and drops
   * the job's patients and Provenance notes, which nothing reads after: a client cancelling exports of a
   * large Group in a loop no longer piles up its patient rows for the retention.
   */
  markPurged(id: string, now: number): Promise<boolean>;
  /** Deletes a job with its patients and bookkeeping. */
  remove(id: string): Promise<void>;
  /** Ids of removed jobs last updated before `before` (for deletion). */
  purgedBefore(before: number, limit: number): Promise<string[]>;
}

/** The export job repositories, one per concern (`store.exports`). */
export interface ExportRepos {
  readonly jobs: ExportJobRepo;
  readonly scratch: ExportScratchRepo;
  readonly downloads: ExportDownloadRepo;
  readonly cleanup: ExportCleanupRepo;
}

/** A store narrowed to the export repositories `K`: what a part of src/export depends on. */
export interface WithExports<K extends keyof ExportRepos> {
  readonly exports: Pick<ExportRepos, K>;
}

export interface ReleaseOptions {
  /**
   * Hands back the attempt too (its claim does not count towards the job's attempts): the attempt
   * ended because the database was unavailable, not because of the job.
   */
  refundAttempt?: boolean;
}
