import { FhirError } from '../errors.ts';
import { indexLimitProblem } from '../store/index-limits.ts';
import type { IndexRows, VersionToWrite } from '../store/types.ts';
import { compartmentsOf, storedIndex } from './indexer.ts';
import { stampHead, stampTail, type Resource } from './resource.ts';

/**
 * What a new version of a resource stores that does not depend on its version number or time: the
 * stored text after the stamp head, the search index entries and the patient compartments. Bulk
 * import prepares these on a worker thread; the writer completes them once the version is known.
 */
export interface PreparedVersion {
  type: string;
  id: string;
  /** The stored text after stampHead (see stampTail). */
  tail: string;
  index: IndexRows;
  compartments: string[];
}

/** Prepares `resource` for storage as `type/id` (the id in the body, if any, is replaced by `id`). */
export function prepareVersion(resource: Resource, id: string): PreparedVersion {
  const withId = resource.id === id ? resource : ({ ...resource, id } as Resource);
  return {
    type: resource.resourceType,
    id,
    tail: stampTail(resource),
    index: storedIndex(withId),
    compartments: compartmentsOf(withId),
  };
}

/**
 * Prepares `resource` as prepareVersion does, for a store whose indexed values hold at most
 * `maxIndexedBytes` (Store.maxIndexedBytes; none: no bound): a resource with a longer one is a 422
 * `too-long`, found before anything is written (the import reports it with its line and goes on).
 */
export function prepareIndexable(resource: Resource, id: string, maxIndexedBytes: number | undefined): PreparedVersion {
  const v = prepareVersion(resource, id);
  const problem = maxIndexedBytes === undefined ? undefined : indexLimitProblem(v.type, v.index, maxIndexedBytes);
  if (problem !== undefined) throw new FhirError('unprocessable', problem, { issueCode: 'too-long' });
  return v;
}

/** `p` as version `versionId`, updated at `lastUpdated` (epoch ms). */
export function versionToWrite(p: PreparedVersion, versionId: number, lastUpdated: number): VersionToWrite {
  return {
    type: p.type,
    id: p.id,
    versionId,
    lastUpdated,
    deleted: false,
    content: stampHead(p.type, p.id, versionId, lastUpdated) + p.tail,
    index: p.index,
    compartments: p.compartments,
  };
}
