import { statSync } from 'node:fs';
import { workerUrl } from '../../worker-url.ts';
import type { FromCheckpointWorker, ToCheckpointWorker } from './checkpoint-worker.ts';

/** Bun's Worker: an unreferenced thread does not keep the process alive. */
type RefWorker = Worker & { ref(): void; unref(): void };

export interface Checkpointer {
  /**
   * Asks for a checkpoint on another thread (started on the first request); resolves when one that
   * began after this request has finished (at once if the thread fails).
   */
  request(): Promise<void>;
  /** Size of the database's WAL file in bytes (0 when there is none). */
  walBytes(): number;
  /** Closes the thread's connection and ends it. */
  close(): Promise<void>;
}

/** Background checkpoints of the SQLite database at `path` (see checkpoint-worker.ts). */
export function createCheckpointer(path: string): Checkpointer {
  let worker: RefWorker | undefined;
  let requests = 0;
  let waiting: { request: number; resolve: () => void }[] = [];
  const post = (w: Worker, msg: ToCheckpointWorker) => w.postMessage(msg);

  function settle(upTo: number): void {
    const ready = waiting.filter((x) => x.request <= upTo);
    waiting = waiting.filter((x) => x.request > upTo);
    for (const x of ready) x.resolve();
  }

  function start(): RefWorker {
    const w = new Worker(workerUrl('store/sqlite/checkpoint-worker.ts')) as RefWorker;
    w.unref();
    w.addEventListener('message', (e: MessageEvent<FromCheckpointWorker>) => e.data.type === 'done' && settle(e.data.request));
    w.addEventListener('error', () => settle(Infinity));
    post(w, { type: 'open', path });
    return w;
  }

  return {
    request() {
      const w = (worker ??= start());
      const request = ++requests;
      post(w, { type: 'checkpoint', request });
      return new Promise<void>((resolve) => waiting.push({ request, resolve }));
    },
    walBytes() {
      try {
        return statSync(`${path}-wal`).size;
      } catch {
        return 0;
      }
    },
    async close() {
      const w = worker;
      if (!w) return;
      worker = undefined;
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        w.addEventListener('message', (e: MessageEvent<FromCheckpointWorker>) => e.data.type === 'closed' && resolve());
        w.addEventListener('error', () => resolve());
        timer = setTimeout(resolve, 5_000);
        w.ref();
        post(w, { type: 'close' });
      });
      clearTimeout(timer);
      w.terminate();
      settle(Infinity);
    },
  };
}
