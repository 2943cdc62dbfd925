import { Database } from 'bun:sqlite';
import { mkdirSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { StoreConflictError } from '../types.ts';
import type { Migration } from './migrations.ts';

/**
 * Page size of new database files. Bulk imports write a quarter as many WAL frames as with SQLite's
 * 4 KiB default, and 1 KB resources pack into fewer pages. Concurrent writes cost about the same,
 * because group commit writes each dirtied page once per group; a lone client writing one resource
 * at a time pays about 0.1 ms more per write (see docs/PERFORMANCE.md, fifth session).
 */
export const PAGE_SIZE = 16384;

/** How long a statement waits for another connection's write lock before SQLITE_BUSY (then 503). */
export const DEFAULT_BUSY_TIMEOUT_MS = 10_000;

/** Opens a SQLite database in WAL mode with the pragmas Cinder relies on. */
export function openDatabase(path: string, busyTimeoutMs = DEFAULT_BUSY_TIMEOUT_MS): Database {
  if (path !== ':memory:') {
    try {
      mkdirSync(dirname(path), { recursive: true });
    } catch (err) {
      const why = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
      throw new Error(`cannot create the directory of the SQLite database ${path} (CINDER_DATA_DIR or CINDER_DATABASE_URL): ${why}`, { cause: err });
    }
  }
  const db = openCurrentFile(path, busyTimeoutMs);
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA temp_store = MEMORY');
  db.exec('PRAGMA cache_size = -65536');
  db.exec('PRAGMA mmap_size = 268435456');
  db.exec(`PRAGMA wal_autocheckpoint = ${autocheckpointPages(db)}`);
  defineFunctions(db);
  return db;
}

/** The file at `path` (device and inode), or undefined when there is none. */
export function fileIdentity(path: string): string | undefined {
  try {
    const s = statSync(path);
    return `${s.dev}:${s.ino}`;
  } catch {
    return undefined;
  }
}

/** Files replaced under an opening connection before it gives up (each replacement is a compact or restore). */
export const MAX_REPLACED = 3;

/**
 * Opens `path`, its busy timeout set, in WAL mode, on the file at `path` once its first lock is held. A
 * connection binds to the file (inode) it opened; `cinder compact` and `cinder restore` rename a new file
 * over the database while they hold it (lockExclusively), so a connection that opened it meanwhile waited
 * for that lock on the replaced file, where its writes would be lost (and its WAL replayed into the new
 * file). Such a connection is closed and the file opened again.
 */
function openCurrentFile(path: string, busyTimeoutMs: number): Database {
  for (let replaced = 0; ; replaced++) {
    const before = path === ':memory:' ? undefined : fileIdentity(path);
    const db = new Database(path, { create: true, strict: true });
    try {
      // First: switching to WAL (and the first read of a file another process has just closed) takes a
      // lock that another connection opening at the same moment may hold; without a busy timeout yet,
      // that failed at once with "database is locked" (a server's threads open several connections).
      db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
      // Takes effect only while the file is still empty; an existing database keeps its page size.
      db.exec(`PRAGMA page_size = ${PAGE_SIZE}`);
      db.exec('PRAGMA journal_mode = WAL');
      // A read: the lock a compact or restore holds is waited for here at the latest.
      db.query('SELECT count(*) FROM sqlite_master').get();
    } catch (err) {
      db.close();
      throw err;
    }
    if (before === undefined || fileIdentity(path) === before) return db;
    db.close();
    if (replaced + 1 >= MAX_REPLACED) throw new Error(`the SQLite database ${path} was replaced ${MAX_REPLACED} times while it was being opened`);
  }
}

/**
 * The SQL functions Cinder's statements use that SQLite leaves to the application: `x REGEXP pattern`,
 * a JavaScript RegExp compiled once per pattern and connection (the patterns are few: Dialect.matches;
 * NULL matches nothing). openDatabase defines them on every connection it opens.
 */
export function defineFunctions(db: Database): void {
  const compiled = new Map<string, RegExp>();
  db.function('regexp', { deterministic: true }, (pattern: unknown, value: unknown) => {
    if (typeof pattern !== 'string' || typeof value !== 'string') return 0;
    let re = compiled.get(pattern);
    if (!re) compiled.set(pattern, (re = new RegExp(pattern)));
    return re.test(value) ? 1 : 0;
  });
}

/** The connection's busy timeout, in ms. */
function busyTimeoutOf(db: Database): number {
  return db.query<{ timeout: number }, []>('PRAGMA busy_timeout').get()?.timeout ?? 0;
}

/** True for SQLITE_BUSY and its extended codes: another connection holds a lock the statement needs. */
function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_BUSY(_|$)/.test(code);
}

/**
 * Runs `fn` with the connection's busy timeout at 0, so that a statement needing another connection's
 * lock fails at once (SQLITE_BUSY) instead of sleeping in SQLite's busy handler. That handler blocks
 * the thread, and with it every request of the process, for as long as another process writes, or for
 * the whole busy timeout when the holder is another connection of this thread waiting on an await.
 */
function withoutWaiting<T>(db: Database, fn: () => T): T {
  const timeout = busyTimeoutOf(db);
  const restore = () => db.exec(`PRAGMA busy_timeout = ${timeout}`);
  db.exec('PRAGMA busy_timeout = 0');
  let result: T;
  try {
    result = fn();
  } catch (err) {
    restore();
    throw err;
  }
  if (result instanceof Promise) return result.finally(restore) as T;
  restore();
  return result;
}

/** Longest pause between two tries for a busy lock, in ms (SQLite's own handler goes up to 100). */
const MAX_BUSY_PAUSE_MS = 25;

/**
 * Runs `attempt` until it no longer fails with SQLITE_BUSY, pausing in between without blocking the
 * thread (1 ms, doubling up to MAX_BUSY_PAUSE_MS); past the connection's busy timeout the last busy
 * error is thrown (a 503 for requests).
 */
async function whileBusy<T>(db: Database, attempt: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + busyTimeoutOf(db);
  for (let pause = 1; ; pause = Math.min(pause * 2, MAX_BUSY_PAUSE_MS)) {
    try {
      return await attempt();
    } catch (err) {
      if (!isBusy(err) || performance.now() + pause > deadline) throw err;
    }
    await Bun.sleep(pause);
  }
}

/** Takes the write lock if it is free at once: false when another connection holds it. */
export function tryBeginImmediate(db: Database): boolean {
  try {
    withoutWaiting(db, () => db.exec('BEGIN IMMEDIATE'));
    return true;
  } catch (err) {
    if (isBusy(err)) return false;
    throw err;
  }
}

/** `BEGIN IMMEDIATE`, waiting for the write lock (up to the busy timeout) without blocking the thread. */
export function beginImmediate(db: Database): Promise<void> {
  return whileBusy(db, async () => withoutWaiting(db, () => void db.exec('BEGIN IMMEDIATE')));
}

/**
 * Runs `fn`'s statements in one transaction on `db` (a writer connection, inside its queue), waiting
 * for the write lock without blocking the thread. The transaction is deferred: a read takes no lock,
 * so reads never wait for another process's writes; a write that finds the lock taken fails at once,
 * the transaction is rolled back (nothing of it stays) and `fn` runs again after a pause. So `fn` must
 * have no effects but its statements. A failure of `fn` rolls its statements back.
 */
export function writeTransaction<T>(db: Database, fn: () => T | Promise<T>): Promise<T> {
  return whileBusy(db, () =>
    withoutWaiting(db, async () => {
      db.exec('BEGIN');
      try {
        const result = await fn();
        db.exec('COMMIT');
        return result;
      } catch (err) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw err;
      }
    }),
  );
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

/** The rows of `schema_migrations`, none when the table does not exist (a database Cinder never migrated). */
export function appliedMigrations(db: Database): { version: number; name: string }[] {
  const table = db.query<{ n: number }, []>("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get();
  if (!table?.n) return [];
  return db.query<{ version: number; name: string }, []>('SELECT version, name FROM schema_migrations ORDER BY version').all();
}

/** The index model the search index rows follow and where an interrupted reindex stopped (`index_state`). */
export function indexState(db: Database): { model: number; after: number } {
  const rows = db.query<{ name: string; value: number }, []>('SELECT name, value FROM index_state').all();
  const get = (name: string) => rows.find((r) => r.name === name)?.value ?? 0;
  return { model: get('model'), after: get('reindex_after') };
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
 * Wraps every method of a repo that uses the writer connection `db` in the write queue, so none of its
 * statements can run inside (or see) another request's open transaction on that connection, and each
 * call in a writeTransaction: its statements commit together, and a write waits for another process's
 * lock without blocking the thread. The repos' methods have no effects but their statements. The
 * methods named in `reads` run at once on `reads.repo` (the same repo on the reader connection), so
 * a read never waits behind a write that waits for the lock.
 */
export function serialized<T extends object>(repo: T, run: Mutex, db: Database, reads?: { repo: T; methods: readonly (keyof T)[] }): T {
  const out = {} as Record<string, unknown>;
  for (const [key, value] of Object.entries(repo)) {
    if (typeof value !== 'function') out[key] = value;
    else if (reads?.methods.includes(key as keyof T)) {
      const read = (reads.repo as Record<string, (...args: unknown[]) => unknown>)[key]!;
      out[key] = (...args: unknown[]) => read.apply(reads.repo, args);
    }
    else out[key] = (...args: unknown[]) => run(() => writeTransaction(db, () => value.apply(repo, args)));
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
