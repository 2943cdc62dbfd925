import { OAuthError } from '../errors.ts';
import type { Client } from '../store/types.ts';
import type { ClientLookup } from './client-cache.ts';
import { matchesDigest } from './secrets.ts';

/**
 * The challenge sent with a failed Basic authentication. Every token error is HTTP 400 (README, HTTP
 * interface), `invalid_client` included, where RFC 6749 5.2 would allow 401: the status stays 400
 * and the header tells the client which scheme to use.
 */
export const BASIC_CHALLENGE = { 'WWW-Authenticate': 'Basic realm="cinder", charset="UTF-8"' };

function basicFailure(description: string): OAuthError {
  return new OAuthError('invalid_client', description, 400, BASIC_CHALLENGE);
}

function formDecode(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, ' '));
  } catch (err) {
    throw new OAuthError('invalid_client', 'malformed Basic credentials', 400, BASIC_CHALLENGE, { cause: err });
  }
}

/** Decodes HTTP Basic credentials; each part is form-url-decoded (RFC 6749 2.3.1, appendix B). */
export function parseBasic(header: string): { id: string; secret: string } {
  const raw = header.slice(6).trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(raw)) throw basicFailure('malformed Basic credentials');
  const decoded = Buffer.from(raw, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) throw basicFailure('malformed Basic credentials');
  return { id: formDecode(decoded.slice(0, colon)), secret: formDecode(decoded.slice(colon + 1)) };
}

/**
 * Whether `secret` is the client's: its current one, or the one a rotation replaced while its grace period
 * (`cinder client rotate-secret --grace`) lasts at `now`. Both digests are compared in constant time.
 */
function secretMatches(client: Client, secret: string, now: number): boolean {
  const current = client.secretHash !== null && matchesDigest(secret, client.secretHash);
  const previous = client.previousSecretHash !== null && (client.previousSecretUntil ?? 0) > now && matchesDigest(secret, client.previousSecretHash);
  return current || previous;
}

/**
 * `client_secret_basic` (RFC 6749 2.3.1): the secret is compared in constant time with its stored
 * SHA-256 digest (secretMatches). A body `client_id` must name the same client.
 */
export async function authenticateBasic(clients: ClientLookup, header: string, bodyClientId: string | null, now: number): Promise<Client> {
  const { id, secret } = parseBasic(header);
  if (bodyClientId !== null && bodyClientId !== id) {
    throw new OAuthError('invalid_request', 'client_id in the body differs from the authenticated client');
  }
  const client = id ? await clients.get(id) : null;
  if (!client || client.disabled || !secretMatches(client, secret, now)) {
    throw basicFailure('client authentication failed');
  }
  return client;
}
