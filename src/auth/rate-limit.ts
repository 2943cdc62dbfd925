import { isIPv4, isIPv6 } from 'node:net';
import type { Clock } from '../clock.ts';
import type { Config } from '../config.ts';
import { OAuthError } from '../errors.ts';
import { sha256Hex } from './secrets.ts';
import type { Store } from '../store/types.ts';

/** Answers whether one more request under `key` is allowed; when not, how many seconds until it is. */
export interface Limiter {
  hit(key: string): { ok: true } | { ok: false; retryAfter: number };
}

const ALLOW: Limiter = { hit: () => ({ ok: true }) };

/**
 * A per-process fixed-window counter (`limit` hits per `windowMs` per key). Memory is bounded: past
 * `maxKeys` keys the expired windows are dropped, and if that is not enough, all of them.
 */
export function createMemoryLimiter(clock: Clock, limit: number, windowMs: number, maxKeys = 100_000): Limiter {
  const windows = new Map<string, { count: number; resetAt: number }>();
  function prune(now: number) {
    for (const [k, w] of windows) if (w.resetAt <= now) windows.delete(k);
    if (windows.size >= maxKeys) windows.clear();
  }
  return {
    hit(key) {
      const now = clock.now();
      let w = windows.get(key);
      if (!w || w.resetAt <= now) {
        if (!w && windows.size >= maxKeys) prune(now);
        w = { count: 0, resetAt: now + windowMs };
        windows.set(key, w);
      }
      w.count++;
      if (w.count <= limit) return { ok: true };
      return { ok: false, retryAfter: Math.max(1, Math.ceil((w.resetAt - now) / 1000)) };
    },
  };
}

/** `limit` hits per minute per key, counted in this process; none with `CINDER_RATE_LIMITS=off`. */
export function perMinute(config: Config, clock: Clock, limit: number): Limiter {
  return config.rateLimits === 'off' ? ALLOW : createMemoryLimiter(clock, limit, 60_000);
}

/** The rate limits of the authorization server (all no-ops with `CINDER_RATE_LIMITS=off`). */
export interface RateLimits {
  /** Token, revocation and introspection requests per IP (before client authentication), keyed by rateLimitKey. */
  tokenIp: Limiter;
  /** The same per authenticated client (a public one per client and IP), keyed by clientLimitKey. */
  tokenClient: Limiter;
  /** Login page requests per IP, keyed by rateLimitKey. */
  loginIp: Limiter;
  /** Failed sign-ins per user and address, per user, per IP and per device cookie, in the database so every process shares them. */
  loginFailures: LoginThrottle;
}

/** The eight 16-bit groups of an IPv6 address (valid per isIPv6, zone removed), an embedded IPv4 tail included. */
function ipv6Groups(address: string): number[] {
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(address);
  const text = v4 ? `${address.slice(0, v4.index)}${((+v4[1]! << 8) | +v4[2]!).toString(16)}:${((+v4[3]! << 8) | +v4[4]!).toString(16)}` : address;
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const parse = (part: string | undefined) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const before = parse(head);
  const after = parse(tail);
  return [...before, ...Array<number>(8 - before.length - after.length).fill(0), ...after];
}

/**
 * Whether IPv6 groups `g` carry an IPv4 host's address in their last 32 bits: IPv4-mapped (::ffff:0:0/96),
 * IPv4-compatible (::/96, deprecated; not :: and ::1 themselves), IPv4-translated (::ffff:0:0:0/96, RFC 2765)
 * and NAT64 (64:ff9b::/96, and the local-use 64:ff9b:1::/48 of RFC 8215), as endpoint.ts reads them. Behind a
 * NAT64 or SIIT translator every IPv4 client shares the translator's /96: counted by its /64 they were one.
 */
function embedsIPv4(g: number[]): boolean {
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && g[5] === 0xffff) return true;
  if (zero(0, 6)) return g[6] !== 0;
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return true;
  return g[0] === 0x64 && g[1] === 0xff9b && (zero(2, 6) || g[2] === 1);
}

/**
 * The key an address is rate limited under: an IPv4 address itself (an IPv6 form that carries one too: embedsIPv4),
 * an IPv6 address its /64. One host is routed a whole /64 (RFC 6177, RFC 7421: the smallest subnet, and SLAAC hands
 * out addresses in it at will), so counting each IPv6 address alone gave one client 2^64 budgets of failed
 * sign-ins and token requests; a 6to4 or Teredo address is the IPv4 address it carries (a 6to4 host has 2^16 /64s,
 * and Teredo's /64 is its relay server's, shared by all its clients). Anything else (`unknown`) is its own key, as
 * are :: and ::1.
 */
export function rateLimitKey(ip: string): string {
  const address = ip.replace(/^\[(.*)\]$/, '$1').replace(/%.*$/, '');
  if (isIPv4(address) || !isIPv6(address)) return ip;
  const g = ipv6Groups(address.toLowerCase());
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  if (embedsIPv4(g)) return v4(g[6]!, g[7]!);
  // 6to4 (2002::/16, RFC 3056): the IPv4 host's address in groups 1-2, and 2^16 /64s of its own to send from.
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  // Teredo (2001::/32, RFC 4380): the client's public IPv4 address, inverted, in the last 32 bits; the /64 is its server's.
  if (g[0] === 0x2001 && g[1] === 0) return v4(g[6]! ^ 0xffff, g[7]! ^ 0xffff);
  if (g.slice(0, 7).every((x) => x === 0)) return `::${g[7]!.toString(16)}`;
  return `${g.slice(0, 4).map((x) => x.toString(16)).join(':')}::/64`;
}

/**
 * The key a client's token, revocation and introspection requests are counted under (`tokenClient`): its id, and
 * for a public client (`method` none) its id and the address (rateLimitKey). A public client authenticates by naming
 * itself, and its id is no secret (it is in the app's pages), so counted by id alone one address sending bogus
 * requests naming it spent the budget of every user of the app.
 */
export function clientLimitKey(clientId: string, method: string, ip: string | undefined): string {
  return method === 'none' ? `${clientId} ${rateLimitKey(ip ?? 'unknown')}` : clientId;
}

/** Throws the 429 `OAuthError` of a refused hit. */
export function enforce(limiter: Limiter, key: string): void {
  const r = limiter.hit(key);
  if (!r.ok) {
    throw new OAuthError('temporarily_unavailable', 'too many requests; retry later', 429, { 'Retry-After': String(r.retryAfter) });
  }
}

/** Where a sign-in attempt comes from: the client address, and the browser's device id for the user, if it holds one. */
export interface AttemptSource {
  ip: string;
  /** The id of a device cookie this browser holds for the user (src/auth/device-cookie.ts), or null. */
  device: string | null;
}

export interface LoginThrottle {
  /**
   * Counts a sign-in attempt before its password is checked, so that attempts made at once are counted as they
   * arrive (counted after the check, a burst of them all passed the check of a count none of them had raised yet).
   * Seconds to wait when one of its counts is past its limit (the attempt is then taken back, and the password is
   * not checked); null when it may proceed. A proceeding attempt stays counted as a failure unless `succeeded`
   * follows. An attempt from a browser holding a device cookie of the user is counted under that device and the user's devices in all.
   */
  attempt(tenant: string, username: string, from: AttemptSource): Promise<number | null>;
  /** The attempt's password was right: its failures from where it came are cleared, the other counts take it back. */
  succeeded(tenant: string, username: string, from: AttemptSource): Promise<void>;
}

export const LOGIN_WINDOW_MS = 15 * 60 * 1000;

/** The limits of failed sign-ins per LOGIN_WINDOW_MS (CINDER_LOGIN_FAILURES_*). */
export interface LoginFailureLimits {
  /** Per user and client address (rateLimitKey), and per device cookie. */
  perUserAddress: number;
  /** Per user, from every address without a device cookie of theirs together; and per user, from their device cookies together. */
  perUserTotal: number;
  /** Per client address, whatever the user. */
  perIp: number;
}

/**
 * Failed-login throttling, counted in the database (shared across processes). Counted per user alone, five wrong
 * passwords from anywhere locked the user out for everyone: anyone who knew a username could keep its owner from
 * signing in. So a user's failures are counted per address (one address guessing waits, the user elsewhere does
 * not), bounded per user in all (perUserTotal, higher: many addresses guessing one password slowly), and a
 * browser the user signed in with before (its device cookie, OWASP's answer to this lockout) is counted on its own,
 * so neither guessing from one address nor from many keeps the user out of a browser they use.
 */
export function createLoginThrottle(store: Store, clock: Clock, limits: LoginFailureLimits): LoginThrottle {
  // The username as typed (usernames are case-sensitive: failures at `alice` kept `Alice` waiting), a long one as its
  // digest (any text up to the form's limit is counted, and kept as a key until its window ends).
  const user = (tenant: string, username: string) => `${tenant}:${username.length > 256 ? `sha256:${sha256Hex(username)}` : username}`;
  /** The counters an attempt is counted under, each with its limit, and the one a success clears. */
  function counters(tenant: string, username: string, from: AttemptSource): { keys: [string, number][]; own: string } {
    if (from.device !== null) {
      // The user's devices together are bounded as the other addresses are (perUserTotal, a count of their own): each
      // sign-in gives a new cookie, so whoever once knew the password and kept the cookies of many sign-ins had
      // perUserAddress guesses per cookie after it was changed, beyond any bound per user.
      const own = `login-device:${from.device}`;
      // The username as it is, as the cookie is sealed to it (device-cookie.ts): another user's devices count apart.
      return { keys: [[own, limits.perUserAddress], [`login-user-devices:${user(tenant, username)}`, limits.perUserTotal]], own };
    }
    const own = `login-user-ip:${user(tenant, username)}:${rateLimitKey(from.ip)}`;
    return { keys: [[own, limits.perUserAddress], [`login-user:${user(tenant, username)}`, limits.perUserTotal], [`login-ip:${rateLimitKey(from.ip)}`, limits.perIp]], own };
  }
  return {
    async attempt(tenant, username, from) {
      const now = clock.now();
      const { keys } = counters(tenant, username, from);
      const waits: number[] = [];
      for (const [key, limit] of keys) {
        const c = await store.counters.increment(key, LOGIN_WINDOW_MS, now);
        // The limits are of failures: the limit-th failure may still be tried, the next attempt waits.
        if (c.count > limit && c.resetAt > now) waits.push(c.resetAt);
      }
      if (!waits.length) return null;
      for (const [key] of keys) await store.counters.decrement(key, now);
      return Math.max(1, Math.ceil((Math.max(...waits) - now) / 1000));
    },
    async succeeded(tenant, username, from) {
      const now = clock.now();
      const { keys, own } = counters(tenant, username, from);
      await store.counters.clear(own);
      // Not cleared: a right password here says nothing of the guesses made elsewhere.
      for (const [key] of keys) if (key !== own) await store.counters.decrement(key, now);
    },
  };
}

const NO_THROTTLE: LoginThrottle = { attempt: async () => null, succeeded: async () => undefined };

/** Builds the limits from the configuration (token endpoint limits are per process; see ARCHITECTURE). */
export function createRateLimits(config: Config, store: Store, clock: Clock): RateLimits {
  if (config.rateLimits === 'off') return { tokenIp: ALLOW, tokenClient: ALLOW, loginIp: ALLOW, loginFailures: NO_THROTTLE };
  return {
    tokenIp: createMemoryLimiter(clock, config.tokenRateLimitIp, 60_000),
    tokenClient: createMemoryLimiter(clock, config.tokenRateLimitClient, 60_000),
    loginIp: createMemoryLimiter(clock, config.loginRateLimitIp, 60_000),
    loginFailures: createLoginThrottle(store, clock, {
      perUserAddress: config.loginFailuresUser, perUserTotal: config.loginFailuresUserTotal, perIp: config.loginFailuresIp,
    }),
  };
}
