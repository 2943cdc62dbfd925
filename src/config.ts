import { join, resolve } from 'node:path';
import { z } from 'zod';
import { libpqUrl, resolvedDatabaseUrl, type LibpqUrl } from './store/postgres/libpq-env.ts';
import { checkUrlOptions, postgresUrlProblem, withoutPassword } from './store/postgres/url-options.ts';

/** The most HTTP server processes CINDER_PROCESSES may start (`auto` included). */
const MAX_PROCESSES = 64;

/** `*`, `none`, or origins (`scheme://host[:port]`, nothing after) separated by commas. */
function validCorsOrigins(v: string): boolean {
  if (v === '*' || v === 'none') return true;
  return v.split(',').every((o) => {
    const origin = o.trim();
    if (!/^https?:\/\/[^/?#\s]+$/i.test(origin)) return false;
    try {
      return new URL(origin).origin === origin.toLowerCase();
    } catch {
      return false;
    }
  });
}

/**
 * A whole number written in decimal digits, within bounds. Not `z.coerce.number()`, which read `0x50`
 * as 80, `1e3` as 1000 and `0b1` as 1.
 */
function whole(min: number, max = Number.MAX_SAFE_INTEGER) {
  return z.string().trim().regex(/^\d+$/, 'expected a whole number in decimal digits').transform(Number).pipe(z.number().int().min(min).max(max));
}

/** Every setting, its environment variable and its `serve` flag (the variable minus `CINDER_`, kebab-cased). */
const schema = z.object({
  port: whole(0, 65535).default(8080),
  host: z.string().min(1).default('0.0.0.0'),
  /** Public base URL; a path (`https://example.org/cinder`) is the reverse proxy's, which strips it. */
  baseUrl: z.url({ protocol: /^https?$/ }).refine((v) => {
    // Zod runs refinements after z.url() failed too: a value that is no URL is that check's to report.
    if (!URL.canParse(v)) return true;
    const u = new URL(v);
    return u.search === '' && u.hash === '' && !v.endsWith('?') && !v.endsWith('#') && !u.pathname.includes(';');
  }, { message: 'expected an http(s) URL without query, fragment or ";" (a path is fine: https://example.org/cinder)' }).optional(),
  dataDir: z.string().min(1).default('./cinder-data'),
  databaseUrl: z
    .string()
    .refine((v) => /^(postgres(ql)?:\/\/|sqlite:|file:)/.test(v) || !v.includes('://'), {
      message: 'expected a postgres:// URL, sqlite:<path> or a file path',
    })
    .optional(),
  exportStorage: z
    .string()
    .refine((v) => v.startsWith('file:') || v.startsWith('s3://') || v === 'postgres', { message: 'expected file:<dir>, postgres or s3://bucket/prefix' })
    .optional(),
  rateLimits: z.enum(['on', 'off']).default('on'),
  /**
   * `on`: a REST create, update or transaction/batch entry whose literal local references point at no
   * resource of the tenant is refused with 422 (HAPI's behaviour). `off` by default, as in Medplum: apps
   * and partial loads send data out of order (src/fhir/referential-integrity.ts).
   */
  referentialIntegrity: z.enum(['on', 'off']).default('off'),
  /**
   * `on`: `$expunge` removes versions physically (src/fhir/expunge.ts), for tokens with unfiltered
   * system/ or user/ delete scopes. `off` by default, as in HAPI FHIR: the operation answers 403.
   */
  expunge: z.enum(['on', 'off']).default('off'),
  /**
   * `on`: every FHIR REST interaction of a tenant and the OAuth sign-in and token events are recorded as
   * AuditEvents in that tenant, shaped as IHE BALP says, written in batches off the request path
   * (src/audit/). `off` by default, as HAPI FHIR's BALP interceptor is opt-in.
   */
  audit: z.enum(['on', 'off']).default('off'),
  /** Milliseconds between writes of the queued AuditEvents (also written as soon as 500 wait). */
  auditFlushMs: whole(10, 60_000).default(1000),
  /** AuditEvents a process may hold unwritten; beyond, new ones are dropped and counted (src/audit/trail.ts). */
  auditQueueMax: whole(1, 1_000_000).default(20_000),
  /**
   * Origins whose browser apps may call the FHIR and OAuth endpoints (CORS): `*` (any origin: the API
   * takes bearer tokens, never cookies), `none`, or a comma-separated list of origins (src/http/cors.ts).
   */
  corsOrigins: z.string().trim().refine(validCorsOrigins, {
    message: 'expected *, none, or a comma-separated list of origins such as https://app.example.org',
  }).default('*'),
  /** The largest request body of any kind: the server refuses larger ones before a route sees them. */
  maxBodyBytes: whole(1024).default(64 * 1024 * 1024),
  /** Bodies that hold one resource: create, update, operation Parameters, `_search` forms. */
  maxResourceBytes: whole(1024).default(16 * 1024 * 1024),
  /** Transaction and batch Bundles posted to the FHIR base. */
  maxBundleBytes: whole(1024).default(64 * 1024 * 1024),
  /** The native content of a Binary (`POST Binary` / `PUT Binary/{id}` with a non-FHIR Content-Type). */
  maxBinaryBytes: whole(1024).default(64 * 1024 * 1024),
  /** OAuth forms: token, revocation, introspection, the login page's sign-in. */
  maxFormBytes: whole(1024).default(16 * 1024),
  logLevel: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
  accessTokenTtl: whole(30, 86400).default(3600),
  /** Lifetime of client_credentials (backend services) tokens when the client sets none. */
  backendTokenTtl: whole(30, 86400).default(300),
  refreshTokenTtl: whole(60, 365 * 86400).default(30 * 86400),
  /** Requests per minute to the token, revocation and introspection endpoints, per client and per IP. */
  tokenRateLimitClient: whole(1).default(600),
  tokenRateLimitIp: whole(1).default(2400),
  /**
   * Requests per minute to the login page per IP; failed sign-ins per 15 minutes per user from one address (and per
   * device cookie), per user from all addresses together, and per IP (src/auth/rate-limit.ts createLoginThrottle).
   */
  loginRateLimitIp: whole(1).default(120),
  loginFailuresUser: whole(1).default(5),
  loginFailuresUserTotal: whole(1).default(30),
  loginFailuresIp: whole(1).default(50),
  /** `on`: take the client IP from the last `X-Forwarded-For` entry (one trusted reverse proxy). */
  trustProxy: z.enum(['on', 'off']).default('off'),
  /** HTTP server processes sharing the port (SO_REUSEPORT): a number, or `auto` for one per CPU. */
  processes: z.union([z.literal('auto'), whole(1, MAX_PROCESSES)]).default(1),
  /**
   * Seconds `serve` waits after SIGTERM for requests in flight (and the other drain steps); then it
   * closes what is left and exits with status 1.
   */
  drainTimeout: whole(1, 3600).default(30),
  exportWorkers: whole(0, 64).default(2),
  exportFileTtl: whole(60).default(24 * 3600),
  exportFileMaxBytes: whole(1024).default(128 * 1024 * 1024),
  exportMaxJobsPerClient: whole(1, 1000).default(3),
  /** Export kick-offs per minute per client (refused ones included), per process. */
  exportKickoffRateLimit: whole(1).default(30),
  /** Status requests per minute per export job, per process: ten times the polls its `Retry-After: 2` asks for. */
  exportStatusRateLimit: whole(1).default(300),
  exportLeaseSeconds: whole(2, 3600).default(30),
  exportSignedUrls: z.enum(['on', 'off']).default('off'),
  /**
   * How writes are validated against the R4 definitions: `strict` (structure, formats, required
   * bindings, invariants), `structural` (structure and formats only, for loading legacy data) or `off`.
   */
  validation: z.enum(['strict', 'structural', 'off']).default('strict'),
  /** The most codes one ValueSet/$expand response may carry. */
  maxExpansionSize: whole(1).default(10_000),
  /**
   * `true`: rest-hook Subscriptions may deliver to loopback, link-local and private addresses (a receiver
   * beside Cinder); refused by default, at activation and before each delivery (src/fhir/subscriptions/endpoint.ts).
   */
  subscriptionAllowPrivate: z.enum(['true', 'false']).default('false'),
  /** `$import` jobs one process runs at a time (0: this process runs none; another sharing the database does). */
  importJobs: whole(0, 16).default(1),
  /** Accepted or in-progress `$import` jobs one client may have at a time. */
  importMaxJobsPerClient: whole(1, 1000).default(3),
  /**
   * `true`: `$import` inputs may be fetched from loopback, link-local and private addresses (files served
   * beside Cinder); refused by default, at kick-off and before each fetch (src/import/fetch-input.ts).
   */
  importAllowPrivate: z.enum(['true', 'false']).default('false'),
  /**
   * `true`: clients' registered JWK Set URLs (private_key_jwt) may be fetched from loopback, link-local and
   * private addresses (a key server beside Cinder); refused by default, on the address fetched (src/auth/jwks-fetch.ts).
   */
  jwksAllowPrivate: z.enum(['true', 'false']).default('false'),
  /** The most bytes one `$import` input may hold (after gzip decompression). */
  importMaxInputBytes: whole(1024).default(4 * 1024 * 1024 * 1024),
  /** Seconds the download of one `$import` input may take. */
  importFetchTimeout: whole(1, 7 * 24 * 3600).default(3600),
  /** Milliseconds between a process's rounds of Subscription delivery when nothing was due. */
  subscriptionPollMs: whole(10, 600_000).default(1_000),
  /**
   * The most notifications a rest-hook Subscription may have waiting: beyond, it is set to `error` and
   * what waits is dropped (src/fhir/subscriptions/delivery.ts).
   */
  subscriptionMaxPending: whole(1).default(10_000),
  /** Subscription websockets (`{fhir_base}/websocket`) one process holds; beyond, a socket is closed with 1013. */
  websocketMaxConnections: whole(1).default(10_000),
  /** Subscription websockets one process holds of one tenant from one IP address; beyond, a socket is closed with 1008. */
  websocketMaxPerClient: whole(1).default(100),
});

type Parsed = z.infer<typeof schema>;
export type Config = Readonly<
  Omit<Parsed, 'baseUrl' | 'databaseUrl' | 'exportStorage' | 'processes'> & {
    processes: number;
    baseUrl: string;
    /** On PostgreSQL, the URL with what libpq reads beside it written in (libpq-env.ts): what every pool opens. */
    databaseUrl: string;
    /** What libpq would warn of reading the database's configuration (a password file others may read, not read). */
    databaseWarnings: readonly string[];
    exportStorage: string;
  }
>;

export const CONFIG_KEYS = Object.keys(schema.shape) as (keyof Parsed)[];

/** `maxBodyBytes` -> `CINDER_MAX_BODY_BYTES`. */
export function envName(key: string): string {
  return 'CINDER_' + key.replace(/[A-Z]/g, (c) => '_' + c).toUpperCase();
}

/** `maxBodyBytes` -> `--max-body-bytes`. */
export function flagName(key: string): string {
  return '--' + key.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * Builds the frozen configuration from environment variables and `serve` flags (flags win).
 * `PORT` and `DATABASE_URL` are accepted as fallbacks, as container platforms set them.
 */
export function loadConfig(env: Record<string, string | undefined>, flags: Record<string, string> = {}): Config {
  const raw: Record<string, string | undefined> = {};
  // An empty value is no value: it leaves the default, and the container platform's PORT and DATABASE_URL.
  const given = (v: string | undefined) => (v === '' ? undefined : v);
  for (const key of CONFIG_KEYS) raw[key] = given(flags[key]) ?? given(env[envName(key)]);
  // What a bad value is reported as: the variable and flag of the setting, or the platform's variable it came from.
  const named: Record<string, string> = {};
  for (const [key, platform] of [['port', 'PORT'], ['databaseUrl', 'DATABASE_URL']] as const) {
    if (raw[key] !== undefined) continue;
    raw[key] = given(env[platform]);
    if (raw[key] !== undefined) named[key] = `${platform} (read as ${envName(key)} and ${flagName(key)} are not set)`;
  }
  const name = (key: string) => named[key] ?? `${envName(key)} (${flagName(key)})`;
  const result = schema.safeParse(raw);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const key = String(issue.path[0]);
    // A database URL's password is never printed (a container platform keeps what a process writes).
    const got = key === 'databaseUrl' && typeof raw[key] === 'string' ? withoutPassword(raw[key]) : raw[key];
    throw new ConfigError(`invalid ${name(key)}: ${issue.message} (got ${JSON.stringify(got)})`);
  }
  const c = result.data;
  const dataDir = resolve(c.dataDir);
  const databaseUrl = c.databaseUrl ?? 'sqlite:' + join(dataDir, 'cinder.db');
  const onPostgres = /^postgres(ql)?:\/\//i.test(databaseUrl);
  let libpq: LibpqUrl | undefined;
  if (onPostgres) {
    // The pool's options in the URL's query, checked here so that a bad one stops every command as any bad setting does.
    const problem = postgresUrlProblem(databaseUrl);
    if (problem) throw new ConfigError(`invalid ${name('databaseUrl')}: ${problem}`);
    // What libpq reads beside the URL (its connection service, PGCONNECT_TIMEOUT, PGOPTIONS, the password file) is
    // written into it here, once, so that every pool and worker reads the same URL (libpq-env.ts).
    try {
      libpq = libpqUrl(databaseUrl, env);
    } catch (err) {
      throw new ConfigError(`invalid ${name('databaseUrl')}: ${(err as Error).message}`);
    }
    try {
      checkUrlOptions(libpq.url, env);
    } catch (err) {
      const from = libpq.service ? ` (the URL with the settings of service '${libpq.service.name}' in ${libpq.service.file})` : '';
      throw new ConfigError(`invalid ${name('databaseUrl')}: ${(err as Error).message}${from}`);
    }
  }
  if (c.exportStorage === 'postgres' && !onPostgres) {
    throw new ConfigError('invalid CINDER_EXPORT_STORAGE (--export-storage): postgres keeps export files in a PostgreSQL database; CINDER_DATABASE_URL is not one');
  }
  // On PostgreSQL the files go where every process sharing the database can serve them.
  const exportStorage = c.exportStorage ?? (onPostgres ? 'postgres' : 'file:' + join(dataDir, 'exports'));
  if (c.exportSignedUrls === 'on' && !exportStorage.startsWith('s3://')) {
    throw new ConfigError('invalid CINDER_EXPORT_SIGNED_URLS (--export-signed-urls): on needs s3:// export storage (CINDER_EXPORT_STORAGE), whose files a URL can be signed for');
  }
  return Object.freeze({
    ...c,
    dataDir,
    // `auto` is one per CPU, at most the 64 a number may ask for (a 128-core host is not 128 SQLite writers' worth of work).
    processes: c.processes === 'auto' ? Math.min(MAX_PROCESSES, navigator.hardwareConcurrency) : c.processes,
    baseUrl: (c.baseUrl ?? `http://localhost:${c.port}`).replace(/\/+$/, ''),
    // What libpq reads from `env` is written into the URL: the pools open it reading no environment of their own.
    databaseUrl: libpq ? resolvedDatabaseUrl(libpq.url, env) : databaseUrl,
    databaseWarnings: libpq?.warnings ?? [],
    exportStorage,
  });
}

/** Whether the base URL is the default `http://localhost:<port>`: neither CINDER_BASE_URL nor `--base-url` is set. */
export function baseUrlIsDefault(env: Record<string, string | undefined>, flags: Record<string, string> = {}): boolean {
  return !(flags.baseUrl ?? env.CINDER_BASE_URL);
}

/**
 * Why the default base URL is rarely right, and what to set: it is the token issuer, the audience a
 * SMART app sends (`aud`) and the base of every URL Cinder hands out, so a client reaching the server
 * at another address (127.0.0.1, a host name, a proxy) is refused or given links it cannot follow.
 */
export function defaultBaseUrlAdvice(baseUrl: string): string {
  return `CINDER_BASE_URL is not set, so the public base URL is the default ${baseUrl}: it is the token issuer, ` +
    `the aud a SMART app must send, and the base of every FHIR URL and link. Clients reaching Cinder at another ` +
    `address (127.0.0.1, a host name, a proxy) are refused at sign-in ("aud is not this client's FHIR base URL") ` +
    `and get links they cannot follow: set CINDER_BASE_URL (or --base-url) to the URL clients use, such as https://fhir.example.org`;
}

/** The environment that gives another process this exact configuration (every setting as its variable). */
export function configEnv(config: Config): Record<string, string> {
  return Object.fromEntries(CONFIG_KEYS.map((key) => [envName(key), String(config[key])]));
}

/** The body size limits that apply, each capped by CINDER_MAX_BODY_BYTES. */
export interface BodyLimits {
  resource: number;
  bundle: number;
  binary: number;
  form: number;
}

export function bodyLimits(config: Config): BodyLimits {
  const cap = (n: number) => Math.min(n, config.maxBodyBytes);
  return {
    resource: cap(config.maxResourceBytes), bundle: cap(config.maxBundleBytes), binary: cap(config.maxBinaryBytes), form: cap(config.maxFormBytes),
  };
}

/**
 * The path of the public base URL: `/cinder` for `https://example.org/cinder`, empty at the root. Cinder
 * serves at its own root whatever it is (the reverse proxy in front strips it); what the browser sees,
 * the login page's cookie path, needs it.
 */
export function basePathOf(baseUrl: string): string {
  return new URL(baseUrl).pathname.replace(/\/+$/, '');
}

/** The FHIR base URL of a tenant, `{base_url}/tenants/{tenant}/fhir/R4` (README, HTTP interface), also its tokens' audience. */
export function fhirBaseOf(baseUrl: string, tenant: string): string {
  return `${baseUrl}/tenants/${tenant}/fhir/R4`;
}
