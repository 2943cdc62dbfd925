import { OAuthError } from '../errors.ts';
import type { Client } from '../store/types.ts';
import type { AuthDeps } from './deps.ts';
import { matchesDigest } from './secrets.ts';

/** The token request as the endpoint received it. */
export interface TokenRequest {
  form: URLSearchParams;
  authorization: string | undefined;
}

export interface AuthenticatedClient {
  client: Client;
  /** How it authenticated: RFC 7591 `token_endpoint_auth_method` names. */
  method: 'client_secret_basic' | 'none';
}

/** Decodes HTTP Basic credentials; each part is form-url-decoded (RFC 6749 2.3.1, appendix B). */
export function parseBasic(header: string): { id: string; secret: string } {
  const raw = header.slice(6).trim();
  let decoded: string;
  try {
    decoded = Buffer.from(raw, 'base64').toString('utf8');
  } catch {
    throw new OAuthError('invalid_client', 'malformed Basic credentials', 401, { 'WWW-Authenticate': 'Basic realm="cinder"' });
  }
  const colon = decoded.indexOf(':');
  if (colon < 0 || !/^[A-Za-z0-9+/=]+$/.test(raw)) {
    throw new OAuthError('invalid_client', 'malformed Basic credentials', 401, { 'WWW-Authenticate': 'Basic realm="cinder"' });
  }
  const dec = (s: string) => {
    try {
      return decodeURIComponent(s.replace(/\+/g, ' '));
    } catch {
      return s;
    }
  };
  return { id: dec(decoded.slice(0, colon)), secret: dec(decoded.slice(colon + 1)) };
}

const BASIC_FAIL = { 'WWW-Authenticate': 'Basic realm="cinder"' };

/**
 * Authenticates the client of a token request (RFC 6749 2.3): HTTP Basic with its secret, or a public
 * client naming itself with `client_id`. A client that holds a secret must use it.
 */
export async function authenticateClient(deps: AuthDeps, req: TokenRequest): Promise<AuthenticatedClient> {
  const auth = req.authorization;
  const bodyId = req.form.get('client_id');
  if (auth !== undefined && /^basic /i.test(auth)) {
    const { id, secret } = parseBasic(auth);
    if (bodyId !== null && bodyId !== id) throw new OAuthError('invalid_request', 'client_id in the body differs from the authenticated client');
    const client = await deps.store.clients.get(id);
    if (!client || client.disabled || client.secretHash === null || !matchesDigest(secret, client.secretHash)) {
      throw new OAuthError('invalid_client', 'client authentication failed', 401, BASIC_FAIL);
    }
    return { client, method: 'client_secret_basic' };
  }
  if (bodyId === null) throw new OAuthError('invalid_client', 'no client authentication and no client_id', 401);
  const client = await deps.store.clients.get(bodyId);
  if (!client || client.disabled) throw new OAuthError('invalid_client', 'unknown client', 401);
  if (client.secretHash !== null || client.jwks !== null || client.jwksUrl !== null) {
    throw new OAuthError('invalid_client', 'this client must authenticate', 401);
  }
  return { client, method: 'none' };
}
