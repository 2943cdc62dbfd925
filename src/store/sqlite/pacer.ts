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
 * of one transaction run with Promise.all) share that turn and then go on one at a time while the new
 * slice lasts; those left wait for the next turn (the first caller of a turn always goes on, so a budget of 0
 * yields at every call and still progresses).
 */
export interface Pacer {
  /** True once the current slice has spent its budget. */
  due(): boolean;
  /** Undefined within budget; else the turn to await before writing on (see Pacer). */
  pace(): Promise<void> | undefined;
}

export function createPacer(budgetMs: number): Pacer {
  let since = performance.now();
  let turn: Promise<void> | undefined;
  // Turns taken, and the last one a waiter went on in: the first waiter of a turn goes on whatever the budget.
  let turns = 0;
  let claimed = 0;
  const due = () => performance.now() - since >= budgetMs;
  // Wakes the event loop 1 ms after a turn is asked for, unless the turn's waiter ran first: in some states
  // (a store test with no other work pending) Bun ran the immediate but not the promise reactions it queued
  // until something else woke its loop, which nothing did. setTimeout alone would cost 1.2 ms a turn.
  let wake: ReturnType<typeof setTimeout> | undefined;
  const nextTurn = () =>
    (turn ??= new Promise<void>((resolve) => {
      wake ??= setTimeout(() => (wake = undefined), 1);
      setImmediate(() => {
        turn = undefined;
        turns++;
        since = performance.now();
        resolve();
      });
    }));
  async function wait(): Promise<void> {
    for (;;) {
      await nextTurn();
      clearTimeout(wake);
      wake = undefined;
      if (claimed !== turns) return void (claimed = turns);
      if (!due()) return;
    }
  }
  return { due, pace: () => (due() ? wait() : undefined) };
}

/** A pacer that never yields: a connection that reads share with the writer must not be read mid-transaction. */
export const UNPACED: Pacer = { due: () => false, pace: () => undefined };
