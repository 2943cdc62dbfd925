import { OAuthError } from '../errors.ts';
import type { Client } from '../store/types.ts';
import { authenticateAssertion } from './client-assertion.ts';
import { authenticateBasic } from './client-basic.ts';
import type { AuthDeps } from './deps.ts';

export { parseBasic } from './client-basic.ts';

/** A request to an endpoint that authenticates clients (token, revocation, introspection). */
export interface TokenRequest {
  form: URLSearchParams;
  authorization: string | undefined;
  /** The client's address, for the audit trail. */
  ip?: string;
}

/** RFC 7591 `token_endpoint_auth_method` names. */
export type AuthMethod = 'client_secret_basic' | 'private_key_jwt' | 'none';

export interface AuthenticatedClient {
  client: Client;
  method: AuthMethod;
}

/** Whether a client must prove its identity (it holds a secret or registered keys). */
export function isConfidential(client: Client): boolean {
  return client.secretHash !== null || client.jwks !== null || client.jwksUrl !== null;
}

/**
 * Whether a client may hold refresh tokens: it has the refresh_token grant and is confidential. RFC 9700
 * 2.2.2: "Refresh tokens for public clients MUST be sender-constrained or use refresh token rotation";
 * Cinder's are neither (the interface forbids a new refresh token on refresh, and there is no DPoP), so a
 * public client gets no offline scope and may not refresh, whatever an older release registered it with.
 */
export function mayHoldRefreshTokens(client: Client): boolean {
  return client.grants.includes('refresh_token') && isConfidential(client);
}

function presentedMethods(req: TokenRequest): string[] {
  const methods: string[] = [];
  if (req.authorization !== undefined) methods.push(/^basic /i.test(req.authorization) ? 'basic' : 'other-header');
  if (req.form.has('client_assertion') || req.form.has('client_assertion_type')) methods.push('assertion');
  if (req.form.has('client_secret')) methods.push('secret-post');
  return methods;
}

async function authenticatePublic(deps: AuthDeps, form: URLSearchParams): Promise<Client> {
  const id = form.get('client_id');
  if (id === null) throw new OAuthError('invalid_client', 'no client authentication and no client_id');
  const client = id ? await deps.clients.get(id) : null;
  if (!client || client.disabled) throw new OAuthError('invalid_client', 'unknown client');
  if (isConfidential(client)) throw new OAuthError('invalid_client', 'this client must authenticate (HTTP Basic or private_key_jwt)');
  return client;
}

/**
 * Authenticates the client of a request (RFC 6749 2.3, 3.2.1): HTTP Basic with its secret, a
 * `private_key_jwt` assertion (RFC 7523), or a public client naming itself with `client_id`.
 * More than one method in a request is `invalid_request` (RFC 6749 2.3); every failed authentication
 * is `invalid_client`, HTTP 400 like every token error (with a Basic challenge when Basic was used).
 * `audiences` are the values an assertion's `aud` may take.
 */
export async function authenticateClient(deps: AuthDeps, req: TokenRequest, audiences: string[]): Promise<AuthenticatedClient> {
  const methods = presentedMethods(req);
  if (methods.length > 1) throw new OAuthError('invalid_request', 'use exactly one client authentication method');
  switch (methods[0]) {
    case 'basic':
      return { client: await authenticateBasic(deps.clients, req.authorization!, req.form.get('client_id'), deps.clock.now()), method: 'client_secret_basic' };
    case 'assertion':
      return { client: await authenticateAssertion(deps, req.form, audiences), method: 'private_key_jwt' };
    case 'secret-post':
      throw new OAuthError('invalid_client', 'client_secret_post is not supported: send the secret with HTTP Basic');
    case 'other-header':
      throw new OAuthError('invalid_client', 'unsupported Authorization scheme: use HTTP Basic');
    default:
      return { client: await authenticatePublic(deps, req.form), method: 'none' };
  }
}
