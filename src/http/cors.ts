/**
 * Cross-origin access for browser apps (the Fetch standard's CORS protocol), one rule for every path
 * it covers: the FHIR API of every tenant, the OAuth endpoints browser apps call, the discovery
 * documents and unknown paths (everything but NOT_COVERED). It wraps Hono's `fetch`, outside the
 * router and the error renderer, and the hot-route dispatcher decorates its own answers with it, so
 * every answer (a 401 from the FHIR gate, a 404, a 503) carries the same headers and a preflight
 * never needs a token.
 *
 * Credentials are never allowed (`Access-Control-Allow-Credentials` is not sent): the API takes bearer
 * tokens in `Authorization`, which a page must set itself, never cookies the browser would attach.
 */

import { pathOf } from './url-path.ts';

/** Methods a preflight may ask for. */
const ALLOW_METHODS = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

/**
 * Request headers a page may send (beyond the CORS-safelisted ones). `Range` and `If-Range` resume a bulk
 * export download (`Range` is safelisted only for a single range of the simple form, and not by every browser).
 */
const ALLOW_HEADERS = [
  'Authorization', 'Content-Type', 'Content-Encoding', 'Accept', 'Accept-Language', 'Prefer', 'If-Match', 'If-None-Match',
  'If-None-Exist', 'If-Modified-Since', 'X-Request-Id', 'X-Security-Context', 'Range', 'If-Range',
].join(', ');

/** Response headers a page may read (beyond the CORS-safelisted ones); `Content-Range` and `Accept-Ranges` of a download. */
const EXPOSE_HEADERS = [
  'Location', 'Content-Location', 'ETag', 'Last-Modified', 'X-Progress', 'Retry-After', 'X-Request-Id', 'WWW-Authenticate',
  'X-Security-Context', 'Allow', 'Accept-Patch', 'Content-Range', 'Accept-Ranges',
].join(', ');

/** How long a browser may cache a preflight's answer, in seconds. */
const MAX_AGE = '600';

/**
 * The paths CORS leaves out: the login page (a navigation, never a fetch), introspection (for resource
 * servers holding a client secret, not browser apps) and the ops endpoints (for the deployment's own
 * probes and scrapers, never for pages on other origins). Every other path is covered, unknown ones
 * included, so a browser app that calls a wrong address reads the 404 instead of a CORS failure.
 */
const NOT_COVERED = new Set(['/oauth2/authorize', '/oauth2/introspect', '/healthz', '/readyz', '/metrics']);

function covered(path: string): boolean {
  return !NOT_COVERED.has(path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path);
}

export interface Cors {
  /** Runs `next` for the request, answering preflights itself and adding the headers to what comes back. */
  handle(req: Request, next: () => Response | Promise<Response>): Response | Promise<Response>;
  /**
   * Adds the headers to the answer of a request on a covered path that is not a preflight: what
   * `handle` adds, for a caller that made the answer itself (the hot-route dispatcher, inside its own
   * async function, which saves wrapping every answer in another promise).
   */
  decorate(req: Request, res: Response): Response;
}

/**
 * The CORS rule of a `CINDER_CORS_ORIGINS` value: `*` answers every origin with `*`; a list answers the
 * origins it names (echoed, with `Vary: Origin`, so caches keep answers apart); `none` adds nothing.
 */
export function createCors(setting: string): Cors {
  if (setting === 'none') return { handle: (_req, next) => next(), decorate: (_req, res) => res };
  const any = setting === '*';
  const origins = new Set(any ? [] : setting.split(',').map((o) => o.trim().toLowerCase()));

  /** The `Access-Control-Allow-Origin` value for a request's Origin, or null when not allowed. */
  const allowed = (origin: string | null): string | null => {
    if (any) return '*';
    return origin !== null && origins.has(origin.toLowerCase()) ? origin : null;
  };

  const decorateWith = (res: Response, allow: string | null): Response => {
    let headers = res.headers;
    try {
      if (!any) headers.append('Vary', 'Origin');
    } catch {
      // A response with immutable headers (one passed through from fetch): copy it once.
      res = new Response(res.body, res);
      headers = res.headers;
      if (!any) headers.append('Vary', 'Origin');
    }
    if (allow !== null) {
      headers.set('Access-Control-Allow-Origin', allow);
      headers.set('Access-Control-Expose-Headers', EXPOSE_HEADERS);
    }
    return res;
  };

  const preflight = (allow: string | null): Response => {
    const headers = new Headers();
    if (!any) headers.set('Vary', 'Origin');
    if (allow !== null) {
      headers.set('Access-Control-Allow-Origin', allow);
      headers.set('Access-Control-Allow-Methods', ALLOW_METHODS);
      headers.set('Access-Control-Allow-Headers', ALLOW_HEADERS);
      headers.set('Access-Control-Max-Age', MAX_AGE);
    }
    // An origin not allowed gets an answer without the Allow headers: the browser refuses the request.
    return new Response(null, { status: 204, headers });
  };

  return {
    handle(req, next) {
      if (!covered(pathOf(req.url))) return next();
      const origin = req.headers.get('origin');
      if (req.method === 'OPTIONS' && origin !== null && req.headers.has('access-control-request-method')) {
        return preflight(allowed(origin));
      }
      // With `*` every answer carries it (the same for all, so caches may keep it); with a list, only
      // the named origins get it, and `Vary: Origin` marks every answer as origin-dependent.
      const allow = allowed(origin);
      const res = next();
      return res instanceof Promise ? res.then((r) => decorateWith(r, allow)) : decorateWith(res, allow);
    },
    // With `*` the request's Origin does not matter: not even read.
    decorate: (req, res) => decorateWith(res, any ? '*' : allowed(req.headers.get('origin'))),
  };
}
