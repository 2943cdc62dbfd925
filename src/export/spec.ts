/**
 * The plain data of an export job: what kick-off decided (ExportSpec) and how far a worker got
 * (JobProgress). Both are stored as JSON in the job row and handed to workers as they are.
 */
import type { FhirIssue } from '../errors.ts';
import { issue } from '../fhir/outcome.ts';
import type { Condition } from '../store/types.ts';

export type ExportLevel = 'system' | 'patient' | 'group';

/**
 * Provenance handling beyond a system export's ordinary Provenance type (Bulk Data 2.0
 * `includeAssociatedData` and its default): `compartment` = every Provenance whose target is a resource
 * in the compartment of one of the export's patients (the Patient and Group default); `relevant` = every
 * Provenance whose target was exported; `latest` = for each exported resource only the most recent
 * Provenance targeting it; `none` = no Provenance found by its targets.
 */
export type ProvenanceMode = 'none' | 'compartment' | 'relevant' | 'latest';

export interface ExportSpec {
  level: ExportLevel;
  groupId?: string;
  /** Types exported by their own scan, in order (Provenance only when it is an ordinary type). */
  types: string[];
  /** `_since` in epoch ms. */
  since?: number;
  /**
   * What each type's scan selects: ORed queries, each its ANDed compiled conditions
   * (src/fhir/search-compile.ts): `_typeFilter`'s, ANDed with the kick-off token's scope filter.
   */
  filters: Record<string, Condition[][]>;
  /**
   * The kick-off token's SMART v2 scope filters on the exported types (part of `filters` already): a
   * file of a filtered type is downloaded with a token of the same filter, or of none.
   */
  scopeFilters?: Record<string, Condition[][]>;
  /** `_elements`: top-level elements to keep per type (mandatory ones included). */
  elements?: Record<string, string[]>;
  /** Patient and Group exports: any patient's compartment, or those of the job's stored patients. */
  compartment?: 'any' | 'job';
  /**
   * Group export with `_since` where some patients joined after `_since` (stored as `joined`): their resources
   * are exported whatever their time.
   */
  joinedSince: boolean;
  provenance: ProvenanceMode;
  /**
   * With `provenance: 'compartment'`: the types whose resources bring their Provenance (the Patient
   * compartment's types the kick-off token may read, whatever `_type` says), each with the token's
   * SMART v2 scope filter on it (ORed alternatives; empty when it has none).
   */
  provenanceTargets?: Record<string, Condition[][]>;
  /**
   * Patient and Group exports by a patient-context token: the patient its `patient/` scopes bound the
   * export to, and the types they bound (Access.patientLimit), whose files hold that patient's
   * compartment alone; a token bound to that patient downloads them, one bound to another does not.
   */
  bound?: { patient: string; types: string[] };
  /**
   * The patient in context of the kick-off token (Access.patient): the job belongs to its client and
   * this patient, so that one app's patients never see or cancel each other's exports.
   */
  ownerPatient?: string;
  /**
   * The signed-in user of the kick-off token (Access.user), when it came from a sign-in: the job belongs to
   * its client, patient and this user, so that one app's users never see, download or cancel each other's
   * exports. Absent: a client's own authority (Backend Services), whose jobs no user's token sees.
   */
  ownerUser?: string;
  /**
   * With Binary exported by a token that may not read every type, or reads some through a SMART v2
   * filter: the types a Binary's `securityContext` may name for the Binary to be exported (those the
   * token reads unfiltered), as a read of it requires (requireContextReadable in src/fhir/crud.ts); a
   * Binary whose context names another type is left out. Absent: every Binary is within reach.
   */
  binaryContexts?: string[];
  /** Problems with the request that lenient handling let through; they go to the manifest's `error` files. */
  issues: FhirIssue[];
  /** The tenant's FHIR base: absolute references under it are the tenant's (FhirDeps.fhirBase); absent: none is. */
  fhirBase?: string;
}

/** One finished file of a job. */
export interface FileRecord {
  kind: 'output' | 'deleted' | 'error';
  /** Resource type in the file (`Bundle` for deletions, `OperationOutcome` for errors). */
  type: string;
  /** What the type's lines are about (the deleted resources' type for `deleted` files). */
  subject: string;
  /** File name in download URLs. */
  name: string;
  /** Storage key. */
  key: string;
  count: number;
  bytes: number;
}

export type Step =
  | { kind: 'type'; type: string }
  | { kind: 'provenance'; mode: 'relevant' | 'compartment' }
  /** A Group export with `_since`: the Provenance of its joined members' records, last updated at or before `_since`. */
  | { kind: 'provenance-joined'; mode: 'relevant' | 'compartment' }
  | { kind: 'provenance-scan' }
  /** `provenance-scan` of the Provenance `provenance-joined` finds, for `LatestProvenanceResources`. */
  | { kind: 'provenance-scan-joined' }
  | { kind: 'provenance-emit' }
  | { kind: 'errors' };

export interface JobProgress {
  /** Index of the step in progress. */
  step: number;
  /** Keyset position where the current step's open files start (a row key, or an id for provenance-emit). */
  after: number | string | null;
  /** Next part numbers of the current step's output and deleted files. */
  part: number;
  deletedPart: number;
  files: FileRecord[];
  /** Resources written to finished files. */
  exported: number;
  /** Problems met while exporting (bounded); written to the error file at the end. */
  issues: FhirIssue[];
  /**
   * Problems met once `issues` held MAX_RUNTIME_ISSUES, counted rather than listed (each a resource left
   * out of the output, or another problem): the error file ends with their number, so that no resource is
   * left out without the error file saying so.
   */
  unlisted?: number;
}

export const MAX_RUNTIME_ISSUES = 1000;

/** Records a problem met while exporting (once per text, bounded). */
export function noteIssue(progress: JobProgress, found: FhirIssue): void {
  if (progress.issues.some((i) => i.details?.text === found.details?.text)) return;
  if (progress.issues.length >= MAX_RUNTIME_ISSUES) {
    progress.unlisted = (progress.unlisted ?? 0) + 1;
    return;
  }
  progress.issues.push(found);
}

/**
 * A resource left out because the version after its last one stored at or before transactionTime was expunged
 * (`followedByStored`): the version current at transactionTime may be the one expunged, a deliberate removal of
 * that content, so neither the version before it nor a later one stands in for it.
 */
export function expungedIssue(type: string, id: string, versionId: number): FhirIssue {
  const text = `${type}/${id} is left out: its version ${versionId + 1} was expunged, and may have been its version as of transactionTime; ` +
    `neither version ${versionId}, whose content that one replaced, nor a version written after transactionTime is exported in its place ` +
    '(an export _since transactionTime holds its current version)';
  return issue('information', 'deleted', text);
}

export function initialProgress(): JobProgress {
  return { step: 0, after: null, part: 1, deletedPart: 1, files: [], exported: 0, issues: [] };
}

/**
 * The steps of a job, in order; derived from the spec alone so that every attempt sees the same plan. A Group
 * export with `_since` exports all the records of the members who joined since (ExportSpec.joinedSince), so
 * their Provenance too: the steps that find Provenance by its targets take only Provenance changed after
 * `_since`, and one more step (`provenance-joined`, `provenance-scan-joined`) takes the older Provenance of
 * those members' records (not in the plan of data version 0, `legacy`, which is kept as its release made it).
 */
export function planSteps(spec: ExportSpec, legacy = false): Step[] {
  const steps: Step[] = spec.types.map((type) => ({ kind: 'type', type }));
  const joined = !legacy && spec.joinedSince && spec.since !== undefined;
  if (spec.provenance === 'relevant' || spec.provenance === 'compartment') {
    steps.push({ kind: 'provenance', mode: spec.provenance });
    if (joined) steps.push({ kind: 'provenance-joined', mode: spec.provenance });
  }
  if (spec.provenance === 'latest') steps.push({ kind: 'provenance-scan' }, ...(joined ? [{ kind: 'provenance-scan-joined' } as const] : []), { kind: 'provenance-emit' });
  steps.push({ kind: 'errors' });
  return steps;
}

/** The non-Provenance types whose resources Provenance may target. */
export function targetTypes(spec: ExportSpec): string[] {
  return spec.types.filter((t) => t !== 'Provenance');
}
