import { ASSERTION_ALGS } from './client-assertion.ts';
import { OPENID_SCOPES, SCOPE_ATTRIBUTES } from './claims.ts';

/** The authorization server's endpoint URLs. */
export function oauthEndpoints(baseUrl: string) {
  return {
    authorization_endpoint: `${baseUrl}/oauth2/authorize`,
    token_endpoint: `${baseUrl}/oauth2/token`,
    revocation_endpoint: `${baseUrl}/oauth2/revoke`,
    introspection_endpoint: `${baseUrl}/oauth2/introspect`,
    userinfo_endpoint: `${baseUrl}/oauth2/userinfo`,
    jwks_uri: `${baseUrl}/oauth2/jwks`,
  };
}

const AUTH_METHODS = ['client_secret_basic', 'private_key_jwt', 'none'];
const EXAMPLE_SCOPES = ['launch', 'launch/patient', 'launch/encounter', 'system/*.read', 'system/*.rs', 'user/*.read', 'user/*.cruds', 'patient/*.read', 'patient/*.rs'];

/** OpenID Connect Discovery 1.0 section 3 (and RFC 8414) metadata. */
export function openidConfiguration(baseUrl: string): Record<string, unknown> {
  return {
    issuer: baseUrl,
    ...oauthEndpoints(baseUrl),
    scopes_supported: [...OPENID_SCOPES, ...EXAMPLE_SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256'],
    token_endpoint_auth_methods_supported: AUTH_METHODS,
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    revocation_endpoint_auth_methods_supported: AUTH_METHODS,
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'private_key_jwt'],
    code_challenge_methods_supported: ['S256'],
    claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'at_hash', ...new Set(Object.values(SCOPE_ATTRIBUTES).flat())],
    claims_parameter_supported: false,
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    authorization_response_iss_parameter_supported: true,
    prompt_values_supported: ['login', 'none'],
  };
}

/** SMART App Launch 2.x `.well-known/smart-configuration` (section 2.0.10 of the IG). */
export function smartConfiguration(baseUrl: string): Record<string, unknown> {
  return {
    issuer: baseUrl,
    ...oauthEndpoints(baseUrl),
    grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
    response_types_supported: ['code'],
    scopes_supported: [...OPENID_SCOPES, ...EXAMPLE_SCOPES],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: AUTH_METHODS,
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGS,
    // The EHR launch mints its `launch` at POST /oauth2/launch (src/auth/launch-mint.ts), with its own
    // need_patient_banner (context-banner); no standalone encounter picker, and no smart_style_url (context-style).
    capabilities: [
      'launch-ehr', 'launch-standalone', 'context-ehr-patient', 'context-ehr-encounter', 'context-banner', 'context-standalone-patient',
      'client-public', 'client-confidential-symmetric', 'client-confidential-asymmetric',
      'sso-openid-connect', 'permission-offline', 'permission-patient', 'permission-user',
      'permission-v1', 'permission-v2', 'authorize-post',
    ],
  };
}

/** The SMART `oauth-uris` extension entries of the CapabilityStatement's rest.security. */
export function smartOAuthUris(baseUrl: string): Record<string, string> {
  const e = oauthEndpoints(baseUrl);
  return { token: e.token_endpoint, authorize: e.authorization_endpoint, revoke: e.revocation_endpoint, introspect: e.introspection_endpoint };
}
