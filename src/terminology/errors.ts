/**
 * Domain errors of the terminology engine. The category maps one to one onto the
 * OperationOutcome issue code and an HTTP status at the edge (invalid 400, not-found 404,
 * too-costly 400), so the HTTP layer never needs to inspect messages.
 */
export type TerminologyErrorCategory = 'invalid' | 'not-found' | 'too-costly';

export class TerminologyError extends Error {
  override readonly name = 'TerminologyError';

  constructor(
    readonly category: TerminologyErrorCategory,
    message: string,
    /** FHIRPath-ish locations of the problem (OperationOutcome.issue.expression). */
    readonly expression: readonly string[] = [],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Shorthand for the most common case: bad client input (400 invalid). */
export function invalid(message: string, expression: readonly string[] = []): TerminologyError {
  return new TerminologyError('invalid', message, expression);
}
