/**
 * How long synchronous domain work (reading an XML body, validating a Bundle's entries) runs before it lets
 * the event loop turn, in ms: as a SQLite write transaction's slices (`WRITE_SLICE_MS`, src/store/sqlite/pacer.ts).
 */
export const WORK_SLICE_MS = 10;

/** A later turn of the event loop: setImmediate runs after pending I/O, so requests that arrived meanwhile are served. */
export const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * A pace for a loop of synchronous steps: `pace()` is undefined while the slice is within `budgetMs` (the loop
 * goes on without awaiting anything), else the promise of a later turn (`turn`), after which a new slice starts.
 * An `await` of a promise that is already settled lets no other request run (it is a microtask): a loop of
 * awaits over work that never waits for I/O held the process as a synchronous one does.
 */
export function pacedTurns(budgetMs = WORK_SLICE_MS, turn: () => Promise<void> = nextTurn): () => Promise<void> | undefined {
  let since = performance.now();
  return () => {
    if (performance.now() - since < budgetMs) return undefined;
    return turn().then(() => {
      since = performance.now();
    });
  };
}

/**
 * Runs `steps` (a generator that yields between the synchronous pieces of one piece of work) to its end,
 * letting the event loop turn at a yield as `pace` says (pacedTurns): its value at once when every piece ran
 * within the slice, else the promise of it, so that a small piece of work costs no promise.
 */
export function drivePaced<T>(steps: Generator<void, T>, pace: () => Promise<void> | undefined): T | Promise<T> {
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    const turn = pace();
    if (turn !== undefined) return driveOn(steps, pace, turn);
  }
}

async function driveOn<T>(steps: Generator<void, T>, pace: () => Promise<void> | undefined, turn: Promise<void>): Promise<T> {
  await turn;
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    const later = pace();
    if (later !== undefined) await later;
  }
}
