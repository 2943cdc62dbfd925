import type { Store } from '../types.ts';
import { InFlightWrites } from '../write-times.ts';
import { createPostgresClients, createPostgresKeys, createPostgresTenants } from './accounts.ts';
import { appliedMigrations, connect, connectForKeys, connectGeneric, isPostgresOutage, isPostgresTimeout, isPostgresUnholdable, runMigrations } from './db.ts';
import { circuitGuard, guarded, guardedStream } from '../unavailable.ts';
import { createPostgresExportCleanup, createPostgresExportDownloads, createPostgresExportJobs, createPostgresExportScratch } from './export-jobs.ts';
import { createPostgresExportFiles } from './export-files.ts';
import { createPostgresImportJobs } from './import-jobs.ts';
import { createPostgresCounters, createPostgresOAuth } from './oauth.ts';
import { createPostgresUsers } from './users.ts';
import type { PostgresStoreOptions } from './db.ts';
import { postgresMigrations } from './migrations.ts';
import { schemaState } from '../schema-state.ts';
import { createPostgresResources } from './resources.ts';
import { createPostgresSubscriptions } from './subscriptions.ts';
import { createPostgresExpunge } from './expunge.ts';
import { createKeysConnection } from './keys-connection.ts';

export type { PostgresStoreOptions } from './db.ts';

/**
 * The PostgreSQL adapter (postgres.js): for production and for several Cinder processes sharing one
 * database. Every state lives in the database; migrations serialise on an advisory lock.
 */
export function createPostgresStore(url: string, options: PostgresStoreOptions = {}): Store {
  const sql = connect(url, options);
  const keysConnection = createKeysConnection(() => connectForKeys(url), options.keyDeadlineMs);
  const genericSql = connectGeneric(url, options);
  // While the database is unreachable every call fails at once (503) and a probe looks for it again.
  const guard = circuitGuard({
    isOutage: isPostgresOutage,
    isTimeout: isPostgresTimeout,
    isUnholdable: isPostgresUnholdable,
    probe: async () => void (await sql`SELECT 1`),
    probeIntervalMs: options.probeIntervalMs ?? 500,
    onChange: options.onAvailabilityChange,
  });
  const g = <T extends object>(repo: T) => guarded(repo, guard);
  // A file writer's calls reach the database too (an export job meeting an outage then pauses).
  const files = createPostgresExportFiles(sql);
  return {
    kind: 'postgres',
    writeTimes: new InFlightWrites(),
    async migrate() {
      return { applied: await runMigrations(sql, postgresMigrations, Date.now()) };
    },
    ...g({
      async ping() {
        await sql`SELECT 1`;
      },
      async schema() {
        return schemaState(await appliedMigrations(sql), postgresMigrations);
      },
    }),
    async close() {
      guard.close();
      await Promise.all([sql.end({ timeout: 5 }), keysConnection.close(), genericSql.end({ timeout: 5 })]);
    },
    stats: () => ({ pool_max: Number(sql.options.max) + Number(genericSql.options.max), unavailable: guard.down ? 1 : 0 }),
    tenants: g(createPostgresTenants(sql)),
    clients: g(createPostgresClients(sql)),
    keys: g(createPostgresKeys(sql)),
    users: g(createPostgresUsers(sql)),
    oauth: g(createPostgresOAuth(sql)),
    counters: g(createPostgresCounters(sql)),
    resources: g(createPostgresResources(sql, keysConnection, genericSql)),
    subscriptions: g(createPostgresSubscriptions(sql)),
    expunge: g(createPostgresExpunge(sql)),
    exports: {
      jobs: g(createPostgresExportJobs(sql)),
      scratch: g(createPostgresExportScratch(sql)),
      downloads: g(createPostgresExportDownloads(sql)),
      cleanup: g(createPostgresExportCleanup(sql)),
    },
    imports: g(createPostgresImportJobs(sql)),
    // A file's chunks are read as its download pulls them, after read() returned: their failures are guarded too.
    exportFiles: g({ ...files, create: (key: string) => g(files.create(key)), read: (key: string, range?: { start: number; end: number }) => guardedStream(files.read(key, range), guard) }),
  };
}
