import { createPostgresStore } from './postgres/index.ts';
import { createSqliteStore } from './sqlite/index.ts';
import type { Store } from './types.ts';

export interface OpenOptions {
  /** Told when a networked database becomes unreachable (with the error) and when it answers again. */
  onAvailabilityChange?: (down: boolean, cause?: unknown) => void;
}

/**
 * Picks the adapter for `CINDER_DATABASE_URL`: `postgres://` or `postgresql://` -> PostgreSQL;
 * `sqlite:<path>`, `file:<path>` or a plain path -> SQLite. Only the CLI (cli/context.ts) and the export
 * workers (export/worker.ts, each its own store) call this; the HTTP app is handed its store.
 */
export function openStore(databaseUrl: string, options: OpenOptions = {}): Store {
  if (/^postgres(ql)?:\/\//i.test(databaseUrl)) return createPostgresStore(databaseUrl, options);
  return createSqliteStore(sqlitePath(databaseUrl));
}

/** `sqlite:/data/c.db`, `sqlite:///data/c.db`, `file:./c.db`, `./c.db` and `sqlite::memory:` to a path. */
export function sqlitePath(databaseUrl: string): string {
  const m = /^(sqlite|file):(.*)$/i.exec(databaseUrl);
  if (!m) {
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(databaseUrl)) throw new Error(`unsupported database URL scheme in ${databaseUrl}`);
    return databaseUrl;
  }
  const rest = m[2]!.startsWith('//') ? m[2]!.slice(2) : m[2]!;
  if (!rest) throw new Error(`missing path in database URL ${databaseUrl}`);
  return rest;
}
