import { Database } from 'bun:sqlite';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { StoreConflictError } from '../types.ts';
import type { Migration } from './migrations.ts';

/**
 * Page size of new database files. Bulk imports write a quarter as many WAL frames as with SQLite's
 * 4 KiB default, and 1 KB resources pack into fewer pages. Concurrent writes cost about the same,
 * because group commit writes each dirtied page once per group; a lone client writing one resource
 * at a time pays about 0.1 ms more per write (see docs/PERFORMANCE.md, fifth session).
 */
const PAGE_SIZE = 16384;

/** How long a statement waits for another connection's write lock before SQLITE_BUSY (then 503). */
export const DEFAULT_BUSY_TIMEOUT_MS = 10_000;

/** Opens a SQLite database in WAL mode with the pragmas Cinder relies on. */
export function openDatabase(path: string, busyTimeoutMs = DEFAULT_BUSY_TIMEOUT_MS): Database {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { create: true, strict: true });
  // Takes effect only while the file is still empty; an existing database keeps its page size.
  db.exec(`PRAGMA page_size = ${PAGE_SIZE}`);
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
  db.exec('PRAGMA temp_store = MEMORY');
  db.exec('PRAGMA cache_size = -65536');
  db.exec('PRAGMA mmap_size = 268435456');
  db.exec(`PRAGMA wal_autocheckpoint = ${autocheckpointPages(db)}`);
  return db;
}

/** WAL size at which a commit checkpoints in line: SQLite's default of 1,000 pages, at 4 KiB. */
const AUTOCHECKPOINT_BYTES = 1000 * 4096;

/**
 * The wal_autocheckpoint setting (in pages) for `db`'s page size. A checkpoint copies the WAL's pages
 * into the database during the commit that triggers it, so its pause grows with the bytes, not pages.
 */
export function autocheckpointPages(db: Database): number {
  const { page_size } = db.query<{ page_size: number }, []>('PRAGMA page_size').get()!;
  return Math.max(1, Math.round(AUTOCHECKPOINT_BYTES / page_size));
}

/** Applies pending migrations under an IMMEDIATE transaction, so concurrent starters serialise. */
export function runMigrations(db: Database, migrations: Migration[], now: number): string[] {
  db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const applied: string[] = [];
  db.transaction(() => {
    const done = new Set(
      db.query<{ version: number }, []>('SELECT version FROM schema_migrations').all().map((r) => r.version),
    );
    for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(m.version)) continue;
      db.exec(m.sql);
      db.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, now);
      applied.push(`${m.version}_${m.name}`);
    }
  }).immediate();
  return applied;
}

/** Serialises async work on one connection: bun:sqlite transactions must not interleave. */
export function createMutex() {
  let tail: Promise<unknown> = Promise.resolve();
  let pending = 0;
  const run = <T>(fn: () => Promise<T>): Promise<T> => {
    pending++;
    const result = tail.then(fn, fn);
    tail = result.catch(() => undefined).finally(() => pending--);
    return result;
  };
  /** Work queued or running (for /metrics). */
  run.pending = () => pending;
  return run;
}

type Mutex = ReturnType<typeof createMutex>;

/**
 * Wraps every method of a repo that uses the writer connection in the write queue, so none of its
 * statements can run inside (or see) another request's open transaction on that connection.
 */
export function serialized<T extends object>(repo: T, run: Mutex): T {
  const out = {} as Record<string, unknown>;
  for (const [key, value] of Object.entries(repo)) {
    out[key] = typeof value === 'function' ? (...args: unknown[]) => run(() => Promise.resolve(value.apply(repo, args))) : value;
  }
  return out as T;
}

/**
 * Result codes (primary and extended) of a database that cannot work for now rather than of a wrong
 * statement: locked past the busy timeout, disk full, I/O errors, a file that cannot be opened or
 * written, out of memory.
 */
const OUTAGE_CODES = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|CANTOPEN|READONLY|NOMEM|PROTOCOL)(_|$)/;

/** True for SQLite errors that mean "try again later" (503), not a fault of the request or of Cinder. */
export function isSqliteOutage(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && OUTAGE_CODES.test(code);
}

/** Maps a SQLite UNIQUE violation to StoreConflictError (keeping it as `cause`); other errors pass through. */
export function asConflict(err: unknown, what: string): unknown {
  if (err instanceof Error && /UNIQUE constraint failed/.test(err.message)) return new StoreConflictError(what, { cause: err });
  return err;
}
