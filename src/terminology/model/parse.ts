import type { z } from 'zod';
import type { FhirError } from '../../errors.ts';
import { invalid } from '../errors.ts';
import { checkDepth } from './depth.ts';

/** Turns zod issues into one precise 400 message with the paths as expressions. */
export function zodToError(what: string, error: z.ZodError, root?: string): FhirError {
  const expressions = error.issues.map((i) => [...(root === undefined ? [] : [root]), ...i.path.map(String)].join('.'));
  const details = error.issues
    .slice(0, 5)
    .map((i) => (i.path.length > 0 ? `${i.path.join('.')}: ${i.message}` : i.message))
    .join('; ');
  return invalid(`${what} is not valid: ${details}`, expressions);
}

/** Parses `value` with `schema` or throws a 400 FhirError naming `what` (also when it nests too deep). */
export function parseWith<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  checkDepth(value, what);
  const result = schema.safeParse(value);
  if (!result.success) throw zodToError(what, result.error);
  return result.data;
}
