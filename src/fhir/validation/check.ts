/**
 * Validation on the write paths: a resource that is not valid R4 at the configured level is refused
 * with 422 and an OperationOutcome holding one issue per problem (FHIR R4 http.html: 422 for a
 * resource that violates the rules; content that is not a resource of the type stays a 400).
 */
import { FhirError, type FhirIssue } from '../../errors.ts';
import type { Resource } from '../resource.ts';
import { characterIssues } from './characters.ts';
import { pacedTurns } from '../turns.ts';
import { primeStrings, withPrimed, type Primed } from './large-strings.ts';
import { partedMember, validateInParts } from './parts.ts';
import { validateResource, type ValidateOptions, type ValidationIssue, type ValidationLevel } from './validate.ts';

/** Resources already found valid (a conditional create checks before its search, then writes the same object). */
const valid = new WeakSet<object>();
/** Those found valid as a Bundle entry's with a fullUrl, which holds more to be checked (ValidateOptions.inEntryWithFullUrl): valid anywhere. */
const validInEntry = new WeakSet<object>();

/** The OperationOutcome issues of validation issues. */
export function outcomeIssues(issues: readonly ValidationIssue[]): FhirIssue[] {
  return issues.map((i) => ({ severity: i.severity, code: i.code, details: { text: i.text }, diagnostics: i.text, expression: [i.expression] }));
}

/** A 422 FhirError holding `issues` (errors first), its message summing them up. */
export function invalidResource(issues: readonly ValidationIssue[], what: string): FhirError {
  const sorted = [...issues].sort((a, b) => (a.severity === b.severity ? 0 : a.severity === 'error' ? -1 : 1));
  const errors = issues.filter((i) => i.severity === 'error').length;
  const message = errors === 1 ? `${what} is not valid: ${sorted[0]!.expression}: ${sorted[0]!.text}` : `${what} is not valid: ${errors} problems, the first at ${sorted[0]!.expression}: ${sorted[0]!.text}`;
  return new FhirError('invalid-resource', message, { outcome: outcomeIssues(sorted) });
}

/**
 * The error issues of `resource` at `level`, located under `at`; at `off`, only of characters no FHIR
 * value holds and FHIR XML cannot carry (characters.ts), which no level stores.
 */
export function validationErrors(resource: Resource, level: ValidationLevel, at?: string, inEntryWithFullUrl = false): ValidationIssue[] {
  if ((inEntryWithFullUrl ? validInEntry : valid).has(resource)) return [];
  if (level === 'off') return characterIssues(resource, at);
  return keptErrors(resource, validateResource(resource, level, at, { inEntryWithFullUrl }), inEntryWithFullUrl);
}

/** The errors of `issues`, the validation of `resource`; a resource without any is remembered as valid. */
function keptErrors(resource: Resource, issues: ValidationIssue[], inEntryWithFullUrl: boolean): ValidationIssue[] {
  const errors = issues.filter((i) => i.severity === 'error');
  if (errors.length === 0) {
    valid.add(resource);
    if (inEntryWithFullUrl) validInEntry.add(resource);
  }
  return errors;
}

/**
 * Throws a 422 unless `resource` is valid at `level`; `inEntryWithFullUrl`: it is the resource of a
 * Bundle entry with a fullUrl (a transaction's or batch's), checked as `$validate` of the Bundle checks it.
 */
export function requireValid(resource: Resource, level: ValidationLevel, at?: string, inEntryWithFullUrl = false): void {
  const errors = validationErrors(resource, level, at, inEntryWithFullUrl);
  if (errors.length > 0) throw invalidResource(errors, at ?? resource.resourceType);
}

/**
 * validationErrors with the resource's large strings (a Binary's `data`) read first in slices that let the
 * event loop turn (primeStrings), the validation answering from them, and a resource with an array of more than
 * PART_ITEMS items (a CodeSystem's concepts) validated in parts with turns between (validateInParts): the same
 * issues, without one pass of the checks over tens of megabytes, or one walk of a 16 MB resource, holding every
 * other request of the process. A resource without such strings (found by a walk of at most a thousand values)
 * or such an array is validated at once, without a promise.
 */
export function validationErrorsPaced(resource: Resource, level: ValidationLevel, at?: string, inEntryWithFullUrl = false): ValidationIssue[] | Promise<ValidationIssue[]> {
  if ((inEntryWithFullUrl ? validInEntry : valid).has(resource)) return [];
  if (level === 'off') {
    const strings = primeStrings(resource);
    const validate = (primed: Primed[]) => withPrimed(primed, () => validationErrors(resource, level, at, inEntryWithFullUrl));
    return strings instanceof Promise ? strings.then(validate) : validate(strings);
  }
  const issues = validationIssuesPaced(resource, level, at, { inEntryWithFullUrl });
  return issues instanceof Promise ? issues.then((all) => keptErrors(resource, all, inEntryWithFullUrl)) : keptErrors(resource, issues, inEntryWithFullUrl);
}

/**
 * validateResource (every issue, warnings too) with the resource's large strings read first in slices
 * (primeStrings) and an array of more than PART_ITEMS items validated in parts (validateInParts), letting the
 * event loop turn between them; a promise only when either was.
 */
export function validationIssuesPaced(resource: Resource, level: 'strict' | 'structural', at?: string, options: ValidateOptions = {}): ValidationIssue[] | Promise<ValidationIssue[]> {
  const strings = primeStrings(resource);
  const member = partedMember(resource);
  if (member !== undefined) {
    return (async () => validateInParts(resource, member, level, { at, options, primed: await strings, pace: pacedTurns() }))();
  }
  const validate = (primed: Primed[]) => withPrimed(primed, () => validateResource(resource, level, at, options));
  return strings instanceof Promise ? strings.then(validate) : validate(strings);
}

/** requireValid with the resource's large strings read in slices first (validationErrorsPaced); a promise only when they were. */
export function requireValidPaced(resource: Resource, level: ValidationLevel, at?: string, inEntryWithFullUrl = false): void | Promise<void> {
  const fail = (errors: ValidationIssue[]) => {
    if (errors.length > 0) throw invalidResource(errors, at ?? resource.resourceType);
  };
  const errors = validationErrorsPaced(resource, level, at, inEntryWithFullUrl);
  return errors instanceof Promise ? errors.then(fail) : fail(errors);
}
