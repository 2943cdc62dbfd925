/**
 * A value now, or the promise of it when something must be read first. A rule that a hot path runs in
 * its steady state returns this instead of an async function plus a synchronous twin:
 * one body, and the warm answer is a plain value that the caller uses without awaiting, as Hono's
 * dispatch takes a Response or a Promise of one.
 */
export type SyncOrAsync<T> = T | Promise<T>;

/**
 * `f` applied to the value: at once when it is there, else when the promise resolves. A throw of `f`
 * on the synchronous path is thrown here; callers that need one channel for errors await the result.
 */
export function then<T, U>(value: SyncOrAsync<T>, f: (v: T) => SyncOrAsync<U>): SyncOrAsync<U> {
  return value instanceof Promise ? value.then(f) : f(value);
}

/** The values, at once when every one is there, else as one promise (as Promise.all). */
export function all<T>(values: readonly SyncOrAsync<T>[]): SyncOrAsync<T[]> {
  return values.some((v) => v instanceof Promise) ? Promise.all(values) : (values as T[]);
}
