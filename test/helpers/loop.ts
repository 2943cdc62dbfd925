/**
 * What `work` answers, how long it took, and how long before its answer the event loop last turned (a chain
 * of setImmediate callbacks, one per turn), in ms: work that holds the loop to its end has a tail of most of
 * its time, work that lets it turn every few ms one of a few ms. Tests compare the tail with the time taken
 * (a share, with a wide margin), never with an absolute time.
 */
export async function tailHold<T>(work: () => T | Promise<T>): Promise<{ result: T; took: number; tail: number }> {
  const started = performance.now();
  let last = started;
  let running = true;
  const beat = () => {
    last = performance.now();
    if (running) setImmediate(beat);
  };
  setImmediate(beat);
  try {
    const result = await work();
    const now = performance.now();
    return { result, took: now - started, tail: now - last };
  } finally {
    running = false;
  }
}
