/**
 * Store targets for the contract suite: SQLite on a temp file, and PostgreSQL on a fresh database
 * created for the calling test file (`cinder_t_<random>` on the server of PG_ADMIN_URL) and dropped
 * by cleanup(). Postgres unreachable: fails under CI=true, otherwise the Postgres half is skipped
 * with a printed notice.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { Database } from 'bun:sqlite';
import postgres from 'postgres';
import { connect, runMigrations as runPgMigrations } from '../../src/store/postgres/db.ts';
import { createPostgresStore } from '../../src/store/postgres/index.ts';
import { postgresMigrations } from '../../src/store/postgres/migrations.ts';
import { openDatabase, runMigrations as runSqliteMigrations } from '../../src/store/sqlite/db.ts';
import { createSqliteStore } from '../../src/store/sqlite/index.ts';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts';
import type { Store } from '../../src/store/types.ts';

export const PG_ADMIN_URL = process.env.CINDER_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
/** Small pools: several helpers share one Postgres server during tests. */
const TEST_POOL_SIZE = 4;

export interface StoreDatabase {
  /** The database URL (Postgres) or file path (SQLite). */
  url: string;
  /** Opens a Store on this database; each call is a separate instance, like another process. */
  open(): Store;
}

export interface StoreTarget extends StoreDatabase {
  kind: Store['kind'];
  /** A new, empty database of this kind, removed by cleanup(). */
  fresh(): Promise<StoreDatabase>;
  /**
   * A new database of this kind with every migration applied, removed by cleanup(): on PostgreSQL a copy of
   * a template database migrated once for these migrations (migrating each of the suite's hundreds of
   * databases took most of a second apiece), on SQLite a copy of a migrated template file (migratedSqliteFile).
   */
  migrated(): Promise<StoreDatabase>;
  /**
   * A new database holding what `of` (one of this target's) holds, removed by cleanup(): for a file whose tests each
   * start from the same large fixture, written once. Every Store opened on `of` must be closed first (PostgreSQL
   * copies a database no session is on; SQLite copies what is committed, by VACUUM INTO).
   */
  copy(of: StoreDatabase): Promise<StoreDatabase>;
  /**
   * Closes every Store opened here but `keep` (its databases stay until cleanup): for a file whose tests each open
   * their own, so that the connections of earlier tests are not held to the end of the file beside the other
   * worker's (PostgreSQL's default 100 ran out).
   */
  release(keep: readonly Store[]): Promise<void>;
  /** Closes every Store opened here and drops every database made. */
  cleanup(): Promise<void>;
}

/** Closes and forgets the stores of `opened` not in `keep`. */
async function closeAllBut(opened: Store[], keep: readonly Store[]): Promise<void> {
  const closing = opened.filter((s) => !keep.includes(s));
  opened.splice(0, opened.length, ...opened.filter((s) => keep.includes(s)));
  await Promise.all(closing.map((s) => s.close()));
}

function randomName(): string {
  return 'cinder_t_' + crypto.randomUUID().replaceAll('-', '').slice(0, 16);
}

/** A digest of the migrations and of the code that opens and migrates the database: a template's identity. */
function templateDigest(migrations: unknown, code: string): string {
  const source = readFileSync(new URL(code, import.meta.url), 'utf8');
  return new Bun.CryptoHasher('sha256').update(JSON.stringify(migrations)).update(source).digest('hex').slice(0, 16);
}

const SQLITE_TEMPLATE = join(tmpdir(), `cinder-test-template-${templateDigest(sqliteMigrations, '../../src/store/sqlite/db.ts')}.db`);

/**
 * Puts at `path` a SQLite database with every migration applied: a copy of a template file migrated once (in
 * the temporary directory, named by a digest of the migrations and of the code that opens the file, built by
 * whichever test process asks first and renamed into place whole). Migrating took 50-90 ms per database; the
 * suite makes thousands (every test app's own).
 */
export function migratedSqliteFile(path: string): string {
  if (!existsSync(SQLITE_TEMPLATE)) {
    const building = `${SQLITE_TEMPLATE}.${process.pid}.${randomName()}`;
    const raw = openDatabase(building);
    runSqliteMigrations(raw, sqliteMigrations, Date.now());
    raw.close(); // the last connection: SQLite checkpoints the WAL into the file and removes it
    renameSync(building, SQLITE_TEMPLATE);
  }
  mkdirSync(dirname(path), { recursive: true });
  copyFileSync(SQLITE_TEMPLATE, path);
  return path;
}

function sqliteTarget(): StoreTarget {
  const dir = mkdtempSync(join(tmpdir(), 'cinder-store-'));
  const opened: Store[] = [];
  const database = (path: string): StoreDatabase => ({
    url: path,
    open: () => {
      const s = createSqliteStore(path);
      opened.push(s);
      return s;
    },
  });
  return {
    kind: 'sqlite',
    ...database(join(dir, 'main.db')),
    fresh: async () => database(join(dir, `${randomName()}.db`)),
    migrated: async () => database(migratedSqliteFile(join(dir, `${randomName()}.db`))),
    async copy(of) {
      const path = join(dir, `${randomName()}.db`);
      // SQLite's own copy of what is committed, WAL included.
      const source = new Database(of.url, { readonly: true });
      try {
        source.run('VACUUM INTO ?', [path]);
      } finally {
        source.close();
      }
      return database(path);
    },
    release: (keep) => closeAllBut(opened, keep),
    async cleanup() {
      await Promise.all(opened.splice(0).map((s) => s.close()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function databaseUrl(name: string): string {
  const url = new URL(PG_ADMIN_URL);
  url.pathname = '/' + name;
  return url.toString();
}

/** SQLSTATE object_in_use: a database copied or renamed while a session (one just closed) is still on it. */
const OBJECT_IN_USE = '55006';

/** Runs `statement`, again while the database it names is still in use by a session that is going away. */
async function whenUnused(statement: () => Promise<unknown>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await statement();
      return;
    } catch (err) {
      if (!(err instanceof postgres.PostgresError && err.code === OBJECT_IN_USE) || attempt >= 50) throw err;
      await Bun.sleep(100);
    }
  }
}

/**
 * The name of a database holding every one of these PostgreSQL migrations and nothing else, made once on the
 * server (by whichever test process asks first, under an advisory lock) and kept for later runs: its name
 * carries a digest of the migrations, so a changed or appended migration makes a new one. It is built under a
 * temporary name and renamed when complete, so a process killed half-way leaves no half-migrated template.
 */
const TEMPLATE = `cinder_template_${templateDigest(postgresMigrations, '../../src/store/postgres/db.ts')}`;
let template: Promise<string> | undefined;

function migratedTemplate(admin: postgres.Sql): Promise<string> {
  const exists = async () => (await admin`SELECT 1 FROM pg_database WHERE datname = ${TEMPLATE}`).length > 0;
  template ??= (async () => {
    if (await exists()) return TEMPLATE;
    // The admin connection is one session (max: 1), so the session-level lock is held until unlocked below.
    await admin`SELECT pg_advisory_lock(hashtext(${TEMPLATE}))`;
    try {
      if (await exists()) return TEMPLATE;
      const building = randomName();
      await admin`CREATE DATABASE ${admin(building)}`;
      const sql = connect(databaseUrl(building), { max: 1 });
      try {
        await runPgMigrations(sql, postgresMigrations, Date.now());
      } finally {
        await sql.end();
      }
      await whenUnused(() => admin`ALTER DATABASE ${admin(building)} RENAME TO ${admin(TEMPLATE)}`);
      return TEMPLATE;
    } finally {
      await admin`SELECT pg_advisory_unlock(hashtext(${TEMPLATE}))`;
    }
  })();
  template.catch(() => (template = undefined));
  return template;
}

/**
 * Drops the databases, several at once. Each DROP DATABASE waits for a checkpoint that starts after it asks
 * (pg_stat_bgwriter.checkpoints_req counts one per drop), which on a busy server took seconds apiece: drops
 * issued together are served by the same checkpoint (six took 4.8 s together against 12.2 s one after
 * another, beside a test run).
 */
async function dropDatabases(names: string[]): Promise<void> {
  if (names.length === 0) return;
  const sql = postgres(PG_ADMIN_URL, { max: Math.min(names.length, 4), connect_timeout: 5, onnotice: () => undefined });
  try {
    await Promise.all(names.map((name) => sql`DROP DATABASE IF EXISTS ${sql(name)} WITH (FORCE)`));
  } finally {
    await sql.end();
  }
}

async function postgresTarget(admin: postgres.Sql, withMain: boolean): Promise<StoreTarget> {
  const opened: Store[] = [];
  const made: string[] = [];
  const create = async (from?: string): Promise<StoreDatabase> => {
    const name = randomName();
    if (from === undefined) await admin`CREATE DATABASE ${admin(name)}`;
    else await whenUnused(() => admin`CREATE DATABASE ${admin(name)} TEMPLATE ${admin(from)}`);
    made.push(name);
    return {
      url: databaseUrl(name),
      open: () => {
        const s = createPostgresStore(databaseUrl(name), { max: TEST_POOL_SIZE });
        opened.push(s);
        return s;
      },
    };
  };
  const main: StoreDatabase = withMain
    ? await create()
    : { url: '', open: () => { throw new Error('this target has no main database: storeTargets({ main: true })'); } };
  return {
    kind: 'postgres',
    url: main.url,
    open: main.open,
    fresh: () => create(),
    migrated: async () => create(await migratedTemplate(admin)),
    copy: (of) => create(new URL(of.url).pathname.slice(1)),
    release: (keep) => closeAllBut(opened, keep),
    async cleanup() {
      await Promise.all(opened.splice(0).map((s) => s.close()));
      await admin.end();
      await dropDatabases(made.splice(0));
    },
  };
}

/**
 * Connects to the admin database (for CREATE and DROP DATABASE), or explains why not: null, the caller
 * skipping its PostgreSQL tests, except under CI=true, where it throws.
 */
export async function adminConnection(): Promise<postgres.Sql | null> {
  const admin = postgres(PG_ADMIN_URL, { max: 1, connect_timeout: 5, onnotice: () => undefined });
  try {
    await admin`SELECT 1`;
    return admin;
  } catch (err) {
    await admin.end({ timeout: 1 });
    const reason = err instanceof Error ? err.message : String(err);
    if (process.env.CI === 'true') throw new Error(`PostgreSQL unreachable at ${PG_ADMIN_URL} under CI=true: ${reason}`);
    console.warn(`NOTICE: PostgreSQL unreachable at ${PG_ADMIN_URL} (${reason}); skipping the PostgreSQL tests.`);
    return null;
  }
}

/**
 * SQLite always; PostgreSQL when reachable. Call once per test file and run cleanup() in afterAll. `main: false`
 * when the file uses only fresh() and migrated() databases: the PostgreSQL target then makes no main database.
 */
export async function storeTargets({ main = true }: { main?: boolean } = {}): Promise<StoreTarget[]> {
  const admin = await adminConnection();
  const targets = [sqliteTarget()];
  if (admin) targets.push(await postgresTarget(admin, main));
  return targets;
}

/** The version of `kind`'s migration named `name`. */
export function migrationVersion(kind: Store['kind'], name: string): number {
  return (kind === 'sqlite' ? sqliteMigrations : postgresMigrations).find((m) => m.name === name)!.version;
}

/** Applies the migrations up to `version` only, as an older Cinder left the database. */
export async function migrateUpTo(kind: Store['kind'], url: string, version: number): Promise<void> {
  if (kind === 'sqlite') {
    const raw = openDatabase(url);
    runSqliteMigrations(raw, sqliteMigrations.filter((m) => m.version <= version), 1);
    raw.close();
  } else {
    const sql = connect(url, { max: 1 });
    await runPgMigrations(sql, postgresMigrations.filter((m) => m.version <= version), 1);
    await sql.end();
  }
}

/**
 * Runs statements on the database as they are (placeholders `$1`, `$2`, ... on both kinds), one after
 * another, outside any Store: as an older Cinder, or another tool, would. Returns each one's rows.
 */
export async function rawStatements(kind: Store['kind'], url: string, statements: [sql: string, params: (string | number)[]][]): Promise<Record<string, unknown>[][]> {
  const out: Record<string, unknown>[][] = [];
  if (kind === 'sqlite') {
    const raw = openDatabase(url);
    try {
      raw.exec('BEGIN');
      for (const [q, params] of statements) out.push(raw.query<Record<string, unknown>, (string | number)[]>(q.replace(/\$(\d+)/g, '?$1')).all(...params));
      raw.exec('COMMIT');
    } finally {
      raw.close();
    }
  } else {
    const sql = connect(url, { max: 1 });
    try {
      await sql.begin(async (tx) => {
        for (const [q, params] of statements) out.push([...(await tx.unsafe<Record<string, unknown>[]>(q, params))]);
      });
    } finally {
      await sql.end();
    }
  }
  return out;
}
