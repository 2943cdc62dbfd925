import { Hono } from 'hono';
import type { ExportSink } from '../export/sink.ts';
import type { Store } from '../store/types.ts';
import type { Metrics } from './metrics.ts';

/** `/healthz` (process up), `/readyz` (database and export storage reachable), `/metrics` (Prometheus text). */
export function opsRoutes(store: Store, exportSink: ExportSink, metrics: Metrics, isDraining: () => boolean): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    if (isDraining()) return c.json({ status: 'draining' }, 503);
    try {
      await store.ping();
    } catch {
      return c.json({ status: 'unavailable', database: store.kind, unavailable: 'database' }, 503);
    }
    try {
      await exportSink.check();
    } catch {
      return c.json({ status: 'unavailable', database: store.kind, exportStorage: exportSink.kind, unavailable: 'export storage' }, 503);
    }
    return c.json({ status: 'ok', database: store.kind, exportStorage: exportSink.kind });
  });
  app.get('/metrics', async (c) => c.body(await metrics.render(), 200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }));
  return app;
}
