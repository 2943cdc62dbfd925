import { workerUrl } from '../../worker-url.ts';
import type { PreparedChunk } from './ndjson.ts';
import { unpackVersions } from './packing.ts';
import type { FromPrepareWorker, ToPrepareWorker } from './prepare-worker.ts';

/** Prepares NDJSON inputs on a Worker thread (see prepare-worker.ts), one input at a time. */
export interface Preparer {
  /**
   * The input's chunks in line order. The thread works up to `ahead` chunks ahead of the caller: each
   * is acknowledged when the caller asks for the next.
   */
  chunks(blob: Blob, ahead: number): AsyncGenerator<PreparedChunk>;
  /** Ends the thread. */
  close(): void;
}

/** Bun's Worker: an unreferenced thread does not keep the process alive. */
type RefWorker = Worker & { ref(): void; unref(): void };

/** Starts the preparation thread (lazily, on the first input). */
export function createPreparer(): Preparer {
  let worker: RefWorker | undefined;
  let deliver: ((msg: FromPrepareWorker) => void) | undefined;

  function start(): RefWorker {
    const w = new Worker(workerUrl('fhir/import/prepare-worker.ts')) as RefWorker;
    w.addEventListener('message', (event: MessageEvent<FromPrepareWorker>) => deliver?.(event.data));
    w.addEventListener('error', (event) => deliver?.({ type: 'error', message: `import worker failed: ${(event as ErrorEvent).message}` }));
    return w;
  }

  async function* chunks(blob: Blob, ahead: number): AsyncGenerator<PreparedChunk> {
    const w = (worker ??= start());
    const queue: FromPrepareWorker[] = [];
    let wake: (() => void) | undefined;
    deliver = (msg) => {
      queue.push(msg);
      wake?.();
    };
    // Referenced while it works on an input only: an idle thread never holds the process open.
    w.ref();
    w.postMessage({ type: 'file', blob, credits: ahead } satisfies ToPrepareWorker);
    let ended = false;
    try {
      for (;;) {
        while (!queue.length) await new Promise<void>((resolve) => (wake = resolve));
        const msg = queue.shift()!;
        if (msg.type === 'end') return void (ended = true);
        if (msg.type === 'error') throw new Error(msg.message);
        yield { versions: unpackVersions(msg.packed), issues: msg.issues, bytes: msg.bytes };
        w.postMessage({ type: 'ack' } satisfies ToPrepareWorker);
      }
    } finally {
      deliver = undefined;
      w.unref();
      // Left early (a failed write or a worker error): the thread may still be in that input.
      if (!ended) close();
    }
  }

  function close(): void {
    worker?.terminate();
    worker = undefined;
  }

  return { chunks, close };
}
