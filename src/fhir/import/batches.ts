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
 * Splits a batch, in order, into runs in which each `type/id` occurs at most once (a resource given
 * twice becomes two versions, the later line last); resources without an id get a server id.
 */
function distinctGroups(batch: Resource[]): [Resource, string][][] {
  const groups: [Resource, string][][] = [[]];
  let seen = new Set<string>();
  for (const r of batch) {
    const id = r.id ?? newId();
    const key = `${r.resourceType}/${id}`;
    if (seen.has(key)) {
      groups.push([]);
      seen = new Set();
    }
    seen.add(key);
    groups[groups.length - 1]!.push([r, id]);
  }
  return groups;
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
    return deps.store.resources
      .write(tenant, async (w) => {
        // Writes of distinct resources run concurrently, so an adapter can look them up in one round trip.
        for (const group of distinctGroups(batch)) await Promise.all(group.map(([r, id]) => putVersion(w, r, id, opts)));
      })
      .then(() => onCommitted(batch.length));
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
