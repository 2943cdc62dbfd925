import { prepareVersion, versionToWrite } from '../../src/fhir/prepared.ts';
import type { Resource } from '../../src/fhir/resource.ts';
import type { VersionToWrite } from '../../src/store/types.ts';

/**
 * First versions of resources that carry their ids, as a writer's insertNew() takes them; `base` the
 * tenant's FHIR base, under which an absolute reference is the server's own, as the REST API indexes it.
 */
export function firstVersions(resources: Record<string, unknown>[], lastUpdated = Date.parse('2026-01-01T00:00:00Z'), base?: string): VersionToWrite[] {
  return resources.map((r) => versionToWrite(prepareVersion(r as unknown as Resource, r.id as string, base), 1, lastUpdated, 'PUT'));
}
