import type { IndexEntry } from '../store/types.ts';
import { paramsOf, patientCompartment, type ParamDefinition } from './definitions.ts';
import { evaluatePath } from './fhirpath.ts';
import { parseReference } from './references.ts';

type Json = Record<string, unknown>;

function tokenEntries(param: string, value: unknown, out: IndexEntry[]): void {
  if (typeof value === 'string' || typeof value === 'boolean' || typeof value === 'number') {
    out.push({ param, system: '', value: String(value) });
    return;
  }
  if (value === null || typeof value !== 'object') return;
  const v = value as Json;
  if (Array.isArray(v.coding)) {
    for (const c of v.coding) tokenEntries(param, c, out);
    return;
  }
  const code = typeof v.code === 'string' ? v.code : typeof v.value === 'string' ? v.value : undefined;
  if (code !== undefined) out.push({ param, system: typeof v.system === 'string' ? v.system : '', value: code });
}

function referenceEntries(def: ParamDefinition, value: unknown, targetType: string | undefined, out: IndexEntry[]): void {
  const ref = typeof value === 'string' ? value : (value as Json | null)?.reference;
  if (typeof ref !== 'string') return;
  const parsed = parseReference(ref);
  if (!parsed || (targetType && parsed.type !== targetType)) return;
  out.push({ param: def.code, system: parsed.type, value: parsed.id });
}

/** Search index entries of `resource` for the parameters Cinder indexes (R4 SearchParameter expressions). */
export function indexEntries(resource: Json): IndexEntry[] {
  const out: IndexEntry[] = [];
  for (const def of paramsOf(resource.resourceType as string)) {
    if (def.storedAs) continue;
    for (const path of def.paths) {
      for (const value of evaluatePath(resource, path)) {
        if (def.type === 'reference') referenceEntries(def, value, path.targetType, out);
        else if (def.type === 'token') tokenEntries(def.code, value, out);
        else if (typeof value === 'string') out.push({ param: def.code, system: '', value });
      }
    }
  }
  return dedupe(out);
}

/** Up to this many entries, duplicates are found by comparing pairs (no key strings to build). */
const PAIRWISE_DEDUPE = 16;

function dedupe(entries: IndexEntry[]): IndexEntry[] {
  if (entries.length < 2) return entries;
  if (entries.length <= PAIRWISE_DEDUPE) {
    const out: IndexEntry[] = [];
    for (const e of entries) if (!out.some((o) => o.value === e.value && o.param === e.param && o.system === e.system)) out.push(e);
    return out;
  }
  const seen = new Set<string>();
  return entries.filter((e) => {
    const key = `${e.param}\u0000${e.system}\u0000${e.value}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Ids of the patients whose compartment holds `resource`, per the R4 Patient CompartmentDefinition.
 * A Patient is in its own compartment.
 */
export function compartmentsOf(resource: Json): string[] {
  const type = resource.resourceType as string;
  const paths = patientCompartment().get(type);
  if (!paths) return [];
  const patients = new Set<string>();
  if (type === 'Patient' && typeof resource.id === 'string') patients.add(resource.id);
  for (const path of paths) {
    for (const value of evaluatePath(resource, path)) {
      const ref = (value as Json | null)?.reference;
      if (typeof ref !== 'string') continue;
      const parsed = parseReference(ref);
      if (parsed?.type === 'Patient') patients.add(parsed.id);
    }
  }
  return [...patients];
}
