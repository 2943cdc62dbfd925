/**
 * The work `fn()` does on text, in units a test can count whatever the machine: characters handed to a RegExp run
 * (`test`, `exec`), characters copied by `String.prototype.slice` and split by `split`, and `charCodeAt` reads, counted on the prototypes
 * while it runs. A parser that reads its input once does a few per character; one that re-reads a suffix at every
 * position does a number that grows with the input's length squared. The time the work takes is the benchmarks'.
 */
export async function textWork<T>(fn: () => T | Promise<T>): Promise<{ value: T; work: number }> {
  const re = RegExp.prototype;
  const str = String.prototype;
  const { test, exec } = re;
  const { slice, split, charCodeAt } = str;
  let work = 0;
  re.test = function (this: RegExp, input: string) {
    work += String(input).length;
    return test.call(this, input);
  };
  re.exec = function (this: RegExp, input: string) {
    work += String(input).length;
    return exec.call(this, input);
  };
  str.slice = function (this: string, start?: number, end?: number) {
    const out = slice.call(this, start, end);
    work += out.length;
    return out;
  };
  str.split = function (this: string, ...args: unknown[]) {
    work += this.length;
    return Reflect.apply(split, this, args) as string[];
  } as typeof split;
  str.charCodeAt = function (this: string, at: number) {
    work++;
    return charCodeAt.call(this, at);
  };
  try {
    return { value: await fn(), work };
  } finally {
    re.test = test;
    re.exec = exec;
    str.slice = slice;
    str.split = split;
    str.charCodeAt = charCodeAt;
  }
}

/**
 * The `Map` look-ups (`get`, `has`) `fn()` makes, counted on the prototype while it runs: the steps of a walk through
 * indexed records (a code system's concepts by code, say), the same on any machine.
 */
export async function mapLookups<T>(fn: () => T | Promise<T>): Promise<{ value: T; lookups: number }> {
  const proto = Map.prototype;
  const { get, has } = proto;
  let lookups = 0;
  proto.get = function (this: Map<unknown, unknown>, key: unknown) {
    lookups++;
    return get.call(this, key);
  };
  proto.has = function (this: Map<unknown, unknown>, key: unknown) {
    lookups++;
    return has.call(this, key);
  };
  try {
    return { value: await fn(), lookups };
  } finally {
    proto.get = get;
    proto.has = has;
  }
}
