import { invalid } from '../errors.ts';

/**
 * The deepest JSON nesting accepted in a request body (src/fhir/resource.ts parseBounded) and in a
 * CodeSystem, ValueSet or Parameters resource the terminology engine reads. Nested `concept` /
 * `contains` cost two levels each, so this allows 500 hierarchy levels; deeper input would exhaust the
 * call stack of the recursive validation and indexing.
 */
export const MAX_JSON_DEPTH = 1000;

/** Throws a 400 when `value` nests objects and arrays deeper than `MAX_JSON_DEPTH`. */
export function checkDepth(value: unknown, what: string): void {
  if (typeof value === 'object' && value !== null && deeperThanMax(value, 1)) throw invalid(`${what} nests deeper than ${MAX_JSON_DEPTH} levels`);
}

/** Whether `node` (at `depth`) nests deeper than the limit; the recursion stops one level past it. */
function deeperThanMax(node: object, depth: number): boolean {
  if (depth > MAX_JSON_DEPTH) return true;
  if (Array.isArray(node)) {
    for (const child of node) if (typeof child === 'object' && child !== null && deeperThanMax(child, depth + 1)) return true;
    return false;
  }
  for (const key in node) {
    const child = (node as Record<string, unknown>)[key];
    if (typeof child === 'object' && child !== null && deeperThanMax(child, depth + 1)) return true;
  }
  return false;
}
