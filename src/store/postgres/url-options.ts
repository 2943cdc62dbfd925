import { readFileSync } from 'node:fs';

/**
 * The options Cinder reads from a PostgreSQL URL's query (`?max=N&connect_timeout=N`, `?sslrootcert=`), with nothing to
 * import: src/config.ts checks them at start, so that a bad one stops every command with a line naming
 * CINDER_DATABASE_URL, and db.ts opens the pools with them.
 */

/** The most connections `?max=N` may ask for. */
export const MAX_POOL_SIZE = 1000;

/**
 * The URL's `max` (the pool size), or undefined when it sets none. Decimal digits only, as every
 * number of the configuration (src/config.ts `whole`): `Number()` took `1e1` as 10 and `''` as 0.
 */
export function poolSizeFromUrl(url: string): number | undefined {
  const m = /[?&]max=([^&#]*)/.exec(url);
  if (!m) return undefined;
  const n = /^\d+$/.test(m[1]!) ? Number(m[1]) : NaN;
  if (!(n >= 1 && n <= MAX_POOL_SIZE)) {
    throw new RangeError(`invalid Postgres pool size '${m[1]}' in the database URL: expected a whole number from 1 to ${MAX_POOL_SIZE} (?max=N)`);
  }
  return n;
}

/**
 * The URL's `connect_timeout` in seconds (0: none). postgres.js would take a negative one as a timeout
 * at once (no connection ever made) and any other non-number as none (a start-up failing for ever left
 * its query waiting): both are refused, as a bad pool size is.
 */
export function connectTimeoutFromUrl(url: string): number | undefined {
  const m = /[?&]connect_timeout=([^&#]*)/.exec(url);
  if (!m) return undefined;
  if (!/^\d+(\.\d+)?$/.test(m[1]!)) throw new RangeError(`invalid connect_timeout '${m[1]}' in the database URL: expected seconds, 0 for none`);
  return Number(m[1]);
}

/**
 * `url` split as postgres.js reads it: the hosts of its authority (`a:5432,b:5432` in a multi-host URL, which
 * `new URL()` refuses) and the URL with the first host alone, which `new URL()` parses when it is one. An
 * authority without a host (`postgres://u@/db?host=/var/run/postgresql`, as libpq takes it) is given
 * `localhost` in `single`, which only parses it.
 */
function authority(url: string): { hosts: string; single: string; at: number; end: number } {
  const scheme = url.indexOf('://') + 3;
  const end = url.slice(scheme).search(/[/?#]/);
  const whole = end === -1 ? url.slice(scheme) : url.slice(scheme, scheme + end);
  const hostsAt = whole.lastIndexOf('@') + 1;
  const hosts = whole.slice(hostsAt);
  const first = hosts.split(',')[0]! || 'localhost';
  return { hosts, single: url.slice(0, scheme + hostsAt) + first + url.slice(scheme + whole.length), at: scheme + hostsAt, end: scheme + whole.length };
}

/** The URL's query parameters (after '?', before '#'). */
function queryOf(url: string): URLSearchParams {
  const q = url.indexOf('?');
  if (q === -1) return new URLSearchParams();
  const hash = url.indexOf('#', q);
  return new URLSearchParams(url.slice(q + 1, hash === -1 ? undefined : hash));
}

/** Where a URL connects to as libpq reads it: TCP hosts and ports, or the directory of a Unix-domain socket. */
type Endpoints = { socket: string; port: number } | { host: string[]; port: number[] };

/**
 * The hosts of `url` as libpq takes them: the query's `host` (and `port`) before the authority's, a host that
 * is a path (`?host=/var/run/postgresql`, or `%2Fvar%2Frun%2Fpostgresql` as the authority) the directory of the
 * server's Unix-domain socket, an IPv6 address in brackets; no port, PGPORT's or 5432. Undefined for a URL
 * postgres.js reads itself (neither a socket, brackets, nor a `host` or `port` in its query).
 */
function endpoints(url: string): Endpoints | undefined {
  const { hosts } = authority(url);
  const query = queryOf(url);
  const queryHost = query.get('host');
  const queryPort = query.get('port');
  if (!hosts.includes('[') && !hosts.includes('%') && queryHost === null && queryPort === null) return undefined;
  const fallback = Number(process.env.PGPORT) || 5432;
  const listed = (queryHost ?? hosts).split(',').map((h) => {
    // The query's hosts are bare (their ports are the query's `port`); the authority's may carry one.
    const m = queryHost === null ? /^\[([^\]]*)\](?::(\d*))?$|^([^:]*)(?::(\d*))?$/.exec(h) : null;
    let host = m?.[1] ?? m?.[3] ?? h;
    try {
      host = decodeURIComponent(host);
    } catch {
      // postgresUrlProblem names it
    }
    return { host, port: m?.[2] ?? m?.[4] };
  });
  const ports = queryPort === null ? listed.map((h) => h.port) : queryPort.split(',');
  const portOf = (i: number) => Number(ports[ports.length === 1 ? 0 : i] || fallback);
  if (listed[0]!.host.startsWith('/')) return { socket: listed[0]!.host, port: portOf(0) };
  return { host: listed.map((h) => h.host || 'localhost'), port: listed.map((_, i) => portOf(i)) };
}

/**
 * The TLS postgres.js is given for a URL naming `sslrootcert`: none, the system's trusted roots with the host name checked
 * (`verify-full`), or the certificate authorities of the file, the host name checked or not (tls.connect's options).
 */
export type DriverTls = false | 'verify-full' | { ca: string; checkServerIdentity?: () => undefined };

const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'];

/**
 * The TLS of a URL naming `sslrootcert`, as libpq takes it (libpq-ssl "Client Verification of Server Certificates"), or
 * undefined for one naming none (postgres.js reads its `sslmode`). `sslrootcert` is an option of the client, never sent to
 * the server (postgres.js sent it as a setting, which the server refused: every connection failed). `system`: the system's
 * trusted roots, with `verify-full` only (libpq refuses a weaker sslmode with it). A file: read here, its certificates the
 * only authorities trusted; `verify-full` checks the host name too, every other mode but `disable` (which reads no file)
 * the chain alone, as `verify-ca` (libpq's rule for `require` with a root certificate file). Where libpq's `prefer` (its
 * default) would fall back to no TLS on a server without it, the connection fails: a URL naming the authority to trust
 * asks for TLS. Undefined over a Unix-domain socket, which never uses TLS (driverTarget). Throws a RangeError naming the
 * option for an sslmode libpq does not know or a file it cannot read.
 */
export function tlsFromUrl(url: string): DriverTls | undefined {
  const query = queryOf(url);
  const root = query.get('sslrootcert');
  // Over a Unix-domain socket there is no TLS, and libpq reads no certificate file.
  const target = endpoints(url);
  if (root === null || (target !== undefined && 'socket' in target)) return undefined;
  const mode = query.get('sslmode');
  if (mode !== null && !SSL_MODES.includes(mode)) {
    throw new RangeError(`invalid sslmode '${mode}' in the database URL: expected one of ${SSL_MODES.join(', ')}`);
  }
  if (root === 'system') {
    if (mode !== null && mode !== 'verify-full') {
      throw new RangeError(`sslmode=${mode} may not be used with sslrootcert=system in the database URL: use sslmode=verify-full (the system's roots trust any host they signed for)`);
    }
    return 'verify-full';
  }
  if (mode === 'disable') return false;
  if (root === '') throw new RangeError('empty sslrootcert in the database URL: name a file of PEM certificates, or system');
  let ca: string;
  try {
    ca = readFileSync(root, 'utf8');
  } catch (err) {
    throw new RangeError(`cannot read the root certificate file '${root}' (sslrootcert in the database URL): ${(err as Error).message}`);
  }
  if (!ca.includes('-----BEGIN CERTIFICATE-----')) {
    throw new RangeError(`the root certificate file '${root}' (sslrootcert in the database URL) holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  }
  return mode === 'verify-full' ? { ca } : { ca, checkServerIdentity: () => undefined };
}

/** What postgres.js is given for a URL, apart from the URL: see driverTarget. */
export interface DriverTarget {
  url: string;
  host?: string[];
  port?: number[];
  path?: string;
  database?: string;
  ssl?: DriverTls;
}

/** `url` without the query parameters `names`. */
function withoutParams(url: string, names: string[]): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const hash = url.indexOf('#', q);
  const kept = url.slice(q + 1, hash === -1 ? undefined : hash).split('&').filter((p) => !names.includes(p.split('=')[0]!));
  return url.slice(0, q) + (kept.length ? `?${kept.join('&')}` : '') + (hash === -1 ? '' : url.slice(hash));
}

/**
 * What postgres.js is given for `url`, as libpq reads it (libpq-connect "Connection URIs"): the URL, and where its
 * hosts need reading apart (endpoints), the hosts and ports, or the socket's path, with the URL's `host` and `port`
 * query parameters removed (postgres.js would send them to the server as settings, which refuses them) and a
 * placeholder host it can parse; the query's `dbname`, which names the database over the path (postgres.js took the
 * path's and sent `dbname` as a setting); and over a Unix-domain socket no TLS whatever `sslmode` says, as libpq
 * never negotiates it there (postgres.js tried, and the server's socket refused every connection); over TCP, the TLS of
 * `sslrootcert` (tlsFromUrl), which with `sslmode` is then not left in the URL for postgres.js to send as settings.
 */
export function driverTarget(url: string): DriverTarget {
  const target = endpoints(url);
  const dbname = queryOf(url).get('dbname');
  const socket = target !== undefined && 'socket' in target;
  const tls = tlsFromUrl(url);
  if (!target && dbname === null && tls === undefined) return { url };
  let rewritten = url;
  if (target) {
    const { at, end } = authority(url);
    rewritten = `${url.slice(0, at)}localhost${url.slice(end)}`;
  }
  const tlsParams = socket || tls !== undefined ? ['sslmode', 'sslrootcert'] : [];
  rewritten = withoutParams(rewritten, ['dbname', ...(target ? ['host', 'port'] : []), ...tlsParams]);
  const options: Omit<DriverTarget, 'url'> = { ...(dbname && { database: dbname }), ...(tls !== undefined && { ssl: tls }) };
  if (!target) return { url: rewritten, ...options };
  if ('socket' in target) return { url: rewritten, ...options, path: `${target.socket.replace(/\/+$/, '')}/.s.PGSQL.${target.port}`, ssl: false };
  return { url: rewritten, ...options, host: target.host, port: target.port };
}

/**
 * Why `url` (a postgres:// URL) cannot be used, or undefined: not a URL (a port out of range, a stray
 * character in the host), or a user name, password or database name whose percent-encoding does not decode
 * (postgres.js threw a bare "URI error"). The message never quotes the URL's password. The hosts of a
 * multi-host URL (`postgres://a:5432,b:5432/db`) are checked by the first, as postgres.js parses them.
 */
export function postgresUrlProblem(url: string): string | undefined {
  const { hosts, single } = authority(url);
  // An '@' after the authority, outside a query value: a '/', '?' or '#' of the password ended the authority
  // early (`postgres://u:ab/cd@db/x` names host `u`, port `ab`), and the hosts and database a message would
  // quote are pieces of the password; or an '@' of the database name. Neither is quoted.
  if (userInformationAfterHost(url)) {
    return "an '@' follows the host: percent-encode a '/', '?' or '#' of the user name or password (%2F, %3F, %23) and an '@' of the database name (%40)";
  }
  if (!URL.canParse(single)) {
    // Hosts read before any '@' may be a password's first characters (`u:ab?cd=@db/x`): not quoted then.
    const quoted = authority(url).at > url.indexOf('://') + 3 || !url.includes('@');
    return `not a valid URL: check its host and port${quoted ? ` ('${hosts}')` : ", and percent-encode a '/', '?', '#' or '@' of the user name or password"}`;
  }
  const u = new URL(single);
  const parts: [string, string][] = [[u.username, 'user name'], [u.password, 'password'], [u.pathname.slice(1), 'database name']];
  for (const [value, what] of parts) {
    try {
      decodeURIComponent(value);
    } catch {
      return `the ${what} holds a % that is not percent-encoding (write % as %25)`;
    }
  }
  return undefined;
}

/**
 * The database and the hosts a postgres:// URL (postgresUrlProblem found none) names, as a message may show
 * them, never the password: the database is the query's `dbname`, else the URL's path, else the user's name (driverTarget).
 */
export function postgresTarget(url: string): { database: string; hosts: string } {
  const { hosts, single } = authority(url);
  const u = new URL(single);
  const target = endpoints(url);
  const where = !target
    ? hosts
    : 'socket' in target
      ? `the socket in ${target.socket}`
      : target.host.map((h, i) => `${h.includes(':') ? `[${h}]` : h}:${target.port[i]}`).join(',');
  const query = queryOf(url);
  const user = query.get('user');
  return { database: query.get('dbname') || decodeURIComponent(u.pathname.slice(1)) || user || decodeURIComponent(u.username) || 'postgres', hosts: where };
}

/**
 * The position of the '@' that ends `url`'s user information when it lies past the authority's end (the first
 * '/', '?' or '#' after the scheme), or -1: the last '@' of the path, the fragment, or a query parameter that
 * is not `name=value` (a base64 password's `/` and `==`, `u:ab/cd==@db/x`, put `cd==@db` in the path), never
 * one in a query parameter's value (`?application_name=me@host`).
 */
function lateUserInformationEnd(url: string): number {
  const scheme = url.indexOf('://');
  if (scheme === -1) return -1;
  const start = scheme + 3;
  const rest = url.slice(start);
  const end = rest.search(/[/?#]/);
  if (end === -1) return -1;
  let last = -1;
  let i = start + end;
  const query = url.indexOf('?', i);
  const hash = url.indexOf('#', i);
  const pathEnd = Math.min(query === -1 ? url.length : query, hash === -1 ? url.length : hash);
  last = url.slice(i, pathEnd).lastIndexOf('@');
  if (last !== -1) last += i;
  if (query !== -1 && query === pathEnd) {
    const queryEnd = hash === -1 || hash < query ? url.length : hash;
    i = query + 1;
    for (const param of url.slice(i, queryEnd).split('&')) {
      const at = param.lastIndexOf('@');
      if (at !== -1 && !/^[A-Za-z_][A-Za-z0-9_]*=/.test(param)) last = i + at;
      i += param.length + 1;
    }
  }
  if (hash !== -1) {
    const at = url.lastIndexOf('@');
    if (at > hash) last = at;
  }
  return last;
}

function userInformationAfterHost(url: string): boolean {
  return lateUserInformationEnd(url) !== -1;
}

/**
 * `url` with the password of its user information, if any, as `***`: what a message may quote. A password
 * holding an unencoded '/', '?' or '#' is masked up to the '@' that ends it (lateUserInformationEnd).
 */
export function withoutPassword(url: string): string {
  const late = lateUserInformationEnd(url);
  if (late !== -1) {
    const start = url.indexOf('://') + 3;
    const colon = url.indexOf(':', start);
    if (colon !== -1 && colon < late) return `${url.slice(0, colon + 1)}***${url.slice(late)}`;
  }
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/?#@:]*:)[^/?#]*@/i, '$1***@');
}
