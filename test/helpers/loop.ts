/**
 * What `work` answers, how long it took, how long before its answer the event loop last turned (a chain
 * of setImmediate callbacks, one per turn), and the longest it went without turning (`longest`, the tail
 * included), in ms: work that holds the loop to its end has a tail of most of its time, work that holds it
 * somewhere in the middle a longest hold of most of its time, work that lets it turn every few ms both of a
 * few ms. Tests compare them with the time taken (a share, with a wide margin), never with an absolute time.
 * `held` sums the holds of HELD_MS or more: the work's synchronous time, without the time it waited for I/O (a
 * database's answers), during which the loop turns every few µs; a share of it tells one hold from many where
 * waits would make `took` say little.
 */
/** The shortest gap between two turns counted in `held`, in ms. */
const HELD_MS = 1;

export async function tailHold<T>(work: () => T | Promise<T>): Promise<{ result: T; took: number; tail: number; longest: number; held: number }> {
  const started = performance.now();
  let last = started;
  let longest = 0;
  let held = 0;
  let running = true;
  const beat = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    if (now - last >= HELD_MS) held += now - last;
    last = now;
    if (running) setImmediate(beat);
  };
  setImmediate(beat);
  try {
    const result = await work();
    const now = performance.now();
    if (now - last >= HELD_MS) held += now - last;
    return { result, took: now - started, tail: now - last, longest: Math.max(longest, now - last), held };
  } finally {
    running = false;
  }
}
