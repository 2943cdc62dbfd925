import { restoreSqlite } from '../store/sqlite/backup.ts';
import { UsageError, type Command } from './command.ts';
import { printData } from './context.ts';
import { runMaintenance, sqliteFile } from './sqlite-file.ts';

const PG_ADVICE = 'the database is PostgreSQL: restore a pg_dump archive with pg_restore, see docs/operations.md';

/** `cinder restore`: puts a checked backup in the place of the SQLite database, servers stopped. */
export const restoreCommand: Command = {
  name: 'restore',
  summary: 'Replace the SQLite database with a backup (checked first); servers stopped',
  usage:
    'cinder restore --from <file> [--json]\n\n' +
    'Checks <file> (a `cinder backup`): a sound SQLite file (PRAGMA integrity_check) holding a Cinder schema no\n' +
    'newer than this release\'s; then replaces the SQLite database (CINDER_DATABASE_URL, or cinder.db in\n' +
    'CINDER_DATA_DIR) with a copy of it in one rename, removing the old -wal and -shm. Refused while a Cinder\n' +
    'process has the database open. Migrations the backup lacks are applied by the next serve or `cinder migrate`.\n' +
    'Exit 0 done, 1 refused (in use) or failed (the database left as it was), 2 usage error or unfit backup.',
  options: { from: { type: 'string' }, json: { type: 'boolean' } },
  async run(args, io) {
    const v = args.values;
    if (typeof v.from !== 'string' || !v.from) throw new UsageError('--from <file> is required');
    const from = v.from;
    const database = sqliteFile(io, PG_ADVICE);
    return runMaintenance(io, 'restore', () => {
      const r = restoreSqlite(database, from);
      printData(io, !!v.json, {
        database: r.path, from: r.from, bytes: r.bytes, schema_version: r.schema.version, pending_migrations: r.schema.pending.length, seconds: r.seconds,
      });
      return 0;
    });
  },
};
