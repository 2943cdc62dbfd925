/**
 * The options Cinder reads from a PostgreSQL URL's query (`?max=N&connect_timeout=N`), with nothing to
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
 * `new URL()` refuses) and the URL with the first host alone, which `new URL()` parses when it is one.
 */
function authority(url: string): { hosts: string; single: string } {
  const scheme = url.indexOf('://') + 3;
  const end = url.slice(scheme).search(/[/?#]/);
  const whole = end === -1 ? url.slice(scheme) : url.slice(scheme, scheme + end);
  const hostsAt = whole.lastIndexOf('@') + 1;
  const hosts = whole.slice(hostsAt);
  return { hosts, single: url.slice(0, scheme + hostsAt) + hosts.split(',')[0]! + url.slice(scheme + whole.length) };
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
  if (!URL.canParse(single)) return `not a valid URL: check its host and port ('${hosts}')`;
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
 * them, never the password: the database is the URL's path, else the user's name, as postgres.js picks it.
 */
export function postgresTarget(url: string): { database: string; hosts: string } {
  const { hosts, single } = authority(url);
  const u = new URL(single);
  return { database: decodeURIComponent(u.pathname.slice(1)) || decodeURIComponent(u.username) || 'postgres', hosts };
}

/**
 * The position of the '@' that ends `url`'s user information when it lies past the authority's end (the first
 * '/', '?' or '#' after the scheme), or -1: the last '@' before the first '=' (a query value may hold one).
 */
function lateUserInformationEnd(url: string): number {
  const scheme = url.indexOf('://');
  if (scheme === -1) return -1;
  const start = scheme + 3;
  const rest = url.slice(start);
  const end = rest.search(/[/?#]/);
  if (end === -1) return -1;
  const equals = rest.indexOf('=', end);
  const at = rest.slice(end, equals === -1 ? undefined : equals).lastIndexOf('@');
  return at === -1 ? -1 : start + end + at;
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

/**
 * The hosts and ports of a URL whose authority holds an IPv6 address in brackets (`postgres://u@[::1]:5432/db`,
 * `[fd00::1]:5432,[fd00::2]:5432`), as postgres.js takes them given apart; undefined for any other URL, whose hosts
 * postgres.js reads itself. It splits each host at its first `:`, which took `[` for the host of an IPv6 address
 * (`getaddrinfo ENOTFOUND [`).
 */
export function bracketedHosts(url: string): { host: string[]; port: number[] } | undefined {
  const { hosts } = authority(url);
  if (!hosts.includes('[')) return undefined;
  const host: string[] = [];
  const port: number[] = [];
  for (const h of hosts.split(',')) {
    const m = /^\[([^\]]*)\](?::(\d*))?$|^([^:]*)(?::(\d*))?$/.exec(h);
    host.push(m?.[1] ?? m?.[3] ?? h);
    const p = m?.[2] ?? m?.[4];
    // No port: libpq's and postgres.js's default, PGPORT when set, as for a host not in brackets.
    port.push(p ? Number(p) : Number(process.env.PGPORT) || 5432);
  }
  return { host, port };
}
