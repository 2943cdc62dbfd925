/**
 * Where a rest-hook Subscription may deliver: an absolute http(s) URL whose host is not on this machine
 * or its private networks (server-side request forgery), checked when the Subscription is activated and
 * again with each delivery, as DNS may have changed, on the addresses the delivery then connects to
 * (src/http/outbound.ts: no second resolution for a DNS rebinding to answer otherwise);
 * `CINDER_SUBSCRIPTION_ALLOW_PRIVATE=true` lifts the address check (a receiver beside Cinder, tests).
 * `$import` inputs are checked the same way (CINDER_IMPORT_ALLOW_PRIVATE).
 */
import { lookup } from 'node:dns/promises';
import { isIPv4, isIPv6 } from 'node:net';

/** The addresses a host name resolves to. */
export type ResolveHost = (host: string) => Promise<string[]>;

/** How long a resolution may take before the endpoint counts as not resolving. */
export const RESOLVE_TIMEOUT_MS = 3_000;

/** The system resolver (getaddrinfo), every address. */
export const systemResolve: ResolveHost = async (host) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/** An absolute http(s) URL with a host and no credentials, or why not. */
export function endpointUrl(raw: unknown): URL | string {
  if (typeof raw !== 'string' || !URL.canParse(raw)) return 'is not an absolute URL';
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `must be an http or https URL (got ${url.protocol.slice(0, -1)})`;
  if (url.hostname === '') return 'has no host';
  if (url.username !== '' || url.password !== '') return 'must not hold credentials (send them in Subscription.channel.header)';
  return url;
}

function v4Bytes(ip: string): number[] {
  return ip.split('.').map(Number);
}

/** Loopback, "this network", link-local, private, shared (CGNAT), multicast and reserved IPv4 ranges. */
function privateV4(ip: string): boolean {
  const [a, b] = v4Bytes(ip) as [number, number, number, number];
  return a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127) || a >= 224;
}

/** The 8 groups of an IPv6 address as numbers (an embedded IPv4 tail as two groups). */
function v6Groups(ip: string): number[] {
  let text = ip.toLowerCase().split('%')[0]!;
  const tail = text.match(/:(\d+\.\d+\.\d+\.\d+)$/);
  if (tail) {
    const [a, b, c, d] = v4Bytes(tail[1]!) as [number, number, number, number];
    text = text.slice(0, -tail[1]!.length) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const r = rest === undefined ? [] : rest ? rest.split(':') : [];
  const fill = rest === undefined ? [] : Array(8 - h.length - r.length).fill('0');
  return [...h, ...fill, ...r].map((g) => parseInt(g, 16));
}

/** The IPv4 address held by two groups of an IPv6 address. */
const v4Of = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;

/**
 * Unspecified, loopback, link-local (fe80::/10), site-local (fec0::/10, deprecated), unique local (fc00::/7), multicast,
 * and the forms that carry a private IPv4 address to an IPv4 network: IPv4-mapped (::ffff:0:0/96), IPv4-translated
 * (::ffff:0:0:0/96, RFC 2765), NAT64 (64:ff9b::/96, and the local-use 64:ff9b:1::/48 of RFC 8215, its last 32 bits)
 * and 6to4 (2002::/16, RFC 3056).
 */
function privateV6(ip: string): boolean {
  const g = v6Groups(ip);
  if (g.length !== 8 || g.some((x) => Number.isNaN(x))) return true;
  const embedded = v4Of(g[6]!, g[7]!);
  // ::/96: ::, ::1 and the deprecated IPv4-compatible ::a.b.c.d (RFC 4291 2.5.5.1), whose last 32 bits are an IPv4
  // address (::127.0.0.1 is ::7f00:1: the first seven groups are not all zero).
  if (g.slice(0, 6).every((x) => x === 0)) return true;
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return privateV4(embedded);
  if (g.slice(0, 4).every((x) => x === 0) && g[4] === 0xffff && g[5] === 0) return privateV4(embedded);
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return privateV4(embedded);
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return privateV4(embedded);
  if (g[0] === 0x2002) return privateV4(v4Of(g[1]!, g[2]!));
  return (g[0]! & 0xffc0) === 0xfe80 || (g[0]! & 0xffc0) === 0xfec0 || (g[0]! & 0xfe00) === 0xfc00 || (g[0]! & 0xff00) === 0xff00;
}

/** Whether `ip` is on this machine or a private network (the ranges in the README's Subscriptions section); anything unparsable is. */
export function isPrivateAddress(ip: string): boolean {
  if (isIPv4(ip)) return privateV4(ip);
  if (isIPv6(ip)) return privateV6(ip);
  return true;
}

/** What a URL's host came to: the addresses to connect to, a reason to refuse them, or no answer. */
export type HostAddresses = { addresses: string[] } | { refused: string } | { unresolved: true };

/**
 * The addresses of `url`'s host (an IP literal is its own), each checked unless `allowPrivate`: refused
 * when any is loopback, link-local or private, or the host is a `localhost` name (RFC 6761: loopback,
 * whatever a resolver says). One resolution, so that the caller connects to the very addresses checked
 * (src/http/outbound.ts).
 */
export async function hostAddresses(url: URL, resolve: ResolveHost, allowPrivate = false): Promise<HostAddresses> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  // RFC 6761: `localhost` and its subdomains are loopback, whatever a resolver says.
  if (!allowPrivate && /(^|\.)localhost\.?$/i.test(host)) return { refused: `its host ${host} is a loopback name` };
  let addresses: string[];
  if (isIPv4(host) || isIPv6(host)) addresses = [host];
  else {
    try {
      addresses = await Promise.race([
        resolve(host),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timed out')), RESOLVE_TIMEOUT_MS).unref()),
      ]);
    } catch {
      return { unresolved: true };
    }
    if (addresses.length === 0) return { unresolved: true };
  }
  const inside = allowPrivate ? undefined : addresses.find(isPrivateAddress);
  if (inside === undefined) return { addresses };
  return { refused: `its host ${host} ${inside === host ? 'is' : `resolves to ${inside}, which is`} a loopback, link-local or private address` };
}

/**
 * Why `url` is refused at once (its host is or resolves to a private address), or undefined: the checks at
 * a Subscription's activation and an `$import` kick-off. A host that does not resolve is no reason yet: each
 * delivery and fetch resolves it again and is refused then (src/http/outbound.ts).
 */
export async function privateEndpoint(url: URL, resolve: ResolveHost): Promise<string | undefined> {
  const found = await hostAddresses(url, resolve);
  return 'refused' in found ? found.refused : undefined;
}
