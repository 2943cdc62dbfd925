import { workerUrl } from '../../worker-url.ts';
import type { PreparedChunk } from './ndjson.ts';
import { unpackVersions } from './packing.ts';
import type { FromPrepareWorker, ToPrepareWorker } from './prepare-worker.ts';
import type { ValidationLevel } from '../validation/validate.ts';
import type { ImportProfiles } from './profiles.ts';
import type { LineIds } from './line-ids.ts';

/**
 * Prepares NDJSON inputs on a Worker thread (see prepare-worker.ts). Inputs are queued up front, so the
 * thread goes from one to the next without waiting for the caller; it works up to `ahead` chunks ahead
 * of the caller, each chunk being acknowledged when the caller asks for the next.
 */
export interface Preparer {
  /** Queues an input (every resource of it of type `type`, and id-less lines given the ids of `ids`, when given); returns its number for `chunks`. */
  queue(blob: Blob, type?: string, ids?: LineIds): number;
  /** The chunks of a queued input, in line order. Inputs must be read in the order they were queued. */
  chunks(input: number): AsyncGenerator<PreparedChunk>;
  /** Ends the thread. */
  close(): void;
}

/** Bun's Worker: an unreferenced thread does not keep the process alive. */
type RefWorker = Worker & { ref(): void; unref(): void };

/**
 * Starts the preparation thread on the first queued input; it validates at `validation` (and against the
 * claimed profiles with `profiles`, whose bindings it may ask of `profiles.membership` here) and indexes
 * absolute references under `base`, the tenant's FHIR base, as the tenant's.
 */
export function createPreparer(ahead: number, validation: ValidationLevel, base: string | undefined, profiles?: ImportProfiles): Preparer {
  let worker: RefWorker | undefined;
  let queued = 0;
  let pending = 0;
  type Delivered = Exclude<FromPrepareWorker, { type: 'membership' }>;
  const inbox: Delivered[] = [];
  let wake: (() => void) | undefined;
  const deliver = (msg: Delivered) => {
    inbox.push(msg);
    wake?.();
  };

  function start(): RefWorker {
    const w = new Worker(workerUrl('fhir/import/prepare-worker.ts')) as RefWorker;
    w.addEventListener('message', (event: MessageEvent<FromPrepareWorker>) => {
      const msg = event.data;
      if (msg.type === 'membership') answer(w, msg);
      else deliver(msg);
    });
    w.addEventListener('error', (event) => deliver({ type: 'error', input: -1, message: `import worker failed: ${(event as ErrorEvent).message}` }));
    w.postMessage({ type: 'init', credits: ahead, validation, ...(base !== undefined && { base }), ...(profiles && { profiles: profiles.worker }) } satisfies ToPrepareWorker);
    return w;
  }

  /** A binding question of the thread, answered by the tenant's terminology (answered even while no chunk is read). */
  function answer(w: RefWorker, q: { id: number; url: string; coding: { system?: string; code: string } }): void {
    const ask = profiles?.membership;
    if (ask === undefined) return void w.postMessage({ type: 'membership', id: q.id, error: 'no terminology service is wired' } satisfies ToPrepareWorker);
    ask(profiles!.worker.tenant, q.url, q.coding).then(
      (verdict) => w.postMessage({ type: 'membership', id: q.id, verdict } satisfies ToPrepareWorker),
      (err: Error) => w.postMessage({ type: 'membership', id: q.id, error: err.message } satisfies ToPrepareWorker),
    );
  }

  function close(): void {
    worker?.terminate();
    worker = undefined;
  }

  async function* chunks(input: number): AsyncGenerator<PreparedChunk> {
    const w = worker;
    if (!w) throw new Error('import worker is not running');
    let ended = false;
    try {
      for (;;) {
        while (!inbox.length) await new Promise<void>((resolve) => (wake = resolve));
        const msg = inbox.shift()!;
        if (msg.type === 'error') throw new Error(msg.message);
        if (msg.input !== input) throw new Error(`import worker sent input ${msg.input} while input ${input} was read`);
        if (msg.type === 'end') return void (ended = true);
        yield { versions: unpackVersions(msg.packed), urns: msg.urns, issues: msg.issues, bytes: msg.bytes };
        w.postMessage({ type: 'ack' } satisfies ToPrepareWorker);
      }
    } finally {
      // An idle thread never holds the process open.
      if (--pending === 0) w.unref();
      // Left early (a failed write or a worker error): the thread may still be in this input.
      if (!ended) close();
    }
  }

  return {
    queue(blob, type, ids) {
      const w = (worker ??= start());
      if (pending++ === 0) w.ref();
      const input = queued++;
      w.postMessage({ type: 'input', input, blob, ...(type !== undefined && { resourceType: type }), ...(ids !== undefined && { ids }) } satisfies ToPrepareWorker);
      return input;
    },
    chunks,
    close,
  };
}
