import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import type { Logger } from '../../log.ts';
import type { AppEnv } from '../env.ts';
import type { Metrics } from '../metrics.ts';

const REQUEST_ID = /^[A-Za-z0-9\-._]{1,128}$/;

/** Request id (`X-Request-Id`, echoed or generated), an access log line at debug level, and metrics. */
export function requestContext(log: Logger, metrics: Metrics): MiddlewareHandler<AppEnv> {
  const debug = log.enabled('debug');
  return async (c, next) => {
    const started = performance.now();
    const incoming = c.req.header('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    c.set('requestId', requestId);
    await next();
    // Set on the finished response's own headers: c.header() after the handler copies the whole
    // Response, which cost about a quarter of a FHIR read's throughput. Immutable headers (a proxied
    // fetch response) still take the copying path.
    try {
      c.res.headers.set('X-Request-Id', requestId);
    } catch {
      c.header('X-Request-Id', requestId);
    }
    const seconds = (performance.now() - started) / 1000;
    // When only this middleware's own '*' matched, no route answered: one label for all such paths.
    const answered = routePath(c);
    const route = answered === '/*' ? 'unmatched' : answered;
    metrics.observeRequest(c.req.method, route, c.res.status, seconds);
    if (debug) log.debug('request', { requestId, method: c.req.method, path: c.req.path, status: c.res.status, ms: Math.round(seconds * 1000) });
  };
}
