import { loadConfig } from '../config.ts';
import { sqlitePath } from '../store/open.ts';
import { MaintenanceError } from '../store/sqlite/maintenance.ts';
import { UsageError, type CliIO } from './command.ts';

/** True for a PostgreSQL database URL (what openStore takes for one). */
export function isPostgresUrl(url: string): boolean {
  return /^postgres(ql)?:\/\//i.test(url);
}

/**
 * The SQLite file of CINDER_DATABASE_URL (or CINDER_DATA_DIR) for a command that works on the file itself;
 * on PostgreSQL a usage error with `postgresAdvice`, in memory a usage error too.
 */
export function sqliteFile(io: CliIO, postgresAdvice: string): string {
  const { databaseUrl } = loadConfig(io.env);
  if (isPostgresUrl(databaseUrl)) throw new UsageError(postgresAdvice);
  const path = sqlitePath(databaseUrl);
  if (path === ':memory:') throw new UsageError('the database is in memory (CINDER_DATABASE_URL=sqlite::memory:): there is no file to work on');
  return path;
}

/**
 * Runs a maintenance step: a refusal (a missing database, an existing target) is a usage error (exit 2);
 * a database in use or a failure (the disk) is printed and exits 1, with nothing half-written.
 */
export function runMaintenance(io: CliIO, name: string, fn: () => number): number {
  try {
    return fn();
  } catch (err) {
    if (!(err instanceof MaintenanceError)) throw err;
    if (err.reason === 'refused') throw new UsageError(err.message, { cause: err });
    io.stderr(`cinder ${name}: ${err.message}\n`);
    return 1;
  }
}
