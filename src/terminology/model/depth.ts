import { invalid } from '../errors.ts';

/**
 * The deepest JSON nesting the engine accepts in a CodeSystem, ValueSet or Parameters resource.
 * Nested `concept` / `contains` cost two levels each, so this allows 500 hierarchy levels; deeper
 * input would exhaust the call stack of the recursive validation and indexing.
 */
export const MAX_JSON_DEPTH = 1000;

/** Throws a 400 when `value` nests objects and arrays deeper than `MAX_JSON_DEPTH` (checked without recursion). */
export function checkDepth(value: unknown, what: string): void {
  const stack: [unknown, number][] = [[value, 1]];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const [node, depth] = item;
    if (depth > MAX_JSON_DEPTH) throw invalid(`${what} nests deeper than ${MAX_JSON_DEPTH} levels`);
    if (Array.isArray(node)) {
      for (const child of node) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    } else if (typeof node === 'object' && node !== null) {
      for (const child of Object.values(node)) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
    }
  }
}
