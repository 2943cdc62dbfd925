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

export interface KeyRing {
  /** Creates a key for every algorithm without an active one; loads the rest. Call at start. */
  init(): Promise<void>;
  /** The active key for `alg` as last loaded. */
  signingKey(alg: SigningAlg): LoadedKey;
  /**
   * The active key for `alg`, reloading from the database first when the last load is older than a
   * minute, so a rotation by another process (`cinder keys rotate`) takes effect everywhere.
   */
  currentKey(alg: SigningAlg): Promise<LoadedKey>;
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
  /** The published JWK Set (active keys and retired ones still within the longest token lifetime). */
  jwks(): Promise<{ keys: JWK[] }>;
  /** Adds new active keys and retires the old ones (which stay published until their tokens expire). */
  rotate(): Promise<string[]>;
}

const ALGS: SigningAlg[] = ['ES256', 'RS256'];

/** How often a process re-reads the active keys; retired keys stay published this much longer. */
export const KEY_RELOAD_MS = 60_000;

/** How far the clocks of processes sharing the database may disagree about when something was signed. */
export const SIGNING_SKEW_MS = 60_000;

/**
 * Whether this server may have signed with `key` at `atMs` (epoch ms, a JWT's `iat`): while it was active, or
 * until every process had reloaded the keys after its retirement (KEY_RELOAD_MS, with SIGNING_SKEW_MS between
 * their clocks). A statement dated later was not signed here: it was forged with a key retired for a leak.
 */
export function mayHaveSigned(key: SigningKey, atMs: number): boolean {
  return key.retiredAt === null || atMs <= key.retiredAt + KEY_RELOAD_MS + SIGNING_SKEW_MS;
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
  const active = new Map<SigningAlg, LoadedKey>();
  const publishedSince = () => clock.now() - maxTokenTtl * 1000 - 2 * KEY_RELOAD_MS;
  let lastReload = 0;
  let reloading: Promise<void> | null = null;

  async function reload(): Promise<SigningKey[]> {
    lastReload = clock.now();
    const records = await store.keys.list(publishedSince());
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
    active.clear();
    for (const r of records) {
      const alg = r.alg as SigningAlg;
      if (r.retiredAt === null && !active.has(alg)) active.set(alg, loaded.get(r.kid)!);
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

  /** Whether `k`, as last read, is published: still listed (reload) and active or retired within the publication. */
  const publishedNow = (k: LoadedKey) => loaded.get(k.record.kid) === k && (k.record.retiredAt === null || k.record.retiredAt >= publishedSince());

  function isPublished(k: LoadedKey): SyncOrAsync<boolean> {
    if (!stale(clock.now())) return publishedNow(k);
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
    if (!loaded.has(kid) && now - lastReload > 1000) await reloadShared();
    else if (loaded.has(kid) && stale(now)) {
      // A key already loaded is judged by its record as last read when the database cannot be read now (an outage):
      // what needs no database (a token verified for a terminology request) goes on; a call past the next interval reads again.
      await reloadShared().catch(() => undefined);
    }
    const k = loaded.get(kid);
    return k && publishedNow(k) ? k : null;
  }

  function signingKey(alg: SigningAlg): LoadedKey {
    const k = active.get(alg);
    if (!k) throw new Error(`no active ${alg} signing key; KeyRing.init() was not called`);
    return k;
  }

  return {
    async init() {
      await reload();
      const missing = ALGS.filter((a) => !active.has(a));
      if (missing.length > 0) {
        await addKeys(missing);
        await reload();
      }
    },
    signingKey,
    async currentKey(alg) {
      if (stale(clock.now())) await reloadShared();
      return signingKey(alg);
    },
    verificationKey: published,
    isPublished,
    key: published,
    async jwks() {
      const records = await store.keys.list(publishedSince());
      return { keys: records.map((r) => r.publicJwk) };
    },
    async rotate() {
      // Every key not yet retired, not only the one of each algorithm signing now: two processes' first start, or two
      // rotations, at once leave two, and the one left out stayed trusted for good.
      const old = (await reload()).filter((r) => r.retiredAt === null).map((r) => r.kid);
      const kids = await addKeys(ALGS);
      await store.keys.retire(old, clock.now());
      await reload();
      return kids;
    },
  };
}
