import type { OAuthErrorCode } from '../errors.ts';
import type { Client, User } from '../store/types.ts';
import { OFFLINE_SCOPES, OPENID_SCOPES } from './claims.ts';
import { isConfidential, mayHoldRefreshTokens } from './client-auth.ts';
import { fhirBaseOf } from '../config.ts';
import type { AuthDeps } from './deps.ts';
import { grantContext, type GrantContext } from './grant-context.ts';
import { LaunchError, verifyLaunch, type LaunchContext } from './launch.ts';
import { LOGIN_TICKET_TTL_S } from './login-ticket.ts';
import { S256_CHALLENGE } from './pkce.ts';
import { isImpliedBy, isResourceScope, requestedScopeProblem, splitScopes } from './scopes.ts';
import { isRegisteredRedirectUri } from './redirect-uris.ts';
import { randomToken, sha256Hex } from './secrets.ts';

/** Lifetime of an authorization code (RFC 6749 4.1.2 recommends at most ten minutes). */
export const CODE_TTL_MS = 60_000;

/** The authorization request parameters Cinder reads (RFC 6749 4.1.1, RFC 7636 4.3, OIDC Core 3.1.2.1). */
export const AUTHORIZE_PARAMS = [
  'response_type', 'client_id', 'redirect_uri', 'scope', 'state', 'nonce', 'code_challenge', 'code_challenge_method',
  'response_mode', 'prompt', 'login_hint', 'max_age', 'aud', 'launch',
] as const;

/** A validated authorization request. */
export interface AuthorizationRequest {
  client: Client;
  redirectUri: string;
  scopes: string[];
  state: string | null;
  nonce: string | null;
  codeChallenge: string | null;
  loginHint: string | null;
  /** The EHR launch (the `launch` scope with a valid `launch` parameter), or null: a standalone launch. */
  launch: LaunchContext | null;
  /** The parameters to carry through the login form, as received. */
  params: Record<string, string>;
}

/** A request the server must not redirect back for (unknown client, unregistered redirect URI): shown as a page. */
export class AuthorizePageError extends Error {
  override name = 'AuthorizePageError';
}

/** An error reported to the client by redirecting to its redirect URI (RFC 6749 4.1.2.1). */
export class AuthorizeRedirectError extends Error {
  override name = 'AuthorizeRedirectError';
  constructor(readonly error: OAuthErrorCode, readonly description: string, readonly redirectUri: string, readonly state: string | null) {
    super(`${error}: ${description}`);
  }
}

/**
 * Scopes the client may be granted at sign-in: OpenID scopes, `launch/patient`, and what the client's
 * registered scopes imply; `launch` only with an EHR launch, `launch/encounter` only with one naming an
 * encounter (whatever the client registered: they are the launch's context, which nothing else gives).
 * `offline_access` and `offline` only to a client that may hold refresh tokens (mayHoldRefreshTokens: not
 * to a public one).
 */
export function grantableScopes(client: Client, requested: string[], launch: LaunchContext | null = null): string[] {
  return requested.filter((s) => {
    if (s === 'launch') return launch !== null;
    if (s === 'launch/encounter') return launch !== null && launch.encounter !== null;
    if (OFFLINE_SCOPES.includes(s)) return mayHoldRefreshTokens(client);
    if (OPENID_SCOPES.includes(s) || s === 'launch/patient') return true;
    return isImpliedBy(s, client.scopes);
  });
}

async function clientAndRedirect(deps: AuthDeps, q: URLSearchParams): Promise<{ client: Client; redirectUri: string }> {
  const id = q.getAll('client_id');
  if (id.length !== 1 || !id[0]) throw new AuthorizePageError('The request names no client (client_id is missing or repeated).');
  const client = await deps.store.clients.get(id[0]);
  if (!client || client.disabled) throw new AuthorizePageError('The application that sent you here is not registered.');
  const uris = q.getAll('redirect_uri');
  if (uris.length !== 1 || !uris[0]) throw new AuthorizePageError('The request has no redirect_uri (or more than one).');
  if (!isRegisteredRedirectUri(client.redirectUris, uris[0])) throw new AuthorizePageError('The redirect_uri is not registered for this application.');
  return { client, redirectUri: uris[0] };
}

function checkPkceParams(client: Client, challenge: string | null, method: string | null, fail: (d: string) => never): void {
  if (challenge === null) {
    if (method !== null) fail('code_challenge_method without code_challenge');
    if (!isConfidential(client)) fail('PKCE is required for public clients: send code_challenge with code_challenge_method=S256');
    return;
  }
  if (method !== 'S256') fail('code_challenge_method must be S256');
  if (!S256_CHALLENGE.test(challenge)) fail('code_challenge must be 43 base64url characters');
}

type Fail = (description: string, code?: OAuthErrorCode) => never;

/**
 * The request's shape: no repeats (among the parameters as `sent`: one sent twice, once without a value, is still
 * repeated, RFC 6749 3.1), no request objects, `response_type=code`, query mode, bounded lengths.
 */
function checkShape(client: Client, q: URLSearchParams, sent: URLSearchParams, fail: Fail): void {
  for (const name of AUTHORIZE_PARAMS) if (sent.getAll(name).length > 1) fail(`parameter '${name}' is repeated`);
  // OIDC Core 3.1.2.6 names the errors of a request object a server does not take.
  if (q.has('request')) fail('request objects are not supported (the request parameter)', 'request_not_supported');
  if (q.has('request_uri')) fail('request objects are not supported (the request_uri parameter)', 'request_uri_not_supported');
  const responseType = q.get('response_type');
  if (!responseType) fail('response_type is required');
  if (responseType !== 'code') fail(`response_type '${responseType}' is not supported: use code`, 'unsupported_response_type');
  if (!client.grants.includes('authorization_code')) fail('this client may not use the authorization code flow', 'unauthorized_client');
  const mode = q.get('response_mode');
  if (mode !== null && mode !== 'query') fail('response_mode must be query');
  for (const name of ['state', 'nonce', 'login_hint'] as const) if ((q.get(name)?.length ?? 0) > 1024) fail(`${name} is too long`);
}

/** Whether a requested scope is for FHIR data: a SMART resource scope, or a launch context (`launch`, `launch/patient`). */
function asksForFhirData(scope: string): boolean {
  return scope === 'launch' || scope.startsWith('launch/') || isResourceScope(scope);
}

/**
 * SMART `aud` must be the client's FHIR base, and is required of a request for FHIR data (SMART App Launch
 * 2.2, the authorization request: `aud` "Required", so that a token cannot be obtained for a counterfeit
 * resource server); a sign-in for OpenID scopes alone may leave it out. `prompt=none` cannot succeed
 * without sessions.
 */
function checkAudienceAndPrompt(deps: AuthDeps, client: Client, q: URLSearchParams, fail: Fail): void {
  const aud = q.get('aud');
  if (aud === null && splitScopes(q.get('scope')).some(asksForFhirData)) {
    fail("aud is required when asking for FHIR scopes: send this client's FHIR base URL (SMART App Launch)");
  }
  if (aud !== null && aud.replace(/\/+$/, '') !== fhirBaseOf(deps.config.baseUrl, client.tenant)) {
    fail("aud is not this client's FHIR base URL (SMART App Launch: the server the token is for)");
  }
  if ((q.get('prompt') ?? '').split(' ').includes('none')) fail('Cinder has no sign-in session to reuse: prompt=none cannot succeed', 'login_required');
}

/** When the authorization request is read: as it arrives, or from the sign-in (or picker) form it was carried by. */
export type RequestStage = 'request' | 'sign-in';

/**
 * The EHR launch of a request (SMART App Launch 2.2, EHR launch), or null. With the `launch` scope, a
 * `launch` parameter must be a launch of this server, unexpired, for the client's tenant and, when it is
 * bound to one, for this client; else `invalid_request`. From the sign-in form it may have expired up to
 * a sign-in's time (LOGIN_TICKET_TTL_S) ago: it was checked when the login page was shown. A `launch`
 * parameter without the `launch` scope is ignored (the app did not ask for the launch context), and the
 * `launch` scope without one is not granted (grantableScopes): a standalone launch.
 */
async function launchOf(deps: AuthDeps, client: Client, q: URLSearchParams, stage: RequestStage, fail: Fail): Promise<LaunchContext | null> {
  const value = q.get('launch');
  if (value === null || !splitScopes(q.get('scope')).includes('launch')) return null;
  let launch: LaunchContext;
  try {
    launch = await verifyLaunch(deps, value, stage === 'sign-in' ? LOGIN_TICKET_TTL_S : 0);
  } catch (err) {
    if (err instanceof LaunchError) fail(err.message);
    throw err;
  }
  if (launch.tenant !== client.tenant) fail("the launch parameter was issued for another tenant than this client's");
  if (launch.clientId !== null && launch.clientId !== client.clientId) fail('the launch parameter was issued for another application');
  return launch;
}

function grantedScopes(client: Client, q: URLSearchParams, launch: LaunchContext | null, fail: Fail): string[] {
  const requested = splitScopes(q.get('scope'));
  if (requested.length === 0) fail('scope is required', 'invalid_scope');
  const bad = requested.find((s) => requestedScopeProblem(s) !== null);
  if (bad !== undefined) fail(`scope '${bad}' cannot be granted: ${requestedScopeProblem(bad)}`, 'invalid_scope');
  const scopes = grantableScopes(client, requested, launch);
  if (scopes.filter((s) => !OFFLINE_SCOPES.includes(s)).length === 0) fail('none of the requested scopes may be granted to this client', 'invalid_scope');
  return scopes;
}

/**
 * Validates an authorization request (RFC 6749 4.1.1 and 4.1.2.1, RFC 7636, OIDC Core 3.1.2). An unknown
 * client or a redirect URI not registered exactly throws AuthorizePageError (never redirect); anything
 * else throws AuthorizeRedirectError. `stage`: see launchOf.
 */
export async function validateAuthorizationRequest(deps: AuthDeps, sent: URLSearchParams, stage: RequestStage = 'request'): Promise<AuthorizationRequest> {
  // RFC 6749 3.1: "Parameters sent without a value MUST be treated as if they were omitted from the request"
  // (an empty `state` is not echoed, an empty `nonce` is no nonce in the ID token).
  const q = new URLSearchParams([...sent].filter(([, v]) => v !== ''));
  const { client, redirectUri } = await clientAndRedirect(deps, q);
  const state = q.get('state');
  const fail: Fail = (d, code = 'invalid_request') => {
    throw new AuthorizeRedirectError(code, d, redirectUri, state);
  };
  checkShape(client, q, sent, fail);
  checkPkceParams(client, q.get('code_challenge'), q.get('code_challenge_method'), fail);
  checkAudienceAndPrompt(deps, client, q, fail);
  const launch = await launchOf(deps, client, q, stage, fail);
  const scopes = grantedScopes(client, q, launch, fail);
  const params: Record<string, string> = {};
  for (const name of AUTHORIZE_PARAMS) {
    const v = q.get(name);
    if (v !== null) params[name] = v;
  }
  return {
    client, redirectUri, scopes, state, nonce: q.get('nonce'), codeChallenge: q.get('code_challenge'), loginHint: q.get('login_hint'), launch,
    params,
  };
}

/**
 * The parameters an error redirect rests on (RFC 6749 4.1.2.1): the client, where to send the user, and `state`, which
 * the redirect must return exactly as sent.
 */
const REDIRECT_PARAMS = ['client_id', 'redirect_uri', 'state'];

/**
 * Refuses an authorization request some of whose parameters (`malformed`, by name) are not well percent-encoded
 * (`description` says which); `readable` holds the others. RFC 6749 4.1.2.1: with a known client and a registered
 * redirect URI the error is `invalid_request` at the redirect URI; with either missing or not good, an error page. So
 * it is when `client_id`, `redirect_uri` or `state` is among the malformed: a redirect would rest on a value that is not
 * what was sent (a `state` not UTF-8 cannot go back to the client as it came).
 */
export async function refuseMalformedRequest(deps: AuthDeps, readable: URLSearchParams, malformed: string[], description: string): Promise<never> {
  if (malformed.some((name) => REDIRECT_PARAMS.includes(name))) throw new AuthorizePageError(`The authorization request could not be read: ${description}.`);
  // RFC 6749 3.1: parameters sent without a value are as if omitted (validateAuthorizationRequest).
  const q = new URLSearchParams([...readable].filter(([, v]) => v !== ''));
  const { redirectUri } = await clientAndRedirect(deps, q);
  throw new AuthorizeRedirectError('invalid_request', description, redirectUri, q.get('state'));
}

/**
 * An `error_description` in the characters RFC 6749 4.1.2.1 allows it (%x20-21 / %x23-5B / %x5D-7E): each other one
 * (U+0000, a quote, a backslash, a letter beyond ASCII, which a request's parameter names or values named back may hold)
 * as `<U+XXXX>`, so that no client's parser meets what the RFC promised it would not.
 */
export function errorDescription(text: string): string {
  return text.replace(/[^\x20-\x21\x23-\x5B\x5D-\x7E]/gu, (ch) => `<U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}>`);
}

/** The redirect URI with response parameters added to its query (RFC 6749 4.1.2; RFC 9207 `iss`); an error_description as errorDescription. */
export function redirectWith(redirectUri: string, params: Record<string, string | null | undefined>): string {
  const url = new URL(redirectUri);
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined) url.searchParams.append(k, k === 'error_description' ? errorDescription(v) : v);
  return url.toString();
}

/** What a sign-in settled beyond the request: when the user authenticated, and the context of its grant. */
export interface SignedIn extends GrantContext {
  user: User;
  /** Epoch ms of the authentication (OIDC `auth_time`), which the patient picker may follow by minutes. */
  authTime: number;
  /** The number of the user's last revocation when they authenticated (User.revocationSeq of the record checked), where read. */
  authRevocationSeq?: number;
  /** The number of the last revocation of the client's tokens then (Client.revocationSeq of the record the request was read on), where read. */
  authClientRevocationSeq?: number;
}

/** Stores a new single-use code for a signed-in user and returns the success redirect (RFC 6749 4.1.2). */
export async function issueCode(deps: AuthDeps, req: AuthorizationRequest, s: SignedIn): Promise<string> {
  const code = randomToken(32);
  const now = deps.clock.now();
  await deps.store.oauth.createCode({
    codeHash: sha256Hex(code), grantId: randomToken(16), clientId: req.client.clientId, tenant: req.client.tenant, userId: s.user.id,
    redirectUri: req.redirectUri, scope: req.scopes.join(' '), nonce: req.nonce, codeChallenge: req.codeChallenge, authTime: s.authTime,
    ...(s.authRevocationSeq !== undefined && { authRevocationSeq: s.authRevocationSeq }),
    ...(s.authClientRevocationSeq !== undefined && { authClientRevocationSeq: s.authClientRevocationSeq }), expiresAt: now + CODE_TTL_MS, consumedAt: null, ...grantContext(s),
  });
  return redirectWith(req.redirectUri, { code, state: req.state, iss: deps.config.baseUrl });
}
