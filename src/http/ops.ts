import { Hono } from 'hono';
import type { ExportSink } from '../export/sink.ts';
import type { Rebuilding } from '../fhir/reindex.ts';
import type { Store } from '../store/types.ts';
import type { Metrics } from './metrics.ts';

/**
 * `/healthz` (process up), `/readyz` (database and export storage reachable; while the search index is
 * rebuilt beside the server, `searchIndex` says so and how far it got: the server answers meanwhile),
 * `/metrics` (Prometheus text).
 */
export function opsRoutes(
  store: Store, exportSink: ExportSink, metrics: Metrics, isDraining: () => boolean, rebuilding: () => Rebuilding | undefined = () => undefined,
): Hono {
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
    const r = rebuilding();
    const searchIndex = r ? { searchIndex: { status: 'rebuilding', examined: r.examined } } : {};
    return c.json({ status: 'ok', database: store.kind, exportStorage: exportSink.kind, ...searchIndex });
  });
  app.get('/metrics', async (c) => c.body(await metrics.render(), 200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }));
  return app;
}
