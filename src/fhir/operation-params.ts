/**
 * Parameters an operation does not take. As a search ignores an unknown parameter (search.html), an
 * operation ignores one under the default `Prefer: handling=lenient`; its answer (a document, a
 * Parameters) has no Bundle to carry a warning in. Under `handling=strict` the first is a 400 naming it.
 * `_format` and `_pretty` are every interaction's.
 */
import { FhirError } from '../errors.ts';

export function unknownParameters(params: URLSearchParams, known: readonly string[], operation: string, strict: boolean): void {
  if (!strict) return;
  for (const key of params.keys()) {
    if (key === '_format' || key === '_pretty' || known.includes(key)) continue;
    throw new FhirError('not-supported', `'${key}' is not a parameter of ${operation}`, { expression: [key] });
  }
}
