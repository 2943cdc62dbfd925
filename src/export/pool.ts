import { hostname } from 'node:os';
import type { Clock } from '../clock.ts';
import { background, type Logger } from '../log.ts';
import { StoreUnavailableError, type ExportJob, type WithExports } from '../store/types.ts';
import { workerUrl } from '../worker-url.ts';
import type { FromWorker, ToWorker, WorkerInit } from './worker.ts';

export interface PoolOptions {
  size: number;
  /** Plain settings every worker gets (it opens its own store and storage from them). */
  init: WorkerInit;
  /** The process's store, used to claim jobs for idle workers. */
  store: WithExports<'jobs'>;
  clock: Clock;
  log: Logger;
  /** How often idle workers look for claimable jobs. */
  pollMs?: number;
}

interface Slot {
  index: number;
  owner: string;
  worker: Worker;
  ready: boolean;
  job: string | null;
  /** The job claimed before the thread was started, handed over when it is ready. */
  first: ExportJob | null;
  stopped: Promise<void>;
}

/**
 * A pool of Bun Worker threads for export jobs. The main thread claims a job (with a lease, in the
 * database, so several processes share the work) for each idle worker and hands it over as plain data;
 * the worker runs it on its own connections. A thread is started when there is a job for it and none
 * is idle (up to `size`), not when the server starts: a server without exports to run starts none (each
 * loads the code and opens its own connections, which competed with a fresh server's first requests).
 * A crashed worker's job is handed back, and the next thread starts after a pause growing while they
 * keep crashing; `stop()` asks workers to hand back their jobs at the next page boundary.
 */
export function createExportPool(o: PoolOptions) {
  const processId = `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  /** By index; a slot is made when its thread is started, and emptied when the thread crashes. */
  const slots: (Slot | undefined)[] = [];
  let timer: ReturnType<typeof setInterval> | undefined;
  let claiming = false;
  let stopping = false;
  let crashes = 0;
  /** No thread is started before this time (performance.now()): the pause after a crash. */
  let startAfter = 0;

  const ownerOf = (index: number) => `${processId}/w${index}`;

  async function fill(): Promise<void> {
    if (claiming || stopping) return;
    claiming = true;
    try {
      for (let index = 0; index < o.size && !stopping; index++) {
        const slot = slots[index];
        if (slot ? !slot.ready || slot.job !== null : performance.now() < startAfter) continue;
        const job = await o.store.exports.jobs.claim(slot?.owner ?? ownerOf(index), o.clock.now(), o.init.leaseMs);
        if (!job) break;
        o.log.info('export job claimed', { job: job.id, owner: slot?.owner ?? ownerOf(index), attempt: job.attempts });
        if (stopping) {
          // Claimed while stopping: handed back at once, for another process or the next start.
          await o.store.exports.jobs.release(job.id, ownerOf(index), o.clock.now());
          break;
        }
        if (slot) {
          slot.job = job.id;
          slot.worker.postMessage({ type: 'run', job, owner: slot.owner } satisfies ToWorker);
        } else slots[index] = spawn(index, job);
      }
    } catch (err) {
      // The store logs an outage once when it starts and once when it ends; claims resume after it.
      if (err instanceof StoreUnavailableError) o.log.debug('export claim skipped: database unavailable');
      else o.log.error('export claim failed', { err });
    } finally {
      claiming = false;
    }
  }

  /** Starts slot `index`'s thread for `job`, which it runs once it is ready. */
  function spawn(index: number, job: ExportJob): Slot {
    const worker = new Worker(workerUrl('export/worker.ts'));
    let markStopped!: () => void;
    const slot: Slot = { index, owner: ownerOf(index), worker, ready: false, job: job.id, first: job, stopped: new Promise((r) => (markStopped = r)) };
    worker.addEventListener('message', (event: MessageEvent<FromWorker>) => {
      const msg = event.data;
      if (msg.type === 'ready') {
        slot.ready = true;
        crashes = 0;
        const first = slot.first;
        slot.first = null;
        // After stop() the job was handed back (stop); the thread gets no work.
        if (first && !stopping) worker.postMessage({ type: 'run', job: first, owner: slot.owner } satisfies ToWorker);
      }
      if (msg.type === 'done') slot.job = null;
      if (msg.type === 'stopped') return markStopped();
      background(o.log, 'export claim failed', fill());
    });
    worker.addEventListener('error', (event) => {
      o.log.error('export worker crashed', { owner: slot.owner, error: (event as ErrorEvent).message });
      const held = slot.job;
      worker.terminate();
      markStopped();
      if (slots[index] === slot) slots[index] = undefined;
      if (held) void o.store.exports.jobs.release(held, slot.owner, o.clock.now()).catch(() => undefined);
      // The next thread waits, longer while they keep crashing (e.g. one cannot start at all).
      startAfter = performance.now() + Math.min(30_000, 100 * 2 ** crashes++);
    });
    worker.postMessage({ type: 'init', init: o.init } satisfies ToWorker);
    return slot;
  }

  const started = () => slots.filter((s): s is Slot => s !== undefined);

  return {
    /** Looks for claimable jobs now and every `pollMs`, starting threads for them. */
    start(): void {
      timer = setInterval(() => background(o.log, 'export claim failed', fill()), o.pollMs ?? 500);
      background(o.log, 'export claim failed', fill());
    },
    /** Stops claiming, lets running jobs hand themselves back, and ends the threads (forcibly after `timeoutMs`). */
    async stop(timeoutMs = 10_000): Promise<void> {
      stopping = true;
      clearInterval(timer);
      // A job claimed for a thread still starting has not reached it: handed back now.
      await Promise.all(started().filter((s) => s.first !== null).map((s) => {
        const job = s.first!;
        s.first = null;
        s.job = null;
        return o.store.exports.jobs.release(job.id, s.owner, o.clock.now()).catch((err: unknown) => o.log.warn('handing an export job back failed', { job: job.id, err }));
      }));
      for (const s of started()) s.worker.postMessage({ type: 'stop' } satisfies ToWorker);
      await Promise.race([Promise.all(started().map((s) => s.stopped)), Bun.sleep(timeoutMs)]);
      for (const s of started()) s.worker.terminate();
    },
    busy: () => started().filter((s) => s.job !== null).length,
  };
}

export type ExportPool = ReturnType<typeof createExportPool>;
