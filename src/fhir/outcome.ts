import type { FhirIssue } from '../errors.ts';

/** An OperationOutcome resource from issues. */
export function operationOutcome(issues: FhirIssue[]): Record<string, unknown> {
  return { resourceType: 'OperationOutcome', issue: issues };
}

/** One informational or warning issue. */
export function issue(severity: FhirIssue['severity'], code: string, text: string, expression?: string[]): FhirIssue {
  const i: FhirIssue = { severity, code, details: { text }, diagnostics: text };
  if (expression) i.expression = expression;
  return i;
}

/**
 * The informational outcome of an update that changed nothing (crud.ts putPrepared): the current
 * version is kept, no version is added. `Prefer: return=OperationOutcome` answers it, and a Bundle's
 * entry carries it in `response.outcome` (as HAPI FHIR reports such an update). `refused`: the issues validation
 * found in it (crud.ts refusedNoOp: the stored version fails rules newer than it), as warnings after it, each
 * naming its element: a change that keeps them is refused.
 */
export function unchangedOutcome(type: string, id: string, versionId: string | number, refused: readonly FhirIssue[] = []): Record<string, unknown> {
  const errors = refused.filter((i) => i.severity === 'error' || i.severity === 'fatal');
  const unchanged = issue('information', 'informational', `${type}/${id} unchanged: the update equals version ${versionId}, so no new version was stored`
    + (errors.length === 0 ? '' : `; it is not valid now (${errors.length === 1 ? 'one problem' : `${errors.length} problems`}, below), so an update that changes it must fix ${errors.length === 1 ? 'it' : 'them'}`));
  return operationOutcome([unchanged, ...errors.map((i) => ({ ...i, severity: 'warning' as const }))]);
}

/**
 * The informational outcome of a conditional create whose condition matched `type/id` (FHIR R4 http.html
 * conditional create: the server ignores the post): nothing was written. `Prefer: return=OperationOutcome`
 * answers it, for the If-None-Exist header and a Bundle entry's `ifNoneExist` alike.
 */
export function matchedOutcome(type: string, id: string, versionId: string | number, condition: string): Record<string, unknown> {
  return operationOutcome([issue('information', 'informational', `${type}/${id} version ${versionId} matches ${condition}, so nothing was created`)]);
}
