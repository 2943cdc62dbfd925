import type { Context, Hono } from 'hono';
import type { AppEnv } from './env.ts';
import { FhirError } from '../errors.ts';
import { hasEndpoint, ID_PATTERN, isResourceType } from '../fhir/resource-types.ts';

/**
 * `OPTIONS` that is no CORS preflight (src/http/cors.ts answers those) below a tenant's FHIR base. R4 defines no
 * OPTIONS interaction (http.html lists none; `capabilities` is `GET [base]/metadata`), so the answer is HTTP's
 * (RFC 9110 9.3.7): 204 with `Allow` naming the methods the path's routes take, as the router holds them, so the
 * answer cannot drift from the routes; a path no route takes (an unknown type or operation) stays a 404.
 */

/** The methods probed; HEAD is allowed with GET, OPTIONS everywhere. */
const PROBED = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/** Handlers that refuse a method on a known path (a 405 with its own `Allow`): a route, but not one that serves. */
const refusals = new WeakSet<object>();

/** Marks `handler` as a refusal of its method (a 405), so that OPTIONS does not list that method. */
export function refusal<H extends object>(handler: H): H {
  refusals.add(handler);
  return handler;
}

/** GET handlers that refuse HEAD (an export's kick-off, which a GET starts): OPTIONS lists GET there without HEAD. */
const headless = new WeakSet<object>();

/** Marks the GET handler `handler` as one that refuses HEAD. */
export function refusesHead<H extends object>(handler: H): H {
  headless.add(handler);
  return handler;
}

type Route = { method: string; path: string; handler: unknown };

/** The values of a route pattern's `:name` segments in `segments` (the path's), or null when the pattern has other shapes. */
function paramsOf(pattern: string, segments: string[]): Map<string, string> | null {
  const parts = pattern.split('/').slice(1);
  if (parts.length !== segments.length) return null;
  const params = new Map<string, string>();
  parts.forEach((part, i) => {
    if (part.startsWith(':')) params.set(part.slice(1).split('{', 1)[0]!, segments[i]!);
  });
  return params;
}

/**
 * Whether `route` serves `segments` as a request would be served: its `:type` a REST type, its `:id` an id, and an `$operation` in one
 * of its parameters only for GET (operations by GET are dispatched by the read and compartment routes) of an operation
 * some route names literally (`POST Patient/$everything` beside `GET Patient/$everything`).
 */
function serves(route: Route, segments: string[], literalOps: boolean): boolean {
  const params = paramsOf(route.path, segments);
  if (params === null) return true;
  const type = params.get('type');
  if (type !== undefined && !(isResourceType(type) && hasEndpoint(type))) return false;
  const operation = [...params.values()].some((v) => v.startsWith('$'));
  // `Patient/_search` is no instance: an id is of R4's id characters.
  const id = params.get('id');
  if (id !== undefined && !id.startsWith('$') && !ID_PATTERN.test(id)) return false;
  return !operation || (route.method === 'GET' && literalOps);
}

/** The methods `app`'s routes take at `path` (below the FHIR base), HEAD and OPTIONS among them; empty when none does. */
export function allowedMethods(app: Hono<AppEnv>, path: string): string[] {
  const segments = path.split('/').slice(1);
  const matched = new Map<string, Route[]>();
  for (const method of PROBED) {
    const routes = app.router.match(method, path)[0].map(([[, route]]) => route as Route).filter((r) => r.method === method);
    matched.set(method, routes);
  }
  // An operation segment some route (a refusal too) names literally is a known operation.
  const literal = (r: Route) => {
    const params = paramsOf(r.path, segments);
    return params !== null && ![...params.values()].some((v) => v.startsWith('$'));
  };
  const literalOps = segments.some((s) => s.startsWith('$')) && [...matched.values()].flat().some(literal);
  // As Hono runs them: the first route (in the order registered) that takes the request decides, serving it or refusing it.
  const first = (m: string) => matched.get(m)!.find((r) => serves(r, segments, literalOps));
  const taken = (r: Route | undefined): r is Route => r !== undefined && !refusals.has(r.handler as object);
  const allowed = PROBED.filter((m) => taken(first(m)));
  if (allowed.length === 0) return [];
  const get = first('GET');
  const head = taken(get) && !headless.has(get.handler as object);
  return [...allowed.flatMap((m) => (m === 'GET' && head ? ['GET', 'HEAD'] : [m])), 'OPTIONS'];
}

/** The OPTIONS route of the FHIR sub-app `app` (behind its gate): 204 with `Allow`, or the 404 of an unknown path. */
export function optionsRoute(app: Hono<AppEnv>) {
  return (c: Context<AppEnv>): Response => {
    const rest = c.req.path.slice(`/tenants/${c.req.param('tenant')}/fhir/R4`.length).replace(/\/+$/, '') || '/';
    const allow = allowedMethods(app, rest);
    if (allow.length === 0) throw new FhirError('not-found', `No route for OPTIONS ${c.req.path}`);
    return new Response(null, { status: 204, headers: { Allow: allow.join(', ') } });
  };
}
