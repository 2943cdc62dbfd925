import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';

/**
 * The options Cinder reads from a PostgreSQL URL's query (`?max=N&connect_timeout=N`, `?sslrootcert=`), with nothing to
 * import: src/config.ts checks them at start, so that a bad one stops every command with a line naming
 * CINDER_DATABASE_URL, and db.ts opens the pools with them.
 */

/** The environment libpq's variables are read from: loadConfig's `env` (the CLI's io.env, process.env for the binary). */
export type Env = Record<string, string | undefined>;

/**
 * The environment of a URL loadConfig resolved (resolvedDatabaseUrl, libpq-env.ts): none, since what libpq reads from
 * the environment is written in it. What opens or describes the configured database reads nothing else.
 */
export const RESOLVED: Env = Object.freeze({});

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

/** The most seconds a timer can wait (2^31 - 1 ms): the driver's timer given more fires at once. */
const MAX_TIMER_SECONDS = Math.floor(0x7fffffff / 1000);

/**
 * A `connect_timeout` value (the URL's, a service's, PGCONNECT_TIMEOUT) in seconds, 0 for none, read as libpq reads it
 * (pqParseIntParam, libpq-connect): a decimal integer with blanks around it and a sign allowed, zero or negative waiting
 * without limit, a value past a 32-bit int refused; Cinder takes decimal seconds too (`2.5`). A wait longer than a timer
 * holds (24.8 days) is that long: the driver's timer fired at once, and no connection was ever made. Undefined for
 * anything else (postgres.js took a non-number as none, a start-up failing for ever left its query waiting).
 */
export function connectTimeoutSeconds(value: string): number | undefined {
  const m = /^\s*([+-]?)(\d+(?:\.\d+)?)\s*$/.exec(value);
  if (!m) return undefined;
  const n = Number(m[2]);
  if (n > 0x7fffffff) return undefined;
  return m[1] === '-' || n === 0 ? 0 : Math.min(n, MAX_TIMER_SECONDS);
}

/** The URL's `connect_timeout` in seconds (0: none; connectTimeoutSeconds), refused as a bad pool size is. */
export function connectTimeoutFromUrl(url: string): number | undefined {
  const value = queryOf(url).get('connect_timeout');
  if (value === null) return undefined;
  const seconds = connectTimeoutSeconds(value);
  if (seconds === undefined) throw new RangeError(`invalid connect_timeout '${value}' in the database URL: expected seconds, 0 for none`);
  return seconds;
}

/**
 * `url` split as postgres.js reads it: the hosts of its authority (`a:5432,b:5432` in a multi-host URL, which
 * `new URL()` refuses) and the URL with the first host alone, which `new URL()` parses when it is one. An
 * authority without a host (`postgres://u@/db?host=/var/run/postgresql`, as libpq takes it) is given
 * `localhost` in `single`, which only parses it.
 */
export function authority(url: string): { hosts: string; single: string; at: number; end: number } {
  const scheme = url.indexOf('://') + 3;
  const end = url.slice(scheme).search(/[/?#]/);
  const whole = end === -1 ? url.slice(scheme) : url.slice(scheme, scheme + end);
  const hostsAt = whole.lastIndexOf('@') + 1;
  const hosts = whole.slice(hostsAt);
  const first = hosts.split(',')[0]! || 'localhost';
  return { hosts, single: url.slice(0, scheme + hostsAt) + first + url.slice(scheme + whole.length), at: scheme + hostsAt, end: scheme + whole.length };
}

/** A piece of a URL percent-decoded as libpq decodes it (conninfo_uri_decode): `%XX` only, a '+' kept; one that does not decode as it is. */
function uriDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/**
 * The URL's query parameters (after '?', before '#'), decoded as libpq decodes them (conninfo_uri_parse_params): `%XX`
 * only. URLSearchParams reads a form, whose '+' is a blank: a `?password=` holding a '+' was sent with a blank.
 */
export function queryOf(url: string): URLSearchParams {
  const out = new URLSearchParams();
  const q = url.indexOf('?');
  if (q === -1) return out;
  const hash = url.indexOf('#', q);
  for (const param of url.slice(q + 1, hash === -1 ? undefined : hash).split('&')) {
    if (param === '') continue;
    const eq = param.indexOf('=');
    out.append(uriDecode(eq === -1 ? param : param.slice(0, eq)), eq === -1 ? '' : uriDecode(param.slice(eq + 1)));
  }
  return out;
}

/** Where a URL connects to as libpq reads it: TCP hosts and ports, or the directory of a Unix-domain socket. */
export type Endpoints = { socket: string; port: number } | { host: string[]; port: number[] };

/**
 * The hosts of `url` as libpq takes them: the query's `host` (and `port`) before the authority's, a host that
 * is a path (`?host=/var/run/postgresql`, or `%2Fvar%2Frun%2Fpostgresql` as the authority) the directory of the
 * server's Unix-domain socket, an IPv6 address in brackets; no host, PGHOST's or localhost; no port, PGPORT's or 5432. A
 * `host` or `port` the query names empty (`?host=`, a service's `host=`) is the default, localhost or 5432, with
 * PGHOST and PGPORT unread, as libpq reads them (an empty value is a value: conninfo_add_defaults leaves it). Undefined for a URL
 * postgres.js reads itself (neither a socket, brackets, nor a `host` or `port` in its query).
 */
export function endpoints(url: string, env: Env): Endpoints | undefined {
  const { hosts } = authority(url);
  const query = queryOf(url);
  // A URL naming no host (`postgres:///db`, `postgres://u@/db`) is read here too: postgres.js's URL parser refused it.
  if (hosts !== '' && !hosts.includes('[') && !hosts.includes('%') && query.get('host') === null && query.get('port') === null) return undefined;
  return allEndpoints(url, env);
}

/**
 * Where `url` connects to (endpoints), for every URL: the hosts and ports of a plain one (`a:5433,b`) too, in the order
 * the driver is given them (driverTarget) and tries them.
 */
export function allEndpoints(url: string, env: Env): Endpoints {
  const { hosts } = authority(url);
  const query = queryOf(url);
  const queryHost = query.get('host');
  const queryPort = query.get('port');
  const fallback = Number(env.PGPORT) || 5432;
  // No host in the URL (a `port` alone, the query's or a service's): PGHOST's, as libpq reads it (bare, as the query's).
  const bare = queryHost ?? (hosts === '' ? env.PGHOST || '' : null);
  const listed = (bare ?? hosts).split(',').map((h) => {
    // The query's hosts are bare (their ports are the query's `port`); the authority's may carry one.
    const m = bare === null ? /^\[([^\]]*)\](?::(\d*))?$|^([^:]*)(?::(\d*))?$/.exec(h) : null;
    let host = m?.[1] ?? m?.[3] ?? h;
    try {
      host = decodeURIComponent(host);
    } catch {
      // postgresUrlProblem names it
    }
    return { host, port: m?.[2] ?? m?.[4] };
  });
  const ports = queryPort === null ? listed.map((h) => h.port) : queryPort.split(',');
  // A port the query (or a service) names empty is libpq's compiled-in 5432, not PGPORT's: the empty value stands for it.
  const portOf = (i: number) => Number(ports[ports.length === 1 ? 0 : i] || (queryPort === null ? fallback : 5432));
  if (listed[0]!.host.startsWith('/')) return { socket: listed[0]!.host, port: portOf(0) };
  return { host: listed.map((h) => h.host || 'localhost'), port: listed.map((_, i) => portOf(i)) };
}

/** libpq's `sslmode` values, weakest first. */
export type SslMode = 'disable' | 'allow' | 'prefer' | 'require' | 'verify-ca' | 'verify-full';

/**
 * The TLS postgres.js is given for a TCP connection (tlsFromUrl): none (`disable`), or libpq's `sslmode` with tls.connect's
 * options (authorities, the host name checked or not, a client certificate, revocation lists, protocol versions, no SNI);
 * without options, the system's trusted roots with the host name checked. The patched driver (patches/postgres@3.4.9.patch)
 * negotiates as libpq does for the mode: `allow` plain first and TLS when the server refuses it, `prefer` TLS first and plain
 * when the server has none, its handshake fails or the server refuses the session over it, the others TLS or nothing.
 */
export type DriverTls =
  | false
  | {
      sslmode: Exclude<SslMode, 'disable'>;
      ca?: string;
      checkServerIdentity?: () => undefined;
      rejectUnauthorized?: boolean;
      cert?: string;
      key?: string;
      passphrase?: string;
      crl?: string;
      servername?: undefined;
      minVersion?: TlsVersion;
      maxVersion?: TlsVersion;
    };

type TlsVersion = 'TLSv1' | 'TLSv1.1' | 'TLSv1.2' | 'TLSv1.3';
const TLS_VERSIONS: TlsVersion[] = ['TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'];

const SSL_MODES: SslMode[] = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'];

/** libpq's options of the client's TLS that Cinder reads itself (tlsFromUrl): never sent to the server. */
const TLS_OPTIONS = ['sslrootcert', 'sslcert', 'sslkey', 'sslpassword', 'sslcrl', 'sslsni', 'sslcertmode', 'ssl_min_protocol_version', 'ssl_max_protocol_version'];

/**
 * libpq's environment variables of its TLS options (libpq-envars): each read, as libpq reads it, when the URL does not
 * name its option (the URL wins), so that a PGSSLMODE=verify-full set for every libpq client of the host is not dropped
 * for an unverified `prefer`. PGSSLCRLDIR and PGREQUIRESSL (but 0), options Cinder cannot honour, are refused as in the URL;
 * PGSSLNEGOTIATION (which postgres.js reads itself when the URL names no `sslnegotiation`) is checked as the URL's.
 */
export const TLS_ENV: Record<string, string> = {
  sslmode: 'PGSSLMODE',
  sslrootcert: 'PGSSLROOTCERT',
  sslcert: 'PGSSLCERT',
  sslkey: 'PGSSLKEY',
  sslcrl: 'PGSSLCRL',
  sslsni: 'PGSSLSNI',
  sslcertmode: 'PGSSLCERTMODE',
  ssl_min_protocol_version: 'PGSSLMINPROTOCOLVERSION',
  ssl_max_protocol_version: 'PGSSLMAXPROTOCOLVERSION',
  sslnegotiation: 'PGSSLNEGOTIATION',
  sslcrldir: 'PGSSLCRLDIR',
  requiressl: 'PGREQUIRESSL',
};

/**
 * postgres.js's `ssl` values that are not an sslmode, as it took them: `true` TLS verified by the system's roots and the
 * host name (tls.connect's defaults, libpq's `verify-full`), `false` none. Its other values are sslmodes.
 */
const SSL_ALIASES: Record<string, string> = { true: 'verify-full', false: 'disable' };

/**
 * postgres.js's options that it reads from a URL's query (and else from a `PG<OPTION>` environment variable), which Cinder
 * sets itself (db.ts): refused in the URL, never taken silently (`?debug=1` would put each failed statement's text and
 * values on its error, into logs).
 */
const DRIVER_OPTIONS = ['debug', 'idle_timeout', 'max_lifetime', 'keep_alive', 'max_pipeline', 'publications', 'prepare', 'fetch_types', 'backoff'];

/**
 * The URL's query with libpq's TLS environment variables (TLS_ENV) for the options it does not name (an empty variable
 * is unset, as libpq takes it), and where each option came from, for messages: ` in the database URL` or ` in PGSSLMODE`.
 */
function tlsQuery(url: string, env: Env): { query: URLSearchParams; at: (option: string) => string } {
  const query = queryOf(url);
  const fromEnv = new Map<string, string>();
  // postgres.js's `ssl` (`?ssl=require`, `?ssl=true`): the URL's sslmode, as that driver read it, before any variable.
  const alias = query.get('ssl');
  if (alias !== null) {
    const mode = Object.hasOwn(SSL_ALIASES, alias) ? SSL_ALIASES[alias] : (SSL_MODES as string[]).includes(alias) ? alias : undefined;
    if (mode === undefined) throw new RangeError(`invalid ssl '${alias}' in the database URL: expected true, false or an sslmode (${SSL_MODES.join(', ')})`);
    const named = query.get('sslmode');
    if (named !== null && named !== mode) throw new RangeError(`ssl=${alias} and sslmode=${named} in the database URL disagree: name sslmode alone`);
    query.set('sslmode', mode);
  }
  for (const [option, name] of Object.entries(TLS_ENV)) {
    const v = env[name];
    if (!query.has(option) && v !== undefined && v !== '') {
      query.set(option, v);
      fromEnv.set(option, name);
    }
  }
  return { query, at: (option) => (fromEnv.has(option) ? ` in ${fromEnv.get(option)}` : ' in the database URL') };
}

/** A file a TLS option names, read at start: a RangeError naming the option when it cannot be read or holds no `marker`. */
function pemFile(option: string, at: string, what: string, path: string, marker: RegExp, expected: string): string {
  if (path === '') throw new RangeError(`empty ${option}${at}: name a file of ${what}`);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new RangeError(`cannot read the ${what} file '${path}' (${option}${at}): ${(err as Error).message}`);
  }
  if (!marker.test(text)) throw new RangeError(`the ${what} file '${path}' (${option}${at}) holds no ${expected}`);
  return text;
}

/** The URL's TLS protocol version `option` (libpq's names, TLSv1 to TLSv1.3), or undefined. */
function tlsVersion(query: URLSearchParams, option: string, at: string): TlsVersion | undefined {
  const v = query.get(option);
  if (v === null) return undefined;
  if (!(TLS_VERSIONS as string[]).includes(v)) throw new RangeError(`invalid ${option} '${v}'${at}: expected one of ${TLS_VERSIONS.join(', ')}`);
  return v as TlsVersion;
}

/**
 * The TLS of a TCP connection to `url`'s hosts, as libpq takes `sslmode` and its TLS options (TLS_OPTIONS, libpq-ssl):
 * options of the client, never sent to the server (postgres.js sent them as settings, which the server refused: every
 * connection failed). No `sslmode` is libpq's default, `prefer` (`verify-full` with `sslrootcert=system`): TLS when the
 * server has it, plain when not (postgres.js connected in plain whatever the server had). `allow` is plain first, TLS when
 * the server refuses a session in plain; `prefer` TLS first, plain when the server has no TLS, the handshake fails (a
 * certificate the authorities of `sslrootcert` did not sign too) or the server refuses the session over TLS; `require`,
 * `verify-ca` and `verify-full` TLS or no connection ("the server does not support SSL, but SSL was required"), whatever
 * TLS options the URL names (postgres.js took `allow` as TLS only, and forced TLS, fallback or not, with a TLS option).
 *
 * `sslrootcert=system`: the system's trusted roots, with `verify-full` only (libpq refuses a weaker sslmode with it). A
 * file: read here, its certificates the only authorities trusted; `verify-full` checks the host name too, every other mode
 * but `disable` (which reads no file) the chain alone, as `verify-ca` (libpq's rule for `require` with a root certificate
 * file). Without `sslrootcert`, `verify-full` and `verify-ca` verify by the system's roots (`verify-ca` the chain alone),
 * other modes nothing. `sslcert` and `sslkey` (both, PEM; `sslpassword` decrypts the key, checked here) are the client's
 * certificate, sent when the server asks, not read with `sslcertmode=disable`; `sslcrl` the revocation lists checked when
 * the server's certificate is verified; `sslsni=0` sends no server name; `ssl_min_protocol_version` and
 * `ssl_max_protocol_version` bound the protocol. Undefined over a Unix-domain socket, which never uses TLS (driverTarget),
 * where no file is read. Throws a RangeError naming the option for a value libpq does not know or a file that cannot be read.
 */
export function tlsFromUrl(url: string, env: Env): DriverTls | undefined {
  const { query, at } = tlsQuery(url, env);
  const mode = query.get('sslmode');
  if (mode !== null && !(SSL_MODES as string[]).includes(mode)) {
    throw new RangeError(`invalid sslmode '${mode}'${at('sslmode')}: expected one of ${SSL_MODES.join(', ')}`);
  }
  // Over a Unix-domain socket there is no TLS, and libpq reads no certificate file.
  const target = endpoints(url, env);
  if (target !== undefined && 'socket' in target) return undefined;
  const root = query.get('sslrootcert');
  const sni = query.get('sslsni');
  if (sni !== null && sni !== '0' && sni !== '1') throw new RangeError(`invalid sslsni '${sni}'${at('sslsni')}: expected 1 (send the host name) or 0`);
  const certMode = query.get('sslcertmode');
  if (certMode !== null && certMode !== 'allow' && certMode !== 'disable') {
    throw new RangeError(
      certMode === 'require'
        ? `sslcertmode=require${at('sslcertmode')} is not supported (the driver cannot tell whether the server asked for the certificate): use allow`
        : `invalid sslcertmode '${certMode}'${at('sslcertmode')}: expected allow or disable`,
    );
  }
  const minVersion = tlsVersion(query, 'ssl_min_protocol_version', at('ssl_min_protocol_version'));
  const maxVersion = tlsVersion(query, 'ssl_max_protocol_version', at('ssl_max_protocol_version'));
  if (minVersion && maxVersion && TLS_VERSIONS.indexOf(minVersion) > TLS_VERSIONS.indexOf(maxVersion)) {
    const [minAt, maxAt] = [at('ssl_min_protocol_version'), at('ssl_max_protocol_version')];
    throw new RangeError(`ssl_min_protocol_version ${minVersion}${minAt === maxAt ? '' : minAt} is above ssl_max_protocol_version ${maxVersion}${maxAt}`);
  }
  if (root === 'system' && mode !== null && mode !== 'verify-full') {
    throw new RangeError(`sslmode=${mode}${at('sslmode') === at('sslrootcert') ? '' : at('sslmode')} may not be used with sslrootcert=system${at('sslrootcert')}: use sslmode=verify-full (the system's roots trust any host they signed for)`);
  }
  if (mode === 'disable') return false;
  const tls: Exclude<DriverTls, false> = { sslmode: (mode ?? (root === 'system' ? 'verify-full' : 'prefer')) as Exclude<SslMode, 'disable'> };
  if (root === 'system' || (root === null && mode === 'verify-full')) {
    // the system's roots and the host name: tls.connect's defaults
  } else if (root !== null) {
    tls.ca = pemFile('sslrootcert', at('sslrootcert'), 'root certificate', root, /-----BEGIN CERTIFICATE-----/, 'PEM certificate (-----BEGIN CERTIFICATE-----)');
    if (mode !== 'verify-full') tls.checkServerIdentity = () => undefined;
  } else if (mode === 'verify-ca') {
    tls.checkServerIdentity = () => undefined;
  } else {
    tls.rejectUnauthorized = false;
  }
  const cert = query.get('sslcert');
  const key = query.get('sslkey');
  if (certMode !== 'disable' && (cert !== null || key !== null)) {
    if (cert === null || key === null) {
      throw new RangeError(`${cert === null ? `sslkey${at('sslkey')}` : `sslcert${at('sslcert')}`} needs ${cert === null ? 'sslcert' : 'sslkey'} too: name the client's certificate and its private key`);
    }
    tls.cert = pemFile('sslcert', at('sslcert'), 'client certificate', cert, /-----BEGIN CERTIFICATE-----/, 'PEM certificate (-----BEGIN CERTIFICATE-----)');
    tls.key = pemFile('sslkey', at('sslkey'), 'private key', key, /-----BEGIN [A-Z ]*PRIVATE KEY-----/, 'PEM private key (-----BEGIN PRIVATE KEY-----)');
    const passphrase = query.get('sslpassword');
    try {
      createPrivateKey({ key: tls.key, format: 'pem', ...(passphrase !== null && { passphrase }) });
    } catch (err) {
      throw new RangeError(
        passphrase === null
          ? `the private key file '${key}' (sslkey${at('sslkey')}) is encrypted: give its password as sslpassword`
          : `cannot decrypt the private key file '${key}' (sslkey${at('sslkey')}) with sslpassword: ${(err as Error).message}`,
      );
    }
    if (passphrase !== null) tls.passphrase = passphrase;
  }
  const crl = query.get('sslcrl');
  if (crl !== null && tls.rejectUnauthorized !== false) {
    tls.crl = pemFile('sslcrl', at('sslcrl'), 'certificate revocation list', crl, /-----BEGIN X509 CRL-----/, 'PEM revocation list (-----BEGIN X509 CRL-----)');
  }
  if (sni === '0') tls.servername = undefined;
  if (minVersion) tls.minVersion = minVersion;
  if (maxVersion) tls.maxVersion = maxVersion;
  return tls;
}

/**
 * libpq's options of the client (libpq-connect "Parameter Key Words") that Cinder neither reads nor can pass on, with why:
 * refused at start (postgresUrlOptions), never dropped silently nor sent to the server, which refuses them as settings.
 */
const UNSUPPORTED: Record<string, string> = {
  hostaddr: 'name the host by its address in the host',
  require_auth: 'the driver cannot restrict the authentication methods',
  keepalives_idle: 'the driver keeps TCP connections alive itself',
  keepalives_interval: 'the driver keeps TCP connections alive itself',
  keepalives_count: 'the driver keeps TCP connections alive itself',
  tcp_user_timeout: 'the driver cannot set it',
  replication: 'Cinder needs ordinary sessions',
  krbsrvname: 'the driver has no GSSAPI',
  gsslib: 'the driver has no GSSAPI',
  gssdelegation: 'the driver has no GSSAPI',
  sslcrldir: 'name a file of revocation lists as sslcrl',
  sslkeylogfile: 'the driver cannot log TLS keys',
  requirepeer: 'the driver cannot check the peer of a Unix-domain socket',
  scram_client_key: 'the driver cannot use SCRAM keys',
  scram_server_key: 'the driver cannot use SCRAM keys',
  oauth_issuer: 'the driver has no OAuth',
  oauth_client_id: 'the driver has no OAuth',
  oauth_client_secret: 'the driver has no OAuth',
  oauth_scope: 'the driver has no OAuth',
  requiressl: 'use sslmode=require',
};

/**
 * libpq's options of the client whose one value (or values) the driver does anyway, and what else each value would need:
 * the value accepted and not sent, another refused.
 */
const ONLY: Record<string, [values: string[], why: string]> = {
  keepalives: [['1'], 'the driver keeps its TCP connections alive (libpq\'s default, 1)'],
  channel_binding: [['disable', 'prefer'], 'the driver has no SCRAM-SHA-256-PLUS, which binds the channel: use prefer or disable'],
  gssencmode: [['disable', 'prefer'], 'the driver has no GSSAPI encryption: use prefer or disable'],
  sslcompression: [['0'], 'TLS compression is not available: use 0'],
  load_balance_hosts: [['disable'], 'the hosts are tried in the order given: use disable'],
  min_protocol_version: [['3.0'], 'the driver speaks protocol 3.0'],
  max_protocol_version: [['3.0'], 'the driver speaks protocol 3.0'],
  client_encoding: [['UTF8', 'utf8', 'UTF-8', 'utf-8', 'auto'], 'the driver reads and writes UTF8 only'],
  sslnegotiation: [['postgres', 'direct'], 'expected postgres or direct'],
};

const SESSION_ATTRS = ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby'];

/**
 * The URL's `target_session_attrs` (or libpq's PGTARGETSESSIONATTRS when it names none, which postgres.js reads itself)
 * when it asks for a kind of server (not `any`), else undefined.
 */
export function sessionAttrsFromUrl(url: string, env: Env): string | undefined {
  const attrs = queryOf(url).get('target_session_attrs') ?? (env.PGTARGETSESSIONATTRS || null);
  return attrs === null || attrs === 'any' ? undefined : attrs;
}

/**
 * libpq's options of the client that driverTarget takes out of the URL once read (checkUrlOptions refused the others;
 * `passfile`, the password file libpqUrl named, is read by db.ts for each connection: passwordFileSource);
 * `sslnegotiation`, `connect_timeout` and `target_session_attrs` are left for the driver, which reads them (`any`, which
 * postgres.js refused, as none: patches/postgres@3.4.9.patch, so that the URL's `any` wins over PGTARGETSESSIONATTRS).
 */
const CLIENT_OPTIONS = ['user', 'password', 'passfile', 'fallback_application_name', ...Object.keys(ONLY).filter((o) => o !== 'sslnegotiation')];

/** A port as libpq takes it (pqParseIntParam, then 1 to 65535): a decimal integer, blanks around it and a sign allowed. */
function isPort(value: string): boolean {
  const m = /^\s*\+?(\d+)\s*$/.exec(value);
  return m !== null && Number(m[1]) >= 1 && Number(m[1]) <= 65535;
}

/**
 * The URL's ports, as libpq checks them (connectOptions2): each of the query's `port` (a service's too) and of its
 * hosts' a number from 1 to 65535 or empty (the default), and one for every host or one for all ("could not match 3 port
 * numbers to 2 hosts"); PGPORT's too, which the driver reads. The driver threw from its socket for a port out of range
 * (a stack trace on stderr), then its query waited out connect_timeout; a port past the first host's went unchecked.
 */
function checkPorts(url: string, query: URLSearchParams, env: Env): void {
  const { hosts } = authority(url);
  const listed = hosts === '' ? [] : hosts.split(',').map((h) => /^(?:\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(h)?.[1] ?? '');
  const ports = query.get('port');
  for (const port of [...listed, ...(ports?.split(',') ?? [])]) {
    if (port !== '' && !isPort(port)) throw new RangeError(`invalid port '${port}' in the database URL: expected a number from 1 to 65535`);
  }
  const envPort = env.PGPORT;
  for (const port of envPort ? envPort.split(',') : []) {
    if (port !== '' && !isPort(port)) throw new RangeError(`invalid port '${port}' in PGPORT: expected a number from 1 to 65535`);
  }
  const named = query.get('host') ?? (hosts ? hosts.split(',').map(uriDecode).join(',') : env.PGHOST || '');
  const kinds = new Set(named.split(',').map((h) => h.startsWith('/')));
  if (kinds.size > 1 || (kinds.has(true) && named.includes(','))) {
    throw new RangeError(
      `a Unix-domain socket directory among several hosts ('${named}'${query.has('host') || hosts ? ' in the database URL' : ' in PGHOST'}) is not supported: the driver connects to one socket, or to TCP hosts in turn; name one or the other`,
    );
  }
  if (ports === null) return;
  const hostCount = named.split(',').length;
  const portCount = ports.split(',').length;
  if (portCount !== 1 && portCount !== hostCount) {
    throw new RangeError(`${portCount} ports for ${hostCount} hosts in the database URL: name one port for every host, or one for them all`);
  }
}

/**
 * Checks every option of `url`'s query Cinder or the driver reads (the pool size, connect_timeout, TLS,
 * target_session_attrs) and refuses libpq's options of the client it cannot honour (UNSUPPORTED, ONLY): a RangeError
 * naming the option. What is left (application_name, options, a server setting such as statement_timeout) is sent to
 * the server in the start-up message, as libpq sends application_name and options.
 */
export function checkUrlOptions(url: string, env: Env): void {
  poolSizeFromUrl(url);
  connectTimeoutFromUrl(url);
  tlsFromUrl(url, env);
  const query = queryOf(url);
  checkPorts(url, query, env);
  for (const name of new Set(query.keys())) {
    if (DRIVER_OPTIONS.includes(name)) throw new RangeError(`${name} in the database URL is an option of the driver that Cinder sets itself: remove it`);
    if (name in UNSUPPORTED) throw new RangeError(`${name} in the database URL is an option of libpq's client that Cinder does not support (${UNSUPPORTED[name]}): remove it`);
    const v = query.get(name)!;
    const only = ONLY[name];
    if (only && !only[0].includes(v)) throw new RangeError(`${name}=${v} in the database URL is not supported: ${only[1]}`);
  }
  const attrs = query.get('target_session_attrs');
  if (attrs !== null && !SESSION_ATTRS.includes(attrs)) {
    throw new RangeError(`invalid target_session_attrs '${attrs}' in the database URL: expected one of ${SESSION_ATTRS.join(', ')}`);
  }
  const envAttrs = env.PGTARGETSESSIONATTRS;
  if (attrs === null && envAttrs && !SESSION_ATTRS.includes(envAttrs)) {
    throw new RangeError(`invalid target_session_attrs '${envAttrs}' in PGTARGETSESSIONATTRS: expected one of ${SESSION_ATTRS.join(', ')}`);
  }
  const tls = tlsQuery(url, env);
  for (const name of ['sslcrldir', 'requiressl', 'sslnegotiation']) {
    const v = tls.query.get(name);
    // PGREQUIRESSL=0 asks for nothing (libpq's default); 1 is refused, as requiressl is in the URL.
    if (v === null || query.has(name) || (name === 'requiressl' && v === '0')) continue;
    if (name in UNSUPPORTED) throw new RangeError(`${TLS_ENV[name]} is an option of libpq's client that Cinder does not support (${UNSUPPORTED[name]}): unset it`);
    if (!ONLY[name]![0].includes(v)) throw new RangeError(`${TLS_ENV[name]}=${v} is not supported: ${ONLY[name]![1]}`);
  }
  const negotiation = tls.query.get('sslnegotiation');
  const mode = tls.query.get('sslmode');
  if (negotiation === 'direct' && !['require', 'verify-ca', 'verify-full'].includes(mode ?? '')) {
    throw new RangeError(`sslnegotiation=direct${tls.at('sslnegotiation')} needs sslmode require, verify-ca or verify-full (sslmode=${mode ?? 'prefer'}${tls.at('sslmode')})`);
  }
}

/** What postgres.js is given for a URL, apart from the URL: see driverTarget. */
export interface DriverTarget {
  url: string;
  host?: string[];
  port?: number[];
  path?: string;
  database: string;
  ssl: DriverTls;
  user: string;
  pass?: string;
  /** libpq's `sslnegotiation`, null for its default (postgres). */
  sslnegotiation: 'postgres' | 'direct' | null;
  /** libpq's `target_session_attrs`, `any` for its default. */
  target_session_attrs: string;
  /** The URL's `fallback_application_name`, when it names no `application_name`: the connections' name in place of Cinder's. */
  applicationName?: string;
  /** The settings the server is sent (`application_name`, `options`, any other), decoded as libpq decodes them. */
  settings: Record<string, string>;
}

/** The options of postgres.js that it reads from the URL's query and does not send to the server (Cinder's own are refused: DRIVER_OPTIONS). */
const READ_BY_DRIVER = ['max', 'connect_timeout', 'sslnegotiation', 'target_session_attrs'];

/** The names of `url`'s query parameters as written (not decoded). */
function rawParamNames(url: string): string[] {
  const q = url.indexOf('?');
  if (q === -1) return [];
  const hash = url.indexOf('#', q);
  return url.slice(q + 1, hash === -1 ? undefined : hash).split('&').filter((p) => p !== '').map((p) => p.split('=')[0]!);
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
 * `sslmode` and libpq's TLS options (tlsFromUrl, `prefer` when none), which are not left in the URL for postgres.js to
 * read or send as settings;
 * the query's `user` and `password` (postgres.js sent them as settings, the password in the clear), and
 * `fallback_application_name`; and libpq's other options of the client checkUrlOptions accepted (`channel_binding=prefer`,
 * `client_encoding=UTF8`...), read and taken out. Every field the driver would otherwise read from process.env (PGHOST,
 * PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLNEGOTIATION, PGTARGETSESSIONATTRS) is given, resolved from `env` alone:
 * the hosts and ports always apart, the database, the user, `sslnegotiation` and `target_session_attrs`.
 */
export function driverTarget(url: string, env: Env): DriverTarget {
  const target = allEndpoints(url, env);
  const query = queryOf(url);
  const socket = 'socket' in target;
  const tls = tlsQuery(url, env).query;
  const names = new Set(query.keys());
  const client = CLIENT_OPTIONS.filter((o) => names.has(o));
  const { at, end } = authority(url);
  const taken = ['dbname', 'host', 'port', 'sslmode', 'ssl', 'sslnegotiation', 'target_session_attrs', ...TLS_OPTIONS, ...client];
  // What is left is sent to the server: given apart, decoded as libpq decodes it (the driver's URLSearchParams took '+' for a blank).
  const settings: Record<string, string> = {};
  for (const [name, value] of query) if (!taken.includes(name) && !READ_BY_DRIVER.includes(name)) settings[name] = value;
  const raw = new Set(rawParamNames(url).filter((n) => Object.hasOwn(settings, uriDecode(n))));
  const rewritten = withoutParams(`${url.slice(0, at)}localhost${url.slice(end)}`, [...taken, ...raw]);
  const pass = query.get('password');
  const fallback = query.get('fallback_application_name');
  const options: Omit<DriverTarget, 'url' | 'ssl'> = {
    settings,
    database: databaseOf(url, env),
    user: connectingUser(url, env),
    ...(pass !== null && { pass }),
    sslnegotiation: socket ? null : ((tls.get('sslnegotiation') as 'postgres' | 'direct' | null) ?? null),
    target_session_attrs: query.get('target_session_attrs') ?? (env.PGTARGETSESSIONATTRS || 'any'),
    ...(fallback && !query.get('application_name') && { applicationName: fallback }),
  };
  if (socket) return { url: rewritten, ...options, path: `${target.socket.replace(/\/+$/, '')}/.s.PGSQL.${target.port}`, ssl: false };
  return { url: rewritten, ...options, host: target.host, port: target.port, ssl: tlsFromUrl(url, env) ?? false };
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
  const query = queryProblem(url);
  if (query) return query;
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
 * Why the query of `url` cannot be read as libpq reads it (conninfo_uri_parse_params), or undefined: a parameter without
 * `=` or without a name, or a `%` that is not percent-encoding. The driver sent the first to the server (which refused the
 * start-up packet), and the others as they were written, or stopped with "URI error". Names are quoted, values never.
 */
function queryProblem(url: string): string | undefined {
  const q = url.indexOf('?');
  if (q === -1) return undefined;
  const hash = url.indexOf('#', q);
  const decodes = (text: string) => {
    try {
      decodeURIComponent(text);
      return true;
    } catch {
      return false;
    }
  };
  for (const param of url.slice(q + 1, hash === -1 ? undefined : hash).split('&')) {
    if (param === '') continue;
    const eq = param.indexOf('=');
    if (eq === 0) return 'a query parameter of the database URL has no name';
    const name = eq === -1 ? param : param.slice(0, eq);
    const shown = decodes(name) ? decodeURIComponent(name) : name;
    if (!decodes(name) || (eq !== -1 && !decodes(param.slice(eq + 1)))) {
      return `the query parameter '${shown}' of the database URL holds a % that is not percent-encoding (write % as %25)`;
    }
    if (eq === -1) return `the query parameter '${shown}' of the database URL has no value: write ${shown}=<value>`;
  }
  return undefined;
}

/**
 * The database and the hosts a postgres:// URL (postgresUrlProblem found none) names, as a message may show
 * them, never the password: the database is the one a connection uses (databaseOf).
 */
export function postgresTarget(url: string, env: Env): { database: string; hosts: string } {
  const { hosts } = authority(url);
  const target = endpoints(url, env);
  const where = !target
    ? hosts
    : 'socket' in target
      ? `the socket in ${target.socket}`
      : target.host.map((h, i) => `${h.includes(':') ? `[${h}]` : h}:${target.port[i]}`).join(',');
  return { database: databaseOf(url, env), hosts: where };
}

const decoded = (s: string) => {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
};

/**
 * The user a connection to `url` logs in as, as the driver takes it: the query's `user`, the URL's, PGUSERNAME, PGUSER,
 * else the operating system's user.
 */
export function connectingUser(url: string, env: Env): string {
  const u = new URL(authority(url).single);
  const given = queryOf(url).get('user') || decoded(u.username) || env.PGUSERNAME || env.PGUSER;
  if (given) return given;
  try {
    return userInfo().username;
  } catch {
    return env.USERNAME || env.USER || env.LOGNAME || '';
  }
}

/**
 * The database a connection to `url` uses, as libpq names it (libpq-connect "dbname"; connectOptions2): the query's
 * `dbname`, where an empty one is the user's name (the URL's path and PGDATABASE unread: an empty value is a value);
 * else the URL's path; else PGDATABASE; else the user's name.
 */
export function databaseOf(url: string, env: Env): string {
  const dbname = queryOf(url).get('dbname');
  if (dbname !== null) return dbname || connectingUser(url, env);
  return decoded(new URL(authority(url).single).pathname.slice(1)) || env.PGDATABASE || connectingUser(url, env);
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
 * holding an unencoded '/', '?' or '#' is masked up to the '@' that ends it (lateUserInformationEnd). The query's
 * `password` and `sslpassword` (libpq's) are masked too.
 */
export function withoutPassword(url: string): string {
  return userPasswordMasked(url).replace(/([?&](?:ssl)?password=)[^&#]*/gi, '$1***');
}

function userPasswordMasked(url: string): string {
  const late = lateUserInformationEnd(url);
  if (late !== -1) {
    const start = url.indexOf('://') + 3;
    const colon = url.indexOf(':', start);
    if (colon !== -1 && colon < late) return `${url.slice(0, colon + 1)}***${url.slice(late)}`;
  }
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^/?#@:]*:)[^/?#]*@/i, '$1***@');
}
