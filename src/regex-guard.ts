/**
 * Regular expressions a client writes (a ValueSet's `regex` filter, FHIRPath `matches()` and
 * `replaceMatches()` in a FHIRPath Patch) run in JavaScriptCore's backtracking engine, where a pattern
 * such as `(a+)+$` takes exponential time: the engine gives up after about 400 ms and answers "no
 * match", and a filter tested on each of a CodeSystem's concepts held the event loop for 0.4 s a
 * concept (40 concepts: 15 s), answering wrongly besides. Tested through `guarded`, a run that takes
 * longer than SLOW_MS marks its pattern too costly: that run and every later one of the pattern (in
 * this process) throw the caller's error instead of answering, so a request pays for one such run at
 * most, and no answer rests on a run the engine gave up. A benign pattern on a code or a name takes
 * microseconds.
 */

/** A run of a pattern longer than this (ms) marks it too costly. */
const SLOW_MS = 100;
/** The patterns marked (flags and source), at most MAX_REFUSED: then it starts afresh. */
const refused = new Set<string>();
const MAX_REFUSED = 1000;

/** `run` (a test or replace with `re`), unless `re`'s pattern is, or proves, too costly: then `tooCostly()` is thrown. */
export function guarded<T>(re: RegExp, run: () => T, tooCostly: () => Error): T {
  const key = `${re.flags}/${re.source}`;
  if (refused.has(key)) throw tooCostly();
  const start = performance.now();
  const result = run();
  if (performance.now() - start > SLOW_MS) {
    if (refused.size >= MAX_REFUSED) refused.clear();
    refused.add(key);
    throw tooCostly();
  }
  return result;
}
