/** A small Prometheus text-format registry: counters and histograms with labels. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

function labelText(labels: Record<string, string>): string {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
}

interface Histogram {
  labels: Record<string, string>;
  counts: number[];
  sum: number;
  count: number;
}

export interface Metrics {
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  /** Registers a gauge read at scrape time (e.g. pool sizes, job counts). */
  gauge(name: string, help: string, read: () => Promise<Record<string, number>> | Record<string, number>): void;
  /** Registers a counter read at scrape time: a value that only grows while the process runs (its name ends in `_total`). */
  counter(name: string, help: string, read: () => Record<string, number>): void;
  render(): Promise<string>;
}

export function createMetrics(): Metrics {
  /** By route, status and method: route labels are the same strings on every request, so no key is built. */
  const requests = new Map<string, Map<number, Map<string, Histogram>>>();
  const gauges: { name: string; help: string; type: 'gauge' | 'counter'; read: () => Promise<Record<string, number>> | Record<string, number> }[] = [];
  function* histograms(): Generator<Histogram> {
    for (const byStatus of requests.values()) for (const byMethod of byStatus.values()) yield* byMethod.values();
  }
  return {
    observeRequest(method, route, status, seconds) {
      let byStatus = requests.get(route);
      if (!byStatus) requests.set(route, (byStatus = new Map()));
      let byMethod = byStatus.get(status);
      if (!byMethod) byStatus.set(status, (byMethod = new Map()));
      let h = byMethod.get(method);
      if (!h) {
        h = { labels: { method, route, status: String(status) }, counts: BUCKETS.map(() => 0), sum: 0, count: 0 };
        byMethod.set(method, h);
      }
      // One bucket per observation; render() accumulates them into Prometheus' cumulative `le` buckets.
      let i = 0;
      while (i < BUCKETS.length && seconds > BUCKETS[i]!) i++;
      if (i < BUCKETS.length) h.counts[i]!++;
      h.sum += seconds;
      h.count++;
    },
    gauge(name, help, read) {
      gauges.push({ name, help, type: 'gauge', read });
    },
    counter(name, help, read) {
      gauges.push({ name, help, type: 'counter', read });
    },
    async render() {
      const lines = [
        '# HELP cinder_http_requests_total HTTP requests by method, route and status.',
        '# TYPE cinder_http_requests_total counter',
      ];
      for (const h of histograms()) lines.push(`cinder_http_requests_total${labelText(h.labels)} ${h.count}`);
      lines.push('# HELP cinder_http_request_duration_seconds HTTP request latency.', '# TYPE cinder_http_request_duration_seconds histogram');
      for (const h of histograms()) {
        let cumulative = 0;
        BUCKETS.forEach((b, i) => {
          cumulative += h.counts[i]!;
          lines.push(`cinder_http_request_duration_seconds_bucket${labelText({ ...h.labels, le: String(b) })} ${cumulative}`);
        });
        lines.push(`cinder_http_request_duration_seconds_bucket${labelText({ ...h.labels, le: '+Inf' })} ${h.count}`);
        lines.push(`cinder_http_request_duration_seconds_sum${labelText(h.labels)} ${h.sum}`);
        lines.push(`cinder_http_request_duration_seconds_count${labelText(h.labels)} ${h.count}`);
      }
      for (const g of gauges) {
        lines.push(`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} ${g.type}`);
        for (const [label, value] of Object.entries(await g.read())) {
          lines.push(`${g.name}${label ? labelText(Object.fromEntries(label.split(',').map((kv) => kv.split('=') as [string, string]))) : ''} ${value}`);
        }
      }
      const mem = process.memoryUsage();
      lines.push('# HELP process_resident_memory_bytes Resident memory size in bytes.', '# TYPE process_resident_memory_bytes gauge');
      lines.push(`process_resident_memory_bytes ${mem.rss}`);
      return lines.join('\n') + '\n';
    },
  };
}
