import { backupSqlite } from '../store/sqlite/backup.ts';
import { UsageError, type Command } from './command.ts';
import { printData } from './context.ts';
import { runMaintenance, sqliteFile } from './sqlite-file.ts';

/** Told on PostgreSQL, where the database server makes the backups. */
export const PG_DUMP_ADVICE =
  'the database is PostgreSQL: back it up with pg_dump (e.g. pg_dump --format=custom --file=cinder.dump "$CINDER_DATABASE_URL"), see docs/operations.md';

/** `cinder backup`: an online, consistent, checked copy of the SQLite database. */
export const backupCommand: Command = {
  name: 'backup',
  summary: 'Copy the SQLite database while servers run (consistent, checked)',
  usage:
    'cinder backup --out <file> [--force] [--json]\n\n' +
    'Writes a consistent copy of the SQLite database (CINDER_DATABASE_URL, or cinder.db in CINDER_DATA_DIR) to\n' +
    '<file> while servers go on reading and writing it: one snapshot, with every committed write up to its\n' +
    'start (the WAL\'s too), compacted, in a single file. The copy is written beside <file>, checked\n' +
    '(PRAGMA integrity_check, its migrations), synced and then renamed to <file>: never a half-written file under\n' +
    'that name. An existing <file> is refused unless --force. Export files are not part of it.\n' +
    'Prints the database, the path, bytes, schema (migration) version, integrity and seconds. Exit 0 done, 1 failed (nothing written),\n' +
    '2 usage error. On PostgreSQL use pg_dump (docs/operations.md).',
  options: { out: { type: 'string' }, force: { type: 'boolean' }, json: { type: 'boolean' } },
  async run(args, io) {
    const v = args.values;
    if (typeof v.out !== 'string' || !v.out) throw new UsageError('--out <file> is required');
    const out = v.out;
    const database = sqliteFile(io, PG_DUMP_ADVICE);
    return runMaintenance(io, 'backup', () => {
      const r = backupSqlite(database, out, { force: !!v.force });
      printData(io, !!v.json, { database, path: r.path, bytes: r.bytes, schema_version: r.schema.version, integrity: 'ok', seconds: r.seconds });
      return 0;
    });
  },
};
