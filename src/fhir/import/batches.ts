import { operatorAccess } from '../access.ts';
import { putVersion, type FhirDeps } from '../crud.ts';
import { newId, type Resource } from '../resource.ts';

export interface BatchWriter {
  /** Queues a validated resource; writes a batch when the queue is full. */
  add(resource: Resource): Promise<void>;
  /** Writes what is queued and waits until every batch is committed. */
  drain(): Promise<void>;
}

/**
 * Writes validated resources in transactions of `size` resources (create-or-update by id, a server id
 * when there is none), with one batch in flight while the caller prepares the next.
 * `onCommitted` is told how many resources each committed batch held.
 */
export function createBatchWriter(deps: FhirDeps, tenant: string, size: number, onCommitted: (n: number) => void): BatchWriter {
  let queue: Resource[] = [];
  let inFlight: Promise<void> = Promise.resolve();

  function write(batch: Resource[]): Promise<void> {
    const opts = { now: deps.clock.now(), access: operatorAccess };
    return deps.store.resources.write(tenant, async (w) => {
      for (const r of batch) await putVersion(w, r, r.id ?? newId(), opts);
    }).then(() => onCommitted(batch.length));
  }

  async function flush(): Promise<void> {
    const batch = queue;
    queue = [];
    await inFlight;
    if (!batch.length) return;
    inFlight = write(batch);
    // Observed by the next flush or drain; this keeps a failure from counting as unhandled meanwhile.
    inFlight.catch(() => undefined);
  }

  return {
    async add(resource) {
      queue.push(resource);
      if (queue.length >= size) await flush();
    },
    async drain() {
      await flush();
      await inFlight;
    },
  };
}
