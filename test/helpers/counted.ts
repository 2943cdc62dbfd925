/**
 * `value` and everything in it behind proxies that count the members read (`reads.n`): the work of a diff or a
 * validation, machine-independent, where the time it takes depends on the machine and what else runs on it.
 */
export function counted<T>(value: T, reads: { n: number }): T {
  if (value === null || typeof value !== 'object') return value;
  const inner: unknown = Array.isArray(value) ? value.map((v) => counted(v, reads)) : Object.fromEntries(Object.entries(value).map(([k, v]) => [k, counted(v, reads)]));
  return new Proxy(inner as object, {
    get(target, key, receiver) {
      reads.n++;
      return Reflect.get(target, key, receiver);
    },
    ownKeys(target) {
      reads.n++;
      return Reflect.ownKeys(target);
    },
  }) as T;
}
