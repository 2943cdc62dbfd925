import type { Store } from './types.ts';
import { createSqliteStore } from './sqlite/index.ts';

/** Picks the adapter from a database URL: `postgres://` / `postgresql://` or `sqlite:<path>` / a plain path. */
export function openStore(databaseUrl: string): Store {
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) throw new Error('the PostgreSQL adapter is being merged');
  const path = databaseUrl.replace(/^(sqlite|file):(\/\/)?/, '');
  return createSqliteStore(path);
}
