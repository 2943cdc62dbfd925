import { decodeProtectedHeader, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import type { AuthDeps } from './deps.ts';
import { mayHaveSigned, SIGNING_SKEW_MS } from './keys.ts';

/**
 * A short-lived statement the server signs for itself and reads back later (a login ticket, an EHR
 * launch): an ES256 JWS with the signing keys kept in the database, so any process verifies what another
 * signed, and nothing is stored. Its explicit `typ` (RFC 8725 3.11) keeps one kind from passing as another,
 * or as an access token (`at+jwt`); its audience is the authorize endpoint, where every kind is read.
 */
export interface ServerJwsKind {
  typ: string;
  /** Seconds from signing to expiry. */
  ttl: number;
}

const audience = (deps: AuthDeps) => `${deps.config.baseUrl}/oauth2/authorize`;

/** Signs `claims` (and `sub` when given) as a statement of `kind`, valid `kind.ttl` seconds from now. */
export async function signServerJws(deps: AuthDeps, kind: ServerJwsKind, claims: JWTPayload, sub?: string): Promise<string> {
  const iat = Math.floor(deps.clock.now() / 1000);
  const key = await deps.keys.currentKey('ES256', iat * 1000);
  const jws = new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: key.record.kid, typ: kind.typ })
    .setIssuer(deps.config.baseUrl)
    .setAudience(audience(deps))
    .setIssuedAt(iat)
    .setExpirationTime(iat + kind.ttl);
  if (sub !== undefined) jws.setSubject(sub);
  return jws.sign(key.privateKey);
}

/** Why a statement was refused: `malformed`, `unknown-key` (not signed here), or `invalid` (bad signature, expired, another kind). */
export type ServerJwsRefusal = 'malformed' | 'unknown-key' | 'invalid';

/**
 * The payload of a statement of `kind` signed by this server, or the reason it is refused, given to
 * `refuse` with the cause (the caller's error). `graceS` accepts that many seconds past its expiry.
 */
export async function verifyServerJws(
  deps: AuthDeps, kind: ServerJwsKind, value: string, required: string[], refuse: (why: ServerJwsRefusal, cause?: unknown) => Error, graceS = 0,
): Promise<JWTPayload> {
  let kid: string | undefined;
  try {
    kid = decodeProtectedHeader(value).kid;
  } catch (err) {
    throw refuse('malformed', err);
  }
  const key = kid ? await deps.keys.verificationKey(kid) : null;
  if (!key) throw refuse('unknown-key');
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(value, key.publicKey, {
      issuer: deps.config.baseUrl, audience: audience(deps), algorithms: ['ES256'], typ: kind.typ, currentDate: new Date(deps.clock.now()),
      requiredClaims: ['exp', 'iat', ...required], clockTolerance: graceS,
    }));
  } catch (err) {
    throw refuse('invalid', err);
  }
  // The lifetime and dates this server gives a statement of this kind (issuedHere in tokens.ts): only one forged with
  // a leaked key has others, after the rotation that retired the key or living beyond it.
  const { iat, exp } = payload as { iat: number; exp: number };
  if (exp - iat > kind.ttl || iat * 1000 > deps.clock.now() + SIGNING_SKEW_MS || !mayHaveSigned(key.record, iat * 1000)) throw refuse('invalid');
  return payload;
}
