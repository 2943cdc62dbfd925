import { decodeProtectedHeader, errors as joseErrors, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import { createHash } from 'node:crypto';
import type { Clock } from '../clock.ts';
import type { FhirContextItem, SigningKey } from '../store/types.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import { mayHaveSigned, SIGNING_SKEW_MS, type KeyRing, type LoadedKey } from './keys.ts';
import { randomToken } from './secrets.ts';

/** Longest lifetime any Cinder token may have (per-client overrides included); bounds key publication. */
export const MAX_TOKEN_TTL = 86400;

/** Claims of a Cinder access token beyond the registered ones. */
export interface AccessClaims {
  sub: string;
  aud: string;
  client_id: string;
  scope: string;
  tenant: string;
  patient?: string;
  /** The encounter in context of an EHR launch (SMART App Launch 2.2); it narrows no access. */
  encounter?: string;
  /** The further resources in context of an EHR launch (SMART App Launch 2.2 `fhirContext`); they widen and narrow no access. */
  fhirContext?: FhirContextItem[];
  /** SMART App Launch 2.2 `need_patient_banner`, beside a patient in context (as the token response states it, for introspection). */
  need_patient_banner?: boolean;
  fhirUser?: string;
  /** The grant (login) the token was issued from; revoking the grant revokes the token. */
  gid?: string;
  /**
   * When the client's registration the token was issued on was read (epoch ms; the client cache may have held it
   * a few seconds): a client revocation recorded at or after it refuses the token (src/auth/revocation.ts).
   */
  crt?: number;
  /**
   * The number of the last revocation of the client's tokens committed when that registration was read
   * (Client.revocationSeq): a client revocation numbered above it refuses the token, one at or below it (made before
   * the read) does not, whatever the clocks of the server that issued the token and of whoever recorded the revocation
   * say. A token without it (issued by an older release) is judged by `crt`.
   */
  crs?: number;
  /** When the user the token was issued to was read (epoch ms), for a user revocation likewise. */
  urt?: number;
  /**
   * The number of the last revocation of the user's tokens committed when their record was read (User.revocationSeq),
   * for a user revocation as `crs` is for a client's; a token without it (issued by an older release) is judged by `urt`.
   */
  urs?: number;
}

export type VerifiedToken = AccessClaims & { exp: number; iat: number; jti: string; iss: string };

const ES256 = { name: 'ECDSA', hash: 'SHA-256' } as const;
const encoder = new TextEncoder();

const base64url = (text: string) => Buffer.from(text).toString('base64url');

/**
 * Signs an access token (JWT, ES256, RFC 9068 `at+jwt`) valid for `ttl` seconds. The compact JWS is
 * built here and signed with WebCrypto (asynchronous, like jose's own path): the claims, all
 * produced by Cinder itself, need none of SignJWT's input checks and copies, which were a tenth of a
 * token request. Tokens are verified with jose (jwtVerify).
 */
export async function signAccessToken(keys: KeyRing, clock: Clock, issuer: string, claims: AccessClaims, ttl: number) {
  // The key signing at the very time the token is dated with (a rotation hands over at an instant: mayHaveSigned).
  const iat = Math.floor(clock.now() / 1000);
  const key = await keys.currentKey('ES256', iat * 1000);
  const header = base64url(JSON.stringify({ alg: 'ES256', kid: key.record.kid, typ: 'at+jwt' }));
  const input = `${header}.${base64url(JSON.stringify({ ...claims, iss: issuer, iat, exp: iat + ttl, jti: randomToken(16) }))}`;
  // WebCrypto's ECDSA signature is r || s, the JWS form (RFC 7518 3.4).
  const signature = await crypto.subtle.sign(ES256, key.privateKey, encoder.encode(input));
  return { token: `${input}.${Buffer.from(signature).toString('base64url')}`, expiresIn: ttl };
}

/** OIDC Core 3.1.3.6 `at_hash`: base64url of the left half of the SHA-256 of the access token (RS256). */
export function atHash(accessToken: string): string {
  return createHash('sha256').update(accessToken).digest().subarray(0, 16).toString('base64url');
}

export interface IdTokenInput {
  sub: string;
  /** The client id. */
  aud: string;
  /** Epoch seconds of the sign-in. */
  authTime: number;
  nonce: string | null;
  accessToken: string;
  /** User claims the granted scopes release (OIDC Core 5.4). */
  claims: Record<string, unknown>;
}

/** Signs an OpenID Connect id_token (OIDC Core 2) with the RS256 key, as OIDC requires servers to support. */
export async function signIdToken(keys: KeyRing, clock: Clock, issuer: string, input: IdTokenInput, ttl: number): Promise<string> {
  const iat = Math.floor(clock.now() / 1000);
  const key = await keys.currentKey('RS256', iat * 1000);
  const payload: JWTPayload = { ...input.claims, auth_time: input.authTime, at_hash: atHash(input.accessToken) };
  if (input.nonce) payload.nonce = input.nonce;
  return new SignJWT(payload)
    .setProtectedHeader({ alg: 'RS256', kid: key.record.kid, typ: 'JWT' })
    .setIssuer(issuer)
    .setSubject(input.sub)
    .setAudience(input.aud)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ttl)
    .sign(key.privateKey);
}

export class InvalidTokenError extends Error {
  override name = 'InvalidTokenError';
}

/** A token that is not even an RFC 6750 `b64token`: the request is malformed (`invalid_request`). */
export class MalformedTokenError extends InvalidTokenError {
  override name = 'MalformedTokenError';
}

/** RFC 6750 2.1: the characters of a bearer token. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** Decides whether a verified token has been revoked (src/auth/revocation.ts). */
export interface RevocationCheck {
  /** The answer at once when the revocations read last are recent enough, else after reading them. */
  isRevoked(token: VerifiedToken): SyncOrAsync<boolean>;
}

/**
 * Whether a token with a good signature is dated as this server dates its tokens: issued no later than now
 * (SIGNING_SKEW_MS between processes' clocks) and while its key signed (mayHaveSigned). Only a token forged
 * with a leaked key, after the hand-over of the rotation that retired it, is dated otherwise.
 */
function issuedHere(iat: number, key: SigningKey, now: number): boolean {
  return iat * 1000 <= now + SIGNING_SKEW_MS && mayHaveSigned(key, iat * 1000);
}

/** A verified token and the key that signed it. */
interface Verified {
  token: VerifiedToken;
  key: LoadedKey;
}

async function verifySignature(keys: KeyRing, clock: Clock, issuer: string, token: string): Promise<Verified> {
  let kid: string | undefined;
  try {
    kid = decodeProtectedHeader(token).kid;
  } catch (err) {
    throw new InvalidTokenError('the access token is malformed', { cause: err });
  }
  const key = kid ? await keys.verificationKey(kid) : null;
  if (!key) throw new InvalidTokenError('the access token was not signed by this server');
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, key.publicKey, {
      issuer, algorithms: ['ES256'], typ: 'at+jwt', currentDate: new Date(clock.now()), requiredClaims: ['exp', 'iat', 'sub', 'jti'],
    }));
  } catch (err) {
    const msg = err instanceof joseErrors.JWTExpired ? 'the access token has expired' : 'the access token is invalid';
    throw new InvalidTokenError(msg, { cause: err });
  }
  if (!issuedHere(payload.iat!, key.record, clock.now())) throw new InvalidTokenError('the access token is invalid');
  if (typeof payload.tenant !== 'string' || typeof payload.scope !== 'string') throw new InvalidTokenError('the access token lacks tenant or scope');
  return { token: payload as unknown as VerifiedToken, key };
}

/**
 * Verifies access tokens locally (no database read but the signing keys', at most once a KEY_RELOAD_MS) and
 * remembers verified ones until they expire, or their key is no longer published (KeyRing.isPublished), so a
 * token is checked cryptographically once per process. `revocations` is asked on every use.
 * The steady state (a token verified before, unexpired, and revocations read recently) is answered
 * at once, without a promise; a refusal known at once is thrown at once.
 */
export function createTokenVerifier(keys: KeyRing, clock: Clock, issuer: string, revocations: RevocationCheck | null = null, cacheSize = 50_000) {
  const cache = new Map<string, Verified>();
  const notRevoked = (verified: VerifiedToken): SyncOrAsync<VerifiedToken> => {
    if (revocations === null) return verified;
    const revoked = revocations.isRevoked(verified);
    return revoked instanceof Promise ? revoked.then((r) => refuseRevoked(r, verified)) : refuseRevoked(revoked, verified);
  };
  return function verify(token: string): SyncOrAsync<VerifiedToken> {
    const cached = cache.get(token);
    if (cached === undefined) {
      // Checked before anything else, and only here: a token in the cache passed it when it came in.
      if (!B64TOKEN.test(token)) throw new MalformedTokenError('the access token is not a bearer token (RFC 6750 b64token)');
      return verifySignature(keys, clock, issuer, token).then((v) => {
        if (cache.size >= cacheSize) cache.clear();
        cache.set(token, v);
        return notRevoked(v.token);
      });
    }
    if (cached.token.exp * 1000 <= clock.now()) {
      cache.delete(token);
      throw new InvalidTokenError('the access token has expired');
    }
    // A key retired and no longer published (a leak rotated out) signed nothing still taken, whenever it was verified.
    const published = keys.isPublished(cached.key);
    return published instanceof Promise ? published.then((p) => stillSigned(token, cached, p)) : stillSigned(token, cached, published);
  };

  function stillSigned(token: string, cached: Verified, published: boolean): SyncOrAsync<VerifiedToken> {
    if (!published) {
      cache.delete(token);
      throw new InvalidTokenError('the access token was not signed by this server');
    }
    return notRevoked(cached.token);
  }
}

function refuseRevoked(revoked: boolean, verified: VerifiedToken): VerifiedToken {
  if (revoked) throw new InvalidTokenError('the access token has been revoked');
  return verified;
}

export type TokenVerifier = ReturnType<typeof createTokenVerifier>;
