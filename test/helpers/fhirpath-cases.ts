/**
 * FHIRPath expressions and their expected answers as text, for the engine's unit tests of one function group each
 * (test/unit/validation/fhirpath-*.test.ts).
 */
import { expect } from 'bun:test';
import { compileValues } from '../../src/fhir/validation/fhirpath-engine.ts';
import { FHIRPATH_TYPES } from '../../src/fhir/validation/model.ts';

type Json = Record<string, unknown>;

/** `expression` on `focus` (of `type`): 'error', 'empty', or its items joined by commas (a Quantity as `value 'unit'`). */
export function runFhirPath(expression: string, focus: Json = {}, type?: string): string {
  let out: unknown[];
  try {
    out = compileValues(expression, FHIRPATH_TYPES)(focus, type, { resource: focus, rootResource: focus });
  } catch {
    return 'error';
  }
  if (out.length === 0) return 'empty';
  return out.map((x) => (x !== null && typeof x === 'object' ? `${(x as Json).value} '${(x as Json).code ?? (x as Json).unit}'` : String(x))).join(', ');
}

/** Each `[expression, expected]` of `cases` on `focus`: the expression named in the failure it gives. */
export function checkFhirPath(cases: [string, string][], focus?: Json, type?: string): void {
  for (const [expression, expected] of cases) expect(`${expression} -> ${runFhirPath(expression, focus, type)}`).toBe(`${expression} -> ${expected}`);
}
