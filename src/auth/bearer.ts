import type { SyncOrAsync } from '../sync-or-async.ts';
import { InvalidTokenError, MalformedTokenError, type VerifiedToken } from './tokens.ts';

/** RFC 6750 2.1: the scheme of `Authorization: Bearer <b64token>`, any case, then one or more spaces. */
const SCHEME = /^bearer +/i;

/**
 * The token of a `Bearer` header, or undefined when the header has another form. The token's own
 * characters are checked by the verifier when it first sees the token (MalformedTokenError), so a
 * token verified before costs no second scan here.
 */
function tokenOf(header: string): string | undefined {
  let start: number;
  if (header.startsWith('Bearer ')) start = 7;
  else {
    const m = SCHEME.exec(header);
    if (m === null) return undefined;
    start = m[0].length;
  }
  while (header.charCodeAt(start) === 32) start++;
  const token = header.slice(start).trimEnd();
  return token === '' ? undefined : token;
}

/** Why a bearer token was refused (RFC 6750 3.1); no `error` when the request carried no token at all. */
export interface BearerRefusal {
  error?: 'invalid_request' | 'invalid_token' | 'insufficient_scope';
  message: string;
  cause?: unknown;
}

/**
 * The `WWW-Authenticate` header of a refusal (RFC 6750 3). `error_description` holds only the characters 3 allows
 * (%x20-21 / %x23-5B / %x5D-7E): a quote of the message is sent as `'`, any other character outside them as a space,
 * so that the quoted string ends where it should and a client parsing the challenge reads it.
 */
export function bearerChallenge({ error, message }: BearerRefusal): Record<string, string> {
  const description = message.replaceAll('"', "'").replace(/[^\x20\x21\x23-\x5B\x5D-\x7E]/g, ' ');
  return { 'WWW-Authenticate': error ? `Bearer realm="cinder", error="${error}", error_description="${description}"` : 'Bearer realm="cinder"' };
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
  const malformed = () => refuse({ error: 'invalid_request', message: 'The Authorization header must be "Bearer <token>"' });
  const token = tokenOf(header);
  if (token === undefined) throw malformed();
  const translate = (err: unknown): never => {
    if (err instanceof MalformedTokenError) throw malformed();
    if (err instanceof InvalidTokenError) throw refuse({ error: 'invalid_token', message: err.message, cause: err });
    throw err;
  };
  let verified: SyncOrAsync<VerifiedToken>;
  try {
    verified = verify(token);
  } catch (err) {
    return translate(err);
  }
  return verified instanceof Promise ? verified.catch(translate) : verified;
}
