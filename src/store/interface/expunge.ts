/**
 * Physical removal of stored versions (`$expunge`, `cinder expunge`, `cinder audit prune`; src/fhir/expunge.ts).
 * Everything else in Cinder only ever adds versions: this is the one place rows of resources go.
 */

/**
 * What a batch removes:
 * - `previous`: versions in history (never a resource's current version);
 * - `deleted`: every version of resources whose current version is a deletion, the resource with its last;
 * - `all`: every version of every resource, live ones too.
 */
export type ExpungeMode = 'previous' | 'deleted' | 'all';

/** One batch of an expunge: resources of one type, in row order from `after`. */
export interface ExpungeBatch {
  tenant: string;
  type: string;
  mode: ExpungeMode;
  /** Only these resources (ids of `type`); absent: every resource of the type. */
  ids?: string[];
  /** Only this version (with one id, mode `previous`). */
  versionId?: number;
  /** Resume after this resource row (ExpungeBatchResult.after; 0 to start). */
  after: number;
  /** At most this many versions are removed. */
  limit: number;
}

export interface ExpungeBatchResult {
  /** Versions removed (history rows, and current rows with their resource). */
  removed: number;
  /** The row position to resume from. */
  after: number;
  /** Whether the type holds nothing more that the batch's mode removes (past `after`). */
  done: boolean;
}

export interface ExpungeRepo {
  /**
   * Removes, in one transaction, at most `limit` versions that `mode` selects among resources of one
   * type, oldest version first within each resource, resources in row order: a history version with
   * its pending Subscription notifications and kept topic events; a resource's current version only once its history is
   * gone, with its resource row and every row it owns (search index rows of every table, words,
   * compartment rows, notifications, and a Subscription's delivery state, outbox and kept topic events). A resource
   * whose versions the limit cuts is left part-way (its oldest versions gone, the rest intact) and
   * resumed from by the next batch. Examines a bounded number of resource rows per call.
   */
  batch(b: ExpungeBatch): Promise<ExpungeBatchResult>;
}
