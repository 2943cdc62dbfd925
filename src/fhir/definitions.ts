import compartmentDefinition from '@fhir-r4/compartmentdefinition-patient.json' with { type: 'json' };
import searchParameterBundle from '@fhir-r4/search-parameters.json' with { type: 'json' };
import { compileExpression, type CompiledPath } from './fhirpath.ts';

/** Search parameters Cinder indexes on write (beyond `_id` and `_lastUpdated`, which every type has). */
export const INDEXED_PARAMS = ['identifier', 'patient', 'subject', 'url', 'version', 'code'] as const;

export type IndexedParamType = 'token' | 'reference' | 'uri';

export interface ParamDefinition {
  code: string;
  type: IndexedParamType;
  url: string;
  paths: CompiledPath[];
  /** Resource types a reference parameter may point at. */
  targets: string[];
}

interface RawSearchParameter {
  url: string;
  code: string;
  type: string;
  base: string[];
  expression?: string;
  target?: string[];
}

let params: Map<string, ParamDefinition[]> | undefined;
let compartment: Map<string, CompiledPath[]> | undefined;

function rawParameters(): RawSearchParameter[] {
  return (searchParameterBundle as { entry: { resource: RawSearchParameter }[] }).entry.map((e) => e.resource);
}

/** Indexed search parameters by resource type, from the R4 SearchParameter definitions. */
export function indexedParams(): Map<string, ParamDefinition[]> {
  if (params) return params;
  const wanted = new Set<string>(INDEXED_PARAMS);
  params = new Map();
  for (const sp of rawParameters()) {
    if (!wanted.has(sp.code) || !sp.expression) continue;
    if (sp.type !== 'token' && sp.type !== 'reference' && sp.type !== 'uri') continue;
    for (const base of sp.base) {
      const paths = compileExpression(sp.expression, base);
      if (paths.length === 0) continue;
      const list = params.get(base) ?? [];
      list.push({ code: sp.code, type: sp.type, url: sp.url, paths, targets: sp.target ?? [] });
      params.set(base, list);
    }
  }
  return params;
}

/** The parameters of `type` that Cinder can search on. */
export function paramsOf(type: string): ParamDefinition[] {
  return indexedParams().get(type) ?? [];
}

/**
 * R4 Patient CompartmentDefinition: for each member type, the reference paths that place a resource in
 * a patient's compartment (the union of the expressions of the listed search parameters).
 */
export function patientCompartment(): Map<string, CompiledPath[]> {
  if (compartment) return compartment;
  const raw = rawParameters();
  compartment = new Map();
  for (const entry of (compartmentDefinition as { resource: { code: string; param?: string[] }[] }).resource) {
    const paths: CompiledPath[] = [];
    for (const code of entry.param ?? []) {
      const sp = raw.find((p) => p.code === code && p.base.includes(entry.code) && p.expression);
      if (!sp) throw new Error(`compartment parameter ${entry.code}.${code} has no definition`);
      paths.push(...compileExpression(sp.expression!, entry.code));
    }
    if (paths.length > 0 || entry.code === 'Patient') compartment.set(entry.code, paths);
  }
  return compartment;
}

/** Resource types that can be in a Patient compartment. */
export function compartmentTypes(): string[] {
  return [...patientCompartment().keys()];
}
