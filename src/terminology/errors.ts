import { FhirError } from '../errors.ts';

/**
 * The errors the terminology engine throws, as the shared FhirError (rendered as an
 * OperationOutcome by the one error handler): bad input 400 `invalid`, unknown instance 404,
 * an expansion over the size limit 400 `too-costly`.
 */
export function invalid(message: string, expression: readonly string[] = []): FhirError {
  return new FhirError('invalid', message, expression.length > 0 ? { expression: [...expression] } : {});
}

export function notFound(message: string): FhirError {
  return new FhirError('not-found', message);
}

export function tooCostly(message: string): FhirError {
  return new FhirError('invalid', message, { issueCode: 'too-costly' });
}
