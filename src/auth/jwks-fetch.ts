import type { JSONWebKeySet } from 'jose';
import type { Clock } from '../clock.ts';
import { systemResolve, type ResolveHost } from '../fhir/subscriptions/endpoint.ts';
import { outboundFetch, RefusedAddress } from '../http/outbound.ts';
import { decodeUtf8, NotUtf8Error } from '../fhir/utf8.ts';

export class JwksFetchError extends Error {
  override name = 'JwksFetchError';
}

export interface JwksFetcher {
  /**
   * The JWK Set at `url`, from cache while its Cache-Control allows. `refresh` asks for a new copy
   * (an unknown `kid`); it is honoured at most once per `minRefetchMs` per URL.
   */
  get(url: string, refresh?: boolean): Promise<JSONWebKeySet>;
}

export interface JwksFetcherOptions {
  fetch?: typeof fetch;
  /** How host names resolve (the system resolver by default). */
  resolve?: ResolveHost;
  /**
   * Whether a JWK Set may be fetched from a loopback, link-local or private address (CINDER_JWKS_ALLOW_PRIVATE);
   * false by default: the host is resolved once and the request sent to the address checked (src/http/outbound.ts).
   */
  allowPrivate?: boolean;
  timeoutMs?: number;
  maxBytes?: number;
  /** Cache lifetime when the response says nothing (seconds). */
  defaultMaxAge?: number;
  /** Upper bound on any cache lifetime (seconds). */
  maxMaxAge?: number;
  minRefetchMs?: number;
  /** No new download for this long after a failed one (ms), doubled at each failure in a row up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
}

interface Entry {
  jwks: JSONWebKeySet;
  fetchedAt: number;
  expiresAt: number;
}

/** A URL's downloads: its last good copy, when one was last tried, and the failures since the last success. */
interface UrlState {
  good?: Entry;
  attemptedAt: number;
  failures: number;
  /** No download before this time (after a failure). */
  retryAt: number;
  lastError?: unknown;
}

/** Seconds a response may be cached: `no-store`/`no-cache` -> 0, `max-age` (bounded), else the default. */
export function cacheSeconds(header: string | null, fallback: number, max: number): number {
  const cc = (header ?? '').toLowerCase();
  if (/(^|[\s,])(no-store|no-cache)\b/.test(cc)) return 0;
  const m = /(?:^|[\s,])(?:s-)?max-age\s*=\s*"?(\d+)/.exec(cc);
  return Math.min(m ? Number(m[1]) : fallback, max);
}

/**
 * The body of `res` as text, read no further than `maxBytes` (a chunked body announces no length: read
 * whole, a host could make Cinder buffer whatever it sends for as long as the timeout lets it).
 */
async function boundedText(res: Response, maxBytes: number, url: string): Promise<string> {
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => undefined);
        throw new JwksFetchError(`the JWK Set at ${url} exceeds ${maxBytes} bytes`);
      }
      chunks.push(value);
    }
  } catch (err) {
    if (err instanceof JwksFetchError) throw err;
    throw new JwksFetchError(`reading the JWK Set at ${url} failed`, { cause: err });
  }
  try {
    return decodeUtf8(Buffer.concat(chunks));
  } catch (err) {
    if (!(err instanceof NotUtf8Error)) throw err;
    // JSON is UTF-8 (RFC 8259 8.1): a key id read with U+FFFD for its bytes would match no assertion's `kid`.
    throw new JwksFetchError(`the JWK Set at ${url} is not valid UTF-8: ${err.message}`, { cause: err });
  }
}

/** How a JWK Set is downloaded: the transport, and whether the address is checked (see JwksFetcherOptions). */
interface Transport {
  fetch: typeof fetch;
  resolve: ResolveHost;
  allowPrivate: boolean;
}

/**
 * One request for the JWK Set at `url`: unless private addresses are allowed, to the address its host resolves
 * to once, refused when that is loopback, link-local or private (SSRF: the cloud metadata address, services
 * on the internal network; the name's owner may answer DNS with any address at any time).
 */
function request(t: Transport, url: string, init: RequestInit): Promise<Response> {
  return t.allowPrivate ? t.fetch(url, init) : outboundFetch(t, new URL(url), init);
}

async function download(t: Transport, url: string, timeoutMs: number, maxBytes: number): Promise<{ jwks: JSONWebKeySet; cacheControl: string | null }> {
  let res: Response;
  try {
    res = await request(t, url, { signal: AbortSignal.timeout(timeoutMs), redirect: 'error', headers: { Accept: 'application/json' } });
  } catch (err) {
    if (err instanceof RefusedAddress) {
      // A name without an address is not helped by allowing private ones.
      const hint = err.unresolved ? '' : ' (CINDER_JWKS_ALLOW_PRIVATE=true allows it)';
      throw new JwksFetchError(`the JWK Set at ${url} is refused: ${err.message}${hint}`, { cause: err });
    }
    throw new JwksFetchError(`fetching the JWK Set at ${url} failed`, { cause: err });
  }
  if (res.status !== 200) throw new JwksFetchError(`the JWK Set at ${url} answered HTTP ${res.status}`);
  if (Number(res.headers.get('content-length') ?? 0) > maxBytes) {
    await res.body?.cancel();
    throw new JwksFetchError(`the JWK Set at ${url} exceeds ${maxBytes} bytes`);
  }
  const text = await boundedText(res, maxBytes, url);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new JwksFetchError(`the JWK Set at ${url} is not JSON`, { cause: err });
  }
  const keys = (body as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'object' && k !== null)) {
    throw new JwksFetchError(`the document at ${url} is not a JWK Set`);
  }
  return { jwks: { keys } as JSONWebKeySet, cacheControl: res.headers.get('cache-control') };
}

/**
 * Fetches clients' registered JWK Set URLs (SMART Backend Services): never from a loopback, link-local or
 * private address unless allowed (checked on the address connected to), with a timeout, a size limit, no
 * redirects, cached per Cache-Control, concurrent requests for one URL sharing one download. When a
 * download fails, the last good copy is used, and no new download is tried for a back-off (`backoffMs`,
 * doubling while they keep failing, up to `maxBackoffMs`): a host that is down or does not answer would
 * otherwise hold each token request of its clients for the timeout. During the back-off a client without
 * a good copy is refused at once. A forced refresh (an unknown `kid`) is tried at most once per `minRefetchMs`
 * after the last download tried, and not during a back-off.
 */
export function createJwksFetcher(clock: Clock, o: JwksFetcherOptions = {}): JwksFetcher {
  const transport: Transport = { fetch: o.fetch ?? fetch, resolve: o.resolve ?? systemResolve, allowPrivate: o.allowPrivate ?? false };
  const timeoutMs = o.timeoutMs ?? 5000;
  const maxBytes = o.maxBytes ?? 256 * 1024;
  const minRefetchMs = o.minRefetchMs ?? 10_000;
  const backoffMs = o.backoffMs ?? 2_000;
  const maxBackoffMs = o.maxBackoffMs ?? 60_000;
  const states = new Map<string, UrlState>();
  const inflight = new Map<string, Promise<Entry>>();

  async function load(url: string, state: UrlState): Promise<Entry> {
    state.attemptedAt = clock.now();
    try {
      const { jwks, cacheControl } = await download(transport, url, timeoutMs, maxBytes);
      const now = clock.now();
      state.good = { jwks, fetchedAt: now, expiresAt: now + cacheSeconds(cacheControl, o.defaultMaxAge ?? 300, o.maxMaxAge ?? 86400) * 1000 };
      state.failures = 0;
      state.retryAt = 0;
      state.lastError = undefined;
      return state.good;
    } catch (err) {
      state.retryAt = clock.now() + Math.min(maxBackoffMs, backoffMs * 2 ** state.failures);
      state.failures++;
      state.lastError = err;
      if (state.good) return state.good;
      throw err;
    }
  }

  return {
    async get(url, refresh = false) {
      const now = clock.now();
      let state = states.get(url);
      if (!state) states.set(url, (state = { attemptedAt: -Infinity, failures: 0, retryAt: 0 }));
      const good = state.good;
      if (good && !refresh && now < good.expiresAt) return good.jwks;
      if (now < state.retryAt) {
        if (good) return good.jwks;
        const wait = Math.ceil((state.retryAt - now) / 1000);
        throw new JwksFetchError(`the JWK Set at ${url} could not be fetched; not tried again for ${wait} s`, { cause: state.lastError });
      }
      if (good && refresh && now - state.attemptedAt < minRefetchMs) return good.jwks;
      let pending = inflight.get(url);
      if (!pending) {
        pending = load(url, state).finally(() => inflight.delete(url));
        inflight.set(url, pending);
      }
      return (await pending).jwks;
    },
  };
}
