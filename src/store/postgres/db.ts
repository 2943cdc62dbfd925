import postgres from 'postgres';
import { StoreConflictError } from '../types.ts';
import { declareArrayTypes } from './array-types.ts';
import type { PgMigration } from './migrations.ts';
import { passwordFileSource } from './libpq-env.ts';
import { transaction } from './transaction.ts';
import { connectTimeoutFromUrl, driverTarget, MAX_POOL_SIZE, RESOLVED, poolSizeFromUrl, type DriverTls } from './url-options.ts';

export interface PostgresStoreOptions {
  /** Connection pool size; default 10 (or `?max=N` in the URL). */
  max?: number;
  /** How often an unreachable database is probed again (default 500 ms). */
  probeIntervalMs?: number;
  /** Milliseconds a statement on the search key connection may go unanswered before it is replaced (default 10 s; keys-connection.ts). */
  keyDeadlineMs?: number;
  /** Told when the database becomes unreachable (with the error) and when it answers again. */
  onAvailabilityChange?: (down: boolean, cause?: unknown) => void;
}

/** int8 (BIGINT, COUNT) values are epoch milliseconds or counts: well inside Number's exact range. */
const int8AsNumber = { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) };

/**
 * Seconds a new connection may take before the query waiting for it fails (`?connect_timeout=N`
 * overrides); also how long the pool's start-ups may go on failing, each closed before the server was
 * ready (a proxy shedding sessions), before the query waiting for one fails (patches/, ARCHITECTURE.md).
 */
export const DEFAULT_CONNECT_TIMEOUT = 5;

/**
 * Delay in seconds before a connection is opened again after a failed attempt (`attempt` counts the
 * pool's failures since its last successful start-up). postgres.js grows it to 20 s by default, and
 * every query queued behind that connection waits for it: during an outage requests hung for 10 s and
 * more. Capped at half a second, a queued query fails within about that much. The delay is drawn
 * between half the step and the step, so that connections that failed together (the whole pool, when
 * a proxy sheds its sessions) do not try again together.
 */
export const reconnectBackoff = (attempt: number, random: () => number = Math.random): number => {
  const step = Math.min(0.05 * 2 ** attempt, 0.5);
  return step / 2 + (random() * step) / 2;
};

/** Seconds the search key connection stays open unused: it is needed when a write meets new keys. */
const KEYS_IDLE_TIMEOUT = 30;

/**
 * Opens the main postgres.js pool, with prepared statements and BIGINT parsed as numbers. The pool size
 * (`?max=N`, default 10) is shared with the pool of generic plans (connectGeneric), which takes a third
 * (at least one; the main pool keeps at least one).
 */
export function connect(url: string, options: PostgresStoreOptions = {}): Pg {
  return open(url, { max: poolSizes(url, options).main, application_name: 'cinder' });
}

function poolSizes(url: string, options: PostgresStoreOptions): { main: number; generic: number } {
  const max = options.max ?? poolSizeFromUrl(url) ?? 10;
  if (!Number.isInteger(max) || max < 1 || max > MAX_POOL_SIZE) throw new RangeError(`invalid Postgres pool size ${max}`);
  const generic = Math.max(1, Math.floor(max / 3));
  return { main: Math.max(1, max - generic), generic };
}

/** Seconds a connection of the pool of generic plans stays open unused. */
const GENERIC_IDLE_TIMEOUT = 60;

/**
 * Opens the pool whose connections plan every prepared statement generically (`plan_cache_mode =
 * force_generic_plan`), with a third of the pool size: the searches of a plain form (StatementForm) run
 * there. On the main pool PostgreSQL planned them anew on each run (0.4-1.4 ms, against 0.1 ms to run a
 * patient's search), since it estimates their generic plan above the values' own. Only such statements
 * run there: a generic plan of a search whose sets depend on its values can be far worse.
 */
export function connectGeneric(url: string, options: PostgresStoreOptions = {}): Pg {
  return open(url, { max: poolSizes(url, options).generic, application_name: 'cinder-generic', idle_timeout: GENERIC_IDLE_TIMEOUT, generic: true });
}

/**
 * Opens the one connection that creates search keys (createPostgresKeys), outside the pool: a write
 * transaction holds a pool connection while it waits for this one. Closed after a while unused.
 */
export function connectForKeys(url: string): Pg {
  return open(url, { max: 1, application_name: 'cinder-keys', idle_timeout: KEYS_IDLE_TIMEOUT });
}

/** Seconds a connection is kept before it is replaced: 30 to 60 minutes, spread so a pool's connections are not replaced at once (postgres.js's default). */
function connectionLifetime(): number {
  return 60 * (30 + Math.random() * 30);
}

function open(url: string, o: { max: number; application_name: string; idle_timeout?: number; generic?: boolean }): Pg {
  // An IPv6 address in brackets, a Unix-domain socket's directory, the query's `host` and `port` are given
  // apart, as libpq reads them: postgres.js would take `[` for a host, connect to `%2Fvar%2Frun%2Fpostgresql`
  // by TCP, and send `host` to the server as a setting, which refuses it; `?dbname=` names the database, and a
  // socket is never asked for TLS; `sslrootcert` is read here, not sent to the server (driverTarget).
  // `url` is one loadConfig resolved (resolvedDatabaseUrl): what libpq reads from the environment is written in it, and
  // every field the driver would read from process.env is given (driverTarget), so that it connects where the
  // configuration says, whatever the process's own environment holds.
  const { url: driverUrl, applicationName, settings, pass, ...hosts } = driverTarget(url, RESOLVED);
  // No password given: the password file's, read for each new connection as libpq reads it (a rotated password is used).
  const fromFile = pass ? undefined : passwordFileSource(url, RESOLVED);
  const sql = postgres(driverUrl, {
    ...(hosts as { host?: string; port?: number; path?: string; database: string; ssl: DriverTls; user: string }),
    // The driver calls it for each connection the server asks a password of; an empty one would send it to PGPASSWORD.
    // The patched driver names the host of the URL's list the connection is to: its line of the password file is read.
    pass: fromFile ? (((host: number) => fromFile(host).password ?? '') as () => string) : pass ? pass : () => '',
    max: o.max,
    // Each of postgres.js's options is given, so that none is read from a PG<OPTION> environment variable (PGDEBUG would
    // put each failed statement's text and values on its error, into logs); the URL may name none (checkUrlOptions).
    // Given even when undefined (none): `'idle_timeout' in options` is what keeps the variable unread.
    idle_timeout: o.idle_timeout,
    // The driver takes a function, drawn for each connection, though its types say a number.
    max_lifetime: connectionLifetime as unknown as number,
    keep_alive: 60,
    // Not in the driver's types, but read as the others.
    ...({ max_pipeline: 100 } as object),
    debug: false,
    publications: 'alltables',
    prepare: true,
    types: { int8: int8AsNumber },
    // The built-in array types are declared below, not fetched by each new connection (array-types.ts).
    fetch_types: false,
    onnotice: () => undefined,
    // JIT compilation pays off for long analytical queries only: a search whose cost the planner
    // overestimates (no statistics yet after a bulk import) spent 120 ms compiling a 4 ms query.
    // The URL's settings (application_name, options, any other) after Cinder's, as the driver put them when it read them.
    connection: { application_name: applicationName ?? o.application_name, jit: 'off', ...(o.generic && { plan_cache_mode: 'force_generic_plan' }), ...settings },
    backoff: (attempt: number) => reconnectBackoff(attempt),
    connect_timeout: connectTimeoutFromUrl(url) ?? DEFAULT_CONNECT_TIMEOUT,
  });
  declareArrayTypes(sql as unknown as postgres.Sql<Record<string, unknown>>);
  return sql;
}

/**
 * Driver and socket error codes of a connection that could not be made or was lost; SSL_NOT_SUPPORTED, a server without
 * TLS where `sslmode` requires it (the patched driver's; it reset the connection before), as a server refusing sessions.
 */
const CONNECTION_ERRORS = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN',
  'CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED', 'SSL_NOT_SUPPORTED',
]);

/**
 * OpenSSL's verdicts on the server's certificate (X509_V_ERR_*, as node:tls names them): a certificate the URL's
 * `sslmode` and `sslrootcert` do not trust (another authority's, expired, revoked, for another host) makes every new
 * connection fail, as a server that is down does, until it is replaced; with the TLS handshakes that failed (ERR_SSL_*,
 * ERR_TLS_*), an outage (503, probed again), not a fault of the request (500 on each one).
 */
const CERTIFICATE_ERRORS = new Set([
  'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_CRL', 'UNABLE_TO_DECRYPT_CERT_SIGNATURE', 'UNABLE_TO_DECRYPT_CRL_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY', 'CERT_SIGNATURE_FAILURE', 'CRL_SIGNATURE_FAILURE', 'CERT_NOT_YET_VALID', 'CERT_HAS_EXPIRED',
  'CRL_NOT_YET_VALID', 'CRL_HAS_EXPIRED', 'ERROR_IN_CERT_NOT_BEFORE_FIELD', 'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'ERROR_IN_CRL_LAST_UPDATE_FIELD', 'ERROR_IN_CRL_NEXT_UPDATE_FIELD', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'CERT_CHAIN_TOO_LONG', 'CERT_REVOKED', 'INVALID_CA',
  'PATH_LENGTH_EXCEEDED', 'INVALID_PURPOSE', 'CERT_UNTRUSTED', 'CERT_REJECTED', 'HOSTNAME_MISMATCH',
]);

/**
 * SQLSTATEs of a server that cannot serve now: admin_shutdown, crash_shutdown, cannot_connect_now
 * (starting up or shutting down), too_many_connections, disk_full, out_of_memory, io_error; and the
 * whole connection-exception class 08. Also what refuses a new session, which no statement of Cinder's
 * causes: invalid_authorization_specification and invalid_password (a password rotated, a role dropped, no
 * pg_hba.conf entry), invalid_catalog_name (the database dropped or renamed). A request then answers 503 with
 * Retry-After and the probe finds the database again once it is fixed, where it answered 500 on each request.
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '53100', '53200', '58030', '28000', '28P01', '3D000']);

/**
 * True for errors that mean the database is unreachable or cannot work for now, not that the query was wrong. A socket
 * or TLS code counts only on an error of the driver's own connections (fromDriver): a store call runs its caller's code
 * too (a write's callback, a sink's stream read inside it), whose fetch or S3 request failing with ECONNRESET or
 * ECONNREFUSED says nothing of the database, and opened the circuit breaker (every call 503 until the probe answered).
 */
export function isPostgresOutage(err: unknown): boolean {
  if (err instanceof postgres.PostgresError) return err.code.startsWith('08') || UNAVAILABLE_STATES.has(err.code);
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && (CONNECTION_ERRORS.has(code) || CERTIFICATE_ERRORS.has(code) || /^ERR_(SSL|TLS)_/.test(code)) && fromDriver(err as object);
}

/**
 * Whether `err` came out of postgres.js: every error it rejects a statement with carries that statement (`query`, its
 * own property, which the driver defines, src/connection.js queryError), and its own connection errors (CONNECTION_CLOSED,
 * CONNECT_TIMEOUT...) have their code as `errno` (src/errors.js connection). A socket error of a fetch or of an S3
 * client has neither (Bun's have `errno` 0, Node's a negative number).
 */
function fromDriver(err: object): boolean {
  const e = err as { code?: unknown; errno?: unknown };
  return Object.hasOwn(err, 'query') || (typeof e.errno === 'string' && e.errno === e.code);
}

/** True for a statement the server cancelled: `statement_timeout`, or an administrator (query_canceled, 57014). */
export function isPostgresTimeout(err: unknown): boolean {
  return err instanceof postgres.PostgresError && err.code === '57014';
}

/**
 * True for a value PostgreSQL cannot hold: U+0000 in a text parameter (character_not_in_repertoire,
 * 22021) or in jsonb (untranslatable_character, 22P05). Cinder's own values never hold it.
 */
export function isPostgresUnholdable(err: unknown): boolean {
  return err instanceof postgres.PostgresError && (err.code === '22021' || err.code === '22P05');
}

/** TypeScript types of the custom parsers above. */
type PgTypes = { int8: number };
export type Pg = postgres.Sql<PgTypes>;
/** The transaction-scoped handle `sql.begin` (through `transaction`) passes to its callback. */
export type PgTx = postgres.TransactionSql<PgTypes>;

/** Process-independent key for the migration lock (any constant; "cinder" in ASCII). */
export const MIGRATION_LOCK = 0x63696e646572;

/**
 * Applies pending migrations in one transaction under `pg_advisory_xact_lock`, so processes starting
 * together serialise: the first applies, the others then find nothing to do.
 */
export async function runMigrations(sql: Pg, migrations: PgMigration[], now: number): Promise<string[]> {
  return transaction(sql, async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK}::bigint)`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`;
    const rows = await tx<{ version: number }[]>`SELECT version FROM schema_migrations`;
    const done = new Set(rows.map((r) => r.version));
    const applied: string[] = [];
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      await tx.unsafe(m.sql); // static DDL from migrations.ts, no values
      await tx`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${m.version}, ${m.name}, ${now})`;
      applied.push(`${m.version}_${m.name}`);
    }
    return applied;
  });
}

/**
 * The rows of `schema_migrations`, none when the table does not exist (a database Cinder never migrated): one
 * statement, what every command's start reads (src/cli/context.ts).
 */
export async function appliedMigrations(sql: Pg): Promise<{ version: number; name: string }[]> {
  try {
    return await sql<{ version: number; name: string }[]>`SELECT version, name FROM schema_migrations ORDER BY version`;
  } catch (err) {
    if (err instanceof postgres.PostgresError && err.code === UNDEFINED_TABLE) return [];
    throw err;
  }
}

/** SQLSTATE undefined_table: a statement named a table the database does not have. */
const UNDEFINED_TABLE = '42P01';

/** SQLSTATEs a caller can resolve by retrying or reporting a conflict: unique_violation, deadlock, serialization failure. */
const CONFLICT_CODES = new Set(['23505', '40P01', '40001']);

/** Maps a Postgres conflict error to StoreConflictError (keeping it as `cause`); other errors pass through. */
export function asConflict(err: unknown, what: string): unknown {
  if (err instanceof postgres.PostgresError && CONFLICT_CODES.has(err.code)) {
    return new StoreConflictError(`${what}: ${err.message}`, { cause: err });
  }
  return err;
}
