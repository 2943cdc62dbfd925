import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** A URL-safe random value with `bytes` bytes of entropy (client ids, secrets, codes, refresh tokens). */
export function randomToken(bytes = 32): string {
  return randomBytes(bytes).toString('base64url');
}

/** Hex SHA-256 digest: how client secrets, codes and refresh tokens are stored. */
export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** Constant-time check of `value` against a stored hex SHA-256 digest. */
export function matchesDigest(value: string, digestHex: string): boolean {
  const a = createHash('sha256').update(value).digest();
  const b = Buffer.from(digestHex, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}
