import { OAuthError } from '../../errors.ts';
import { fhirBaseOf } from '../../config.ts';
import { isImpliedBy, needsPatientContext, resourceScopeProblem, splitScopes } from '../scopes.ts';
import { signAccessToken } from '../tokens.ts';
import type { Grant } from './types.ts';

/**
 * client_credentials (RFC 6749 4.4; SMART Backend Services): requested scopes the client's registered
 * scopes do not imply are ignored (a v2 `system/*.rs` is granted to a `system/*.read` client, as
 * requested); no scope means all of the client's scopes. A backend service acts with no user and no
 * patient, so scopes that need a patient in context (`patient/`, `launch/patient`) are never granted
 * here: ignored as scopes not enabled for the client are (SMART Backend Services asks for `system/`
 * scopes). No id_token, no refresh_token, and no database write: the token is a signed JWT.
 */
export const clientCredentials: Grant = {
  grantType: 'client_credentials',
  parameters: ['scope'],
  async handle(deps, { client, method }, form) {
    if (method === 'none') throw new OAuthError('unauthorized_client', 'client_credentials needs a client with a secret or registered keys');
    // A resource scope the server cannot apply (a filter no search of its type can be) would be granted as a custom
    // scope and read nothing. One the client has registered (before registrations were checked) is refused when asked
    // for, and left out otherwise; one it has not is ignored, as any scope not enabled for it is (the contract).
    const asked = form.has('scope') ? splitScopes(form.get('scope')) : null;
    const bad = asked?.find((s) => client.scopes.includes(s) && resourceScopeProblem(s) !== null);
    if (bad !== undefined) throw new OAuthError('invalid_request', `scope '${bad}' cannot be granted: ${resourceScopeProblem(bad)}`);
    const requested = (asked ?? client.scopes).filter((s) => resourceScopeProblem(s) === null);
    const granted = requested.filter((s) => !needsPatientContext(s) && isImpliedBy(s, client.scopes));
    // The contract's token errors name no `invalid_scope`: a scope value the client may not have is an
    // unsupported parameter value, its `invalid_request`.
    if (granted.length === 0) {
      const malformed = asked?.find((s) => resourceScopeProblem(s) !== null);
      const why = malformed === undefined ? '' : ` (scope '${malformed}' is not one the server can apply: ${resourceScopeProblem(malformed)})`;
      throw new OAuthError('invalid_request', `none of the requested scopes is enabled for this client${why}`);
    }
    const scope = granted.join(' ');
    const ttl = client.accessTokenTtl ?? deps.config.backendTokenTtl;
    const { token, expiresIn } = await signAccessToken(deps.keys, deps.clock, deps.config.baseUrl, {
      sub: client.clientId,
      aud: fhirBaseOf(deps.config.baseUrl, client.tenant),
      client_id: client.clientId,
      scope,
      tenant: client.tenant,
      crt: deps.clients.readAt(client),
      ...(client.revocationSeq !== undefined && { crs: client.revocationSeq }),
    }, ttl);
    return { access_token: token, token_type: 'Bearer', expires_in: expiresIn, scope };
  },
};
