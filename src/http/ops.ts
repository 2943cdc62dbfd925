import { Hono } from 'hono';
import type { Store } from '../store/types.ts';
import type { Metrics } from './metrics.ts';

/** `/healthz` (process up), `/readyz` (database reachable), `/metrics` (Prometheus text). */
export function opsRoutes(store: Store, metrics: Metrics, isDraining: () => boolean): Hono {
  const app = new Hono();
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  app.get('/readyz', async (c) => {
    if (isDraining()) return c.json({ status: 'draining' }, 503);
    try {
      await store.ping();
      return c.json({ status: 'ok', database: store.kind });
    } catch {
      return c.json({ status: 'unavailable', database: store.kind }, 503);
    }
  });
  app.get('/metrics', async (c) => c.body(await metrics.render(), 200, { 'Content-Type': 'text/plain; version=0.0.4; charset=utf-8' }));
  return app;
}
