/**
 * What the maintenance commands (`cinder backup`, `check`, `compact`, `restore`) do to a SQLite file
 * beside the store: open it without changing it, take it for this process alone, check it, and put a
 * new file in its place atomically.
 */
import { Database } from 'bun:sqlite';
import { chmodSync, chownSync, closeSync, existsSync, fsyncSync, openSync, readdirSync, renameSync, rmSync, statfsSync, statSync } from 'node:fs';
import { hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { schemaState, type SchemaState } from '../schema-state.ts';
import { appliedMigrations, DEFAULT_BUSY_TIMEOUT_MS, fileIdentity, MAX_REPLACED } from './db.ts';
import { sqliteMigrations } from './migrations.ts';

/**
 * Why a maintenance step did not happen: `refused` (the operator's input: a missing database, an existing
 * target, a backup that is not fit to restore), `in-use` (another process has the database open),
 * `failed` (the disk, the file system, a copy that does not check). Nothing is left half-written.
 */
export class MaintenanceError extends Error {
  override name = 'MaintenanceError';
  constructor(message: string, readonly reason: 'refused' | 'in-use' | 'failed', options?: ErrorOptions) {
    super(message, options);
  }
}

/** The message of a SQLite or file system error, with its code. */
export function errorText(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  return typeof code === 'string' && !message.includes(code) ? `${message} (${code})` : message;
}

/** Opens the existing SQLite file `path` (never creating one), readonly or not, with Cinder's busy timeout. */
export function openExisting(path: string, readonly = false): Database {
  if (!existsSync(path)) throw new MaintenanceError(`no SQLite database at ${path}`, 'refused');
  if (statSync(path).isDirectory()) throw new MaintenanceError(`${path} is a directory, not a SQLite database`, 'refused');
  for (let replaced = 0; ; replaced++) {
    const before = fileIdentity(path);
    let db: Database;
    try {
      db = readonly ? new Database(path, { readonly: true, strict: true }) : new Database(path, { readwrite: true, create: false, strict: true });
      db.exec(`PRAGMA busy_timeout = ${DEFAULT_BUSY_TIMEOUT_MS}`);
    } catch (err) {
      throw new MaintenanceError(`cannot open ${path}: ${errorText(err)}`, 'failed', { cause: err });
    }
    // A first read, after the lock of a compact or restore replacing the file: a connection stays on the file it
    // opened, so one opened before the replacement opens again (as openDatabase does). A file that cannot be
    // read is left to the caller's checks.
    try {
      db.query('SELECT count(*) FROM sqlite_master').get();
    } catch {
      return db;
    }
    if (fileIdentity(path) === before || replaced + 1 >= MAX_REPLACED) return db;
    db.close();
  }
}

/** True for SQLITE_BUSY and SQLITE_LOCKED (and their extended codes). */
function isLocked(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(BUSY|LOCKED)(_|$)/.test(code);
}

/**
 * Opens `path` and takes it for this connection alone until it closes (`locking_mode = EXCLUSIVE`, then
 * an exclusive transaction without waiting): refused at once while any other process has the database
 * open, since every connection of a process in WAL mode (`cinder serve`, even idle) holds a shared
 * lock on the file. Whoever opens it afterwards waits for this connection to close.
 */
export function lockExclusively(path: string): Database {
  const db = openExisting(path);
  try {
    db.exec('PRAGMA busy_timeout = 0');
    db.exec('PRAGMA locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    db.exec(`PRAGMA busy_timeout = ${DEFAULT_BUSY_TIMEOUT_MS}`);
    return db;
  } catch (err) {
    db.close();
    if (isLocked(err)) {
      throw new MaintenanceError(`the database ${path} is in use by another process (a running cinder serve?): stop every Cinder process using it, then try again`, 'in-use', { cause: err });
    }
    throw new MaintenanceError(
      `cannot take ${path} for this process alone: ${errorText(err)}; if the file is damaged, stop every Cinder process, move it (and its -wal and -shm) aside and try again`,
      'failed', { cause: err },
    );
  }
}

/** What `PRAGMA integrity_check` finds wrong in `db` (up to 100 messages); none for a sound file. */
export function integrityProblems(db: Database): string[] {
  const rows = db.query<{ integrity_check: string }, []>('PRAGMA integrity_check').all();
  return rows.map((r) => r.integrity_check).filter((m) => m !== 'ok');
}

/** Rows whose declared foreign key (REFERENCES) names a missing row, as `PRAGMA foreign_key_check` finds them. */
export function foreignKeyProblems(db: Database): string[] {
  const rows = db.query<{ table: string; rowid: number | null; parent: string; fkid: number }, []>('PRAGMA foreign_key_check').all();
  return rows.map((r) => `${r.table} row ${r.rowid ?? '(without rowid)'} refers to a missing row of ${r.parent} (foreign key ${r.fkid})`);
}

/** The migrations `db` has applied against this release's. */
export function sqliteSchema(db: Database): SchemaState {
  return schemaState(appliedMigrations(db), sqliteMigrations);
}

/** Bytes of the database file and of its WAL. */
export function fileBytes(path: string): number {
  const size = (p: string) => (existsSync(p) ? statSync(p).size : 0);
  return size(path) + size(`${path}-wal`);
}

/** Bytes a VACUUM'd copy of `db` takes: its pages in use. */
export function usedBytes(db: Database): number {
  const one = <T>(pragma: string) => db.query<Record<string, T>, []>(`PRAGMA ${pragma}`).get()!;
  const pages = Number(one<number>('page_count').page_count) - Number(one<number>('freelist_count').freelist_count);
  return pages * Number(one<number>('page_size').page_size);
}

/** Refuses to start a copy of `bytes` into `dir` when the file system has less free space than that. */
export function ensureFreeSpace(dir: string, bytes: number): void {
  let free: number;
  try {
    const fs = statfsSync(dir);
    free = Number(fs.bavail) * Number(fs.bsize);
  } catch {
    return; // No figure: the copy itself fails cleanly if the space runs out.
  }
  if (free < bytes) {
    throw new MaintenanceError(`not enough free disk space in ${dir}: the copy needs about ${formatBytes(bytes)}, ${formatBytes(free)} are free`, 'failed');
  }
}

/** `bytes` in KiB, MiB or GiB with one decimal. */
export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let n = bytes;
  let unit = 0;
  while (n >= 1024 && unit < units.length - 1) (n /= 1024), unit++;
  return unit === 0 ? `${bytes} bytes` : `${n.toFixed(1)} ${units[unit]}`;
}

/** fsync of a file or a directory (so that a rename in it is durable). */
export function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Removes `path` and the files SQLite keeps beside it (-wal, -shm, -journal), where they exist. */
export function removeWithCompanions(path: string, companionsOnly = false): void {
  for (const p of [...(companionsOnly ? [] : [path]), `${path}-wal`, `${path}-shm`, `${path}-journal`]) rmSync(p, { force: true });
}

/** True while a process with this id exists (one of another user's counts). */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A copy of another host's left this long unchanged is taken for abandoned (its process cannot be asked). */
export const FOREIGN_PARTIAL_AGE_MS = 24 * 60 * 60 * 1000;

/**
 * This host's name as temporary file names carry it: a process id is only this host's (a container's
 * pid namespace is its own), so a copy's file names the host whose process writes it.
 */
function hostTag(): string {
  return hostname().replace(/[^A-Za-z0-9.-]/g, '_').slice(0, 64) || 'host';
}

/** The temporary file a copy to `target` writes: `.<name>.partial-<host>-<pid>-<random>`. */
function partialName(target: string): string {
  return join(dirname(target), `.${basename(target)}.partial-${hostTag()}-${process.pid}-${crypto.randomUUID().slice(0, 8)}`);
}

/**
 * Removes the temporary files of earlier copies to `target` that were abandoned (a backup killed
 * mid-copy runs no clean-up of its own), and what SQLite kept beside them: this host's whose process is
 * gone; another host's (a container beside this one on a shared volume, whose process ids mean nothing
 * here), and those of releases that named no host, once unchanged for FOREIGN_PARTIAL_AGE_MS.
 */
function removeStalePartials(target: string): void {
  const prefix = `.${basename(target)}.partial-`;
  const dir = dirname(target);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  const host = hostTag();
  for (const name of names) {
    const m = /^(?:(.+)-)?(\d+)-[0-9a-f]{8}$/.exec(name.startsWith(prefix) ? name.slice(prefix.length) : '');
    if (!m) continue;
    const path = join(dir, name);
    const abandoned = m[1] === host ? !processAlive(Number(m[2])) : unchangedFor(path, FOREIGN_PARTIAL_AGE_MS);
    if (abandoned) removeWithCompanions(path);
  }
}

/** Whether `path` was last modified at least `ms` ago (false when it cannot be read). */
function unchangedFor(path: string, ms: number): boolean {
  try {
    return Date.now() - statSync(path).mtimeMs >= ms;
  } catch {
    return false;
  }
}

/**
 * Gives `file` the permissions of `like` (and, run as root, its owner): a copy of a database made by
 * VACUUM INTO has the mode the umask leaves (0644), which would open a database kept at 0600 (password
 * hashes, client secrets, records) to every user, and a compact run as root would leave the database
 * to root, which a server running as its owner could no longer write.
 */
function permissionsLike(file: string, like: string): void {
  const s = statSync(like);
  chmodSync(file, s.mode & 0o7777);
  if (process.getuid?.() === 0 && (s.uid !== 0 || s.gid !== 0)) chownSync(file, s.uid, s.gid);
}

/**
 * Writes a database to `target` through a temporary file beside it: `produce` writes the temporary file
 * (`VACUUM INTO`), given the permissions of `like` (the database), `verify` checks it (throwing when it is
 * unfit), then it is synced to disk and renamed over `target` in one step, and the directory synced.
 * Whatever fails, the temporary file is removed and `target` is as it was: never a half-written file under its name.
 */
export function replaceAtomically<T>(target: string, produce: (tmp: string) => void, verify: (tmp: string) => T, like?: string): T {
  removeStalePartials(target);
  const tmp = partialName(target);
  try {
    try {
      produce(tmp);
    } catch (err) {
      throw new MaintenanceError(`cannot write ${tmp}: ${errorText(err)}`, 'failed', { cause: err });
    }
    if (like !== undefined) permissionsLike(tmp, like);
    const result = verify(tmp);
    fsyncPath(tmp);
    renameSync(tmp, target);
    fsyncPath(dirname(target));
    return result;
  } catch (err) {
    removeWithCompanions(tmp);
    if (err instanceof MaintenanceError) throw err;
    throw new MaintenanceError(`cannot write ${target}: ${errorText(err)}`, 'failed', { cause: err });
  }
}

/**
 * Checks a copy made by VACUUM INTO: `PRAGMA integrity_check` on it and the migrations it holds; throws
 * when it does not check. `wal`: switch it to WAL mode first, as Cinder keeps its database.
 */
export function verifyCopy(tmp: string, wal = false): SchemaState {
  const copy = new Database(tmp, { readwrite: true, create: false, strict: true });
  try {
    if (wal) copy.exec('PRAGMA journal_mode = WAL');
    const problems = integrityProblems(copy);
    if (problems.length) throw new MaintenanceError(`the copy fails the integrity check: ${problems.slice(0, 5).join('; ')}`, 'failed');
    return sqliteSchema(copy);
  } finally {
    copy.close();
  }
}
