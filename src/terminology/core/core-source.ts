import { type CodeSystem, parseCodeSystem } from '../model/code-system.ts';
import type { DatePeriod } from '../model/date-time.ts';
import { parseValueSet, type ValueSet } from '../model/value-set.ts';
import type { TerminologySource } from '../source.ts';
import { pickVersion, versionsOf } from '../version.ts';
import { CoreBundle, type CoreResource } from './core-bundle.ts';

/**
 * The FHIR R4 core terminology (FHIR, HL7 v3 and v2 code systems and value sets) as a terminology
 * source, shared read-only by every tenant. The bundles are read on first use (CoreBundle), and each
 * resource is parsed and validated when first asked for.
 */
export class CoreTerminology implements TerminologySource {
  private readonly parsed = new Map<CoreResource, CodeSystem | ValueSet>();

  constructor(readonly bundle: CoreBundle = new CoreBundle()) {}

  async codeSystem(url: string, version?: string, asOf?: DatePeriod): Promise<CodeSystem | null> {
    const entry = pickVersion((await this.bundle.load()).byUrl('CodeSystem', url), version, asOf);
    return entry === null ? null : this.codeSystemOf(entry, url);
  }

  async codeSystemVersions(url: string): Promise<readonly string[]> {
    return versionsOf((await this.bundle.load()).byUrl('CodeSystem', url));
  }

  async valueSet(url: string, version?: string, asOf?: DatePeriod): Promise<ValueSet | null> {
    const entry = pickVersion((await this.bundle.load()).byUrl('ValueSet', url), version, asOf);
    return entry === null ? null : this.valueSetOf(entry, url);
  }

  async codeSystemById(id: string): Promise<CodeSystem | null> {
    const entry = (await this.bundle.load()).byId('CodeSystem', id);
    return entry === undefined ? null : this.codeSystemOf(entry, id);
  }

  async valueSetById(id: string): Promise<ValueSet | null> {
    const entry = (await this.bundle.load()).byId('ValueSet', id);
    return entry === undefined ? null : this.valueSetOf(entry, id);
  }

  /** The core never changes while the process runs. */
  changeToken(): string {
    return 'core';
  }

  private codeSystemOf(entry: CoreResource, name: string): CodeSystem {
    return this.parsedOnce(entry, () => parseCodeSystem(JSON.parse(entry.content), `core CodeSystem '${name}'`)) as CodeSystem;
  }

  private valueSetOf(entry: CoreResource, name: string): ValueSet {
    return this.parsedOnce(entry, () => parseValueSet(JSON.parse(entry.content), `core ValueSet '${name}'`)) as ValueSet;
  }

  private parsedOnce(entry: CoreResource, parse: () => CodeSystem | ValueSet): CodeSystem | ValueSet {
    let parsed = this.parsed.get(entry);
    if (parsed === undefined) this.parsed.set(entry, (parsed = parse()));
    return parsed;
  }
}
