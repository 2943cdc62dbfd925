import { decodeProtectedHeader, errors as joseErrors, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import type { Clock } from '../clock.ts';
import type { KeyRing } from './keys.ts';
import { randomToken } from './secrets.ts';

/** Claims of a Cinder access token beyond the registered ones. */
export interface AccessClaims {
  sub: string;
  aud: string;
  client_id: string;
  scope: string;
  tenant: string;
  patient?: string;
  fhirUser?: string;
}

export type VerifiedToken = AccessClaims & { exp: number; iat: number; jti: string; iss: string };

/** Signs an access token (JWT, ES256, RFC 9068 `at+jwt`) valid for `ttl` seconds. */
export async function signAccessToken(keys: KeyRing, clock: Clock, issuer: string, claims: AccessClaims, ttl: number) {
  const key = keys.signingKey('ES256');
  const iat = Math.floor(clock.now() / 1000);
  const token = await new SignJWT({ ...claims })
    .setProtectedHeader({ alg: 'ES256', kid: key.record.kid, typ: 'at+jwt' })
    .setIssuer(issuer)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ttl)
    .setJti(randomToken(16))
    .sign(key.privateKey);
  return { token, expiresIn: ttl };
}

export class InvalidTokenError extends Error {
  override name = 'InvalidTokenError';
}

/**
 * Verifies access tokens locally (no database read) and remembers verified ones until they expire,
 * so a token is checked cryptographically once per process.
 */
export function createTokenVerifier(keys: KeyRing, clock: Clock, issuer: string, cacheSize = 50_000) {
  const cache = new Map<string, VerifiedToken>();
  return async function verify(token: string): Promise<VerifiedToken> {
    const hit = cache.get(token);
    if (hit) {
      if (hit.exp * 1000 > clock.now()) return hit;
      cache.delete(token);
      throw new InvalidTokenError('the access token has expired');
    }
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
      ({ payload } = await jwtVerify(token, key, {
        issuer, algorithms: ['ES256'], typ: 'at+jwt', currentDate: new Date(clock.now()), requiredClaims: ['exp', 'sub', 'jti'],
      }));
    } catch (err) {
      const msg = err instanceof joseErrors.JWTExpired ? 'the access token has expired' : 'the access token is invalid';
      throw new InvalidTokenError(msg, { cause: err });
    }
    if (typeof payload.tenant !== 'string' || typeof payload.scope !== 'string') throw new InvalidTokenError('the access token lacks tenant or scope');
    const verified = payload as unknown as VerifiedToken;
    if (cache.size >= cacheSize) cache.clear();
    cache.set(token, verified);
    return verified;
  };
}

export type TokenVerifier = ReturnType<typeof createTokenVerifier>;
