/** A closed-loop HTTP load generator: `connections` concurrent loops, each sending its next request when the last one answers. */

export interface LoadResult {
  requests: number;
  errors: number;
  seconds: number;
  perSecond: number;
  p50ms: number;
  p99ms: number;
  /** Status codes other than the expected one, with counts. */
  unexpected: Record<string, number>;
}

export interface LoadOptions {
  connections: number;
  seconds: number;
  /** Builds request number `i`. */
  request: (i: number) => Request;
  expectStatus?: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

/** Runs the load for `seconds` and reports throughput and latency percentiles. */
export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const expected = o.expectStatus ?? 200;
  const latencies: number[] = [];
  const unexpected: Record<string, number> = {};
  let next = 0;
  let errors = 0;
  const started = performance.now();
  const deadline = started + o.seconds * 1000;
  async function loop() {
    while (performance.now() < deadline) {
      const req = o.request(next++);
      const t0 = performance.now();
      try {
        const res = await fetch(req);
        await res.arrayBuffer();
        latencies.push(performance.now() - t0);
        if (res.status !== expected) {
          errors++;
          unexpected[res.status] = (unexpected[res.status] ?? 0) + 1;
        }
      } catch (err) {
        errors++;
        const key = err instanceof Error ? err.name : 'error';
        unexpected[key] = (unexpected[key] ?? 0) + 1;
      }
    }
  }
  await Promise.all(Array.from({ length: o.connections }, loop));
  const seconds = (performance.now() - started) / 1000;
  const sorted = Float64Array.from(latencies).sort();
  return {
    requests: latencies.length, errors, seconds, perSecond: latencies.length / seconds,
    p50ms: percentile(sorted, 50), p99ms: percentile(sorted, 99), unexpected,
  };
}
