import { StoreTimeoutError, StoreUnavailableError, StoreValueError, UNHOLDABLE_NUL } from './types.ts';

/** How an adapter recognises its driver's "database unavailable" errors, and what it does on one. */
export interface OutageGuard {
  /** Throws StoreUnavailableError at once while the adapter already knows the database is down. */
  before(): void;
  /** StoreUnavailableError (with the driver's error as `cause`) for an outage error; any other error as it is. */
  translate(err: unknown): unknown;
}

/**
 * Wraps every method of a repository, and of the plain objects it nests (`resources.indexing`), so that
 * outage errors leave the store as StoreUnavailableError, whether the method throws or rejects. Other
 * errors, and every result, pass through untouched.
 */
export function guarded<T extends object>(repo: T, guard: OutageGuard): T {
  const out = {} as Record<string, unknown>;
  const rethrow = (err: unknown) => {
    throw guard.translate(err);
  };
  for (const [key, value] of Object.entries(repo)) {
    if (typeof value !== 'function') {
      out[key] = isPlainObject(value) ? guarded(value, guard) : value;
      continue;
    }
    // An async method's outage is a rejection, as its other failures are: a caller chaining `.catch()` on
    // it (delivery.ts releasing a lease) must not see a synchronous throw instead.
    const isAsync = value.constructor?.name === 'AsyncFunction';
    out[key] = (...args: unknown[]) => {
      try {
        guard.before();
      } catch (err) {
        if (isAsync) return Promise.reject(err);
        throw err;
      }
      try {
        const result = value.apply(repo, args);
        return result instanceof Promise ? result.catch(rethrow) : result;
      } catch (err) {
        throw guard.translate(err);
      }
    };
  }
  return out as T;
}

/**
 * `stream` with its failures translated as a guarded call's are (an outage opens the circuit and leaves as
 * StoreUnavailableError): a stream a repository returns reads the database after the call has returned (an export file's
 * chunks, pulled as its download is sent), where guarded() no longer sees it.
 */
export function guardedStream<T>(stream: ReadableStream<T>, guard: OutageGuard): ReadableStream<T> {
  const reader = stream.getReader();
  return new ReadableStream<T>(
    {
      async pull(controller) {
        let next: Awaited<ReturnType<typeof reader.read>>;
        try {
          next = await reader.read();
        } catch (err) {
          throw guard.translate(err);
        }
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

function isPlainObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}

/** A guard that only translates (SQLite: every call finds out for itself, there is no connection to lose). */
export function translatingGuard(isOutage: (err: unknown) => boolean, describe: (err: unknown) => string): OutageGuard {
  return {
    before() {},
    translate: (err) => (isOutage(err) ? new StoreUnavailableError(describe(err), { cause: err }) : err),
  };
}

export interface CircuitOptions {
  isOutage: (err: unknown) => boolean;
  /** A statement the database cancelled (StoreTimeoutError): the database is up, so the circuit stays closed. */
  isTimeout?: (err: unknown) => boolean;
  /** A value the database cannot hold (StoreValueError): the request's fault, so the circuit stays closed. */
  isUnholdable?: (err: unknown) => boolean;
  /** Resolves when the database answers again; rejects while it does not. */
  probe: () => Promise<void>;
  /** Pause between probes while the circuit is open. */
  probeIntervalMs: number;
  onChange?: (down: boolean, cause?: unknown) => void;
}

/**
 * A circuit breaker for a networked database (PostgreSQL). The first outage error opens it: every call
 * then fails at once with StoreUnavailableError instead of queueing behind the driver's reconnection
 * back-off, and a probe runs every `probeIntervalMs` until the database answers, which closes it.
 */
export function circuitGuard(o: CircuitOptions): OutageGuard & { readonly down: boolean; close(): void } {
  let down = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;
  const schedule = () => {
    if (closed) return;
    timer = setTimeout(() => {
      o.probe().then(
        () => {
          down = false;
          o.onChange?.(false);
        },
        schedule,
      );
    }, o.probeIntervalMs);
  };
  const open = (cause: unknown) => {
    if (down) return;
    down = true;
    o.onChange?.(true, cause);
    schedule();
  };
  return {
    get down() {
      return down;
    },
    before() {
      if (down) throw new StoreUnavailableError('the database is unreachable; retrying in the background');
    },
    translate(err) {
      if (o.isTimeout?.(err)) return new StoreTimeoutError(`the database cancelled the statement: ${(err as Error).message}`, { cause: err });
      if (o.isUnholdable?.(err)) return new StoreValueError(UNHOLDABLE_NUL, { cause: err });
      if (!o.isOutage(err)) return err;
      open(err);
      return new StoreUnavailableError(`the database is unreachable: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    },
    close() {
      closed = true;
      clearTimeout(timer);
    },
  };
}
