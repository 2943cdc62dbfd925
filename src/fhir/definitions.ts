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
  /**
   * Set when another reference parameter of the same type reaches the same elements, so that this one
   * keeps no index rows of its own and is searched in that parameter's rows: R4 defines `patient` as
   * `subject.where(resolve() is Patient)` on 36 types, which `target` restricts to references to
   * Patient; on two types the expressions are equal and there is no `target`.
   */
  storedAs?: { param: string; target?: string };
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
  for (const list of params.values()) linkStoredAs(list);
  return params;
}

const pathKey = (p: CompiledPath): string => `${p.segments.join('.')}|${p.ofType ?? ''}`;
const pathsKey = (paths: CompiledPath[]): string => paths.map(pathKey).sort().join(',');

/**
 * Sets `storedAs` on each reference parameter whose paths are another unrestricted reference
 * parameter's paths, either all restricted to one target type or all unrestricted (then of two equal
 * parameters the one allowing more target types keeps the rows: `subject` rather than `patient`).
 */
function linkStoredAs(list: ParamDefinition[]): void {
  for (const p of list) {
    if (p.type !== 'reference') continue;
    const targets = new Set(p.paths.map((path) => path.targetType));
    if (targets.size !== 1) continue;
    const [target] = targets;
    const key = pathsKey(p.paths);
    const q = list.find((other) =>
      other !== p && other.type === 'reference' && other.storedAs === undefined &&
      other.paths.every((path) => path.targetType === undefined) && pathsKey(other.paths) === key,
    );
    if (q === undefined || (target === undefined && !keepsRowsOver(q, p, list))) continue;
    p.storedAs = target === undefined ? { param: q.code } : { param: q.code, target };
  }
}

/** Of two parameters with equal paths, whether `q` keeps the rows: more target types, else listed first. */
function keepsRowsOver(q: ParamDefinition, p: ParamDefinition, list: ParamDefinition[]): boolean {
  return q.targets.length !== p.targets.length ? q.targets.length > p.targets.length : list.indexOf(q) < list.indexOf(p);
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
