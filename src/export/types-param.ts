import { FhirError, type FhirIssue } from '../errors.ts';
import type { Access } from '../fhir/access.ts';
import { compartmentTypes } from '../fhir/definitions.ts';
import { issue } from '../fhir/outcome.ts';
import { hasEndpoint, isResourceType, REST_RESOURCE_TYPES } from '../fhir/resource-types.ts';
import type { Condition } from '../store/types.ts';
import type { ExportLevel, ExportSpec, ProvenanceMode } from './spec.ts';

export interface TypeSelection {
  types: string[];
  provenance: ProvenanceMode;
  /** With provenance `compartment`: the types whose resources in the patients' compartments bring their Provenance. */
  provenanceTargets: string[];
  /**
   * Patient and Group exports by a patient-context token: the patient its `patient/` scopes bind the
   * types of `bound` to (of `types` and `provenanceTargets`), which it reads in that compartment alone.
   */
  patient?: string;
  bound: string[];
  issues: FhirIssue[];
}

/**
 * Whether the token may export `type`: read access not bound to one patient (system or user access).
 * A SMART v2 scope filter on the type narrows what is exported (scopeFilters).
 */
export function mayExport(access: Access, type: string): boolean {
  return access.can(type, 'r') && access.patientLimit(type, 'r') === undefined;
}

/**
 * The patient whose compartment bounds the token's reads of `type` (a `patient/` scope no system/user
 * scope lifts: Access.patientLimit), for a Patient or Group export of that compartment alone.
 */
function boundTo(access: Access, type: string): string | undefined {
  return access.can(type, 'r') ? access.patientLimit(type, 'r') : undefined;
}

/** Whether the token may read every resource of `type`: mayExport, and no scope filter on it. */
function mayExportAll(access: Access, type: string): boolean {
  return mayExport(access, type) && !access.filters?.(type, 'r');
}

/** The token's SMART v2 scope filters on reading `types` (ORed alternatives each), for the types that have one. */
export function scopeFilters(access: Access, types: string[]): Record<string, Condition[][]> {
  const out: Record<string, Condition[][]> = {};
  for (const type of types) {
    const filters = access.filters?.(type, 'r');
    if (filters) out[type] = filters;
  }
  return out;
}

/**
 * `_typeFilter`'s queries ANDed with the scope's filters, type by type: both are ORed alternatives, so
 * a resource is exported when it meets one of each, which is one of their pairs.
 */
export function withScopeFilters(filters: Record<string, Condition[][]>, scoped: Record<string, Condition[][]>): Record<string, Condition[][]> {
  const out = { ...filters };
  for (const [type, scope] of Object.entries(scoped)) {
    const own = filters[type];
    out[type] = own ? own.flatMap((f) => scope.map((s) => [...f, ...s])) : scope;
  }
  return out;
}

/**
 * Whether a file of `type` may be downloaded with `access`: the token reads the type, whole or (its
 * `patient/` scopes bounding it) in the compartment of the patient the job bound the type to; and the
 * token's scope filter on the type (if any) is the one the job was exported under (the kick-off
 * token's). A token without a bound or a filter may read whatever the job holds.
 */
export function mayDownload(access: Access, type: string, spec: Pick<ExportSpec, 'scopeFilters' | 'bound'>): boolean {
  if (!access.can(type, 'r')) return false;
  const patient = access.patientLimit(type, 'r');
  if (patient !== undefined && (spec.bound?.patient !== patient || !spec.bound.types.includes(type))) return false;
  const own = access.filters?.(type, 'r');
  const exportedUnder = spec.scopeFilters?.[type];
  return !own || (exportedUnder !== undefined && JSON.stringify(own) === JSON.stringify(exportedUnder));
}

function byExportOrder(a: string, b: string): number {
  if (a === 'Patient' || b === 'Patient') return a === 'Patient' ? (b === 'Patient' ? 0 : -1) : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `includeAssociatedData` values; the least restrictive wins when several are given (Bulk Data 2.0). */
function associatedData(values: string[], lenient: boolean, issues: FhirIssue[]): ProvenanceMode | undefined {
  let mode: ProvenanceMode | undefined;
  for (const v of values) {
    if (v === 'RelevantProvenanceResources') mode = 'relevant';
    else if (v === 'LatestProvenanceResources') mode = mode === 'relevant' ? 'relevant' : 'latest';
    else {
      const text = `includeAssociatedData '${v}' is not supported: Cinder supports LatestProvenanceResources and RelevantProvenanceResources`;
      if (!lenient) throw new FhirError('not-supported', text, { expression: ['includeAssociatedData'] });
      issues.push(issue('warning', 'not-supported', `${text}; it was ignored`, ['includeAssociatedData']));
    }
  }
  return mode;
}

type Problem = (category: 'invalid' | 'not-supported' | 'forbidden', text: string) => void;

/**
 * Provenance beyond a scanned type: `includeAssociatedData`'s mode, or a Patient or Group export's
 * default (every Provenance targeting the compartments), both needing read access to all Provenance.
 * A token whose `patient/` scopes bound Provenance scans it in the patient's compartment instead, as it
 * searches it. Returns the mode and whether Provenance is scanned as an ordinary type.
 */
function provenanceOf(level: ExportLevel, mode: ProvenanceMode | undefined, wanted: boolean, explicit: boolean, access: Access, problem: Problem) {
  if (mode) {
    if (mayExportAll(access, 'Provenance')) return { provenance: mode, scanned: false };
    problem('forbidden', "includeAssociatedData needs read access to all Provenance resources, which the access token's scopes do not allow");
    return { provenance: 'none' as const, scanned: false, refused: true };
  }
  if (level === 'system') return { provenance: 'none' as const, scanned: true };
  if (!wanted) return { provenance: 'none' as const, scanned: false };
  if (mayExportAll(access, 'Provenance')) return { provenance: 'compartment' as const, scanned: false };
  if (boundTo(access, 'Provenance') !== undefined) return { provenance: 'none' as const, scanned: true };
  if (explicit) problem('forbidden', `A ${level === 'group' ? 'Group' : 'Patient'} export's Provenance needs read access to all Provenance resources, which the access token's scopes do not allow`);
  return { provenance: 'none' as const, scanned: false, refused: true };
}

/** The 403 of an export that would hold nothing the token may read, rather than a 202 that exports nothing. */
function nothingExportable(level: ExportLevel, explicit: boolean, access: Access, candidates: readonly string[]): FhirError {
  const patient = candidates.map((t) => boundTo(access, t)).find((p) => p !== undefined);
  const text = level === 'system' && patient !== undefined
    ? `A system export is for system and user scopes: the access token reads only Patient/${patient}'s compartment, which Patient/$export exports`
    : `The access token's scopes allow reading none of the types ${explicit ? 'requested' : `a ${level} export covers`}`;
  return new FhirError('forbidden', text, { expression: ['_type'] });
}

/**
 * The types an export covers (Bulk Data 2.0 `_type`): only types the token may read; Patient and Group
 * exports only Patient-compartment types, which a patient-context token reads in its patient's
 * compartment (the types `bound`), a system export only types it reads whole. An unknown, unsupported
 * or forbidden type is an error, or with lenient handling an issue in the manifest; an export left
 * with no type the token may read is a 403. Provenance is handled by its own rules.
 */
export function selectTypes(level: ExportLevel, requested: string[], associated: string[], access: Access, lenient: boolean): TypeSelection {
  const issues: FhirIssue[] = [];
  const problem: Problem = (category, text) => {
    if (!lenient) throw new FhirError(category, text, { expression: ['_type'] });
    issues.push(issue('warning', category === 'forbidden' ? 'forbidden' : 'not-supported', `${text}; it was left out`, ['_type']));
  };
  const compartment = new Set(compartmentTypes());
  // Parameters has no RESTful endpoint (parameters.html): never stored now, it is not exported either.
  const scope = level === 'system' ? REST_RESOURCE_TYPES : [...compartment];
  const explicit = requested.length > 0;
  const readable = (type: string) => mayExport(access, type) || (level !== 'system' && boundTo(access, type) !== undefined);
  const candidates: readonly string[] = explicit ? [...new Set(requested)] : scope;
  const types: string[] = [];
  let refused = false;
  for (const type of candidates) {
    if (!isResourceType(type)) problem('invalid', `_type '${type}' is not a FHIR R4 resource type`);
    else if (!hasEndpoint(type)) problem('not-supported', `${type} has no RESTful endpoint and is not exported`);
    else if (level !== 'system' && !compartment.has(type)) problem('not-supported', `${type} is outside the Patient compartment and not part of ${level === 'group' ? 'a Group' : 'a Patient'} export`);
    else if (readable(type)) types.push(type);
    else {
      refused = true;
      const patient = boundTo(access, type);
      if (explicit) problem('forbidden', patient === undefined ? `The access token's scopes do not allow reading and searching ${level === 'system' ? 'all ' : ''}${type} resources, which an export of them needs` : `The access token reads ${type} only in Patient/${patient}'s compartment, which a system export does not cover: use Patient/$export`);
    }
  }
  const chosen = provenanceOf(level, associatedData(associated, lenient, issues), types.includes('Provenance'), explicit, access, problem);
  const scanned = types.filter((t) => t !== 'Provenance' || chosen.scanned);
  if (!scanned.length && chosen.provenance === 'none' && (refused || chosen.refused || !explicit)) throw nothingExportable(level, explicit, access, candidates);
  // Bulk Data 2.0: Provenance whose target is "a resource in the Patient compartment", not only an exported one.
  const provenanceTargets = chosen.provenance === 'compartment' ? [...compartment].filter(readable).sort() : [];
  const bound = level === 'system' ? [] : [...new Set([...scanned, ...provenanceTargets])].filter((t) => boundTo(access, t) !== undefined).sort();
  const patient = bound.length ? boundTo(access, bound[0]!) : undefined;
  return { types: scanned.sort(byExportOrder), provenance: chosen.provenance, provenanceTargets, bound, ...(patient !== undefined && { patient }), issues };
}
