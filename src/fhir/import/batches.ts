import type { ResourceWriter } from '../../store/types.ts';
import { operatorAccess } from '../access.ts';
import { putPrepared, shadowedVersionId, type FhirDeps, type PutOptions } from '../crud.ts';
import { hasCoreResources } from '../core-layer.ts';
import { prepareVersion, storesSameMeasured, versionToWrite, type PreparedVersion } from '../prepared.ts';
import type { MeasuredVersion } from '../../store/types.ts';
import { newId, type Resource } from '../resource.ts';
import { atWriteTime } from '../../store/write-times.ts';

/**
 * What the history of a version an NDJSON line, a collection entry or a single document wrote names: a
 * PUT at its `Type/id`, created or updated by id as a PUT would be, whether its id came with it or was
 * given by the importer. (A transaction or batch Bundle's entries name their own request.method.)
 */
const IMPORT_METHOD = 'PUT';

/** Batches being written at once: the database commits one while the next is looked up and prepared. */
const IN_FLIGHT = 2;

/** When a batch is written: at this many resources, or this many characters of stored text. */
export interface BatchLimits {
  resources: number;
  chars: number;
}

/** 10,000 resources or 32 Mi characters per transaction (see docs/PERFORMANCE.md, import). */
export const DEFAULT_BATCH_LIMITS: BatchLimits = { resources: 10_000, chars: 32 << 20 };

/**
 * The first batch's resources at most; each next batch may hold twice as many, up to the limit. The
 * database then starts writing once the first thousand resources are prepared, not ten thousand: the
 * writer no longer idles while the preparation thread starts and fills the first batch.
 */
export const FIRST_BATCH_RESOURCES = 1000;

export interface BatchWriter {
  /** A validated resource prepared for storage (prepareVersion), with a new id where it has none. */
  prepare(resource: Resource): PreparedVersion;
  /** Queues prepared resources (see prepare); writes a batch whenever the queue is full. */
  addPrepared(versions: PreparedVersion[]): Promise<void>;
  /** Writes what is queued and waits until every batch is committed. */
  drain(): Promise<void>;
}

interface Batch {
  /** Runs, in input order, in which each `type/id` occurs at most once. */
  groups: PreparedVersion[][];
  keys: Set<string>;
  size: number;
}

/** Splits the batch where a `type/id` repeats (two versions, in line order). */
function group(versions: PreparedVersion[]): Batch {
  const groups: PreparedVersion[][] = [[]];
  const keys = new Set<string>();
  let seen = new Set<string>();
  for (const v of versions) {
    const key = `${v.type}/${v.id}`;
    if (seen.has(key)) {
      groups.push([]);
      seen = new Set();
    }
    seen.add(key);
    keys.add(key);
    groups[groups.length - 1]!.push(v);
  }
  return { groups, keys, size: versions.length };
}

function overlaps(a: Set<string>, b: Set<string>): boolean {
  for (const k of a) if (b.has(k)) return true;
  return false;
}

/**
 * What a committed batch held: its resources, those of them unchanged (versions validation refused that equal their
 * current version among them), and those refused (BatchOptions.auditAppendOnly, and versions validation refused that
 * change their resource: PreparedVersion.refusal).
 */
export interface Committed {
  resources: number;
  unchanged: number;
  /** The versions validation refused found equal to their current version (its versionId) in the transaction: kept unchanged. */
  kept: KeptVersion[];
  refused: PreparedVersion[];
}

export interface BatchOptions {
  /**
   * A stored AuditEvent is not written over (`$import`, which writes for a client: the audit trail is append-only
   * through the API, crud.ts refuseAuditChange): a version that would change one is refused, not written, and
   * listed in its batch's `refused`. One equal to it (an input read again) stays unchanged.
   */
  auditAppendOnly?: boolean;
  /**
   * Run last in each batch's transaction (`$import`: the job's lease, ResourceWriter.holdImportLease); what it throws
   * rolls the batch back, and the writer then writes nothing more: every later batch, and drain, throw it too.
   */
  fence?: (w: ResourceWriter) => Promise<void>;
  /**
   * Whether a version of `type` that validation refused may be kept as the update that changes nothing it may be
   * (crud.ts refusedNoOp): the writer's access reaches every resource of the type. Absent: always (the operator's).
   */
  keepsUnchanged?: (type: string) => boolean;
}

/** A version validation refused, kept unchanged: it equals the current version `versionId` as its batch's transaction read it. */
export interface KeptVersion {
  version: PreparedVersion;
  versionId: number;
}

/**
 * The AuditEvent that the writes of `v` would change: it exists, live, with other content (a text of another length
 * told without reading it: storesSameMeasured).
 */
async function changesAudit(w: ResourceWriter, v: PreparedVersion): Promise<boolean> {
  if (v.type !== 'AuditEvent') return false;
  const current = await w.measured(v.type, v.id);
  return current !== null && !current.deleted && (await storesSameMeasured(w, current, v)) === undefined;
}

/**
 * The current version a version validation refused equals, if any: the one the importer found it equal to
 * (PreparedVersion.sameAs) when that is still current, otherwise as storesSameMeasured tells (a text of another
 * length without reading it).
 */
async function keptAs(w: ResourceWriter, v: PreparedVersion): Promise<MeasuredVersion | undefined> {
  const current = await w.measured(v.type, v.id);
  if (current === null || current.deleted) return undefined;
  if (v.sameAs !== undefined && v.sameAs.versionId === current.versionId && v.sameAs.lastUpdated === current.lastUpdated) return current;
  return storesSameMeasured(w, current, v);
}

/**
 * One group, with operator access: resources that do not exist yet (nor in the core) are created as version 1 in bulk;
 * the others (and any a concurrent writer created meanwhile) get their next version as an update would,
 * or none when they equal their current version (or are refused, `refused`: BatchOptions). Returns how many were unchanged.
 */
async function writeGroup(w: ResourceWriter, group: PreparedVersion[], opts: PutOptions, batch: BatchOptions, refused: PreparedVersion[], kept: KeptVersion[]): Promise<number> {
  // Versions validation refused are written never: each is kept unchanged when it equals its current version (a
  // resource stored before rules that now refuse it, imported again as it is), as an update that changes nothing is.
  const versions = group.some((v) => v.refusal !== undefined) ? group.filter((v) => v.refusal === undefined) : group;
  let unchanged = 0;
  if (versions !== group) {
    for (const v of group) {
      if (v.refusal === undefined) continue;
      const current = batch.keepsUnchanged === undefined || batch.keepsUnchanged(v.type) ? await keptAs(w, v) : undefined;
      if (current !== undefined) {
        unchanged++;
        kept.push({ version: v, versionId: current.versionId });
      } else refused.push(v);
    }
  }
  // A core CodeSystem or ValueSet id is written as an update would, after the core's version 1 (shadowedVersionId).
  const shadowing = versions.some((v) => hasCoreResources(v.type))
    ? await Promise.all(versions.map(async (v) => hasCoreResources(v.type) && (await shadowedVersionId(opts.core, v.type, v.id)) > 0))
    : versions.map(() => false);
  const fresh = versions.filter((_, i) => !shadowing[i]);
  const inserted = await w.insertNew(fresh.map((v) => versionToWrite(v, 1, opts.now, IMPORT_METHOD)));
  let rest = [...fresh.filter((_, i) => !inserted[i]), ...versions.filter((_, i) => shadowing[i])];
  if (batch.auditAppendOnly && rest.some((v) => v.type === 'AuditEvent')) {
    const refuse = await Promise.all(rest.map((v) => changesAudit(w, v)));
    refused.push(...rest.filter((_, i) => refuse[i]));
    rest = rest.filter((_, i) => !refuse[i]);
  }
  // Writes of distinct resources run concurrently, so an adapter can look them up in one round trip.
  const updated = await Promise.all(rest.map((v) => putPrepared(w, v, opts, IMPORT_METHOD)));
  // A Subscription an import writes has no owner (it notifies nothing until activated through the API): one it writes
  // over loses the owner it had, with its delivery state, as a deletion ends them. Kept, that owner's authority would
  // go on matching the new criteria and sending to the new endpoint, which whoever imported it chose.
  for (const r of updated) if (r.version.type === 'Subscription' && !r.unchanged) await w.endSubscription(r.version.id);
  return unchanged + updated.filter((r) => r.unchanged).length;
}

/**
 * Writes validated resources, with operator access, in transactions of up to `limits` (create-or-update
 * by id, a server id when there is none; the first transactions smaller, FIRST_BATCH_RESOURCES). Up to
 * IN_FLIGHT batches that touch different resources are written concurrently; a batch sharing a
 * resource with one in flight waits for it, so versions follow input order. `onCommitted` is told how
 * many resources each committed batch held, how many of them were unchanged (equal to their
 * current version, so that no version was written), which were refused (`options`), and which of the versions
 * validation refused it kept unchanged (as its transaction found them: what is told of them is told then).
 */
export function createBatchWriter(
  deps: FhirDeps, tenant: string, limits: BatchLimits, onCommitted: (n: number, unchanged: number, refused: PreparedVersion[], kept: KeptVersion[]) => void, options: BatchOptions = {},
): BatchWriter {
  let queue: PreparedVersion[] = [];
  let queued = 0;
  let batchResources = Math.min(FIRST_BATCH_RESOURCES, limits.resources);
  const inFlight: { keys: Set<string>; done: Promise<void> }[] = [];
  /** What the fence threw: the writer may write nothing more. */
  let fenced: { err: unknown } | undefined;

  /** Writes a batch in one transaction; resolves to what it held (the counts of one attempt of the transaction, the one committed). */
  function write(batch: Batch): Promise<Committed> {
    return atWriteTime(deps.store, deps.clock, (now) => {
      const opts: PutOptions = { now, access: operatorAccess, ...(deps.core ? { core: deps.core } : {}) };
      return deps.store.resources.write(tenant, async (w) => {
        let unchanged = 0;
        const refused: PreparedVersion[] = [];
        const kept: KeptVersion[] = [];
        for (const g of batch.groups) unchanged += await writeGroup(w, g, opts, options, refused, kept);
        if (options.fence) {
          try {
            await options.fence(w);
          } catch (err) {
            fenced ??= { err };
            throw err;
          }
        }
        return { resources: batch.size, unchanged, refused, kept };
      });
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
    if (fenced) throw fenced.err;
    if (!queue.length) return;
    const batch = group(queue);
    queue = [];
    queued = 0;
    batchResources = Math.min(2 * batchResources, limits.resources);
    while (inFlight.length >= IN_FLIGHT || inFlight.some((f) => overlaps(batch.keys, f.keys))) await settle();
    const done = write(batch).then((c) => onCommitted(c.resources - c.refused.length, c.unchanged, c.refused, c.kept));
    // Observed by a later flush or drain; this keeps a failure from counting as unhandled meanwhile.
    done.catch(() => undefined);
    inFlight.push({ keys: batch.keys, done });
  }

  async function addPrepared(versions: PreparedVersion[]): Promise<void> {
    for (const v of versions) {
      queue.push(v);
      queued += v.tail.length;
      if (queue.length >= batchResources || queued >= limits.chars) await flush();
    }
  }

  return {
    prepare: (resource) => prepareVersion(resource, resource.id ?? newId(), deps.fhirBase?.(tenant)),
    addPrepared,
    async drain() {
      await flush();
      while (inFlight.length) await settle();
    },
  };
}
