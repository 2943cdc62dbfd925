import type { Store } from '../types.ts';
import { createSqliteClients, createSqliteKeys, createSqliteTenants } from './accounts.ts';
import { createCheckpointer } from './checkpointer.ts';
import { createMutex, openDatabase, runMigrations, serialized } from './db.ts';
import { createSqliteExportJobs } from './export-jobs.ts';
import { createSqliteCounters, createSqliteOAuth } from './oauth.ts';
import { createSqliteUsers } from './users.ts';
import { sqliteMigrations } from './migrations.ts';
import { createSqliteResources } from './resources.ts';

/**
 * The embedded SQLite adapter. Two connections: one serialised writer, one reader (WAL lets reads
 * proceed during writes and never see uncommitted data).
 */
export function createSqliteStore(path: string): Store {
  const writer = openDatabase(path);
  const reader = path === ':memory:' ? writer : openDatabase(path);
  // Bulk export scans read through a connection of their own (no mmap, small cache: flat memory).
  const scanner = path === ':memory:' ? writer : openDatabase(path);
  // One queue for every write on the writer connection, so statements never run inside another's transaction.
  const serial = createMutex();
  const checkpointer = path === ':memory:' ? undefined : createCheckpointer(path);
  let resources: Store['resources'] | undefined;
  let exports: Store['exports'] | undefined;
  const store: Store = {
    kind: 'sqlite',
    async migrate() {
      const applied = runMigrations(writer, sqliteMigrations, Date.now());
      return { applied };
    },
    async ping() {
      reader.query('SELECT 1').get();
    },
    // A writer, a reader and a scan connection; writes wait in one queue.
    stats: () => ({ connections: 3, write_queue: serial.pending() }),
    async close() {
      await checkpointer?.close();
      writer.close();
      if (reader !== writer) reader.close();
      if (scanner !== writer) scanner.close();
    },
    tenants: serialized(createSqliteTenants(writer), serial),
    clients: serialized(createSqliteClients(writer), serial),
    keys: serialized(createSqliteKeys(writer), serial),
    users: serialized(createSqliteUsers(writer), serial),
    oauth: serialized(createSqliteOAuth(writer), serial),
    counters: serialized(createSqliteCounters(writer), serial),
    // Prepared statements need the schema, so the repo is built on first use (after migrate()).
    get resources() {
      return (resources ??= createSqliteResources(writer, reader, serial, scanner, checkpointer));
    },
    get exports() {
      return (exports ??= createSqliteExportJobs(writer, reader, serial));
    },
  };
  return store;
}
