import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { createKeyRing } from '../auth/keys.ts';
import { MAX_TOKEN_TTL } from '../auth/tokens.ts';
import { systemClock, type Clock } from '../clock.ts';
import { loadConfig, type Config } from '../config.ts';
import { createLogger } from '../log.ts';
import { openStore, sqlitePath } from '../store/open.ts';
import { errorText, MaintenanceError, openExisting, sqliteSchema } from '../store/sqlite/maintenance.ts';
import type { SchemaState } from '../store/schema-state.ts';
import { StoreUnavailableError, type Store } from '../store/types.ts';
import { AdminError } from '../auth/admin.ts';
import { FhirError } from '../errors.ts';
import { recordAdminChange } from '../audit/admin.ts';
import type { AdminTarget } from '../audit/event.ts';
import { fhirBaseOf } from '../config.ts';
import { NoDatabaseError, UsageError, type CliIO, type Command } from './command.ts';
import { isPostgresUrl } from './sqlite-file.ts';
import { connectTimeoutFromUrl, postgresTarget, RESOLVED, sessionAttrsFromUrl } from '../store/postgres/url-options.ts';
import { DEFAULT_CONNECT_TIMEOUT } from '../store/postgres/db.ts';
import { passwordFileSource } from '../store/postgres/libpq-env.ts';

/** What a command that works on the server's database says when the configuration finds none (`variable`: where it looked). */
function noDatabaseAdvice(variable: string): string {
  return (
    `set ${variable} as the server has it; to start a new database, run \`cinder serve\` ` +
    "(whose first start also creates tenant 'default' and an admin client) or `cinder migrate`"
  );
}

/**
 * Refuses a SQLite file that is not a Cinder database before anything opens it (a store would create the file,
 * and switch an existing one to WAL): none at `path`, a directory, a file that is not SQLite, or a SQLite
 * database without Cinder's migrations (another program's). In memory there is nothing to miss.
 */
function requireSqliteDatabase(path: string): void {
  if (path === ':memory:') return;
  const advice = noDatabaseAdvice('CINDER_DATA_DIR (or CINDER_DATABASE_URL)');
  const where = resolve(path);
  if (!existsSync(path)) throw new NoDatabaseError(`no Cinder database at ${where}: ${advice}`);
  let db;
  try {
    db = openExisting(path);
  } catch (err) {
    // A directory at the path; a file that cannot be opened (its permissions) is left to fail as it does.
    if (err instanceof MaintenanceError && err.reason === 'refused') throw new NoDatabaseError(`${where} is a directory, not a Cinder database: ${advice}`);
    throw err;
  }
  try {
    let version: number;
    try {
      version = sqliteSchema(db).version;
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'SQLITE_NOTADB') throw err;
      throw new NoDatabaseError(`${where} is not a SQLite database (${errorText(err)}): ${advice}`);
    }
    if (version === 0) throw new NoDatabaseError(`${where} holds no Cinder schema: ${advice}`);
  } finally {
    db.close();
  }
}

/**
 * The clock a command records a client's or user's revocation by: the machine's, raised to the database's where that
 * is ahead (PostgreSQL; SQLite's processes all read the one machine's clock). A revocation refuses the tokens issued
 * on records the servers read before it by their clocks, which agree with the database's: a `cinder` on a machine
 * behind them would let through those issued on a record read in the lag. Taken ahead of the servers' clocks it
 * refuses more, for that lead; the servers record none of these themselves, so their clocks are never raised.
 */
export async function revocationClock(ctx: { store: Store; clock: Clock }): Promise<Clock> {
  const database = await ctx.store.oauth.databaseNow();
  const lag = database === null ? 0 : database - ctx.clock.now();
  return lag > 0 ? { now: () => ctx.clock.now() + lag } : ctx.clock;
}

/** A PostgreSQL URL as a message may show it: host, port and database, never the password. */
function postgresName(url: string): string {
  const { database, hosts } = postgresTarget(url, RESOLVED);
  return `database '${database}' on ${hosts}`;
}

/**
 * What a process of this release says when the database holds migrations it does not know (a newer Cinder
 * migrated it): it goes on, as during a rolling upgrade, where older processes keep running beside newer ones.
 */
export function newerSchemaWarning(unknown: readonly string[]): string {
  return (
    `the database has ${unknown.length === 1 ? 'a migration' : `${unknown.length} migrations`} this release does not know ` +
    `(${unknown.join(', ')}): a newer Cinder migrated it. This process runs on it as it is, as during a rolling upgrade; ` +
    'once that is over, run the newer release everywhere (cinder check reports this until then)'
  );
}

/**
 * Config from the environment (and flags), and a migrated store: what most commands start with. Only
 * `serve`, `migrate` (`create` true) and `tenant create` (`create` 'missing': the first command of a new installation
 * set up before its first start, as DESIGN.md's command list allows; only where no file is) make a new database; every other command refuses to start
 * when the configuration finds no Cinder database (NoDatabaseError, exit 2), so that a client, user or import
 * is never written to a new database no server reads (a CINDER_DATA_DIR not exported, a server started with
 * `--data-dir`). A PostgreSQL database exists before Cinder does: one without Cinder's migrations is refused.
 * `created`, with `create`: the configuration found no Cinder database, and this made one (migrate) or will.
 * A database with every migration of this release applied is not migrated (nor locked): the start costs one read
 * of `schema_migrations`. Migrations a newer Cinder applied are left alone, as the migration would (a rolling upgrade),
 * and said on stderr (newerSchemaWarning): a plain line, or with `server` a log entry. A PostgreSQL server that
 * cannot be reached or refuses the connection is one line naming the database and CINDER_DATABASE_URL. Only with
 * `server` (serve) is the database's later loss and return logged: for a command, a failure is its last line.
 */
export async function openContext(io: CliIO, flags: Record<string, string> = {}, migrate = true, create: boolean | 'missing' = false, server = false) {
  const config: Config = loadConfig(io.env, flags);
  const postgres = isPostgresUrl(config.databaseUrl);
  const path = postgres ? undefined : sqlitePath(config.databaseUrl);
  // 'missing' (tenant create): a new file where there is none, but a file there that is not Cinder's is refused as below.
  const missing = path !== undefined && path !== ':memory:' && !existsSync(path);
  if (path !== undefined && (create === false || (create === 'missing' && !missing))) requireSqliteDatabase(path);
  let created = create !== false && missing;
  const log = createLogger(config.logLevel);
  // What libpq would say of the database's configuration and go on (a password file others may read, not read); a
  // server's siblings (CINDER_PROCESSES) leave it to the first process, as below.
  if (!(server && !migrate)) {
    for (const warning of config.databaseWarnings) {
      if (server) log.warn(warning);
      else io.stderr(`cinder: warning: ${warning}\n`);
    }
  }
  // Set once the start is done, and only for a server: a start that fails says why in its last line.
  let started = false;
  const store: Store = openStore(config.databaseUrl, {
    onAvailabilityChange: (down, err) => {
      if (!started) return;
      if (down) log.warn('database unreachable: answering 503 until it is back', { err });
      else log.info('database reachable again');
    },
  });
  try {
    // One read of the applied migrations; the migration (a transaction under the migration lock, on SQLite the
    // write lock) runs only when this release's are not all applied, and re-reads them under its lock.
    let schema: SchemaState;
    try {
      schema = await store.schema();
    } catch (err) {
      // The first statement opens the connection: an unreachable server, a wrong password, a missing database.
      if (!postgres) throw err;
      throw unusableDatabase(err, config.databaseUrl);
    }
    if (postgres && schema.version === 0) {
      if (!create) throw new NoDatabaseError(`the PostgreSQL ${postgresName(config.databaseUrl)} holds no Cinder schema: ${noDatabaseAdvice('CINDER_DATABASE_URL')}`);
      created = true;
    }
    if (migrate && schema.pending.length > 0) await store.migrate();
    // A server's siblings (CINDER_PROCESSES, started without migrating) leave it to the first process, which says it once.
    if (schema.unknown.length > 0 && !(server && !migrate)) {
      const message = newerSchemaWarning(schema.unknown);
      if (server) log.warn(message, { unknownMigrations: schema.unknown, schemaVersion: schema.version, releaseVersion: schema.latest });
      else io.stderr(`cinder: warning: ${message}\n`);
    }
  } catch (err) {
    await store.close().catch(() => undefined); // the refusal or the failure is what to report
    throw err;
  }
  started = server;
  const keys = createKeyRing(store, systemClock, MAX_TOKEN_TTL);
  const where = postgres ? `the PostgreSQL ${postgresName(config.databaseUrl)}` : resolve(path!);
  return { config, log, store, keys, clock: systemClock, created, where };
}

/**
 * A failed connection's reason, without the store's "the database is unreachable: " before the driver's, and
 * with what the driver's codes for a session that never started mean (`write CONNECT_TIMEOUT host:port`).
 */
export function connectionProblem(err: unknown, url: string): string {
  const cause = err instanceof StoreUnavailableError && err.cause instanceof Error ? err.cause : err;
  const message = cause instanceof Error ? cause.message : String(cause);
  const code = (cause as { code?: unknown } | null)?.code;
  const seconds = connectTimeoutFromUrl(url) ?? DEFAULT_CONNECT_TIMEOUT;
  // The driver ends each session whose server is not of the kind asked for (as libpq does), and then the last.
  const attrs = sessionAttrsFromUrl(url, RESOLVED);
  if (code === 'CONNECTION_DESTROYED' && attrs !== undefined) return `no server of the URL is one target_session_attrs=${attrs} asks for: ${message}`;
  if (code !== 'CONNECT_TIMEOUT' && code !== 'CONNECTION_CLOSED') return message;
  if (seconds === 0) return `no session started: the server closed the connection (a pooler refusing sessions, a server shutting down): ${message}`;
  return (
    `no session started within connect_timeout (${seconds} s): the server did not answer or closed the connection ` +
    `(a wrong host or port, a firewall, a pooler refusing sessions, a server shutting down): ${message}`
  );
}

/**
 * The error that ends a command (exit 1, one line) when the PostgreSQL database at `url` cannot be used: the server
 * refuses connections or does not answer, the password is wrong, the database does not exist.
 */
export function unusableDatabase(err: unknown, url: string): Error {
  const cause = err instanceof StoreUnavailableError ? err.cause : err;
  const refused = (cause as { code?: unknown } | null)?.code === '28P01';
  // As libpq says it: a password the server refused came from the password file (libpq-env.ts), as the file is now.
  const file = refused ? passwordFileSource(url, RESOLVED)?.() : undefined;
  const fromFile = file?.password ? ` (password retrieved from file '${file.path}')` : '';
  // An empty password of the file is none: libpq sends nothing and says so.
  const problem = file?.password === '' ? `fe_sendauth: no password supplied (the line of the password file '${file.path}' for this connection gives an empty one)` : connectionProblem(err, url);
  return new Error(`cannot use the PostgreSQL ${postgresName(url)} (CINDER_DATABASE_URL): ${problem}${fromFile}`, { cause: err });
}

/** Prints `data` as JSON with --json, otherwise as `key: value` lines. */
export function printData(io: CliIO, json: boolean, data: Record<string, unknown>): void {
  if (json) {
    io.stdout(JSON.stringify(data, null, 2) + '\n');
    return;
  }
  for (const [k, v] of Object.entries(data)) {
    if (v === undefined || v === null) continue;
    io.stdout(`${k}: ${Array.isArray(v) ? v.join(' ') : String(v)}\n`);
  }
}

/** Runs `fn` on the migrated store and closes it; an AdminError (a refused change) or a FhirError is a usage error. */
export async function withStore<T>(io: CliIO, fn: (ctx: Awaited<ReturnType<typeof openContext>>) => Promise<T>): Promise<T> {
  const ctx = await openContext(io);
  try {
    return await fn(ctx);
  } catch (err) {
    // An administrator's mistake (an unknown client, a bad flag value) or a refusal of the FHIR layer (`cinder expunge`).
    if (err instanceof AdminError || err instanceof FhirError) throw new UsageError(err.message, { cause: err });
    throw err;
  } finally {
    await ctx.store.close();
  }
}

/**
 * A `<what> list --tenant <id> [--json]` command (`client list`, `user list`): the tenant's rows, as `list`
 * reads and shows them, under `columns` (all of each row with --json); an unknown tenant is a usage error.
 */
export function tenantListCommand(o: {
  name: string; summary: string; columns: string[]; list: (store: Store, tenant: string) => Promise<Record<string, unknown>[]>;
}): Command {
  return {
    name: o.name,
    summary: o.summary,
    usage: `cinder ${o.name} --tenant <id> [--json]`,
    options: { tenant: { type: 'string' }, json: { type: 'boolean' } },
    async run(args, io) {
      const tenant = args.values.tenant;
      if (typeof tenant !== 'string') throw new UsageError('--tenant is required');
      return withStore(io, async ({ store }) => {
        if (!(await store.tenants.get(tenant))) throw new UsageError(`tenant '${tenant}' does not exist`);
        printRows(io, !!args.values.json, o.columns, await o.list(store, tenant));
        return 0;
      });
    },
  };
}

/** Prints `rows` as a JSON array with --json, otherwise as aligned columns under a header (`columns`, in order). */
export function printRows(io: CliIO, json: boolean, columns: string[], rows: Record<string, unknown>[]): void {
  if (json) {
    io.stdout(JSON.stringify(rows, null, 2) + '\n');
    return;
  }
  const cell = (v: unknown) => (v === undefined || v === null ? '-' : Array.isArray(v) ? v.join(' ') || '-' : String(v));
  const table = [columns.map((c) => c.toUpperCase()), ...rows.map((r) => columns.map((c) => cell(r[c])))];
  const widths = columns.map((_, i) => Math.max(...table.map((line) => line[i]!.length)));
  for (const line of table) io.stdout(line.map((v, i) => (i === line.length - 1 ? v : v.padEnd(widths[i]!))).join('  ') + '\n');
}

/** An epoch-ms time as ISO 8601, or undefined. */
export function isoTime(ms: number | null): string | undefined {
  return ms === null ? undefined : new Date(ms).toISOString();
}

/**
 * Records what an operator did with the command line (a client's or user's change, a new tenant, new keys, an
 * expunge, a prune) as an AuditEvent in `tenant`, when CINDER_AUDIT is on (src/audit/admin.ts).
 */
export async function auditChange(
  ctx: Pick<Awaited<ReturnType<typeof openContext>>, 'config' | 'store' | 'clock'>, io: CliIO, command: string, tenant: string,
  target: AdminTarget | AdminTarget[], description?: string, outcome?: '0' | '8',
): Promise<void> {
  if (ctx.config.audit !== 'on') return;
  const operator = io.env.USER ?? io.env.LOGNAME ?? 'unknown';
  const targets = Array.isArray(target) ? target : [target];
  await recordAdminChange(ctx.store, ctx.clock, tenant, { command, targets, operator, server: fhirBaseOf(ctx.config.baseUrl, tenant), ...(description !== undefined && { description }), ...(outcome !== undefined && { outcome }) });
}
