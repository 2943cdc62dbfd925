/**
 * `fn()`'s answer and the runs of JavaScriptCore's backtracking engine it made on patterns whose source holds
 * `marker` (tests and replaces, counted on RegExp's prototype while it runs): the work the regex guard
 * (src/regex-guard.ts) bounds, the same on any machine, where the time it takes is not.
 */
export async function engineRuns<T>(marker: string, fn: () => T | Promise<T>): Promise<{ value: T; runs: number }> {
  const proto = RegExp.prototype;
  const test = proto.test;
  const replace = proto[Symbol.replace];
  let runs = 0;
  proto.test = function (this: RegExp, input: string) {
    if (this.source.includes(marker)) runs++;
    return test.call(this, input);
  };
  proto[Symbol.replace] = function (this: RegExp, ...args: unknown[]) {
    if (this.source.includes(marker)) runs++;
    return Reflect.apply(replace, this, args) as string;
  } as typeof replace;
  try {
    return { value: await fn(), runs };
  } finally {
    proto.test = test;
    proto[Symbol.replace] = replace;
  }
}
