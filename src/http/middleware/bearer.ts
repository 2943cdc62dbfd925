import type { Context } from 'hono';
import { accessFromScopes, splitScopes } from '../../auth/scopes.ts';
import { InvalidTokenError, type TokenVerifier, type VerifiedToken } from '../../auth/tokens.ts';
import type { Access } from '../../fhir/access.ts';
import { FhirError } from '../../errors.ts';
import type { AppEnv } from '../env.ts';

function unauthorized(message: string, error?: string): FhirError {
  const challenge = error ? `Bearer realm="cinder", error="${error}", error_description="${message}"` : 'Bearer realm="cinder"';
  return new FhirError('unauthorized', message, { headers: { 'WWW-Authenticate': challenge } });
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*)\s*$/i;

/**
 * Bearer-token authentication for a tenant's FHIR routes (RFC 6750): verifies the JWT locally,
 * refuses a token of another tenant with 403, and puts the token and its SMART-scope access on the
 * context. The verifier returns the same object for a cached token, so parsed scopes are kept beside it.
 */
export function bearerAuthenticator(verify: TokenVerifier): (c: Context<AppEnv>, tenant: string) => Promise<void> {
  const accessOf = new WeakMap<VerifiedToken, Access>();
  return async (c, tenant) => {
    const header = c.req.header('authorization');
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
    c.set('token', token);
    c.set('access', access);
  };
}
