import { bearerChallenge } from '../auth/bearer.ts';
import { FhirError, OAuthError, storeFailure, storeFailureAsFhir } from '../errors.ts';
import { StoreTimeoutError, StoreUnavailableError, StoreValueError } from '../store/types.ts';
import type { Logger } from '../log.ts';
import { operationOutcome, issue } from '../fhir/outcome.ts';
import { FHIR_JSON } from './fhir-response.ts';

/** True for paths answered with OperationOutcome bodies (the FHIR API). */
function isFhirPath(path: string): boolean {
  return /^\/tenants\/[^/]+\/fhir\//.test(path);
}

/** What the error handler needs to know about the failed request. */
export interface FailedRequest {
  method: string;
  path: string;
  requestId: string | undefined;
}

/**
 * A store failure in its protocol's shape (storeFailure): an OperationOutcome on the FHIR API,
 * `temporarily_unavailable` elsewhere (the token endpoint among them); 503 both. A value the
 * database cannot hold (StoreValueError) is the request's fault: 400, `invalid_request` outside FHIR.
 */
function failed(err: unknown, path: string): FhirError | OAuthError | undefined {
  if (isFhirPath(path)) return storeFailureAsFhir(err);
  if (err instanceof StoreValueError) return new OAuthError('invalid_request', err.message, 400, {}, { cause: err });
  const f = storeFailure(err);
  return f && new OAuthError('temporarily_unavailable', f.text, 503, f.headers, { cause: err });
}

/**
 * The one error handler: domain errors render in their protocol's shape; anything
 * else is a generic 500 whose detail goes only to the log.
 */
export function renderError(err: unknown, req: FailedRequest, log: Logger): Response {
  if (err instanceof StoreUnavailableError) {
    log.debug('database unavailable', { requestId: req.requestId, path: req.path, method: req.method, reason: err.message });
  } else if (err instanceof StoreTimeoutError) {
    log.warn('database statement cancelled', { requestId: req.requestId, path: req.path, method: req.method, reason: err.message });
  }
  err = failed(err, req.path) ?? err;
  if (err instanceof OAuthError) {
    return new Response(JSON.stringify(err.description ? { error: err.error, error_description: err.description } : { error: err.error }), {
      status: err.status,
      headers: { 'Content-Type': 'application/json;charset=UTF-8', 'Cache-Control': 'no-store', Pragma: 'no-cache', ...err.headers },
    });
  }
  if (err instanceof FhirError) {
    const headers: Record<string, string> = { 'Content-Type': FHIR_JSON, ...err.headers };
    // A FHIR request gets past the bearer check with a valid token only: its 403 is a token that lacks
    // the privileges (RFC 6750 3.1 `insufficient_scope`), challenged as its 401s are.
    if (err.status === 403 && isFhirPath(req.path) && !('WWW-Authenticate' in headers)) {
      Object.assign(headers, bearerChallenge({ error: 'insufficient_scope', message: err.message }));
    }
    return new Response(JSON.stringify(operationOutcome(err.issues)), { status: err.status, headers });
  }
  const { requestId, path, method } = req;
  log.error('unhandled error', { err, requestId, path, method });
  if (isFhirPath(path)) {
    const body = operationOutcome([issue('error', 'exception', `Internal server error (request id ${requestId ?? 'unknown'})`)]);
    return new Response(JSON.stringify(body), { status: 500, headers: { 'Content-Type': FHIR_JSON } });
  }
  return new Response(JSON.stringify({ error: 'server_error' }), {
    status: 500,
    headers: { 'Content-Type': 'application/json;charset=UTF-8' },
  });
}

/**
 * The answer to a request whose URL holds `%00`. No FHIR or OAuth value holds U+0000 (and PostgreSQL
 * could not even compare one), so such a request is a 400 before any route reads it, alike on both
 * databases: an OperationOutcome naming the query parameter on the FHIR API, `invalid_request` elsewhere.
 */
export function nulInUrl(method: string, url: URL, log: Logger, requestId: string): Response {
  const named = [...url.searchParams].find(([k, v]) => k.includes('\0') || v.includes('\0'))?.[0];
  const text = named === undefined ? 'The URL holds %00 (U+0000), which no value may hold' : `The parameter '${named}' holds U+0000, which no value may hold`;
  const err = isFhirPath(url.pathname)
    ? new FhirError('invalid', text, named === undefined ? {} : { expression: [named] })
    : new OAuthError('invalid_request', text);
  return renderError(err, { method, path: url.pathname, requestId }, log);
}
