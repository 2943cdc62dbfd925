import type { Store } from '../types.ts';
import { createPostgresClients, createPostgresKeys, createPostgresTenants } from './accounts.ts';
import { connect, runMigrations } from './db.ts';
import { createPostgresExportJobs } from './export-jobs.ts';
import { createPostgresCounters, createPostgresOAuth } from './oauth.ts';
import { createPostgresUsers } from './users.ts';
import type { PostgresStoreOptions } from './db.ts';
import { postgresMigrations } from './migrations.ts';
import { createPostgresResources } from './resources.ts';

export type { PostgresStoreOptions } from './db.ts';

/**
 * The PostgreSQL adapter (postgres.js): for production and for several Cinder processes sharing one
 * database. Every state lives in the database; migrations serialise on an advisory lock.
 */
export function createPostgresStore(url: string, options: PostgresStoreOptions = {}): Store {
  const sql = connect(url, options);
  return {
    kind: 'postgres',
    async migrate() {
      return { applied: await runMigrations(sql, postgresMigrations, Date.now()) };
    },
    async ping() {
      await sql`SELECT 1`;
    },
    async close() {
      await sql.end({ timeout: 5 });
    },
    stats: () => ({ pool_max: Number(sql.options.max) }),
    tenants: createPostgresTenants(sql),
    clients: createPostgresClients(sql),
    keys: createPostgresKeys(sql),
    users: createPostgresUsers(sql),
    oauth: createPostgresOAuth(sql),
    counters: createPostgresCounters(sql),
    resources: createPostgresResources(sql),
    exports: createPostgresExportJobs(sql),
  };
}
