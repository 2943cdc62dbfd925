import { createHash, timingSafeEqual } from 'node:crypto';

/** RFC 7636 4.1: 43-128 characters of the unreserved set. */
export const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;
/** RFC 7636 4.2: an S256 challenge is the base64url SHA-256 of the verifier (43 characters). */
export const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** RFC 7636 4.2 `S256` transformation. */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

/** RFC 7636 4.6: whether the verifier matches the stored S256 challenge (constant-time compare). */
export function verifierMatches(verifier: string, challenge: string): boolean {
  const a = Buffer.from(s256(verifier));
  const b = Buffer.from(challenge);
  return a.length === b.length && timingSafeEqual(a, b);
}
