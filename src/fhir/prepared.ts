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

/**
 * Prepares `resource` for storage as `type/id` (the id in the body, if any, is replaced by `id`); `base`
 * is the tenant's FHIR base, under which absolute references are the tenant's (FhirDeps.fhirBase).
 */
export function prepareVersion(resource: Resource, id: string, base: string | undefined): PreparedVersion {
  const withId = resource.id === id ? resource : ({ ...resource, id } as Resource);
  return {
    type: resource.resourceType,
    id,
    tail: stampTail(resource),
    index: storedIndex(withId, base),
    compartments: compartmentsOf(withId, base),
  };
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
