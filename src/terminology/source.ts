import type { SyncOrAsync } from '../sync-or-async.ts';
import type { CodeSystem } from './model/code-system.ts';
import type { DatePeriod } from './model/date-time.ts';
import type { ValueSet } from './model/value-set.ts';

/**
 * Where the terminology engine reads CodeSystem and ValueSet resources from, for one tenant.
 * Implementations return validated resources (see parseCodeSystem / parseValueSet) and choose
 * among the versions of a canonical URL with `pickVersion`.
 */
export interface TerminologySource {
  /**
   * The CodeSystem with this canonical URL: the given version, else the latest one (in effect at
   * `asOf` when given).
   */
  codeSystem(url: string, version?: string, asOf?: DatePeriod): Promise<CodeSystem | null>;
  /**
   * The versions of the CodeSystem with this canonical URL the source holds (those without a version left out), to
   * name them when a version asked for is not one of them. Absent: the source cannot list them.
   */
  codeSystemVersions?(url: string): Promise<readonly string[]>;
  /** The ValueSet with this canonical URL, chosen as `codeSystem` chooses. */
  valueSet(url: string, version?: string, asOf?: DatePeriod): Promise<ValueSet | null>;
  /** The CodeSystem with this logical id (instance-level operations). */
  codeSystemById(id: string): Promise<CodeSystem | null>;
  /** The ValueSet with this logical id (instance-level operations). */
  valueSetById(id: string): Promise<ValueSet | null>;
  /**
   * Whether the source has a resource of this type and id, deleted ones included: a tenant's own
   * CodeSystem or ValueSet, even deleted, hides the core one of that id from instance-level
   * operations. Absent: only what the `*ById` methods return counts.
   */
  holds?(type: 'CodeSystem' | 'ValueSet', id: string): Promise<boolean>;
  /**
   * A cheap value that changes whenever any CodeSystem or ValueSet visible to the tenant
   * changes, also when the change was made by another process sharing the database. Given at once
   * when the source can vouch for it now (for a store: read within its check interval, with no write
   * of this process since), else as a promise.
   */
  changeToken(): SyncOrAsync<string>;
}
