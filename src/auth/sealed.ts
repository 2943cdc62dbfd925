import { createCipheriv, createDecipheriv, createHmac, hkdfSync } from 'node:crypto';
import type { SigningKey } from '../store/types.ts';
import type { KeyRing, LoadedKey } from './keys.ts';

/**
 * Values the server hands out and reads back itself, opaque to everyone else (a sorted search's place in
 * its `_cursor`): AES-256-GCM (NIST SP 800-38D) under a key derived with HKDF-SHA256 (RFC 5869) from the
 * private half of the active ES256 signing key kept in the database, its `info` naming the purpose. So every
 * process sharing the database derives the same key, it survives restarts, and a key rotation retires it with
 * the signing key (a value sealed under a key no longer published no longer opens). A value reads
 * `{kid}.{base64url(iv || ciphertext || tag)}`: the kid (published in the JWK Set anyway) names the key.
 * The IV is synthetic (RFC 5297's idea): an HMAC-SHA256 of the context and plaintext under a second derived
 * key, so that one plaintext seals alike each time (the same search gives the same links) and an IV repeats
 * only with its plaintext, which GCM allows (what repeats then is the whole value, telling only that equality).
 */
export interface Sealer {
  /**
   * `plaintext` sealed, bound to `context` (authenticated, not encrypted: a search cursor's tenant, type and caller), under
   * the key signing at `at` (epoch ms, now by default): give the time the plaintext is dated with, if it is (openSigned).
   */
  seal(plaintext: string, context: string, at?: number): Promise<string>;
  /**
   * The plaintext of a value this server sealed with `context`, or undefined for any other (altered, sealed
   * with another context or for another purpose, under a key no longer published, or no sealed value at all).
   */
  open(value: string, context: string): Promise<string | undefined>;
  /**
   * As open, with the key it was sealed under: a value dated in its plaintext is taken only when its key may have sealed
   * it then (mayHaveSigned), as a signed statement is, since one dated later was sealed with a leaked key.
   */
  openSigned(value: string, context: string): Promise<{ plaintext: string; key: SigningKey } | undefined>;
}

const IV_BYTES = 12;
const TAG_BYTES = 16;
const KID = /^[A-Za-z0-9_-]{1,64}$/;
const BODY = /^[A-Za-z0-9_-]+$/;

/** A sealer for `purpose` (a label of its own per kind of value: two purposes' keys differ). */
export function createSealer(keys: KeyRing, purpose: string): Sealer {
  // One derivation per signing key and process (HKDF is cheap, but a page should cost one AES-GCM alone).
  const derived = new Map<string, { enc: Buffer; iv: Buffer }>();
  const keyOf = (k: LoadedKey): { enc: Buffer; iv: Buffer } => {
    let key = derived.get(k.record.kid);
    if (key === undefined) {
      const d = k.record.privateJwk.d;
      if (typeof d !== 'string') throw new Error(`signing key ${k.record.kid} has no private part`);
      const okm = Buffer.from(hkdfSync('sha256', Buffer.from(d, 'base64url'), Buffer.from(k.record.kid), `cinder sealed value: ${purpose}`, 64));
      key = { enc: okm.subarray(0, 32), iv: okm.subarray(32) };
      derived.set(k.record.kid, key);
    }
    return key;
  };
  async function openSigned(value: string, context: string): Promise<{ plaintext: string; key: SigningKey } | undefined> {
    const dot = value.indexOf('.');
    const kid = value.slice(0, dot);
    const rest = value.slice(dot + 1);
    if (dot < 0 || !KID.test(kid) || !BODY.test(rest)) return undefined;
    const body = Buffer.from(rest, 'base64url');
    if (body.length < IV_BYTES + TAG_BYTES) return undefined;
    const k = await keys.key(kid);
    if (k === null || k.record.alg !== 'ES256') return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', keyOf(k).enc, body.subarray(0, IV_BYTES), { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(context));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      const plaintext = Buffer.concat([decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)), decipher.final()]).toString('utf8');
      return { plaintext, key: k.record };
    } catch {
      // The tag does not verify: altered, another context's, another purpose's.
      return undefined;
    }
  }
  return {
    async seal(plaintext, context, at) {
      const k = await keys.currentKey('ES256', at);
      const key = keyOf(k);
      const iv = createHmac('sha256', key.iv).update(context).update('\0').update(plaintext).digest().subarray(0, IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key.enc, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(Buffer.from(context));
      const body = Buffer.concat([iv, cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
      return `${k.record.kid}.${body.toString('base64url')}`;
    },
    async open(value, context) {
      return (await openSigned(value, context))?.plaintext;
    },
    openSigned,
  };
}
