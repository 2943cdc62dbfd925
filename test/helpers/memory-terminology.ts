import { type CodeSystem, parseCodeSystem } from '../../src/terminology/model/code-system.ts';
import type { DatePeriod } from '../../src/terminology/model/date-time.ts';
import { parseValueSet, type ValueSet } from '../../src/terminology/model/value-set.ts';
import type { TerminologySource } from '../../src/terminology/source.ts';
import { pickVersion } from '../../src/terminology/version.ts';

const FIXTURES = new URL('../fixtures/terminology/', import.meta.url);

/** An in-memory TerminologySource for unit tests; counts reads to observe caching. */
export class MemoryTerminologySource implements TerminologySource {
  readonly reads = { codeSystem: 0, valueSet: 0, valueSetById: 0, changeToken: 0 };
  private codeSystems: CodeSystem[] = [];
  private valueSets: ValueSet[] = [];
  private changes = 0;

  /** Stores (or replaces, by id) a CodeSystem or ValueSet. */
  put(resource: { readonly resourceType: string; readonly id?: string; readonly [field: string]: unknown }): void {
    if (resource.resourceType === 'CodeSystem') {
      const cs = parseCodeSystem(resource);
      this.codeSystems = [...this.codeSystems.filter((r) => r.id === undefined || r.id !== cs.id), cs];
    } else {
      const vs = parseValueSet(resource);
      this.valueSets = [...this.valueSets.filter((r) => r.id === undefined || r.id !== vs.id), vs];
    }
    this.changes++;
  }

  remove(resourceType: string, id: string): void {
    if (resourceType === 'CodeSystem') this.codeSystems = this.codeSystems.filter((r) => r.id !== id);
    else this.valueSets = this.valueSets.filter((r) => r.id !== id);
    this.changes++;
  }

  async codeSystem(url: string, version?: string, asOf?: DatePeriod): Promise<CodeSystem | null> {
    this.reads.codeSystem++;
    return pickVersion(
      this.codeSystems.filter((r) => r.url === url),
      version,
      asOf,
    );
  }

  async valueSet(url: string, version?: string, asOf?: DatePeriod): Promise<ValueSet | null> {
    this.reads.valueSet++;
    return pickVersion(
      this.valueSets.filter((r) => r.url === url),
      version,
      asOf,
    );
  }

  async codeSystemById(id: string): Promise<CodeSystem | null> {
    return this.codeSystems.find((r) => r.id === id) ?? null;
  }

  async valueSetById(id: string): Promise<ValueSet | null> {
    this.reads.valueSetById++;
    return this.valueSets.find((r) => r.id === id) ?? null;
  }

  async changeToken(): Promise<string> {
    this.reads.changeToken++;
    return String(this.changes);
  }
}

/** The resources of a fixture Bundle in test/fixtures/terminology. */
export async function fixtureResources(file: 'code-systems.json' | 'value-sets.json'): Promise<{ resourceType: string; id?: string; url?: string }[]> {
  const bundle = (await Bun.file(new URL(file, FIXTURES)).json()) as { entry: { resource: { resourceType: string; id?: string } }[] };
  return bundle.entry.map((e) => e.resource);
}

/** A source holding every terminology fixture. */
export async function fixtureSource(): Promise<MemoryTerminologySource> {
  const source = new MemoryTerminologySource();
  for (const r of [...(await fixtureResources('code-systems.json')), ...(await fixtureResources('value-sets.json'))]) source.put(r);
  return source;
}
