import { hostname } from 'node:os';
import type { Clock } from '../clock.ts';
import { background, type Logger } from '../log.ts';
import { StoreUnavailableError, type ExportJob, type WithExports } from '../store/types.ts';
import { workerUrl } from '../worker-url.ts';
import type { FromWorker, ToWorker, WorkerInit } from './worker.ts';

/** How long stop() waits for a thread it ends to be gone before it hands the thread's job back (terminate). */
const TERMINATE_WAIT_MS = 2_000;

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
  /** The thread's end has been dealt with (it crashed or closed), or the pool ends it itself (stop). */
  gone: boolean;
  stopped: Promise<void>;
}

/**
 * A pool of Bun Worker threads for export jobs. The main thread claims a job (with a lease, in the
 * database, so several processes share the work) for each idle worker and hands it over as plain data;
 * the worker runs it on its own connections. A thread is started when there is a job for it and none
 * is idle (up to `size`), not when the server starts: a server without exports to run starts none (each
 * loads the code and opens its own connections, which competed with a fresh server's first requests).
 * A worker that ends however it ends (an error, or a `close` without one: process.exit, the runtime ending it)
 * has its job handed back and its slot emptied, and the next thread starts after a pause growing while they
 * keep ending so; `stop()` asks workers to hand back their jobs at the next page boundary.
 */
export function createExportPool(o: PoolOptions) {
  const processId = `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
  /** By index; a slot is made when its thread is started, and emptied when the thread ends. */
  const slots: (Slot | undefined)[] = [];
  let timer: ReturnType<typeof setInterval> | undefined;
  let claiming = false;
  /** The claim round under way, which stop() waits for (a job it claims meanwhile is handed back before the store closes). */
  let filling: Promise<void> | undefined;
  let stopping = false;
  let crashes = 0;
  /** Jobs of ended threads being handed back, which stop() waits for (the store closes after it). */
  const handing = new Set<Promise<void>>();
  /** No thread is started before this time (performance.now()): the pause after a crash. */
  let startAfter = 0;

  const ownerOf = (index: number) => `${processId}/w${index}`;

  function fill(): Promise<void> {
    if (claiming || stopping) return Promise.resolve();
    claiming = true;
    return (filling = claimRound().finally(() => {
      claiming = false;
      filling = undefined;
    }));
  }

  /**
   * A job claimed but never run (its thread still starting, or claimed as the pool stops) is handed back with its
   * attempt refunded: a claim counts an attempt, and one that never reached a thread is not the job's to pay for
   * (a job paused so at every restart, or by a thread that cannot start, would otherwise be given up unrun).
   */
  const handBack = (job: string, owner: string) => o.store.exports.jobs.release(job, owner, o.clock.now(), { refundAttempt: true });

  async function claimRound(): Promise<void> {
    try {
      for (let index = 0; index < o.size && !stopping; index++) {
        const slot = slots[index];
        if (slot ? !slot.ready || slot.job !== null : performance.now() < startAfter) continue;
        const job = await o.store.exports.jobs.claim(slot?.owner ?? ownerOf(index), o.clock.now(), o.init.leaseMs);
        if (!job) break;
        o.log.info('export job claimed', { job: job.id, owner: slot?.owner ?? ownerOf(index), attempt: job.attempts });
        if (stopping) {
          // Claimed while stopping: handed back at once, for another process or the next start.
          await handBack(job.id, ownerOf(index));
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
    }
  }

  /** Starts slot `index`'s thread for `job`, which it runs once it is ready. */
  function spawn(index: number, job: ExportJob): Slot {
    const worker = new Worker(workerUrl('export/worker.ts'));
    let markStopped!: () => void;
    const slot: Slot = { index, owner: ownerOf(index), worker, ready: false, job: job.id, first: job, gone: false, stopped: new Promise((r) => (markStopped = r)) };

    /**
     * The thread ended on its own (reported once, by its error or, without one, by its close): its slot is emptied
     * and its job handed back, the next thread waiting a pause. A thread that ended before it was ready never ran
     * its job: the attempt its claim counted is refunded. One that ended while running it pays the attempt, as
     * its job may be what ends it (a job that ends every thread is given up after MAX_ATTEMPTS, not retried forever),
     * unless the pool is stopping: a thread told to stop that ends before it has handed its job back is charged
     * nothing, as one the pool ends itself after stop()'s timeout is not (stop), and as the job it interrupted
     * would not be had it handed it back (a job caught so at a few restarts in a row was given up unfinished).
     */
    function ended(message: string, fields: Record<string, unknown>): void {
      if (slot.gone) return;
      slot.gone = true;
      o.log.error(message, { owner: slot.owner, job: slot.job ?? undefined, ...fields });
      const held = slot.job;
      const refund = slot.first !== null || stopping;
      slot.first = null;
      slot.job = null;
      if (slots[index] === slot) slots[index] = undefined;
      const handed = held ? (refund ? handBack(held, slot.owner) : o.store.exports.jobs.release(held, slot.owner, o.clock.now())) : Promise.resolve();
      const settled = handed.catch((err: unknown) => o.log.warn('handing an export job back failed', { job: held, err })).finally(() => {
        handing.delete(settled);
        markStopped();
      });
      handing.add(settled);
      // The next thread waits, longer while they keep ending (e.g. one cannot start at all).
      startAfter = performance.now() + Math.min(30_000, 100 * 2 ** crashes++);
    }

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
      ended('export worker crashed', { error: (event as ErrorEvent).message });
      worker.terminate();
    });
    // Bun's Worker emits `close` whenever the thread ends (after `error`, or alone: process.exit in it, the runtime ending it).
    worker.addEventListener('close', (event) => ended('export worker ended', { code: (event as CloseEvent).code }));
    worker.postMessage({ type: 'init', init: o.init } satisfies ToWorker);
    return slot;
  }

  const started = () => slots.filter((s): s is Slot => s !== undefined);

  /**
   * Ends a thread that did not stop in time (stop): its close is no thread's end to deal with (ended). A job
   * it still held is handed back once the thread has ended, so that nothing of it writes on, with its
   * attempt refunded as a stop's is: left to its lease, the job waited for it to run out, and the next claim
   * counted one more attempt, so that a few restarts catching it so gave it up unfinished. A thread that has
   * not ended after TERMINATE_WAIT_MS (a native statement holds it) leaves its job to its lease.
   */
  async function terminate(s: Slot): Promise<void> {
    const held = s.job;
    s.gone = true;
    if (slots[s.index] === s) slots[s.index] = undefined;
    const closed = new Promise<boolean>((resolve) => s.worker.addEventListener('close', () => resolve(true), { once: true }));
    s.worker.terminate();
    if (held === null) return;
    if (!(await Promise.race([closed, Bun.sleep(TERMINATE_WAIT_MS).then(() => false)]))) {
      o.log.warn('an export worker did not end in time: its job is left to its lease', { owner: s.owner, job: held });
      return;
    }
    s.job = null;
    await handBack(held, s.owner).catch((err: unknown) => o.log.warn('handing an export job back failed', { job: held, err }));
  }

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
      // A claim under way ends first (within the timeout): what it claims meanwhile it hands back itself (claimRound).
      if (filling) await Promise.race([filling, Bun.sleep(timeoutMs)]);
      // A job claimed for a thread still starting has not reached it: handed back now.
      await Promise.all(started().filter((s) => s.first !== null).map((s) => {
        const job = s.first!;
        s.first = null;
        s.job = null;
        return handBack(job.id, s.owner).catch((err: unknown) => o.log.warn('handing an export job back failed', { job: job.id, err }));
      }));
      for (const s of started()) s.worker.postMessage({ type: 'stop' } satisfies ToWorker);
      await Promise.race([Promise.all([...started().map((s) => s.stopped), ...handing]), Bun.sleep(timeoutMs)]);
      await Promise.all(started().map(terminate));
    },
    busy: () => started().filter((s) => s.job !== null).length,
  };
}

export type ExportPool = ReturnType<typeof createExportPool>;
