import {
  createLocalJWKSet, decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify,
  type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions, type ProtectedHeaderParameters,
} from 'jose';
import { OAuthError } from '../errors.ts';
import type { Client } from '../store/types.ts';
import type { AuthDeps } from './deps.ts';

export const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** Asymmetric algorithms accepted for client assertions; `none` and HS* never are (SMART Backend Services). */
export const ASSERTION_ALGS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512'];

const SKEW_S = 60;
const MAX_LIFETIME_S = 300;

/** jose key-set resolvers per JWK Set object, so imported keys are reused while the set is cached. */
export type KeySetResolver = (set: JSONWebKeySet) => JWTVerifyGetKey;

/** A resolver that builds each set's resolver once (keyed weakly by the set object). */
export function createKeySetResolver(): KeySetResolver {
  const resolvers = new WeakMap<JSONWebKeySet, JWTVerifyGetKey>();
  return (set) => {
    let r = resolvers.get(set);
    if (!r) {
      r = createLocalJWKSet(set);
      resolvers.set(set, r);
    }
    return r;
  };
}

function fail(description: string, cause?: unknown): OAuthError {
  return new OAuthError('invalid_client', description, 400, {}, { cause });
}

function decode(assertion: string): { header: ProtectedHeaderParameters; claims: JWTPayload } {
  try {
    return { header: decodeProtectedHeader(assertion), claims: decodeJwt(assertion) };
  } catch (err) {
    throw fail('client_assertion is not a JWT', err);
  }
}

/** The keys to verify with: the inline set, or the registered URL's (re-fetched once on an unknown kid). */
async function keySet(deps: AuthDeps, client: Client, header: ProtectedHeaderParameters, refresh: boolean): Promise<JSONWebKeySet> {
  if (header.jku !== undefined && header.jku !== client.jwksUrl) throw fail('jku is not the JWK Set URL registered for this client');
  if (client.jwks) return client.jwks;
  if (!client.jwksUrl) throw fail('this client has no registered keys');
  try {
    return await deps.jwks.get(client.jwksUrl, refresh);
  } catch (err) {
    // The client is told only that its keys could not be fetched; the operator, why (refused address, DNS, HTTP status).
    deps.log.warn('client JWK Set could not be fetched', { tenant: client.tenant, clientId: client.clientId, url: client.jwksUrl, err });
    throw fail('the client JWK Set could not be fetched', err);
  }
}

async function verify(deps: AuthDeps, client: Client, assertion: string, header: ProtectedHeaderParameters, audiences: string[]) {
  const options = {
    algorithms: ASSERTION_ALGS, issuer: client.clientId, subject: client.clientId, audience: audiences,
    clockTolerance: SKEW_S, currentDate: new Date(deps.clock.now()), requiredClaims: ['exp', 'jti', 'iss', 'sub', 'aud'],
  };
  for (const refresh of [false, true]) {
    const set = await keySet(deps, client, header, refresh);
    try {
      return (await jwtVerify(assertion, deps.keySets(set), options)).payload;
    } catch (err) {
      // Several registered keys fit a header without `kid` (a set holding the old and the new key of
      // a rotation): the assertion is good if one of them verifies it (RFC 7523 does not require `kid`).
      if (err instanceof joseErrors.JWKSMultipleMatchingKeys) return verifyWithAny(assertion, err, options);
      const unknownKey = err instanceof joseErrors.JWKSNoMatchingKey;
      if (unknownKey && !refresh && client.jwksUrl && !client.jwks) continue;
      throw fail(unknownKey ? 'no registered key matches the assertion' : `client_assertion rejected: ${(err as Error).message}`, err);
    }
  }
  throw fail('no registered key matches the assertion');
}

/** The payload of `assertion` as the first of several matching keys that verifies it gives it; else invalid_client. */
async function verifyWithAny(assertion: string, candidates: joseErrors.JWKSMultipleMatchingKeys, options: JWTVerifyOptions): Promise<JWTPayload> {
  let last: unknown = candidates;
  for await (const key of candidates) {
    try {
      return (await jwtVerify(assertion, key, options)).payload;
    } catch (err) {
      last = err;
    }
  }
  throw fail(`client_assertion rejected: ${(last as Error).message}`, last);
}

/**
 * `aud` names this server alone (jose checked that one of its values is an accepted audience): an assertion also
 * addressed to another party could be replayed here by that party (draft-ietf-oauth-rfc7523bis: "The authorization
 * server MUST reject any JWT that does not contain its issuer identifier as its sole audience value"; SMART Backend
 * Services names the token endpoint URL, which stays accepted). A one-member array is one value.
 */
function checkSoleAudience(claims: JWTPayload): void {
  if (Array.isArray(claims.aud) && claims.aud.length !== 1) throw fail('aud must name this server alone, not several audiences');
}

/**
 * Time claims beyond what jose checks: exp at most five minutes ahead (SMART Backend Services), iat neither in the future
 * nor more than five minutes ago. RFC 7523 3 lets the server "reject JWTs with an iat claim value that is unreasonably
 * far in the past": an assertion is made for the request it authenticates and lives five minutes at most, so one issued
 * an hour ago with an exp still ahead was made to live for over an hour, and a replay of it would outlive the bound
 * SMART sets (each a minute of clock skew allowed).
 */
function checkTimes(claims: JWTPayload, nowS: number): void {
  if (typeof claims.exp !== 'number' || claims.exp > nowS + MAX_LIFETIME_S + SKEW_S) throw fail('exp is more than five minutes ahead');
  if (claims.iat !== undefined && (typeof claims.iat !== 'number' || claims.iat > nowS + SKEW_S)) throw fail('iat is in the future');
  if (claims.iat !== undefined && claims.iat < nowS - MAX_LIFETIME_S - SKEW_S) {
    throw fail('iat is more than five minutes ago: make a new client assertion for each request (it lives at most five minutes)');
  }
  if (typeof claims.jti !== 'string' || claims.jti.length === 0 || claims.jti.length > 256) throw fail('jti must be a non-empty string');
}

/**
 * `private_key_jwt` (RFC 7523 2.2 and 3, OIDC Core 9, SMART Backend Services): the assertion's
 * `iss` = `sub` = the client, `aud` one of `audiences` and nothing else, signed with a registered key under an allowed
 * asymmetric algorithm, short-lived, and its `jti` never seen before for this client (any process).
 */
export async function authenticateAssertion(deps: AuthDeps, form: URLSearchParams, audiences: string[]): Promise<Client> {
  const type = form.get('client_assertion_type');
  const assertion = form.get('client_assertion');
  if (type !== ASSERTION_TYPE) throw new OAuthError('invalid_request', `client_assertion_type must be ${ASSERTION_TYPE}`);
  if (!assertion) throw new OAuthError('invalid_request', 'client_assertion is required with client_assertion_type');
  const { header, claims } = decode(assertion);
  if (!header.alg || !ASSERTION_ALGS.includes(header.alg)) throw fail(`alg '${String(header.alg)}' is not accepted for client assertions`);
  const id = claims.iss;
  if (typeof id !== 'string' || claims.sub !== id) throw fail('iss and sub must both be the client_id');
  const bodyId = form.get('client_id');
  if (bodyId !== null && bodyId !== id) throw fail('client_id differs from the assertion issuer');
  const client = await deps.clients.get(id);
  if (!client || client.disabled) throw fail('unknown client');
  const payload = await verify(deps, client, assertion, header, audiences);
  const now = deps.clock.now();
  checkSoleAudience(payload);
  checkTimes(payload, Math.floor(now / 1000));
  if (!(await deps.store.oauth.useJti(client.clientId, payload.jti!, (payload.exp! + SKEW_S) * 1000, now))) {
    throw fail('this client assertion (jti) was already used');
  }
  return client;
}
