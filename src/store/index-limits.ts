import type { IndexRows } from './interface/search.ts';

/**
 * The bytes a value in one of PostgreSQL's index columns may have (Store.maxIndexedBytes): a B-tree
 * entry holds at most 2,704 (a third of a page), and a longer value that does not compress would fail
 * its write.
 */
export const POSTGRES_MAX_INDEXED_BYTES = 2000;

/**
 * What keeps a version's index rows out of indexes whose values hold at most `maxBytes` bytes: a token,
 * reference or uri value, a composite's first value, a system or unit, or a string's matching form
 * (cut to 256 characters, so within any such bound) longer than that; undefined when none is.
 */
export function indexLimitProblem(type: string, index: IndexRows, maxBytes: number): string | undefined {
  const over = (values: string[]) => values.map(bytesOf(maxBytes)).find((n) => n > maxBytes);
  const problem = (param: string, n: number) => `A value of the search parameter ${type}.${param} is ${n} bytes long; the database indexes at most ${maxBytes}`;
  for (const e of index.tokens) {
    const n = over([e.system, e.value]);
    if (n !== undefined) return problem(e.param, n);
  }
  for (const e of index.ranges) {
    const n = over([e.system, e.code]);
    if (n !== undefined) return problem(e.param, n);
  }
  for (const e of index.composites) {
    const n = over([e.system1, e.value1]);
    if (n !== undefined) return problem(e.param, n);
  }
  for (const e of index.strings) {
    const n = over([e.value]);
    if (n !== undefined) return problem(e.param, n);
  }
  return undefined;
}

/** A string's UTF-8 bytes, without counting them when it cannot reach `maxBytes` (at most 3 bytes per UTF-16 unit). */
const bytesOf = (maxBytes: number) => (s: string) => (s.length * 3 <= maxBytes ? s.length : Buffer.byteLength(s));
