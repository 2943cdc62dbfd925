import { exportJWK, generateKeyPair, importJWK, type CryptoKey, type JWK } from 'jose';
import type { Clock } from '../clock.ts';
import type { SigningKey, Store } from '../store/types.ts';
import type { SyncOrAsync } from '../sync-or-async.ts';
import { randomToken } from './secrets.ts';

/** Algorithms Cinder signs with: ES256 for access tokens (fast), RS256 for id_tokens (OIDC's default). */
export type SigningAlg = 'ES256' | 'RS256';

export interface LoadedKey {
  record: SigningKey;
  privateKey: CryptoKey;
  publicKey: CryptoKey;
}

/**
 * How a rotation hands over: `delayMs` after it the new keys start signing (they are published at once, so that
 * relying parties caching the JWK Set have them before any token they sign; at least MIN_ROTATION_DELAY_MS).
 * `compromised`: the old keys' private parts may have leaked, so they are withdrawn at once (no longer published,
 * nothing they signed is taken) and the new keys sign at once; every token signed before is refused.
 */
export type RotateOptions = { delayMs: number; compromised?: false } | { compromised: true };

export interface KeyRing {
  /** Creates a key for every algorithm without one that is not retired; loads the rest. Call at start. */
  init(): Promise<void>;
  /** The key signing for `alg` at `at` (epoch ms, now by default) as last loaded (signingAt). */
  signingKey(alg: SigningAlg, at?: number): LoadedKey;
  /**
   * The key signing for `alg` at `at` (now by default; give the time a statement is dated with, so that its date
   * and its key agree), reloading from the database first when the last load is older than a minute, so a
   * rotation by another process (`cinder keys rotate`) is seen everywhere before its new keys are to sign.
   */
  currentKey(alg: SigningAlg, at?: number): Promise<LoadedKey>;
  /**
   * The key `kid` to verify with, while it is published (active, or retired within the longest token lifetime),
   * reloading from the database once for a kid this process has not seen; null otherwise. A key retired longer
   * ago signed nothing still valid, so nothing it signs is taken (a leaked key is rotated out in every process,
   * not only in those started since).
   */
  verificationKey(kid: string): Promise<LoadedKey | null>;
  /**
   * Whether a key `verificationKey` gave is still published: as this process last read the keys, read again first
   * when that is older than KEY_RELOAD_MS (a retirement by another process), so what it verified before is not taken
   * once its key is not. At once in the steady state; with the keys as last read when they cannot be read again.
   */
  isPublished(key: LoadedKey): SyncOrAsync<boolean>;
  /**
   * The key `kid` with its private half, while it is published (active, or retired within the longest token
   * lifetime): reloading from the database once for a kid this process has not seen; null otherwise.
   */
  key(kid: string): Promise<LoadedKey | null>;
  /** The published JWK Set (keys about to sign, signing, and retired ones still within the longest token lifetime). */
  jwks(): Promise<{ keys: JWK[] }>;
  /**
   * Adds new keys (published at once) and schedules the retirement of the old ones when the new ones are to sign
   * (they stay published until their tokens expire); with `compromised`, withdraws the old ones at once instead.
   */
  rotate(options: RotateOptions): Promise<Rotation>;
}

/** What a rotation did: the new keys, when they sign from (epoch ms), and the keys they replace. */
export interface Rotation {
  newKids: string[];
  signsFrom: number;
  /** Keys retired at `signsFrom` (published until their tokens expire), or, when compromised, withdrawn at once. */
  oldKids: string[];
}

const ALGS: SigningAlg[] = ['ES256', 'RS256'];

/** How often a process re-reads the active keys; retired keys stay published this much longer. */
export const KEY_RELOAD_MS = 60_000;

/** How far the clocks of processes sharing the database may disagree about when something was signed. */
export const SIGNING_SKEW_MS = 60_000;

/** How long /oauth2/jwks may be cached (its `Cache-Control: max-age`, seconds). */
export const JWKS_MAX_AGE_S = 300;

/**
 * The shortest hand-over of a rotation: the JWK Set's max-age and a minute of clock skew. A relying party that
 * fetched the set just before the new keys were stored keeps that copy for the max-age it was told; a process whose
 * clock runs up to SIGNING_SKEW_MS ahead starts signing with them that much early. A shorter hand-over had the new
 * keys sign tokens such a relying party refused (it does not fetch the set again for an unknown kid, which nothing
 * requires) until its copy expired. It also covers every process reading the new keys first (KEY_RELOAD_MS and the
 * skew). Shortening the max-age while a rotation is pending would not do: the copies fetched before it keep theirs.
 */
export const MIN_ROTATION_DELAY_MS = Math.max(JWKS_MAX_AGE_S * 1000, KEY_RELOAD_MS) + SIGNING_SKEW_MS;

/**
 * The hand-over of `cinder keys rotate` by default: twice the time /oauth2/jwks may be cached (JWKS_MAX_AGE_S), so
 * a relying party that refetches the JWK Set as told has the new keys before anything is signed with them.
 */
export const DEFAULT_ROTATION_DELAY_MS = 2 * JWKS_MAX_AGE_S * 1000;

/**
 * Whether this server may have signed with `key` at `atMs` (epoch ms, a JWT's `iat`): before its retirement. Every
 * process picks the key to sign with for the very time it dates the statement with (signingAt: the one retiring
 * soonest, not retired at that time), so nothing signed here with a retired key is dated at or after its retirement,
 * whatever the processes' clocks; a statement so dated was forged with the key (one retired for a leak).
 */
export function mayHaveSigned(key: SigningKey, atMs: number): boolean {
  return key.retiredAt === null || atMs < key.retiredAt;
}

/**
 * The key of `alg` signing at `at` among `keys`: of those not retired by then, the one retiring soonest (a rotation
 * schedules the old key's retirement for when the new one is to sign), the oldest of those not retired at all (two
 * processes' first start at once, or a rotation interrupted between adding its keys and retiring the old ones).
 */
export function signingAt<K extends { record: SigningKey }>(keys: Iterable<K>, alg: SigningAlg, at: number): K | undefined {
  let best: K | undefined;
  const order = (k: K) => k.record.retiredAt ?? Number.POSITIVE_INFINITY;
  for (const k of keys) {
    const r = k.record;
    if (r.alg !== alg || (r.retiredAt !== null && r.retiredAt <= at)) continue;
    if (!best || order(k) < order(best) || (order(k) === order(best) && r.createdAt < best.record.createdAt)) best = k;
  }
  return best;
}

async function newKey(alg: SigningAlg, now: number): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const kid = randomToken(12);
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
  const privateJwk = { ...(await exportJWK(privateKey)), kid, alg };
  return { kid, alg, privateJwk, publicJwk, createdAt: now, retiredAt: null };
}

async function load(record: SigningKey): Promise<LoadedKey> {
  return {
    record,
    privateKey: (await importJWK(record.privateJwk, record.alg)) as CryptoKey,
    publicKey: (await importJWK(record.publicJwk, record.alg)) as CryptoKey,
  };
}

/**
 * Signing keys kept in the database (so every process shares them) and cached in memory.
 * `maxTokenTtl` bounds how long a retired key stays published.
 */
export function createKeyRing(store: Store, clock: Clock, maxTokenTtl: number): KeyRing {
  const loaded = new Map<string, LoadedKey>();
  const publishedSince = () => clock.now() - maxTokenTtl * 1000 - 2 * KEY_RELOAD_MS;
  /** When the keys were last read (the read's start), and when a read was last tried (the same, unless it failed since). */
  let lastReload = 0;
  let lastAttempt = 0;
  let reloading: Promise<void> | null = null;

  async function reload(): Promise<SigningKey[]> {
    const started = clock.now();
    lastAttempt = started;
    const records = await store.keys.list(publishedSince());
    // Only a read that succeeded counts: a failed one counted as read left the keys unread for another interval, so a
    // process whose read failed shortly after a rotation went on signing with the old key past the hand-over.
    lastReload = started;
    const listed = new Set(records.map((r) => r.kid));
    // A key loaded before and no longer listed was retired (by another process, maybe while this one read nothing)
    // longer ago than it stays published: forgotten, so nothing it signs is taken (isPublished, published).
    for (const kid of loaded.keys()) if (!listed.has(kid)) loaded.delete(kid);
    for (const r of records) {
      // A key loaded before keeps its imported halves and takes the record as it is now (retired since, say).
      const known = loaded.get(r.kid);
      if (known) known.record = r;
      else loaded.set(r.kid, await load(r));
    }
    return records;
  }

  async function addKeys(algs: SigningAlg[]): Promise<string[]> {
    const kids: string[] = [];
    for (const alg of algs) {
      const k = await newKey(alg, clock.now());
      await store.keys.add(k);
      kids.push(k.kid);
    }
    return kids;
  }

  /** Reads the keys again, once for every caller meanwhile. */
  function reloadShared(): Promise<void> {
    reloading ??= reload().then(() => undefined).finally(() => (reloading = null));
    return reloading;
  }

  /** Whether the keys as last read are older than KEY_RELOAD_MS (or the clock went back). */
  const stale = (now: number) => now - lastReload > KEY_RELOAD_MS || now < lastReload;

  /**
   * Whether a read tried within the last second failed: verifying then goes on with the keys as last read rather than
   * waiting on the database at each call (an outage); signing reads them again whatever (currentKey). A read still
   * under way has not failed: a call meanwhile waits for it (reloadShared). Taken for a failure, as it was (its
   * attempt newer than the last read), it let every request verified during the read after a `--compromised`
   * rotation pass with a withdrawn key: the audit trail's verification of a request started the read, and the
   * FHIR gate's of the same request, moments later, took the keys as last read.
   */
  const justFailed = (now: number) => reloading === null && lastAttempt > lastReload && now - lastAttempt < 1000 && now >= lastAttempt;

  /** Whether `k`, as last read, is published: still listed (reload) and active or retired within the publication. */
  const publishedNow = (k: LoadedKey) => loaded.get(k.record.kid) === k && (k.record.retiredAt === null || k.record.retiredAt >= publishedSince());

  function isPublished(k: LoadedKey): SyncOrAsync<boolean> {
    const now = clock.now();
    if (!stale(now) || justFailed(now)) return publishedNow(k);
    // As in published: the keys as last read when they cannot be read now (an outage).
    return reloadShared().catch(() => undefined).then(() => publishedNow(k));
  }

  /**
   * The key `kid` while it is published: loaded once when unseen, and its record read again when the last read is
   * older than KEY_RELOAD_MS (a retirement by another process). A process keeps the keys it loaded, one started
   * later reads only those still published: alike in both.
   */
  async function published(kid: string): Promise<LoadedKey | null> {
    const now = clock.now();
    if (!loaded.has(kid) && now - lastAttempt > 1000) await reloadShared();
    else if (loaded.has(kid) && stale(now) && !justFailed(now)) {
      // A key already loaded is judged by its record as last read when the database cannot be read now (an outage):
      // what needs no database (a token verified for a terminology request) goes on; a call past the next interval reads again.
      await reloadShared().catch(() => undefined);
    }
    const k = loaded.get(kid);
    return k && publishedNow(k) ? k : null;
  }

  function signingKey(alg: SigningAlg, at = clock.now()): LoadedKey {
    const k = signingAt(loaded.values(), alg, at);
    if (!k) throw new Error(`no ${alg} signing key at ${new Date(at).toISOString()}; KeyRing.init() was not called`);
    return k;
  }

  return {
    async init() {
      const records = await reload();
      const missing = ALGS.filter((a) => !records.some((r) => r.alg === a && r.retiredAt === null));
      if (missing.length > 0) {
        await addKeys(missing);
        await reload();
      }
    },
    signingKey,
    async currentKey(alg, at = clock.now()) {
      if (stale(clock.now())) await reloadShared();
      return signingKey(alg, at);
    },
    verificationKey: published,
    isPublished,
    key: published,
    async jwks() {
      const records = await store.keys.list(publishedSince());
      return { keys: records.map((r) => r.publicJwk) };
    },
    async rotate(options) {
      const compromised = options.compromised === true;
      const delayMs = options.compromised === true ? 0 : options.delayMs;
      if (!compromised && !(Number.isInteger(delayMs) && delayMs >= MIN_ROTATION_DELAY_MS)) {
        throw new RangeError(`a rotation's hand-over takes at least ${MIN_ROTATION_DELAY_MS / 1000} seconds (the JWK Set's max-age and a minute of clock skew)`);
      }
      // Every key not yet retired, not only the one of each algorithm signing now: two processes' first start, or two
      // rotations, at once leave two, and the one left out stayed trusted for good. With them, those a rotation whose
      // hand-over is still ahead retires (it and its keys signing next): retired at this hand-over unless theirs comes
      // first, or the keys signing now went on signing until the later hand-over, whatever this one said. Compromised:
      // every key there is.
      const startedAt = clock.now();
      const old = compromised
        ? (await store.keys.list(0)).map((r) => r.kid)
        : (await reload()).filter((r) => r.retiredAt === null || r.retiredAt > startedAt).map((r) => r.kid);
      // Added before the old ones are retired: until then (and if this stops between the two), the oldest key not
      // retired goes on signing (signingAt), and the new ones are published.
      const kids = await addKeys(ALGS);
      // The hand-over counts from when the new keys are in the database (generating an RSA key takes a while), so every
      // process reads them at least MIN_ROTATION_DELAY_MS before they sign.
      const signsFrom = clock.now() + delayMs;
      if (compromised) await store.keys.remove(old);
      else await store.keys.retire(old, signsFrom);
      await reload();
      return { newKids: kids, signsFrom, oldKids: old };
    },
  };
}
