/** Snapshots: a type's resources as of a bulk export's transactionTime, a keyset page at a time. */
import type { Condition } from './search.ts';

/** Which patient compartments a snapshot is limited to. */
export type SnapshotCompartment =
  /** In the compartment of any patient. */
  | { kind: 'any' }
  /**
   * In the compartment of one of the patients stored for this export job (ExportJobRepo); with `joinedOnly`,
   * of one stored as `joined` (ExportPatient.joined).
   */
  | { kind: 'job'; jobId: string; joinedOnly?: boolean };

/**
 * Resources of `type` in their version as of `at` (a bulk export's transactionTime): current rows last
 * updated at or before `at`, and for rows updated later their version as of `at` from the history.
 */
export interface SnapshotQuery {
  type: string;
  at: number;
  /** Only versions updated after this time; deletions after it are returned too (`deleted: true`). */
  since?: number;
  compartment?: SnapshotCompartment;
  /** With `since` and a job compartment: patients stored as `joined` match whatever their resources' time. */
  joinedSince?: boolean;
  /** ORed `_typeFilter` queries, each its ANDed conditions. */
  filters?: Condition[][];
  ids?: string[];
  /**
   * Only resources whose reference parameter `param` names a resource of one of `types` in the compartment
   * of one of the job's patients (`joinedOnly`: of one stored as joined), found from those patients'
   * compartment rows through the index instead of by reading the type (snapshotWindow): the Provenance of a
   * Group's members who joined since `_since`. A narrowing the caller completes: a page may also hold
   * resources naming a resource of `types` changed after `at` (whose compartment then is not the index's),
   * and every resource of the type changed after `at`; the caller judges the targets as of `at` itself.
   */
  referringTo?: { param: string; types: string[]; compartment: Extract<SnapshotCompartment, { kind: 'job' }> };
  /** Keyset position (`next` of the previous page). */
  after?: number;
  limit: number;
}

/** A version of a snapshot page that the database could not judge (see SnapshotPage.recheck). */
export interface SnapshotRow {
  id: string;
  versionId: number;
  lastUpdated: number;
  /** The resource was deleted as of `at` (only with `since`); `content` is its last version before. */
  deleted: boolean;
  content: string;
  /**
   * A live version as of `at` whose next version is no longer stored (expunged: version ids are consecutive),
   * so the version current at `at` may be the one expunged: the caller judges this one in its place only to report the
   * resource, never to export it.
   */
  expunged?: true;
}

export interface SnapshotPage {
  /**
   * The versions the database judged against every condition (compartment, filters, since): their
   * stored JSON text, each followed by a newline, as UTF-8 bytes (NDJSON, never re-serialised).
   */
  lines: Uint8Array;
  /** How many lines `lines` holds. */
  count: number;
  /**
   * Versions the database could not judge (changed after `at`, or deletions), as they were at `at`:
   * the caller checks them against the conditions on their content.
   */
  recheck: SnapshotRow[];
  /** Keyset position for the next page; null when the scan is complete. */
  next: number | null;
}
