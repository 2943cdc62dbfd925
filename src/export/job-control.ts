import type { Clock } from '../clock.ts';
import type { ExportJob, WithExports } from '../store/types.ts';
import type { JobProgress } from './spec.ts';
import { encodeProgress } from './job-data.ts';

/** Why a job stopped before finishing. */
export type Interruption = 'cancelled' | 'lost' | 'stopped';

export class JobInterrupted extends Error {
  override name = 'JobInterrupted';
  constructor(readonly reason: Interruption) {
    super(`export job ${reason}`);
  }
}

/**
 * A worker's hold on a job: renews the lease on a timer (heartbeat), stores checkpoints under the lease,
 * and notices when the job was cancelled, taken over by another worker, or the worker is stopping.
 */
export class JobControl {
  private interrupted: Interruption | null = null;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly store: WithExports<'jobs'>,
    private readonly clock: Clock,
    readonly job: ExportJob,
    readonly owner: string,
    private readonly leaseMs: number,
    private readonly signal?: AbortSignal,
  ) {}

  start(): void {
    // renew() handles its own errors: a failed heartbeat is retried on the next tick.
    this.timer = setInterval(() => void this.renew(), Math.max(250, Math.floor(this.leaseMs / 3)));
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private lastYield = Date.now();

  /**
   * Called between pages: lets timers and messages run (SQLite reads and file writes may complete
   * without ever leaving the microtask queue, which would starve the heartbeat and a stop request),
   * then throws JobInterrupted when the job may not go on.
   */
  async check(): Promise<void> {
    if (Date.now() - this.lastYield > 20) {
      await new Promise((resolve) => setImmediate(resolve));
      this.lastYield = Date.now();
    }
    this.throwIfInterrupted();
  }

  throwIfInterrupted(): void {
    if (this.signal?.aborted) this.interrupted ??= 'stopped';
    if (this.interrupted) throw new JobInterrupted(this.interrupted);
  }

  /** Stores `progress` (and renews the lease); throws JobInterrupted when the job is no longer ours. */
  async checkpoint(progress: JobProgress): Promise<void> {
    const ok = await this.store.exports.jobs.checkpoint(this.job.id, this.owner, this.clock.now(), this.leaseMs, encodeProgress(progress));
    if (!ok) await this.lost();
    this.throwIfInterrupted();
  }

  private async renew(): Promise<void> {
    if (this.interrupted) return;
    try {
      const ok = await this.store.exports.jobs.checkpoint(this.job.id, this.owner, this.clock.now(), this.leaseMs);
      if (!ok) await this.lost();
    } catch {
      // A failed heartbeat is retried on the next tick; the lease outlives a few misses.
    }
  }

  /** Tells a cancellation from a lost lease. */
  private async lost(): Promise<void> {
    const now = await this.store.exports.jobs.get(this.job.tenant, this.job.id);
    this.interrupted ??= !now || now.state === 'cancelled' ? 'cancelled' : 'lost';
  }
}
