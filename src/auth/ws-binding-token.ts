import { decodeProtectedHeader } from 'jose';
import type { AuthDeps } from './deps.ts';
import { signServerJws, verifyServerJws } from './server-jws.ts';

/**
 * The binding tokens of topic-based websocket Subscriptions (R5 Backport IG `$get-ws-binding-token`): a
 * statement the server signs for itself (server-jws.ts, ES256 with the keys kept in the database), naming one
 * tenant, one Subscription and its owner when it was issued (a digest of the recorded owner: a Subscription
 * another app activates again is no longer bound by it), valid WS_BINDING_TTL_S. Nothing is stored: any process sharing the database
 * verifies one another signed, and one outlives no key rotation's retired keys.
 */
export const WS_BINDING_TTL_S = 300;

const KIND = { typ: 'cinder-ws-binding+jwt', ttl: WS_BINDING_TTL_S };

/** What a binding token names. */
export interface WsBinding {
  tenant: string;
  subscription: string;
  /** The digest of the Subscription's owner record when the token was issued (src/fhir/subscriptions/owner.ts ownerDigest). */
  owner: string;
}

/** What a verified binding token names, and the key that signed it (signedByPublishedKey). */
export interface VerifiedWsBinding extends WsBinding {
  kid: string;
}

/** Signs a binding token for `binding`: the token and when it expires (ms). */
export async function signWsBinding(deps: AuthDeps, binding: WsBinding): Promise<{ token: string; expiresAt: number }> {
  const token = await signServerJws(deps, KIND, { tenant: binding.tenant, owner: binding.owner }, binding.subscription);
  return { token, expiresAt: (Math.floor(deps.clock.now() / 1000) + WS_BINDING_TTL_S) * 1000 };
}

class Refused extends Error {}

/**
 * What a binding token names, or undefined for one this server did not sign, expired, or of another kind;
 * a failure to read the keys (the database) is thrown.
 */
export async function verifyWsBinding(deps: AuthDeps, token: string): Promise<VerifiedWsBinding | undefined> {
  try {
    const payload = await verifyServerJws(deps, KIND, token, ['sub', 'tenant', 'owner'], (why) => new Refused(why));
    const { tenant, sub, owner } = payload;
    // Verified: the header names the key (verifyServerJws found it by its kid).
    const kid = decodeProtectedHeader(token).kid!;
    return typeof tenant === 'string' && typeof sub === 'string' && typeof owner === 'string' ? { tenant, subscription: sub, owner, kid } : undefined;
  } catch (err) {
    if (err instanceof Refused) return undefined;
    throw err;
  }
}

/**
 * Whether key `kid`, which signed a binding token, is still published (KeyRing.verificationKey: as last read, read again
 * when that is older than KEY_RELOAD_MS). A socket stays bound after its token expires, so a binding is a verification
 * kept: it ends with its key, as a verified access token does, and a rotation with --compromised (the key withdrawn)
 * ends every binding its tokens made, in every process within a minute.
 */
export async function signedByPublishedKey(deps: AuthDeps, kid: string): Promise<boolean> {
  return (await deps.keys.verificationKey(kid)) !== null;
}
