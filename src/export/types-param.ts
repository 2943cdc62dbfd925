import { FhirError, type FhirIssue } from '../errors.ts';
import type { Access } from '../fhir/access.ts';
import { compartmentTypes } from '../fhir/definitions.ts';
import { issue } from '../fhir/outcome.ts';
import { hasEndpoint, isResourceType, REST_RESOURCE_TYPES } from '../fhir/resource-types.ts';
import type { Condition } from '../store/types.ts';
import type { ExportLevel, ProvenanceMode } from './spec.ts';

export interface TypeSelection {
  types: string[];
  provenance: ProvenanceMode;
  /** With provenance `compartment`: the types whose resources in the patients' compartments bring their Provenance. */
  provenanceTargets: string[];
  issues: FhirIssue[];
}

/**
 * Whether the token may export `type`: read access not bound to one patient (system or user access).
 * A SMART v2 scope filter on the type narrows what is exported (scopeFilters).
 */
export function mayExport(access: Access, type: string): boolean {
  return access.can(type, 'r') && access.patientLimit(type, 'r') === undefined;
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
 * Whether a file of `type` may be downloaded with `access`: mayExport, and the token's scope filter on
 * the type (if any) is the one the job was exported under (`exportedUnder`, the kick-off token's); a
 * token without a filter may read whatever the job holds.
 */
export function mayDownload(access: Access, type: string, exportedUnder: Condition[][] | undefined): boolean {
  if (!mayExport(access, type)) return false;
  const own = access.filters?.(type, 'r');
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

/**
 * The types an export covers (Bulk Data 2.0 `_type`): only types the token may read; Patient and Group
 * exports only Patient-compartment types. An unknown, unsupported or forbidden type is an error, or
 * with lenient handling an issue in the manifest. Provenance is handled by its own rules.
 */
export function selectTypes(level: ExportLevel, requested: string[], associated: string[], access: Access, lenient: boolean): TypeSelection {
  const issues: FhirIssue[] = [];
  const problem = (category: 'invalid' | 'not-supported' | 'forbidden', text: string) => {
    if (!lenient) throw new FhirError(category, text, { expression: ['_type'] });
    issues.push(issue('warning', category === 'forbidden' ? 'forbidden' : 'not-supported', `${text}; it was left out`, ['_type']));
  };
  const compartment = new Set(compartmentTypes());
  // Parameters has no RESTful endpoint (parameters.html): never stored now, it is not exported either.
  const scope = level === 'system' ? REST_RESOURCE_TYPES : [...compartment];
  const explicit = requested.length > 0;
  const types: string[] = [];
  for (const type of explicit ? [...new Set(requested)] : scope) {
    if (!isResourceType(type)) problem('invalid', `_type '${type}' is not a FHIR R4 resource type`);
    else if (!hasEndpoint(type)) problem('not-supported', `${type} has no RESTful endpoint and is not exported`);
    else if (level !== 'system' && !compartment.has(type)) problem('not-supported', `${type} is outside the Patient compartment and not part of ${level === 'group' ? 'a Group' : 'a Patient'} export`);
    else if (!mayExport(access, type)) {
      if (explicit) problem('forbidden', `The access token's scopes do not allow reading all ${type} resources`);
    } else types.push(type);
  }
  const mode = associatedData(associated, lenient, issues);
  const wantsProvenance = types.includes('Provenance');
  let provenance: ProvenanceMode = 'none';
  // Provenance found by its targets (relevant, latest) is not scanned, so no scope filter narrows it.
  if (mode) {
    if (mayExportAll(access, 'Provenance')) provenance = mode;
    else problem('forbidden', "includeAssociatedData needs read access to all Provenance resources, which the access token's scopes do not allow");
  } else if (wantsProvenance && level !== 'system') {
    if (mayExportAll(access, 'Provenance')) provenance = 'compartment';
    else if (explicit) problem('forbidden', `A ${level === 'group' ? 'Group' : 'Patient'} export's Provenance needs read access to all Provenance resources, which the access token's scopes do not allow`);
  }
  const scanned = types.filter((t) => t !== 'Provenance' || (level === 'system' && !mode));
  // Bulk Data 2.0: Provenance whose target is "a resource in the Patient compartment", not only an exported one.
  const provenanceTargets = provenance === 'compartment' ? [...compartment].filter((t) => mayExport(access, t)).sort() : [];
  return { types: scanned.sort(byExportOrder), provenance, provenanceTargets, issues };
}
