/**
 * A SQLite file replaced (renamed over) while a process opening it waits for the lock of the one replacing
 * it, as `cinder compact` and `cinder restore` do under lockExclusively: the opener's connection must read
 * and write the file now at the path, not the replaced one (whose writes would be lost with its inode); a
 * backup that opened it meanwhile copies the new file, not the one the restore replaced.
 */
import { Database } from 'bun:sqlite';
import { afterAll, expect, test } from 'bun:test';
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../../src/store/sqlite/db.ts';
import { lockExclusively, removeWithCompanions, replaceAtomically, verifyCopy } from '../../src/store/sqlite/maintenance.ts';

const dir = mkdtempSync(join(tmpdir(), 'cinder-replaced-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Whether process `pid` holds `path` open (Linux: its /proc fd links). */
function holdsOpen(pid: number, path: string): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === path;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

test.skipIf(process.platform !== 'linux')('a process that opened the database before it was replaced writes to the new file', async () => {
  const path = join(dir, 'cinder.db');
  const seed = openDatabase(path);
  // A table dropped before the copy: the copy that replaces the file lays out its pages anew (t's root page moves).
  seed.exec('CREATE TABLE filler (v TEXT)');
  seed.exec("INSERT INTO filler (v) SELECT zeroblob(4000) FROM (WITH RECURSIVE n(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM n WHERE k < 200) SELECT k FROM n)");
  seed.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  seed.exec("INSERT INTO t (v) VALUES ('before')");
  seed.exec('DROP TABLE filler');
  seed.close();

  const lock = lockExclusively(path);
  const child = Bun.spawn([process.execPath, new URL('../fixtures/sqlite-write-once.ts', import.meta.url).pathname, path], { stdout: 'pipe', stderr: 'pipe' });
  try {
    // The child has the old file open and waits for the lock.
    while (!holdsOpen(child.pid, path) && child.exitCode === null) await Bun.sleep(10);
    // What compact and restore do: a new file renamed over the old one while the lock is held.
    lock.query('PRAGMA wal_checkpoint(TRUNCATE)').get();
    replaceAtomically(path, (tmp) => lock.query('VACUUM INTO ?').run(tmp), (tmp) => verifyCopy(tmp, true));
    removeWithCompanions(path, true);
  } finally {
    lock.close();
  }
  expect(await new Response(child.stdout).text()).toBe('ok\n');
  expect(await child.exited).toBe(0);

  const db = new Database(path, { readwrite: true, create: false });
  try {
    expect(db.query<{ integrity_check: string }, []>('PRAGMA integrity_check').all().map((r) => r.integrity_check)).toEqual(['ok']);
    expect(db.query<{ v: string }, []>('SELECT v FROM t ORDER BY id').all().map((r) => r.v)).toEqual(['before', 'written while replaced']);
  } finally {
    db.close();
  }
}, 30_000);

test.skipIf(process.platform !== 'linux')('a backup that opened the database before it was replaced copies the new file', async () => {
  const path = join(dir, 'backed-up.db');
  const seed = openDatabase(path);
  seed.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  seed.exec("INSERT INTO t (v) VALUES ('before')");
  seed.close();
  const out = join(dir, 'backup-of-replaced.db');

  const lock = lockExclusively(path);
  const child = Bun.spawn([process.execPath, new URL('../fixtures/sqlite-backup-once.ts', import.meta.url).pathname, path, out], { stdout: 'pipe', stderr: 'pipe' });
  try {
    while (!holdsOpen(child.pid, path) && child.exitCode === null) await Bun.sleep(10);
    // A restore: the new file holds what the old did not.
    lock.query('PRAGMA wal_checkpoint(TRUNCATE)').get();
    replaceAtomically(path, (tmp) => {
      lock.query('VACUUM INTO ?').run(tmp);
      const copy = new Database(tmp);
      copy.exec("INSERT INTO t (v) VALUES ('restored')");
      copy.close();
    }, (tmp) => verifyCopy(tmp, true));
    removeWithCompanions(path, true);
  } finally {
    lock.close();
  }
  expect(await new Response(child.stdout).text()).toBe('ok\n');
  expect(await child.exited).toBe(0);

  const db = new Database(out, { readwrite: true, create: false });
  try {
    expect(db.query<{ v: string }, []>('SELECT v FROM t ORDER BY id').all().map((r) => r.v)).toEqual(['before', 'restored']);
  } finally {
    db.close();
  }
}, 30_000);
