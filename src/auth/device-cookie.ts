import { mayHaveSigned, SIGNING_SKEW_MS } from './keys.ts';
import type { Sealer } from './sealed.ts';
import { randomToken } from './secrets.ts';

/**
 * Device cookies (OWASP, "Slow Brute Force Attacks / device cookies"): a browser a user signed in with is given a
 * cookie naming it, sealed to the tenant and user, and its sign-in attempts for that user are counted on their own
 * (createLoginThrottle), so that guesses at the user's password from elsewhere, which may throttle the user from
 * every other address, do not keep them out of a browser they use. The value is sealed (src/auth/sealed.ts) under
 * the signing keys: it opens for its user only, and no longer once its key is (a rotation, then the longest token
 * lifetime); a sign-in with it gives a fresh one.
 */
export const DEVICE_COOKIE = 'cinder_device';

/** How long a device cookie is taken (seconds): 30 days from the sign-in that gave it. */
export const DEVICE_COOKIE_MAX_AGE = 30 * 86400;

/**
 * What a cookie is sealed to: the tenant and the username as it is (usernames are case-sensitive: `Alice` and `alice` are
 * two users, and a cookie of one, folded to lower case, was a device of the other, a new one at each of its sign-ins).
 */
const context = (tenant: string, username: string) => `sign-in device\0${tenant}\0${username}`;

/**
 * A new device cookie value for `username` of `tenant`, signed in at `now` (epoch ms): sealed under the key signing at
 * `now`, so that its date and its key agree (deviceOf).
 */
export function issueDeviceCookie(sealer: Sealer, tenant: string, username: string, now: number): Promise<string> {
  return sealer.seal(JSON.stringify({ id: randomToken(16), iat: now }), context(tenant, username), now);
}

/**
 * The device id of `value` when it is a device cookie of `username` of `tenant`, not older than its maximum age, and
 * dated while its key sealed (mayHaveSigned: one dated at or after the key's retirement was sealed with a leaked key,
 * as a token so dated was signed with it); else null.
 */
export async function deviceOf(sealer: Sealer, value: string | null, tenant: string, username: string, now: number): Promise<string | null> {
  if (!value) return null;
  const opened = await sealer.openSigned(value, context(tenant, username));
  if (opened === undefined) return null;
  try {
    const { id, iat } = JSON.parse(opened.plaintext) as { id?: unknown; iat?: unknown };
    if (typeof id !== 'string' || typeof iat !== 'number' || now - iat > DEVICE_COOKIE_MAX_AGE * 1000 || iat > now + SIGNING_SKEW_MS) return null;
    if (!mayHaveSigned(opened.key, iat)) return null;
    return id;
  } catch {
    return null;
  }
}
