import type { SyncOrAsync } from '../sync-or-async.ts';
import { InvalidTokenError, type VerifiedToken } from './tokens.ts';

/** RFC 6750 2.1: `Authorization: Bearer <b64token>`. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)\s*$/i;

/** Why a bearer token was refused (RFC 6750 3.1); no `error` when the request carried no token at all. */
export interface BearerRefusal {
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope';
  message: string;
  cause?: unknown;
}

/** The `WWW-Authenticate` header of a refusal (RFC 6750 3). */
export function bearerChallenge({ error, message }: BearerRefusal): Record<string, string> {
  return { 'WWW-Authenticate': error ? `Bearer realm="cinder", error="${error}", error_description="${message}"` : 'Bearer realm="cinder"' };
}

/**
 * Verifies the bearer token of an `Authorization` header (RFC 6750 2.1, 3.1), for the FHIR API and
 * userinfo alike. A missing or malformed header, or a token `verify` refuses, is thrown as the error
 * `refuse` makes of it (the caller's protocol: OperationOutcome or OAuth error). The token is returned
 * at once when `verify` answers at once (a token verified before), else as a promise.
 */
export function verifyBearer(
  header: string | null | undefined,
  verify: (token: string) => SyncOrAsync<VerifiedToken>,
  refuse: (r: BearerRefusal) => Error,
): SyncOrAsync<VerifiedToken> {
  if (!header) throw refuse({ message: 'An access token is required' });
  const m = BEARER.exec(header);
  if (!m) throw refuse({ error: 'invalid_request', message: 'The Authorization header must be "Bearer <token>"' });
  const translate = (err: unknown): never => {
    if (err instanceof InvalidTokenError) throw refuse({ error: 'invalid_token', message: err.message, cause: err });
    throw err;
  };
  let verified: SyncOrAsync<VerifiedToken>;
  try {
    verified = verify(m[1]!);
  } catch (err) {
    return translate(err);
  }
  return verified instanceof Promise ? verified.catch(translate) : verified;
}
