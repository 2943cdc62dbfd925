import { hostname } from 'node:os';
import type { Clock } from '../clock.ts';
import { background, type Logger } from '../log.ts';
import { StoreUnavailableError, type WithExports } from '../store/types.ts';
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
  stopped: Promise<void>;
}

/**
 * A pool of Bun Worker threads for export jobs. The main thread claims a job (with a lease, in the
 * database, so several processes share the work) for each idle worker and hands it over as plain data;
 * the worker runs it on its own connections. A crashed worker's job is handed back and the worker
 * replaced; `stop()` asks workers to hand back their jobs at the next page boundary.
 */
export function createExportPool(o: PoolOptions) {
  const processId = `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  const slots: Slot[] = [];
  let timer: ReturnType<typeof setInterval> | undefined;
  let claiming = false;
  let stopping = false;

  async function fill(): Promise<void> {
    if (claiming || stopping) return;
    claiming = true;
    try {
      for (const slot of slots) {
        if (!slot.ready || slot.job !== null || stopping) continue;
        const job = await o.store.exports.jobs.claim(slot.owner, o.clock.now(), o.init.leaseMs);
        if (!job) break;
        slot.job = job.id;
        o.log.info('export job claimed', { job: job.id, owner: slot.owner, attempt: job.attempts });
        slot.worker.postMessage({ type: 'run', job, owner: slot.owner } satisfies ToWorker);
      }
    } catch (err) {
      // The store logs an outage once when it starts and once when it ends; claims resume after it.
      if (err instanceof StoreUnavailableError) o.log.debug('export claim skipped: database unavailable');
      else o.log.error('export claim failed', { err });
    } finally {
      claiming = false;
    }
  }

  let crashes = 0;

  function spawn(index: number): Slot {
    const worker = new Worker(workerUrl('export/worker.ts'));
    let markStopped!: () => void;
    const slot: Slot = { index, owner: `${processId}/w${index}`, worker, ready: false, job: null, stopped: new Promise((r) => (markStopped = r)) };
    worker.addEventListener('message', (event: MessageEvent<FromWorker>) => {
      const msg = event.data;
      if (msg.type === 'ready') {
        slot.ready = true;
        crashes = 0;
      }
      if (msg.type === 'done') slot.job = null;
      if (msg.type === 'stopped') return markStopped();
      background(o.log, 'export claim failed', fill());
    });
    worker.addEventListener('error', (event) => {
      o.log.error('export worker crashed', { owner: slot.owner, error: (event as ErrorEvent).message });
      const job = slot.job;
      worker.terminate();
      markStopped();
      if (job) void o.store.exports.jobs.release(job, slot.owner, o.clock.now()).catch(() => undefined);
      // Replace the worker, backing off while it keeps crashing (e.g. it cannot start at all).
      const delay = Math.min(30_000, 100 * 2 ** crashes++);
      setTimeout(() => {
        if (!stopping) slots[index] = spawn(index);
      }, delay);
    });
    worker.postMessage({ type: 'init', init: o.init } satisfies ToWorker);
    return slot;
  }

  return {
    start(): void {
      for (let i = 0; i < o.size; i++) slots.push(spawn(i));
      timer = setInterval(() => background(o.log, 'export claim failed', fill()), o.pollMs ?? 500);
    },
    /** Stops claiming, lets running jobs hand themselves back, and ends the threads (forcibly after `timeoutMs`). */
    async stop(timeoutMs = 10_000): Promise<void> {
      stopping = true;
      clearInterval(timer);
      for (const s of slots) s.worker.postMessage({ type: 'stop' } satisfies ToWorker);
      await Promise.race([Promise.all(slots.map((s) => s.stopped)), Bun.sleep(timeoutMs)]);
      for (const s of slots) s.worker.terminate();
    },
    busy: () => slots.filter((s) => s.job !== null).length,
  };
}

export type ExportPool = ReturnType<typeof createExportPool>;
