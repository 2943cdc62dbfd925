/**
 * `cinder backup` and `cinder restore` in-process on SQLite: a checked single-file copy that opens with every
 * resource; refusals (an existing target without --force, a missing directory, the database itself, a
 * backup that is damaged, not Cinder's or from a newer Cinder) exit 2 and write nothing; a backup, and what
 * compact and restore put in place, keep the database file's permissions; PostgreSQL is a
 * usage error naming pg_dump / pg_restore.
 */
import { Database } from 'bun:sqlite';
import { describe, expect, test } from 'bun:test';
import { chmodSync, closeSync, copyFileSync, existsSync, openSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createTestApp } from '../helpers/app.ts';
import { createCliEnv } from '../helpers/cli.ts';
import { fhirClient } from '../helpers/fhir.ts';
import { migrateUpTo } from '../helpers/stores.ts';
import { sqliteMigrations } from '../../src/store/sqlite/migrations.ts';

const latest = Math.max(...sqliteMigrations.map((m) => m.version));

/** A test app's database with three Patients, and a CLI on it; the app stays open (a server beside the commands). */
async function withDatabase() {
  const t = await createTestApp();
  const api = fhirClient(t, await t.token());
  for (const id of ['a', 'b', 'c']) await api.put200({ resourceType: 'Patient', id, name: [{ family: id }] });
  const cli = createCliEnv({ CINDER_DATABASE_URL: join(t.dir, 'cinder.db') });
  return {
    t, api, cli,
    close: async () => (await t.close().catch(() => undefined), cli.close()),
  };
}

/** The Patient ids the database at `path` holds in tenant t1 (read on a connection that changes nothing and leaves nothing beside it). */
async function patientIds(path: string): Promise<string[]> {
  const db = new Database(path, { readwrite: true, create: false });
  try {
    return db.query<{ id: string }, []>("SELECT id FROM resources WHERE tenant = 't1' AND type = 'Patient' AND deleted = 0 ORDER BY id").all().map((r) => r.id);
  } finally {
    db.close();
  }
}

describe('cinder backup (sqlite)', () => {
  test('writes a checked, self-contained copy holding every committed write, while the app keeps the database open', async () => {
    const { t, cli, close } = await withDatabase();
    try {
      const out = join(cli.dir, 'backup.db');
      const r = await cli.run(['backup', '--out', out, '--json']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const printed = JSON.parse(r.stdout);
      expect(printed).toMatchObject({ database: join(t.dir, 'cinder.db'), path: out, schema_version: latest, integrity: 'ok' });
      expect(printed.bytes).toBe(Bun.file(out).size);
      expect(typeof printed.seconds).toBe('number');
      // One file: rollback journal mode, nothing beside it, nothing left from the temporary copy.
      expect(readFileSync(out)[18]).toBe(1);
      expect(readdirSync(cli.dir).sort()).toEqual(['backup.db']);
      expect(await patientIds(out)).toEqual(['a', 'b', 'c']);
      // `cinder check` of the backup finds it healthy and leaves it as it is (rollback journal mode).
      const onBackup = createCliEnv({ CINDER_DATABASE_URL: out });
      try {
        expect((await onBackup.run(['check'])).code).toBe(0);
      } finally {
        onBackup.close();
      }
      expect(readFileSync(out)[18]).toBe(1);
      expect(readdirSync(cli.dir).sort()).toEqual(['backup.db']);
      const text = await cli.run(['backup', '--out', join(cli.dir, 'second.db')]);
      expect(text.code).toBe(0);
      expect(text.stdout).toContain(`path: ${join(cli.dir, 'second.db')}\n`);
      expect(text.stdout).toContain(`schema_version: ${latest}\n`);
    } finally {
      await close();
    }
  });

  test('a backup, and the database compact and restore put in place, keep the database file\'s permissions (0600 stays 0600)', async () => {
    const { t, cli, close } = await withDatabase();
    const mode = (path: string) => (statSync(path).mode & 0o777).toString(8);
    try {
      const database = join(t.dir, 'cinder.db');
      chmodSync(database, 0o600);
      const out = join(cli.dir, 'backup.db');
      expect((await cli.run(['backup', '--out', out])).code).toBe(0);
      expect(mode(out)).toBe('600');
      // A database no server holds, at 0600 (a second backup), compacted, then restored from a backup at 0640.
      const work = join(cli.dir, 'work.db');
      expect((await cli.run(['backup', '--out', work])).code).toBe(0);
      chmodSync(work, 0o600);
      chmodSync(out, 0o640);
      const offline = createCliEnv({ CINDER_DATABASE_URL: work });
      try {
        const compacted = await offline.run(['compact']);
        expect([compacted.code, compacted.stderr]).toEqual([0, '']);
        expect(mode(work)).toBe('600');
        expect((await offline.run(['restore', '--from', out])).code).toBe(0);
        expect(mode(work)).toBe('600');
      } finally {
        offline.close();
      }
    } finally {
      await close();
    }
  });

  test('refuses an existing target unless --force, and never a directory, a missing directory, the database itself or its -wal, -shm, -journal', async () => {
    const { t, cli, close } = await withDatabase();
    try {
      const out = join(cli.dir, 'backup.db');
      await Bun.write(out, 'an older backup');
      // What a backup killed mid-copy on this host leaves (its process gone), and one of a copy still running (this process).
      const host = hostname().replace(/[^A-Za-z0-9.-]/g, '_');
      const stale = join(cli.dir, `.backup.db.partial-${host}-999999999-0a1b2c3d`);
      const running = join(cli.dir, `.backup.db.partial-${host}-${process.pid}-4e5f6a7b`);
      // Another host's (a container beside this one on a shared volume: its pids are not this host's), and
      // those of a release that named no host: kept while recent, removed once unchanged for a day.
      const foreign = join(cli.dir, '.backup.db.partial-other-container-1-5a5a5a5a');
      const foreignOld = join(cli.dir, '.backup.db.partial-other-container-2-6b6b6b6b');
      const unnamed = join(cli.dir, '.backup.db.partial-999999999-7c7c7c7c');
      const unnamedOld = join(cli.dir, '.backup.db.partial-999999998-8d8d8d8d');
      for (const file of [stale, running, foreign, foreignOld, unnamed, unnamedOld]) await Bun.write(file, 'part of a copy');
      const dayAndMinuteAgo = (Date.now() - 24 * 60 * 60 * 1000 - 60_000) / 1000;
      for (const file of [foreignOld, unnamedOld]) utimesSync(file, dayAndMinuteAgo, dayAndMinuteAgo);
      const refused = await cli.run(['backup', '--out', out]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain(`cinder backup: ${out} exists: choose another name, or replace it with --force`);
      expect(readFileSync(out, 'utf8')).toBe('an older backup');
      expect(existsSync(stale)).toBe(true);
      const forced = await cli.run(['backup', '--out', out, '--force']);
      expect(forced.code).toBe(0);
      expect(await patientIds(out)).toEqual(['a', 'b', 'c']);
      expect(existsSync(stale)).toBe(false);
      expect(existsSync(running)).toBe(true);
      expect([foreign, foreignOld, unnamed, unnamedOld].map((file) => existsSync(file))).toEqual([true, false, true, false]);
      for (const file of [running, foreign, unnamed]) rmSync(file);

      const cases: [string[], string][] = [
        [['backup'], '--out <file> is required'],
        [['backup', '--out', cli.dir], `${cli.dir} is a directory: name the backup file`],
        [['backup', '--out', join(cli.dir, 'no', 'such', 'dir', 'b.db')], `cannot write in ${join(cli.dir, 'no', 'such', 'dir')}: ENOENT`],
        [['backup', '--out', join(out, 'b.db')], `cannot write in ${out}: `],
        [['backup', '--out', join(t.dir, 'cinder.db'), '--force'], `${join(t.dir, 'cinder.db')} is the database itself`],
        // The files SQLite keeps beside the database, which a running server has open.
        ...['-wal', '-shm', '-journal'].map((suffix): [string[], string] => [
          ['backup', '--out', join(t.dir, `cinder.db${suffix}`), '--force'], `${join(t.dir, `cinder.db${suffix}`)} is the database's ${suffix} file, not a backup's place`,
        ]),
      ];
      for (const [argv, message] of cases) {
        const r = await cli.run(argv);
        expect(r.code).toBe(2);
        expect(r.stderr).toContain(message);
        expect(r.stderr).toContain('Usage: cinder backup --out <file>');
      }
      expect(readdirSync(cli.dir).sort()).toEqual(['backup.db']);
      expect(await patientIds(join(t.dir, 'cinder.db'))).toEqual(['a', 'b', 'c']);
    } finally {
      await close();
    }
  });

  test('a database that does not exist is a usage error, and is not created', async () => {
    const cli = createCliEnv({}, { database: false });
    try {
      const r = await cli.run(['backup', '--out', join(cli.dir, 'b.db')]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`no SQLite database at ${join(cli.dir, 'data', 'cinder.db')}`);
      expect(existsSync(join(cli.dir, 'data', 'cinder.db'))).toBe(false);
      expect(existsSync(join(cli.dir, 'b.db'))).toBe(false);
    } finally {
      cli.close();
    }
  });
});

describe('cinder restore (sqlite)', () => {
  test('puts a backup in the place of the database: later writes are gone, the -wal and -shm too; refused while the database is open', async () => {
    const { t, api, cli, close } = await withDatabase();
    try {
      const out = join(cli.dir, 'backup.db');
      expect((await cli.run(['backup', '--out', out])).code).toBe(0);
      await api.put200({ resourceType: 'Patient', id: 'later', name: [{ family: 'later' }] });
      // The app (a server) has the database open: refused, nothing changed.
      const busy = await cli.run(['restore', '--from', out]);
      expect(busy.code).toBe(1);
      expect(busy.stderr).toContain(`cinder restore: the database ${join(t.dir, 'cinder.db')} is in use by another process (a running cinder serve?)`);
      expect(await patientIds(join(t.dir, 'cinder.db'))).toEqual(['a', 'b', 'c', 'later']);

      // A database no process has open: the latest state, as a copy, opened once with WAL left beside it.
      const live = join(cli.dir, 'live', 'cinder.db');
      const other = createCliEnv({ CINDER_DATABASE_URL: live });
      try {
        expect((await cli.run(['backup', '--out', join(cli.dir, 'latest.db')])).code).toBe(0);
        expect((await other.run(['restore', '--from', join(cli.dir, 'latest.db')])).code).toBe(0);
        expect(await patientIds(live)).toEqual(['a', 'b', 'c', 'later']);
        const r = await other.run(['restore', '--from', out, '--json']);
        expect(r.stderr).toBe('');
        expect(r.code).toBe(0);
        expect(JSON.parse(r.stdout)).toMatchObject({ database: live, from: out, schema_version: latest, pending_migrations: 0 });
        expect(readdirSync(join(cli.dir, 'live'))).toEqual(['cinder.db']);
        expect(await patientIds(live)).toEqual(['a', 'b', 'c']);
        // The backup is unchanged, and the restored database checks.
        expect(await patientIds(out)).toEqual(['a', 'b', 'c']);
        expect((await other.run(['check'])).code).toBe(0);
      } finally {
        other.close();
      }
    } finally {
      await close();
    }
  });

  test('refuses a damaged backup, a file that is not Cinder\'s and one from a newer Cinder, leaving the database as it was', async () => {
    const { t, cli, close } = await withDatabase();
    try {
      const good = join(cli.dir, 'good.db');
      expect((await cli.run(['backup', '--out', good])).code).toBe(0);
      const newer = join(cli.dir, 'newer.db');
      copyFileSync(good, newer);
      const n = new Database(newer);
      n.exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (${latest + 1}, 'from_the_future', 0)`);
      n.close();
      const damaged = join(cli.dir, 'damaged.db');
      copyFileSync(good, damaged);
      const d = new Database(damaged, { readonly: true });
      const root = d.query<{ rootpage: number }, []>("SELECT rootpage FROM sqlite_master WHERE name = 'resources'").get()!.rootpage;
      const pageSize = d.query<{ page_size: number }, []>('PRAGMA page_size').get()!.page_size;
      d.close();
      const fd = openSync(damaged, 'r+');
      // The page's header and cell pointers.
      writeSync(fd, Buffer.alloc(300, 0x5a), 0, 300, (root - 1) * pageSize);
      closeSync(fd);
      const foreign = join(cli.dir, 'foreign.db');
      const f = new Database(foreign);
      f.exec('CREATE TABLE notes (text TEXT)');
      f.close();

      const cases: [string, string][] = [
        [newer, `${newer} was written by a newer Cinder (migrations ${latest + 1}_from_the_future are unknown to this one)`],
        [damaged, `${damaged} is not a readable SQLite database: database disk image is malformed`],
        [foreign, `${foreign} is not a Cinder database (no migration applied)`],
        [join(cli.dir, 'missing.db'), `no SQLite database at ${join(cli.dir, 'missing.db')}`],
        [join(t.dir, 'cinder.db'), `${join(t.dir, 'cinder.db')} is the database itself`],
      ];
      const before = readFileSync(join(t.dir, 'cinder.db'));
      for (const [from, message] of cases) {
        const r = await cli.run(["restore", "--from", from]);
        expect(r.code).toBe(2);
        expect(r.stderr).toContain(message);
      }
      expect(readFileSync(join(t.dir, 'cinder.db')).equals(before)).toBe(true);
      expect((await cli.run(['restore'])).stderr).toContain('--from <file> is required');
    } finally {
      await close();
    }
  });
});

describe('cinder restore of an older backup (sqlite)', () => {
  test('a backup from an older release is restored; the migrations it lacks are left to migrate, which check reports', async () => {
    const cli = createCliEnv();
    try {
      const old = join(cli.dir, 'old.db');
      await migrateUpTo('sqlite', old, latest - 1);
      const r = await cli.run(['restore', '--from', old, '--json']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ database: join(cli.dir, 'data', 'cinder.db'), schema_version: latest - 1, pending_migrations: 1 });
      const check = await cli.run(['check']);
      expect(check.code).toBe(3);
      expect(check.stdout).toContain(`problem: migration ${latest}_`);
      expect((await cli.run(['migrate'])).code).toBe(0);
      expect((await cli.run(['check'])).code).toBe(0);
    } finally {
      cli.close();
    }
  });
});

describe('on PostgreSQL', () => {
  test('backup, restore and compact are usage errors naming what to use instead', async () => {
    const cli = createCliEnv({ CINDER_DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/unused' });
    try {
      const cases: [string[], string][] = [
        [['backup', '--out', join(cli.dir, 'b.db')], 'the database is PostgreSQL: back it up with pg_dump'],
        [['restore', '--from', join(cli.dir, 'b.db')], 'the database is PostgreSQL: restore a pg_dump archive with pg_restore'],
        [['compact'], 'the database is PostgreSQL: autovacuum reuses freed space; VACUUM (FULL)'],
      ];
      for (const [argv, message] of cases) {
        const r = await cli.run(argv);
        expect(r.code).toBe(2);
        expect(r.stderr).toContain(`cinder ${argv[0]}: ${message}`);
        expect(r.stdout).toBe('');
      }
      expect(readdirSync(cli.dir)).toEqual([]);
    } finally {
      cli.close();
    }
  });
});

describe('cinder backup --help', () => {
  test('names every field backup prints', async () => {
    const cli = createCliEnv();
    try {
      const help = await cli.run(['backup', '--help']);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain('Prints the database, the path, bytes, schema (migration) version, integrity and seconds');
    } finally {
      cli.close();
    }
  });
});
