/**
 * Store targets for the contract suite: SQLite on a temp file, and PostgreSQL on a fresh database
 * created for the calling test file (`cinder_t_<random>` on the server of PG_ADMIN_URL) and dropped
 * by cleanup(). Postgres unreachable: fails under CI=true, otherwise the Postgres half is skipped
 * with a printed notice.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
  /** Closes every Store opened here and drops every database made. */
  cleanup(): Promise<void>;
}

function randomName(): string {
  return 'cinder_t_' + crypto.randomUUID().replaceAll('-', '').slice(0, 16);
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

async function postgresTarget(admin: postgres.Sql): Promise<StoreTarget> {
  const opened: Store[] = [];
  const made: string[] = [];
  const create = async (): Promise<StoreDatabase> => {
    const name = randomName();
    await admin`CREATE DATABASE ${admin(name)}`;
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
  const main = await create();
  return {
    kind: 'postgres',
    url: main.url,
    open: main.open,
    fresh: create,
    async cleanup() {
      await Promise.all(opened.splice(0).map((s) => s.close()));
      for (const name of made.splice(0)) await admin`DROP DATABASE IF EXISTS ${admin(name)} WITH (FORCE)`;
      await admin.end();
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

/** SQLite always; PostgreSQL when reachable. Call once per test file and run cleanup() in afterAll. */
export async function storeTargets(): Promise<StoreTarget[]> {
  const admin = await adminConnection();
  const targets = [sqliteTarget()];
  if (admin) targets.push(await postgresTarget(admin));
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
