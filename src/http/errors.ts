import { FhirError, OAuthError } from '../errors.ts';
import { StoreTimeoutError, StoreUnavailableError } from '../store/types.ts';
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

/** Seconds a client is asked to wait after a 503 for an unavailable database (probes run every 0.5 s). */
export const UNAVAILABLE_RETRY_AFTER = '2';

/**
 * A database outage in its protocol's shape: OperationOutcome `transient` on the FHIR API,
 * `temporarily_unavailable` elsewhere (the token endpoint among them); 503 with `Retry-After` both.
 */
function unavailable(err: StoreUnavailableError, path: string): FhirError | OAuthError {
  const headers = { 'Retry-After': UNAVAILABLE_RETRY_AFTER };
  const text = 'The database is temporarily unavailable; retry shortly';
  if (isFhirPath(path)) return new FhirError('unavailable', text, { headers, cause: err });
  return new OAuthError('temporarily_unavailable', text, 503, headers, { cause: err });
}

/**
 * A statement the database cancelled (its `statement_timeout`): OperationOutcome `timeout` (FHIR's
 * transient kind) on the FHIR API, `temporarily_unavailable` elsewhere; 503 both, without
 * `Retry-After`, the same request being likely to run as long again.
 */
function timedOut(err: StoreTimeoutError, path: string): FhirError | OAuthError {
  const text = 'The database cancelled the request\'s statement (its time limit was reached); narrow the search or retry later';
  if (isFhirPath(path)) return new FhirError('unavailable', text, { issueCode: 'timeout', cause: err });
  return new OAuthError('temporarily_unavailable', text, 503, {}, { cause: err });
}

/**
 * The one error handler: domain errors render in their protocol's shape; anything
 * else is a generic 500 whose detail goes only to the log.
 */
export function renderError(err: unknown, req: FailedRequest, log: Logger): Response {
  if (err instanceof StoreUnavailableError) {
    log.debug('database unavailable', { requestId: req.requestId, path: req.path, method: req.method, reason: err.message });
    err = unavailable(err, req.path);
  } else if (err instanceof StoreTimeoutError) {
    log.warn('database statement cancelled', { requestId: req.requestId, path: req.path, method: req.method, reason: err.message });
    err = timedOut(err, req.path);
  }
  if (err instanceof OAuthError) {
    return new Response(JSON.stringify(err.description ? { error: err.error, error_description: err.description } : { error: err.error }), {
      status: err.status,
      headers: { 'Content-Type': 'application/json;charset=UTF-8', 'Cache-Control': 'no-store', Pragma: 'no-cache', ...err.headers },
    });
  }
  if (err instanceof FhirError) {
    return new Response(JSON.stringify(operationOutcome(err.issues)), {
      status: err.status,
      headers: { 'Content-Type': FHIR_JSON, ...err.headers },
    });
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
