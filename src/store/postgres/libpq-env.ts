import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';
import { passwordFor, readPasswordFile, watchedPasswordFile, type PasswordKey } from './password-file.ts';
import { readService, type Service } from './service-file.ts';
import { allEndpoints, authority, checkUrlOptions, connectTimeoutSeconds, queryOf, TLS_ENV } from './url-options.ts';

/** A database URL with what libpq would read beside it written into it (libpqUrl). */
export interface LibpqUrl {
  url: string;
  /** What libpq would say on stderr and go on: a password file it does not read. */
  warnings: string[];
  /** The connection service read, if any (for messages about its settings). */
  service?: Service;
}

type Env = Record<string, string | undefined>;

/** An environment variable as libpq reads it: an empty one is unset. */
const envValue = (env: Env, name: string) => (env[name] ? env[name] : undefined);

/** `url` with the query parameters `names` removed. */
function withoutParams(url: string, names: string[]): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const hash = url.indexOf('#', q);
  const kept = url.slice(q + 1, hash === -1 ? undefined : hash).split('&').filter((p) => p !== '' && !names.includes(decodeURIComponent(p.split('=')[0]!)));
  return url.slice(0, q) + (kept.length ? `?${kept.join('&')}` : '') + (hash === -1 ? '' : url.slice(hash));
}

/** `url` with the query parameters `params` added (before any fragment). */
function withParams(url: string, params: [string, string][]): string {
  if (!params.length) return url;
  const hash = url.indexOf('#');
  const [head, tail] = hash === -1 ? [url, ''] : [url.slice(0, hash), url.slice(hash)];
  const added = params.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
  return `${head}${head.includes('?') ? (head.endsWith('?') || head.endsWith('&') ? '' : '&') : '?'}${added}${tail}`;
}

/** What `url` itself names of libpq's key words that a URL may carry outside its query (its authority and path). */
function namedOutsideQuery(url: string): Set<string> {
  const { hosts, single } = authority(url);
  const u = new URL(single);
  const named = new Set<string>();
  if (hosts.split(',').some((h) => h.replace(/^\[[^\]]*\]/, '').replace(/:\d*$/, '') !== '' || h.startsWith('['))) named.add('host');
  if (hosts.split(',').some((h) => /:\d+$/.test(h.replace(/^\[[^\]]*\]/, '')))) named.add('port');
  if (u.pathname.length > 1) named.add('dbname');
  if (u.username) named.add('user');
  if (u.password) named.add('password');
  return named;
}

/**
 * libpq's environment variables of its key words that neither the driver nor url-options.ts reads (libpq-envars), each
 * read for a key word the URL and its service do not name: PGOPTIONS and PGAPPNAME are sent to the server as the URL's
 * `options` and `application_name` are; the others are checked as the URL's (what the driver does anyway accepted, what
 * it cannot do refused at start naming the variable).
 */
const ENV_KEY_WORDS: Record<string, string> = {
  PGOPTIONS: 'options',
  PGAPPNAME: 'application_name',
  PGCLIENTENCODING: 'client_encoding',
  PGCHANNELBINDING: 'channel_binding',
  PGGSSENCMODE: 'gssencmode',
  PGREQUIREAUTH: 'require_auth',
  PGKRBSRVNAME: 'krbsrvname',
  PGGSSLIB: 'gsslib',
  PGGSSDELEGATION: 'gssdelegation',
  PGREQUIREPEER: 'requirepeer',
  PGSSLCOMPRESSION: 'sslcompression',
  PGLOADBALANCEHOSTS: 'load_balance_hosts',
  PGMINPROTOCOLVERSION: 'min_protocol_version',
  PGMAXPROTOCOLVERSION: 'max_protocol_version',
};

/** Checks variable `name`'s value for key word `key` as checkUrlOptions checks the URL's: its RangeError names the variable. */
function checkFromEnv(name: string, key: string, value: string): void {
  try {
    checkUrlOptions(`postgres://localhost/?${encodeURIComponent(key)}=${encodeURIComponent(value)}`, {});
  } catch (err) {
    throw new RangeError((err as Error).message.replace(' in the database URL', ` in ${name}`).replace(/: remove it$/, ': unset it'));
  }
}

/**
 * `url` (a postgres:// URL) with what libpq reads beside a connection string written into its query, so that the rest of
 * Cinder (url-options.ts, the driver) reads one URL, libpq's order kept (libpq-connect, libpq-envars, libpq-pgservice,
 * libpq-pgpass): what the URL names; then the settings of its connection service (`?service=`, else PGSERVICE) for the
 * key words it does not name; then PGCONNECT_TIMEOUT for `connect_timeout` and the variables of ENV_KEY_WORDS (the driver
 * reads PGHOST, PGPORT, PGDATABASE, PGUSER and PGPASSWORD itself, url-options.ts the TLS variables, each after the service's);
 * then, when no password is given anywhere, the password file's line for the connection (`?passfile=`, else PGPASSFILE,
 * else ~/.pgpass; an empty `passfile` is ~/.pgpass, PGPASSFILE unread, as libpq has it). `service`, `servicefile` and `passfile` are taken out. PGHOSTADDR, which the driver cannot honour, is
 * refused as `hostaddr` is. A RangeError names the variable or file of a value that cannot be used.
 */
export function libpqUrl(url: string, env: Env, home: string = env.HOME || homedir()): LibpqUrl {
  const query = queryOf(url);
  if (envValue(env, 'PGHOSTADDR') !== undefined && !query.has('hostaddr')) {
    throw new RangeError("PGHOSTADDR is an option of libpq's client that Cinder does not support (name the host by its address in the host, or in PGHOST): unset it");
  }
  const named = namedOutsideQuery(url);
  const added: [string, string][] = [];
  const given = (key: string) => named.has(key) || query.has(key) || added.some(([k]) => k === key);
  const serviceName = query.get('service') || envValue(env, 'PGSERVICE');
  const service = serviceName ? readService(serviceName, query.get('servicefile') || undefined, env, home) : undefined;
  for (const [key, value] of service?.settings ?? []) if (!given(key)) added.push([key, value]);
  const timeout = envValue(env, 'PGCONNECT_TIMEOUT');
  if (timeout !== undefined && !given('connect_timeout')) {
    if (connectTimeoutSeconds(timeout) === undefined) throw new RangeError(`invalid connect_timeout '${timeout}' in PGCONNECT_TIMEOUT: expected seconds, 0 for none`);
    added.push(['connect_timeout', timeout]);
  }
  for (const [name, key] of Object.entries(ENV_KEY_WORDS)) {
    const value = envValue(env, name);
    if (value === undefined || given(key)) continue;
    checkFromEnv(name, key, value);
    added.push([key, value]);
  }
  const passfile = added.find(([k]) => k === 'passfile')?.[1] ?? query.get('passfile');
  const out = withParams(withoutParams(url, ['service', 'servicefile', 'passfile']), added.filter(([k]) => k !== 'passfile'));
  // libpq reads the file when the password it has is none or empty.
  const passwordGiven = named.has('password') || !!query.get('password') || added.some(([k, v]) => k === 'password' && v !== '') || envValue(env, 'PGPASSWORD') !== undefined;
  // A `passfile` given (the URL's, the service's), empty included, keeps PGPASSFILE unread; an empty one is ~/.pgpass.
  const path = (passfile ?? envValue(env, 'PGPASSFILE')) || join(home, '.pgpass');
  const fromFile = passwordGiven ? { url: out, warnings: [] } : withPasswordFile(out, path);
  return { ...fromFile, ...(service && { service }) };
}

/**
 * libpq's environment variables that the driver or url-options.ts read when the URL names their key word (libpq-envars),
 * beside the TLS variables (TLS_ENV): PGUSERNAME, the driver's, before PGUSER.
 */
const RESOLVED_KEY_WORDS: [key: string, names: string[]][] = [
  ['host', ['PGHOST']],
  ['port', ['PGPORT']],
  ['dbname', ['PGDATABASE']],
  ['user', ['PGUSERNAME', 'PGUSER']],
  ['password', ['PGPASSWORD']],
  ['target_session_attrs', ['PGTARGETSESSIONATTRS']],
  ...Object.entries(TLS_ENV).filter(([key]) => key !== 'requiressl' && key !== 'sslcrldir').map(([key, name]): [string, string[]] => [key, [name]]),
];

/**
 * `url` (libpqUrl's, checked by checkUrlOptions with `env`) with the rest of what libpq reads from `env` written into its
 * query: PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGTARGETSESSIONATTRS and the TLS variables, each for a key word
 * the URL does not name (an empty variable unset). The URL is then all there is: the pools open it with no environment
 * (url-options.ts RESOLVED), so that a command given one environment never connects with the process's own (the driver
 * read PGHOST, PGDATABASE, PGUSER, PGPASSWORD... from process.env where the URL named none). PGREQUIRESSL=0 asks for
 * nothing and is not written; PGSSLCRLDIR and a PGREQUIRESSL of 1 were refused.
 */
export function resolvedDatabaseUrl(url: string, env: Env): string {
  const query = queryOf(url);
  const named = namedOutsideQuery(url);
  const added: [string, string][] = [];
  for (const [key, names] of RESOLVED_KEY_WORDS) {
    // postgres.js's `?ssl=` is the URL's sslmode.
    if (named.has(key) || query.has(key) || (key === 'sslmode' && query.has('ssl'))) continue;
    // A URL naming a password file (no password given anywhere) keeps it: PGPASSWORD was unset.
    const value = names.map((name) => envValue(env, name)).find((v) => v !== undefined);
    if (value !== undefined) added.push([key, value]);
  }
  return withParams(url, added);
}

/**
 * `url` naming the password file at `path` as its `passfile` (in place of an empty `password=`, the URL's or its
 * service's, which the driver would read first and send), read again for each new connection as libpq reads it
 * (passwordFileSource): a password rotated in the file is used without a restart, each host of the URL given its
 * own line. Checked here as it is now: a warning when libpq would not read it.
 */
function withPasswordFile(url: string, path: string): LibpqUrl {
  const named = withParams(withoutParams(url, ['password']), [['passfile', path]]);
  const file = readPasswordFile(path);
  if (file !== undefined && 'warning' in file) return { url: named, warnings: [file.warning] };
  return { url: named, warnings: [] };
}

/** What the password file of a URL libpqUrl wrote (its `passfile`) gives a connection now. */
export interface FilePassword {
  /** The file's path. */
  path: string;
  /** The password of the file's first line matching the connection to the host asked about, or undefined. */
  password: string | undefined;
}

/**
 * For a URL libpqUrl named a password file in (`passfile`: no password given anywhere), a function giving what the file
 * gives the connection now, as libpq reads the file for each connection: the file is looked at (stat) on each call and
 * read again only when it changed (its inode, size, modification or change time), so that a password rotated in it, or
 * a file written after the start, is used by the next connection without a restart; a file gone, or that others may now
 * read, gives none. Never throws (the driver calls it while it authenticates). Undefined for another URL.
 */
export function passwordFileSource(url: string, env: Env): ((host?: number) => FilePassword) | undefined {
  const path = queryOf(url).get('passfile');
  if (path === null) return undefined;
  const keys = passwordKeys(url, env);
  const current = watchedPasswordFile(path);
  return (host) => {
    const file = current();
    if (file === undefined || 'warning' in file) return { path, password: undefined };
    // The host a connection is to (the driver's index into the URL's hosts), as libpq reads its line for each host.
    const key = host === undefined ? undefined : keys[host];
    if (key !== undefined) return { path, password: passwordFor(file.lines, key) };
    // No host named (a message about a refused password): the first host's that has a line.
    for (const k of keys) {
      const password = passwordFor(file.lines, k);
      if (password !== undefined) return { path, password };
    }
    return { path, password: undefined };
  };
}

/**
 * The operating system's user, as the driver names it when nothing else does (postgres.js osUsername): the process's
 * own, as libpq's too; USERNAME, USER or LOGNAME only when it has none (a USER left from another account is not it).
 */
function osUser(env: Env): string {
  try {
    return userInfo().username;
  } catch {
    return env.USERNAME || env.USER || env.LOGNAME || '';
  }
}

/**
 * The host, port, database and user of each host `url` connects to, as libpq and the driver resolve them (the query's,
 * the URL's, PGHOST, PGPORT, PGDATABASE, PGUSER; localhost, 5432, the user's name, the operating system's user).
 */
function passwordKeys(url: string, env: Env): PasswordKey[] {
  const query = queryOf(url);
  const u = new URL(authority(url).single);
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  const user = query.get('user') || decode(u.username) || envValue(env, 'PGUSERNAME') || envValue(env, 'PGUSER') || osUser(env);
  // An empty `dbname` is the user's name, the path and PGDATABASE unread, as libpq has it (databaseOf).
  const dbname = query.get('dbname');
  const database = dbname !== null ? dbname || user : decode(u.pathname.slice(1)) || envValue(env, 'PGDATABASE') || user;
  // The hosts in the driver's order (driverTarget gives it the same list): the driver names a connection's by its index.
  const target = allEndpoints(url, env);
  if ('socket' in target) return [{ host: target.socket, port: String(target.port), database, user }];
  return target.host.map((host, i) => ({ host, port: String(target.port[i]), database, user }));
}
