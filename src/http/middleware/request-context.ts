import type { MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import type { Logger } from '../../log.ts';
import type { AppEnv } from '../env.ts';
import type { Metrics } from '../metrics.ts';

const REQUEST_ID = /^[A-Za-z0-9\-._]{1,128}$/;

/** The request's id: a well-formed incoming `X-Request-Id`, else a new UUID. */
export function requestIdOf(incoming: string | null | undefined): string {
  return incoming && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
}

/**
 * Puts `X-Request-Id` on a finished response. Set on the response's own headers: c.header() after the
 * handler copies the whole Response, which cost about a quarter of a FHIR read's throughput.
 * Immutable headers (a proxied fetch response) get a copy.
 */
export function withRequestId(res: Response, requestId: string): Response {
  try {
    res.headers.set('X-Request-Id', requestId);
    return res;
  } catch {
    const copy = new Response(res.body, res);
    copy.headers.set('X-Request-Id', requestId);
    return copy;
  }
}

/** What every answered request leaves behind: its latency in the metrics, and a debug log line. */
export interface RequestRecorder {
  record(method: string, path: string, route: string, status: number, requestId: string, started: number): void;
}

export function requestRecorder(log: Logger, metrics: Metrics): RequestRecorder {
  const debug = log.enabled('debug');
  return {
    record(method, path, route, status, requestId, started) {
      const seconds = (performance.now() - started) / 1000;
      metrics.observeRequest(method, route, status, seconds);
      if (debug) log.debug('request', { requestId, method, path, status, ms: Math.round(seconds * 1000) });
    },
  };
}

/** Request id (`X-Request-Id`, echoed or generated), an access log line at debug level, and metrics. */
export function requestContext(recorder: RequestRecorder): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    const requestId = requestIdOf(c.req.header('x-request-id'));
    c.set('requestId', requestId);
    await next();
    const tagged = withRequestId(c.res, requestId);
    if (tagged !== c.res) c.res = tagged; // assigning c.res copies the Response: only for a copy already made

    // When only this middleware's own '*' matched, no route answered: one label for all such paths.
    const answered = routePath(c);
    recorder.record(c.req.method, c.req.path, answered === '/*' ? 'unmatched' : answered, c.res.status, requestId, started);
  };
}
