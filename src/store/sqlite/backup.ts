/** Online backup, compaction and restore of Cinder's SQLite database (`cinder backup`, `compact`, `restore`). */
import type { Database } from 'bun:sqlite';
import { accessSync, constants, existsSync, mkdirSync, realpathSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { SchemaState } from '../schema-state.ts';
import {
  errorText, ensureFreeSpace, fileBytes, integrityProblems, lockExclusively, MaintenanceError, openExisting, removeWithCompanions, replaceAtomically, sqliteSchema,
  usedBytes, verifyCopy,
} from './maintenance.ts';

export interface BackupResult {
  path: string;
  bytes: number;
  schema: SchemaState;
  seconds: number;
}

/**
 * The file a database path names, through any symbolic link: what compact and restore replace (renaming
 * over a link would replace the link, leaving the database where it points as it was), and where SQLite
 * keeps its -wal and -shm (it resolves links too). A path that does not exist is taken as it is.
 */
function databaseFile(path: string): string {
  return existsSync(path) ? realpathSync(path) : path;
}

const elapsed = (started: number) => Math.round((performance.now() - started) / 100) / 10;

/** True when `a` and `b` are one file (the same inode), both existing. */
function sameFile(a: string, b: string): boolean {
  if (!existsSync(a) || !existsSync(b)) return false;
  const [x, y] = [statSync(a), statSync(b)];
  return x.dev === y.dev && x.ino === y.ino;
}

/** Refuses a target that cannot take a new file: the database's -wal, -shm or -journal, a directory, an existing file without `force`, a missing or unwritable directory. */
function checkTarget(target: string, force: boolean, database: string): void {
  // The files SQLite keeps beside the database (named after the file it resolves the path to), which servers have open.
  const file = databaseFile(resolve(database));
  for (const suffix of ['-wal', '-shm', '-journal']) {
    if (target === `${file}${suffix}` || target === `${resolve(database)}${suffix}` || sameFile(target, `${file}${suffix}`)) {
      throw new MaintenanceError(`${target} is the database's ${suffix} file, not a backup's place`, 'refused');
    }
  }
  if (existsSync(target)) {
    if (statSync(target).isDirectory()) throw new MaintenanceError(`${target} is a directory: name the backup file`, 'refused');
    if (sameFile(target, database)) throw new MaintenanceError(`${target} is the database itself`, 'refused');
    if (!force) throw new MaintenanceError(`${target} exists: choose another name, or replace it with --force`, 'refused');
  }
  const dir = dirname(target);
  try {
    if (!statSync(dir).isDirectory()) throw Object.assign(new Error('not a directory'), { code: 'ENOTDIR' });
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw new MaintenanceError(`cannot write in ${dir}: ${errorText(err)}`, 'refused', { cause: err });
  }
}

/**
 * A consistent copy of the database at `path` while servers go on writing to it: `VACUUM INTO` reads one
 * snapshot (committed WAL content included) and writes a compact, self-contained file (rollback journal
 * mode, no -wal beside it), which is checked (integrity_check, migrations) and renamed into place.
 */
export function backupSqlite(path: string, out: string, options: { force?: boolean } = {}): BackupResult {
  const started = performance.now();
  const target = resolve(out);
  checkTarget(target, !!options.force, path);
  const source = openExisting(path);
  try {
    ensureFreeSpace(dirname(target), usedBytes(source));
    const schema = replaceAtomically(target, (tmp) => source.query('VACUUM INTO ?').run(tmp), (tmp) => verifyCopy(tmp), path);
    return { path: target, bytes: statSync(target).size, schema, seconds: elapsed(started) };
  } finally {
    source.close();
  }
}

export interface CompactResult {
  bytesBefore: number;
  bytesAfter: number;
  pageSizeBefore: number;
  pageSize: number;
  schema: SchemaState;
  seconds: number;
}

/**
 * Replaces the database at `path` (held by `lock`, lockExclusively, when it exists) with `produce`'s copy:
 * written beside it with the database's permissions, checked, renamed over it while the lock is held; then the old
 * file's -wal (emptied by a checkpoint first: a WAL with frames beside the new file would be replayed
 * into it), -shm and -journal are removed, and then the lock goes. On failure the old file stays as it was.
 */
function replaceLocked(path: string, lock: Database | undefined, produce: (tmp: string) => void): SchemaState {
  let schema: SchemaState;
  try {
    lock?.query('PRAGMA wal_checkpoint(TRUNCATE)').get();
    schema = replaceAtomically(path, produce, (tmp) => verifyCopy(tmp, true), lock ? path : undefined);
  } catch (err) {
    lock?.close();
    throw err instanceof MaintenanceError ? err : new MaintenanceError(`cannot replace ${path}: ${errorText(err)}`, 'failed', { cause: err });
  }
  // The old file's companions go before the lock: a connection waiting for it then finds none of the old file's
  // beside the new one, and none it made for the new file is removed (src/store/sqlite/db.ts openCurrentFile).
  removeWithCompanions(path, true);
  lock?.close();
  return schema;
}

/**
 * VACUUM for a database no other process has open (refused otherwise): a copy with no free pages, in
 * pages of `pageSize` bytes, replaces it atomically. The old file stays whole until the rename, so a
 * failure (a full disk) leaves it as it was.
 */
export function compactSqlite(database: string, pageSize: number): CompactResult {
  const started = performance.now();
  const path = databaseFile(database);
  const bytesBefore = fileBytes(path);
  const lock = lockExclusively(path);
  let pageSizeBefore: number;
  try {
    pageSizeBefore = lock.query<{ page_size: number }, []>('PRAGMA page_size').get()!.page_size;
    ensureFreeSpace(dirname(resolve(path)), usedBytes(lock) * Math.max(1, pageSize / pageSizeBefore));
    lock.exec(`PRAGMA page_size = ${pageSize}`);
  } catch (err) {
    lock.close();
    throw err instanceof MaintenanceError ? err : new MaintenanceError(`cannot compact ${path}: ${errorText(err)}`, 'failed', { cause: err });
  }
  const schema = replaceLocked(path, lock, (tmp) => lock.query('VACUUM INTO ?').run(tmp));
  return { bytesBefore, bytesAfter: fileBytes(path), pageSizeBefore, pageSize, schema, seconds: elapsed(started) };
}

/**
 * Puts the backup `from` in the place of the database at `path`, once it is found fit: a sound SQLite
 * file (integrity_check) holding a Cinder schema no newer than this release's. Refused while another
 * process has the database open. The database is replaced in one rename; its old -wal and -shm go.
 */
export function restoreSqlite(database: string, from: string): { path: string; from: string; bytes: number; schema: SchemaState; seconds: number } {
  const started = performance.now();
  const path = databaseFile(database);
  const source = resolve(from);
  if (sameFile(source, path)) throw new MaintenanceError(`${from} is the database itself`, 'refused');
  let backup: Database;
  try {
    backup = openExisting(source, true);
  } catch (err) {
    throw err instanceof MaintenanceError ? new MaintenanceError(err.message, 'refused', { cause: err }) : err;
  }
  try {
    let problems: string[];
    let schema: SchemaState;
    try {
      problems = integrityProblems(backup);
      schema = sqliteSchema(backup);
    } catch (err) {
      throw new MaintenanceError(`${from} is not a readable SQLite database: ${errorText(err)}`, 'refused', { cause: err });
    }
    if (problems.length) throw new MaintenanceError(`${from} fails the integrity check: ${problems.slice(0, 5).join('; ')}`, 'refused');
    if (schema.version === 0) throw new MaintenanceError(`${from} is not a Cinder database (no migration applied)`, 'refused');
    if (schema.unknown.length) {
      throw new MaintenanceError(`${from} was written by a newer Cinder (migrations ${schema.unknown.join(', ')} are unknown to this one): restore it with that version`, 'refused');
    }
    const lock = existsSync(path) ? lockExclusively(path) : undefined;
    if (!lock) mkdirSync(dirname(resolve(path)), { recursive: true });
    try {
      ensureFreeSpace(dirname(resolve(path)), usedBytes(backup));
    } catch (err) {
      lock?.close();
      throw err;
    }
    const restored = replaceLocked(path, lock, (tmp) => backup.query('VACUUM INTO ?').run(tmp));
    return { path: resolve(path), from: source, bytes: fileBytes(path), schema: restored, seconds: elapsed(started) };
  } finally {
    backup.close();
  }
}
