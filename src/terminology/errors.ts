import { FhirError } from '../errors.ts';
import type { DatePeriod } from './model/date-time.ts';

/**
 * The errors the terminology engine throws, as the shared FhirError (rendered as an
 * OperationOutcome by the one error handler): bad input 400 `invalid`, unknown instance 404,
 * an expansion over the size limit 400 `too-costly`.
 */
export function invalid(message: string, expression: readonly string[] = []): FhirError {
  return new FhirError('invalid', message, expression.length > 0 ? { expression: [...expression] } : {});
}

/** An input the operation does not take, under strict handling (`Prefer: handling=strict`): 400 `not-supported` naming it. */
export function notSupported(message: string, expression: readonly string[]): FhirError {
  return new FhirError('not-supported', message, { expression: [...expression] });
}

export function notFound(message: string): FhirError {
  return new FhirError('not-found', message);
}

/** What a request depends on (a code system version or a supplement a value set names) is not on the server: 400 `not-found`. */
export function missingDependency(message: string, expression: readonly string[] = []): FhirError {
  return new FhirError('invalid', message, { issueCode: 'not-found', ...(expression.length > 0 ? { expression: [...expression] } : {}) });
}

export function tooCostly(message: string): FhirError {
  return new FhirError('invalid', message, { issueCode: 'too-costly' });
}

/**
 * A CodeSystem or ValueSet named by canonical URL (and version) that resolves to nothing: 400 naming
 * it, with the context's date when no version pinned it (interface: $validate-code errors).
 */
export function canonicalNotFound(
  type: 'CodeSystem' | 'ValueSet', url: string, version: string | undefined, asOf: DatePeriod | undefined,
): FhirError {
  const name = version === undefined ? url : `${url}|${version}`;
  const when = version === undefined && asOf !== undefined ? ` as of ${asOf.text}` : '';
  return invalid(`${type} '${name}' could not be found${when}`, ['url']);
}
