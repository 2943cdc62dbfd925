import { accessFromScopes, splitScopes } from '../../auth/scopes.ts';
import { InvalidTokenError, type TokenVerifier, type VerifiedToken } from '../../auth/tokens.ts';
import type { Access } from '../../fhir/access.ts';
import { FhirError } from '../../errors.ts';

function unauthorized(message: string, error?: string): FhirError {
  const challenge = error ? `Bearer realm="cinder", error="${error}", error_description="${message}"` : 'Bearer realm="cinder"';
  return new FhirError('unauthorized', message, { headers: { 'WWW-Authenticate': challenge } });
}

/** A verified bearer token and what its scopes allow. */
export interface Bearer {
  token: VerifiedToken;
  access: Access;
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)\s*$/i;

/**
 * Bearer-token authentication for a tenant's FHIR routes (RFC 6750): verifies the JWT locally,
 * refuses a token of another tenant with 403, and answers the token with its SMART-scope access.
 * The verifier returns the same object for a cached token, so parsed scopes are kept beside it.
 */
export function bearerAuthenticator(verify: TokenVerifier): (header: string | null, tenant: string) => Promise<Bearer> {
  const accessOf = new WeakMap<VerifiedToken, Access>();
  return async (header, tenant) => {
    if (!header) throw unauthorized('An access token is required');
    const m = BEARER.exec(header);
    if (!m) throw unauthorized('The Authorization header must be "Bearer <token>"', 'invalid_request');
    let token;
    try {
      token = await verify(m[1]!);
    } catch (err) {
      if (err instanceof InvalidTokenError) throw unauthorized(err.message, 'invalid_token');
      throw err;
    }
    if (token.tenant !== tenant) throw new FhirError('forbidden', 'The access token is not valid for this tenant');
    let access = accessOf.get(token);
    if (!access) {
      access = accessFromScopes(splitScopes(token.scope), token.client_id, token.patient);
      accessOf.set(token, access);
    }
    return { token, access };
  };
}
