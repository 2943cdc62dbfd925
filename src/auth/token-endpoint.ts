import { OAuthError } from '../errors.ts';
import { authenticateClient, type TokenRequest } from './client-auth.ts';
import type { AuthDeps } from './deps.ts';
import { grants } from './grants/index.ts';
import type { TokenResponse } from './grants/types.ts';

/** RFC 6749 3.2: parameters must not be included more than once. */
function rejectDuplicates(form: URLSearchParams): void {
  const seen = new Set<string>();
  for (const key of form.keys()) {
    if (seen.has(key)) throw new OAuthError('invalid_request', `parameter '${key}' is repeated`);
    seen.add(key);
  }
}

function grantFor(form: URLSearchParams) {
  const type = form.get('grant_type');
  if (!type) throw new OAuthError('invalid_request', 'grant_type is required');
  const grant = grants.get(type);
  if (!grant) throw new OAuthError('unsupported_grant_type', `grant_type '${type}' is not supported`);
  return grant;
}

/**
 * The token endpoint (RFC 6749 3.2) as a pipeline: form checks -> client authentication -> grant
 * supported -> grant allowed for the client -> grant handler.
 */
export async function handleTokenRequest(deps: AuthDeps, req: TokenRequest): Promise<TokenResponse> {
  rejectDuplicates(req.form);
  const grant = grantFor(req.form);
  const client = await authenticateClient(deps, req);
  if (!client.client.grants.includes(grant.grantType)) {
    throw new OAuthError('unauthorized_client', `this client may not use the ${grant.grantType} grant`);
  }
  return grant.handle(deps, client, req.form);
}
