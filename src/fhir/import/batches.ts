import { operatorAccess } from '../access.ts';
import { putVersion, type FhirDeps } from '../crud.ts';
import { newId, type Resource } from '../resource.ts';

/** Batches being written at once: the database commits one while the next is looked up and prepared. */
const IN_FLIGHT = 2;

export interface BatchWriter {
  /** Queues a validated resource; writes a batch when the queue is full. */
  add(resource: Resource): Promise<void>;
  /** Writes what is queued and waits until every batch is committed. */
  drain(): Promise<void>;
}

interface Batch {
  /** Runs, in input order, in which each `type/id` occurs at most once. */
  groups: [Resource, string][][];
  keys: Set<string>;
  size: number;
}

/** Assigns server ids where missing and splits the batch where a `type/id` repeats (two versions, in line order). */
function prepare(resources: Resource[]): Batch {
  const groups: [Resource, string][][] = [[]];
  const keys = new Set<string>();
  let seen = new Set<string>();
  for (const r of resources) {
    const id = r.id ?? newId();
    const key = `${r.resourceType}/${id}`;
    if (seen.has(key)) {
      groups.push([]);
      seen = new Set();
    }
    seen.add(key);
    keys.add(key);
    groups[groups.length - 1]!.push([r, id]);
  }
  return { groups, keys, size: resources.length };
}

function overlaps(a: Set<string>, b: Set<string>): boolean {
  for (const k of a) if (b.has(k)) return true;
  return false;
}

/**
 * Writes validated resources in transactions of `size` resources (create-or-update by id, a server id
 * when there is none). Up to IN_FLIGHT batches that touch different resources are written
 * concurrently; a batch sharing a resource with one in flight waits for it, so versions follow input
 * order. `onCommitted` is told how many resources each committed batch held.
 */
export function createBatchWriter(deps: FhirDeps, tenant: string, size: number, onCommitted: (n: number) => void): BatchWriter {
  let queue: Resource[] = [];
  const inFlight: { keys: Set<string>; done: Promise<void> }[] = [];

  function write(batch: Batch): Promise<void> {
    const opts = { now: deps.clock.now(), access: operatorAccess };
    return deps.store.resources.write(tenant, async (w) => {
      // Writes of distinct resources run concurrently, so an adapter can look them up in one round trip.
      for (const group of batch.groups) await Promise.all(group.map(([r, id]) => putVersion(w, r, id, opts)));
    });
  }

  /** Waits for the oldest batch; when it failed, lets the others finish before passing the error on. */
  async function settle(): Promise<void> {
    try {
      await inFlight.shift()!.done;
    } catch (err) {
      await Promise.allSettled(inFlight.splice(0).map((f) => f.done));
      throw err;
    }
  }

  async function flush(): Promise<void> {
    if (!queue.length) return;
    const batch = prepare(queue);
    queue = [];
    while (inFlight.length >= IN_FLIGHT || inFlight.some((f) => overlaps(batch.keys, f.keys))) await settle();
    const done = write(batch).then(() => onCommitted(batch.size));
    // Observed by a later flush or drain; this keeps a failure from counting as unhandled meanwhile.
    done.catch(() => undefined);
    inFlight.push({ keys: batch.keys, done });
  }

  return {
    async add(resource) {
      queue.push(resource);
      if (queue.length >= size) await flush();
    },
    async drain() {
      await flush();
      while (inFlight.length) await settle();
    },
  };
}
