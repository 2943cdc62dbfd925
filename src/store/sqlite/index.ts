import type { Database } from 'bun:sqlite';
import { InFlightWrites } from '../write-times.ts';
import type { Store } from '../types.ts';
import { createSqliteClients, createSqliteKeys, createSqliteTenants } from './accounts.ts';
import { createCheckpointer } from './checkpointer.ts';
import { appliedMigrations, createMutex, isSqliteOutage, openDatabase, runMigrations, serialized } from './db.ts';
import { schemaState } from '../schema-state.ts';
import { guarded, translatingGuard } from '../unavailable.ts';
import { createSqliteImportJobs } from './import-jobs.ts';
import { createSqliteExportCleanup, createSqliteExportDownloads, createSqliteExportJobs, createSqliteExportScratch } from './export-jobs.ts';
import { createSqliteCounters, createSqliteOAuth } from './oauth.ts';
import { createSqliteSubscriptions } from './subscriptions.ts';
import { createSqliteExpunge } from './expunge.ts';
import { createSqliteUsers } from './users.ts';
import { sqliteMigrations } from './migrations.ts';
import { createSqliteResources } from './resources.ts';
import type { TextMoverOptions } from './text.ts';

export interface SqliteStoreOptions {
  /** How long a write waits for another process's write lock before it fails with 503 (default 10 s). */
  busyTimeoutMs?: number;
  /** When the full-text words of small transactions move into FTS5 (sqlite/text.ts; for tests). */
  text?: TextMoverOptions;
  /** How long a write transaction runs before the event loop may turn (default WRITE_SLICE_MS; sqlite/pacer.ts). */
  writeSliceMs?: number;
}

const outage = translatingGuard(isSqliteOutage, (err) => `the database cannot serve this request now: ${err instanceof Error ? err.message : String(err)}`);

/**
 * The embedded SQLite adapter. Two connections: one serialised writer, one reader (WAL lets reads
 * proceed during writes and never see uncommitted data). Busy, full-disk and I/O errors leave it as
 * StoreUnavailableError.
 */
export function createSqliteStore(path: string, options: SqliteStoreOptions = {}): Store {
  const open = () => openDatabase(path, options.busyTimeoutMs);
  const g = <T extends object>(repo: T) => guarded(repo, outage);
  const writer = open();
  const reader = path === ':memory:' ? writer : open();
  // Bulk export scans read through a connection of their own (no mmap, small cache: flat memory).
  const scanner = path === ':memory:' ? writer : open();
  // One queue for every write on the writer connection, so statements never run inside another's transaction.
  const serial = createMutex();
  const checkpointer = path === ':memory:' ? undefined : createCheckpointer(path);
  /**
   * A repo whose writes go through the writer's queue (serialized) and whose `reads` run on the reader
   * connection, behind no write (one connection for both in memory, so there everything queues).
   */
  const repo = <T extends object>(make: (db: Database) => T, reads: readonly (keyof T)[]) =>
    g(serialized(make(writer), serial, writer, reader === writer ? undefined : { repo: make(reader), methods: reads }));
  let resources: Store['resources'] | undefined;
  let exports: Store['exports'] | undefined;
  let imports: Store['imports'] | undefined;
  const store: Store = {
    kind: 'sqlite',
    // This process's writes alone: other processes on the file (CINDER_PROCESSES, a `cinder import` beside the
    // server) hold their own, unseen here (ARCHITECTURE.md "Safe time": the export's settle wait covers them).
    writeTimes: new InFlightWrites(),
    async migrate() {
      const applied = runMigrations(writer, sqliteMigrations, Date.now());
      return { applied };
    },
    ...g({
      async ping() {
        reader.query('SELECT 1').get();
      },
      async schema() {
        return schemaState(appliedMigrations(reader), sqliteMigrations);
      },
    }),
    // A writer, a reader and a scan connection; writes wait in one queue.
    stats: () => ({ connections: 3, write_queue: serial.pending() }),
    async close() {
      await checkpointer?.close();
      writer.close();
      if (reader !== writer) reader.close();
      if (scanner !== writer) scanner.close();
    },
    tenants: repo(createSqliteTenants, ['get', 'list', 'validationDebt']),
    clients: repo(createSqliteClients, ['get', 'list']),
    keys: repo(createSqliteKeys, ['list']),
    users: repo(createSqliteUsers, ['get', 'byUsername', 'list']),
    oauth: repo(createSqliteOAuth, ['getRefreshToken', 'isRevoked', 'revokedSince']),
    counters: repo(createSqliteCounters, ['peek']),
    subscriptions: repo(createSqliteSubscriptions, ['owners', 'owner', 'pending', 'pendingBatch', 'waiting', 'recent']),
    // Each batch in one write transaction of the writer's queue.
    expunge: repo(createSqliteExpunge, []),
    // Prepared statements need the schema, so the repo is built on first use (after migrate()).
    get resources() {
      return (resources ??= g(createSqliteResources(writer, reader, serial, scanner, checkpointer, options.text, options.writeSliceMs)));
    },
    get exports() {
      const db = { writer, reader, serial };
      return (exports ??= {
        jobs: g(createSqliteExportJobs(db)),
        scratch: g(createSqliteExportScratch(db)),
        downloads: g(createSqliteExportDownloads(db)),
        cleanup: g(createSqliteExportCleanup(db)),
      });
    },
    get imports() {
      return (imports ??= g(createSqliteImportJobs({ writer, reader, serial })));
    },
  };
  return store;
}
