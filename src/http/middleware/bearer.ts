import { bearerChallenge, verifyBearer, type BearerRefusal } from '../../auth/bearer.ts';
import { accessFromScopes, splitScopes } from '../../auth/scopes.ts';
import type { TokenVerifier, VerifiedToken } from '../../auth/tokens.ts';
import type { Access } from '../../fhir/access.ts';
import { FhirError } from '../../errors.ts';

const unauthorized = (r: BearerRefusal) => new FhirError('unauthorized', r.message, { headers: bearerChallenge(r), cause: r.cause });

/** A verified bearer token and what its scopes allow. */
export interface Bearer {
  token: VerifiedToken;
  access: Access;
}

/**
 * Bearer-token authentication for a tenant's FHIR routes (RFC 6750): verifies the JWT locally,
 * refuses a token of another tenant with 403, and answers the token with its SMART-scope access.
 * The verifier returns the same object for a cached token, so parsed scopes are kept beside it.
 */
export function bearerAuthenticator(verify: TokenVerifier): BearerAuthenticator {
  const accessOf = new WeakMap<VerifiedToken, Access>();
  function bearer(token: VerifiedToken): Bearer {
    let access = accessOf.get(token);
    if (!access) {
      access = accessFromScopes(splitScopes(token.scope), token.client_id, token.patient);
      accessOf.set(token, access);
    }
    return { token, access };
  }
  async function authenticate(header: string | null, tenant: string): Promise<Bearer> {
    const token = await verifyBearer(header, verify, unauthorized);
    if (token.tenant !== tenant) throw new FhirError('forbidden', 'The access token is not valid for this tenant');
    return bearer(token);
  }
  /**
   * The steady state without waiting: a token of this tenant that verify.now() vouches for. Only the
   * plain `Bearer <token>` form is looked up (no syntax check needed: a cached token passed verifyBearer
   * before); any other spelling goes to the full check.
   */
  function now(header: string | null, tenant: string): Bearer | undefined {
    const token = header?.startsWith('Bearer ') ? verify.now(header.slice(7)) : undefined;
    return token === undefined || token.tenant !== tenant ? undefined : bearer(token);
  }
  return Object.assign(authenticate, { now });
}

/**
 * Authenticates the Authorization header for a tenant; `now` is the same check for the steady state
 * without waiting (undefined whenever the full check must run: then its errors are thrown).
 */
export interface BearerAuthenticator {
  (header: string | null, tenant: string): Promise<Bearer>;
  now(header: string | null, tenant: string): Bearer | undefined;
}
