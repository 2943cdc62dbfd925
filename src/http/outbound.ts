/**
 * Outbound HTTP to URLs that API clients choose (rest-hook deliveries, `$import` inputs), safe from DNS
 * rebinding: the host name is resolved once, its addresses are checked (endpoint.ts hostAddresses), and
 * the request is sent to the first of them, so the address connected to is the one checked; no second
 * resolution for a hostile DNS server to answer with 127.0.0.1 or 169.254.169.254 (the check at connect
 * time of request-filtering-agent / ssrf-req-filter, done here by pinning the address). The request
 * still names the host: the URL's authority goes in the Host header and, for https, in TLS SNI and the
 * certificate check (Bun's fetch `tls.serverName`), so virtual hosting and certificate verification
 * are as for the name.
 */
import { hostAddresses, type ResolveHost } from '../fhir/subscriptions/endpoint.ts';

/**
 * A request refused before any connection: why (the host's address is private, or it does not resolve).
 * `unresolved`: the name has no address, which no ALLOW_PRIVATE setting changes, so its message names none.
 */
export class RefusedAddress extends Error {
  override name = 'RefusedAddress';
  constructor(message: string, readonly unresolved = false) {
    super(message);
  }
}

export interface OutboundDeps {
  /** The transport (the global fetch; a test double in tests): it gets the pinned address. */
  fetch: typeof fetch;
  resolve: ResolveHost;
  /** Whether private addresses may be connected to (CINDER_SUBSCRIPTION_ALLOW_PRIVATE, CINDER_IMPORT_ALLOW_PRIVATE). */
  allowPrivate: boolean;
}

/** `init` with the options of Bun's fetch (`tls`). */
export type OutboundInit = BunFetchRequestInit;

/** Rejects with `signal`'s reason once it aborts (the resolution of an aborted request is not waited for). */
function settle<T>(work: Promise<T>, signal: AbortSignal | null | undefined): Promise<T> {
  if (!signal) return work;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    signal.addEventListener('abort', abort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

/**
 * Sends `init` to `url` at the address its host resolves to now, checked unless `allowPrivate`. Throws
 * RefusedAddress when the host is, or resolves to, a private address, or does not resolve; otherwise
 * as fetch does. Redirects are the caller's (`redirect: 'manual'`): a Location names a new host, checked
 * by the caller's next call.
 */
export async function outboundFetch(deps: OutboundDeps, url: URL, init: OutboundInit = {}): Promise<Response> {
  const found = await settle(hostAddresses(url, deps.resolve, deps.allowPrivate), init.signal);
  if ('refused' in found) throw new RefusedAddress(found.refused);
  if ('unresolved' in found) throw new RefusedAddress(`its host ${url.hostname} does not resolve`, true);
  const address = found.addresses[0]!;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  // The Host is always the URL's authority, whatever the caller's headers say (a Subscription's channel.header stored
  // before activation refused one): another would choose a virtual host behind the address checked that the name did not.
  const headers = new Headers(init.headers);
  headers.set('host', url.host);
  if (address === host) return deps.fetch(url, { ...init, headers });
  const pinned = new URL(url);
  pinned.hostname = address.includes(':') ? `[${address}]` : address;
  // A setter given what is no host leaves the name: never send it to be resolved again.
  if (pinned.hostname === url.hostname) throw new RefusedAddress(`its host ${host} resolves to ${address}, which is no address a URL can hold`);
  const tls = url.protocol === 'https:' ? { tls: { ...init.tls, serverName: host } } : {};
  return deps.fetch(pinned, { ...init, headers, ...tls });
}
