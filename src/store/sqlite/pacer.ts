/**
 * How long a write transaction on SQLite runs synchronously before it lets the event loop turn, in ms.
 * bun:sqlite's statements block the thread, so a bulk transaction (an `$import` batch of 10,000 resources)
 * held every other request of the process for its whole length: 0.3-1.7 s. Cut into turns of this length,
 * reads on the reader connection, `/healthz` and everything else run in between, while other writes wait
 * behind the transaction in the writer's queue as before (docs/PERFORMANCE.md, forty-sixth session).
 */
export const WRITE_SLICE_MS = 10;

/**
 * Paces a synchronous writer: `pace()` is undefined while the current slice is within its budget, and
 * otherwise the promise of a later event-loop turn (a macrotask: setImmediate runs after pending I/O, so
 * requests that arrived meanwhile are served), after which a new slice starts. Concurrent callers (writes
 * of one transaction run with Promise.all: an `$import` batch's 10,000 updates) wait in line and are let on
 * one at a time, each only once the one before has done its work (the synchronous statements after its
 * `await`), and only while the slice lasts; the first of a turn always goes on, so a budget of 0 yields at
 * every call and still progresses. (Letting every waiter of a turn on at once let them all pass the budget
 * check before any had worked: 10,000 updates then ran in one slice of seconds.)
 */
export interface Pacer {
  /** True once the current slice has spent its budget. */
  due(): boolean;
  /** Undefined within budget; else the turn to await before writing on (see Pacer). */
  pace(): Promise<void> | undefined;
}

export function createPacer(budgetMs: number): Pacer {
  let since = performance.now();
  /** The waiters, in line from `head` (a shift() of a long array moves every element: 10,000 waiters made that quadratic). */
  let line: (() => void)[] = [];
  let head = 0;
  let turnAsked = false;
  /** A waiter was let on and the next is looked at after its work (next). */
  let working = false;
  /** A turn began and nobody went on in it yet. */
  let fresh = false;
  const due = () => performance.now() - since >= budgetMs;
  // Wakes the event loop 1 ms after a turn is asked for, unless the turn ran first: in some states (a store
  // test with no other work pending) Bun ran the immediate but not the promise reactions it queued until
  // something else woke its loop, which nothing did. setTimeout alone would cost 1.2 ms a turn.
  let wake: ReturnType<typeof setTimeout> | undefined;
  function askTurn(): void {
    if (turnAsked) return;
    turnAsked = true;
    wake ??= setTimeout(() => (wake = undefined), 1);
    setImmediate(() => {
      turnAsked = false;
      since = performance.now();
      fresh = true;
      next();
    });
  }
  /** Lets the first waiter on if the slice allows (or it is the turn's first), else asks for a turn. */
  function next(): void {
    working = false;
    if (head === line.length) {
      line = [];
      head = 0;
      return;
    }
    if (!fresh && due()) return askTurn();
    fresh = false;
    working = true;
    const go = line[head]!;
    line[head++] = undefined as unknown as () => void;
    go();
  }
  function wait(): Promise<void> {
    const turn = new Promise<void>((resolve) => line.push(resolve));
    // This reaction is registered before the caller's `await`, so the next waiter is looked at in a microtask
    // queued behind the caller's continuation: after its statements, with the slice's time they took.
    void turn.then(() => {
      clearTimeout(wake);
      wake = undefined;
      queueMicrotask(next);
    });
    if (!working) askTurn();
    return turn;
  }
  return { due, pace: () => (due() ? wait() : undefined) };
}

/** A pacer that never yields: a connection that reads share with the writer must not be read mid-transaction. */
export const UNPACED: Pacer = { due: () => false, pace: () => undefined };
