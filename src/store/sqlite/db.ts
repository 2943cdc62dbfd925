import { Database } from 'bun:sqlite';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { StoreConflictError } from '../types.ts';
import type { Migration } from './migrations.ts';

/** Opens a SQLite database in WAL mode with the pragmas Cinder relies on. */
export function openDatabase(path: string): Database {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const db = new Database(path, { create: true, strict: true });
  db.exec('PRAGMA journal_mode = WAL');
  db.exec('PRAGMA synchronous = NORMAL');
  db.exec('PRAGMA busy_timeout = 10000');
  db.exec('PRAGMA temp_store = MEMORY');
  db.exec('PRAGMA cache_size = -65536');
  db.exec('PRAGMA mmap_size = 268435456');
  return db;
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

/** Maps a SQLite UNIQUE violation to StoreConflictError (keeping it as `cause`); other errors pass through. */
export function asConflict(err: unknown, what: string): unknown {
  if (err instanceof Error && /UNIQUE constraint failed/.test(err.message)) return new StoreConflictError(what, { cause: err });
  return err;
}
