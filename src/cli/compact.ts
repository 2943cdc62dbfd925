import { PAGE_SIZE } from '../store/sqlite/db.ts';
import { compactSqlite } from '../store/sqlite/backup.ts';
import { UsageError, type Command } from './command.ts';
import { printData } from './context.ts';
import { runMaintenance, sqliteFile } from './sqlite-file.ts';

const PG_ADVICE =
  'the database is PostgreSQL: autovacuum reuses freed space; VACUUM (FULL) returns it to the file system (it locks the tables), see docs/operations.md';

/** `cinder compact`: VACUUM (and page size conversion) of a SQLite database no server has open. */
export const compactCommand: Command = {
  name: 'compact',
  summary: 'Shrink the SQLite database (VACUUM) and set its page size; servers stopped',
  usage:
    `cinder compact [--page-size <bytes>] [--json]\n\n` +
    'Rewrites the SQLite database without its free pages (what deletes and `cinder expunge` left), in pages of\n' +
    `--page-size bytes (default ${PAGE_SIZE}, what Cinder creates; a file from an older version has 4096). Every\n` +
    'Cinder process using the database must be stopped: it is refused while one has it open. The new file is\n' +
    'written beside the database (it needs about as much free disk as the data), checked and renamed over\n' +
    'it: a failure (a full disk) leaves the database as it was. Prints the size before and after.\n' +
    'Exit 0 done, 1 refused (in use) or failed, 2 usage error.',
  options: { 'page-size': { type: 'string' }, json: { type: 'boolean' } },
  async run(args, io) {
    const v = args.values;
    const raw = v['page-size'];
    const pageSize = raw === undefined ? PAGE_SIZE : Number(raw);
    if (!Number.isInteger(pageSize) || pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) {
      throw new UsageError(`--page-size: '${String(raw)}' is not a power of two from 512 to 65536`);
    }
    const database = sqliteFile(io, PG_ADVICE);
    return runMaintenance(io, 'compact', () => {
      const r = compactSqlite(database, pageSize);
      printData(io, !!v.json, {
        database, bytes_before: r.bytesBefore, bytes_after: r.bytesAfter, page_size_before: r.pageSizeBefore, page_size: r.pageSize,
        schema_version: r.schema.version, seconds: r.seconds,
      });
      return 0;
    });
  },
};
