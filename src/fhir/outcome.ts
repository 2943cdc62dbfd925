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
