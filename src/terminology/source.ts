import type { CodeSystem } from './model/code-system.ts';
import type { ValueSet } from './model/value-set.ts';

/**
 * Where the terminology engine reads CodeSystem and ValueSet resources from, for one tenant.
 * Implementations return validated resources (see parseCodeSystem / parseValueSet).
 */
export interface TerminologySource {
  /** The CodeSystem with this canonical URL; the latest version when none is given. */
  codeSystem(url: string, version?: string): Promise<CodeSystem | null>;
  /** The ValueSet with this canonical URL; the latest version when none is given. */
  valueSet(url: string, version?: string): Promise<ValueSet | null>;
  /** The ValueSet with this logical id (instance-level operations). */
  valueSetById(id: string): Promise<ValueSet | null>;
  /**
   * A cheap value that changes whenever any CodeSystem or ValueSet visible to the tenant
   * changes, also when the change was made by another process sharing the database.
   */
  changeToken(): Promise<string>;
}
